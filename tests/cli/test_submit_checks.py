"""What a worker would refuse is refused at submit: one line, exit 2, nothing stored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main
from app.engine.generation.request_checks import check_runnable
from app.engine.generation.tiny_model import write_tiny_lora
from app.engine.params import GenerationParams
from app.engine.settings import load_settings
from app.errors import BadInput


def refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(list(argv)) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1, err
    return err


def nothing_stored(capsys: pytest.CaptureFixture[str]) -> bool:
    assert main(["jobs", "--all", "--json"]) == 0
    return json.loads(capsys.readouterr().out) == []


def test_an_unknown_lora_is_named_with_the_folder_searched(
    capsys: pytest.CaptureFixture[str], easel_home: Path
) -> None:
    err = refused(capsys, "submit", "a red circle <lora:inky:0.8>")
    assert "LoRA 'inky' was not found" in err and str(easel_home / "models" / "lora") in err
    assert nothing_stored(capsys)


def test_a_size_far_beyond_the_models_own_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(capsys, "submit", "a red circle", "--size", "512x512")
    assert "512x512 is too large for a model trained at 64x64" in err
    assert nothing_stored(capsys)


def test_a_known_lora_passes_the_check(easel_home: Path) -> None:
    write_tiny_lora(easel_home / "models" / "lora" / "inky.safetensors")
    params = GenerationParams(prompt="a red circle <lora:inky:0.5>").validated()
    info = check_runnable(params, load_settings().model_search_path())
    assert info.name == params.model
    with pytest.raises(BadInput, match="too large"):
        check_runnable(
            GenerationParams(prompt="x", width=1024, height=1024).validated(),
            load_settings().model_search_path(),
        )

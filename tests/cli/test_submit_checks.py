"""What a worker would refuse is refused at submit: one line, exit 2, nothing stored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from app.cli import main
from app.engine import paths
from app.engine.generation.request_checks import check_runnable
from app.engine.jobs.params import DEFAULT_MODEL, GenerationParams
from app.engine.settings import load_settings
from app.errors import BadInput
from app.testing.tiny.unet import write_tiny_lora


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


def stored_ids(capsys: pytest.CaptureFixture[str]) -> list[int]:
    assert main(["jobs", "--all", "--json"]) == 0
    return sorted(job["id"] for job in json.loads(capsys.readouterr().out))


def submitted(capsys: pytest.CaptureFixture[str], *argv: str) -> int:
    assert main(list(argv)) == 0
    return int(capsys.readouterr().out.strip())


def test_an_upscale_beyond_the_models_limit_is_refused_at_submit(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parent = submitted(capsys, "submit", "a red circle", "--size", "256x256")  # the most: 4x
    err = refused(capsys, "upscale", str(parent))
    assert err == (
        "error: 512x512 is too large for a model trained at 64x64 (at most 256 pixels per side)\n"
    )
    assert stored_ids(capsys) == [parent]  # nothing queued
    child = submitted(capsys, "upscale", str(parent), "--scale", "1")  # within the limit: queued
    assert stored_ids(capsys) == [parent, child]


def test_variations_of_a_job_whose_model_is_gone_are_refused_at_submit(
    capsys: pytest.CaptureFixture[str], easel_home: Path
) -> None:
    sketchy = easel_home / "models" / "sketchy"  # the bundled model under another name
    sketchy.parent.mkdir(parents=True)
    sketchy.symlink_to(paths.bundled_models_dir() / DEFAULT_MODEL, target_is_directory=True)
    parent = submitted(capsys, "submit", "a red circle", "--model", "sketchy")
    sketchy.unlink()  # removed (or the models folder changed) since
    err = refused(capsys, "vary", str(parent), "--count", "3")
    assert err.startswith("error: model 'sketchy' was not found; looked in: ")
    assert stored_ids(capsys) == [parent]


@pytest.mark.parametrize("command", ["submit", "generate"])
def test_an_init_image_too_large_for_the_model_is_refused_at_submit(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str
) -> None:
    # The job takes the init image's size, which was never checked against the model.
    Image.new("RGB", (512, 512), (10, 200, 30)).save(tmp_path / "big.png")
    err = refused(capsys, command, "a red circle", "--init-image", str(tmp_path / "big.png"))
    assert "512x512 is too large for a model trained at 64x64" in err
    assert nothing_stored(capsys)

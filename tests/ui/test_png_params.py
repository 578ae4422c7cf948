"""Reading generation parameters from PNG text chunks (Qt-free)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image
from PIL.PngImagePlugin import PngInfo

from app.engine.jobs.params import GenerationParams
from app.engine.outputs.image import a1111_parameters
from app.ui.presenters.png_params import NoParameters, parse_a1111, parse_easel, read_png_params

# A hang must fail fast, not stall the whole suite (the suite-wide limit is 10 min).
pytestmark = pytest.mark.timeout(60)

PARAMS = GenerationParams(
    prompt="a lighthouse at dusk, oil painting", negative_prompt="blurry, text",
    model="easel-tiny", scheduler="DDIM", steps=28, cfg=6.5, width=512, height=768, seed=1234,
)  # fmt: skip


def save_png(path: Path, **chunks: str) -> Path:
    info = PngInfo()
    for key, value in chunks.items():
        info.add_text(key, value)
    Image.new("RGB", (8, 8)).save(path, pnginfo=info)
    return path


def test_easel_chunk_round_trips(tmp_path: Path) -> None:
    png = save_png(tmp_path / "a.png", easel=json.dumps(PARAMS.to_dict()))
    assert read_png_params(png).params == PARAMS


def test_easel_chunk_wins_over_a1111(tmp_path: Path) -> None:
    png = save_png(
        tmp_path / "a.png", parameters="other\nSteps: 3", easel=json.dumps(PARAMS.to_dict())
    )
    assert read_png_params(png).params == PARAMS


def test_a1111_text_as_easel_writes_it_round_trips() -> None:
    assert parse_a1111(a1111_parameters(PARAMS)).params == PARAMS


def test_a1111_text_from_another_tool() -> None:
    text = (
        "masterpiece, a red fox\nin the snow\nNegative prompt: lowres,\nbad hands\n"
        "Steps: 20, Sampler: DPM++ 2M Karras, CFG scale: 7, Seed: 1, Size: 512x512, "
        'Model hash: abc123, Model: dreamshaper_8, Lora hashes: "a: 1, b: 2"'
    )
    parsed = parse_a1111(text)
    p = parsed.params
    assert p.prompt == "masterpiece, a red fox\nin the snow"
    assert p.negative_prompt == "lowres,\nbad hands"
    assert (p.steps, p.cfg, p.seed, p.width, p.height) == (20, 7.0, 1, 512, 512)
    assert p.scheduler == "DPM++ 2M Karras"  # a scheduler of its own now
    assert p.model == "dreamshaper_8"
    assert parsed.warnings == []


def test_unknown_sampler_keeps_default_and_says_so() -> None:
    parsed = parse_a1111("a cat\nSteps: 20, Sampler: DPM fast, CFG scale: 7, Seed: 1, Size: 64x64")
    assert parsed.params.scheduler == GenerationParams.scheduler
    assert any("DPM fast" in w for w in parsed.warnings)


def test_prompt_only_a1111_text() -> None:
    assert parse_a1111("just a prompt").params.prompt == "just a prompt"


def test_unknown_easel_fields_are_reported_not_fatal() -> None:
    parsed = parse_easel(json.dumps({**PARAMS.to_dict(), "lora": "x"}))
    assert parsed.params == PARAMS
    assert "lora" in parsed.warnings[0]


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '{"steps": 3}'])
def test_broken_easel_chunk_is_a_readable_error(text: str) -> None:
    with pytest.raises(NoParameters):
        parse_easel(text)


def test_png_without_parameters(tmp_path: Path) -> None:
    with pytest.raises(NoParameters, match="no generation parameters"):
        read_png_params(save_png(tmp_path / "plain.png"))


def test_not_an_image(tmp_path: Path) -> None:
    path = tmp_path / "fake.png"
    path.write_text("hello")
    with pytest.raises(NoParameters, match="not a readable image"):
        read_png_params(path)

"""Flux and SD 3.x diffusers folders are told apart from their config files alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.engine.generation.files.architecture import Architecture, Prediction, detect_folder

_PARTS = ["transformer", "vae", "scheduler", "text_encoder", "text_encoder_2", "tokenizer"]


def _folder(tmp_path: Path, pipeline: str, parts: list[str], transformer: dict) -> Path:
    folder = tmp_path / pipeline
    folder.mkdir()
    index = {"_class_name": pipeline, **{part: ["diffusers", "X"] for part in parts}}
    (folder / "model_index.json").write_text(json.dumps(index))
    for part, config in (("transformer", transformer), ("vae", {"block_out_channels": [1] * 4})):
        (folder / part).mkdir()
        (folder / part / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize(
    ("pipeline", "transformer", "architecture", "native"),
    [
        ("FluxPipeline", {"in_channels": 64}, Architecture.FLUX1, 1024),
        ("StableDiffusion3Pipeline", {"sample_size": 128}, Architecture.SD3, 1024),
        ("StableDiffusion3Pipeline", {"sample_size": 4}, Architecture.SD3, 32),
    ],
)
def test_a_transformer_folder_is_its_family_with_flow_prediction(
    tmp_path: Path, pipeline: str, transformer: dict, architecture: Architecture, native: int
) -> None:
    detected = detect_folder(_folder(tmp_path, pipeline, _PARTS, transformer))
    assert detected.architecture is architecture
    assert detected.prediction is Prediction.FLOW
    assert detected.native_size == native


def test_a_flux_folder_without_t5_names_the_missing_part(tmp_path: Path) -> None:
    parts = [part for part in _PARTS if part != "text_encoder_2"]
    detected = detect_folder(_folder(tmp_path, "FluxPipeline", parts, {}))
    assert not detected.supported
    assert detected.unsupported_reason == "the Flux.1 pipeline has no text_encoder_2"


def test_the_tiny_t5_tokenizer_round_trips_through_save_pretrained(tmp_path: Path) -> None:
    from transformers import T5Tokenizer

    from app.testing.tiny.unet import tiny_t5_tokenizer

    tiny_t5_tokenizer().save_pretrained(tmp_path)
    reloaded = T5Tokenizer.from_pretrained(tmp_path)
    ids = reloaded("a cat", padding="max_length", max_length=8).input_ids
    assert ids[-4:] == [1, 0, 0, 0]  # "</s>" appended, then padding, as the real T5 does
    assert reloaded.decode(ids, skip_special_tokens=True) == "a cat"


def test_an_unknown_pipeline_is_refused_naming_every_family_easel_runs(tmp_path: Path) -> None:
    """The sentence must not fall behind the families: every label is in it, none is
    hard-coded, so a family added to `Architecture` is named without touching messages."""
    detected = detect_folder(_folder(tmp_path, "SanaPipeline", _PARTS, {}))
    assert detected.unsupported_reason.startswith("SanaPipeline is not a text-to-image")
    for architecture in Architecture:
        assert architecture.label in detected.unsupported_reason

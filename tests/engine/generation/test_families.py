"""Each pipeline gets its model family, and a checkpoint carries what that family says."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.generation.errors import UnsupportedModel
from app.engine.generation.families import family_of
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.loop.checkpoint import load_checkpoint
from app.engine.generation.outcome import OutcomeKind
from app.testing.tiny.unet import UNET_ARCHITECTURES
from tests.engine.generation.tiny_architectures import (
    model_info,
    params_for,
    pause_at,
    runner_for,
    tiny_folders,
)

__all__ = ["tiny_folders"]  # the fixture, imported for pytest

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

FAMILIES = {Architecture.SD1: "sd", Architecture.SD2: "sd", Architecture.SDXL: "sdxl"}
SDXL_TENSORS = {"prompt_embeds", "pooled_embeds", "add_time_ids"}


@pytest.mark.parametrize("arch", UNET_ARCHITECTURES, ids=lambda a: a.value)
def test_a_checkpoint_carries_exactly_its_familys_tensors(
    tiny_folders: dict[Architecture, Path], tmp_path: Path, arch: Architecture
) -> None:
    runner = runner_for(model_info(tiny_folders[arch]))
    family = family_of(runner.load("m").pipe)
    assert family.name == FAMILIES[arch]
    ckpt = tmp_path / "job.ckpt"
    outcome = runner.run(
        params_for("m"), output_path=tmp_path / "job.png", checkpoint_path=ckpt, on_step=pause_at(1)
    )
    assert outcome.kind is OutcomeKind.PAUSED
    saved = load_checkpoint(ckpt).checkpoint
    assert saved.family == family.name
    assert set(saved.conditioning) == set(family.checkpoint_tensors)
    assert (set(saved.conditioning) == SDXL_TENSORS) == (arch is Architecture.SDXL)


def test_a_pipeline_of_no_family_is_an_unsupported_model() -> None:
    class FluxLikePipeline:
        pass

    with pytest.raises(UnsupportedModel, match="no model family drives a FluxLikePipeline"):
        family_of(FluxLikePipeline())

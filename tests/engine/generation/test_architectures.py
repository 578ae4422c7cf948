"""SD 1.x, SD 2.x v-prediction and SDXL through Easel's own loop: equal to the stock
pipelines, exact pause/resume (also in a fresh process), detection of each architecture."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.engine.generation.files.architecture import Architecture, Prediction, size_presets
from app.engine.generation.files.sources import ModelInfo
from app.engine.generation.loop.checkpoint import load_checkpoint
from app.engine.generation.outcome import OutcomeKind
from app.engine.generation.runner import Runner
from app.engine.jobs.params import SCHEDULERS, GenerationParams
from tests.engine.generation.tiny_architectures import (
    PAUSE_AT,
    generate,
    go_on,
    max_diff,
    model_info,
    params_for,
    pause_at,
    pixels,
    runner_for,
    stock_image,
    tiny_folders,
)

__all__ = ["tiny_folders"]  # the fixture, imported for pytest

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

ARCHITECTURES = [Architecture.SD1, Architecture.SD2, Architecture.SDXL]


@pytest.fixture(scope="module")
def runners(tiny_folders: dict[Architecture, Path]) -> dict[Architecture, Runner]:
    return {arch: runner_for(model_info(path)) for arch, path in tiny_folders.items()}


def test_folders_are_detected(tiny_folders: dict[Architecture, Path]) -> None:
    sd1, sd2, sdxl = (model_info(tiny_folders[a]) for a in ARCHITECTURES)
    assert (sd1.architecture, sd1.prediction) == (Architecture.SD1, Prediction.EPSILON)
    assert (sd2.architecture, sd2.prediction) == (Architecture.SD2, Prediction.V)
    assert (sdxl.architecture, sdxl.prediction) == (Architecture.SDXL, Prediction.EPSILON)
    assert {m.native_size for m in (sd1, sd2, sdxl)} == {64}  # 8 latent pixels x VAE factor 8
    assert sd2.label == "SD 2.x v-prediction, 64 px" and sdxl.label == "SDXL, 64 px"


def test_sdxl_sizes_are_the_usual_buckets() -> None:
    presets = size_presets(1024)
    assert presets[0] == (1024, 1024)
    assert {(1216, 832), (832, 1216), (1344, 768), (1536, 640)} <= set(presets)
    assert size_presets(512)[0] == (512, 512)
    assert all(w % 64 == 0 and h % 64 == 0 for w, h in size_presets(768))


@pytest.mark.parametrize("scheduler", SCHEDULERS)
@pytest.mark.parametrize("arch", [Architecture.SD2, Architecture.SDXL], ids=lambda a: a.value)
def test_our_loop_equals_the_stock_pipeline(
    runners: dict[Architecture, Runner], tmp_path: Path, arch: Architecture, scheduler: str
) -> None:
    runner = runners[arch]
    params = params_for("m", scheduler)
    ours = generate(runner, params, tmp_path, "ours")
    stock = stock_image(runner.load("m").pipe, params)
    assert max_diff(ours, stock) == 0


@pytest.mark.parametrize("arch", [Architecture.SD2, Architecture.SDXL], ids=lambda a: a.value)
def test_without_cfg_and_other_sizes_equal_the_stock_pipeline(
    runners: dict[Architecture, Runner], tmp_path: Path, arch: Architecture
) -> None:
    runner = runners[arch]
    params = params_for("m", "DPM++ 2M", cfg=1.0, width=48, height=80, negative_prompt="")
    ours = generate(runner, params, tmp_path, "ours")
    assert ours.shape == (80, 48, 3)
    assert max_diff(ours, stock_image(runner.load("m").pipe, params)) == 0


@pytest.mark.parametrize("scheduler", SCHEDULERS)
@pytest.mark.parametrize("arch", [Architecture.SD2, Architecture.SDXL], ids=lambda a: a.value)
def test_pause_then_resume_equals_an_uninterrupted_run(
    runners: dict[Architecture, Runner], tmp_path: Path, arch: Architecture, scheduler: str
) -> None:
    runner = runners[arch]
    params = params_for("m", scheduler)
    reference = generate(runner, params, tmp_path, "reference")
    ckpt, out = tmp_path / "job.ckpt", tmp_path / "job.png"
    paused = runner.run(params, output_path=out, checkpoint_path=ckpt, on_step=pause_at(PAUSE_AT))
    assert paused.kind is OutcomeKind.PAUSED
    saved = load_checkpoint(ckpt).checkpoint
    assert ("pooled_embeds" in saved.conditioning) == (arch is Architecture.SDXL)
    runner.run(params, output_path=out, checkpoint_path=ckpt, on_step=go_on)
    assert max_diff(reference, pixels(out)) == 0


def _resume_in_child(jobs: list[tuple[ModelInfo, GenerationParams, Path, Path]]) -> None:
    for model, params, out, ckpt in jobs:
        runner_for(model).run(params, output_path=out, checkpoint_path=ckpt, on_step=go_on)


def test_sd2_and_sdxl_resume_in_a_fresh_process(
    runners: dict[Architecture, Runner], tiny_folders: dict[Architecture, Path], tmp_path: Path,
    fresh_process: Callable[..., Any],
) -> None:  # fmt: skip
    jobs = []
    for arch in (Architecture.SD2, Architecture.SDXL):
        for scheduler in SCHEDULERS:
            params = params_for("m", scheduler)
            out, ckpt = (
                tmp_path / f"{arch.value}-{scheduler}.png",
                tmp_path / f"{arch.value}-{scheduler}.ckpt",
            )
            runners[arch].run(
                params, output_path=out, checkpoint_path=ckpt, on_step=pause_at(PAUSE_AT)
            )
            jobs.append((model_info(tiny_folders[arch]), params, out, ckpt))
    fresh_process(_resume_in_child, jobs)
    for index, (model, params, out, _ckpt) in enumerate(jobs):
        reference = generate(
            runners[model.architecture or Architecture.SD1], params, tmp_path, f"ref-{index}"
        )
        assert max_diff(reference, pixels(out)) == 0, (model.architecture, params.scheduler)


def test_an_sd1_checkpoint_does_not_resume_on_sdxl(
    runners: dict[Architecture, Runner], tmp_path: Path
) -> None:
    from app.engine.generation.errors import CheckpointMismatch

    params = params_for("m")
    ckpt, out = tmp_path / "job.ckpt", tmp_path / "job.png"
    runners[Architecture.SD1].run(
        params, output_path=out, checkpoint_path=ckpt, on_step=pause_at(1)
    )
    with pytest.raises(CheckpointMismatch, match="SDXL"):
        runners[Architecture.SDXL].run(params, output_path=out, checkpoint_path=ckpt, on_step=go_on)


def test_a_size_far_beyond_the_native_one_is_refused_before_any_step(
    runners: dict[Architecture, Runner], tiny_folders: dict[Architecture, Path], tmp_path: Path
) -> None:
    from app.engine.jobs.params import InvalidParameters

    model = model_info(tiny_folders[Architecture.SDXL])
    assert model.size_problem(256, 64) == ""
    assert "264x64 is too large for a model trained at 64x64" in model.size_problem(264, 64)
    with pytest.raises(InvalidParameters, match="at most 256 pixels per side"):
        generate(runners[Architecture.SDXL], params_for("m", width=264), tmp_path, "big")
    assert list(tmp_path.iterdir()) == []

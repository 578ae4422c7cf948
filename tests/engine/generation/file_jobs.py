"""Jobs on the files artists have (split layouts, GGUF, fp8), shared by the file tests of
each family: a runner reading a layout's shipped configs, and the check that a job paused
on a file resumes in a fresh process to the image of an uninterrupted run."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from app.engine.generation.device import CPU, DeviceChoice
from app.engine.generation.files.sources import ModelInfo
from app.engine.generation.load.pipelines import PipelineCache, SingleFileConfigs
from app.engine.generation.outcome import OutcomeKind, StepDecision
from app.engine.generation.runner import Runner
from app.engine.jobs.params import GenerationParams
from tests.engine.generation.tiny_architectures import max_diff, pause_at, pixels

# A job on a file: its model, the config folder it loads with, its parameters.
FileJob = tuple[ModelInfo, Path, GenerationParams]


def runner_on(model: ModelInfo, configs: Path, device: DeviceChoice = CPU) -> Runner:
    cache = PipelineCache(configs=SingleFileConfigs(configs))
    return Runner(device=device, resolve=lambda _name: model, cache=cache, threads=1)


def _go(_progress: Any) -> StepDecision:
    return StepDecision.CONTINUE


def _resume(jobs: list[tuple[ModelInfo, Path, GenerationParams, Path]], step: int) -> None:
    for model, configs, params, out in jobs:
        outcome = runner_on(model, configs).run(
            params, output_path=out, checkpoint_path=out.with_suffix(".ckpt"), on_step=_go
        )
        assert outcome.resumed_from is not None and outcome.resumed_from.step == step


def paused_jobs_resume_in_a_fresh_process(
    jobs: Sequence[FileJob], step: int, tmp_path: Path, fresh_process: Callable[..., Any]
) -> None:
    """Each job paused at `step`, resumed in one spawned process (as a worker after a
    crash), gives the image of the same job run through without a pause."""
    paused_jobs = []
    for index, (model, configs, params) in enumerate(jobs):
        out = tmp_path / f"{index}-{model.name}.png"
        paused = runner_on(model, configs).run(
            params, output_path=out, checkpoint_path=out.with_suffix(".ckpt"),
            on_step=pause_at(step),
        )  # fmt: skip
        assert paused.kind is OutcomeKind.PAUSED
        paused_jobs.append((model, configs, params, out))
    fresh_process(_resume, paused_jobs, step)
    for model, configs, params, out in paused_jobs:
        whole = out.with_name(f"{out.stem}-whole.png")
        runner_on(model, configs).run(
            params, output_path=whole, checkpoint_path=whole.with_suffix(".ckpt"), on_step=_go
        )
        assert max_diff(pixels(out), pixels(whole)) == 0, model.name

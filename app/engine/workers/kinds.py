"""One place where a job's kind chooses its work: `WORK_OF_KIND`.

A claimed job's run (`job_run.JobRun`) looks its kind up here and hands the work a
`KindRun`: the runner, the job, its parameters, its `RunInputs` (read once, at the start
of the run) and where its image and checkpoint go. Drawing, upscaling and tiled upscaling
are the runner's (it loads the model, and retries a run that ran out of GPU memory or
whose VAE overflowed, whatever the kind; `generation.runner.Runner.run`); composing a
grid needs no model, only the queue's cells (`grid_run`). A new kind is an entry here
(tests/engine/workers/test_kinds.py fails on a kind of `params.KINDS` without one).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol

from app.engine.generation.outcome import GenerationOutcome, StepDecision, StepProgress
from app.engine.jobs.params import (
    KIND_EDIT,
    KIND_GENERATE,
    KIND_GRID,
    KIND_TILED,
    KIND_UPSCALE,
    KIND_VIDEO,
    KINDS,
    GenerationParams,
    InvalidParameters,
)
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.run_inputs import NO_INPUTS, RunInputs
from app.engine.workers.grid_run import compose_grid
from app.models.tables import Job


class RunnerLike(Protocol):
    """What a job run needs of `generation.runner.Runner` (fakes implement the same)."""

    def load(self, model_name: str) -> object: ...

    def run(
        self,
        params: GenerationParams,
        inputs: RunInputs = NO_INPUTS,
        *,
        output_path: Path,
        checkpoint_path: Path,
        on_step: Callable[[StepProgress], Any],
    ) -> GenerationOutcome: ...


@dataclass(frozen=True)
class KindRun:
    """One claimed job, as its kind's work is handed it."""

    runner: RunnerLike
    queue: JobQueue
    job: Job
    params: GenerationParams
    inputs: RunInputs
    output_path: Path
    checkpoint_path: Path
    on_step: Callable[[StepProgress], StepDecision]


Work = Callable[[KindRun], GenerationOutcome]


def on_the_runner(run: KindRun) -> GenerationOutcome:
    """The runner's work: it picks denoising, an upscaler's tiles or a tiled redraw from
    the parameters' kind, under its memory and VAE retries."""
    return run.runner.run(
        run.params, run.inputs, output_path=run.output_path,
        checkpoint_path=run.checkpoint_path, on_step=run.on_step,
    )  # fmt: skip


def composed_grid(run: KindRun) -> GenerationOutcome:
    """No model: the group's cells into one labelled image."""
    return compose_grid(run.queue, run.job, run.params, run.output_path, run.on_step)


WORK_OF_KIND: Mapping[str, Work] = MappingProxyType(
    {
        KIND_GENERATE: on_the_runner,  # txt2img, img2img, inpaint, hires fix: params say which
        KIND_UPSCALE: on_the_runner,  # the parent's image through an upscaler model
        KIND_TILED: on_the_runner,  # enlarged, then redrawn region by region
        KIND_EDIT: on_the_runner,  # an instruction on an input image (Flux.1 Kontext)
        KIND_GRID: composed_grid,
        KIND_VIDEO: on_the_runner,  # a clip, drawn by a video model's family
    }
)


def work_of(kind: str) -> Work:
    """The work for a job of `kind`; a kind without one is refused in one sentence (a row
    written by a newer Easel, or by hand)."""
    work = WORK_OF_KIND.get(kind)
    if work is None:
        raise InvalidParameters(f"unknown job kind {kind!r} (known: {', '.join(KINDS)})")
    return work

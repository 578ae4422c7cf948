"""Runner wrappers for tests and benchmarks: hooks around a run and before every step.

`StepHookRunner` is the one wrapper; each stand-in below overrides only the hook it needs
(slow steps so a test can act mid-denoise, a PNG for the window, the chaos ledger in
`app.testing.ledger`). Factories for spawned workers live at module level so that they
pickle by name (see `app.testing`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.engine.generation.outcome import (
    GenerationOutcome,
    OutcomeKind,
    StepProgress,
)
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.run_inputs import NO_INPUTS, RunInputs
from app.engine.workers.worker import RunnerLike
from app.testing.scripted_runner import ScriptedRunner


class StepHookRunner:
    """Wraps a runner (`RunnerLike`); the hooks do nothing unless a subclass overrides them."""

    def __init__(self, inner: RunnerLike) -> None:
        self.inner = inner

    def load(self, model_name: str) -> object:
        return self.inner.load(model_name)

    # Intentional copy: the signature of `RunnerLike.run` (app.engine.workers.kinds), which every
    # runner repeats so type checkers can match it to the protocol.
    def run(
        self,
        params: GenerationParams,
        inputs: RunInputs = NO_INPUTS,
        *,
        output_path: Path,
        checkpoint_path: Path,
        on_step: Callable[[StepProgress], Any],
    ) -> GenerationOutcome:
        self.started(params, output_path)

        def step(progress: StepProgress) -> Any:
            self.before_step(progress)
            return on_step(progress)

        outcome = self.inner.run(
            params, inputs, output_path=output_path, checkpoint_path=checkpoint_path, on_step=step
        )
        self.finished(params, outcome)
        return outcome

    def started(self, params: GenerationParams, output_path: Path) -> None:
        """Before the inner runner starts (a fresh run or a resumed one)."""

    def before_step(self, progress: StepProgress) -> None:
        """After the inner runner finished a step, before the worker decides on it."""

    def finished(self, params: GenerationParams, outcome: GenerationOutcome) -> None:
        """After the inner runner returned (not when it raised or its process was killed)."""


class SlowStepRunner(StepHookRunner):
    """Waits at every step, so a test has time to cancel, pause or kill mid-denoise."""

    def __init__(self, inner: RunnerLike, step_delay_s: float) -> None:
        super().__init__(inner)
        self.step_delay_s = step_delay_s

    def before_step(self, progress: StepProgress) -> None:
        time.sleep(self.step_delay_s)


class PngRunner(StepHookRunner):
    """Replaces a completed image with a real PNG in one colour, so the window can show it."""

    def finished(self, params: GenerationParams, outcome: GenerationOutcome) -> None:
        from PIL import Image

        if outcome.kind is OutcomeKind.COMPLETED and outcome.image_path is not None:
            colour = (params.seed * 37 % 256, 120, 200)
            image = Image.new("RGB", (params.width, params.height), colour)
            image.save(outcome.image_path, "PNG")


def png_runner() -> PngRunner:
    """Runner factory for spawned workers: the scripted runner, writing PNG images."""
    return PngRunner(ScriptedRunner())

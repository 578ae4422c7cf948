"""The scripted runner (no torch), writing a real PNG so the window can show the result."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from PIL import Image

from app.engine.generation.outcome import GenerationOutcome, OutcomeKind, StepProgress
from app.engine.params import GenerationParams
from app.engine.scripted_runner import ScriptedRunner


class PngRunner(ScriptedRunner):
    def run(
        self,
        params: GenerationParams,
        *,
        output_path: Path,
        checkpoint_path: Path,
        on_step: Callable[[StepProgress], Any],
        init_image: bytes | None = None,
    ) -> GenerationOutcome:
        outcome = super().run(
            params, output_path=output_path, checkpoint_path=checkpoint_path, on_step=on_step,
            init_image=init_image,
        )  # fmt: skip
        if outcome.kind is OutcomeKind.COMPLETED:
            colour = (params.seed * 37 % 256, 120, 200)
            Image.new("RGB", (params.width, params.height), colour).save(output_path, "PNG")
        return outcome


def png_runner() -> PngRunner:
    """Runner factory for spawned workers (module level, so it pickles by name)."""
    return PngRunner()

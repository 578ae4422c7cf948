"""Runs one generation with a checkpoint between steps: continue, cancel or pause there.

Imports torch (through the loop), so only worker processes import this module.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app.engine.generation import denoise
from app.engine.generation.checkpoint import (
    Checkpoint,
    delete_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from app.engine.generation.device import DeviceChoice, pick_device
from app.engine.generation.files import write_png
from app.engine.generation.loader import LoadedModel, PipelineCache
from app.engine.generation.outcome import (
    GenerationOutcome,
    OutcomeKind,
    StepDecision,
    StepProgress,
)
from app.engine.generation.sources import ModelInfo, resolve_model
from app.engine.params import RANDOM_SEED, GenerationParams, InvalidParameters

StepCallback = Callable[[StepProgress], StepDecision]


class Runner:
    """Generates images; keeps the loaded pipeline between runs (one worker, one Runner)."""

    def __init__(
        self,
        *,
        device: DeviceChoice | None = None,
        resolve: Callable[[str], ModelInfo] = resolve_model,
        cache: PipelineCache | None = None,
        threads: int | None = None,
        preview_interval_s: float = 0.5,
    ) -> None:
        """`threads` sets torch's CPU threads for this (worker) process, None keeps torch's
        default: small models on busy cores run far faster on one thread (see benchmark).
        Previews are made at most every `preview_interval_s` (always on the first and last
        step); other steps report `preview_png=None`."""
        if threads is not None:
            _set_cpu_threads(threads)
        self._device = device or pick_device()
        self._resolve = resolve
        self._cache = cache or PipelineCache()
        self._preview_interval_s = preview_interval_s

    @property
    def device(self) -> DeviceChoice:
        return self._device

    def load(self, model_name: str) -> LoadedModel:
        """Load (or reuse) the pipeline for `model_name`; `run` does this itself."""
        return self._cache.get(self._resolve(model_name), self._device)

    def run(
        self,
        params: GenerationParams,
        *,
        output_path: Path,
        checkpoint_path: Path,
        on_step: StepCallback,
        init_image: bytes | None = None,
    ) -> GenerationOutcome:
        """Generate `params` into `output_path`, resuming from `checkpoint_path` if it exists.

        `init_image`: the PNG bytes img2img starts from (`params.init_image` names it).

        Raises `CheckpointError` for a checkpoint that is corrupt or made for other params
        (it is left in place: the caller decides), `InvalidParameters`, `ModelNotFound`,
        `UnsupportedModel`, and whatever the model raises (see `errors.is_transient`).
        """
        _check_params(params, init_image)
        checkpoint = _matching_checkpoint(checkpoint_path, params)  # fail before a slow load
        job = _Job(self.load(params.model), params, checkpoint_path, on_step, init_image)
        state, elapsed_before = job.begin(checkpoint)
        stopped = job.run_steps(state, elapsed_before, self._preview_interval_s)
        if stopped is not None:
            return stopped
        write_png(denoise.decode(job.loaded.pipe, state), output_path, params)
        delete_checkpoint(checkpoint_path)
        return GenerationOutcome(OutcomeKind.COMPLETED, image_path=output_path)


@dataclass
class _Job:
    loaded: LoadedModel
    params: GenerationParams
    checkpoint_path: Path
    on_step: StepCallback
    init_image: bytes | None = None

    def begin(self, checkpoint: Checkpoint | None) -> tuple[denoise.DenoiseState, float]:
        if checkpoint is None:
            return denoise.start(self.loaded.pipe, self.params, self.init_image), 0.0
        return denoise.restore(self.loaded.pipe, self.params, checkpoint), checkpoint.elapsed_s

    def run_steps(
        self, state: denoise.DenoiseState, elapsed_before: float, preview_interval_s: float
    ) -> GenerationOutcome | None:
        """Run the remaining steps; an outcome if `on_step` stopped us, None when all ran."""
        started = time.monotonic() - elapsed_before
        last_preview = -float("inf")
        while not state.finished:
            if not denoise.advance(self.loaded.pipe, state):
                continue  # mid-way through a 2nd-order step: not a safe point to stop
            now = time.monotonic()
            with_preview = state.finished or now - last_preview >= preview_interval_s
            last_preview = now if with_preview else last_preview
            decision = self.on_step(self._progress(state, now - started, with_preview))
            if decision is StepDecision.CANCEL:
                delete_checkpoint(self.checkpoint_path)
                return GenerationOutcome(OutcomeKind.CANCELLED)
            if decision is StepDecision.PAUSE:
                checkpoint = denoise.snapshot(state, self.params, now - started)
                save_checkpoint(self.checkpoint_path, checkpoint)
                return GenerationOutcome(OutcomeKind.PAUSED, checkpoint_path=self.checkpoint_path)
        return None

    def _progress(
        self, state: denoise.DenoiseState, elapsed: float, with_preview: bool
    ) -> StepProgress:
        png = None
        if with_preview:
            # The x0 estimate shows the picture to come; raw latents are mostly noise early on.
            latents = state.denoised if state.denoised is not None else state.latents
            png = self.loaded.previewer.png(latents, (self.params.width, self.params.height))
        return StepProgress(state.steps_done, state.total_steps, elapsed, png)


def _set_cpu_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(max(1, threads))


def _check_params(params: GenerationParams, init_image: bytes | None) -> None:
    params.validated()
    if params.seed == RANDOM_SEED:
        raise InvalidParameters("the seed must be fixed before generation (with_concrete_seed)")
    if bool(params.init_image) != (init_image is not None):
        raise InvalidParameters(
            f"init image {params.init_image or '(none)'} named, but "
            f"{'none' if init_image is None else 'an image'} given"
        )


def _matching_checkpoint(path: Path, params: GenerationParams) -> Checkpoint | None:
    if not path.exists():
        return None
    checkpoint = load_checkpoint(path)
    checkpoint.check_matches(params)
    return checkpoint

"""Runs one generation with a checkpoint between steps: continue, cancel or pause there.

Imports torch (through the loop), so only worker processes import this module.
"""

from __future__ import annotations

import io
import logging
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import torch
from PIL import Image

from app.engine.generation import denoise, experts
from app.engine.generation.device import DeviceChoice, pick_device
from app.engine.generation.errors import (
    ClipDoesNotFit,
    NonFiniteLatents,
    NonFiniteVaeOutput,
    NotEnoughGraphicsMemory,
    is_out_of_memory,
)
from app.engine.generation.families import family_of
from app.engine.generation.families.flux.redux import redux_modules, use_redux
from app.engine.generation.families.video_params import video_problems
from app.engine.generation.files.sources import ModelInfo, resolve_model
from app.engine.generation.guidance.control import ControlNetCache
from app.engine.generation.guidance.controlnets import (
    ControlNetInfo,
    check_control_type,
    check_fits,
    check_job_kind,
    find_controlnet,
)
from app.engine.generation.guidance.ip_adapters import IPAdapterInfo, find_ip_adapter
from app.engine.generation.guidance.redux_models import ReduxInfo, find_redux_model
from app.engine.generation.guidance.reference import use_ip_adapters
from app.engine.generation.load import attention, compiled
from app.engine.generation.load.pipelines import LoadedModel, PipelineCache
from app.engine.generation.load.single_file import prefetch
from app.engine.generation.loop import vae_precision
from app.engine.generation.loop.checkpoint import (
    Checkpoint,
    SavedCheckpoint,
    delete_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from app.engine.generation.loop.rolling_saver import RollingSaver
from app.engine.generation.memory import (
    available_memory,
    device_memory_free,
    largest_part_bytes,
    module_bytes,
    pipeline_bytes,
    weight_files,
)
from app.engine.generation.outcome import (
    GenerationOutcome,
    OutcomeKind,
    ResumedFrom,
    StepDecision,
    StepProgress,
)
from app.engine.generation.post import tiled
from app.engine.generation.post.upscale import (
    CANCEL,
    CONTINUE,
    DEFAULT_TILE,
    PAUSE,
    Upscaler,
    UpscaleStopped,
    load_progress,
    load_upscaler,
    save_progress,
    to_image,
    upscale_png,
    upscale_tiles,
)
from app.engine.generation.post.upscalers import resolve_upscaler, upscaler_folders
from app.engine.generation.prompts.loras import LoraRef, parse_loras
from app.engine.generation.video_budget import clip_memory
from app.engine.jobs.graph_sql import check_edit_images, check_guide_images, check_last_image
from app.engine.jobs.params import (
    KIND_EDIT,
    KIND_GENERATE,
    KIND_TILED,
    KIND_UPSCALE,
    KIND_VIDEO,
    RANDOM_SEED,
    GenerationParams,
    InvalidParameters,
)
from app.engine.jobs.run_inputs import NO_INPUTS, RunInputs
from app.engine.outputs.registry import output_of_job
from app.errors import EaselError

log = logging.getLogger(__name__)

StepCallback = Callable[[StepProgress], StepDecision]
LOW_VRAM_NOTE = "out of GPU memory: retried with low-VRAM mode on (model CPU offload, VAE tiling)"
VAE_FLOAT32_NOTE = "the VAE gave NaN or infinity in half precision: retried with the VAE in float32"


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
        upscalers: Sequence[Path] | None = None,
        upscale_tile: int = DEFAULT_TILE,
        resolve_control: Callable[[str], ControlNetInfo] = find_controlnet,
        resolve_reference: Callable[[str], IPAdapterInfo] = find_ip_adapter,
        resolve_redux: Callable[[str], ReduxInfo] = find_redux_model,
        controlnets: ControlNetCache | None = None,
    ) -> None:
        """`threads` sets torch's CPU threads for this (worker) process, None keeps torch's
        default: small models on busy cores run far faster on one thread (see benchmark).
        Previews are offered at most every `preview_interval_s`, counted across runs (see
        `PreviewThrottle`), and made only if the step callback reads them."""
        if threads is not None:
            _set_cpu_threads(threads)
        self._device = device or pick_device()
        self._resolve = resolve
        self._cache = cache or PipelineCache()
        self._resolve_control = resolve_control
        self._resolve_reference = resolve_reference
        self._resolve_redux = resolve_redux
        self._controlnets = controlnets or ControlNetCache()
        self._previews = PreviewThrottle(preview_interval_s)
        self._asked_as: dict[Path, str] = {}  # a held model's path -> the name jobs give it
        # Where upscaler models are found (`upscalers.upscaler_folders`); None: the default.
        self._upscalers = list(upscalers) if upscalers is not None else upscaler_folders()
        self._upscale_tile = upscale_tile
        self._reading_ahead: threading.Event | None = None  # set: stop that read-ahead

    @property
    def device(self) -> DeviceChoice:
        return self._device

    def load(self, model_name: str, loras: Sequence[LoraRef] = ()) -> LoadedModel:
        """Load (or reuse) the pipeline for `model_name` with exactly `loras` applied;
        `run` does this itself, with the LoRAs its prompt names."""
        model = self._resolve(model_name)
        self._asked_as[model.path.resolve()] = model_name
        return self._cache.get(model, self._device, loras)

    def held_models(self) -> list[str]:
        """The models held in memory (on the device first, then standing by in RAM), most
        recently used first, by the names jobs give them: what the worker row lists and its
        claims prefer."""
        names = [self._asked_as.get(model.path.resolve()) for model, _tier in self._cache.held()]
        return list(dict.fromkeys(name for name in names if name is not None))

    @property
    def cache(self) -> PipelineCache:
        return self._cache

    def read_ahead(self, model_name: str) -> threading.Thread | None:
        """Read `model_name`'s weight files into the OS's page cache on a thread of its own,
        while the job in hand denoises, so its load later finds them in memory; a read-ahead
        still running is told to stop. Nothing for a model held already, one not found, or
        files larger than half the memory available (they would push out the one in use)."""
        if self._reading_ahead is not None:
            self._reading_ahead.set()
        try:
            model = self._resolve(model_name)
        except EaselError:
            return None
        if any(held.path.resolve() == model.path.resolve() for held, _ in self._cache.held()):
            return None
        files = weight_files(model.path)
        if sum(f.stat().st_size for f in files) > available_memory() // 2:
            return None
        stop = self._reading_ahead = threading.Event()

        def read() -> None:
            for file in files:
                if stop.is_set():
                    return
                prefetch(file, threads=2, stop=stop.is_set)
            log.debug("read ahead %s", model_name)

        thread = threading.Thread(target=read, name="read-ahead", daemon=True)
        thread.start()
        return thread

    def run(
        self,
        params: GenerationParams,
        inputs: RunInputs = NO_INPUTS,
        *,
        output_path: Path,
        checkpoint_path: Path,
        on_step: StepCallback,
    ) -> GenerationOutcome:
        """Generate `params` into `output_path`, resuming from `checkpoint_path` if it exists.

        `inputs`: the images the parameters name (init image, mask, control layers' and
        reference images), each checked against its name. The parameters' kind picks the
        work (`_work_of`): denoising, an upscaler's tiles, or a tiled redraw.
        `on_step` may answer `CHECKPOINT`: the state is then saved to `checkpoint_path` in
        the background (a rolling checkpoint), and the run goes on.
        Raises `CheckpointError` for a checkpoint that is damaged or made for other params
        (it is left in place: the caller decides), `NonFiniteLatents`, `InvalidParameters`,
        `ModelNotFound`, `UnsupportedModel`, whatever `on_step` raises (nothing is written
        or deleted then), and whatever the model raises (see `errors.is_transient`).
        `LoraError` too. Running out of GPU memory (`errors.is_out_of_memory`) is retried
        once with the low-VRAM mode on (it then stays on for this runner) and the outcome's
        note says so; out of memory in low-VRAM mode raises `NotEnoughGraphicsMemory`. So is
        a VAE that gave NaN or infinity (`NonFiniteVaeOutput`) retried, with that VAE in
        float32 (it then stays so for this loaded model). Every other error, transient or
        not, goes up unchanged.
        """
        _check_params(params, inputs)
        work = self._work_of(params.kind)
        generate = partial(work, params, output_path, checkpoint_path, on_step, inputs)
        attempt = partial(self._attempt_within_memory, params, generate)
        outcome = attempt()
        if outcome is not None:
            return outcome
        # Here, out of the `except`, the error and its traceback are gone: the frames of
        # the failed run (its activations, the pipeline that ran out) are freed, so emptying
        # the GPU's cache now gives their memory back before the retry loads anything.
        if self._device.low_vram:
            raise self._does_not_fit(params)
        self._switch_to_low_vram()
        outcome = attempt()
        if outcome is None:
            raise self._does_not_fit(params)
        return replace(outcome, note="; ".join(filter(None, (LOW_VRAM_NOTE, outcome.note))))

    def _attempt_within_memory(
        self, params: GenerationParams, generate: Callable[[], GenerationOutcome]
    ) -> GenerationOutcome | None:
        """One run of `generate`; None when it ran out of GPU memory. Nothing of that error
        leaves this function: memory is freed only once no frame of the failed run holds on
        to it."""
        try:
            return self._run_once(params, generate)
        except Exception as error:
            # Only memory is cured by offloading; a database away or a full disk is the
            # retry policy's to decide, and must not cost the worker its speed for good.
            if not is_out_of_memory(error):
                raise
            # The text, not the error: a log handler that keeps records (pytest's, a crash
            # reporter's) would keep the traceback, and with it every frame's tensors.
            log.warning("%s ran out of GPU memory: %s", params.model, str(error))
            traceback.clear_frames(error.__traceback__)  # whoever else holds it, not them
        return None

    def _switch_to_low_vram(self) -> None:
        self._cache.clear()  # frees the pipeline that ran out of memory before reloading
        self._controlnets.clear()
        _empty_gpu_cache()
        self._device = replace(self._device, low_vram=True)

    def _does_not_fit(self, params: GenerationParams) -> NotEnoughGraphicsMemory:
        """The one sentence for a job that ran out of memory even with low-VRAM mode: what
        the model's largest part needs (model CPU offload puts one part at a time on the
        GPU) and what this worker has."""
        _empty_gpu_cache()
        name = params.upscaler if params.kind == KIND_UPSCALE else params.model
        needed = None if params.kind == KIND_UPSCALE else self._largest_part_bytes(params.model)
        return NotEnoughGraphicsMemory.for_model(
            name, needed, device_memory_free(self._device.device)
        )

    def _largest_part_bytes(self, model_name: str) -> int | None:
        try:
            loaded = self._cache.holding(self._resolve(model_name))
        except EaselError:
            return None
        return largest_part_bytes(loaded.pipe) if loaded is not None else None

    def _run_once(
        self, params: GenerationParams, generate: Callable[[], GenerationOutcome]
    ) -> GenerationOutcome:
        """One run of `generate`, retried once if its VAE overflowed (half precision) and
        can be upcast."""
        try:
            return self._compiled_or_eager(params, generate)
        except NonFiniteVaeOutput:
            if not self._keep_vae_in_float32(params):
                raise  # in float32 already: nothing left to try
        return replace(generate(), note=VAE_FLOAT32_NOTE)

    def _compiled_or_eager(
        self, params: GenerationParams, generate: Callable[[], GenerationOutcome]
    ) -> GenerationOutcome:
        """One run of `generate`; if compiling the job's model failed, run again without
        compiling (it stays so for this loaded model), with one sentence saying so: asking
        for speed must never cost the job."""
        try:
            return generate()
        except Exception as error:
            if not (params.compile and compiled.is_compile_failure(error)):
                raise
            pipe = self.load(params.model, parse_loras(params.prompt)[1]).pipe  # held: no load
            note = compiled.give_up(pipe, error)
        outcome = generate()
        return replace(outcome, note="; ".join(filter(None, (note, outcome.note))))

    def _keep_vae_in_float32(self, params: GenerationParams) -> bool:
        """The job's VAE in float32 from now on (the model is held: no load); False when it
        runs so already."""
        pipe = self.load(params.model, parse_loras(params.prompt)[1]).pipe
        return vae_precision.keep_in_float32(pipe.vae)

    def _work_of(self, kind: str) -> _Work:
        """The runner's part of `workers.kinds.WORK_OF_KIND`: the work of each kind whose
        entry there is the runner's (tests/engine/generation/test_generation_runner.py
        holds the two together)."""
        works: dict[str, _Work] = {
            KIND_GENERATE: self._denoise, KIND_UPSCALE: self._upscale, KIND_TILED: self._tiled,
            KIND_EDIT: self._denoise,  # the family reads the input image (Flux.1 Kontext)
            KIND_VIDEO: self._denoise,  # a clip: the same loop, its family decodes frames
        }  # fmt: skip
        if kind not in works:
            raise InvalidParameters(f"a {kind!r} job is its worker's to run, not the runner's")
        return works[kind]

    def _denoise(
        self,
        params: GenerationParams,
        output_path: Path,
        checkpoint_path: Path,
        on_step: StepCallback,
        inputs: RunInputs,
    ) -> GenerationOutcome:
        """Draw (txt2img, img2img, inpaint, hires fix: the parameters say which)."""
        init_image = inputs.init_image
        saved = _matching_checkpoint(checkpoint_path, params)  # fail before a slow load
        if params.upscaler and init_image is not None and saved is None:
            # Hires fix with a model: the parent's image through the upscaler, then img2img.
            inputs = replace(inputs, init_image=self._model_upscaled(params, init_image))
        controls = [self._resolve_control(layer.model) for layer in params.control_layers]
        self._controlnets.retain(controls)  # unneeded nets go before a load needs the room
        loaded = self.load(params.model, parse_loras(params.prompt)[1])
        load_note = self._cache.last_fetch.note  # "model loaded in 6.2 s", for the timeline
        compiled.prepare(loaded.pipe, params.compile)
        chosen = attention.use_best(loaded.pipe, family_of(loaded.pipe).name)
        load_note = "; ".join(filter(None, (load_note, chosen, experts.note(loaded.pipe))))
        problems = video_problems(loaded.model.architecture, params)  # checked at submit too
        if problems:
            raise InvalidParameters("; ".join(problems))
        for index, (control, layer) in enumerate(zip(controls, params.control_layers, strict=True)):
            check_fits(control, params.model, loaded.model.architecture)
            check_control_type(control, layer, index)
            check_job_kind(control, params, index)
        nets = self._controlnets.get(controls, loaded.pipe)
        self._use_references(loaded, params)
        guides = [*self._controlnets.nets, *redux_modules(loaded.pipe)]
        self._cache.account(loaded, module_bytes(guides))  # in the budget
        _tile_the_vae_for_big_images(loaded.pipe, params, self._device.low_vram)
        if params.kind == KIND_VIDEO:
            _fit_the_clip(loaded, params, self._device)
        job = _Job(loaded, params, checkpoint_path, on_step, inputs, nets)
        state, elapsed_before = job.begin(saved.checkpoint if saved else None)
        resumed = ResumedFrom(saved.checkpoint.steps_done, saved.saved_at) if saved else None
        try:
            with RollingSaver(checkpoint_path) as saver:
                stopped = job.run_steps(state, elapsed_before, self._previews, saver)
        finally:
            self._controlnets.offload()  # low-VRAM mode: back to RAM before the decode
        # The compile happened in the first step: counted as load time (`history.eta`).
        load_note = "; ".join(filter(None, (load_note, compiled.note(loaded.pipe))))
        if stopped is not None:
            return replace(stopped, resumed_from=resumed, load_note=load_note)
        result = denoise.decode(job.loaded.pipe, state)
        output_of_job(params.kind).write(result, output_path, params)
        delete_checkpoint(checkpoint_path)
        return GenerationOutcome(
            OutcomeKind.COMPLETED, image_path=output_path, resumed_from=resumed,
            load_note=load_note,
        )  # fmt: skip

    def _use_references(self, loaded: LoadedModel, params: GenerationParams) -> None:
        """The job's reference images' models into the pipeline, at their weights: a Redux
        model where the family reads references through one (Flux.1), IP-Adapters else."""
        references = params.references
        weights = [reference.weight for reference in references]
        arch = loaded.model.architecture
        if arch is not None and arch.spec.requests.redux_references:
            use_redux(loaded.pipe, [self._resolve_redux(r.model) for r in references], weights)
            return
        adapters = [self._resolve_reference(reference.model) for reference in references]
        use_ip_adapters(loaded.pipe, adapters, weights)

    def upscaler(self, name: str) -> Upscaler:
        return load_upscaler(resolve_upscaler(name, self._upscalers))

    def _model_upscaled(self, params: GenerationParams, init_image: bytes) -> bytes:
        image = upscale_png(
            self.upscaler(params.upscaler), init_image, (params.width, params.height)
        )
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        return buffer.getvalue()

    def _upscale(
        self,
        params: GenerationParams,
        output_path: Path,
        checkpoint_path: Path,
        on_step: StepCallback,
        inputs: RunInputs,
    ) -> GenerationOutcome:
        """An upscale job: the image through the upscaler tile by tile, each tile a step
        (cancel, pause and rolling saves between tiles; a resume continues at its tile)."""
        init_image = _named_init_image(inputs)
        upscaler = self.upscaler(params.upscaler)
        saved = load_progress(checkpoint_path, params)
        done, output = saved if saved is not None else (0, None)
        resumed = ResumedFrom(done, checkpoint_path.stat().st_mtime) if saved else None
        started = time.monotonic()

        def after_tile(tile: int, tiles: int, so_far: torch.Tensor) -> str:
            decision = on_step(StepProgress(tile, tiles, time.monotonic() - started))
            if decision in (StepDecision.CHECKPOINT, StepDecision.PAUSE):
                save_progress(checkpoint_path, params, tile, so_far)
            return _TILE_DECISIONS[decision]

        with Image.open(io.BytesIO(init_image)) as image:
            try:
                upscaled = upscale_tiles(
                    upscaler, image, tile=self._upscale_tile, output=output, done=done,
                    after_tile=after_tile,
                )  # fmt: skip
            except UpscaleStopped as stopped:
                if stopped.decision == CANCEL:
                    delete_checkpoint(checkpoint_path)
                    return GenerationOutcome(OutcomeKind.CANCELLED, resumed_from=resumed)
                return GenerationOutcome(
                    OutcomeKind.PAUSED, checkpoint_path=checkpoint_path, resumed_from=resumed
                )
        result = to_image(upscaled)
        if result.size != (params.width, params.height):
            result = result.resize((params.width, params.height), Image.Resampling.LANCZOS)
        output_of_job(params.kind).write(result, output_path, params)
        delete_checkpoint(checkpoint_path)
        return GenerationOutcome(
            OutcomeKind.COMPLETED, image_path=output_path, resumed_from=resumed
        )

    def _tiled(
        self,
        params: GenerationParams,
        output_path: Path,
        checkpoint_path: Path,
        on_step: StepCallback,
        inputs: RunInputs,
    ) -> GenerationOutcome:
        """A tiled upscale (see `tiled`): every region redrawn is one step; cancel, pause
        and rolling saves between regions, and a resume continues at its region."""
        init_image = _named_init_image(inputs)
        loaded = self.load(params.model, parse_loras(params.prompt)[1])
        compiled.prepare(loaded.pipe, params.compile)
        size = family_of(loaded.pipe).native_size()
        if params.width < size or params.height < size:
            raise InvalidParameters(
                f"a tiled upscale to {params.width}x{params.height} is smaller than one "
                f"{size}x{size} region of this model"
            )
        saved = tiled.load_progress(checkpoint_path, params)
        resumed = ResumedFrom(saved[0], checkpoint_path.stat().st_mtime) if saved else None
        if saved is not None:
            done, image = saved
        else:
            done, image = 0, self._enlarged(params, init_image)
        plan = tiled.regions(params.width, params.height, size)
        redraw = tiled.redraw_with(loaded.pipe)
        started = time.monotonic()
        for index in range(done, len(plan)):
            image = tiled.redraw_region(image, plan[index], index, params, size, redraw, plan)
            decision = on_step(StepProgress(index + 1, len(plan), time.monotonic() - started))
            if decision in (StepDecision.CHECKPOINT, StepDecision.PAUSE):
                tiled.save_progress(checkpoint_path, params, index + 1, image)
            if decision is StepDecision.PAUSE:
                return GenerationOutcome(
                    OutcomeKind.PAUSED, checkpoint_path=checkpoint_path, resumed_from=resumed
                )
            if decision is StepDecision.CANCEL:
                delete_checkpoint(checkpoint_path)
                return GenerationOutcome(OutcomeKind.CANCELLED, resumed_from=resumed)
        output_of_job(params.kind).write(image, output_path, params)
        delete_checkpoint(checkpoint_path)
        return GenerationOutcome(
            OutcomeKind.COMPLETED, image_path=output_path, resumed_from=resumed
        )

    def _enlarged(self, params: GenerationParams, init_image: bytes) -> Image.Image:
        size = (params.width, params.height)
        if params.upscaler:
            return upscale_png(self.upscaler(params.upscaler), init_image, size)
        with Image.open(io.BytesIO(init_image)) as image:
            return image.convert("RGB").resize(size, Image.Resampling.LANCZOS)


_TILE_DECISIONS = {
    StepDecision.CONTINUE: CONTINUE,
    StepDecision.CHECKPOINT: CONTINUE,
    StepDecision.PAUSE: PAUSE,
    StepDecision.CANCEL: CANCEL,
}


class PreviewThrottle:
    """When a step offers a preview: at most every `interval_s`, counted across runs.

    Not per run: short jobs back to back (or a pause and its resume) would each pay for a
    preview at their first step, which on a tiny model is a tenth of the job. The last
    step offers none either: the image itself comes right after it."""

    def __init__(self, interval_s: float) -> None:
        self._interval_s = interval_s
        self._last = -float("inf")

    def due(self, now: float) -> bool:
        if now - self._last < self._interval_s:
            return False
        self._last = now
        return True


@dataclass
class _Job:
    loaded: LoadedModel
    params: GenerationParams
    checkpoint_path: Path
    on_step: StepCallback
    inputs: RunInputs
    control_nets: Sequence[Any] = ()

    def begin(self, checkpoint: Checkpoint | None) -> tuple[denoise.DenoiseState, float]:
        pipe, params, inputs = self.loaded.pipe, self.params, self.inputs
        init, mask, controls = inputs.init_image, inputs.mask, inputs.control_images
        if checkpoint is None:
            state = denoise.start(
                pipe, params, init, mask, self.control_nets, controls, inputs.reference_images,
                inputs.edit_images, last_image=inputs.last_image,
            )  # fmt: skip
            return state, 0.0
        state = denoise.restore(pipe, params, checkpoint, init, mask, self.control_nets, controls)
        return state, checkpoint.elapsed_s

    def run_steps(
        self,
        state: denoise.DenoiseState,
        elapsed_before: float,
        previews: PreviewThrottle,
        saver: RollingSaver,
    ) -> GenerationOutcome | None:
        """Run the remaining steps; an outcome if `on_step` stopped us, None when all ran."""
        started = time.monotonic() - elapsed_before
        while not state.finished:
            advanced = denoise.advance(self.loaded.pipe, state)
            _check_finite(state, state.steps_done if advanced else state.steps_done + 1)
            if not advanced:
                continue  # mid-way through a 2nd-order step: not a safe point to stop
            now = time.monotonic()
            saver.step_ended(now)
            progress = self._progress(state, now - started, previews.due(now))
            decision = self.on_step(replace(progress, last_save_s=saver.cost_s, saving=saver.busy))
            if decision is StepDecision.CHECKPOINT:
                asked = time.monotonic()  # the snapshot is part of the save's cost
                saver.save_soon(denoise.snapshot(state, self.params, now - started), asked)
            elif decision is StepDecision.CANCEL:
                saver.wait()
                delete_checkpoint(self.checkpoint_path)
                return GenerationOutcome(OutcomeKind.CANCELLED)
            elif decision is StepDecision.PAUSE:
                saver.wait()
                return self._pause(denoise.snapshot(state, self.params, now - started))
        return None

    def _pause(self, checkpoint: Checkpoint) -> GenerationOutcome:
        """Save and report PAUSED; if the save fails (a full disk), PAUSED all the same,
        keeping the last rolling checkpoint if there is one, and saying why."""
        try:
            save_checkpoint(self.checkpoint_path, checkpoint)
        except (OSError, RuntimeError) as error:
            log.warning("pause checkpoint %s not saved: %s", self.checkpoint_path, error)
            kept = self.checkpoint_path if self.checkpoint_path.is_file() else None
            reason = getattr(error, "strerror", None) or str(error)
            return GenerationOutcome(
                OutcomeKind.PAUSED, checkpoint_path=kept, unsaved_reason=reason
            )
        return GenerationOutcome(OutcomeKind.PAUSED, checkpoint_path=self.checkpoint_path)

    def _progress(
        self, state: denoise.DenoiseState, elapsed: float, with_preview: bool
    ) -> StepProgress:
        render = None
        if with_preview:
            # The x0 estimate shows the picture to come; raw latents are mostly noise early on.
            latents = state.denoised if state.denoised is not None else state.latents
            render = partial(
                self.loaded.previewer.png, latents.clone(), (self.params.width, self.params.height)
            )
        return StepProgress(state.steps_done, state.total_steps, elapsed, render)


# Above this many times the model's side, the VAE encodes and decodes in tiles (diffusers'
# own tiling, with its blended overlaps): a 2048 px hires fix needs a tile's memory, not the
# whole image's. At and below it the VAE runs whole, as the stock pipelines do.
VAE_TILING_ABOVE = 2


def _tile_the_vae_for_big_images(pipe: object, params: GenerationParams, low_vram: bool) -> None:
    vae = getattr(pipe, "vae", None)
    if vae is None or not hasattr(vae, "enable_tiling"):
        return
    native = family_of(pipe).native_size()
    if max(params.width, params.height) > VAE_TILING_ABOVE * native:
        vae.enable_tiling()
    elif not low_vram:  # low-VRAM mode keeps it on for every size (see loader._place)
        vae.disable_tiling()


def _fit_the_clip(loaded: LoadedModel, params: GenerationParams, device: DeviceChoice) -> None:
    """Before a clip's first step: its needs estimated (`video_budget.clip_memory`) against
    the memory left beside its model; the VAE decodes in tiles when the whole picture would
    not fit, and a clip that does not fit even so is refused in one sentence. On a GPU
    outside low-VRAM mode the weights may still make room (the out-of-memory retry offloads
    them), so only there is a clip not refused on the estimate."""
    pipe = loaded.pipe
    needs = clip_memory(
        loaded.model.path, params, transformer_bytes=_itemsize(pipe.transformer),
        vae_bytes=_itemsize(pipe.vae),
    )  # fmt: skip
    free, where = _memory_beside_the_model(pipe, device)
    if needs.needed(tiled=False) <= free:
        return
    if needs.needed(tiled=True) < needs.needed(tiled=False):  # tiles pay on a wide VAE
        pipe.vae.enable_tiling()
    least = min(needs.needed(tiled=True), needs.needed(tiled=False))
    may_make_room = device.device.startswith("cuda") and not device.low_vram
    if least > free and not may_make_room:
        raise ClipDoesNotFit.for_clip(least, free, where)


def _memory_beside_the_model(pipe: Any, device: DeviceChoice) -> tuple[int, str]:
    """Bytes free for a run's activations now, and where: a GPU's free memory and cache,
    less the weights on it (all of them, or in low-VRAM mode the largest part at a time);
    elsewhere the machine's available RAM (the weights are in it already)."""
    gpu_free = device_memory_free(device.device)
    if gpu_free is None:
        return available_memory(), "this machine"
    on_gpu = largest_part_bytes(pipe) if device.low_vram else on_device_bytes(pipe)
    return max(0, gpu_free - on_gpu), "this GPU"


def on_device_bytes(pipe: Any) -> int:
    """The weights a pipeline keeps on its device outside low-VRAM mode: all, less an
    expert waiting in RAM (Wan 2.2 A14B one expert at a time)."""
    return pipeline_bytes(pipe) - experts.waiting_bytes(pipe)


def _itemsize(module: Any) -> int:
    return int(module.dtype.itemsize)


def _empty_gpu_cache() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _set_cpu_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(max(1, threads))


# One of the runner's works (`Runner._work_of`).
_Work = Callable[[GenerationParams, Path, Path, StepCallback, RunInputs], GenerationOutcome]


def _named_init_image(inputs: RunInputs) -> bytes:
    """An upscale's image: `_check_params` made sure the parameters name one."""
    assert inputs.init_image is not None
    return inputs.init_image


def _check_params(params: GenerationParams, inputs: RunInputs) -> None:
    init_image, mask = inputs.init_image, inputs.mask
    params.validated()
    if params.seed == RANDOM_SEED:
        raise InvalidParameters("the seed must be fixed before generation (with_concrete_seed)")
    if bool(params.init_image) != (init_image is not None):
        raise InvalidParameters(
            f"init image {params.init_image or '(none)'} named, but "
            f"{'none' if init_image is None else 'an image'} given"
        )
    if bool(params.mask) != (mask is not None):
        raise InvalidParameters(
            f"mask {params.mask or '(none)'} named, but {'none' if mask is None else 'one'} given"
        )
    check_guide_images(params, inputs.control_images, inputs.reference_images)
    check_edit_images(params, inputs.edit_images)
    check_last_image(params, inputs.last_image)


def _matching_checkpoint(path: Path, params: GenerationParams) -> SavedCheckpoint | None:
    try:
        return load_checkpoint(path, params)
    except FileNotFoundError:
        return None


def _check_finite(state: denoise.DenoiseState, step: int) -> None:
    """NaN or infinity never heals: stop now rather than decode them into a garbage image.

    One reduction over the latents per timestep, measured on one CPU thread: 11 us at
    64x64, 67 us at 512x512, 210 us at 1024x1024; a step takes tens to hundreds of ms.
    """
    if not bool(torch.isfinite(state.latents).all()):
        raise NonFiniteLatents(
            f"the model produced invalid values (NaN or infinity) at step {step} of "
            f"{state.total_steps}; no image was written"
        )

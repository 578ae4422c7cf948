"""The measurements of benchmarks/gpu.py (its docstring lists the figures).

Imports torch and diffusers: gpu.py imports this module only once it has checked that
they are there (and, without `--smoke`, that CUDA is).
"""

from __future__ import annotations

import gc
import io
import os
import re
import shutil
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from app.engine.generation.device import DTYPE_ENV, pick_device
from app.engine.generation.errors import NonFiniteLatents, is_out_of_memory
from app.engine.generation.files.sources import ModelInfo, ModelSource, detected
from app.engine.generation.load import compiled
from app.engine.generation.loop import step_cache
from app.engine.generation.memory import weight_files
from app.engine.generation.outcome import GenerationOutcome, StepDecision, StepProgress
from app.engine.generation.runner import LOW_VRAM_NOTE, Runner
from app.engine.jobs.params import SPEED_FAST, GenerationParams
from app.engine.jobs.run_inputs import RunInputs
from app.engine.jobs.states import JobStatus
from app.errors import EaselError
from app.testing.images import max_diff, pixels
from benchmarks.generation import _Bench, _step_ms
from benchmarks.gpu_models import (
    FLUX_DTYPE,
    SDXL_DTYPE,
    init_picture,
    picture_tensor,
    write_flux,
    write_sdxl,
)

SDXL_FIGURES = (
    "step_ms_sdxl_1024", "step_ms_stock_sdxl_1024", "queue_vs_direct_ratio_sdxl_1024",
    "vram_peak_mb_sdxl", "sdxl_img2img_fp16_finite",
)  # fmt: skip
OOM_FIGURES = ("oom_retry_ok",)
FLUX_FIGURES = ("step_ms_flux_1024", "flux_bf16_same_as_diffusers_max_diff")
# Issue 40's speed settings on the same Flux.1, at the same size (a job's `speed` and
# `compile`, through the runner).
CACHED_FIGURES = ("step_ms_flux_1024_cached", "flux_1024_cached_model_calls_ratio")
COMPILED_FIGURES = ("flux_1024_compile_s", "step_ms_flux_1024_compiled")
ALL_FLUX_FIGURES = (*FLUX_FIGURES, *CACHED_FIGURES, *COMPILED_FIGURES)
FIGURES = (*SDXL_FIGURES, *OOM_FIGURES, *ALL_FLUX_FIGURES)

PROMPT = "a lighthouse on a cliff at dusk, oil painting"
NEGATIVE = "blurry"
SDXL_CFG, FLUX_GUIDANCE, IMG2IMG_STRENGTH = 5.0, 3.5, 0.6
# A full-size Flux.1 on the GPU: its 12 B transformer in bfloat16 (22 GiB), the other parts
# and the activations of a 1024 px step; and its files on disk (written once, read twice).
FLUX_NEEDS_GPU_GIB, FLUX_NEEDS_DISK_GIB = 36, 30
# The forced out-of-memory: a GPU cap of the UNet's weights and this much more, under the
# whole pipeline's weights (so putting it all on the GPU fails) and above what offloading
# needs at `Plan.oom_size` (one part on the GPU at a time, the UNet the largest).
OOM_HEADROOM_BYTES = 1 << 30
GIB = 1 << 30
# The whole script's time (the docstring's "under 8 minutes"); compiling comes last and
# only starts with this much of it left: Inductor compiling Flux.1's two block classes on
# an H100 (an estimate: 1 to 2 minutes, never measured here) and the two compiled jobs.
BUDGET_S, FLUX_COMPILE_NEEDS_S = 480, 180


@dataclass(frozen=True)
class Plan:
    """Sizes of one run: the GPU's 1024 px, or `--smoke`'s tiny ones on the CPU."""

    device: str
    size: int  # pixels per side (the figures' names say 1024: the GPU's size)
    steps: int  # of each SDXL job, queued and direct
    timed_steps: int  # steps timed for a step_ms, after one warm-up step
    rounds: int  # timed images per side of the queue/direct ratio, after one warm-up
    oom_size: int
    flux_steps: int
    budget_s: float = BUDGET_S  # `--budget`: compiling starts only with time left (above)
    # torch.compile's backend for a job's `compile`: the smoke run's "eager" (dynamo traces
    # the blocks through Easel's same code, builds nothing) because Inductor's C++ build of
    # even the tiny transformer took 79 s on this 2-core machine.
    compile_backend: str = "inductor"

    @property
    def smoke(self) -> bool:
        return self.device == "cpu"

    @property
    def threads(self) -> int | None:
        """torch's CPU threads: one for the smoke run (tiny ops on a busy machine wait for a
        second thread longer than they compute: measured 10x slower), else torch's own."""
        return 1 if self.smoke else None


GPU_PLAN = Plan("cuda", size=1024, steps=20, timed_steps=10, rounds=2, oom_size=512, flux_steps=4)
SMOKE_PLAN = Plan(
    "cpu", size=64, steps=2, timed_steps=2, rounds=1, oom_size=64, flux_steps=2,
    compile_backend="eager",
)  # fmt: skip


class Report:
    """Prints `name: value` lines; a section that fails names each figure it left out."""

    def __init__(self) -> None:
        self.printed: set[str] = set()

    def __call__(self, name: str, value: object) -> None:
        print(f"{name}: {value}", flush=True)
        self.printed.add(name)

    @contextmanager
    def section(self, names: tuple[str, ...]) -> Iterator[None]:
        """Each figure of `names` not printed when the section raises: `failed: <why>`,
        the traceback on stderr; the next section still runs."""
        try:
            yield
        except Exception as error:  # a one-shot GPU run reports what it can
            traceback.print_exc(file=sys.stderr)
            why = " ".join(f"{type(error).__name__}: {error}".split())[:300]
            for name in names:
                if name not in self.printed:
                    self(name, f"failed: {why}")


def run_all(plan: Plan, work: Path) -> None:
    report = Report()
    _quiet()
    if plan.threads is not None:
        torch.set_num_threads(plan.threads)
    report("device", _device_line(plan))
    picture = init_picture(plan.size)
    started = time.perf_counter()
    with report.section((*SDXL_FIGURES, *OOM_FIGURES)):
        folder = write_sdxl(work / "sdxl-random", plan.device, picture, smoke=plan.smoke)
        report("sdxl_written_s", f"{time.perf_counter() - started:.1f}")
        model = detected(ModelInfo("sdxl-random", folder, ModelSource.USER))
        with report.section(SDXL_FIGURES):
            _sdxl_figures(plan, model, picture, work, report)
        with report.section(OOM_FIGURES):
            report("oom_retry_ok", _oom_retry(plan, model, work))
        shutil.rmtree(folder)  # room on the disk for Flux
    with report.section(ALL_FLUX_FIGURES):
        _flux_figures(plan, work, report, started)
    report("total_s", f"{time.perf_counter() - started:.0f}")


# --- SDXL -------------------------------------------------------------------------------


def _sdxl_figures(
    plan: Plan, model: ModelInfo, picture: Image.Image, work: Path, report: Report
) -> None:
    params = GenerationParams(
        prompt=PROMPT, negative_prompt=NEGATIVE, model=model.name, steps=plan.steps,
        cfg=SDXL_CFG, width=plan.size, height=plan.size, seed=42,
    )  # fmt: skip
    stock_step_ms, direct_s = _stock_sdxl(plan, model.path, params, work)
    report("step_ms_stock_sdxl_1024", f"{stock_step_ms:.1f}")
    with _easel_dtype(plan, "float16"):
        runner = Runner(device=pick_device(), resolve=lambda _name: model)
        try:
            pipe = runner.load(model.name).pipe
            report("step_ms_sdxl_1024", f"{_easel_step_ms(plan, pipe, params):.1f}")
            queued_s, peak_mb = _queued(plan, runner, params, work)
            report("queue_vs_direct_ratio_sdxl_1024", f"{direct_s / queued_s:.3f}")
            report("vram_peak_mb_sdxl", peak_mb)
            report("sdxl_img2img_fp16_finite", _img2img_finite(plan, runner, model, picture, work))
        finally:
            runner.cache.clear()
            _free(plan)


def _stock_sdxl(
    plan: Plan, folder: Path, params: GenerationParams, work: Path
) -> tuple[float, float]:
    """Stock `StableDiffusionXLPipeline` as its users load it (float16, then `.to`): the
    median step in ms, and the median seconds of one whole image, PNG written."""
    from diffusers import StableDiffusionXLPipeline

    stock: dict[str, Any] = {
        "pipe": StableDiffusionXLPipeline.from_pretrained(
            folder, dtype=SDXL_DTYPE, local_files_only=True
        ).to(plan.device)
    }
    stock["pipe"].set_progress_bar_config(disable=True)
    ends: list[float] = []

    def at_step_end(_pipe: Any, _i: int, _t: Any, tensors: dict[str, Any]) -> dict[str, Any]:
        _sync(plan)
        ends.append(time.perf_counter())
        return tensors

    def image(seed: int, steps: int, **extra: Any) -> Image.Image:
        return stock["pipe"](
            prompt=params.prompt, negative_prompt=params.negative_prompt,
            num_inference_steps=steps, guidance_scale=params.cfg, width=params.width,
            height=params.height, generator=torch.Generator().manual_seed(seed), **extra,
        ).images[0]  # fmt: skip

    try:
        image(0, params.steps)  # warm-up: kernels chosen, memory reserved
        image(1, plan.timed_steps + 1, callback_on_step_end=at_step_end)
        step_ms = statistics.median(np.diff(ends) * 1000)  # the first step: its warm-up
        seconds = []
        for seed in range(plan.rounds):
            begun = time.perf_counter()
            image(seed, params.steps).save(work / "stock.png")
            seconds.append(time.perf_counter() - begun)
        return step_ms, statistics.median(seconds)
    finally:
        stock.clear()  # its 7 GB off the GPU before Easel loads its own
        _free(plan)


def _easel_step_ms(plan: Plan, pipe: Any, params: GenerationParams) -> float:
    """Easel's loop, one step (UNet with CFG + scheduler) at a time, after one warm-up."""
    return _step_ms(pipe, params, steps=plan.timed_steps, sync=lambda: _sync(plan))


def _queued(plan: Plan, runner: Runner, params: GenerationParams, work: Path) -> tuple[float, str]:
    """Median seconds of one job submitted to a real queue (a SQLite file) and run by a
    warm headless worker, as `python -m app worker` runs it; and the most GPU memory
    allocated meanwhile, in MB."""
    if plan.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    seconds = []
    for seed in range(plan.rounds + 1):  # the first: a warm-up, as on the stock side
        bench = _Bench(runner, work)
        job_id = bench.queue.submit(GenerationParams(**{**params.to_dict(), "seed": seed}))
        elapsed = bench.drain()
        job = bench.queue.get(job_id)
        bench.queue.db.dispose()
        if job.status != JobStatus.SUCCESS:
            raise RuntimeError(f"the queued job ended {job.status}: {job.error}")
        seconds.append(elapsed)
    if plan.device != "cuda":
        return statistics.median(seconds[1:]), "n/a (no GPU: smoke run on the CPU)"
    return statistics.median(seconds[1:]), str(torch.cuda.max_memory_allocated() // 2**20)


def _img2img_finite(
    plan: Plan, runner: Runner, model: ModelInfo, picture: Image.Image, work: Path
) -> str:
    """1 when Easel's img2img in float16 gives a finite, non-blank image from a VAE whose
    encoder overflows float16 (and whose config says `force_upcast`); 0 and why if not."""
    if not _encoder_overflows_in_float16(plan, model.path, picture):
        return "not measured: the stressed VAE encoder stays finite in float16 (no check)"
    params = GenerationParams(
        prompt=PROMPT, negative_prompt=NEGATIVE, model=model.name, steps=plan.steps,
        cfg=SDXL_CFG, width=plan.size, height=plan.size, seed=7, init_image="job:1",
        strength=IMG2IMG_STRENGTH,
    )  # fmt: skip
    try:
        outcome = _run(runner, params, work / "img2img.png", init_image=_png(picture))
    except NonFiniteLatents as error:
        return f"0 ({error})"
    return _image_verdict(outcome)


def _encoder_overflows_in_float16(plan: Plan, folder: Path, picture: Image.Image) -> bool:
    """The check can fail: the VAE encoder, run plainly in float16, gives NaN or inf."""
    from diffusers import AutoencoderKL

    vae = AutoencoderKL.from_pretrained(folder / "vae", dtype=torch.float16)
    with torch.no_grad():
        moments = (
            vae.to(plan.device)
            .encode(picture_tensor(picture, plan.device, torch.float16))
            .latent_dist.mean
        )
    overflows = not bool(torch.isfinite(moments).all())
    del vae, moments
    _free(plan)
    return overflows


def _oom_retry(plan: Plan, model: ModelInfo, work: Path) -> str:
    """1 when a job that runs out of GPU memory is retried in low-VRAM mode (model CPU
    offload, VAE tiling) and finishes with a real image, the timeline told."""
    params = GenerationParams(
        prompt=PROMPT, negative_prompt=NEGATIVE, model=model.name, steps=plan.steps,
        cfg=SDXL_CFG, width=plan.oom_size, height=plan.oom_size, seed=3,
    )  # fmt: skip
    with _easel_dtype(plan, "float16"):
        runner = Runner(device=pick_device(), resolve=lambda _name: model)
        try:
            with _out_of_memory_forced(plan, runner, model):
                outcome = _run(runner, params, work / "oom.png")
        except Exception as error:  # the retry ran out too (or said it cannot fit)
            if not (is_out_of_memory(error) or isinstance(error, EaselError)):
                raise
            return f"0 ({type(error).__name__}: {' '.join(str(error).split())[:300]})"
        finally:
            runner.cache.clear()
            _free(plan)
    if outcome.note != LOW_VRAM_NOTE:
        return f"0 (no low-VRAM retry happened; the outcome's note: {outcome.note!r})"
    return _image_verdict(outcome)


@contextmanager
def _out_of_memory_forced(plan: Plan, runner: Runner, model: ModelInfo) -> Iterator[None]:
    """On the GPU: cap this process's GPU memory below the whole pipeline's weights and
    above the UNet's (`OOM_HEADROOM_BYTES`), so the normal load runs out and the offloaded
    retry fits. On the CPU (smoke): the UNet's first call raises torch's out-of-memory
    error once, as CUDA would."""
    if plan.device != "cuda":
        pipe = runner.load(model.name).pipe
        hook = pipe.unet.register_forward_pre_hook(_out_of_memory)
        try:
            yield
        finally:
            hook.remove()
        return
    _free(plan)
    whole = sum(path.stat().st_size for path in weight_files(model.path))
    unet = sum(path.stat().st_size for path in weight_files(model.path / "unet"))
    cap = unet + OOM_HEADROOM_BYTES
    if cap >= whole:
        raise RuntimeError(f"cannot force it: a cap of {cap} B holds the whole {whole} B")
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(cap / total)
    try:
        yield
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)


def _out_of_memory(_module: Any, _args: Any) -> None:
    raise torch.OutOfMemoryError("CUDA out of memory (forced by benchmarks/gpu.py --smoke)")


# --- Flux.1 -----------------------------------------------------------------------------


def _flux_figures(plan: Plan, work: Path, report: Report, started: float) -> None:
    """Flux.1 dev-style, full size, in bfloat16: stock `FluxPipeline`'s image first (one
    12 B model on the GPU at a time), then on one loaded Easel model: its step time, its
    image against stock's, the step-cached job and, last, the compiled ones."""
    why_not = _no_room_for_flux(plan, work)
    if why_not:
        for name in ALL_FLUX_FIGURES:
            report(name, f"not run: {why_not}")
        return
    written = time.perf_counter()
    folder = write_flux(work / "flux-random", plan.device, smoke=plan.smoke)
    report("flux_written_s", f"{time.perf_counter() - written:.1f}")
    model = detected(ModelInfo("flux-random", folder, ModelSource.USER))
    params = GenerationParams(
        prompt=PROMPT, model=model.name, steps=plan.flux_steps, cfg=FLUX_GUIDANCE,
        width=plan.size, height=plan.size, seed=42,
    )  # fmt: skip
    stock = _stock_flux(plan, folder, params)
    with _easel_dtype(plan, "bfloat16"):
        runner = Runner(device=pick_device(), resolve=lambda _name: model)
        try:
            with report.section(FLUX_FIGURES):
                _easel_flux(plan, runner, params, stock, work, report)
            with report.section(CACHED_FIGURES):
                _cached_flux(plan, runner, params, work, report)
            with report.section(COMPILED_FIGURES):
                _compiled_flux(plan, runner, params, work, report, started)
        finally:
            runner.cache.clear()
            _free(plan)
    shutil.rmtree(folder)


def _easel_flux(
    plan: Plan,
    runner: Runner,
    params: GenerationParams,
    stock: Image.Image,
    work: Path,
    report: Report,
) -> None:
    """Easel's step time (uncached, eager), and its image against stock's, 1/255 units."""
    pipe = runner.load(params.model).pipe
    ran_in = str(pipe.transformer.dtype).removeprefix("torch.")
    report("step_ms_flux_1024", f"{_easel_step_ms(plan, pipe, params):.1f}")
    ours = work / "flux-easel.png"
    _run(runner, params, ours)
    difference = max_diff(pixels(ours), pixels(stock))
    note = "" if ran_in == "bfloat16" else f" (Easel ran {ran_in})"
    report("flux_bf16_same_as_diffusers_max_diff", f"{difference}{note}")


@dataclass
class _Steps:
    """A job's `on_step`: when each step ended, the runner's denoising time so far, and
    how many steps ran the whole transformer (with step caching, the First Block Cache's
    decision as the job's checkpoint keeps it; every step when uncached)."""

    pipe: Any
    ends: list[float] = field(default_factory=list)
    elapsed_s: float = 0.0
    full: int = 0

    def __call__(self, progress: StepProgress) -> StepDecision:
        self.ends.append(time.perf_counter())  # after the runner's finiteness check: synced
        self.elapsed_s = progress.elapsed_s
        decisions = [state["should_compute"] for state in step_cache.saved(self.pipe).values()]
        self.full += all(decisions)  # Flux.1 has one context ("cond"); none when uncached
        return StepDecision.CONTINUE

    def mean_ms(self) -> float:
        """Over the whole job, its first step included (always computed in full)."""
        return 1000 * self.elapsed_s / len(self.ends)

    def median_ms(self) -> float:
        """Of the steps after the first, as `step_ms_flux_1024`."""
        return float(statistics.median(np.diff(self.ends) * 1000))


def _cached_flux(
    plan: Plan, runner: Runner, params: GenerationParams, work: Path, report: Report
) -> None:
    """A job at speed "fast" (First Block Cache at its threshold), as `step_ms_flux_1024`'s
    steps (one warm-up and `timed_steps`), after a short cached job (the hook's first
    calls): the mean wall time per step over the job (a skipped step costs the first block
    only, so the mean is what caching saves), and the steps that ran the whole transformer
    / steps (random weights change more from step to step than trained ones: few or no
    steps are skipped at "fast"'s threshold, see benchmarks/speed.py)."""
    cached = {**params.to_dict(), "speed": SPEED_FAST}
    _run(runner, GenerationParams(**{**cached, "steps": 2}), work / "flux-cached.png")
    steps = _Steps(runner.load(params.model).pipe)
    timed = GenerationParams(**{**cached, "steps": plan.timed_steps + 1})
    _run(runner, timed, work / "flux-cached.png", on_step=steps)
    report("step_ms_flux_1024_cached", f"{steps.mean_ms():.1f}")
    report("flux_1024_cached_model_calls_ratio", f"{steps.full / len(steps.ends):.3f}")


def _compiled_flux(
    plan: Plan,
    runner: Runner,
    params: GenerationParams,
    work: Path,
    report: Report,
    started: float,
) -> None:
    """Jobs with `compile` (uncached): the first compiles the transformer's repeated blocks
    in its first step, and its timeline's "compiling the model… (once) took N s" gives
    `flux_1024_compile_s`; the next, as `step_ms_flux_1024`'s steps, the median step. A
    compile that failed (the job then ran eagerly, its note says why) is reported so."""
    why_not = _no_time_to_compile(plan, time.perf_counter() - started)
    if why_not:
        for name in COMPILED_FIGURES:
            report(name, f"not run: {why_not}")
        return
    wanted = {**params.to_dict(), "compile": True}
    backend, compiled.BACKEND = compiled.BACKEND, plan.compile_backend
    try:  # compiled lazily: in the first job's first step
        first = _run(runner, GenerationParams(**{**wanted, "steps": 2}), work / "flux-compiled.png")
    finally:
        compiled.BACKEND = backend
    seconds = _compile_seconds(first.load_note)
    pipe = runner.load(params.model).pipe
    if seconds is None or not compiled.is_compiled(pipe):
        why = first.note or f"no compile reported ({first.load_note!r})"
        for name in COMPILED_FIGURES:
            report(name, f"not compiled: {why}")
        return
    report("flux_1024_compile_s", f"{seconds:.1f}")
    steps = _Steps(pipe)
    timed = GenerationParams(**{**wanted, "steps": plan.timed_steps + 1})
    _run(runner, timed, work / "flux-compiled.png", on_step=steps)
    report("step_ms_flux_1024_compiled", f"{steps.median_ms():.1f}")


def _no_time_to_compile(plan: Plan, spent_s: float) -> str:
    """Why the compiled jobs are not run ("" when they are): less of the script's budget
    left than compiling needs."""
    left = plan.budget_s - spent_s
    if left >= FLUX_COMPILE_NEEDS_S:
        return ""
    return (
        f"{max(left, 0):.0f} s left of the script's {plan.budget_s:.0f} s, compiling Flux.1's "
        f"blocks and two jobs need about {FLUX_COMPILE_NEEDS_S} s (`--budget` gives more)"
    )


_COMPILE_TOOK = re.compile(re.escape(compiled.COMPILING) + r" took ([0-9.]+) s")


def _compile_seconds(load_note: str) -> float | None:
    """The seconds of a job's "compiling the model… (once) took 41.2 s"; None without."""
    found = _COMPILE_TOOK.search(load_note)
    return float(found.group(1)) if found else None


def _no_room_for_flux(plan: Plan, work: Path) -> str:
    if plan.device != "cuda":
        return ""
    free_gpu = torch.cuda.mem_get_info()[0] / GIB
    if free_gpu < FLUX_NEEDS_GPU_GIB:
        return f"a full-size Flux.1 needs {FLUX_NEEDS_GPU_GIB} GiB on the GPU, {free_gpu:.0f} free"
    free_disk = shutil.disk_usage(work).free / GIB
    if free_disk < FLUX_NEEDS_DISK_GIB:
        return f"its files need {FLUX_NEEDS_DISK_GIB} GiB on disk, {free_disk:.0f} free in {work}"
    return ""


def _stock_flux(plan: Plan, folder: Path, params: GenerationParams) -> Image.Image:
    """Stock `FluxPipeline` as its model card calls it: bfloat16, a CPU generator."""
    from diffusers import FluxPipeline

    pipe: Any = FluxPipeline.from_pretrained(folder, dtype=FLUX_DTYPE, local_files_only=True)
    pipe.to(plan.device)
    pipe.set_progress_bar_config(disable=True)
    try:
        image: Image.Image = pipe(
            prompt=params.prompt, num_inference_steps=params.steps, guidance_scale=params.cfg,
            width=params.width, height=params.height,
            generator=torch.Generator().manual_seed(params.seed),
        ).images[0]  # fmt: skip
        return image
    finally:
        del pipe
        _free(plan)


# --- shared -----------------------------------------------------------------------------


@contextmanager
def _easel_dtype(plan: Plan, name: str) -> Iterator[None]:
    """Smoke: $EASEL_DTYPE forces the GPU's dtype on the CPU, so the same half-precision
    paths run. On the GPU Easel chooses by itself: that choice is part of what is checked."""
    if not plan.smoke:
        yield
        return
    before = os.environ.get(DTYPE_ENV)
    os.environ[DTYPE_ENV] = name
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(DTYPE_ENV, None)
        else:
            os.environ[DTYPE_ENV] = before


def _run(
    runner: Runner,
    params: GenerationParams,
    out: Path,
    init_image: bytes | None = None,
    on_step: Callable[[StepProgress], StepDecision] | None = None,
) -> GenerationOutcome:
    return runner.run(
        params, RunInputs(init_image=init_image), output_path=out,
        checkpoint_path=out.with_suffix(".ckpt"), on_step=on_step or _go,
    )  # fmt: skip


def _go(_progress: StepProgress) -> StepDecision:
    return StepDecision.CONTINUE


def _image_verdict(outcome: GenerationOutcome) -> str:
    if outcome.image_path is None:
        return f"0 (no image: the job ended {outcome.kind.value})"
    image = pixels(outcome.image_path)
    if int(image.max()) == int(image.min()):
        return f"0 (the image is one colour, {int(image.max())})"
    return "1"


def _png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def _sync(plan: Plan) -> None:
    if plan.device == "cuda":
        torch.cuda.synchronize()


def _free(plan: Plan) -> None:
    """Give the GPU back what the last part held (the CPU's few MB can wait for Python)."""
    if plan.device == "cuda":
        gc.collect()
        torch.cuda.empty_cache()


def _device_line(plan: Plan) -> str:
    import diffusers

    versions = f"torch {torch.__version__}, diffusers {diffusers.__version__}"
    if plan.device != "cuda":
        return f"cpu (--smoke: {plan.size} px, {plan.steps} steps; not a speed figure), {versions}"
    gpu = torch.cuda.get_device_properties(0)
    return f"{gpu.name} ({gpu.total_memory / GIB:.0f} GiB, sm_{gpu.major}{gpu.minor}), {versions}"


def _quiet() -> None:
    import diffusers
    import transformers

    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    diffusers.utils.logging.disable_progress_bar()
    diffusers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()

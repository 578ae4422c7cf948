"""Step caching (a job's speed, issue 40) on a medium random-weight Flux-shaped transformer,
through Easel's own loop: prints `name: value` lines.

The model: `FluxTransformer2DModel` built here (hidden size 512 = 8 heads of 64, 2 double
and 10 single blocks, about 60M parameters), with the tiny Flux.1 dev-style text encoders
and VAE of `app.testing.tiny.flux`, drawing 256x256 px (256 image tokens and T5's 512 text
tokens): the transformer is nearly all of a step's time on a CPU.
- `cache_model_calls_ratio`: steps on which the whole transformer ran (First Block Cache
  decided to compute its other blocks) / steps, at the threshold used;
- `cache_wall_ratio`: wall time of the cached job / the uncached one (the same run, each
  timed from `denoise.start` to the decoded image, best of `--repeats`);
  `cache_cpu_ratio`: the same with this process's CPU time, steadier on a shared machine
  (where other processes' load stretches wall time by chance);
- `cache_vs_uncached_psnr_db`: PSNR of the cached image against the uncached one (8-bit
  pixels): what the speed costs in fidelity to the uncached image;
- `cache_same_as_diffusers_max_diff`: pixel difference (of 255) between Easel's cached
  image and stock `FluxPipeline`'s with `transformer.enable_cache(FirstBlockCacheConfig(
  threshold))` on the same components;
- `cache_pause_resume_max_diff`: between the uninterrupted cached run and one paused at
  step `steps // 2`, written to a checkpoint file, the hook taken off, and resumed on a
  second copy of the pipeline made before any job ran (nothing shared in memory but the
  checkpoint file; the fresh-process resume itself is tested in
  tests/engine/generation/test_step_cache.py);
- `cache_threshold`, `cache_steps`: what the figures were measured at.
- `compile_speedup_ratio`: a step's time with the transformer compiled (a job's `compile`:
  `load/compiled.py`, inductor) / its eager time, uncached, medians after a warm-up run
  of each (below 1: compiling pays);
- `compile_first_job_extra_s`: the first compiled job's wall time less an eager job's,
  with an empty compile cache (the one-off cost an artist waits for once per model);
  `compile_cached_first_job_extra_s`: the same after dynamo forgot it, the compile cache
  on disk kept (what a later worker pays); `compile_vs_eager_max_diff`: pixels apart;
  `compile_backend`: torch.compile's backend (the smoke run uses dynamo's "eager", which
  traces but builds nothing, to stay quick; `--no-compile` skips these figures).

Random weights are not a trained model: the first block's residual changes far more from
step to step than a trained Flux.1's: at the "fast" setting's 0.08 (tuned by the method's
authors on FLUX.1-dev), and at 0.2, 0.3 and 0.4, this model skips no step of 28 (measured;
it then runs as uncached plus the hook's small cost). The threshold is therefore given
(`--threshold`, default 0.5 with 28 steps, Flux.1-dev's default count, where this model
runs 12 of 28 steps in full) and printed; `--speed fast` measures the setting's own.

Compiling needs a C compiler (gcc) on a CPU. Run: `.venv/bin/python benchmarks/speed.py`
(`--smoke`: a tiny model and 4 steps, every code path and figure in seconds, for
tests/benchmarks/test_speed.py).
"""

from __future__ import annotations

import argparse
import copy
import io
import math
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from app.engine.generation import denoise
from app.engine.generation.load import compiled
from app.engine.generation.loop import step_cache
from app.engine.generation.loop.checkpoint import load_checkpoint, save_checkpoint
from app.engine.jobs.params import SPEED_THRESHOLDS, GenerationParams


@dataclass(frozen=True)
class Shape:
    """The transformer built, the image drawn and the steps."""

    heads: int
    head_dim: int
    double_blocks: int
    single_blocks: int
    axes: tuple[int, int, int]  # rotary axes, summing to head_dim
    side: int  # pixels
    steps: int
    threshold: float


MEDIUM = Shape(8, 64, 2, 10, (16, 24, 24), 256, 28, 0.5)
SMOKE = Shape(2, 16, 1, 2, (4, 6, 6), 64, 4, 0.5)


def build_pipe(shape: Shape) -> Any:
    """The tiny Flux.1 dev-style pipeline with a transformer of `shape` (seeded weights:
    every call builds the same model)."""
    from diffusers import FluxTransformer2DModel

    from app.testing.tiny.flux import CLIP_WIDTH, FLUX_LATENT_CHANNELS, T5_WIDTH, build_tiny_flux

    pipe = build_tiny_flux(guidance_embeds=True)
    with torch.random.fork_rng():
        torch.manual_seed(1)
        transformer: Any = FluxTransformer2DModel(
            patch_size=1,
            in_channels=FLUX_LATENT_CHANNELS * 4,
            num_layers=shape.double_blocks,
            num_single_layers=shape.single_blocks,
            attention_head_dim=shape.head_dim,
            num_attention_heads=shape.heads,
            joint_attention_dim=T5_WIDTH,
            pooled_projection_dim=CLIP_WIDTH,
            guidance_embeds=True,
            axes_dims_rope=shape.axes,
        )
    pipe.transformer = transformer.eval()  # as `from_pretrained` leaves it
    pipe.set_progress_bar_config(disable=True)
    return pipe


def params_for(shape: Shape, threshold: float) -> GenerationParams:
    speed = "fast" if threshold else "off"
    return GenerationParams(
        prompt="a lighthouse at dusk", model="medium-flux", steps=shape.steps, cfg=3.5,
        width=shape.side, height=shape.side, seed=11, speed=speed, speed_threshold=threshold,
    ).validated()  # fmt: skip


@dataclass
class Run:
    image: np.ndarray
    seconds: float  # wall
    cpu_seconds: float  # this process's
    full_steps: int
    step_seconds: list[float]  # each step's wall time


def easel(pipe: Any, params: GenerationParams, pause_at: int | None = None) -> Any:
    """Easel's loop on `pipe`; with `pause_at`, the state after that many steps instead."""
    started, cpu_started = time.perf_counter(), time.process_time()
    state = denoise.start(pipe, params)
    full_steps, step_seconds = 0, []
    while not state.finished:
        step_started = time.perf_counter()
        denoise.advance(pipe, state)
        step_seconds.append(time.perf_counter() - step_started)
        if params.cache_threshold:
            full_steps += step_cache.saved(pipe)["cond"]["should_compute"]
        if pause_at is not None and state.steps_done == pause_at:
            return state
    image = _pixels(denoise.decode(pipe, state))
    cpu = time.process_time() - cpu_started
    return Run(image, time.perf_counter() - started, cpu, full_steps, step_seconds)


def stock(pipe: Any, params: GenerationParams) -> np.ndarray:
    """Stock `FluxPipeline` on the same components, with the hook as diffusers documents it."""
    from diffusers.hooks import FirstBlockCacheConfig

    if pipe.transformer.is_cache_enabled:  # Easel's last job left its hook on
        pipe.transformer.disable_cache()
    pipe.transformer.enable_cache(FirstBlockCacheConfig(threshold=params.cache_threshold))
    try:
        image = pipe(
            params.prompt, num_inference_steps=params.steps, guidance_scale=params.cfg,
            height=params.height, width=params.width,
            generator=torch.Generator("cpu").manual_seed(params.seed),
        ).images[0]  # fmt: skip
    finally:
        pipe.transformer.disable_cache()
    return _pixels(image)


def resumed(first: Any, second: Any, params: GenerationParams, folder: Path) -> np.ndarray:
    """Paused at half the steps on `first` into a checkpoint file, resumed on `second`."""
    state = easel(first, params, pause_at=params.steps // 2)
    path = folder / "paused.ckpt"
    save_checkpoint(path, denoise.snapshot(state, params, 0.0))
    first.transformer.disable_cache()  # the paused job's hook and state are gone
    saved = load_checkpoint(path, params).checkpoint
    state = denoise.restore(second, params, saved)
    while not state.finished:
        denoise.advance(second, state)
    return _pixels(denoise.decode(second, state))


def _pixels(image: Any) -> np.ndarray:
    return np.asarray(image.convert("RGB"), dtype=np.int16)


def max_diff(a: np.ndarray, b: np.ndarray) -> int:
    return int(np.abs(a - b).max())


def psnr_db(image: np.ndarray, reference: np.ndarray) -> float:
    mse = float(np.mean((image.astype(np.float64) - reference) ** 2))
    return math.inf if mse == 0 else 10 * math.log10(255.0**2 / mse)


def measure(shape: Shape, threshold: float, repeats: int, warm_up: bool) -> dict[str, Any]:
    pipe = build_pipe(shape)
    second = copy.deepcopy(pipe)  # before any job: no hook, no cache state, no memory shared
    cached_params, plain_params = params_for(shape, threshold), params_for(shape, 0.0)
    if warm_up:
        easel(pipe, plain_params)  # first calls allocate
    plain = [easel(pipe, plain_params) for _ in range(repeats)]
    cached = [easel(pipe, cached_params) for _ in range(repeats)]
    best_plain = min(plain, key=lambda run: run.seconds)
    best_cached = min(cached, key=lambda run: run.seconds)
    theirs = stock(pipe, cached_params)
    with tempfile.TemporaryDirectory() as folder:
        again = resumed(pipe, second, cached_params, Path(folder))
    return {
        "cache_threshold": f"{threshold:g}",
        "cache_steps": shape.steps,
        "cache_model_calls_ratio": f"{best_cached.full_steps / shape.steps:.3f}",
        "cache_wall_ratio": f"{best_cached.seconds / best_plain.seconds:.3f}",
        "cache_cpu_ratio": f"{best_cached.cpu_seconds / best_plain.cpu_seconds:.3f}",
        "cache_uncached_step_ms": f"{1000 * best_plain.seconds / shape.steps:.1f}",
        "cache_vs_uncached_psnr_db": f"{psnr_db(best_cached.image, best_plain.image):.2f}",
        "cache_same_as_diffusers_max_diff": max_diff(best_cached.image, theirs),
        "cache_pause_resume_max_diff": max_diff(best_cached.image, again),
    }


def measure_compile(shape: Shape, repeats: int, backend: str) -> dict[str, Any]:
    """Compiled against eager on a fresh pipeline, uncached, through `compiled.prepare` as
    a job's `compile` runs it; the compile cache in a new temporary folder (cold). Eager
    and compiled runs alternate (`prepare` puts the compiled blocks aside and back), so a
    shared machine's changing load stretches both alike."""
    pipe = build_pipe(shape)
    params = params_for(shape, 0.0)
    with tempfile.TemporaryDirectory() as folder:
        previous, compiled.BACKEND = compiled.BACKEND, backend
        os.environ[compiled.CACHE_ENV] = folder
        try:
            easel(pipe, params)  # warm-up: first calls allocate
            eager_first = easel(pipe, params)
            compiled.prepare(pipe, True)
            first = easel(pipe, params)
            eager, warm = [eager_first], []
            for _ in range(repeats):
                compiled.prepare(pipe, False)
                eager.append(easel(pipe, params))
                compiled.prepare(pipe, True)
                warm.append(easel(pipe, params))
            torch._dynamo.reset()  # a later worker: traced again, its kernels on disk
            again = build_pipe(shape)
            compiled.prepare(again, True)
            cached_first = easel(again, params)
        finally:
            compiled.BACKEND = previous
            os.environ.pop(compiled.CACHE_ENV, None)
            torch._dynamo.reset()
    eager_job = _median([run.seconds for run in eager])
    eager_step = _median([t for run in eager for t in run.step_seconds])
    compiled_step = _median([t for run in warm for t in run.step_seconds])
    return {
        "compile_backend": backend,
        "compile_eager_step_ms": f"{1000 * eager_step:.1f}",
        "compile_compiled_step_ms": f"{1000 * compiled_step:.1f}",
        "compile_speedup_ratio": f"{compiled_step / eager_step:.3f}",
        "compile_first_job_extra_s": f"{first.seconds - eager_job:.1f}",
        "compile_cached_first_job_extra_s": f"{cached_first.seconds - eager_job:.1f}",
        "compile_vs_eager_max_diff": max_diff(warm[0].image, eager[-1].image),
    }


def _median(values: list[float]) -> float:
    return float(np.median(values))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true", help="a tiny model, every figure")
    parser.add_argument("--speed", choices=[k for k, v in SPEED_THRESHOLDS.items() if v])
    parser.add_argument("--threshold", type=float, help="the cache's threshold (see above)")
    parser.add_argument("--steps", type=int)
    parser.add_argument("--no-compile", action="store_true", help="skip the compile figures")
    parser.add_argument("--no-cache", action="store_true", help="skip the cache figures")
    parser.add_argument("--repeats", type=int, default=2, help="timed runs of each; best kept")
    parser.add_argument(
        "--threads", type=int, default=1,
        help="torch's CPU threads (1: steadiest on a shared machine, where a busy core stalls "
        "every thread of a step at its barriers)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    shape = SMOKE if args.smoke else MEDIUM
    threshold = args.threshold or (SPEED_THRESHOLDS[args.speed] if args.speed else 0)
    shape = Shape(**{**vars(shape), "threshold": threshold or shape.threshold})
    if args.steps:
        shape = Shape(**{**vars(shape), "steps": args.steps})
    repeats = 1 if args.smoke else args.repeats
    threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    try:
        figures = {} if args.no_cache else measure(shape, shape.threshold, repeats, not args.smoke)
        if not args.no_compile:
            backend = "eager" if args.smoke else "inductor"
            figures.update(measure_compile(shape, repeats, backend))
    finally:
        torch.set_num_threads(threads)  # as it was (the smoke test runs in pytest's process)
    out = io.StringIO()
    for name, value in figures.items():
        print(f"{name}: {value}", file=out)
    print(out.getvalue(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())

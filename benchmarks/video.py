"""Video jobs' durability figures (issue 38) on a tiny random Wan 2.1: prints `name: value`.

- `video_checkpoint_mb[tiny-33f-<sampler>]`, `video_checkpoint_ms[tiny-33f-<sampler>]`: a
  rolling checkpoint of a 33-frame 64x64 clip of the tiny model (its latents, its prompt's
  and negative's UMT5 states, the scheduler's state and the generator), taken after its
  second step, with Euler and with UniPC (the released folders' default, whose history
  holds two more latent-sized outputs and the last sample): the file's size, and the
  median time of writing it as the rolling saver does (serialise, hash, write, fsync,
  rename); `video_checkpoint_interval_s[...]`: the default 10 s interval between rolling
  checkpoints as a worker stretches it for saves that long (`checkpoint_pacing`: at most
  2% of the run);
- `video_checkpoint_estimate_mb[wan2.1-480p-81f]`: what the submit check estimates such a
  clip's checkpoint at (`video_budget.checkpoint_bytes`, worst case: all float32);
- `video_checkpoint_mb[wan2.1-480p-81f-<sampler>]`, `..._ms[...]`: the same checkpoint with
  its tensors at the shapes of an 81-frame 832x480 Wan 2.1 clip, scaled by the latent
  shape (latents (1, 16, 21, 60, 104); UMT5-XXL states (1, 512, 4096) for the prompt and
  the negative), in the dtypes a GPU run in bfloat16 keeps them (Euler's latents in
  bfloat16 after a step, UniPC's in float32): written and timed here, on this disk;
- `video_checkpoint_overhead_ratio`: clips/s through a warm headless worker taking rolling
  checkpoints every `--interval` seconds (0.2 s: fifty times the default's rate), as the worker
  paces them (`checkpoint_pacing`: stretched so that saves, each counted from the loop's
  ask to its rename, cost at most 2% of the run) / the same with none; median of
  `--rounds` alternating pairs; everything a checkpoint brings is in the clips/s (the
  loop's copy, the saver's thread competing for the GIL and the cores, the file's removal
  at the end);
- `video_checkpoints_per_clip`: the rolling checkpoints the saving side's runs took, per
  run, to read the ratio with. The interval counts from the job's claim, and the 20-step
  clip is done denoising 0.35-0.7 s after it (the rest of its time is text encoding, the
  VAE's decode and the MP4): at 1 s it would take none, and the ratio would measure only
  the machine's noise; hence 0.2 s, one to three a clip (each costing the loop 3-4 ms,
  `checkpoint_pacing`). `--steps 150 --frames 65 --interval 1` denoises for 2.5-3.5 s:
  two checkpoints a clip at the interval a user may set;
- `video_encode_ms[480p-81f]`, `video_encode_ms[480p-81f-x264-own-pick]`: the MP4 of an
  81-frame 832x480 clip (drawn frames: a textured square crossing a gradient), as Easel
  encodes it (on a CPU with AVX-512, x264's AVX2 code, whose bytes are the frames' alone)
  and with x264 left to pick its own code (AVX-512 where the CPU has it); median of 3;
- `video_queue_vs_direct_ratio`: clips/s through submit + a warm headless worker (as
  `python -m app worker`) / the runner called in a loop (each clip written as its MP4 and
  first-frame PNG either way); median of `--rounds` alternating pairs, each side going
  first in every other pair. Warm on both sides alike:
  the loop's clock starts after one run, the worker's once its first job's run returned
  (its start, first statements on a new database and the full garbage collection the
  ORM's first use brings on happen once a worker's life; each job's claim, rows and
  settling are counted, the warm job's settling too).

The queue figures use clips of `--frames` frames (33) at 128x128 and `--steps` steps (20),
so a clip lasts a second or two on a CPU. Run: `.venv/bin/python benchmarks/video.py`
(`--smoke`: fewer, shorter clips, every figure in well under a minute).
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any, cast
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import torch
from PIL import Image

from app.engine.generation import denoise
from app.engine.generation.device import CPU
from app.engine.generation.files.sources import ModelInfo, ModelSource, detected
from app.engine.generation.loop.checkpoint import Checkpoint, save_checkpoint
from app.engine.generation.outcome import StepDecision, StepProgress
from app.engine.generation.runner import Runner
from app.engine.generation.video_budget import WAN21_RELEASED, checkpoint_bytes, clip_shape
from app.engine.jobs.params import KIND_VIDEO, GenerationParams
from app.engine.outputs import video
from app.engine.settings import Settings
from app.engine.workers.checkpoint_pacing import paced_interval_s
from app.testing.tiny.wan import write_tiny_wan
from benchmarks.generation import _go, _median_ratio, _queued_s, _quiet_progress_bars, report

SAVES = 7  # checkpoint writes timed per shape (the median is reported)
DEFAULT_INTERVAL_S = Settings().checkpoint_interval_s
# An 81-frame 832x480 Wan 2.1 clip, shaped as the submit check estimates it (its disk
# check): 4 frames a latent frame after the first, 8x8 pixels a latent pixel, 16 channels,
# (1, 16, 21, 60, 104); UMT5-XXL's width and the stock 512 tokens, (1, 512, 4096).
WAN_480P_81F = clip_shape(WAN21_RELEASED, frames=81, width=832, height=480)
WAN_480P_81F_LATENTS = WAN_480P_81F.latents
UMT5_XXL_STATES = WAN_480P_81F.text_states


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--frames", type=int, default=33, help="queue figures' clips (4k+1)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--clips", type=int, default=4, help="clips per queue/direct figure")
    parser.add_argument("--interval", type=float, default=0.2, help="rolling saves, seconds")
    parser.add_argument(
        "--rounds", type=int, default=7,
        help="alternating pairs per ratio (a 4-clip round spreads 0.75-1.1 on a busy machine)",
    )  # fmt: skip
    parser.add_argument("--smoke", action="store_true", help="9 frames, 4 steps, 2 clips")
    args = parser.parse_args(argv)
    if args.smoke:
        args.frames, args.steps, args.clips, args.rounds = 9, 4, 2, 1
    _quiet_progress_bars()
    torch.set_num_threads(1)  # a shared machine: one thread steadies the ratios
    with tempfile.TemporaryDirectory() as temp:
        work = Path(temp)
        model = detected(ModelInfo("wan", write_tiny_wan(work / "wan"), ModelSource.USER))
        runner = Runner(device=CPU, resolve=lambda _name: model, threads=1)
        base = GenerationParams(
            prompt="a red circle rolling", negative_prompt="blurry", model="wan", cfg=5.0,
            seed=42, kind=KIND_VIDEO,
        )  # fmt: skip
        _encode_figures()
        _checkpoint_figures(work, base)
        clip = replace(base, steps=args.steps, frames=args.frames, width=128, height=128)
        _queue_figures(runner, clip, work, args.clips, args.interval, args.rounds)


def _encode_figures() -> None:
    """The 480p clip's encode as Easel runs it, and with x264's own pick of code."""
    frames = _drawn_clip(frames=81, width=832, height=480)
    own_pick = {"crf": video.QUALITY}  # no `x264-params`: AVX-512 where the CPU has it
    for label, options in (
        ("480p-81f", video.encoder_options()),
        ("480p-81f-x264-own-pick", own_pick),
    ):
        with mock.patch.object(video, "encoder_options", lambda options=options: options):
            times = []
            for _ in range(3):
                started = time.perf_counter()
                video.encode_mp4(frames, io.BytesIO(), fps=16)
                times.append((time.perf_counter() - started) * 1000)
        report(f"video_encode_ms[{label}]", f"{statistics.median(times):.0f}")


def _drawn_clip(frames: int, width: int, height: int) -> list[Image.Image]:
    """A textured square crossing a gradient: motion and detail for the encoder."""
    rng = np.random.default_rng(0)
    ramp = np.add.outer(np.linspace(0, 160, height), np.linspace(0, 80, width))
    texture = rng.integers(0, 255, (96, 96, 3))
    clip = []
    for index in range(frames):
        picture = np.stack([ramp] * 3, axis=-1)
        left = (index * 8) % (width - 96)
        picture[160:256, left : left + 96] = texture
        clip.append(Image.fromarray(picture.clip(0, 255).astype(np.uint8)))
    return clip


def _checkpoint_figures(work: Path, base: GenerationParams) -> None:
    """Euler (on a folder that ships it) and UniPC (the released folders' default, on a
    folder shaped as they are): each a tiny clip's checkpoint after its second step, and
    the same scaled to a real 480p clip."""
    params = replace(base, steps=4, frames=33, width=64, height=64)
    for sampler, released in (("Euler", False), ("UniPC", True)):
        folder = write_tiny_wan(work / f"ckpt-{sampler}", released=released)
        model = detected(ModelInfo("wan", folder, ModelSource.USER))
        pipe = _runner_of(model).load("wan").pipe
        job = replace(params, scheduler=sampler)
        state = denoise.start(pipe, job)
        for _ in range(2):  # past UniPC's first step: its history is full
            denoise.advance(pipe, state)
        tiny = denoise.snapshot(state, job, elapsed_s=1.0)
        label = sampler.lower()
        _report_saves(f"tiny-33f-{label}", tiny, work)
        _report_saves(f"wan2.1-480p-81f-{label}", _scaled_to_480p(tiny), work)
    # The submit check's worst case (every tensor in float32, UniPC's copies): a bound on
    # the measured sizes above, which the disk must hold twice over.
    report(
        "video_checkpoint_estimate_mb[wan2.1-480p-81f]",
        f"{checkpoint_bytes(WAN_480P_81F) / 1e6:.2f}",
    )


def _runner_of(model: ModelInfo) -> Runner:
    return Runner(device=CPU, resolve=lambda _name: model, threads=1)


def _scaled_to_480p(tiny: Checkpoint) -> Checkpoint:
    """`tiny` with the tensors a real 81-frame 480p Wan 2.1 clip's checkpoint holds on a
    GPU in bfloat16: every latent-shaped tensor (the latents, UniPC's outputs and last
    sample) at the real shape, float32 where the run keeps float32 (UniPC) and bfloat16
    where the transformer's dtype (Euler); UMT5-XXL's states in bfloat16."""
    generator = torch.Generator().manual_seed(0)
    shape = tiny.latents.shape
    sampler_dtype = torch.float32 if "last_sample" in tiny.scheduler_state else torch.bfloat16

    def like(size: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        return torch.randn(size, generator=generator).to(dtype)

    def scaled(value: object) -> object:
        if isinstance(value, torch.Tensor) and value.shape == shape:
            return like(WAN_480P_81F_LATENTS, sampler_dtype)
        if isinstance(value, list):
            return [scaled(item) for item in value]
        return value

    conditioning = {name: like(UMT5_XXL_STATES, torch.bfloat16) for name in tiny.conditioning}
    state = {name: scaled(value) for name, value in tiny.scheduler_state.items()}
    return replace(
        tiny, latents=like(WAN_480P_81F_LATENTS, sampler_dtype), conditioning=conditioning,
        scheduler_state=state,
    )  # fmt: skip


def _report_saves(label: str, checkpoint: Checkpoint, work: Path) -> None:
    path = work / f"{label}.ckpt"
    times = []
    for _ in range(SAVES):
        started = time.perf_counter()
        save_checkpoint(path, checkpoint)
        times.append((time.perf_counter() - started) * 1000)
    median_ms = statistics.median(times)
    report(f"video_checkpoint_mb[{label}]", f"{path.stat().st_size / 1e6:.2f}")
    report(f"video_checkpoint_ms[{label}]", f"{median_ms:.1f}")
    # The default 10 s interval as a worker paces it for saves this long (2% of the run).
    paced_s = paced_interval_s(DEFAULT_INTERVAL_S, median_ms / 1000)
    report(f"video_checkpoint_interval_s[{label}]", f"{paced_s:.1f}")
    path.unlink()


def _queue_figures(
    runner: Runner,
    clip: GenerationParams,
    work: Path,
    clips: int,
    interval_s: float,
    rounds: int,
) -> None:
    direct = partial(_direct_s, runner, clip, work, clips)
    queued = partial(_queued_s, runner, clip, work, clips, after_warm_job=True)
    headless = partial(queued, checkpoint_interval_s=0.0)
    counted = _SavesCounted(runner)
    saving = partial(
        _queued_s, cast(Runner, counted), clip, work, clips, after_warm_job=True,
        checkpoint_interval_s=interval_s,
    )  # fmt: skip
    report("video_clip_s", f"{direct() / clips:.2f}")
    ratio = partial(_median_ratio, rounds=rounds, swap_order=True)
    report("video_queue_vs_direct_ratio", f"{ratio(direct, headless):.3f}")
    report("video_checkpoint_overhead_ratio", f"{ratio(headless, saving):.3f}")
    # Read the ratio with this: a clip whose denoising ends before the first interval is
    # up takes no rolling checkpoint, and its ratio then only measures the machine's noise.
    report("video_checkpoints_per_clip", f"{counted.asked / max(1, counted.runs):.2f}")


class _SavesCounted:
    """A runner that counts the rolling checkpoints its runs' step checkpoints ask for
    (the worker asks none while a save is in flight), else the same."""

    def __init__(self, runner: Runner) -> None:
        self._runner = runner
        self.asked = 0
        self.runs = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runner, name)

    def run(self, *args: Any, on_step: Any, **kwargs: Any) -> Any:
        self.runs += 1

        def counted(progress: StepProgress) -> StepDecision:
            decision = on_step(progress)
            self.asked += decision is StepDecision.CHECKPOINT
            return cast(StepDecision, decision)

        return self._runner.run(*args, on_step=counted, **kwargs)


def _direct_s(runner: Runner, clip: GenerationParams, work: Path, count: int) -> float:
    """Seconds for `count` clips from the runner in a loop (after one to warm it)."""
    warm = work / f"warm-{time.monotonic_ns()}.mp4"
    runner.run(clip, output_path=warm, checkpoint_path=work / "w.ckpt", on_step=_go)
    started = time.perf_counter()
    for seed in range(count):
        out = work / f"direct-{time.monotonic_ns()}.mp4"
        runner.run(
            replace(clip, seed=seed), output_path=out, checkpoint_path=work / "d.ckpt",
            on_step=_go,
        )  # fmt: skip
    return time.perf_counter() - started


if __name__ == "__main__":
    main()

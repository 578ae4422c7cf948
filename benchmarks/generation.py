"""Generation benchmark: prints `name: value` lines.

Uses the bundled model (resources/models/easel-tiny) if it is there, else a tiny random
pipeline written to a temp folder. Run: `.venv/bin/python benchmarks/generation.py [--threads N]`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import torch
from PIL import Image

from app.engine.generation import denoise
from app.engine.generation.device import pick_device
from app.engine.generation.outcome import StepDecision, StepProgress
from app.engine.generation.runner import Runner
from app.engine.generation.sources import ModelInfo, ModelSource
from app.engine.generation.tiny_model import write_tiny_pipeline
from app.engine.params import SCHEDULERS, GenerationParams
from benchmarks.architectures import run_architectures

BUNDLED = Path(__file__).resolve().parents[1] / "resources" / "models" / "easel-tiny"
STEPS, PAUSE_AT, TIMED_STEPS = 8, 3, 10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--model", type=Path, default=None, help="a diffusers pipeline folder")
    args = parser.parse_args()
    _quiet_progress_bars()
    with tempfile.TemporaryDirectory() as temp:
        work = Path(temp)
        model = _model(args.model, work)
        runner = Runner(
            device=pick_device(), resolve=lambda _name: model, threads=args.threads or None
        )
        report("model", f"{model.name} ({model.path})")
        report("device", f"{runner.device.device}/{runner.device.dtype_name}")
        report("threads", torch.get_num_threads())
        started = time.perf_counter()
        loaded = runner.load(model.name)
        report("load_s", f"{time.perf_counter() - started:.2f}")
        size = _default_size(loaded.pipe)
        report("size", f"{size}x{size}")
        params = GenerationParams(
            prompt="a red circle on a blue background",
            model=model.name,
            steps=STEPS,
            cfg=5.0,
            width=size,
            height=size,
            seed=42,
        )
        report("step_ms", f"{_step_ms(loaded.pipe, params):.1f}")
        report("preview_ms", f"{_preview_ms(runner, params):.2f}")
        kb, diff = _pause_resume(runner, params, work)
        report("checkpoint_kb", f"{kb:.1f}")
        report("pause_resume_max_diff", diff)
    run_architectures()  # per architecture on tiny random models: name[arch]: value


def _quiet_progress_bars() -> None:
    import diffusers
    import transformers

    diffusers.utils.logging.disable_progress_bar()
    transformers.utils.logging.disable_progress_bar()


def report(name: str, value: object) -> None:
    print(f"{name}: {value}", flush=True)


def _model(folder: Path | None, work: Path) -> ModelInfo:
    if folder is not None:
        return ModelInfo(folder.name, folder, ModelSource.USER)
    if (BUNDLED / "model_index.json").exists():
        return ModelInfo(BUNDLED.name, BUNDLED, ModelSource.BUNDLED)
    return ModelInfo("tiny-random", write_tiny_pipeline(work / "tiny-random"), ModelSource.USER)


def _default_size(pipe: object) -> int:
    unet, factor = getattr(pipe, "unet"), getattr(pipe, "vae_scale_factor")  # noqa: B009
    return int(unet.config.sample_size) * int(factor)


def _step_ms(pipe: object, params: GenerationParams) -> float:
    """Median UNet + scheduler step with CFG (two UNet batches), after one warm-up step."""
    timed = GenerationParams(**{**params.to_dict(), "steps": TIMED_STEPS + 1})
    state = denoise.start(pipe, timed)
    denoise.advance(pipe, state)
    times = []
    while not state.finished:
        started = time.perf_counter()
        denoise.advance(pipe, state)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def _preview_ms(runner: Runner, params: GenerationParams) -> float:
    loaded = runner.load(params.model)
    state = denoise.start(loaded.pipe, params)
    denoise.advance(loaded.pipe, state)
    times = []
    for _ in range(20):
        started = time.perf_counter()
        loaded.previewer.png(state.latents, (params.width, params.height))
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def _pause_resume(runner: Runner, params: GenerationParams, work: Path) -> tuple[float, int]:
    """Largest checkpoint (KB) and largest pixel difference (1/255 units) over all schedulers."""
    sizes, diffs = [], []
    for scheduler in SCHEDULERS:
        job = GenerationParams(**{**params.to_dict(), "scheduler": scheduler})
        reference, resumed, ckpt = work / "ref.png", work / "job.png", work / "job.ckpt"
        runner.run(job, output_path=reference, checkpoint_path=work / "ref.ckpt", on_step=_go)
        runner.run(job, output_path=resumed, checkpoint_path=ckpt, on_step=_pause)
        sizes.append(ckpt.stat().st_size / 1024)
        runner.run(job, output_path=resumed, checkpoint_path=ckpt, on_step=_go)
        diffs.append(_max_diff(reference, resumed))
    return max(sizes), max(diffs)


def _go(_: StepProgress) -> StepDecision:
    return StepDecision.CONTINUE


def _pause(progress: StepProgress) -> StepDecision:
    return StepDecision.PAUSE if progress.step == PAUSE_AT else StepDecision.CONTINUE


def _max_diff(a: Path, b: Path) -> int:
    with Image.open(a) as first, Image.open(b) as second:
        return int(np.abs(np.asarray(first, np.int16) - np.asarray(second, np.int16)).max())


if __name__ == "__main__":
    main()

"""The GPU check (issues 35 and 40): one script, under 8 minutes on one GPU, no downloads.

It builds a full-size random-weight SDXL (UNet, VAE, both text encoders: the released
networks, from the configs in resources/model_configs) and a full-size Flux.1 dev
transformer, on the GPU (benchmarks/gpu_models.py), writes them as diffusers folders and
prints `name: value` lines:
  step_ms_sdxl_1024                 Easel's loop, one 1024 px step (UNet with CFG + scheduler)
  step_ms_stock_sdxl_1024           the same step in stock `StableDiffusionXLPipeline`
  queue_vs_direct_ratio_sdxl_1024   seconds of one image from the stock pipeline called
                                    directly / of the same job (20 steps, PNG written)
                                    submitted to Easel's queue and run by a warm worker
  vram_peak_mb_sdxl                 the most GPU memory allocated during those queued jobs
  sdxl_img2img_fp16_finite          1: Easel's float16 img2img from a VAE whose encoder
                                    overflows float16 (as the real SDXL VAE does) gives a
                                    finite image; 0 and why otherwise
  oom_retry_ok                      1: a job that runs out of GPU memory (a capped
                                    `set_per_process_memory_fraction`) is retried in
                                    low-VRAM mode and finishes, the timeline told
  step_ms_flux_1024                 Easel's loop, one 1024 px Flux.1 step in bfloat16
  flux_bf16_same_as_diffusers_max_diff  Easel's Flux.1 image against stock `FluxPipeline`
                                    loaded in bfloat16 from the same folder (1/255 units)
  step_ms_flux_1024_cached          the same model and size through the runner, a job at
                                    speed "fast" (First Block Cache at its threshold, 0.08):
                                    the mean wall time per step over the job (11 steps, the
                                    first always computed in full), after a short warm-up job
  flux_1024_cached_model_calls_ratio  of that job, steps that ran the whole transformer /
                                    steps (random weights change more between steps than
                                    trained ones: at 0.08 few or none are skipped, so this
                                    says whether the figure above shows any skipping)
  flux_1024_compile_s               a first job with `compile` on (uncached, an empty
                                    compile cache): its first step, where Inductor compiles
                                    the transformer's repeated blocks, as its timeline says
  step_ms_flux_1024_compiled        the next compiled job's median step, as step_ms_flux_1024
Beside them `device` (GPU, torch and diffusers versions), `sdxl_written_s`, `flux_written_s`
and `total_s`: where the time goes. A figure whose part failed reads `failed: <why>` (the
traceback on stderr); the others are still measured. Flux needs a GPU with 36 GiB free; on
a smaller one its lines say so. Compiling comes last: on an H100 it should take 1 to 2
minutes (an estimate, not yet measured), and it starts only if 3 minutes of the 8 are
left (`--budget SECONDS` changes the 8 minutes); otherwise its two lines say so. A compile
that fails runs the job eagerly, as Easel does, and its lines read `not compiled: <why>`.

Run: `.venv/bin/python benchmarks/gpu.py [--work DIR]` (DIR: where the ~30 GB of model
files go, default the temp folder). Without CUDA it stops with one line, unless `--smoke`:
the same code paths on the CPU at tiny sizes (small configs, 64 px, 2 steps, the same
float16/bfloat16 through $EASEL_DTYPE, Inductor compiling the tiny transformer's blocks
with the C compiler), which tests/benchmarks/test_gpu.py runs.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

NEEDED = ("torch", "diffusers", "transformers", "accelerate", "safetensors")
NO_CUDA = (
    "benchmarks/gpu.py: no CUDA GPU here (torch.cuda.is_available() is False); "
    "`--smoke` runs the same code on the CPU at tiny sizes"
)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes on the CPU")
    parser.add_argument("--work", type=Path, default=None, help="where the model files go")
    parser.add_argument(
        "--budget", type=float, default=None, metavar="SECONDS",
        help="the script's time; compiling starts only with 3 minutes of it left (default 480)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    missing = [name for name in NEEDED if importlib.util.find_spec(name) is None]
    if missing:
        raise SystemExit(_carry_them(missing))
    import torch

    if not args.smoke and not torch.cuda.is_available():
        raise SystemExit(NO_CUDA)
    from app.engine.paths import HOME_ENV
    from benchmarks.gpu_figures import GPU_PLAN, SMOKE_PLAN, run_all

    with tempfile.TemporaryDirectory(dir=args.work, prefix="easel-gpu-") as temp:
        work = Path(temp)
        os.environ.setdefault(HOME_ENV, str(work / "home"))  # the worker's logs, not yours
        plan = SMOKE_PLAN if args.smoke else GPU_PLAN
        if args.budget is not None:
            plan = replace(plan, budget_s=args.budget)
        run_all(plan, work)


def _carry_them(missing: list[str]) -> str:
    """One line: what is missing, and how to bring it to a machine without the network."""
    names = " ".join(missing)
    return (
        f"benchmarks/gpu.py: {', '.join(missing)} not importable; carry wheels: on a machine "
        f"with the network `pip download --only-binary=:all: -d wheels {names}` (diffusers "
        "as pyproject.toml pins it, >=0.42,<0.43), then here `pip install --no-index "
        f"--find-links wheels {names}`"
    )


if __name__ == "__main__":
    main()

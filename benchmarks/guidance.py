"""Guidance figures on tiny random models (no download):

- `controlnet_same_as_diffusers_max_diff_<arch>`: the pixel difference (1/255) between
  Easel's ControlNet image and the stock `StableDiffusionControlNetPipeline` /
  `StableDiffusionXLControlNetPipeline` called as their users call them (a ControlNetModel
  for one layer, a list of them for two, with weights and start/end), same seed; the worst
  of every scheduler, with one layer and with two.
- `controlnet_step_overhead_ratio`: the median step time with one ControlNet over the median
  without (tiny SD 1.x model, 64x64, one CPU thread); reported, no goal.

- `ip_adapter_same_as_diffusers_max_diff_<arch>`: the same against the stock pipeline with
  `load_ip_adapter` / `set_ip_adapter_scale` / `ip_adapter_image=` (a tiny IP-Adapter and
  image encoder in the layout artists download), worst of every scheduler.
Run alone (`.venv/bin/python benchmarks/guidance.py`) or from benchmarks/generation.py.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import torch
from PIL import Image

from app.engine.generation import denoise
from app.engine.generation.architecture import Architecture
from app.engine.generation.controlnets import find_controlnet
from app.engine.generation.device import CPU
from app.engine.generation.outcome import StepDecision, StepProgress
from app.engine.generation.runner import Runner
from app.engine.generation.sources import ModelInfo, ModelSource, detected
from app.engine.generation.tiny_model import write_tiny_controlnet, write_tiny_pipeline
from app.engine.jobs.params import SCHEDULERS, ControlLayer, GenerationParams, encode_control
from app.testing.images import max_diff, pixels

SIZE, STEPS, TIMED_STEPS = 64, 6, 30
MODELS = {"sd15": Architecture.SD1, "sdxl": Architecture.SDXL}
LAYERS = (  # (weight, start, end) of each layer
    ((1.0, 0.0, 1.0),),
    ((0.8, 0.0, 0.6), (0.5, 0.3, 1.0)),
)


def report(name: str, value: object) -> None:
    print(f"{name}: {value}", flush=True)


def main() -> None:
    run_guidance()


def run_guidance() -> None:
    from diffusers.utils import logging as diffusers_logging

    diffusers_logging.set_verbosity_error()  # the stock pipelines' safety-checker notice
    with tempfile.TemporaryDirectory() as temp:
        work = Path(temp)
        images = [_control_png(seed) for seed in (1, 2)]
        for name, architecture in MODELS.items():
            runner, nets = _runner(work, name, architecture)
            worst = max(
                _diff(runner, nets, name, scheduler, layers, images, work)
                for scheduler in SCHEDULERS
                for layers in LAYERS
            )
            report(f"controlnet_same_as_diffusers_max_diff_{name}", worst)
            report(f"ip_adapter_same_as_diffusers_max_diff_{name}", _ip_worst(work, name))
        runner, _nets = _runner(work, "sd15", Architecture.SD1)
        plain = _median_step_s(runner, _params("sd15", "Euler", (), [], TIMED_STEPS), [], work)
        guided_params = _params("sd15", "Euler", LAYERS[0], images, TIMED_STEPS)
        guided = _median_step_s(runner, guided_params, images[:1], work)
        report("controlnet_step_overhead_ratio", f"{guided / plain:.2f}")


def _runner(work: Path, name: str, architecture: Architecture) -> tuple[Runner, Path]:
    folder = work / name
    if not folder.exists():
        write_tiny_pipeline(folder, architecture=architecture)
        for index in range(2):
            write_tiny_controlnet(
                work / f"nets-{name}" / f"net{index}", seed=index + 1, architecture=architecture
            )
    model = detected(ModelInfo(name, folder, ModelSource.USER))
    nets = work / f"nets-{name}"
    runner = Runner(
        device=CPU, resolve=lambda _n: model, threads=1,
        resolve_control=lambda n: find_controlnet(n, [nets]),
    )  # fmt: skip
    return runner, nets


def _params(
    name: str, scheduler: str, layers: Any, images: list[bytes], steps: int = STEPS
) -> GenerationParams:
    control = [
        ControlLayer("upload:" + hashlib.sha256(png).hexdigest(), f"net{i}", "canny", *layer)
        for i, (layer, png) in enumerate(zip(layers, images, strict=False))
    ]
    return GenerationParams(
        "a red hat", negative_prompt="blurry", model=name, scheduler=scheduler, steps=steps,
        cfg=7.0, width=SIZE, height=SIZE, seed=7, control=encode_control(control),
    )  # fmt: skip


def _diff(
    runner: Runner, nets: Path, name: str, scheduler: str, layers: Any, images: list[bytes],
    work: Path,
) -> int:  # fmt: skip
    from diffusers import (
        ControlNetModel,
        StableDiffusionControlNetPipeline,
        StableDiffusionXLControlNetPipeline,
    )

    images = images[: len(layers)]
    params = _params(name, scheduler, layers, images)
    tag = f"{name}-{scheduler}-{len(layers)}"
    out = runner.run(
        params, output_path=work / f"{tag}.png", checkpoint_path=work / f"{tag}.ckpt",
        on_step=_go, control_images=images,
    )  # fmt: skip
    assert out.image_path is not None
    pipe = runner.load(name).pipe
    loaded = [ControlNetModel.from_pretrained(nets / f"net{i}") for i in range(len(layers))]
    one = len(layers) == 1
    stock_class = (
        StableDiffusionXLControlNetPipeline if name == "sdxl" else StableDiffusionControlNetPipeline
    )
    stock: Any = stock_class(**pipe.components, controlnet=loaded[0] if one else loaded)
    stock.scheduler = denoise.make_scheduler(pipe, scheduler)
    stock.set_progress_bar_config(disable=True)

    def each(index: int) -> Any:
        values = [layer[index] for layer in layers]
        return values[0] if one else values

    pictures = [Image.open(io.BytesIO(png)) for png in images]
    result = stock(
        params.prompt, image=pictures[0] if one else pictures,
        negative_prompt=params.negative_prompt, num_inference_steps=STEPS,
        guidance_scale=params.cfg, width=SIZE, height=SIZE,
        generator=torch.Generator().manual_seed(params.seed),
        controlnet_conditioning_scale=each(0), control_guidance_start=each(1),
        control_guidance_end=each(2),
    ).images[0]  # fmt: skip
    return max_diff(pixels(out.image_path), pixels(result))


def _ip_worst(work: Path, name: str) -> int:
    from diffusers import StableDiffusionPipeline, StableDiffusionXLPipeline

    from app.engine.generation.ip_adapters import find_ip_adapter
    from app.engine.generation.tiny_model import write_tiny_ip_adapter
    from app.engine.jobs.params import ReferenceImage, encode_reference

    weights = write_tiny_ip_adapter(work / f"ip-{name}" / "models", architecture=MODELS[name])
    model = detected(ModelInfo(name, work / name, ModelSource.USER))
    runner = Runner(
        device=CPU, resolve=lambda _n: model, threads=1,
        resolve_reference=lambda n: find_ip_adapter(n, [weights.parent.parent]),
    )  # fmt: skip
    png = _control_png(5)
    digest = "upload:" + hashlib.sha256(png).hexdigest()
    reference = encode_reference([ReferenceImage(digest, weights.stem, 0.7)])
    stock_class = StableDiffusionXLPipeline if name == "sdxl" else StableDiffusionPipeline
    stock: Any = stock_class.from_pretrained(work / name)
    stock.set_progress_bar_config(disable=True)
    stock.load_ip_adapter(str(weights.parent), subfolder="", weight_name=weights.name)
    stock.set_ip_adapter_scale(0.7)
    worst = 0
    for scheduler in SCHEDULERS:
        params = _params(name, scheduler, (), [])
        params = GenerationParams(**{**params.to_dict(), "reference": reference})
        tag = f"ip-{name}-{scheduler}"
        out = runner.run(
            params, output_path=work / f"{tag}.png", checkpoint_path=work / f"{tag}.ckpt",
            on_step=_go, reference_images=[png],
        )  # fmt: skip
        assert out.image_path is not None
        stock.scheduler = denoise.make_scheduler(stock, scheduler)
        result = stock(
            params.prompt, negative_prompt=params.negative_prompt,
            ip_adapter_image=Image.open(io.BytesIO(png)), num_inference_steps=STEPS,
            guidance_scale=params.cfg, width=SIZE, height=SIZE,
            generator=torch.Generator().manual_seed(params.seed),
        ).images[0]  # fmt: skip
        worst = max(worst, max_diff(pixels(out.image_path), pixels(result)))
    return worst


def _median_step_s(
    runner: Runner, params: GenerationParams, images: list[bytes], work: Path
) -> float:
    runner.run(  # warm: loads the model and the ControlNet
        params, output_path=work / "warm.png", checkpoint_path=work / "warm.ckpt",
        on_step=_go, control_images=images,
    )  # fmt: skip
    stamps: list[float] = []

    def timed(_: StepProgress) -> StepDecision:
        stamps.append(time.perf_counter())
        return StepDecision.CONTINUE

    runner.run(
        params, output_path=work / "timed.png", checkpoint_path=work / "timed.ckpt",
        on_step=timed, control_images=images,
    )  # fmt: skip
    return statistics.median(b - a for a, b in itertools.pairwise(stamps))


def _control_png(seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    array = np.zeros((SIZE, SIZE, 3), dtype=np.uint8)
    for _ in range(6):
        y, x = rng.integers(0, SIZE), rng.integers(0, SIZE - 20)
        array[y : y + 2, x : x + 20] = 255
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return buffer.getvalue()


def _go(_: StepProgress) -> StepDecision:
    return StepDecision.CONTINUE


if __name__ == "__main__":
    main()

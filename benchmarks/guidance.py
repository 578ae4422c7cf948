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
- `controlnet_img2img_same_as_diffusers_max_diff_<arch>`, `controlnet_inpaint_same_as_...`:
  the same with an init image (strength 0.6) and with a mask (strength 1 and 0.7) against
  `StableDiffusion(XL)ControlNetImg2ImgPipeline` / `...ControlNetInpaintPipeline`; worst of
  every scheduler, one layer and two.
- `ip_adapter_multi_same_as_diffusers_max_diff_<arch>`: two reference images, each with its
  weight, against `load_ip_adapter` with a list and `set_ip_adapter_scale([w1, w2])`.
- `controlnet_union_same_as_diffusers_max_diff_sdxl`: a tiny ControlNet Union against
  `StableDiffusionXLControlNetUnionPipeline` (one layer; one Union with two control types;
  two Unions), worst of every scheduler.
- `controlnet_sdxl_original_file_max_diff`: an SDXL ControlNet kept as one file in the
  original key layout against its diffusers-folder twin.
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
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import torch
from PIL import Image

from app.engine.generation import denoise
from app.engine.generation.device import CPU
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.files.sources import ModelInfo, ModelSource, detected
from app.engine.generation.guidance.controlnets import find_controlnet
from app.engine.generation.outcome import StepDecision, StepProgress
from app.engine.generation.runner import Runner
from app.engine.jobs.params import SCHEDULERS, ControlLayer, GenerationParams, encode_control
from app.engine.jobs.run_inputs import RunInputs
from app.testing.images import max_diff, pixels
from app.testing.tiny.unet import write_tiny_controlnet, write_tiny_pipeline

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
            for mode in ("img2img", "inpaint"):
                worst = max(
                    _diff(runner, nets, name, scheduler, layers, images, work, mode)
                    for scheduler in SCHEDULERS
                    for layers in LAYERS
                )
                report(f"controlnet_{mode}_same_as_diffusers_max_diff_{name}", worst)
            report(f"ip_adapter_multi_same_as_diffusers_max_diff_{name}", _ip_worst(work, name, 2))
        report("controlnet_union_same_as_diffusers_max_diff_sdxl", _union_worst(work, images))
        report("controlnet_sdxl_original_file_max_diff", _original_file_diff(work, images))
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


MODES = {  # what the job starts from: (params changed, the stock pipeline's kind)
    "txt2img": ({}, ""),
    "img2img": ({"init_image": "job:1", "strength": 0.6}, "Img2Img"),
    "inpaint": ({"init_image": "job:1", "strength": 0.7, "mask": "upload:" + "0" * 64}, "Inpaint"),
}


def _diff(
    runner: Runner, nets: Path, name: str, scheduler: str, layers: Any, images: list[bytes],
    work: Path, mode: str = "txt2img",
) -> int:  # fmt: skip
    import diffusers
    from diffusers import ControlNetModel

    images = images[: len(layers)]
    changes, kind = MODES[mode]
    params = GenerationParams(**{**_params(name, scheduler, layers, images).to_dict(), **changes})
    tag = f"{name}-{scheduler}-{len(layers)}-{mode}"
    init, mask = _init_png(), _mask_png()
    inputs = RunInputs(init if kind else None, mask if mode == "inpaint" else None, images)
    out = runner.run(
        params, inputs, output_path=work / f"{tag}.png", checkpoint_path=work / f"{tag}.ckpt",
        on_step=_go,
    )  # fmt: skip
    assert out.image_path is not None
    pipe = runner.load(name).pipe
    loaded = [ControlNetModel.from_pretrained(nets / f"net{i}") for i in range(len(layers))]
    one = len(layers) == 1
    xl = "XL" if name == "sdxl" else ""
    stock_class = getattr(diffusers, f"StableDiffusion{xl}ControlNet{kind}Pipeline")
    stock: Any = stock_class(**pipe.components, controlnet=loaded[0] if one else loaded)
    extra: dict[str, Any] = {}
    if kind:
        extra = {"image": Image.open(io.BytesIO(init)), "strength": params.strength}
        if mode == "inpaint":
            mask_image = stock.mask_processor.blur(Image.open(io.BytesIO(mask)), params.mask_blur)
            extra["mask_image"] = mask_image
    stock.scheduler = denoise.make_scheduler(pipe, scheduler)
    stock.set_progress_bar_config(disable=True)

    def each(index: int) -> Any:
        values = [layer[index] for layer in layers]
        return values[0] if one else values

    pictures = [Image.open(io.BytesIO(png)) for png in images]
    control = {"control_image" if kind else "image": pictures[0] if one else pictures}
    result = stock(
        params.prompt, **control, negative_prompt=params.negative_prompt,
        num_inference_steps=STEPS, guidance_scale=params.cfg, width=SIZE, height=SIZE,
        generator=torch.Generator().manual_seed(params.seed),
        controlnet_conditioning_scale=each(0), control_guidance_start=each(1),
        control_guidance_end=each(2), **extra,
    ).images[0]  # fmt: skip
    return max_diff(pixels(out.image_path), pixels(result))


def _union_worst(work: Path, images: list[bytes]) -> int:
    """A tiny Union: one layer, one Union given two control types, two Unions."""
    from diffusers import ControlNetUnionModel, StableDiffusionXLControlNetUnionPipeline

    from app.engine.jobs.params import UNION_TYPES

    nets = work / "nets-union"
    for index in range(2):
        write_tiny_controlnet(nets / f"union{index}", seed=4 + index, union=True)
    model = detected(ModelInfo("sdxl", work / "sdxl", ModelSource.USER))
    runner = Runner(
        device=CPU, resolve=lambda _n: model, threads=1,
        resolve_control=lambda n: find_controlnet(n, [nets]),
    )  # fmt: skip
    cases = (
        (("union0", "depth", 0.9, 0.0, 1.0),),
        (("union0", "canny", 1.0, 0.0, 0.8), ("union0", "openpose", 0.6, 0.2, 1.0)),
        (("union0", "depth", 1.0, 0.0, 1.0), ("union1", "tile", 0.7, 0.0, 0.6)),
    )
    pipe = runner.load("sdxl").pipe
    worst = 0
    for scheduler, case in itertools.product(SCHEDULERS, cases):
        pngs = images[: len(case)]
        layers = [
            ControlLayer("upload:" + hashlib.sha256(png).hexdigest(), net, "none", w, a, b, kind)
            for png, (net, kind, w, a, b) in zip(pngs, case, strict=True)
        ]
        params = GenerationParams(
            **{**_params("sdxl", scheduler, (), []).to_dict(), "control": encode_control(layers)}
        )
        tag = f"union-{scheduler}-{len(case)}-{case[-1][0]}"
        out = runner.run(
            params, RunInputs(control_images=pngs), output_path=work / f"{tag}.png",
            checkpoint_path=work / f"{tag}.ckpt", on_step=_go,
        )  # fmt: skip
        assert out.image_path is not None
        names = list(dict.fromkeys(net for net, *_ in case))
        loaded = [ControlNetUnionModel.from_pretrained(nets / n) for n in names]
        stock: Any = StableDiffusionXLControlNetUnionPipeline(
            **pipe.components, controlnet=loaded[0] if len(loaded) == 1 else loaded
        )
        stock.scheduler = denoise.make_scheduler(pipe, scheduler)
        stock.set_progress_bar_config(disable=True)
        result = stock(
            params.prompt, negative_prompt=params.negative_prompt,
            control_image=[Image.open(io.BytesIO(png)) for png in pngs],
            control_mode=[UNION_TYPES.index(kind) for _, kind, *_ in case],
            controlnet_conditioning_scale=[w for *_, w, _, _ in case],
            control_guidance_start=[a for *_, a, _ in case],
            control_guidance_end=[b for *_, b in case], num_inference_steps=STEPS,
            guidance_scale=params.cfg, width=SIZE, height=SIZE,
            generator=torch.Generator().manual_seed(params.seed),
        ).images[0]  # fmt: skip
        worst = max(worst, max_diff(pixels(out.image_path), pixels(result)))
    return worst


def _original_file_diff(work: Path, images: list[bytes]) -> int:
    """An SDXL ControlNet as one original-layout file against its folder twin (net0)."""
    import shutil

    from app.engine.generation.guidance.control import ControlNetCache
    from app.testing.tiny.unet import write_tiny_controlnet_file

    files = work / "nets-file"
    write_tiny_controlnet_file(
        files / "net0.safetensors", seed=1, architecture=Architecture.SDXL, original=True
    )
    configs = work / "configs" / "controlnet-sdxl"
    configs.mkdir(parents=True)
    shutil.copy(work / "nets-sdxl" / "net0" / "config.json", configs)
    model = detected(ModelInfo("sdxl", work / "sdxl", ModelSource.USER))
    made = []
    for folder, cache in ((files, ControlNetCache(configs.parent)), (work / "nets-sdxl", None)):
        runner = Runner(
            device=CPU, resolve=lambda _n: model, threads=1, controlnets=cache,
            resolve_control=partial(_find_in, folder),
        )  # fmt: skip
        params = _params("sdxl", "Euler a", LAYERS[0], images[:1])
        tag = f"file-{folder.name}"
        out = runner.run(
            params, RunInputs(control_images=images[:1]), output_path=work / f"{tag}.png",
            checkpoint_path=work / f"{tag}.ckpt", on_step=_go,
        )  # fmt: skip
        assert out.image_path is not None
        made.append(pixels(out.image_path))
    return max_diff(made[0], made[1])


def _find_in(folder: Path, name: str) -> Any:
    return find_controlnet(name, [folder])


def _init_png() -> bytes:
    x = np.linspace(0, 255, SIZE, dtype=np.uint8)
    rgb = np.stack([np.tile(x, (SIZE, 1))] * 3, axis=-1)
    rgb[SIZE // 4 : SIZE // 2, SIZE // 4 : SIZE // 2] = (200, 30, 30)
    buffer = io.BytesIO()
    Image.fromarray(rgb).save(buffer, format="PNG")
    return buffer.getvalue()


def _mask_png() -> bytes:
    mask = Image.new("L", (SIZE, SIZE), 0)
    mask.paste(255, (16, 8, 48, 40))
    buffer = io.BytesIO()
    mask.save(buffer, format="PNG")
    return buffer.getvalue()


def _ip_worst(work: Path, name: str, count: int = 1) -> int:
    from diffusers import StableDiffusionPipeline, StableDiffusionXLPipeline

    from app.engine.generation.guidance.ip_adapters import find_ip_adapter
    from app.engine.jobs.params import ReferenceImage, encode_reference
    from app.testing.tiny.unet import write_tiny_ip_adapter

    weights = work / f"ip-{name}" / "models" / "ip-adapter_tiny.safetensors"
    if not weights.exists():
        write_tiny_ip_adapter(weights.parent, architecture=MODELS[name])
    model = detected(ModelInfo(name, work / name, ModelSource.USER))
    runner = Runner(
        device=CPU, resolve=lambda _n: model, threads=1,
        resolve_reference=lambda n: find_ip_adapter(n, [weights.parent.parent]),
    )  # fmt: skip
    pngs = [_control_png(5), _init_png()][:count]
    scales = [0.7, 0.4][:count]
    reference = encode_reference(
        [
            ReferenceImage("upload:" + hashlib.sha256(png).hexdigest(), weights.stem, scale)
            for png, scale in zip(pngs, scales, strict=True)
        ]
    )
    stock_class = StableDiffusionXLPipeline if name == "sdxl" else StableDiffusionPipeline
    stock: Any = stock_class.from_pretrained(work / name)
    stock.set_progress_bar_config(disable=True)
    # One reference: as its documentation loads it; several: a list (one adapter each).
    names = weights.name if count == 1 else [weights.name] * count
    stock.load_ip_adapter(str(weights.parent), subfolder="", weight_name=names)
    stock.set_ip_adapter_scale(scales[0] if count == 1 else scales)
    pictures = [Image.open(io.BytesIO(png)) for png in pngs]
    worst = 0
    for scheduler in SCHEDULERS:
        params = _params(name, scheduler, (), [])
        params = GenerationParams(**{**params.to_dict(), "reference": reference})
        tag = f"ip-{name}-{scheduler}-{count}"
        out = runner.run(
            params, RunInputs(reference_images=pngs), output_path=work / f"{tag}.png",
            checkpoint_path=work / f"{tag}.ckpt", on_step=_go,
        )  # fmt: skip
        assert out.image_path is not None
        stock.scheduler = denoise.make_scheduler(stock, scheduler)
        result = stock(
            params.prompt, negative_prompt=params.negative_prompt,
            ip_adapter_image=pictures[0] if count == 1 else pictures, num_inference_steps=STEPS,
            guidance_scale=params.cfg, width=SIZE, height=SIZE,
            generator=torch.Generator().manual_seed(params.seed),
        ).images[0]  # fmt: skip
        worst = max(worst, max_diff(pixels(out.image_path), pixels(result)))
    return worst


def _median_step_s(
    runner: Runner, params: GenerationParams, images: list[bytes], work: Path
) -> float:
    runner.run(  # warm: loads the model and the ControlNet
        params, RunInputs(control_images=images), output_path=work / "warm.png",
        checkpoint_path=work / "warm.ckpt", on_step=_go,
    )  # fmt: skip
    stamps: list[float] = []

    def timed(_: StepProgress) -> StepDecision:
        stamps.append(time.perf_counter())
        return StepDecision.CONTINUE

    runner.run(
        params, RunInputs(control_images=images), output_path=work / "timed.png",
        checkpoint_path=work / "timed.ckpt", on_step=timed,
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

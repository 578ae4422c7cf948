"""Guidance together with img2img and inpaint, on tiny random models: Easel's image is the
stock `StableDiffusion(XL)ControlNetImg2ImgPipeline`'s and `...ControlNetInpaintPipeline`'s
(and the img2img pipeline's with `load_ip_adapter`), called as their users call them; a
pause/resume of each is exact."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from app.engine.generation import denoise
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.guidance.controlnets import find_controlnet
from app.engine.generation.guidance.ip_adapters import find_ip_adapter
from app.engine.generation.outcome import OutcomeKind, StepDecision, StepProgress
from app.engine.generation.runner import Runner
from app.engine.jobs.params import (
    ControlLayer,
    GenerationParams,
    ReferenceImage,
    encode_control,
    encode_reference,
)
from app.engine.jobs.run_inputs import RunInputs
from tests.engine.generation.test_controlnet import control_png, upload
from tests.engine.generation.test_img2img import init_png
from tests.engine.generation.test_inpaint import mask_png
from tests.engine.generation.test_ip_adapter import ADAPTER, reference_png
from tests.engine.generation.tiny_architectures import go_on, max_diff, model_info, params_for
from tests.engine.generation.tiny_architectures import pixels as pixels_of

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

STEPS = 5
MASK_DIGEST = "upload:" + "0" * 64  # the runner is handed the bytes; only the name is checked


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from app.testing.tiny.unet import (
        write_tiny_controlnet,
        write_tiny_ip_adapter,
        write_tiny_pipeline,
    )

    root = tmp_path_factory.mktemp("guided-models")
    nets, adapters = root / "controlnet", root / "ipadapter"
    for name, arch in (("sd1", Architecture.SD1), ("sdxl", Architecture.SDXL)):
        write_tiny_controlnet(nets / f"cn-{name}-a", seed=1, architecture=arch)
        write_tiny_controlnet(nets / f"cn-{name}-b", seed=2, architecture=arch)
    write_tiny_ip_adapter(adapters / "models", architecture=Architecture.SD1)
    write_tiny_ip_adapter(adapters / "sdxl_models", architecture=Architecture.SDXL)
    (adapters / "sdxl_models" / "ip-adapter_tiny.safetensors").rename(
        adapters / "sdxl_models" / "ip-adapter_tiny_sdxl.safetensors"
    )
    return {
        "sd1": write_tiny_pipeline(root / "sd1", architecture=Architecture.SD1),
        "sdxl": write_tiny_pipeline(root / "sdxl", architecture=Architecture.SDXL),
        "sd1-inpainting": write_tiny_pipeline(
            root / "sd1-inpainting", architecture=Architecture.SD1, inpainting=True
        ),
        "nets": nets,
        "adapters": adapters,
    }


@pytest.fixture(scope="module")
def runners(folders: dict[str, Path]) -> dict[str, Runner]:
    from app.engine.generation.device import CPU

    def runner(name: str) -> Runner:
        model = model_info(folders[name], name)
        return Runner(
            device=CPU, resolve=lambda _name: model, threads=1,
            resolve_control=lambda net: find_controlnet(net, [folders["nets"]]),
            resolve_reference=lambda adapter: find_ip_adapter(adapter, [folders["adapters"]]),
        )  # fmt: skip

    return {name: runner(name) for name in ("sd1", "sdxl", "sd1-inpainting")}


Layer = tuple[str, int, float, float, float]  # net, image seed, weight, start, end


def guided(
    model: str, layers: list[Layer], scheduler: str = "Euler a", **changes: Any
) -> tuple[GenerationParams, list[bytes]]:
    images = [control_png(seed) for _, seed, _, _, _ in layers]
    control = [
        ControlLayer(upload(png), net, "canny", weight, start, end)
        for png, (net, _, weight, start, end) in zip(images, layers, strict=True)
    ]
    base: dict[str, Any] = {"steps": STEPS, "init_image": "job:1", "strength": 0.6}
    params = params_for(model, scheduler, control=encode_control(control), **{**base, **changes})
    return params.validated(), images


def ours(
    runner: Runner,
    params: GenerationParams,
    images: list[bytes],
    folder: Path,
    name: str = "ours",
    on_step: Any = go_on,
) -> np.ndarray | None:
    inputs = RunInputs(
        init_png(), mask_png() if params.mask else None, images,
        [reference_png()] if params.reference else [],
    )  # fmt: skip
    outcome = runner.run(
        params, inputs, output_path=folder / f"{name}.png",
        checkpoint_path=folder / f"{name}.ckpt", on_step=on_step,
    )  # fmt: skip
    if outcome.kind is OutcomeKind.PAUSED:
        return None
    assert outcome.kind is OutcomeKind.COMPLETED and outcome.image_path is not None
    return pixels_of(outcome.image_path)


def _stock_class(model: str, inpaint: bool, control: bool) -> Any:
    import diffusers

    xl = "XL" if model.startswith("sdxl") else ""
    kind = "Inpaint" if inpaint else "Img2Img"
    guided = "ControlNet" if control else ""
    name = f"StableDiffusion{xl}{guided}{kind}Pipeline"
    return getattr(diffusers, name)


def stock(
    runner: Runner, folders: dict[str, Path], params: GenerationParams, images: list[bytes]
) -> np.ndarray:
    """The stock ControlNet img2img / inpaint pipeline as its documentation calls it: a
    ControlNetModel (several: a list), PIL images, the mask blurred first, scales."""
    from diffusers import ControlNetModel

    pipe = runner.load(params.model).pipe
    layers = params.control_layers
    one = len(layers) == 1
    loaded = [ControlNetModel.from_pretrained(folders["nets"] / layer.model) for layer in layers]
    components = {k: v for k, v in pipe.components.items() if k != "image_encoder"}
    pipeline_class = _stock_class(params.model, params.is_inpaint, control=True)
    stock_pipe: Any = pipeline_class(**components, controlnet=loaded[0] if one else loaded)
    stock_pipe.scheduler = denoise.make_scheduler(pipe, params.scheduler)
    stock_pipe.set_progress_bar_config(disable=True)
    pictures = [Image.open(io.BytesIO(png)) for png in images]

    def each(values: list[float]) -> Any:
        return values[0] if one else values

    extra: dict[str, Any] = {}
    if params.is_inpaint:
        mask = Image.open(io.BytesIO(mask_png()))
        if params.mask_blur:
            mask = stock_pipe.mask_processor.blur(mask, blur_factor=params.mask_blur)
        extra["mask_image"] = mask
        if params.only_masked:
            extra["padding_mask_crop"] = params.mask_padding
    result = stock_pipe(
        params.prompt,
        image=Image.open(io.BytesIO(init_png())),
        control_image=pictures[0] if one else pictures,
        strength=params.strength,
        negative_prompt=params.negative_prompt or None,
        num_inference_steps=params.steps,
        guidance_scale=params.cfg,
        width=params.width,
        height=params.height,
        generator=torch.Generator().manual_seed(params.seed),
        controlnet_conditioning_scale=each([layer.weight for layer in layers]),
        control_guidance_start=each([layer.start for layer in layers]),
        control_guidance_end=each([layer.end for layer in layers]),
        **extra,
    ).images[0]
    return pixels_of(result)


INPAINT: dict[str, Any] = {"mask": MASK_DIGEST, "mask_blur": 4, "strength": 1.0}
CASES: dict[str, tuple[list[Layer], dict[str, Any]]] = {
    "img2img, one layer": ([("a", 7, 0.9, 0.0, 1.0)], {}),
    "img2img, two layers with start/end": (
        [("a", 7, 1.0, 0.0, 0.6), ("b", 8, 0.5, 0.3, 1.0)], {"scheduler": "DPM++ 2M"},
    ),
    "inpaint": ([("a", 7, 0.8, 0.0, 1.0)], INPAINT),
    "inpaint, strength 0.7, two layers": (
        [("a", 7, 1.0, 0.0, 0.8), ("b", 8, 0.6, 0.0, 1.0)], {**INPAINT, "strength": 0.7},
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("model", ["sd1", "sdxl"])
def test_controlnet_with_img2img_and_inpaint_equals_the_stock_pipelines(
    runners: dict[str, Runner], folders: dict[str, Path], tmp_path: Path, model: str, case: str
) -> None:
    layers, changes = CASES[case]
    named = [(f"cn-{model}-{net}", *rest) for net, *rest in layers]
    params, images = guided(model, named, **changes)  # type: ignore[arg-type]
    image = ours(runners[model], params, images, tmp_path)
    assert image is not None
    assert max_diff(image, stock(runners[model], folders, params, images)) == 0


@pytest.mark.parametrize("only_masked", [False, True])
def test_controlnet_with_an_inpainting_model_equals_the_stock_pipeline(
    runners: dict[str, Runner], folders: dict[str, Path], tmp_path: Path, only_masked: bool
) -> None:
    """A 9-channel UNet: the ControlNet sees the latents alone, not the mask beside them;
    "only masked" cuts the control image to the mask's box as it does the picture."""
    changes = {**INPAINT, "only_masked": only_masked, "mask_padding": 4}
    params, images = guided("sd1-inpainting", [("cn-sd1-a", 7, 1.0, 0.0, 1.0)], **changes)
    image = ours(runners["sd1-inpainting"], params, images, tmp_path)
    assert image is not None
    stock_image = stock(runners["sd1-inpainting"], folders, params, images)
    assert max_diff(image, stock_image) == 0


@pytest.mark.parametrize("model", ["sd1", "sdxl"])
def test_a_reference_image_with_img2img_equals_the_stock_load_ip_adapter_path(
    runners: dict[str, Runner], folders: dict[str, Path], tmp_path: Path, model: str
) -> None:
    reference = ReferenceImage(upload(reference_png()), ADAPTER[model], 0.8)
    params = params_for(
        model, "Euler a", steps=STEPS, init_image="job:1", strength=0.7,
        reference=encode_reference([reference]),
    ).validated()  # fmt: skip
    image = ours(runners[model], params, [], tmp_path)
    pipe: Any = _stock_class(model, inpaint=False, control=False).from_pretrained(folders[model])
    pipe.scheduler = denoise.make_scheduler(pipe, params.scheduler)
    pipe.set_progress_bar_config(disable=True)
    subfolder = "sdxl_models" if model == "sdxl" else "models"
    pipe.load_ip_adapter(
        str(folders["adapters"]), subfolder=subfolder, weight_name=f"{ADAPTER[model]}.safetensors"
    )
    pipe.set_ip_adapter_scale(reference.weight)
    expected = pipe(
        params.prompt, image=Image.open(io.BytesIO(init_png())), strength=params.strength,
        negative_prompt=params.negative_prompt, num_inference_steps=params.steps,
        guidance_scale=params.cfg, ip_adapter_image=Image.open(io.BytesIO(reference_png())),
        generator=torch.Generator().manual_seed(params.seed),
    ).images[0]  # fmt: skip
    assert image is not None and max_diff(image, pixels_of(expected)) == 0


@pytest.mark.parametrize(
    ("model", "changes"),
    [("sd1", {}), ("sdxl", INPAINT), ("sd1-inpainting", {**INPAINT, "strength": 0.8})],
)
def test_pause_then_resume_of_guided_img2img_and_inpaint_is_exact(
    runners: dict[str, Runner], tmp_path: Path, model: str, changes: dict[str, Any]
) -> None:
    net = "cn-sdxl" if model == "sdxl" else "cn-sd1"
    layers: list[Layer] = [(f"{net}-a", 7, 0.8, 0.0, 0.7), (f"{net}-b", 8, 1.0, 0.3, 1.0)]
    params, images = guided(model, layers, "DPM++ 2M", **changes)
    if model == "sd1":  # and a reference image on top
        reference = ReferenceImage(upload(reference_png()), ADAPTER["sd1"], 0.6)
        params = replace(params, reference=encode_reference([reference]))
    whole = ours(runners[model], params, images, tmp_path, "whole")
    pause = lambda p: StepDecision.PAUSE if p.step == 2 else StepDecision.CONTINUE  # noqa: E731
    assert ours(runners[model], params, images, tmp_path, "job", pause) is None
    seen: list[int] = []

    def record(progress: StepProgress) -> StepDecision:
        seen.append(progress.step)
        return StepDecision.CONTINUE

    resumed = ours(runners[model], params, images, tmp_path, "job", record)
    assert seen and seen[0] == 3
    assert whole is not None and resumed is not None and max_diff(resumed, whole) == 0

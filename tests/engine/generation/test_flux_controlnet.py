"""Flux.1 ControlNets as control layers through Easel's own loop, on a tiny random Flux.1
dev and tiny random `FluxControlNetModel` folders built here (InstantX-style reading
latents, XLabs-style reading pixels, a Union): each job equals stock
`FluxControlNetPipeline` (several layers: `FluxMultiControlNetModel`; a Union with its
`control_mode`) in float32 and bfloat16, and a pause resumes in a fresh runner to the same
image; the nets are listed as Flux.1's, and a ControlNet of another family is refused at
submit in one sentence (both ways), as are a Union type its table lacks, "only masked" and
step caching. With an init image (and a mask) a job is stock
`FluxControlNetImg2ImgPipeline` (`FluxControlNetInpaintPipeline`)."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from app.engine.generation.device import DeviceChoice
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.files.sources import ModelInfo, ModelSearchPath
from app.engine.generation.guidance.controlnets import (
    ControlNetMismatch,
    find_controlnet,
    list_controlnets,
)
from app.engine.generation.outcome import OutcomeKind, StepDecision
from app.engine.generation.request_checks import check_runnable
from app.engine.generation.runner import Runner
from app.engine.jobs.params import (
    ControlLayer,
    GenerationParams,
    encode_control,
)
from app.engine.jobs.run_inputs import RunInputs
from app.testing.tiny.flux import (
    stock_flux_controlnet,
    write_tiny_flux,
    write_tiny_flux_controlnet,
)
from tests.engine.generation.test_controlnet import control_png, upload
from tests.engine.generation.tiny_architectures import max_diff, model_info, pause_at, pixels

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

STEPS, PAUSE_AT = 3, 1


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A models folder: the tiny Flux.1 dev at its top, its ControlNets (and an SDXL one)
    in controlnet/."""
    from app.testing.tiny.unet import write_tiny_controlnet

    root = tmp_path_factory.mktemp("flux-controlnets")
    write_tiny_flux(root / "flux-dev", guidance_embeds=True)
    nets = root / "controlnet"
    write_tiny_flux_controlnet(nets / "instantx", seed=5)
    write_tiny_flux_controlnet(nets / "instantx-b", seed=6)
    write_tiny_flux_controlnet(nets / "xlabs", xlabs=True, seed=7)
    write_tiny_flux_controlnet(nets / "union", union=True, seed=8)
    write_tiny_controlnet(nets / "sdxl-net", architecture=Architecture.SDXL)
    return root


@pytest.fixture(scope="module")
def model(models: Path) -> ModelInfo:
    return model_info(models / "flux-dev", "m")


def runner_for(model: ModelInfo, models: Path, dtype: str = "float32") -> Runner:
    return Runner(
        device=DeviceChoice("cpu", dtype), resolve=lambda _name: model, threads=1,
        resolve_control=lambda name: find_controlnet(name, [models / "controlnet"]),
    )  # fmt: skip


@pytest.fixture(scope="module")
def runner(model: ModelInfo, models: Path) -> Runner:
    return runner_for(model, models)


Layer = tuple[str, int, float, float, float, str]  # net, image seed, weight, start, end, type


def flux_params(layers: list[Layer], **changes: Any) -> tuple[GenerationParams, list[bytes]]:
    images = [control_png(seed, (32, 48)) for _, seed, *_ in layers]
    control = [
        ControlLayer(upload(png), net, "none", weight, start, end, kind)
        for png, (net, _, weight, start, end, kind) in zip(images, layers, strict=True)
    ]
    base: dict[str, Any] = {
        "prompt": "a cat in a hat", "model": "m", "steps": STEPS, "cfg": 2.5, "width": 32,
        "height": 48, "seed": 1234, "control": encode_control(control),
    }  # fmt: skip
    return GenerationParams(**{**base, **changes}).validated(), images


def ours(
    runner: Runner,
    params: GenerationParams,
    images: list[bytes],
    folder: Path,
    name: str,
    **kw: Any,
) -> Any:
    return runner.run(
        params, RunInputs(control_images=images), output_path=folder / f"{name}.png",
        checkpoint_path=folder / f"{name}.ckpt",
        on_step=kw.get("on_step", lambda _p: StepDecision.CONTINUE),
    )  # fmt: skip


def image_of(outcome: Any) -> np.ndarray:
    assert outcome.kind is OutcomeKind.COMPLETED and outcome.image_path is not None
    return pixels(outcome.image_path)


def stock(models: Path, params: GenerationParams, images: list[bytes], dtype: Any) -> np.ndarray:
    nets = [models / "controlnet" / layer.model for layer in params.control_layers]
    pictures = [Image.open(io.BytesIO(png)) for png in images]
    return pixels(stock_flux_controlnet(models / "flux-dev", nets, params, pictures, dtype))


CASES: dict[str, list[Layer]] = {
    "instantx": [("instantx", 3, 1.0, 0.0, 1.0, "")],
    "instantx, weight and start/end": [("instantx", 3, 0.7, 0.3, 1.0, "")],
    "xlabs": [("xlabs", 3, 0.8, 0.0, 1.0, "")],
    "two layers (multi)": [
        ("instantx", 3, 1.0, 0.0, 1.0, ""), ("instantx-b", 4, 0.5, 0.0, 0.7, ""),
    ],
    "union, two modes": [
        ("union", 3, 1.0, 0.0, 1.0, "canny"), ("union", 4, 0.6, 0.0, 1.0, "low-quality"),
    ],
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_a_flux_control_layer_is_stock_flux_controlnet(
    models: Path, runner: Runner, tmp_path: Path, case: str
) -> None:
    params, images = flux_params(CASES[case])
    image = image_of(ours(runner, params, images, tmp_path, "ours"))
    assert max_diff(image, stock(models, params, images, torch.float32)) == 0
    if case == "instantx":
        from app.engine.generation.memory import module_bytes

        [held] = runner._cache._entries.values()  # the net counts in the memory budget
        assert held.guidance_bytes == module_bytes(runner._controlnets.nets) > 0
        plain = image_of(ours(runner, flux_params([])[0], [], tmp_path, "plain"))
        assert max_diff(image, plain) > 0  # the layer guides
        assert held.guidance_bytes == 0 and runner._controlnets.loaded == []


def test_a_union_layers_mode_is_its_own(runner: Runner, tmp_path: Path) -> None:
    depth = flux_params([("union", 3, 1.0, 0.0, 1.0, "depth")])
    blur = flux_params([("union", 3, 1.0, 0.0, 1.0, "blur")])
    depth_image = image_of(ours(runner, *depth, tmp_path, "d"))
    assert max_diff(depth_image, image_of(ours(runner, *blur, tmp_path, "b"))) > 0


def init_picture() -> Image.Image:
    gradient = np.tile(np.linspace(0, 255, 32, dtype=np.uint8), (48, 1))
    return Image.fromarray(np.stack([gradient, gradient[::-1], gradient], axis=-1))


def png_of(picture: Image.Image) -> bytes:
    buffer = io.BytesIO()
    picture.save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.mark.parametrize("kind", ["img2img", "inpaint"])
def test_with_an_init_image_and_a_mask_it_is_stock_img2img_and_inpaint(
    models: Path, runner: Runner, tmp_path: Path, kind: str
) -> None:
    picture, mask = init_picture(), Image.new("L", (32, 48), 0)
    mask.paste(255, (6, 10, 26, 40))
    changes: dict[str, Any] = {"init_image": upload(png_of(picture)), "strength": 0.7}
    stock_inputs: dict[str, Any] = {"image": picture, "strength": 0.7}
    if kind == "inpaint":
        changes.update(mask=upload(png_of(mask)), mask_blur=0)
        stock_inputs["mask_image"] = mask
    params, images = flux_params(CASES["two layers (multi)"], **changes)
    outcome = runner.run(
        params,
        RunInputs(
            init_image=png_of(picture), mask=png_of(mask) if kind == "inpaint" else None,
            control_images=images,
        ),
        output_path=tmp_path / "o.png", checkpoint_path=tmp_path / "o.ckpt",
        on_step=lambda _p: StepDecision.CONTINUE,
    )  # fmt: skip
    nets = [models / "controlnet" / layer.model for layer in params.control_layers]
    pictures = [Image.open(io.BytesIO(png)) for png in images]
    theirs = stock_flux_controlnet(
        models / "flux-dev", nets, params, pictures, torch.float32, **stock_inputs
    )
    assert max_diff(image_of(outcome), pixels(theirs)) == 0


@pytest.mark.parametrize("case", ["instantx", "union, two modes"])
def test_in_bfloat16_too_and_a_pause_resumes_exactly(
    model: ModelInfo, models: Path, tmp_path: Path, case: str
) -> None:
    params, images = flux_params(CASES[case], seed=7)
    whole = image_of(ours(runner_for(model, models, "bfloat16"), params, images, tmp_path, "w"))
    assert max_diff(whole, stock(models, params, images, torch.bfloat16)) == 0
    paused = ours(
        runner_for(model, models, "bfloat16"), params, images, tmp_path, "job",
        on_step=pause_at(PAUSE_AT),
    )  # fmt: skip
    assert paused.kind is OutcomeKind.PAUSED
    resumed = ours(runner_for(model, models, "bfloat16"), params, images, tmp_path, "job")
    assert resumed.resumed_from is not None and resumed.resumed_from.step == PAUSE_AT
    assert max_diff(image_of(resumed), whole) == 0


def test_flux_controlnets_are_listed_as_flux_and_misfits_are_refused_at_submit(
    models: Path,
) -> None:
    from app.testing.tiny.unet import write_tiny_pipeline

    listed = {i.name: (i.architecture, i.union) for i in list_controlnets([models / "controlnet"])}
    flux = Architecture.FLUX1
    assert listed == {
        "instantx": (flux, False), "instantx-b": (flux, False), "xlabs": (flux, False),
        "union": (flux, True), "sdxl-net": (Architecture.SDXL, False),
    }  # fmt: skip
    write_tiny_pipeline(models / "sdxl", architecture=Architecture.SDXL)
    search = ModelSearchPath(user=(models,))
    check_runnable(flux_params(CASES["union, two modes"], model="flux-dev")[0], search)
    refusals = {
        ("sdxl-net", "flux-dev", ""):
            "ControlNet 'sdxl-net' is for SDXL, but model 'flux-dev' is Flux.1",
        ("instantx", "sdxl", ""): "ControlNet 'instantx' is for Flux.1, but model 'sdxl' is SDXL",
        ("union", "flux-dev", "softedge"):
            "control layer 0's control type 'softedge' is not one that ControlNet Union "
            "'union' takes (canny, tile, depth, blur, openpose, gray, low-quality)",
        ("union", "flux-dev", ""):
            "control layer 0 uses ControlNet Union 'union': give its control type (canny, tile",
    }  # fmt: skip
    for (net, on, kind), sentence in refusals.items():
        params = flux_params([(net, 3, 1.0, 0.0, 1.0, kind)], model=on)[0]
        with pytest.raises(ControlNetMismatch, match=re.escape(sentence)):
            check_runnable(params, search)
    masked = {"init_image": upload(b"x"), "mask": upload(b"y"), "only_masked": True}
    only_masked = flux_params(CASES["instantx"], model="flux-dev", **masked)[0]
    with pytest.raises(ControlNetMismatch, match="inpaint the whole picture, not only the masked"):
        check_runnable(only_masked, search)
    cached = flux_params(CASES["instantx"], model="flux-dev", speed="fast")[0]
    with pytest.raises(ControlNetMismatch, match=r"step caching does not work with Flux\.1 Contr"):
        check_runnable(cached, search)


def test_stock_flux_controlnet_still_fails_with_first_block_cache(models: Path) -> None:
    """Why a cached Flux ControlNet job is refused: diffusers' own pipeline cannot run so
    (its transformer is called outside a cache context). Fails the day diffusers fixes it."""
    from diffusers import FluxControlNetModel, FluxControlNetPipeline
    from diffusers.hooks import FirstBlockCacheConfig

    net = FluxControlNetModel.from_pretrained(models / "controlnet" / "instantx")
    pipe = FluxControlNetPipeline.from_pretrained(models / "flux-dev", controlnet=net)
    pipe.set_progress_bar_config(disable=True)
    pipe.transformer.enable_cache(FirstBlockCacheConfig(threshold=0.08))
    picture = Image.open(io.BytesIO(control_png(3, (32, 32))))
    with pytest.raises(ValueError, match="No cache context is set"):
        pipe("a", control_image=picture, num_inference_steps=1, width=32, height=32)


def test_in_low_vram_mode_a_flux_controlnet_gets_an_offload_hook(
    model: ModelInfo, models: Path, tmp_path: Path
) -> None:
    """The pipeline offloaded as low-VRAM mode does (to the CPU itself, here): the Flux
    ControlNet gets accelerate's hook too, and the image is the one made without it."""
    from accelerate.hooks import CpuOffload

    params, images = flux_params(CASES["instantx"], seed=9)
    plain = image_of(ours(runner_for(model, models), params, images, tmp_path, "plain"))
    runner = runner_for(model, models)
    runner.load("m").pipe.enable_model_cpu_offload(device="cpu")
    image = image_of(ours(runner, params, images, tmp_path, "offloaded"))
    [net] = runner._controlnets.nets
    assert isinstance(getattr(net, "_hf_hook", None), CpuOffload)
    assert max_diff(image, plain) == 0

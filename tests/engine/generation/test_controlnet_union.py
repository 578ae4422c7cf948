"""ControlNet Union (SDXL) in our own loop, on a tiny random Union built here: detected from
its tensors (folder and single file), each layer's control type, the stock
`StableDiffusionXLControlNetUnionPipeline`'s image (one Union given lists of images and
types; several Unions as `MultiControlNetUnionModel`), exact pause/resume."""

from __future__ import annotations

import io
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from app.engine.generation import denoise
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.guidance.controlnets import (
    ControlNetMismatch,
    find_controlnet,
    list_controlnets,
)
from app.engine.generation.outcome import OutcomeKind, StepDecision
from app.engine.generation.runner import Runner
from app.engine.jobs.params import (
    SDXL_UNION_TYPES,
    ControlLayer,
    GenerationParams,
    InvalidParameters,
    encode_control,
)
from app.engine.jobs.run_inputs import RunInputs
from tests.engine.generation.test_controlnet import control_png, upload
from tests.engine.generation.tiny_architectures import go_on, max_diff, model_info, params_for
from tests.engine.generation.tiny_architectures import pixels as pixels_of

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

STEPS = 4


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from app.testing.tiny.unet import write_tiny_controlnet, write_tiny_pipeline

    root = tmp_path_factory.mktemp("union-models")
    nets = root / "controlnet"
    return {
        "sdxl": write_tiny_pipeline(root / "sdxl", architecture=Architecture.SDXL),
        "nets": nets,
        "union-a": write_tiny_controlnet(nets / "union-a", seed=4, union=True),
        "union-b": write_tiny_controlnet(nets / "union-b", seed=5, union=True),
        "plain": write_tiny_controlnet(nets / "plain", architecture=Architecture.SDXL),
    }


def runner_with(folders: dict[str, Path], nets: Path, **kwargs: Any) -> Runner:
    from app.engine.generation.device import CPU

    model = model_info(folders["sdxl"], "sdxl")
    return Runner(
        device=CPU, resolve=lambda _name: model, threads=1,
        resolve_control=lambda name: find_controlnet(name, [nets]), **kwargs,
    )  # fmt: skip


@pytest.fixture(scope="module")
def runner(folders: dict[str, Path]) -> Runner:
    return runner_with(folders, folders["nets"])


Layer = tuple[str, int, str, float, float, float]  # net, image seed, type, weight, start, end


def union_params(
    layers: list[Layer], scheduler: str = "Euler a"
) -> tuple[GenerationParams, list[bytes]]:
    images = [control_png(seed) for _, seed, *_ in layers]
    control = [
        ControlLayer(upload(png), net, "none", weight, start, end, control_type=kind)
        for png, (net, _, kind, weight, start, end) in zip(images, layers, strict=True)
    ]
    params = params_for("sdxl", scheduler, steps=STEPS, control=encode_control(control))
    return params.validated(), images


def ours(
    runner: Runner, params: GenerationParams, images: list[bytes], folder: Path, name: str = "ours",
    on_step: Any = go_on,
) -> Any:  # fmt: skip
    return runner.run(
        params, RunInputs(control_images=images), output_path=folder / f"{name}.png",
        checkpoint_path=folder / f"{name}.ckpt", on_step=on_step,
    )  # fmt: skip


def finished(outcome: Any) -> np.ndarray:
    assert outcome.kind is OutcomeKind.COMPLETED and outcome.image_path is not None
    return pixels_of(outcome.image_path)


def stock(
    runner: Runner, folders: dict[str, Path], params: GenerationParams, images: list[bytes]
) -> np.ndarray:
    """The stock Union pipeline as its documentation calls it: one ControlNetUnionModel with
    lists of images and control modes, or a list of Unions (MultiControlNetUnionModel)."""
    from diffusers import ControlNetUnionModel, StableDiffusionXLControlNetUnionPipeline

    pipe = runner.load("sdxl").pipe
    layers = params.control_layers
    names = list(dict.fromkeys(layer.model for layer in layers))
    nets = [ControlNetUnionModel.from_pretrained(folders["nets"] / name) for name in names]
    components = {k: v for k, v in pipe.components.items() if k != "image_encoder"}
    stock_pipe: Any = StableDiffusionXLControlNetUnionPipeline(
        **components, controlnet=nets[0] if len(nets) == 1 else nets
    )
    stock_pipe.scheduler = denoise.make_scheduler(pipe, params.scheduler)
    stock_pipe.set_progress_bar_config(disable=True)
    result = stock_pipe(
        params.prompt,
        negative_prompt=params.negative_prompt or None,
        control_image=[Image.open(io.BytesIO(png)) for png in images],
        control_mode=[SDXL_UNION_TYPES.index(layer.control_type) for layer in layers],
        controlnet_conditioning_scale=[layer.weight for layer in layers],
        control_guidance_start=[layer.start for layer in layers],
        control_guidance_end=[layer.end for layer in layers],
        num_inference_steps=params.steps,
        guidance_scale=params.cfg,
        width=params.width,
        height=params.height,
        generator=torch.Generator().manual_seed(params.seed),
    ).images[0]
    return pixels_of(result)


CASES: dict[str, list[Layer]] = {
    "one layer": [("union-a", 7, "depth", 0.9, 0.0, 1.0)],
    "one Union, two types": [
        ("union-a", 7, "canny", 1.0, 0.0, 0.8), ("union-a", 8, "openpose", 0.6, 0.2, 1.0),
    ],
    "two Unions": [("union-a", 7, "depth", 1.0, 0.0, 1.0), ("union-b", 8, "tile", 0.7, 0.0, 0.6)],
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_a_union_equals_the_stock_union_pipeline(
    runner: Runner, folders: dict[str, Path], tmp_path: Path, case: str
) -> None:
    params, images = union_params(CASES[case])
    image = finished(ours(runner, params, images, tmp_path))
    assert max_diff(image, stock(runner, folders, params, images)) == 0


def test_the_control_type_counts_and_a_layer_without_one_is_refused(
    runner: Runner, tmp_path: Path
) -> None:
    depth, images = union_params([("union-a", 7, "depth", 1.0, 0.0, 1.0)])
    pose, _ = union_params([("union-a", 7, "openpose", 1.0, 0.0, 1.0)])
    assert max_diff(finished(ours(runner, depth, images, tmp_path, "d")),
                    finished(ours(runner, pose, images, tmp_path, "p"))) > 0  # fmt: skip
    untyped, _ = union_params([("union-a", 7, "", 1.0, 0.0, 1.0)])
    with pytest.raises(ControlNetMismatch, match="uses ControlNet Union 'union-a': give its con"):
        ours(runner, untyped, images, tmp_path, "none")
    canny = ControlLayer(upload(images[0]), "union-a", "canny")
    assert canny.union_type == "canny"  # the preprocessor says it
    unknown = encode_control([ControlLayer(upload(images[0]), "union-a", control_type="pose")])
    with pytest.raises(InvalidParameters, match="control type 'pose' is unknown"):
        params_for("sdxl", control=unknown).validated()


def test_pause_then_resume_with_a_union_is_exact(runner: Runner, tmp_path: Path) -> None:
    params, images = union_params(CASES["one Union, two types"], "DPM++ 2M")
    whole = finished(ours(runner, params, images, tmp_path, "whole"))
    pause = lambda p: StepDecision.PAUSE if p.step == 2 else StepDecision.CONTINUE  # noqa: E731
    assert ours(runner, params, images, tmp_path, "job", pause).kind is OutcomeKind.PAUSED
    assert max_diff(finished(ours(runner, params, images, tmp_path, "job")), whole) == 0


def test_a_union_is_detected_as_a_folder_and_as_a_single_file_which_loads_as_its_twin(
    runner: Runner, folders: dict[str, Path], tmp_path: Path
) -> None:
    """A Union kept as one .safetensors (as ComfyUI users keep xinsir's): found by its
    `task_embedding`, its sizes read from its tensors, loaded offline: its folder's image."""
    from diffusers import ControlNetUnionModel
    from safetensors.torch import save_file

    from app.engine.generation.guidance.control import ControlNetCache

    listed = {
        info.name: (info.architecture, info.union) for info in list_controlnets([folders["nets"]])
    }
    assert listed == {
        "union-a": (Architecture.SDXL, True), "union-b": (Architecture.SDXL, True),
        "plain": (Architecture.SDXL, False),
    }  # fmt: skip
    nets = tmp_path / "controlnet"
    nets.mkdir()
    union = ControlNetUnionModel.from_pretrained(folders["union-a"])
    save_file(union.state_dict(), str(nets / "union-file.safetensors"))
    [info] = list_controlnets([nets])
    assert (info.name, info.architecture, info.union, info.layout) == (
        "union-file", Architecture.SDXL, True, "diffusers",
    )  # fmt: skip
    configs = tmp_path / "configs"
    (configs / "controlnet-sdxl").mkdir(parents=True)
    shutil.copy(folders["plain"] / "config.json", configs / "controlnet-sdxl")
    from_file = runner_with(folders, nets, controlnets=ControlNetCache(configs))
    params, images = union_params([("union-file", 7, "depth", 0.8, 0.0, 1.0)])
    twin, _ = union_params([("union-a", 7, "depth", 0.8, 0.0, 1.0)])
    image = finished(ours(from_file, params, images, tmp_path, "file"))
    assert max_diff(image, finished(ours(runner, twin, images, tmp_path, "folder"))) == 0

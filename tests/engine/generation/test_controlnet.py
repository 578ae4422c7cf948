"""ControlNet in our own loop, on tiny random models: the stock ControlNet pipelines' image
(one layer, two layers through MultiControlNetModel, start/end), exact pause/resume (in a
fresh process too), ControlNets held while jobs name them, a misfit refused."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from app.engine.generation import denoise
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.files.sources import ModelInfo
from app.engine.generation.guidance.controlnets import (
    ControlNetInfo,
    ControlNetMismatch,
    find_controlnet,
    list_controlnets,
)
from app.engine.generation.outcome import OutcomeKind, StepDecision, StepProgress
from app.engine.generation.runner import Runner
from app.engine.jobs.params import ControlLayer, GenerationParams, encode_control
from app.engine.jobs.run_inputs import RunInputs
from tests.engine.generation.tiny_architectures import (
    go_on,
    max_diff,
    model_info,
    params_for,
    pixels,
)

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

STEPS = 5


def control_png(seed: int, size: tuple[int, int] = (64, 64)) -> bytes:
    """A black image with white strokes, as a canny or scribble map looks."""
    rng = np.random.default_rng(seed)
    array = np.zeros((size[1], size[0], 3), dtype=np.uint8)
    for _ in range(6):
        y, x = rng.integers(0, size[1]), rng.integers(0, size[0] - 20)
        array[y : y + 2, x : x + 20] = 255
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return buffer.getvalue()


def upload(png: bytes) -> str:
    return "upload:" + hashlib.sha256(png).hexdigest()


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from app.testing.tiny.unet import write_tiny_controlnet, write_tiny_pipeline

    root = tmp_path_factory.mktemp("control-models")
    nets = root / "controlnet"
    return {
        "sd1": write_tiny_pipeline(root / "sd1", architecture=Architecture.SD1),
        "sdxl": write_tiny_pipeline(root / "sdxl", architecture=Architecture.SDXL),
        "nets": nets,
        "cn-sd1-a": write_tiny_controlnet(nets / "cn-sd1-a", seed=1),
        "cn-sd1-b": write_tiny_controlnet(nets / "cn-sd1-b", seed=2),
        "cn-sdxl-a": write_tiny_controlnet(nets / "cn-sdxl-a", architecture=Architecture.SDXL),
        "cn-sdxl-b": write_tiny_controlnet(
            nets / "cn-sdxl-b", seed=3, architecture=Architecture.SDXL
        ),
    }


@pytest.fixture(scope="module")
def models(folders: dict[str, Path]) -> dict[str, ModelInfo]:
    return {name: model_info(folders[name], name) for name in ("sd1", "sdxl")}


def runner_with_nets(model: ModelInfo, nets: Path) -> Runner:
    from app.engine.generation.device import CPU

    return Runner(
        device=CPU, resolve=lambda _name: model, threads=1,
        resolve_control=lambda name: find_controlnet(name, [nets]),
    )  # fmt: skip


@pytest.fixture(scope="module")
def runners(models: dict[str, ModelInfo], folders: dict[str, Path]) -> dict[str, Runner]:
    return {name: runner_with_nets(model, folders["nets"]) for name, model in models.items()}


def layers_params(
    model: str, layers: list[tuple[str, int, float, float, float]], scheduler: str = "Euler a"
) -> tuple[GenerationParams, list[bytes]]:
    """(params, control images) for layers of (net, image seed, weight, start, end)."""
    images = [control_png(seed) for _, seed, _, _, _ in layers]
    control = [
        ControlLayer(upload(png), net, "canny", weight, start, end)
        for png, (net, _, weight, start, end) in zip(images, layers, strict=True)
    ]
    params = params_for(model, scheduler, steps=STEPS, control=encode_control(control))
    return params.validated(), images


def ours(
    runner: Runner,
    params: GenerationParams,
    images: list[bytes],
    folder: Path,
    name: str = "ours",
    on_step: Any = go_on,
) -> Any:
    return runner.run(
        params, RunInputs(control_images=images), output_path=folder / f"{name}.png",
        checkpoint_path=folder / f"{name}.ckpt", on_step=on_step,
    )  # fmt: skip


def finished(outcome: Any) -> np.ndarray:
    assert outcome.kind is OutcomeKind.COMPLETED and outcome.image_path is not None
    return pixels(outcome.image_path)


def stock(runner: Runner, params: GenerationParams, images: list[bytes], nets: Path) -> np.ndarray:
    """The stock ControlNet pipeline as its documentation calls it: ControlNetModel (or a
    list of them, which it wraps in MultiControlNetModel), PIL control images, scales."""
    from diffusers import (
        ControlNetModel,
        StableDiffusionControlNetPipeline,
        StableDiffusionXLControlNetPipeline,
    )

    pipe = runner.load(params.model).pipe
    layers = params.control_layers
    loaded = [ControlNetModel.from_pretrained(nets / layer.model) for layer in layers]
    one = len(layers) == 1
    pipeline_class = (
        StableDiffusionXLControlNetPipeline
        if params.model == "sdxl"
        else StableDiffusionControlNetPipeline
    )
    components = {k: v for k, v in pipe.components.items() if k != "image_encoder"}
    stock_pipe: Any = pipeline_class(**components, controlnet=loaded[0] if one else loaded)
    stock_pipe.scheduler = denoise.make_scheduler(pipe, params.scheduler)
    stock_pipe.set_progress_bar_config(disable=True)
    pictures = [Image.open(io.BytesIO(png)) for png in images]

    def each(values: list[float]) -> Any:
        return values[0] if one else values

    result = stock_pipe(
        params.prompt,
        image=pictures[0] if one else pictures,
        negative_prompt=params.negative_prompt or None,
        num_inference_steps=params.steps,
        guidance_scale=params.cfg,
        width=params.width,
        height=params.height,
        generator=torch.Generator().manual_seed(params.seed),
        controlnet_conditioning_scale=each([layer.weight for layer in layers]),
        control_guidance_start=each([layer.start for layer in layers]),
        control_guidance_end=each([layer.end for layer in layers]),
    ).images[0]
    return pixels(result)


CASES = {
    "one layer": [("a", 7, 1.0, 0.0, 1.0)],
    "one layer, weight and start/end": [("a", 7, 0.6, 0.2, 0.8)],
    "two layers": [("a", 7, 1.0, 0.0, 1.0), ("b", 8, 0.5, 0.0, 0.6)],
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("model", ["sd1", "sdxl"])
def test_controlnet_equals_the_stock_pipeline(
    runners: dict[str, Runner], folders: dict[str, Path], tmp_path: Path, model: str, case: str
) -> None:
    layers = [(f"cn-{model}-{net}", *rest) for net, *rest in CASES[case]]
    params, images = layers_params(model, layers)  # type: ignore[arg-type]
    image = finished(ours(runners[model], params, images, tmp_path))
    assert max_diff(image, stock(runners[model], params, images, folders["nets"])) == 0


def test_the_control_layers_change_the_image(runners: dict[str, Runner], tmp_path: Path) -> None:
    """Each knob is used: without a layer, with another image, past its end."""
    guided, images = layers_params("sd1", [("cn-sd1-a", 7, 1.0, 0.0, 1.0)])
    plain = params_for("sd1", "Euler a", steps=STEPS)
    other, other_images = layers_params("sd1", [("cn-sd1-a", 9, 1.0, 0.0, 1.0)])
    late, _ = layers_params("sd1", [("cn-sd1-a", 7, 1.0, 0.8, 1.0)])
    run = runners["sd1"]
    base = finished(ours(run, guided, images, tmp_path, "guided"))
    assert max_diff(base, finished(ours(run, plain, [], tmp_path, "plain"))) > 0
    assert max_diff(base, finished(ours(run, other, other_images, tmp_path, "other"))) > 0
    assert max_diff(base, finished(ours(run, late, images, tmp_path, "late"))) > 0


@pytest.mark.parametrize("model", ["sd1", "sdxl"])
def test_pause_then_resume_with_controlnet_is_exact(
    runners: dict[str, Runner], tmp_path: Path, model: str
) -> None:
    layers = [(f"cn-{model}-a", 7, 0.8, 0.0, 0.5), (f"cn-{model}-b", 8, 1.0, 0.4, 1.0)]
    params, images = layers_params(model, layers, "DPM++ 2M")
    reference = finished(ours(runners[model], params, images, tmp_path, "reference"))
    paused = ours(
        runners[model], params, images, tmp_path, "job",
        on_step=lambda p: StepDecision.PAUSE if p.step == 2 else StepDecision.CONTINUE,
    )  # fmt: skip
    assert paused.kind is OutcomeKind.PAUSED
    seen: list[int] = []

    def record(progress: StepProgress) -> StepDecision:
        seen.append(progress.step)
        return StepDecision.CONTINUE

    resumed = finished(ours(runners[model], params, images, tmp_path, "job", record))
    assert seen == [3, 4, 5]
    assert max_diff(resumed, reference) == 0


def _resume_in_child(model: ModelInfo, nets: Path, params: GenerationParams, folder: Path) -> None:
    images = [control_png(7), control_png(8)]
    outcome = ours(runner_with_nets(model, nets), params, images, folder, "job")
    assert outcome.kind is OutcomeKind.COMPLETED


def test_a_crash_mid_controlnet_resumes_in_a_fresh_process_to_the_same_image(
    models: dict[str, ModelInfo], runners: dict[str, Runner], folders: dict[str, Path],
    tmp_path: Path, fresh_process: Callable[..., Any],
) -> None:  # fmt: skip
    layers = [("cn-sdxl-a", 7, 0.8, 0.0, 0.5), ("cn-sdxl-b", 8, 1.0, 0.4, 1.0)]
    params, images = layers_params("sdxl", layers)
    reference = finished(ours(runners["sdxl"], params, images, tmp_path, "reference"))

    class Crash(Exception):
        pass

    def checkpoint_then_crash(progress: StepProgress) -> StepDecision:
        if progress.step == 2:
            return StepDecision.CHECKPOINT
        if progress.step == 3:
            raise Crash  # nothing written after the rolling checkpoint: as a killed worker
        return StepDecision.CONTINUE

    with pytest.raises(Crash):
        ours(runners["sdxl"], params, images, tmp_path, "job", checkpoint_then_crash)
    assert (tmp_path / "job.ckpt").exists()
    fresh_process(_resume_in_child, models["sdxl"], folders["nets"], params, tmp_path)
    assert max_diff(pixels(tmp_path / "job.png"), reference) == 0


def test_controlnets_are_listed_by_architecture_and_a_misfit_is_refused(
    runners: dict[str, Runner], folders: dict[str, Path], tmp_path: Path
) -> None:
    listed = {info.name: info.architecture for info in list_controlnets([folders["nets"]])}
    assert listed == {
        "cn-sd1-a": Architecture.SD1, "cn-sd1-b": Architecture.SD1,
        "cn-sdxl-a": Architecture.SDXL, "cn-sdxl-b": Architecture.SDXL,
    }  # fmt: skip
    params, images = layers_params("sd1", [("cn-sdxl-a", 7, 1.0, 0.0, 1.0)])
    with pytest.raises(ControlNetMismatch, match=r"'cn-sdxl-a' is for SDXL.*'sd1' is SD 1\.x"):
        ours(runners["sd1"], params, images, tmp_path)
    assert not (tmp_path / "ours.png").exists()


def test_controlnets_stay_loaded_while_jobs_name_them_and_go_when_none_does(
    models: dict[str, ModelInfo], folders: dict[str, Path], tmp_path: Path
) -> None:
    loads: list[str] = []

    def counting(name: str) -> ControlNetInfo:
        loads.append(name)
        return find_controlnet(name, [folders["nets"]])

    runner = runner_with_nets(models["sd1"], folders["nets"])
    runner._resolve_control = counting
    params, images = layers_params("sd1", [("cn-sd1-a", 7, 1.0, 0.0, 1.0)])
    ours(runner, params, images, tmp_path, "one")
    held = list(runner._controlnets.loaded)
    net = runner._controlnets.get([counting("cn-sd1-a")], runner.load("sd1").pipe)[0]
    ours(runner, params, images, tmp_path, "two")
    assert runner._controlnets.get([counting("cn-sd1-a")], runner.load("sd1").pipe)[0] is net
    assert len(held) == 1
    ours(runner, params_for("sd1", steps=2), [], tmp_path, "none")
    assert runner._controlnets.loaded == []


def test_control_images_must_be_the_ones_named(runners: dict[str, Runner], tmp_path: Path) -> None:
    from app.engine.jobs.params import InvalidParameters

    params, _ = layers_params("sd1", [("cn-sd1-a", 7, 1.0, 0.0, 1.0)])
    with pytest.raises(InvalidParameters, match="control layer 0's image is not the one"):
        ours(runners["sd1"], params, [control_png(99)], tmp_path)
    with pytest.raises(InvalidParameters, match="1 control layers named, but 0 images"):
        ours(runners["sd1"], params, [], tmp_path)


@pytest.mark.parametrize(("model", "original"), [("sd1", True), ("sdxl", True), ("sdxl", False)])
def test_a_single_file_controlnet_loads_offline_as_its_folder_twin(
    models: dict[str, ModelInfo], runners: dict[str, Runner], folders: dict[str, Path],
    tmp_path: Path, model: str, original: bool,
) -> None:  # fmt: skip
    """The same random ControlNet as `cn-<model>-a`, written as A1111 and ComfyUI keep them
    (one .safetensors, with the original `control_model.*` keys, or SDXL's with diffusers'
    as most ship): found by its header, loaded with a local config (HF_HUB_OFFLINE is set),
    the same weights and the same image. SDXL's original layout: diffusers' converter drops
    its added embedding, which Easel maps itself."""
    import shutil

    from app.engine.generation.device import CPU
    from app.engine.generation.guidance.control import ControlNetCache
    from app.testing.tiny.unet import write_tiny_controlnet_file

    architecture = Architecture(model)
    nets = tmp_path / "controlnet"
    write_tiny_controlnet_file(
        nets / "cn-file.safetensors", seed=1, architecture=architecture, original=original
    )
    configs = tmp_path / "configs" / f"controlnet-{architecture.value}"
    configs.mkdir(parents=True)
    shutil.copy(folders[f"cn-{model}-a"] / "config.json", configs)
    [info] = list_controlnets([nets])
    layout = "original" if original else "diffusers"
    assert (info.name, info.architecture, info.layout) == ("cn-file", architecture, layout)
    runner = Runner(
        device=CPU, resolve=lambda _name: models[model], threads=1,
        resolve_control=lambda name: find_controlnet(name, [nets]),
        controlnets=ControlNetCache(configs.parent),
    )  # fmt: skip
    from_file, images = layers_params(model, [("cn-file", 7, 0.9, 0.0, 1.0)])
    from_folder, _ = layers_params(model, [(f"cn-{model}-a", 7, 0.9, 0.0, 1.0)])
    image = finished(ours(runner, from_file, images, tmp_path, "file"))
    [net] = runner._controlnets.get([info], runner.load(model).pipe)
    [twin] = runners[model]._controlnets.get(
        [find_controlnet(f"cn-{model}-a", [folders["nets"]])], runners[model].load(model).pipe
    )
    file_state, twin_state = net.state_dict(), twin.state_dict()
    assert file_state.keys() == twin_state.keys()
    assert all(torch.equal(file_state[k], twin_state[k]) for k in twin_state)
    reference = finished(ours(runners[model], from_folder, images, tmp_path, "folder"))
    assert max_diff(image, reference) == 0


def test_a_single_file_without_a_config_for_its_architecture_is_refused_clearly(
    models: dict[str, ModelInfo], tmp_path: Path
) -> None:
    from app.engine.generation.device import CPU
    from app.engine.generation.guidance.control import ControlNetCache
    from app.engine.generation.guidance.controlnets import ControlNetNotFound
    from app.testing.tiny.unet import write_tiny_controlnet_file

    nets = tmp_path / "controlnet"
    write_tiny_controlnet_file(nets / "cn-file.safetensors")
    runner = Runner(
        device=CPU, resolve=lambda _name: models["sd1"], threads=1,
        resolve_control=lambda name: find_controlnet(name, [nets]),
        controlnets=ControlNetCache(tmp_path / "no-configs"),
    )  # fmt: skip
    params, images = layers_params("sd1", [("cn-file", 7, 1.0, 0.0, 1.0)])
    with pytest.raises(ControlNetNotFound, match=r"has no SD 1\.x ControlNet config"):
        ours(runner, params, images, tmp_path)


@pytest.mark.parametrize("architecture", ["sd1", "sdxl"])
def test_the_shipped_controlnet_configs_fit_the_shipped_models(architecture: str) -> None:
    """A real ControlNet file is loaded with resources/model_configs/controlnet-*: each has
    the very shapes of a ControlNet made from that architecture's UNet (on the meta device:
    no weights)."""
    from accelerate import init_empty_weights
    from diffusers import ControlNetModel, UNet2DConditionModel

    from app.engine.generation.guidance.control import controlnet_config
    from app.engine.paths import resources_dir

    unet_config = UNet2DConditionModel.load_config(
        resources_dir() / "model_configs" / architecture / "unet"
    )
    with init_empty_weights():
        expected = ControlNetModel.from_unet(UNet2DConditionModel.from_config(unet_config))
        shipped = ControlNetModel.from_config(
            ControlNetModel.load_config(controlnet_config(Architecture(architecture)))
        )
    shapes = {k: v.shape for k, v in shipped.state_dict().items()}
    assert shapes == {k: v.shape for k, v in expected.state_dict().items()}

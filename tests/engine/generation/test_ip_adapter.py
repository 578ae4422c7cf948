"""IP-Adapter in our own loop, on tiny random models and a tiny image encoder in the layout
artists download: the stock pipelines' `load_ip_adapter` image, exact pause/resume, the
adapter unloaded when a job names none."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from app.engine.generation import denoise
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.files.sources import ModelInfo
from app.engine.generation.guidance.ip_adapters import (
    IPAdapterNotFound,
    find_ip_adapter,
    list_ip_adapters,
)
from app.engine.generation.outcome import OutcomeKind, StepDecision
from app.engine.generation.runner import Runner
from app.engine.jobs.params import GenerationParams, ReferenceImage, encode_reference
from app.engine.jobs.run_inputs import RunInputs
from tests.engine.generation.tiny_architectures import (
    go_on,
    max_diff,
    model_info,
    params_for,
    pixels,
)

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

STEPS = 4


def reference_png() -> bytes:
    x = np.linspace(0, 255, 48, dtype=np.uint8)
    rgb = np.stack([np.tile(x, (40, 1)), np.tile(x[::-1], (40, 1)), np.full((40, 48), 90)], -1)
    buffer = io.BytesIO()
    Image.fromarray(rgb.astype(np.uint8)).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from app.testing.tiny.unet import write_tiny_ip_adapter, write_tiny_pipeline

    root = tmp_path_factory.mktemp("ip-adapter-models")
    adapters = root / "ipadapter"
    write_tiny_ip_adapter(adapters / "models", architecture=Architecture.SD1)
    write_tiny_ip_adapter(adapters / "sdxl_models", architecture=Architecture.SDXL)
    (adapters / "sdxl_models" / "ip-adapter_tiny.safetensors").rename(
        adapters / "sdxl_models" / "ip-adapter_tiny_sdxl.safetensors"
    )
    return {
        "sd1": write_tiny_pipeline(root / "sd1", architecture=Architecture.SD1),
        "sdxl": write_tiny_pipeline(root / "sdxl", architecture=Architecture.SDXL),
        "adapters": adapters,
    }


ADAPTER = {"sd1": "ip-adapter_tiny", "sdxl": "ip-adapter_tiny_sdxl"}


def runner_for(model: ModelInfo, adapters: Path) -> Runner:
    from app.engine.generation.device import CPU

    return Runner(
        device=CPU, resolve=lambda _name: model, threads=1,
        resolve_reference=lambda name: find_ip_adapter(name, [adapters]),
    )  # fmt: skip


@pytest.fixture(scope="module")
def runners(folders: dict[str, Path]) -> dict[str, Runner]:
    return {
        name: runner_for(model_info(folders[name], name), folders["adapters"])
        for name in ("sd1", "sdxl")
    }


def referenced(model: str, weight: float = 0.7, scheduler: str = "Euler a") -> GenerationParams:
    png = reference_png()
    reference = ReferenceImage("upload:" + hashlib.sha256(png).hexdigest(), ADAPTER[model], weight)
    return params_for(model, scheduler, steps=STEPS, reference=encode_reference([reference]))


def ours(runner: Runner, params: GenerationParams, folder: Path, name: str, **kw: Any) -> Any:
    return runner.run(
        params, RunInputs(reference_images=[reference_png()] if params.reference else []),
        output_path=folder / f"{name}.png", checkpoint_path=folder / f"{name}.ckpt",
        on_step=kw.get("on_step", go_on),
    )  # fmt: skip


def finished(outcome: Any) -> np.ndarray:
    assert outcome.kind is OutcomeKind.COMPLETED and outcome.image_path is not None
    return pixels(outcome.image_path)


def stock(folders: dict[str, Path], params: GenerationParams) -> np.ndarray:
    """The stock pipeline, loaded fresh, with the adapter as its documentation loads it."""
    from diffusers import StableDiffusionPipeline, StableDiffusionXLPipeline

    pipeline_class = (
        StableDiffusionXLPipeline if params.model == "sdxl" else StableDiffusionPipeline
    )
    pipe: Any = pipeline_class.from_pretrained(folders[params.model])
    pipe.scheduler = denoise.make_scheduler(pipe, params.scheduler)
    pipe.set_progress_bar_config(disable=True)
    subfolder = "sdxl_models" if params.model == "sdxl" else "models"
    pipe.load_ip_adapter(
        str(folders["adapters"]), subfolder=subfolder,
        weight_name=f"{ADAPTER[params.model]}.safetensors",
    )  # fmt: skip
    [reference] = params.references
    pipe.set_ip_adapter_scale(reference.weight)
    result = pipe(
        params.prompt, negative_prompt=params.negative_prompt,
        ip_adapter_image=Image.open(io.BytesIO(reference_png())),
        num_inference_steps=params.steps, guidance_scale=params.cfg, width=params.width,
        height=params.height, generator=torch.Generator().manual_seed(params.seed),
    ).images[0]  # fmt: skip
    return pixels(result)


@pytest.mark.parametrize("model", ["sd1", "sdxl"])
def test_ip_adapter_equals_the_stock_load_ip_adapter_path(
    runners: dict[str, Runner], folders: dict[str, Path], tmp_path: Path, model: str
) -> None:
    params = referenced(model)
    image = finished(ours(runners[model], params, tmp_path, "ours"))
    assert max_diff(image, stock(folders, params)) == 0
    plain = finished(ours(runners[model], params_for(model, "Euler a", steps=STEPS), tmp_path, "p"))
    assert max_diff(image, plain) > 0  # the reference did guide it


def test_the_adapter_goes_when_a_job_names_none_and_the_weight_counts(
    runners: dict[str, Runner], folders: dict[str, Path], tmp_path: Path
) -> None:
    from diffusers import StableDiffusionPipeline

    runner = runners["sd1"]
    strong = finished(ours(runner, referenced("sd1", 1.0), tmp_path, "strong"))
    weak = finished(ours(runner, referenced("sd1", 0.3), tmp_path, "weak"))
    assert max_diff(strong, weak) > 0
    params = params_for("sd1", "Euler a", steps=STEPS)
    after = finished(ours(runner, params, tmp_path, "after"))
    assert runner.load("sd1").pipe.unet.encoder_hid_proj is None  # unloaded
    pipe: Any = StableDiffusionPipeline.from_pretrained(folders["sd1"])
    pipe.scheduler = denoise.make_scheduler(pipe, "Euler a")
    pipe.set_progress_bar_config(disable=True)
    reference = pipe(
        params.prompt, negative_prompt=params.negative_prompt, num_inference_steps=STEPS,
        guidance_scale=params.cfg, width=64, height=64,
        generator=torch.Generator().manual_seed(params.seed),
    ).images[0]  # fmt: skip
    assert max_diff(after, pixels(reference)) == 0


@pytest.mark.parametrize("model", ["sd1", "sdxl"])
def test_pause_then_resume_with_a_reference_is_exact(
    runners: dict[str, Runner], tmp_path: Path, model: str
) -> None:
    params = referenced(model, 0.8, "DPM++ 2M")
    reference = finished(ours(runners[model], params, tmp_path, "reference"))
    pause = lambda p: StepDecision.PAUSE if p.step == 2 else StepDecision.CONTINUE  # noqa: E731
    assert ours(runners[model], params, tmp_path, "job", on_step=pause).kind is OutcomeKind.PAUSED
    assert max_diff(finished(ours(runners[model], params, tmp_path, "job")), reference) == 0


def test_adapters_are_listed_and_one_for_another_model_is_refused(
    runners: dict[str, Runner], folders: dict[str, Path], tmp_path: Path
) -> None:
    names = {info.name for info in list_ip_adapters([folders["adapters"]])}
    assert names == {"ip-adapter_tiny", "ip-adapter_tiny_sdxl"}
    png = reference_png()
    wrong = ReferenceImage("upload:" + hashlib.sha256(png).hexdigest(), ADAPTER["sdxl"], 1.0)
    params = params_for("sd1", steps=STEPS, reference=encode_reference([wrong]))
    with pytest.raises(IPAdapterNotFound, match="cross-attention is 32 wide"):
        ours(runners["sd1"], params, tmp_path, "wrong")


def second_reference_png() -> bytes:
    rgb = np.zeros((32, 32, 3), dtype=np.uint8)
    rgb[8:24, 4:28] = (30, 200, 120)
    buffer = io.BytesIO()
    Image.fromarray(rgb).save(buffer, format="PNG")
    return buffer.getvalue()


def two_references(
    model: str, weights: tuple[float, float], scheduler: str = "Euler a"
) -> GenerationParams:
    pngs = (reference_png(), second_reference_png())
    references = [
        ReferenceImage("upload:" + hashlib.sha256(png).hexdigest(), ADAPTER[model], weight)
        for png, weight in zip(pngs, weights, strict=True)
    ]
    return params_for(model, scheduler, steps=STEPS, reference=encode_reference(references))


def ours_two(runner: Runner, params: GenerationParams, folder: Path, name: str, **kw: Any) -> Any:
    return runner.run(
        params, RunInputs(reference_images=[reference_png(), second_reference_png()]),
        output_path=folder / f"{name}.png", checkpoint_path=folder / f"{name}.ckpt",
        on_step=kw.get("on_step", go_on),
    )  # fmt: skip


@pytest.mark.parametrize("model", ["sd1", "sdxl"])
def test_two_reference_images_each_with_its_weight_equal_the_stock_multi_ip_adapter_path(
    runners: dict[str, Runner], folders: dict[str, Path], tmp_path: Path, model: str
) -> None:
    """diffusers' several reference images: `load_ip_adapter` with a list (one adapter per
    image: its scale is per adapter), `set_ip_adapter_scale` with a list, one image each."""
    from diffusers import StableDiffusionPipeline, StableDiffusionXLPipeline

    params = two_references(model, (0.8, 0.4))
    image = finished(ours_two(runners[model], params, tmp_path, "ours"))
    pipeline_class = StableDiffusionXLPipeline if model == "sdxl" else StableDiffusionPipeline
    pipe: Any = pipeline_class.from_pretrained(folders[model])
    pipe.scheduler = denoise.make_scheduler(pipe, params.scheduler)
    pipe.set_progress_bar_config(disable=True)
    subfolder = "sdxl_models" if model == "sdxl" else "models"
    weight_name = f"{ADAPTER[model]}.safetensors"
    pipe.load_ip_adapter(
        str(folders["adapters"]), subfolder=subfolder, weight_name=[weight_name, weight_name]
    )
    pipe.set_ip_adapter_scale([0.8, 0.4])
    pictures = [Image.open(io.BytesIO(png)) for png in (reference_png(), second_reference_png())]
    expected = pipe(
        params.prompt, negative_prompt=params.negative_prompt, ip_adapter_image=pictures,
        num_inference_steps=params.steps, guidance_scale=params.cfg, width=params.width,
        height=params.height, generator=torch.Generator().manual_seed(params.seed),
    ).images[0]  # fmt: skip
    assert max_diff(image, pixels(expected)) == 0
    one = finished(ours(runners[model], referenced(model, 0.8), tmp_path, "one"))
    assert max_diff(image, one) > 0  # the second image guides too
    swapped = finished(ours_two(runners[model], two_references(model, (0.4, 0.8)), tmp_path, "w"))
    assert max_diff(image, swapped) > 0  # and each weight is its own


def test_pause_then_resume_with_two_references_is_exact(
    runners: dict[str, Runner], tmp_path: Path
) -> None:
    params = two_references("sd1", (0.7, 0.5), scheduler="DPM++ 2M")
    whole = finished(ours_two(runners["sd1"], params, tmp_path, "whole"))
    pause = lambda p: StepDecision.PAUSE if p.step == 2 else StepDecision.CONTINUE  # noqa: E731
    paused = ours_two(runners["sd1"], params, tmp_path, "job", on_step=pause)
    assert paused.kind is OutcomeKind.PAUSED
    assert max_diff(finished(ours_two(runners["sd1"], params, tmp_path, "job")), whole) == 0


def test_reference_images_whose_adapters_need_different_image_encoders_are_refused(
    folders: dict[str, Path], tmp_path: Path
) -> None:
    """diffusers encodes every reference with the first adapter's encoder: adapters of
    another encoder cannot share a job (one sentence, before anything is loaded)."""
    import json
    import shutil

    adapters = tmp_path / "ipadapter"
    shutil.copytree(folders["adapters"] / "models", adapters / "models")
    other = adapters / "other"
    shutil.copytree(folders["adapters"] / "models", other)
    (other / "ip-adapter_tiny.safetensors").rename(other / "ip-adapter_other.safetensors")
    config_path = other / "image_encoder" / "config.json"
    config = json.loads(config_path.read_text())
    config["projection_dim"] = 24  # another kind of encoder
    config_path.write_text(json.dumps(config))
    runner = runner_for(model_info(folders["sd1"], "sd1"), adapters)
    png = reference_png()
    name = "upload:" + hashlib.sha256(png).hexdigest()
    both = encode_reference(
        [ReferenceImage(name, "ip-adapter_tiny", 0.5), ReferenceImage(name, "ip-adapter_other")]
    )
    params = params_for("sd1", steps=STEPS, reference=both)
    with pytest.raises(IPAdapterNotFound, match="use different image encoders"):
        runner.run(
            params, RunInputs(reference_images=[png, png]), output_path=tmp_path / "x.png",
            checkpoint_path=tmp_path / "x.ckpt", on_step=go_on,
        )  # fmt: skip
    assert not (tmp_path / "x.png").exists()

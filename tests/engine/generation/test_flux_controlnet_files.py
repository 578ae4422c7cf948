"""Flux.1 ControlNets as the single files artists keep in `models/controlnet/`, no config
beside them: diffusers' keys (InstantX's and Shakker-Labs' renamed
`diffusion_pytorch_model.safetensors`, a Union's too) and XLabs' own layout
(`double_blocks.N`, `input_hint_block.N`). Each is listed as Flux.1's from its header, and
a job with it equals stock `FluxControlNetPipeline` with the same tiny net as a folder; a
pause resumes to the same image; a file Easel cannot read is refused at submit."""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from app.engine.generation.files.architecture import Architecture
from app.engine.generation.files.sources import ModelInfo, ModelSearchPath
from app.engine.generation.guidance.controlnets import (
    ControlNetNotFound,
    find_controlnet,
    list_controlnets,
)
from app.engine.generation.outcome import OutcomeKind
from app.engine.generation.request_checks import check_runnable
from app.engine.generation.runner import Runner
from app.engine.jobs.params import GenerationParams
from app.testing.tiny.flux import (
    stock_flux_controlnet,
    write_tiny_flux,
    write_tiny_flux_controlnet,
    write_tiny_flux_controlnet_file,
)
from tests.engine.generation.test_flux_controlnet import Layer, flux_params, image_of, ours
from tests.engine.generation.tiny_architectures import max_diff, model_info, pause_at, pixels

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

# Each file and the folder holding the same tiny net (built from the same seed).
NETS = {
    "instantx-file": ({"seed": 5}, "diffusers"),
    "union-file": ({"seed": 8, "union": True}, "diffusers"),
    "xlabs-v3": ({"seed": 7, "xlabs": True, "single_layers": 0}, "xlabs"),
}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("flux-controlnet-files")
    write_tiny_flux(root / "flux-dev", guidance_embeds=True)
    for name, (build, layout) in NETS.items():
        write_tiny_flux_controlnet_file(
            root / "controlnet" / f"{name}.safetensors", layout=layout, **build
        )
        write_tiny_flux_controlnet(root / "folders" / name, **build)
    return root


def runner_for(models: Path, dtype: str = "float32") -> Runner:
    from app.engine.generation.device import DeviceChoice

    model = model_info(models / "flux-dev", "m")
    return Runner(
        device=DeviceChoice("cpu", dtype), resolve=lambda _name: model, threads=1,
        resolve_control=lambda name: find_controlnet(name, [models / "controlnet"]),
    )  # fmt: skip


@pytest.fixture(scope="module")
def runner(models: Path) -> Runner:
    return runner_for(models)


def stock(
    models: Path, params: GenerationParams, images: list[bytes], dtype: torch.dtype = torch.float32
) -> np.ndarray:
    """Stock `FluxControlNetPipeline` with each layer's net as its diffusers folder."""
    folders = [models / "folders" / layer.model for layer in params.control_layers]
    pictures = [Image.open(io.BytesIO(png)) for png in images]
    return pixels(stock_flux_controlnet(models / "flux-dev", folders, params, pictures, dtype))


CASES: dict[str, list[Layer]] = {
    "instantx file": [("instantx-file", 3, 0.8, 0.0, 1.0, "")],
    "union file, a mode": [("union-file", 3, 1.0, 0.0, 1.0, "depth")],
    "xlabs file": [("xlabs-v3", 3, 0.8, 0.0, 0.7, "")],
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_flux_controlnet_file_is_stock_with_the_same_net_as_a_folder(
    models: Path, runner: Runner, tmp_path: Path, case: str
) -> None:
    params, images = flux_params(CASES[case])
    image = image_of(ours(runner, params, images, tmp_path, "ours"))
    assert max_diff(image, stock(models, params, images)) == 0


def test_a_union_file_in_bfloat16_is_stock_too(models: Path, tmp_path: Path) -> None:
    """The file's weights cast as `from_pretrained(torch_dtype=...)` casts the folder's."""
    params, images = flux_params(CASES["union file, a mode"], seed=5)
    image = image_of(ours(runner_for(models, "bfloat16"), params, images, tmp_path, "bf16"))
    assert max_diff(image, stock(models, params, images, torch.bfloat16)) == 0


def test_a_pause_with_an_xlabs_file_resumes_exactly(
    models: Path, runner: Runner, tmp_path: Path
) -> None:
    params, images = flux_params(CASES["xlabs file"], seed=11)
    whole = image_of(ours(runner, params, images, tmp_path, "whole"))
    paused = ours(runner, params, images, tmp_path, "job", on_step=pause_at(1))
    assert paused.kind is OutcomeKind.PAUSED
    runner._controlnets.clear()  # as a fresh process: the file is read again
    resumed = ours(runner, params, images, tmp_path, "job")
    assert resumed.resumed_from is not None and resumed.resumed_from.step == 1
    assert max_diff(image_of(resumed), whole) == 0


def test_files_are_listed_as_flux_and_an_unreadable_one_is_refused_at_submit(
    models: Path, tmp_path: Path
) -> None:
    from safetensors.torch import save_file

    listed = {
        info.name: (info.architecture, info.layout, info.union)
        for info in list_controlnets([models / "controlnet"])
    }
    flux = Architecture.FLUX1
    assert listed == {
        "instantx-file": (flux, "diffusers", False), "union-file": (flux, "diffusers", True),
        "xlabs-v3": (flux, "xlabs", False),
    }  # fmt: skip
    search = ModelSearchPath(user=(models,))
    check_runnable(flux_params(CASES["xlabs file"], model="flux-dev")[0], search)
    broken = models / "controlnet" / "broken.safetensors"
    save_file({"controlnet_x_embedder.weight": torch.zeros(2, 2)}, str(broken))
    odd = models / "controlnet" / "odd-xlabs.safetensors"
    save_file(
        {
            "double_blocks.0.img_odd.weight": torch.zeros(2),
            "input_hint_block.0.weight": torch.zeros(2),
        },
        str(odd),
    )
    try:
        refusals = {
            "broken": "ControlNet 'broken' cannot be used: it is not a Flux.1 ControlNet file "
            "Easel can read: its tensors are not a Flux.1 ControlNet's (no usable "
            "'x_embedder.weight')",
            "odd-xlabs": "ControlNet 'odd-xlabs' cannot be used: it is not a Flux.1 ControlNet "
            "file Easel can read: it has a tensor Easel does not know: "
            "double_blocks.0.img_odd.weight",
        }
        for name, sentence in refusals.items():
            params = flux_params([(name, 3, 1.0, 0.0, 1.0, "")], model="flux-dev")[0]
            with pytest.raises(ControlNetNotFound, match=f"^{re.escape(sentence)}$"):
                check_runnable(params, search)
    finally:
        broken.unlink()
        odd.unlink()


def test_a_file_takes_its_rotary_axes_from_the_model(models: Path, runner: Runner) -> None:
    """The axes are not in the weights: the tiny model's (4, 6, 6), not Flux.1's default."""
    from app.engine.generation.guidance.control import _load

    info = find_controlnet("instantx-file", [models / "controlnet"])
    transformer = runner.load("m").pipe.transformer
    net = _load(info, torch.float32, None, transformer.config)
    assert list(net.config.axes_dims_rope) == [4, 6, 6]
    assert isinstance(model_info(models / "flux-dev", "m"), ModelInfo)

"""The VAE in half precision: upcast where the stock pipelines upcast it, its latents
normalised as theirs, and a VAE that overflows anyway retried once in float32.

A VAE is made to overflow in float16 as SDXL's real one does, by its first convolution:
all weights 3000 (exact in float16) sum 27 pixels near +-1 to about +-80000, past
float16's 65504 but nothing to float32. The rest of the network is the tiny random one.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from app.engine.generation.device import CPU, DeviceChoice
from app.engine.generation.errors import NonFiniteVaeOutput
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.loop.vae_precision import keep_in_float32
from app.engine.generation.outcome import OutcomeKind
from app.engine.generation.runner import VAE_FLOAT32_NOTE, Runner
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.run_inputs import RunInputs
from app.testing.tiny.flux import write_tiny_flux
from app.testing.tiny.klein import write_tiny_klein
from tests.engine.generation.test_img2img import init_png
from tests.engine.generation.test_img2img_architectures import stock
from tests.engine.generation.tiny_architectures import (
    go_on,
    max_diff,
    model_info,
    params_for,
    pixels,
    tiny_folders,
)

__all__ = ["tiny_folders"]

pytestmark = [
    pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:`upcast_vae` is deprecated:FutureWarning"),  # stock's
]

FLOAT16 = DeviceChoice("cpu", "float16")
OVERFLOWING_WEIGHT = 3000.0


def runner_for(folder: Path, device: DeviceChoice = FLOAT16) -> Runner:
    model = model_info(folder, "m")
    return Runner(device=device, resolve=lambda _name: model, threads=1)


def overflowing(conv: torch.nn.Conv2d) -> None:
    """`conv` sums its inputs times 3000: infinity in float16 wherever they are near +-1."""
    with torch.no_grad():
        conv.weight.fill_(OVERFLOWING_WEIGHT)


def overflowing_output(conv: torch.nn.Module) -> None:
    """`conv`'s output times 1e5: infinity in float16 wherever it passes 0.66, whatever its
    input (Flux.2's batch-normalised latents are too small for `overflowing`)."""
    conv.register_forward_hook(lambda _module, _args, output: output * 1e5)


def run(runner: Runner, folder: Path, name: str, **changes: Any) -> tuple[np.ndarray, str]:
    """The job's image and its outcome's note (what the timeline shows)."""
    params = params_for("m", **changes)
    out = runner.run(
        params, RunInputs(init_image=init_png() if params.init_image else None),
        output_path=folder / f"{name}.png", checkpoint_path=folder / f"{name}.ckpt", on_step=go_on,
    )  # fmt: skip
    assert out.kind is OutcomeKind.COMPLETED and out.image_path is not None
    return pixels(out.image_path), out.note


def stock_img2img(runner: Runner, params_changes: dict[str, Any]) -> np.ndarray:
    """`StableDiffusionXLImg2ImgPipeline` on the same modules, called with its defaults."""
    return stock(runner, Architecture.SDXL, params_for("m", **params_changes))


IMG2IMG = {"init_image": "job:1", "strength": 0.6}


def test_sdxl_img2img_in_float16_encodes_in_float32_as_its_vae_config_asks(
    tiny_folders: dict[Architecture, Path], tmp_path: Path
) -> None:
    runner = runner_for(tiny_folders[Architecture.SDXL])
    vae = runner.load("m").pipe.vae
    assert vae.dtype == torch.float16 and vae.config.force_upcast
    overflowing(vae.encoder.conv_in)
    expected = stock_img2img(runner, IMG2IMG)
    image, note = run(runner, tmp_path, "ours", **IMG2IMG)
    assert note == ""  # upcast from the start, as the stock pipeline: no failed attempt
    assert max_diff(image, expected) <= 1
    assert image.std() > 10  # a picture, not a NaN-black square
    assert vae.dtype == torch.float16  # moved back after the encode, as stock


def test_sdxl_latents_mean_and_std_normalise_the_img2img_encode_as_stock(
    tiny_folders: dict[Architecture, Path], tmp_path: Path
) -> None:
    runner = runner_for(tiny_folders[Architecture.SDXL], CPU)
    vae = runner.load("m").pipe.vae
    vae.register_to_config(latents_mean=[0.5, -0.2, 0.1, 0.3], latents_std=[2.0, 1.5, 3.0, 0.8])
    expected = stock_img2img(runner, IMG2IMG)
    image, _ = run(runner, tmp_path, "ours", **IMG2IMG)
    assert max_diff(image, expected) <= 1


def test_a_vae_that_overflows_on_encode_is_retried_once_in_float32_and_says_so(
    tiny_folders: dict[Architecture, Path], tmp_path: Path
) -> None:
    """SD 1.x's pipelines never upcast (its config has no force_upcast): the first
    attempt stops at the encode, the retry runs the VAE in float32."""
    runner = runner_for(tiny_folders[Architecture.SD1])
    vae = runner.load("m").pipe.vae
    assert vae.dtype == torch.float16 and not vae.config.force_upcast
    overflowing(vae.encoder.conv_in)
    image, note = run(runner, tmp_path, "retried", **IMG2IMG)
    assert note == VAE_FLOAT32_NOTE
    assert vae.dtype == torch.float16  # kept in float16, upcast per call
    # The same as a run whose VAE was in float32 from the start; later jobs need no retry.
    reference = runner_for(tiny_folders[Architecture.SD1])
    reference_vae = reference.load("m").pipe.vae
    overflowing(reference_vae.encoder.conv_in)
    assert keep_in_float32(reference_vae)
    expected, reference_note = run(reference, tmp_path, "float32", **IMG2IMG)
    assert reference_note == "" and max_diff(image, expected) == 0
    again, again_note = run(runner, tmp_path, "again", **IMG2IMG)
    assert again_note == "" and max_diff(again, expected) == 0


def test_a_vae_that_overflows_on_decode_is_retried_once_in_float32(
    tiny_folders: dict[Architecture, Path], tmp_path: Path
) -> None:
    runner = runner_for(tiny_folders[Architecture.SD1])
    overflowing(runner.load("m").pipe.vae.decoder.conv_in)
    image, note = run(runner, tmp_path, "retried")
    assert note == VAE_FLOAT32_NOTE
    assert image.std() > 10  # a picture, not a NaN-black square


def test_a_vae_that_gives_nan_in_float32_too_fails_after_one_retry(
    tiny_folders: dict[Architecture, Path], tmp_path: Path
) -> None:
    runner = runner_for(tiny_folders[Architecture.SD1])
    vae = runner.load("m").pipe.vae
    with torch.no_grad():
        vae.decoder.conv_in.weight.fill_(float("nan"))
    decodes: list[torch.dtype] = []
    vae.decoder.register_forward_pre_hook(lambda _m, args: decodes.append(args[0].dtype))
    with pytest.raises(NonFiniteVaeOutput, match="decoded the latents into invalid values"):
        run(runner, tmp_path, "nan")
    assert decodes == [torch.float16, torch.float32]
    assert not (tmp_path / "nan.png").exists()


def test_sdxl_previews_in_float16_decode_in_float32_as_the_image(
    tiny_folders: dict[Architecture, Path],
) -> None:
    loaded = runner_for(tiny_folders[Architecture.SDXL]).load("m")
    overflowing(loaded.pipe.vae.decoder.conv_in)
    latents = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(0))
    png = loaded.previewer.png(latents.half(), (64, 64))
    assert pixels(Image.open(io.BytesIO(png))).std() > 10  # not NaN-black
    assert loaded.pipe.vae.dtype == torch.float16


@pytest.mark.parametrize("write", [write_tiny_flux, write_tiny_klein], ids=["flux", "klein"])
def test_a_flow_familys_vae_that_overflows_is_retried_in_float32_too(
    write: Any, tmp_path: Path
) -> None:
    """Their stock pipelines never upcast, nor does Easel at first; the retry does (Flux.2's
    decode is its own: batch norm undone, patches unfolded)."""
    runner = runner_for(write(tmp_path / "model"))
    vae = runner.load("m").pipe.vae
    assert vae.dtype == torch.float16
    overflowing_output(vae.decoder.conv_in)
    params = GenerationParams("the cat", model="m", steps=2, cfg=3.5, width=64, height=48)
    out = runner.run(
        params.with_concrete_seed(), output_path=tmp_path / "out.png",
        checkpoint_path=tmp_path / "out.ckpt", on_step=go_on,
    )  # fmt: skip
    assert out.kind is OutcomeKind.COMPLETED and out.note == VAE_FLOAT32_NOTE
    assert out.image_path is not None and pixels(out.image_path).std() > 10

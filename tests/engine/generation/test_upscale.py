"""Upscaler models with spandrel: a tiny random ESRGAN built here (spandrel's RRDBNet in the
original key layout, saved as safetensors) upscales exactly as spandrel's own inference;
tiles, pause between tiles and resume; files that are no upscaler are refused."""

from __future__ import annotations

import io
import pickle
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from safetensors.torch import save_file

from app.engine.generation.device import CPU
from app.engine.generation.outcome import OutcomeKind, StepDecision, StepProgress
from app.engine.generation.post.upscale import _spandrel, load_upscaler, to_tensor, upscale_tiles
from app.engine.generation.post.upscalers import (
    NotAnUpscaler,
    UpscalerNotFound,
    check_upscaler_file,
    resolve_upscaler,
)
from app.engine.generation.runner import Runner
from app.engine.jobs.params import KIND_UPSCALE, GenerationParams
from app.engine.jobs.run_inputs import RunInputs

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")


def tiny_esrgan(seed: int = 0) -> dict[str, torch.Tensor]:
    """spandrel's RRDBNet, 8 filters, one block, 2x: random weights, original key layout."""
    esrgan = _spandrel().architectures.ESRGAN.ESRGAN
    torch.manual_seed(seed)
    net = esrgan(in_nc=3, out_nc=3, num_filters=8, num_blocks=1, scale=2)
    state = {k: v.detach().clone().contiguous() for k, v in net.state_dict().items()}
    assert "model.1.sub.0.RDB1.conv1.0.weight" in state  # the original ESRGAN layout
    return state


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("upscale_models")
    save_file(tiny_esrgan(), str(folder / "tiny-esrgan.safetensors"))
    torch.save(tiny_esrgan(), folder / "tiny-esrgan-pth.pth")
    return folder


def picture(width: int = 40, height: int = 32, seed: int = 3) -> Image.Image:
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 255, (height // 4, width // 4, 3), dtype=np.uint8)
    return Image.fromarray(base).resize((width, height), Image.Resampling.BICUBIC)


def png_of(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def test_the_upscale_equals_spandrels_own_inference(folder: Path) -> None:
    path = folder / "tiny-esrgan.safetensors"
    theirs = _spandrel().ModelLoader().load_from_file(str(path)).eval()  # as its users call it
    ours = load_upscaler(path)
    assert (ours.scale, ours.architecture) == (2, "ESRGAN")
    image = picture()
    expected = theirs(to_tensor(image))
    got = upscale_tiles(ours, image)  # one tile: the whole image in one pass
    assert got.shape == (1, 3, 64, 80) and torch.equal(got, expected)
    from_pth = upscale_tiles(load_upscaler(folder / "tiny-esrgan-pth.pth"), image)
    assert torch.equal(from_pth, expected)  # .pth read with weights_only=True


def test_tiles_with_context_match_one_pass(folder: Path) -> None:
    upscaler = load_upscaler(folder / "tiny-esrgan.safetensors")
    image = picture(48, 40)
    whole = upscale_tiles(upscaler, image)
    # One block's receptive field is about 20 px, within the context of 24 px: the bound is
    # float rounding only (convolutions over inputs of other sizes sum in another order).
    tiled = upscale_tiles(upscaler, image, tile=16, pad=24)
    assert (tiled - whole).abs().max().item() < 1e-5
    # Without context every tile border shows: the test above can fail.
    seamed = upscale_tiles(upscaler, image, tile=16, pad=0)
    assert (seamed - whole).abs().max().item() > 1e-3


def run_job(
    runner: Runner,
    params: GenerationParams,
    out: Path,
    image: bytes,
    stop_at: int = 0,
    decision: StepDecision = StepDecision.PAUSE,
) -> tuple[OutcomeKind, list[int]]:
    seen: list[int] = []

    def on_step(progress: StepProgress) -> StepDecision:
        seen.append(progress.step)
        return decision if progress.step == stop_at else StepDecision.CONTINUE

    outcome = runner.run(
        params, RunInputs(init_image=image), output_path=out,
        checkpoint_path=out.with_suffix(".ckpt"), on_step=on_step,
    )  # fmt: skip
    return outcome.kind, seen


def test_an_upscale_job_pauses_between_tiles_and_resumes_to_the_same_image(
    folder: Path, tmp_path: Path
) -> None:
    runner = Runner(device=CPU, upscalers=[folder], upscale_tile=16, threads=1)
    image = png_of(picture(48, 32))
    params = GenerationParams("x", seed=1, width=96, height=64, kind=KIND_UPSCALE,
                              upscaler="tiny-esrgan", init_image="job:1")  # fmt: skip
    whole = tmp_path / "whole.png"
    assert run_job(runner, params, whole, image) == (OutcomeKind.COMPLETED, [1, 2, 3, 4, 5, 6])
    paused = tmp_path / "paused.png"
    assert run_job(runner, params, paused, image, stop_at=4) == (OutcomeKind.PAUSED, [1, 2, 3, 4])
    assert paused.with_suffix(".ckpt").is_file() and not paused.exists()
    assert run_job(runner, params, paused, image) == (OutcomeKind.COMPLETED, [5, 6])
    assert np.array_equal(np.asarray(Image.open(paused)), np.asarray(Image.open(whole)))
    assert "Upscaler: tiny-esrgan" in Image.open(whole).info["parameters"]
    cancelled = tmp_path / "cancelled.png"
    kind, _ = run_job(runner, params, cancelled, image, stop_at=2, decision=StepDecision.CANCEL)
    assert kind is OutcomeKind.CANCELLED and not cancelled.with_suffix(".ckpt").exists()
    resized = replace(params, width=80, height=48)  # not the model's 2x: Lanczos after it
    run_job(runner, resized, tmp_path / "resized.png", image)
    assert Image.open(tmp_path / "resized.png").size == (80, 48)


def test_files_that_are_not_upscalers_are_refused_in_one_sentence(tmp_path: Path) -> None:
    lora = tmp_path / "style.safetensors"
    save_file({"lora_unet_down_blocks_0.lora_down.weight": torch.zeros(4, 4)}, str(lora))
    with pytest.raises(NotAnUpscaler, match=r"^style\.safetensors is not an upscaler model"):
        check_upscaler_file(lora)
    evil = tmp_path / "evil.pth"

    class Boom:
        def __reduce__(self):  # type: ignore[no-untyped-def]
            return (print, ("this ran",))

    torch.save({"model.0.weight": Boom()}, evil, pickle_module=pickle)
    with pytest.raises(NotAnUpscaler, match=r"^evil\.pth holds more than plain weights"):
        load_upscaler(evil)
    text = tmp_path / "notes.pth"
    text.write_text("hello")
    with pytest.raises(NotAnUpscaler, match="is not a torch weights archive"):
        check_upscaler_file(text)
    odd = tmp_path / "odd.safetensors"  # keys that fool the quick check, not spandrel
    save_file({"body.0.weight": torch.zeros(3)}, str(odd))
    with pytest.raises(NotAnUpscaler, match=r"^odd\.safetensors "):
        load_upscaler(odd)
    with pytest.raises(UpscalerNotFound, match="upscaler 'nope' was not found"):
        resolve_upscaler("nope", [tmp_path])


def test_hires_fix_with_a_model_is_the_model_upscale_then_img2img(
    folder: Path, tmp_path: Path, tiny_model: object
) -> None:
    from app.engine.generation.post.upscale import upscale_png

    runner = Runner(device=CPU, resolve=lambda _name: tiny_model, upscalers=[folder], threads=1)  # type: ignore[arg-type,return-value]
    small = png_of(picture(32, 32))
    hires = GenerationParams("the cat", model="tiny-test", steps=4, seed=2, width=64,
                             height=64, init_image="job:1", strength=0.5,
                             upscaler="tiny-esrgan")  # fmt: skip
    kind, _ = run_job(runner, hires, tmp_path / "hires.png", small)
    assert kind is OutcomeKind.COMPLETED
    by_model = png_of(
        upscale_png(load_upscaler(folder / "tiny-esrgan.safetensors"), small, (64, 64))
    )
    plain = replace(hires, upscaler="")
    run_job(runner, plain, tmp_path / "by-hand.png", by_model)  # img2img of the model's image
    run_job(runner, plain, tmp_path / "lanczos.png", small)  # today's chain: Lanczos
    hires_px, by_hand, lanczos = (np.asarray(Image.open(tmp_path / f"{n}.png"), dtype=np.int16)
                                  for n in ("hires", "by-hand", "lanczos"))  # fmt: skip
    assert np.array_equal(hires_px, by_hand)
    assert np.abs(hires_px - lanczos).max() > 0

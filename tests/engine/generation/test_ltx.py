"""LTX-Video through Easel's own loop: the stock LTXPipeline's (and, with an input image,
LTXImageToVideoPipeline's) clip, exactly.

On a tiny random LTX-Video (tiny.ltx: a one-block 3D DiT, a VAE compressing 32x in space
and 8x in time with a timestep-conditioned decoder, a T5 encoder with an offline tokenizer)
saved as a diffusers folder: every frame equal to `LTXPipeline` called with its defaults
(size, frames, steps and guidance aside), in float32 and bfloat16, and with the job's init
image to `LTXImageToVideoPipeline` given that picture; a pause and a crash after a rolling
checkpoint resumed by a fresh runner to the same frames; what it cannot draw refused at
submit in one sentence.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from app.engine.generation import runner as runner_module
from app.engine.generation.files.architecture import Architecture, Prediction
from app.engine.generation.files.sources import ModelInfo, ModelSearchPath
from app.engine.generation.outcome import OutcomeKind
from app.engine.generation.request_checks import check_runnable
from app.engine.generation.runner import Runner
from app.engine.jobs.params import INIT_UPLOADED, KIND_VIDEO, GenerationParams
from app.engine.jobs.run_inputs import RunInputs
from app.engine.outputs.video import VIDEO
from app.errors import BadInput
from tests.engine.generation.tiny_architectures import (
    Crash,
    checkpoint_then_crash,
    go_on,
    model_info,
    pause_at,
    runner_for,
)

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

# 9 frames of 64x32: 2 latent frames of 1x2 latent pixels (the VAE's 8x in time, 32x in space).
STEPS, FRAMES, WIDTH, HEIGHT = 3, 9, 64, 32


def input_png() -> bytes:
    """A 64x32 picture with structure (a gradient and a square), as a job stores it."""
    ramp = np.linspace(0, 255, WIDTH, dtype=np.uint8)
    pixels = np.stack([np.tile(ramp, (HEIGHT, 1)), np.tile(ramp[::2, None], (1, WIDTH)),
                       np.full((HEIGHT, WIDTH), 90, np.uint8)], axis=-1)  # fmt: skip
    pixels[8:20, 10:30] = (240, 30, 60)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


PNG = input_png()
WITH_IMAGE = {"init_image": f"{INIT_UPLOADED}{hashlib.sha256(PNG).hexdigest()}"}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from app.testing.tiny.ltx import write_tiny_ltx

    return write_tiny_ltx(tmp_path_factory.mktemp("ltx-models") / "ltx")


@pytest.fixture(scope="module")
def model(folder: Path) -> ModelInfo:
    return model_info(folder, "ltx")


@pytest.fixture(scope="module")
def runner(model: ModelInfo) -> Runner:
    return runner_for(model)


def ltx_params(**changes: Any) -> GenerationParams:
    base: dict[str, Any] = {
        "prompt": "a cat walking", "model": "ltx", "steps": STEPS, "cfg": 3.0, "width": WIDTH,
        "height": HEIGHT, "seed": 1234, "kind": KIND_VIDEO, "frames": FRAMES, "fps": 25,
    }  # fmt: skip
    return GenerationParams(**{**base, **changes})


def stock(folder: Path, params: GenerationParams, dtype: torch.dtype = torch.float32) -> Any:
    """The stock pipeline's frames, loaded in `dtype` and called as its model card does (its
    defaults otherwise: no negative prompt, 128 tokens, decode timestep 0), as pictures;
    with an init image `LTXImageToVideoPipeline` (the same folder) given the picture."""
    from diffusers import LTXImageToVideoPipeline, LTXPipeline

    image = Image.open(io.BytesIO(PNG)).convert("RGB") if params.init_image else None
    pipeline = LTXPipeline if image is None else LTXImageToVideoPipeline
    wide = {"default": dtype, "text_encoder": torch.float32}  # T5 v1.1 overflows float16
    loaded = wide if dtype == torch.float16 else dtype
    pipe = pipeline.from_pretrained(folder, local_files_only=True, dtype=loaded)
    pipe.set_progress_bar_config(disable=True)
    extra: dict[str, Any] = {} if image is None else {"image": image}
    prompt = stock_prompt(pipe, params, dtype)
    frames = pipe(
        **prompt,
        height=params.height,
        width=params.width,
        num_frames=params.frames,
        frame_rate=params.fps,
        num_inference_steps=params.steps,
        guidance_scale=params.cfg,
        generator=torch.Generator().manual_seed(params.seed),
        output_type="pil",
        **extra,
    ).frames[0]
    return [np.asarray(frame, dtype=np.int16) for frame in frames]


def stock_prompt(pipe: Any, params: GenerationParams, dtype: torch.dtype) -> dict[str, Any]:
    """The prompt as the stock pipeline is given it: as text; in float16, where its users run
    T5 in float32, as the embeddings they encode and cast to float16 (its float16
    transformer refuses float32 ones)."""
    if dtype != torch.float16:
        return {"prompt": params.prompt, "negative_prompt": params.negative_prompt or None}
    with torch.no_grad():  # as in its `__call__` (with grad, T5's attention runs another way)
        embeds, mask, negative_embeds, negative_mask = pipe.encode_prompt(
            prompt=params.prompt,
            negative_prompt=params.negative_prompt or None,
            do_classifier_free_guidance=params.cfg > 1.0,
        )
    states = {"prompt_embeds": embeds.to(dtype), "prompt_attention_mask": mask}
    if negative_embeds is None:  # no CFG: no negative encoded
        return states
    return {
        **states, "negative_prompt_embeds": negative_embeds.to(dtype),
        "negative_prompt_attention_mask": negative_mask,
    }  # fmt: skip


class Written:
    """The frames the runner hands the video kind's writer (which still writes the MP4)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.frames: dict[Path, list[np.ndarray]] = {}

        def write(frames: list[Image.Image], path: Path, params: GenerationParams) -> None:
            self.frames[path] = [np.asarray(frame, dtype=np.int16) for frame in frames]
            VIDEO.write(frames, path, params)

        kind = replace(VIDEO, write=write)
        monkeypatch.setattr(runner_module, "output_of_job", lambda _kind: kind)

    def of(self, outcome: Any) -> list[np.ndarray]:
        assert outcome.kind is OutcomeKind.COMPLETED and outcome.image_path is not None
        return self.frames[outcome.image_path]


@pytest.fixture
def written(monkeypatch: pytest.MonkeyPatch) -> Written:
    return Written(monkeypatch)


def clip(runner: Runner, params: GenerationParams, folder: Path, name: str, **kwargs: Any) -> Any:
    return runner.run(
        params,
        RunInputs(init_image=PNG) if params.init_image else RunInputs(),
        output_path=folder / f"{name}.mp4",
        checkpoint_path=folder / f"{name}.ckpt",
        on_step=kwargs.pop("on_step", go_on),
    )


def max_frame_diff(ours: list[np.ndarray], theirs: list[np.ndarray]) -> int:
    assert len(ours) == len(theirs)
    return max(int(np.abs(a - b).max()) for a, b in zip(ours, theirs, strict=True))


def test_a_tiny_ltx_folder_is_detected_as_ltx_video(model: ModelInfo, folder: Path) -> None:
    from app.engine.settings import Settings
    from app.ui.wiring import model_choices

    assert model.architecture is Architecture.LTX_VIDEO and model.prediction is Prediction.FLOW
    choices = model_choices(Settings(models_dir=str(folder.parent)))  # the window's scan
    choice = next(choice for choice in choices if choice.name == folder.name)
    assert (choice.kind, choice.samplers, choice.draws_video) == ("LTX-Video", ("Euler",), True)
    assert (choice.frame_step, choice.default_frames, choice.default_fps) == (8, 161, 25)


def test_every_frame_equals_the_stock_pipeline(
    runner: Runner, folder: Path, written: Written, tmp_path: Path
) -> None:
    """At the stock guidance (3, CFG with the "" negative), with a negative prompt and
    another frame rate (the rotary positions' scale), and without CFG on 17 frames."""
    cases: list[dict[str, Any]] = [
        {},
        {"negative_prompt": "blurry", "fps": 16, "cfg": 5.0},
        {"cfg": 1.0, "frames": 17},
    ]
    for index, changes in enumerate(cases):
        params = ltx_params(**changes)
        ours = written.of(clip(runner, params, tmp_path, f"ours-{index}"))
        assert len(ours) == params.frames and ours[0].shape == (HEIGHT, WIDTH, 3)
        assert max_frame_diff(ours, stock(folder, params)) == 0, changes


def test_a_pause_and_a_crash_resume_in_a_fresh_runner_to_the_same_frames(
    runner: Runner, model: ModelInfo, written: Written, tmp_path: Path
) -> None:
    """Paused at step 2 of 3, and killed after a rolling checkpoint at step 1: a new runner
    (its own pipeline, loaded anew) finishes each to the uninterrupted clip."""
    params = ltx_params(negative_prompt="blurry")
    whole = written.of(clip(runner, params, tmp_path, "whole"))
    paused = clip(runner, params, tmp_path, "paused", on_step=pause_at(2))
    assert paused.kind is OutcomeKind.PAUSED and (tmp_path / "paused.ckpt").exists()
    with pytest.raises(Crash):
        clip(runner, params, tmp_path, "crashed", on_step=checkpoint_then_crash(1))
    fresh = runner_for(model)
    for name, steps_done in (("paused", 2), ("crashed", 1)):
        resumed = clip(fresh, params, tmp_path, name)
        assert resumed.resumed_from is not None and resumed.resumed_from.step == steps_done
        assert max_frame_diff(written.of(resumed), whole) == 0
        assert not (tmp_path / f"{name}.ckpt").exists()


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_in_half_precision_every_frame_equals_stock_and_a_pause_resumes_exactly(
    folder: Path, model: ModelInfo, written: Written, tmp_path: Path, dtype: str
) -> None:
    """Computed in `dtype` on the CPU as a GPU would: against the stock pipeline loaded in
    it (bfloat16: T5 too, as released; float16: T5 in float32, its states cast, as Easel
    runs it: `device.precision`); the checkpoint restores the half-precision prompt states
    and the float32 latents exactly."""
    from app.engine.generation.device import CPU

    device = replace(CPU, dtype_name=dtype)
    params = ltx_params(negative_prompt="blurry")
    half = Runner(device=device, resolve=lambda _n: model, threads=1)
    whole = written.of(clip(half, params, tmp_path, "whole"))
    assert max_frame_diff(whole, stock(folder, params, getattr(torch, dtype))) == 0
    assert clip(half, params, tmp_path, "paused", on_step=pause_at(2)).kind is OutcomeKind.PAUSED
    fresh = Runner(device=device, resolve=lambda _n: model, threads=1)
    assert max_frame_diff(written.of(clip(fresh, params, tmp_path, "paused")), whole) == 0


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_from_an_image_every_frame_equals_the_stock_i2v_pipeline_and_a_pause_resumes(
    folder: Path, model: ModelInfo, written: Written, tmp_path: Path, dtype: str
) -> None:
    """The job's init image as the clip's first latent frame (its tokens at timestep 0, kept
    through every step): equal to stock `LTXImageToVideoPipeline` given the picture, and a
    pause at step 2 finished by a fresh runner (the image's frame in the checkpoint) equal
    to the uninterrupted clip."""
    from app.engine.generation.device import CPU

    device = replace(CPU, dtype_name=dtype)
    params = ltx_params(negative_prompt="blurry", **WITH_IMAGE)
    runner = Runner(device=device, resolve=lambda _n: model, threads=1)
    whole = written.of(clip(runner, params, tmp_path, "whole"))
    assert max_frame_diff(whole, stock(folder, params, getattr(torch, dtype))) == 0
    text_only = written.of(clip(runner, ltx_params(negative_prompt="blurry"), tmp_path, "t2v"))
    assert max_frame_diff(whole, text_only) > 0  # the image is what the clip starts from
    assert clip(runner, params, tmp_path, "paused", on_step=pause_at(2)).kind is OutcomeKind.PAUSED
    fresh = Runner(device=device, resolve=lambda _n: model, threads=1)
    assert max_frame_diff(written.of(clip(fresh, params, tmp_path, "paused")), whole) == 0


def test_what_ltx_cannot_draw_is_refused_at_submit_in_one_sentence(folder: Path) -> None:
    search = ModelSearchPath(user=(folder.parent,))
    assert check_runnable(ltx_params(), search).architecture is Architecture.LTX_VIDEO
    refusals = {
        "frames": (20, "LTX-Video draws 8k+1 frames, not 20; the nearest are 17 or 25"),
        "width": (
            80,
            "LTX-Video draws sizes in multiples of 32 pixels, not 80x32; "
            "the nearest are 64x32 or 96x32",
        ),
        "scheduler": ("UniPC", "LTX-Video models run with the Euler sampler (flow matching)"),
    }
    for field, (value, sentence) in refusals.items():
        with pytest.raises(BadInput) as refused:
            check_runnable(ltx_params(**{field: value}), search)
        assert str(refused.value).startswith(sentence)


def test_a_preview_is_the_middle_frame_drawn_cheaply(runner: Runner) -> None:
    """The latent preview (no VAE: a linear map of the middle latent frame), a PNG at the
    preview's size."""
    import io

    from app.engine.generation import denoise

    loaded = runner.load("ltx")
    state = denoise.start(loaded.pipe, ltx_params(frames=25))
    with Image.open(io.BytesIO(loaded.previewer.png(state.latents, (64, 32)))) as preview:
        assert preview.format == "PNG" and preview.size == (64, 32)

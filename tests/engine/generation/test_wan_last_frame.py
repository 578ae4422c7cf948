"""Wan 2.1 first-and-last-frame (FLF2V) through Easel's own loop: stock's clip, exactly.

On a tiny random FLF2V (tiny.wan: Wan 2.1 I2V's shape whose transformer has CLIP positions
for two images, `pos_embed_seq_len`), saved as a diffusers folder: every frame equal to
stock `WanImageToVideoPipeline(image=..., last_image=...)` with its defaults, in float32 and
bfloat16, and a pause at step 2 resumed by a fresh runner to the same frames. The last
image travels as a durable job input; a model that cannot take one, or a last image
without a first, is refused at submit in one sentence with nothing stored.
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from app.engine.generation.files.architecture import Architecture
from app.engine.generation.outcome import OutcomeKind
from app.engine.generation.runner import Runner
from app.engine.jobs.params import INIT_UPLOADED, GenerationParams
from app.engine.jobs.run_inputs import RunInputs
from tests.engine.generation.test_wan import Written, max_frame_diff, wan_params
from tests.engine.generation.test_wan_image import PNG, WITH_IMAGE, runner_in
from tests.engine.generation.tiny_architectures import go_on, model_info, pause_at

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

STEPS, FRAMES = 3, 5


def last_png() -> bytes:
    """Another 32x32 picture: the first one mirrored, with a blue square of its own."""
    pixels = np.asarray(Image.open(io.BytesIO(PNG)).convert("RGB"))[:, ::-1].copy()
    pixels[4:12, 4:12] = (20, 40, 230)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


LAST = last_png()
WITH_BOTH = {**WITH_IMAGE, "last_image": f"{INIT_UPLOADED}{hashlib.sha256(LAST).hexdigest()}"}


@pytest.fixture(scope="module")
def flf_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from app.testing.tiny.wan import write_tiny_wan_i2v

    return write_tiny_wan_i2v(tmp_path_factory.mktemp("wan-flf2v") / "flf2v", last_frame=True)


@pytest.fixture
def written(monkeypatch: pytest.MonkeyPatch) -> Written:
    return Written(monkeypatch)


def stock_frames(folder: Path, params: GenerationParams, dtype: str) -> list[np.ndarray]:
    """Stock `WanImageToVideoPipeline` with a first and a last image, its defaults else."""
    from diffusers import WanImageToVideoPipeline

    pipe = WanImageToVideoPipeline.from_pretrained(
        folder, local_files_only=True, dtype=getattr(torch, dtype)
    )
    pipe.set_progress_bar_config(disable=True)
    frames = pipe(
        image=Image.open(io.BytesIO(PNG)).convert("RGB"),
        last_image=Image.open(io.BytesIO(LAST)).convert("RGB"),
        prompt=params.prompt,
        negative_prompt=params.negative_prompt or None,
        height=params.height,
        width=params.width,
        num_frames=params.frames,
        num_inference_steps=params.steps,
        guidance_scale=params.cfg,
        generator=torch.Generator().manual_seed(params.seed),
        output_type="pil",
    ).frames[0]
    return [np.asarray(frame, dtype=np.int16) for frame in frames]


def clip_of(runner: Runner, params: GenerationParams, folder: Path, name: str, **kw: Any) -> Any:
    return runner.run(
        params,
        RunInputs(init_image=PNG, last_image=LAST),
        output_path=folder / f"{name}.mp4",
        checkpoint_path=folder / f"{name}.ckpt",
        on_step=kw.get("on_step", go_on),
    )


def test_an_flf2v_folder_is_told_from_i2v_by_its_transformer(flf_folder: Path) -> None:
    assert model_info(flf_folder).architecture is Architecture.WAN2_1_FLF2V
    video = Architecture.WAN2_1_FLF2V.spec.video
    assert video is not None and video.takes_last_image and video.needs_last_image


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_flf2v_equals_stock_and_resumes_exactly(
    flf_folder: Path, written: Written, tmp_path: Path, dtype: str
) -> None:
    model = model_info(flf_folder, "flf")
    params = wan_params(steps=STEPS, frames=FRAMES, negative_prompt="blurry", **WITH_BOTH)
    whole = clip_of(runner_in(model, dtype), params, tmp_path, "whole")
    assert whole.kind is OutcomeKind.COMPLETED and whole.image_path is not None
    ours = written.frames[whole.image_path]
    assert len(ours) == FRAMES
    assert max_frame_diff(ours, stock_frames(flf_folder, params, dtype)) == 0
    paused = clip_of(runner_in(model, dtype), params, tmp_path, "paused", on_step=pause_at(2))
    assert paused.kind is OutcomeKind.PAUSED and (tmp_path / "paused.ckpt").exists()
    resumed = clip_of(runner_in(model, dtype), params, tmp_path, "paused")
    assert resumed.resumed_from is not None and resumed.resumed_from.step == 2
    assert resumed.image_path is not None
    assert max_frame_diff(written.frames[resumed.image_path], ours) == 0

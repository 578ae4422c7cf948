"""LTX-Video 0.9.5 on through Easel's own loop: `LTXConditionPipeline`'s clip with its
defaults, exactly, from text and from an image at frame 0 (the job's init image), and
across a pause resumed by a fresh runner (the image's tokens are re-noised from the job's
generator before every step: the checkpoint holds its state between them).

On the tiny LTX-Video saved as a 0.9.5+ folder (its model index says
`LTXConditionPipeline`; tiny.ltx).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from app.engine.generation.files.architecture import Architecture
from app.engine.generation.files.sources import ModelInfo
from app.engine.generation.outcome import OutcomeKind
from app.engine.generation.runner import Runner
from app.engine.jobs.params import GenerationParams
from tests.engine.generation.test_ltx import (
    PNG,
    WITH_IMAGE,
    Written,
    clip,
    ltx_params,
    max_frame_diff,
)
from tests.engine.generation.test_ltx import written as written
from tests.engine.generation.tiny_architectures import go_on, model_info, pause_at, runner_for

pytestmark = [
    pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning"),
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from app.testing.tiny.ltx import write_tiny_ltx_condition

    return write_tiny_ltx_condition(tmp_path_factory.mktemp("ltx-condition") / "ltx")


@pytest.fixture(scope="module")
def model(folder: Path) -> ModelInfo:
    return model_info(folder, "ltx")


def stock(folder: Path, params: GenerationParams) -> list[np.ndarray]:
    """Stock `LTXConditionPipeline` with its defaults (size, frames, steps, guidance and the
    prompts aside), given the picture as `image` (a condition at frame 0, strength 1)."""
    from diffusers import LTXConditionPipeline

    pipe = LTXConditionPipeline.from_pretrained(folder, local_files_only=True)
    pipe.set_progress_bar_config(disable=True)
    image = Image.open(io.BytesIO(PNG)).convert("RGB") if params.init_image else None
    extra: dict[str, Any] = {} if image is None else {"image": image}
    torch.manual_seed(params.seed)  # where a decoder injecting noise draws it (model.py)
    frames = pipe(
        prompt=params.prompt, negative_prompt=params.negative_prompt or None,
        height=params.height, width=params.width, num_frames=params.frames,
        frame_rate=params.fps, num_inference_steps=params.steps, guidance_scale=params.cfg,
        generator=torch.Generator().manual_seed(params.seed), output_type="pil", **extra,
    ).frames[0]  # fmt: skip
    return [np.asarray(frame, dtype=np.int16) for frame in frames]


def test_a_0_9_5_folder_is_ltx_video_through_conditioning(model: ModelInfo) -> None:
    assert model.architecture is Architecture.LTX_CONDITION, model.unsupported_reason
    assert model.label.startswith("LTX-Video 0.9.5+")


@pytest.mark.parametrize("changes", [{}, WITH_IMAGE], ids=["text", "image"])
def test_every_frame_equals_stock_and_a_pause_resumes_in_a_fresh_runner(
    folder: Path, model: ModelInfo, written: Written, tmp_path: Path, changes: dict[str, Any]
) -> None:
    params = ltx_params(negative_prompt="blurry", steps=4, **changes)
    runner: Runner = runner_for(model)
    whole = written.of(clip(runner, params, tmp_path, "whole"))
    assert len(whole) == params.frames
    assert max_frame_diff(whole, stock(folder, params)) == 0
    paused = clip(runner, params, tmp_path, "paused", on_step=pause_at(2))
    assert paused.kind is OutcomeKind.PAUSED
    resumed = clip(runner_for(model), params, tmp_path, "paused")
    assert resumed.resumed_from is not None and resumed.resumed_from.step == 2
    assert max_frame_diff(written.of(resumed), whole) == 0


def last_png() -> bytes:
    """The last frame's picture: a green field with a dark bar (unlike the first)."""
    pixels = np.full((32, 64, 3), (20, 200, 90), np.uint8)
    pixels[10:22, 30:60] = (30, 30, 30)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def stock_first_and_last(folder: Path, params: GenerationParams, last: bytes) -> list[Any]:
    """Stock `LTXConditionPipeline` given the two pictures as its `conditions`: the first at
    frame 0, the last at the job's frame for it (the clip's last unless set), each at the
    job's strength (stock's default 1 unless set)."""
    from diffusers import LTXConditionPipeline
    from diffusers.pipelines.ltx.pipeline_ltx_condition import LTXVideoCondition

    pipe = LTXConditionPipeline.from_pretrained(folder, local_files_only=True)
    pipe.set_progress_bar_config(disable=True)
    pictures = [Image.open(io.BytesIO(data)).convert("RGB") for data in (PNG, last)]
    conditions = [
        LTXVideoCondition(image=pictures[0], frame_index=0, strength=params.image_strength),
        LTXVideoCondition(
            image=pictures[1], frame_index=params.last_image_index,
            strength=params.last_image_strength,
        ),
    ]  # fmt: skip
    torch.manual_seed(params.seed)
    frames = pipe(
        conditions=conditions, prompt=params.prompt, negative_prompt=params.negative_prompt,
        height=params.height, width=params.width, num_frames=params.frames,
        frame_rate=params.fps, num_inference_steps=params.steps, guidance_scale=params.cfg,
        generator=torch.Generator().manual_seed(params.seed), output_type="pil",
    ).frames[0]  # fmt: skip
    return [np.asarray(frame, dtype=np.int16) for frame in frames]


def _frames(pipe: Any, state: Any) -> list[np.ndarray]:
    from app.engine.generation import denoise

    while not state.finished:
        denoise.advance(pipe, state)
    frames: Any = denoise.decode(pipe, state)  # a clip's frames (typed as one image)
    return [np.asarray(frame, dtype=np.int16) for frame in frames]


def test_a_first_and_last_frame_clip_equals_stock_and_resumes_from_its_checkpoint_file(
    folder: Path, model: ModelInfo, tmp_path: Path
) -> None:
    """The job's init image at frame 0 and a last image at the last frame (its tokens in
    front of the clip's, re-noised before every step): stock's clip exactly; paused after
    step 2, written to a checkpoint file and finished on a freshly loaded pipeline."""
    from app.engine.generation import denoise
    from app.engine.generation.loop.checkpoint import load_checkpoint, save_checkpoint

    last = last_png()
    params = ltx_params(negative_prompt="blurry", steps=4, **WITH_IMAGE)
    pipe = runner_for(model).load("ltx").pipe
    whole = _frames(pipe, denoise.start(pipe, params, init_image=PNG, last_image=last))
    assert max_frame_diff(whole, stock_first_and_last(folder, params, last)) == 0
    first_only = _frames(pipe, denoise.start(pipe, params, init_image=PNG))
    assert max_frame_diff(whole, first_only) > 0  # the last image is what the clip ends on

    state = denoise.start(pipe, params, init_image=PNG, last_image=last)
    while state.steps_done < 2:
        denoise.advance(pipe, state)
    save_checkpoint(tmp_path / "paused.ckpt", denoise.snapshot(state, params, 0.0))
    fresh = runner_for(model).load("ltx").pipe
    assert fresh is not pipe
    saved = load_checkpoint(tmp_path / "paused.ckpt", params).checkpoint
    resumed = _frames(fresh, denoise.restore(fresh, params, saved))
    assert max_frame_diff(resumed, whole) == 0


def test_weaker_conditions_and_a_last_image_mid_clip_equal_stock_and_resume_exactly(
    folder: Path, model: ModelInfo, tmp_path: Path
) -> None:
    """The init image at strength 0.8, the last image at 0.3 at frame 12 of 17 (stock's
    `conditions` with those strengths and frame): stock's clip exactly, unlike the clip at
    full strength; paused after step 2, written to a checkpoint file and finished on a
    fresh pipeline. At 0.3 the last image's tokens are stepped too once t < 700 (the last
    of the 4 steps, at t = 725), as stock steps them."""
    from dataclasses import replace

    from app.engine.generation import denoise
    from app.engine.generation.loop.checkpoint import load_checkpoint, save_checkpoint

    last = last_png()
    full = ltx_params(negative_prompt="blurry", steps=4, frames=17, **WITH_IMAGE)
    params = replace(full, image_strength=0.8, last_image_strength=0.3, last_image_frame=12)
    pipe = runner_for(model).load("ltx").pipe

    def start(chosen: GenerationParams) -> Any:
        return denoise.start(pipe, chosen, init_image=PNG, last_image=last)

    whole = _frames(pipe, start(params))
    assert max_frame_diff(whole, stock_first_and_last(folder, params, last)) == 0
    assert max_frame_diff(whole, _frames(pipe, start(full))) > 0

    state = start(params)
    while state.steps_done < 2:
        denoise.advance(pipe, state)
    save_checkpoint(tmp_path / "weak.ckpt", denoise.snapshot(state, params, 0.0))
    fresh = runner_for(model).load("ltx").pipe
    saved = load_checkpoint(tmp_path / "weak.ckpt", params).checkpoint
    assert max_frame_diff(_frames(fresh, denoise.restore(fresh, params, saved)), whole) == 0


def test_a_preview_is_a_middle_frame_of_the_packed_tokens(model: ModelInfo) -> None:
    from app.engine.generation import denoise

    loaded = runner_for(model).load("ltx")
    state = denoise.start(loaded.pipe, ltx_params(frames=25))
    assert state.latents.dim() == 3  # (1, tokens, channels), as the stock loop holds them
    with Image.open(io.BytesIO(loaded.previewer.png(state.latents, (64, 32)))) as preview:
        assert preview.format == "PNG" and preview.size == (64, 32)


def test_in_bfloat16_a_clip_from_an_image_equals_stock_and_a_pause_resumes_exactly(
    folder: Path, model: ModelInfo, written: Written, tmp_path: Path
) -> None:
    """Computed in bfloat16 on the CPU as a GPU would (the stock prediction is not upcast:
    its step's output comes back in bfloat16), against stock loaded in bfloat16."""
    from dataclasses import replace

    from diffusers import LTXConditionPipeline

    from app.engine.generation.device import CPU

    device = replace(CPU, dtype_name="bfloat16")
    params = ltx_params(negative_prompt="blurry", **WITH_IMAGE)
    half = Runner(device=device, resolve=lambda _n: model, threads=1)
    whole = written.of(clip(half, params, tmp_path, "whole"))
    pipe = LTXConditionPipeline.from_pretrained(folder, local_files_only=True, dtype=torch.bfloat16)
    pipe.set_progress_bar_config(disable=True)
    torch.manual_seed(params.seed)
    theirs = pipe(
        image=Image.open(io.BytesIO(PNG)).convert("RGB"), prompt=params.prompt,
        negative_prompt=params.negative_prompt, height=params.height, width=params.width,
        num_frames=params.frames, frame_rate=params.fps, num_inference_steps=params.steps,
        guidance_scale=params.cfg, generator=torch.Generator().manual_seed(params.seed),
        output_type="pil",
    ).frames[0]  # fmt: skip
    assert max_frame_diff(whole, [np.asarray(f, dtype=np.int16) for f in theirs]) == 0
    assert clip(half, params, tmp_path, "paused", on_step=pause_at(2)).kind is OutcomeKind.PAUSED
    fresh = Runner(device=device, resolve=lambda _n: model, threads=1)
    assert max_frame_diff(written.of(clip(fresh, params, tmp_path, "paused")), whole) == 0


def test_a_first_and_last_frame_job_runs_through_the_runner_and_resumes(
    folder: Path, model: ModelInfo, written: Written, tmp_path: Path
) -> None:
    """Accepted at submit on a 0.9.5+ folder, stock's clip through a runner, paused at step
    2 and finished by a fresh runner to the same frames."""
    import hashlib
    from dataclasses import replace

    from app.engine.generation.files.sources import ModelSearchPath
    from app.engine.generation.request_checks import check_runnable
    from app.engine.jobs.params import INIT_UPLOADED
    from app.engine.jobs.run_inputs import RunInputs

    last = last_png()
    named = f"{INIT_UPLOADED}{hashlib.sha256(last).hexdigest()}"
    with_last: dict[str, Any] = {"last_image": named}  # by name: absent before the merge
    params = replace(ltx_params(negative_prompt="blurry", steps=4, **WITH_IMAGE), **with_last)
    search = ModelSearchPath(user=(folder.parent,))
    assert check_runnable(params, search).architecture is Architecture.LTX_CONDITION
    images: dict[str, Any] = {"init_image": PNG, "last_image": last}
    inputs = RunInputs(**images)

    def run(runner: Runner, name: str, **kwargs: Any) -> Any:
        return runner.run(
            params, inputs, output_path=tmp_path / f"{name}.mp4",
            checkpoint_path=tmp_path / f"{name}.ckpt", on_step=kwargs.pop("on_step", go_on),
        )  # fmt: skip

    whole = written.of(run(runner_for(model), "whole"))
    assert max_frame_diff(whole, stock_first_and_last(folder, params, last)) == 0
    assert run(runner_for(model), "paused", on_step=pause_at(2)).kind is OutcomeKind.PAUSED
    assert max_frame_diff(written.of(run(runner_for(model), "paused")), whole) == 0

"""The video paths float32 alone showed, in half precision on the CPU as a GPU computes them:
LTX-Video 0.9.5+'s conditions held weaker with a last image mid-clip, a distilled LTX-Video's
list of timesteps, LTX-Video 0.9.5's all-in-one file, and Wan 2.2 I2V A14B's two expert
files with a last image, each in bfloat16 and float16. Every frame equals the stock
pipeline's loaded in that same dtype (float16: T5 and UMT5 in float32, as a float16-only
GPU's users load them and as Easel runs them, `device.precision`; LTX's stock given the T5
states cast, as its float16 transformer refuses float32 ones: test_ltx.stock_prompt), and a
pause resumed by a fresh runner in that dtype gives the same frames.

(Their float32 twins: test_ltx_condition, test_ltx_distilled, test_ltx_condition_files,
test_wan_i2v_expert_files; the tiny models and references are theirs.)
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

from app.engine.generation.device import DeviceChoice
from app.engine.generation.files.sources import ModelInfo, ModelSearchPath
from app.engine.generation.load.pipelines import PipelineCache, SingleFileConfigs
from app.engine.generation.outcome import OutcomeKind
from app.engine.generation.prompts.few_step import LTX_DISTILLED_TIMESTEPS, job_defaults
from app.engine.generation.runner import Runner
from app.engine.jobs.params import INIT_UPLOADED, GenerationParams
from app.engine.jobs.run_inputs import RunInputs
from tests.engine.generation.test_ltx import (
    PNG,
    WITH_IMAGE,
    Written,
    ltx_params,
    max_frame_diff,
    stock_prompt,
)
from tests.engine.generation.test_ltx import written as written
from tests.engine.generation.test_ltx_condition import last_png
from tests.engine.generation.test_ltx_distilled import NAME as DISTILLED
from tests.engine.generation.tiny_architectures import go_on, model_info, pause_at
from tests.engine.generation.tiny_ltx095_files import (
    TinyLtx095Files,
    stock_from_file,
    write_tiny_ltx095_files,
)
from tests.engine.generation.tiny_wan_i2v_expert_files import (
    HIGH,
    I2vExpertFiles,
    stock_from_i2v_expert_files,
    write_tiny_i2v_expert_files,
)

pytestmark = pytest.mark.filterwarnings(
    "ignore:__array__ implementation:DeprecationWarning", "ignore::FutureWarning"
)

DTYPES = ["bfloat16", "float16"]
LAST = last_png()
WITH_LAST = {"last_image": f"{INIT_UPLOADED}{hashlib.sha256(LAST).hexdigest()}"}


def half_runner(model: ModelInfo, dtype: str, configs: Path | None = None) -> Runner:
    """A fresh runner computing in `dtype` (its own pipeline: a resume loads anew)."""
    cache = PipelineCache(configs=SingleFileConfigs(configs) if configs else None)
    return Runner(
        device=DeviceChoice("cpu", dtype), resolve=lambda _n: model, threads=1, cache=cache
    )


def clip(runner: Runner, params: GenerationParams, folder: Path, name: str, **kw: Any) -> Any:
    """The job's clip from its init image and, where it names one, `LAST`."""
    inputs = RunInputs(init_image=PNG, last_image=LAST if params.last_image else None)
    return runner.run(
        params, inputs, output_path=folder / f"{name}.mp4",
        checkpoint_path=folder / f"{name}.ckpt", on_step=kw.get("on_step", go_on),
    )  # fmt: skip


def stock_wide(dtype: str) -> Any:
    """`from_pretrained`'s dtype as users load these families: float16 overflows T5/UMT5."""
    half = getattr(torch, dtype)
    return {"default": half, "text_encoder": torch.float32} if dtype == "float16" else half


def stock_ltx(pipe: Any, params: GenerationParams, dtype: str, **extra: Any) -> list[np.ndarray]:
    """Stock LTX-Video 0.9.5+ `pipe` with its defaults but for the job's values."""
    pipe.set_progress_bar_config(disable=True)
    torch.manual_seed(params.seed)
    frames = pipe(
        **stock_prompt(pipe, params, getattr(torch, dtype)), height=params.height,
        width=params.width, num_frames=params.frames, frame_rate=params.fps,
        num_inference_steps=params.steps, guidance_scale=params.cfg,
        generator=torch.Generator().manual_seed(params.seed), output_type="pil", **extra,
    ).frames[0]  # fmt: skip
    return [np.asarray(frame, dtype=np.int16) for frame in frames]


def picture(data: bytes) -> Image.Image:
    return Image.open(io.BytesIO(data)).convert("RGB")


def a_clip(frames: list[np.ndarray]) -> list[np.ndarray]:
    """`frames`, checked to be a picture (a NaN decodes flat in both clips)."""
    assert float(np.std(frames)) > 5
    return frames


# --- LTX-Video 0.9.5+ folders: condition strengths, distilled timesteps ---------------------


@pytest.fixture(scope="module")
def ltx_models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A models folder: the tiny 0.9.5+ folder as "ltx" and, the same folder, under a
    distilled release's name."""
    from app.testing.tiny.ltx import write_tiny_ltx_condition

    models = tmp_path_factory.mktemp("ltx-half")
    write_tiny_ltx_condition(models / "ltx")
    (models / DISTILLED).symlink_to(models / "ltx")
    return models


@pytest.mark.parametrize("dtype", DTYPES)
def test_weaker_conditions_and_a_mid_clip_last_image_in_half_precision_equal_stock(
    ltx_models: Path, written: Written, tmp_path: Path, dtype: str
) -> None:
    """The first image at 0.8, the last at 0.3 at frame 12 of 17: stock's `conditions` with
    those strengths and frame, every frame; paused after step 2, a fresh runner in `dtype`
    finishes it to the same frames."""
    from diffusers import LTXConditionPipeline
    from diffusers.pipelines.ltx.pipeline_ltx_condition import LTXVideoCondition

    params = ltx_params(negative_prompt="blurry", steps=4, frames=17, **WITH_IMAGE, **WITH_LAST)
    params = replace(params, image_strength=0.8, last_image_strength=0.3, last_image_frame=12)
    model = model_info(ltx_models / "ltx", "ltx")
    whole = a_clip(written.of(clip(half_runner(model, dtype), params, tmp_path, "whole")))
    pipe = LTXConditionPipeline.from_pretrained(
        ltx_models / "ltx", local_files_only=True, dtype=stock_wide(dtype)
    )
    conditions = [
        LTXVideoCondition(image=picture(PNG), frame_index=0, strength=0.8),
        LTXVideoCondition(image=picture(LAST), frame_index=12, strength=0.3),
    ]
    theirs = stock_ltx(pipe, params, dtype, conditions=conditions)
    assert max_frame_diff(whole, theirs) == 0
    paused = clip(half_runner(model, dtype), params, tmp_path, "paused", on_step=pause_at(2))
    assert paused.kind is OutcomeKind.PAUSED
    resumed = clip(half_runner(model, dtype), params, tmp_path, "paused")
    assert resumed.resumed_from is not None and resumed.resumed_from.step == 2
    assert max_frame_diff(written.of(resumed), whole) == 0


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_distilled_ltx_s_timesteps_in_half_precision_equal_stock(
    ltx_models: Path, written: Written, tmp_path: Path, dtype: str
) -> None:
    """The job a distilled release's name gives (its 8 timesteps, CFG 1), from an image:
    stock called with `timesteps=` that list and `guidance_scale=1` (in bfloat16 5 levels
    away until the clip's tokens kept stock's layout: condition.py `_conditioned`); paused
    after step 3, a fresh runner in `dtype` finishes it to the same frames."""
    from diffusers import LTXConditionPipeline

    asked = ltx_params(model=DISTILLED, negative_prompt="blurry", **WITH_IMAGE)
    params = job_defaults(asked, (), ModelSearchPath(user=(ltx_models,))).params.validated()
    assert (params.steps, params.cfg) == (8, 1.0) and "timesteps" in params.scheduler_config
    model = model_info(ltx_models / DISTILLED, DISTILLED)
    whole = a_clip(written.of(clip(half_runner(model, dtype), params, tmp_path, "whole")))
    pipe = LTXConditionPipeline.from_pretrained(
        ltx_models / DISTILLED, local_files_only=True, dtype=stock_wide(dtype)
    )
    theirs = stock_ltx(pipe, params, dtype, image=picture(PNG), timesteps=LTX_DISTILLED_TIMESTEPS)
    assert max_frame_diff(whole, theirs) == 0
    paused = clip(half_runner(model, dtype), params, tmp_path, "paused", on_step=pause_at(3))
    assert paused.kind is OutcomeKind.PAUSED
    resumed = clip(half_runner(model, dtype), params, tmp_path, "paused")
    assert resumed.resumed_from is not None and resumed.resumed_from.step == 3
    assert max_frame_diff(written.of(resumed), whole) == 0


# --- LTX-Video 0.9.5's all-in-one file --------------------------------------------------------


@pytest.fixture(scope="module")
def ltx_files(tmp_path_factory: pytest.TempPathFactory) -> TinyLtx095Files:
    return write_tiny_ltx095_files(tmp_path_factory.mktemp("ltx095-half"))


@pytest.mark.parametrize("dtype", DTYPES)
def test_ltx_0_9_5_s_file_in_half_precision_equals_stock_from_single_file(
    ltx_files: TinyLtx095Files, written: Written, tmp_path: Path, dtype: str
) -> None:
    """Lightricks' all-in-one file beside ComfyUI's T5, through Easel's file loading: the
    folder's stock pipeline with diffusers' own single-file loads of it, in `dtype`."""
    params = ltx_params(negative_prompt="blurry", steps=4, **WITH_IMAGE)
    model = model_info(ltx_files.checkpoint, "ltx")
    runner = half_runner(model, dtype, ltx_files.configs.parent)
    assert runner.load("ltx").pipe.vae.dtype == getattr(torch, dtype)  # it computes in it
    whole = a_clip(written.of(clip(runner, params, tmp_path, "whole")))
    theirs = stock_ltx(stock_from_file(ltx_files, dtype=dtype), params, dtype, image=picture(PNG))
    assert max_frame_diff(whole, theirs) == 0


# --- Wan 2.2 I2V A14B's two expert files, with a last image -----------------------------------


@pytest.fixture(scope="module")
def wan_files(tmp_path_factory: pytest.TempPathFactory) -> I2vExpertFiles:
    return write_tiny_i2v_expert_files(tmp_path_factory.mktemp("wan-i2v-experts-half"))


@pytest.mark.parametrize("dtype", DTYPES)
def test_wan_2_2_i2v_expert_files_with_a_last_image_in_half_precision_equal_stock(
    wan_files: I2vExpertFiles, written: Written, tmp_path: Path, dtype: str
) -> None:
    """The pair of files (the shipped UniPC: timesteps 1000, 858, 602, 9, the switch at
    900) from a first to a last image: stock `WanImageToVideoPipeline` of the folder of the
    same weights in `dtype` (its transformers' float32 modules kept, as Easel's files keep
    them: assemble.keep_float32_as_a_folder_does) with diffusers' own single-file load of the
    VAE file; paused after step 1 (past the switch), a fresh runner in `dtype` finishes it
    to the same frames."""
    from diffusers import WanImageToVideoPipeline

    from tests.engine.generation.test_wan import wan_params
    from tests.engine.generation.test_wan_image import PNG as WAN_PNG
    from tests.engine.generation.test_wan_last_frame import LAST as WAN_LAST
    from tests.engine.generation.test_wan_last_frame import WITH_BOTH

    params = wan_params(model="m", scheduler="UniPC", negative_prompt="blurry", steps=4,
                        frames=5, **WITH_BOTH)  # fmt: skip
    model = model_info(wan_files.expert(HIGH), "m")

    def run(name: str, **kw: Any) -> Any:
        runner = half_runner(model, dtype, wan_files.configs)
        return runner.run(
            params, RunInputs(init_image=WAN_PNG, last_image=WAN_LAST),
            output_path=tmp_path / f"{name}.mp4", checkpoint_path=tmp_path / f"{name}.ckpt",
            on_step=kw.get("on_step", go_on),
        )  # fmt: skip

    def stock(pipe: Any) -> list[np.ndarray]:
        pipe.set_progress_bar_config(disable=True)
        frames = pipe(
            image=picture(WAN_PNG), last_image=picture(WAN_LAST), prompt=params.prompt,
            negative_prompt=params.negative_prompt, height=params.height, width=params.width,
            num_frames=params.frames, num_inference_steps=params.steps,
            guidance_scale=params.cfg, generator=torch.Generator().manual_seed(params.seed),
            output_type="pil",
        ).frames[0]  # fmt: skip
        return [np.asarray(frame, dtype=np.int16) for frame in frames]

    whole = a_clip(written.of(run("whole")))
    ours = half_runner(model, dtype, wan_files.configs).load("m").pipe.transformer_2
    assert (ours.proj_out.weight.dtype, ours.scale_shift_table.dtype) == (
        getattr(torch, dtype), torch.float32,
    )  # fmt: skip
    single = stock_from_i2v_expert_files(wan_files, dtype=dtype)
    folder = WanImageToVideoPipeline.from_pretrained(
        wan_files.folder, local_files_only=True, vae=single.vae, dtype=stock_wide(dtype)
    )
    assert folder.transformer_2.scale_shift_table.dtype == torch.float32  # kept, as Easel's
    assert max_frame_diff(whole, stock(folder)) == 0
    # diffusers' `from_single_file` casts Wan's float32 modules too (it warns it should
    # not): the same weights, another clip (89 levels in bfloat16, 42 in float16).
    assert max_frame_diff(whole, stock(single)) > 0
    assert run("paused", on_step=pause_at(1)).kind is OutcomeKind.PAUSED
    resumed = run("paused")
    assert resumed.resumed_from is not None and resumed.resumed_from.step == 1
    assert max_frame_diff(written.of(resumed), whole) == 0

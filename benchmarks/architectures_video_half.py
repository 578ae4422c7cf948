"""Four video rows of `architectures.py --dtype bfloat16|float16` (issue 38): the clips float32
alone showed, computed in that dtype on the CPU as a GPU computes them, every frame compared
before the MP4, against the stock pipeline loaded in that dtype (float16: T5 and UMT5 in
float32, as a float16-only GPU's users load them and as Easel runs them; LTX's stock given
the T5 states cast, as its float16 transformer refuses float32 ones):

- `ltx-condition-strength-<dtype>`: a tiny LTX-Video 0.9.5+ folder, a 17-frame 64x32 clip
  from a first image at strength 0.8 and a last one at 0.3 at frame 12, against stock
  `LTXConditionPipeline` given those `conditions`;
- `ltx-0.9.8-distilled-single-file-image-<dtype>`: Lightricks' all-in-one file named as
  the 2B distilled release, from an image, with the defaults its name gives a job (8
  timesteps, CFG 1), against stock called with `timesteps=` those on diffusers' own
  single-file loads (in bfloat16 5 levels away until condition.py kept stock's token
  layout without CFG);
- `ltx-0.9.5-single-file-image-<dtype>`: that file under its own name, from an image, with
  the family's own schedule and CFG, against the same stock loads;
- `wan2.2-i2v-a14b-expert-files-last-image-<dtype>`: ComfyUI's two expert files, a 5-frame
  clip between a first and a last image, against stock `WanImageToVideoPipeline` of the
  folder of the same weights (its transformers' float32 modules kept, as Easel's files
  keep them: assemble.keep_float32_as_a_folder_does; diffusers' `from_single_file` casts them
  too, 89 levels away in bfloat16, 42 in float16) with diffusers' single-file load of
  the VAE file.

Each prints `same_as_diffusers_max_diff[<row>-<dtype>]` and
`pause_resume_max_diff[<row>-<dtype>]` (paused after step 3, its checkpoint written to a
file and finished from it); the tiny models and references are the tests'
(tests/engine/generation/test_half_precision_video.py runs the same cases through a
runner). Alone: `python -m benchmarks.architectures_video_half [bfloat16|float16]`.
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from app.engine.generation.device import DeviceChoice
from app.engine.generation.files.sources import ModelInfo, ModelSearchPath, list_models
from app.engine.generation.load.pipelines import PipelineCache, SingleFileConfigs
from app.engine.generation.runner import Runner
from app.engine.jobs.params import GenerationParams
from benchmarks.architectures import (
    PAUSE_AT,
    _condition_frames,
    _resolving,
    error_figure,
    report,
)

Frames = list[np.ndarray]


def run_video_rows(dtype: str) -> None:
    """The four rows above in `dtype`; a row that raises prints its error as its figures."""
    with tempfile.TemporaryDirectory() as temp:
        work = Path(temp)
        for label, row in (
            ("ltx-condition-strength", _ltx_strength),
            ("ltx-0.9.8-distilled-single-file-image", _ltx_distilled_file),
            ("ltx-0.9.5-single-file-image", _ltx_file),
            ("wan2.2-i2v-a14b-expert-files-last-image", _wan_expert_files),
        ):
            try:
                ours, resumed, stock = row(work / label, dtype)
                figures: tuple[Any, Any] = (_diff(ours, stock), _diff(ours, resumed))
            except Exception as error:  # one row's failure is its figures; the rest go on
                figures = (error_figure(error),) * 2
            report(f"same_as_diffusers_max_diff[{label}-{dtype}]", figures[0])
            report(f"pause_resume_max_diff[{label}-{dtype}]", figures[1])


def _ltx_strength(work: Path, dtype: str) -> tuple[Frames, Frames, Frames]:
    from diffusers import LTXConditionPipeline
    from diffusers.pipelines.ltx.pipeline_ltx_condition import LTXVideoCondition

    from app.testing.tiny.ltx import write_tiny_ltx_condition
    from tests.engine.generation import test_half_precision_video as cases

    folder = write_tiny_ltx_condition(work / "ltx")
    params = cases.ltx_params(negative_prompt="blurry", steps=4, frames=17,
                              **cases.WITH_IMAGE, **cases.WITH_LAST)  # fmt: skip
    params = replace(params, image_strength=0.8, last_image_strength=0.3, last_image_frame=12)
    ours, resumed = _ours(_model(folder), None, params, dtype, cases.PNG, cases.LAST)
    stock = LTXConditionPipeline.from_pretrained(
        folder, local_files_only=True, dtype=cases.stock_wide(dtype)
    )
    conditions = [
        LTXVideoCondition(image=cases.picture(cases.PNG), frame_index=0, strength=0.8),
        LTXVideoCondition(image=cases.picture(cases.LAST), frame_index=12, strength=0.3),
    ]
    return ours, resumed, cases.stock_ltx(stock, params, dtype, conditions=conditions)


def _ltx_distilled_file(work: Path, dtype: str) -> tuple[Frames, Frames, Frames]:
    from app.engine.generation.prompts.few_step import LTX_DISTILLED_TIMESTEPS, job_defaults
    from benchmarks.architectures_ltx import DISTILLED_FILE
    from tests.engine.generation import test_half_precision_video as cases
    from tests.engine.generation.tiny_ltx095_files import stock_from_file, write_tiny_ltx095_files

    files = write_tiny_ltx095_files(work)
    distilled = files.checkpoint.with_name(DISTILLED_FILE)
    os.link(files.checkpoint, distilled)  # the same bytes under the release's name
    search = ModelSearchPath(user=(files.models,))
    name = next(info.name for info in list_models(search) if info.path == distilled)
    asked = cases.ltx_params(model=name, negative_prompt="blurry", **cases.WITH_IMAGE)
    params = job_defaults(asked, (), search).params.validated()
    model = next(info for info in list_models(search) if info.path == distilled)
    ours, resumed = _ours(model, files.configs.parent, params, dtype, cases.PNG)
    stock = cases.stock_ltx(
        stock_from_file(files, dtype=dtype), params, dtype, image=cases.picture(cases.PNG),
        timesteps=LTX_DISTILLED_TIMESTEPS,
    )  # fmt: skip
    return ours, resumed, stock


def _ltx_file(work: Path, dtype: str) -> tuple[Frames, Frames, Frames]:
    from tests.engine.generation import test_half_precision_video as cases
    from tests.engine.generation.tiny_ltx095_files import stock_from_file, write_tiny_ltx095_files

    files = write_tiny_ltx095_files(work)
    params = cases.ltx_params(negative_prompt="blurry", steps=4, **cases.WITH_IMAGE)
    model = _model(files.checkpoint)
    ours, resumed = _ours(model, files.configs.parent, params, dtype, cases.PNG)
    stock = cases.stock_ltx(
        stock_from_file(files, dtype=dtype), params, dtype, image=cases.picture(cases.PNG)
    )
    return ours, resumed, stock


def _wan_expert_files(work: Path, dtype: str) -> tuple[Frames, Frames, Frames]:
    from diffusers import WanImageToVideoPipeline

    from tests.engine.generation import test_half_precision_video as cases
    from tests.engine.generation.test_wan import wan_params
    from tests.engine.generation.test_wan_image import PNG
    from tests.engine.generation.test_wan_last_frame import LAST, WITH_BOTH
    from tests.engine.generation.tiny_wan_i2v_expert_files import (
        HIGH,
        stock_from_i2v_expert_files,
        write_tiny_i2v_expert_files,
    )

    files = write_tiny_i2v_expert_files(work)
    params = wan_params(model="m", scheduler="UniPC", negative_prompt="blurry", steps=4,
                        frames=5, **WITH_BOTH)  # fmt: skip
    ours, resumed = _ours(_model(files.expert(HIGH)), files.configs, params, dtype, PNG, LAST)
    single = stock_from_i2v_expert_files(files, dtype=dtype)  # its VAE: the file's
    pipe = WanImageToVideoPipeline.from_pretrained(
        files.folder, local_files_only=True, vae=single.vae, dtype=cases.stock_wide(dtype)
    )
    pipe.set_progress_bar_config(disable=True)
    stock = pipe(
        image=cases.picture(PNG), last_image=cases.picture(LAST), prompt=params.prompt,
        negative_prompt=params.negative_prompt, height=params.height, width=params.width,
        num_frames=params.frames, num_inference_steps=params.steps, guidance_scale=params.cfg,
        generator=torch.Generator().manual_seed(params.seed), output_type="pil",
    ).frames[0]  # fmt: skip
    return ours, resumed, _arrays(stock)


def _model(path: Path) -> ModelInfo:
    from app.engine.generation.files.sources import ModelSource, detected

    return detected(ModelInfo("m", path, ModelSource.USER))


def _ours(
    model: ModelInfo, configs: Path | None, params: GenerationParams, dtype: str,
    first: bytes, last: bytes | None = None,
) -> tuple[Frames, Frames]:  # fmt: skip
    """Easel's clip in `dtype`, and the same clip paused after `PAUSE_AT` steps and
    finished from its checkpoint file."""
    cache = PipelineCache(configs=SingleFileConfigs(configs) if configs else None)
    runner = Runner(
        device=DeviceChoice("cpu", dtype), resolve=_resolving(model), threads=1, cache=cache
    )
    pipe = runner.load(model.name).pipe
    whole = _condition_frames(pipe, params, first, last)
    resumed = _condition_frames(pipe, params, first, last, pause_at=PAUSE_AT)
    return _arrays(whole), _arrays(resumed)


def _arrays(frames: list[Any]) -> Frames:
    return [np.asarray(frame, dtype=np.int16) for frame in frames]


def _diff(ours: Frames, theirs: Frames) -> int:
    if len(ours) != len(theirs):
        return 255
    return max(int(np.abs(a - b).max()) for a, b in zip(ours, theirs, strict=True))


if __name__ == "__main__":
    for name in sys.argv[1:] or ["bfloat16", "float16"]:
        run_video_rows(name)

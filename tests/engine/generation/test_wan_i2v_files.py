"""Wan 2.1 I2V as ComfyUI's files: `wan2.1_i2v_480p_14B_fp16.safetensors` in Wan-AI's keys,
the UMT5 file, the Wan 2.1 VAE, and `clip_vision/clip_vision_h.safetensors` (transformers'
keys, as ComfyUI stores it) paired by the width the transformer's image embedding reads
(families/wan/clip_vision.py), the shipped image processor; run through Easel's loop with
an input image: the stock `WanImageToVideoPipeline` on the same weights exactly (diffusers'
own single-file loads of the transformer and VAE files, the folder twin's CLIP encoder),
and across a resume.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from app.engine.generation.device import CPU
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.files.sources import ModelInfo
from app.engine.generation.load.pipelines import PipelineCache, SingleFileConfigs
from app.engine.generation.outcome import OutcomeKind
from app.engine.generation.runner import Runner
from app.engine.jobs.params import GenerationParams
from tests.engine.generation.test_wan import Written, max_frame_diff, wan_params
from tests.engine.generation.test_wan import written as written
from tests.engine.generation.test_wan_image import PNG, WITH_IMAGE, clip_of
from tests.engine.generation.tiny_architectures import model_info, pause_at
from tests.engine.generation.tiny_wan_i2v_files import (
    CLIP_VISION_NAME,
    TinyI2vFiles,
    stock_from_files,
    write_tiny_i2v_files,
)

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> TinyI2vFiles:
    return write_tiny_i2v_files(tmp_path_factory.mktemp("wan-i2v-files"))


def files_runner(files: TinyI2vFiles, model: ModelInfo) -> Runner:
    cache = PipelineCache(configs=SingleFileConfigs(files.configs.parent))
    return Runner(device=CPU, resolve=lambda _name: model, threads=1, cache=cache)


def stock_frames(files: TinyI2vFiles, params: GenerationParams) -> list[np.ndarray]:
    frames = stock_from_files(files)(
        image=Image.open(io.BytesIO(PNG)).convert("RGB"),
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


def test_the_files_are_wan_2_1_i2v_and_without_clip_vision_refused_in_a_sentence(
    files: TinyI2vFiles, tmp_path: Path
) -> None:
    model = model_info(files.model)
    assert model.architecture is Architecture.WAN2_1_I2V, model.unsupported_reason
    assert model.config_name == "wan2.1-i2v-14b-480p"
    assert {part.kind for part in model.parts} == {"transformer", "umt5", "wan_vae"}
    models = tmp_path / "models"
    for folder in ("diffusion_models", "text_encoders", "vae"):
        (models / folder).mkdir(parents=True)
        for file in (files.models / folder).iterdir():
            (models / folder / file.name).symlink_to(file)
    bare = models / "diffusion_models" / files.model.name
    assert model_info(bare).unsupported_reason == (
        "wan2.1_i2v_480p_14B_fp16: needs a CLIP vision model 4 wide in clip_vision/ "
        "(ComfyUI's clip_vision_h.safetensors, open-clip ViT-H/14, for Wan 2.1 I2V)"
    )
    (models / "clip_vision").mkdir()
    (models / "clip_vision" / CLIP_VISION_NAME).symlink_to(
        files.models / "clip_vision" / CLIP_VISION_NAME
    )
    assert model_info(bare).architecture is Architecture.WAN2_1_I2V


def test_the_files_draw_stock_s_frames_and_resume_exactly(
    files: TinyI2vFiles, written: Written, tmp_path: Path
) -> None:
    params = wan_params(model="m", scheduler="UniPC", negative_prompt="blurry", steps=3,
                        frames=5, **WITH_IMAGE)  # fmt: skip
    model = model_info(files.model, "m")
    whole = clip_of(files_runner(files, model), params, tmp_path, "whole")
    assert whole.kind is OutcomeKind.COMPLETED and whole.image_path is not None
    ours = written.frames[whole.image_path]
    assert len(ours) == 5
    assert max_frame_diff(ours, stock_frames(files, params)) == 0
    paused = clip_of(files_runner(files, model), params, tmp_path, "paused", on_step=pause_at(2))
    assert paused.kind is OutcomeKind.PAUSED
    resumed = clip_of(files_runner(files, model), params, tmp_path, "paused")  # a fresh runner
    assert resumed.resumed_from is not None and resumed.resumed_from.step == 2
    assert resumed.image_path is not None
    assert max_frame_diff(written.frames[resumed.image_path], ours) == 0

"""Wan 2.1 I2V files with their CLIP vision file in open-clip's key layout
(`visual.transformer.resblocks.N.attn.in_proj_weight`, an open-clip export), read into
transformers' `CLIPVisionModelWithProjection` layout as it loads (families/wan/
open_clip_keys.py): the mapping exact both ways on a tiny encoder (tiny_open_clip writes
the other way by hand), and a clip with such a file equal to stock `WanImageToVideoPipeline`
on the same weights. And the CLIP encoder of Wan 2.1 I2V's files runs in the pipeline's
dtype, not its file's: in bfloat16 the files' clip equals stock's folder loaded in bfloat16.

On the tiny Wan 2.1 I2V files of tiny_wan_i2v_files.
"""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from app.engine.generation.device import CPU
from app.engine.generation.families.wan.open_clip_keys import to_transformers
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.files.sources import ModelInfo
from app.engine.generation.load.pipelines import PipelineCache, SingleFileConfigs
from app.engine.generation.runner import Runner
from app.engine.jobs.params import GenerationParams
from tests.engine.generation.test_wan import Written, max_frame_diff, wan_params
from tests.engine.generation.test_wan import written as written
from tests.engine.generation.test_wan_image import PNG, WITH_IMAGE, clip_of
from tests.engine.generation.tiny_architectures import model_info
from tests.engine.generation.tiny_open_clip import to_open_clip
from tests.engine.generation.tiny_wan_files import _save
from tests.engine.generation.tiny_wan_i2v_files import (
    CLIP_VISION_NAME,
    TinyI2vFiles,
    stock_from_files,
    write_tiny_i2v_files,
)

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

PARAMS = wan_params(model="m", scheduler="UniPC", negative_prompt="blurry", steps=2, frames=5,
                    **WITH_IMAGE)  # fmt: skip
CLIP_LAYERS = 2  # tiny_clip_vision_with_projection's
OPEN_CLIP_NAME = "open_clip_vit_h_14.safetensors"


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> TinyI2vFiles:
    return write_tiny_i2v_files(tmp_path_factory.mktemp("wan-i2v-clip"))


@pytest.fixture(scope="module")
def open_clip_models(files: TinyI2vFiles, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A models folder of links to the I2V files, its `clip_vision/` holding the same CLIP
    encoder in open-clip's layout alone."""
    from safetensors.torch import load_file

    models = tmp_path_factory.mktemp("open-clip-models")
    for folder in ("diffusion_models", "text_encoders", "vae"):
        (models / folder).symlink_to(files.models / folder)
    state = load_file(str(files.models / "clip_vision" / CLIP_VISION_NAME))
    _save(to_open_clip(state, CLIP_LAYERS), models / "clip_vision" / OPEN_CLIP_NAME)
    return models


def files_runner(files: TinyI2vFiles, model: ModelInfo, dtype: str = "float32") -> Runner:
    cache = PipelineCache(configs=SingleFileConfigs(files.configs.parent))
    device = replace(CPU, dtype_name=dtype)
    return Runner(device=device, resolve=lambda _name: model, threads=1, cache=cache)


def stock_frames(pipe: Any, params: GenerationParams) -> list[np.ndarray]:
    frames = pipe(
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


def test_open_clip_s_layout_maps_to_transformers_exactly_and_a_stray_key_is_named(
    files: TinyI2vFiles,
) -> None:
    from safetensors.torch import load_file

    state = load_file(str(files.models / "clip_vision" / CLIP_VISION_NAME))
    back = to_transformers(to_open_clip(state, CLIP_LAYERS))
    assert set(back) == set(state)  # the text tower's tensors left out
    assert all(torch.equal(back[key], state[key]) for key in state)
    stray = {**to_open_clip(state, CLIP_LAYERS), "visual.attn_pool.query": torch.zeros(1)}
    with pytest.raises(ValueError, match=r"cannot map: visual\.attn_pool\.query$"):
        to_transformers(stray)


def test_wan_2_1_i2v_with_an_open_clip_file_draws_stock_s_clip(
    files: TinyI2vFiles, open_clip_models: Path, written: Written, tmp_path: Path
) -> None:
    model = model_info(open_clip_models / "diffusion_models" / files.model.name, "m")
    assert model.architecture is Architecture.WAN2_1_I2V, model.unsupported_reason
    done = clip_of(files_runner(files, model), PARAMS, tmp_path, "open-clip")
    assert done.image_path is not None
    ours = written.frames[done.image_path]
    assert max_frame_diff(ours, stock_frames(stock_from_files(files), PARAMS)) == 0


def test_the_files_clip_encoder_runs_in_bfloat16_as_stock_s_folder_does(
    files: TinyI2vFiles, written: Written, tmp_path: Path
) -> None:
    import diffusers

    model = model_info(files.model, "m")
    runner = files_runner(files, model, "bfloat16")
    assert runner.load("m").pipe.image_encoder.dtype == torch.bfloat16
    done = clip_of(runner, PARAMS, tmp_path, "bf16")
    assert done.image_path is not None
    options: dict[str, Any] = {
        "config": str(files.configs), "local_files_only": True, "torch_dtype": torch.bfloat16,
    }  # fmt: skip
    vae = diffusers.AutoencoderKLWan.from_single_file(
        str(files.models / "vae" / "wan_2.1_vae.safetensors"), subfolder="vae", **options
    )
    stock = diffusers.WanImageToVideoPipeline.from_pretrained(  # its transformer as a folder
        files.folder,
        local_files_only=True,
        vae=vae,
        torch_dtype=torch.bfloat16,
    )  # keeps Wan's float32 modules, as Easel's files do (assemble.keep_float32_as_a_folder_does)
    stock.set_progress_bar_config(disable=True)
    assert stock.image_encoder.dtype == torch.bfloat16
    assert max_frame_diff(written.frames[done.image_path], stock_frames(stock, PARAMS)) == 0

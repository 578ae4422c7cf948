"""Wan 2.2 TI2V 5B as ComfyUI's split files: `wan2.2_ti2v_5B_fp16.safetensors` in
`diffusion_models/` (Wan-AI's keys), the UMT5 file carrying its tokenizer, and
`wan2.2_vae.safetensors` in the keys of Wan-AI's `Wan2.2_VAE.pth` (families/wan/vae22.py
converts them), assembled as `WanImageToVideoPipeline` with `expand_timesteps` and run
through Easel's loop, with and without an input image: the stock pipeline's frames on the
same weights exactly, and across a resume.

The reference is the diffusers folder of the same weights, its transformer read from the
same file by diffusers' own single-file code (diffusers 0.42 cannot read Wan 2.2's VAE
file: the folder's VAE is the one Easel's converter must give back, key for key).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image
from safetensors.torch import save_file

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
from tests.engine.generation.tiny_wan_ti2v_files import (
    TinyTi2vFiles,
    stock_from_files,
    write_tiny_ti2v_files,
)

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

STEPS, FRAMES = 3, 5


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> TinyTi2vFiles:
    return write_tiny_ti2v_files(tmp_path_factory.mktemp("wan-ti2v-files"))


def files_runner(files: TinyTi2vFiles, model: ModelInfo) -> Runner:
    cache = PipelineCache(configs=SingleFileConfigs(files.configs.parent))
    return Runner(device=CPU, resolve=lambda _name: model, threads=1, cache=cache)


def stock_on_the_files(files: TinyTi2vFiles, params: GenerationParams) -> list[np.ndarray]:
    image = Image.open(io.BytesIO(PNG)).convert("RGB") if params.init_image else None
    pipe = stock_from_files(files, image is not None)
    extra: dict[str, Any] = {"image": image} if image is not None else {}
    frames = pipe(
        prompt=params.prompt,
        negative_prompt=params.negative_prompt or None,
        height=params.height,
        width=params.width,
        num_frames=params.frames,
        num_inference_steps=params.steps,
        guidance_scale=params.cfg,
        generator=torch.Generator().manual_seed(params.seed),
        output_type="pil",
        **extra,
    ).frames[0]
    return [np.asarray(frame, dtype=np.int16) for frame in frames]


def test_the_files_are_wan_2_2_ti2v_with_wan_2_2_s_vae(files: TinyTi2vFiles) -> None:
    model = model_info(files.model)
    assert model.architecture is Architecture.WAN2_2_TI2V, model.unsupported_reason
    assert model.config_name == "wan2.2-ti2v-5b"
    assert {part.kind: part.path.name for part in model.parts} == {
        "transformer": files.model.name,
        "umt5": "umt5_xxl_fp16.safetensors",
        "wan_vae": "wan2.2_vae.safetensors",
    }


def test_beside_wan_2_1_s_vae_alone_it_is_refused_naming_the_misfit(
    files: TinyTi2vFiles, tmp_path: Path
) -> None:
    models = tmp_path / "models"
    for folder in ("diffusion_models", "text_encoders"):
        (models / folder).mkdir(parents=True)
        source = files.model.parents[1] / folder
        for file in source.iterdir():
            (models / folder / file.name).symlink_to(file)
    (models / "vae").mkdir()
    wan21_vae = {  # the header is what is read: Wan 2.1's VAE marks, 16 latent channels
        "decoder.middle.0.residual.0.gamma": torch.zeros(4, 1, 1, 1),
        "conv2.weight": torch.zeros(16, 16, 1, 1, 1),
    }
    save_file(wan21_vae, str(models / "vae" / "wan_2.1_vae.safetensors"))
    model = model_info(models / "diffusion_models" / files.model.name)
    assert model.unsupported_reason == (
        "wan2.2_ti2v_5B_fp16: wan_2.1_vae.safetensors in vae/ is a Wan VAE of 16 latent "
        "channels, but the model needs 48"
    )


@pytest.mark.parametrize("image", [False, True], ids=["text", "text+image"])
def test_the_files_draw_stock_s_frames_and_resume_exactly(
    files: TinyTi2vFiles, written: Written, tmp_path: Path, image: bool
) -> None:
    params = wan_params(model="m", scheduler="UniPC", negative_prompt="blurry", steps=STEPS,
                        frames=FRAMES, **(WITH_IMAGE if image else {}))  # fmt: skip
    model = model_info(files.model, "m")
    whole = clip_of(files_runner(files, model), params, tmp_path, "whole")
    assert whole.kind is OutcomeKind.COMPLETED and whole.image_path is not None
    ours = written.frames[whole.image_path]
    assert len(ours) == FRAMES
    assert max_frame_diff(ours, stock_on_the_files(files, params)) == 0
    paused = clip_of(files_runner(files, model), params, tmp_path, "paused", on_step=pause_at(2))
    assert paused.kind is OutcomeKind.PAUSED
    resumed = clip_of(files_runner(files, model), params, tmp_path, "paused")  # a fresh runner
    assert resumed.resumed_from is not None and resumed.resumed_from.step == 2
    assert resumed.image_path is not None
    assert max_frame_diff(written.frames[resumed.image_path], ours) == 0


def test_the_released_vae_s_keys_fill_the_shipped_config_exactly() -> None:
    """The shipped `wan2.2-ti2v-5b` VAE (the released shape: 160 wide, a 256-wide decoder)
    on the meta device: its keys written as Wan-AI's and converted back are its own, none
    left over or missing (what `vae22.vae` loads strictly)."""
    from accelerate import init_empty_weights
    from diffusers import AutoencoderKLWan

    from app.engine.generation.families.wan.vae22 import diffusers_vae_keys
    from tests.engine.generation.tiny_wan_files import shipped_configs
    from tests.engine.generation.tiny_wan_ti2v_files import wan22_vae_to_original

    settings = AutoencoderKLWan.load_config(shipped_configs() / "wan2.2-ti2v-5b" / "vae")
    with init_empty_weights():
        released = AutoencoderKLWan.from_config(settings).state_dict()
    original = wan22_vae_to_original(released)
    assert "decoder.upsamples.0.upsamples.3.resample.1.weight" in original  # after 3 resnets
    assert "encoder.downsamples.0.downsamples.2.resample.1.weight" in original  # after 2
    assert set(diffusers_vae_keys(original)) == set(released)

"""The files artists have, in half precision on the CPU as a GPU computes them: Qwen-Image's
split ComfyUI files, its fp8 e4m3fn and GGUF Q8_0 transformers (tiny_qwen_files.py), and Wan
2.1 I2V's files with their CLIP vision model (tiny_wan_i2v_files.py), each in bfloat16 and
float16 (there the text encoders float16 overflows, Qwen2.5-VL and UMT5, run in float32 as
on a float16-only GPU: `device.precision`). Easel's image equals the stock pipeline's in
that same dtype: the split files the diffusers folder of the same weights; a quantised
file the stock pipeline on the components Easel loaded (as test_qwen_files.py in float32);
Wan I2V stock `WanImageToVideoPipeline` of the folder with diffusers' own single-file load
of the VAE (its transformer's float32 modules kept as a folder keeps them; its CLIP
vision encoder in that dtype too: built as the file stores it, it differed by 66 levels in
bfloat16 and 46 in float16, assemble.py's `_from_folders`)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from diffusers import QwenImagePipeline
from PIL import Image

from app.engine.generation.device import DeviceChoice
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.load.pipelines import SingleFileConfigs, load_pipeline
from app.engine.generation.outcome import OutcomeKind
from app.engine.jobs.params import GenerationParams
from tests.engine.generation.file_jobs import runner_on
from tests.engine.generation.test_wan import Written, max_frame_diff, wan_params
from tests.engine.generation.test_wan import written as written
from tests.engine.generation.test_wan_image import PNG, WITH_IMAGE, clip_of
from tests.engine.generation.tiny_architectures import go_on, max_diff, model_info, pixels
from tests.engine.generation.tiny_qwen_files import TinyQwenFiles, write_tiny_qwen_files
from tests.engine.generation.tiny_wan_i2v_files import TinyI2vFiles, write_tiny_i2v_files

pytestmark = pytest.mark.filterwarnings(
    "ignore:__array__ implementation:DeprecationWarning", "ignore::FutureWarning"
)

DTYPES = ["bfloat16", "float16"]


def stock_dtypes(dtype: str) -> Any:
    """`from_pretrained`'s dtype as a float16-only GPU's users load these families: the
    text encoder float16 overflows in float32."""
    half = getattr(torch, dtype)
    return half if dtype == "bfloat16" else {"default": half, "text_encoder": torch.float32}


# --- Qwen-Image's files ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def qwen(tmp_path_factory: pytest.TempPathFactory) -> TinyQwenFiles:
    return write_tiny_qwen_files(Architecture.QWEN_IMAGE, tmp_path_factory.mktemp("qwen-half"))


def qwen_params() -> GenerationParams:
    return GenerationParams(
        prompt="a red circle", negative_prompt="blue", model="m", steps=3, cfg=4.0,
        width=64, height=48, seed=1234,
    )  # fmt: skip


def stock_qwen(pipe: Any, params: GenerationParams, dtype: str) -> Any:
    """Stock `QwenImagePipeline` called with its defaults, true CFG on; with Qwen2.5-VL
    wider than the transformer, its embeddings cast (it would hand float32 ones to its
    float16 transformer), as test_half_precision_flow's references."""
    half = getattr(torch, dtype)
    prompts: dict[str, Any] = {"prompt": params.prompt, "negative_prompt": params.negative_prompt}
    if pipe.text_encoder.dtype != half:
        with torch.no_grad():  # one text each: never padded, so no attention masks
            embeds, _ = pipe.encode_prompt(params.prompt)
            negative, _ = pipe.encode_prompt(params.negative_prompt)
        prompts = {"prompt_embeds": embeds.to(half), "negative_prompt_embeds": negative.to(half)}
    pipe.set_progress_bar_config(disable=True)
    return pipe(
        **prompts, true_cfg_scale=params.cfg, num_inference_steps=params.steps,
        height=params.height, width=params.width,
        generator=torch.Generator("cpu").manual_seed(params.seed),
    ).images[0]  # fmt: skip


# The split files in both dtypes; each quantised layout in one, the two spread over them (each
# layout in each dtype measured 0 too).
QWEN_CASES = [("split", "bfloat16"), ("split", "float16"), ("fp8", "bfloat16"), ("gguf", "float16")]


@pytest.mark.parametrize(("layout", "dtype"), QWEN_CASES, ids=["-".join(c) for c in QWEN_CASES])
def test_qwen_image_files_in_half_precision_equal_stock_in_that_dtype(
    qwen: TinyQwenFiles, tmp_path: Path, layout: str, dtype: str
) -> None:
    path = {"split": qwen.split_model, "fp8": qwen.fp8_model, "gguf": qwen.gguf_model}[layout]
    device, params = DeviceChoice("cpu", dtype), qwen_params()
    out = tmp_path / "ours.png"
    outcome = runner_on(model_info(path), qwen.configs, device).run(
        params, output_path=out, checkpoint_path=out.with_suffix(".ckpt"), on_step=go_on
    )
    assert outcome.kind is OutcomeKind.COMPLETED
    loaded = load_pipeline(model_info(path), device, SingleFileConfigs(qwen.configs)).pipe
    assert loaded.vae.dtype == getattr(torch, dtype)  # Easel did compute in `dtype`
    if layout == "split":  # the diffusers folder of the same weights
        stock: Any = QwenImagePipeline.from_pretrained(
            qwen.folder, dtype=stock_dtypes(dtype), local_files_only=True
        )
    else:  # the components Easel loaded, quantised as stored
        stock = type(loaded)(**loaded.components)
    ours = pixels(out)
    assert float(np.asarray(ours).std()) > 5  # a picture: a NaN decodes flat in both
    assert max_diff(ours, pixels(stock_qwen(stock, params, dtype))) == 0


# --- Wan 2.1 I2V's files ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def i2v(tmp_path_factory: pytest.TempPathFactory) -> TinyI2vFiles:
    return write_tiny_i2v_files(tmp_path_factory.mktemp("wan-i2v-half"))


def stock_i2v(files: TinyI2vFiles, params: GenerationParams, dtype: str) -> list[np.ndarray]:
    """The folder's stock `WanImageToVideoPipeline` in `dtype` (its transformer as the
    folder loads it: Wan's float32 modules kept, as Easel's files do:
    assemble.keep_float32_as_a_folder_does; diffusers' `from_single_file` casts them too), with
    diffusers' own single-file load of the VAE file, called with its defaults."""
    import diffusers

    options: dict[str, Any] = {
        "config": str(files.configs), "local_files_only": True, "torch_dtype": getattr(torch, dtype)
    }  # fmt: skip
    vae = diffusers.AutoencoderKLWan.from_single_file(
        str(files.models / "vae" / "wan_2.1_vae.safetensors"), subfolder="vae", **options
    )
    pipe = diffusers.WanImageToVideoPipeline.from_pretrained(
        files.folder, local_files_only=True, vae=vae, dtype=stock_dtypes(dtype)
    )
    pipe.set_progress_bar_config(disable=True)
    frames = pipe(
        image=Image.open(io.BytesIO(PNG)).convert("RGB"), prompt=params.prompt,
        negative_prompt=params.negative_prompt, height=params.height, width=params.width,
        num_frames=params.frames, num_inference_steps=params.steps, guidance_scale=params.cfg,
        generator=torch.Generator().manual_seed(params.seed), output_type="pil",
    ).frames[0]  # fmt: skip
    return [np.asarray(frame, dtype=np.int16) for frame in frames]


@pytest.mark.parametrize("dtype", DTYPES)
def test_wan_i2v_files_in_half_precision_equal_stock_in_that_dtype(
    i2v: TinyI2vFiles, written: Written, tmp_path: Path, dtype: str
) -> None:
    params = wan_params(model="m", scheduler="UniPC", negative_prompt="blurry", steps=3,
                        frames=5, **WITH_IMAGE)  # fmt: skip
    runner = runner_on(model_info(i2v.model, "m"), i2v.configs.parent, DeviceChoice("cpu", dtype))
    whole = clip_of(runner, params, tmp_path, "whole")
    assert whole.kind is OutcomeKind.COMPLETED and whole.image_path is not None
    ours = written.frames[whole.image_path]
    assert float(np.std(ours)) > 5
    assert max_frame_diff(ours, stock_i2v(i2v, params, dtype)) == 0

"""A tiny LTX-Video 0.9.5 written as the file artists have: Lightricks' all-in-one
`ltx-video-2b-v0.9.5.safetensors` (the transformer under `model.diffusion_model.`, the VAE
under `vae.`, in Lightricks' keys) in `models/checkpoints/`, beside ComfyUI's T5 in
`models/text_encoders/`, and a GGUF Q8_0 of the transformer in `models/diffusion_models/`
beside the VAE alone in `models/vae/` (city96's and ComfyUI's layout); with the
`LTXConditionPipeline` folder of the same weights (the
reference) and the config folder Easel loads the file with (the folder without its
weights, named as the shipped 0.9.5 one).

The VAE has 0.9.5's shape: an encoder of four `LTXVideo095DownBlock3D` (spatial, temporal,
then two spatio-temporal downsamplers) ending on 2048 channels, which is what diffusers'
converter and Easel's detection tell the release by, so the last block is as wide as that
needs (its convolution about 1.8M weights; everything else a few channels); a decoder of
three upsampling blocks conditioned on the decode timestep, injecting no noise. The
converters' renames run backwards, and `write_tiny_ltx095_files` checks that diffusers' own
conversion gives the folder's keys back, so a wrong inverse cannot pass.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from app.testing.tiny.ltx import CONDITION_SCHEDULER, LATENT_CHANNELS, build_tiny_ltx
from tests.engine.generation.tiny_ltx_files import (
    TRANSFORMER_PREFIX,
    VAE_PREFIX,
    StateDict,
    _vae_key,
    ltx_transformer_to_original,
)
from tests.engine.generation.tiny_wan_files import write_wan_gguf

CONFIG_NAME = "ltx-video-0.9.5"  # what a 2B file with 0.9.5's VAE loads with
FILE_NAME = "ltx-video-2b-v0.9.5"  # Lightricks' name of the released file
VAE_FILE = "ltx-video-0.9.5-vae.safetensors"  # the VAE alone, in models/vae/
ENCODER_WIDTH = 2048  # where 0.9.5's encoder ends: the release's mark


@dataclass(frozen=True)
class TinyLtx095Files:
    folder: Path  # the LTXConditionPipeline folder of the same weights
    models: Path  # the models folder of the file
    checkpoint: Path  # models/checkpoints/<FILE_NAME>.safetensors: transformer and VAE
    gguf_model: Path  # models/diffusion_models/<FILE_NAME>-Q8_0.gguf: the transformer alone
    configs: Path  # <configs>/<CONFIG_NAME>: the folder without weights


def tiny_ltx_095_vae(seed: int = 0) -> Any:
    """An LTX-Video VAE of 0.9.5's shape, a few channels wide but where 2048 is the mark
    (each downsampler folds its stride into channels: 256 x 8 = 2048 at the last)."""
    from diffusers import AutoencoderKLLTXVideo

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        vae: Any = AutoencoderKLLTXVideo(
            latent_channels=LATENT_CHANNELS,
            block_out_channels=(8, 16, 32, 256, ENCODER_WIDTH),
            down_block_types=("LTXVideo095DownBlock3D",) * 4,
            downsample_type=("spatial", "temporal", "spatiotemporal", "spatiotemporal"),
            layers_per_block=(1, 1, 1, 0, 0),  # none at 256 and 2048 channels: small
            spatio_temporal_scaling=(True, True, True, True),
            decoder_block_out_channels=(8, 16, 32),
            decoder_layers_per_block=(1, 1, 1, 1),
            decoder_spatio_temporal_scaling=(True, True, True),
            decoder_inject_noise=(False, False, False, False),
            upsample_residual=(True, True, True),
            upsample_factor=(2, 2, 2),
            timestep_conditioning=True,
            patch_size=4,
            patch_size_t=1,
            spatial_compression_ratio=32,
            temporal_compression_ratio=8,
        )
        vae.latents_mean.copy_(torch.randn(LATENT_CHANNELS) * 0.1)
        vae.latents_std.copy_(torch.rand(LATENT_CHANNELS) + 0.5)
        for name, tensor in vae.named_parameters():  # zero-initialised tables drawn
            if "scale_shift_table" in name or "per_channel_scale" in name:
                tensor.data.copy_(torch.randn_like(tensor) * 0.1)
    return vae


def build_tiny_ltx095() -> Any:
    """The tiny LTX-Video as a 0.9.5 `LTXConditionPipeline` with the VAE above."""
    from diffusers import FlowMatchEulerDiscreteScheduler, LTXConditionPipeline

    components = build_tiny_ltx().components
    components["vae"] = tiny_ltx_095_vae()
    components["scheduler"] = FlowMatchEulerDiscreteScheduler(**CONDITION_SCHEDULER)
    return LTXConditionPipeline(**components)


def write_tiny_ltx095_files(root: Path) -> TinyLtx095Files:
    from diffusers.loaders.single_file_utils import (
        convert_ltx_transformer_checkpoint_to_diffusers,
        convert_ltx_vae_checkpoint_to_diffusers,
    )

    pipe = build_tiny_ltx095()
    folder = root / "folder" / FILE_NAME
    pipe.save_pretrained(folder)
    configs = root / "configs"
    shutil.copytree(folder, configs / CONFIG_NAME, ignore=shutil.ignore_patterns("*.safetensors"))

    transformer = ltx_transformer_to_original(pipe.transformer.state_dict())
    vae = ltx_095_vae_to_original(pipe.vae.state_dict())
    assert set(convert_ltx_transformer_checkpoint_to_diffusers(dict(transformer))) == set(
        pipe.transformer.state_dict()
    )
    assert set(convert_ltx_vae_checkpoint_to_diffusers(dict(vae))) == set(pipe.vae.state_dict())
    encoder = pipe.text_encoder.state_dict()  # ComfyUI's T5 file: the embedding once
    t5 = {k: v for k, v in encoder.items() if k != "encoder.embed_tokens.weight"}
    models = root / "models"
    checkpoint = models / "checkpoints" / f"{FILE_NAME}.safetensors"
    save_weights({**transformer, **vae}, checkpoint)
    save_weights(t5, models / "text_encoders" / "t5xxl_fp16.safetensors")
    bare_vae = {k.removeprefix(VAE_PREFIX): v for k, v in vae.items()}
    save_weights(bare_vae, models / "vae" / VAE_FILE)
    bare = {k.removeprefix(TRANSFORMER_PREFIX): v for k, v in transformer.items()}
    gguf_model = models / "diffusion_models" / f"{FILE_NAME}-Q8_0.gguf"
    gguf_model.parent.mkdir(parents=True, exist_ok=True)
    write_wan_gguf(bare, gguf_model)
    return TinyLtx095Files(folder, models, checkpoint, gguf_model, configs / CONFIG_NAME)


def stock_from_file(
    files: TinyLtx095Files, transformer_file: Path | None = None, dtype: str = "float32"
) -> Any:
    """The folder's stock `LTXConditionPipeline` with diffusers' own single-file loads of
    the transformer (the all-in-one file, or `transformer_file`: the GGUF) and of the VAE
    (the all-in-one file, or beside a `transformer_file` the VAE file: the same weights,
    read where Easel reads them, as convolutions' float sums may differ with alignment),
    in `dtype` (float16: T5 in float32, as a float16-only GPU's users load it)."""
    import diffusers

    from app.engine.generation.load.assemble import gguf_weights

    half = getattr(torch, dtype)
    options: dict[str, Any] = {
        "config": str(files.configs), "local_files_only": True, "torch_dtype": half
    }  # fmt: skip
    source: Any = str(transformer_file or files.checkpoint)
    quantised = dict(options)
    if transformer_file is not None and transformer_file.suffix == ".gguf":
        source = gguf_weights(transformer_file)
        quantised["quantization_config"] = diffusers.GGUFQuantizationConfig(compute_dtype=half)
    transformer = diffusers.LTXVideoTransformer3DModel.from_single_file(
        source, subfolder="transformer", **quantised
    )
    vae = diffusers.AutoencoderKLLTXVideo.from_single_file(
        str(files.checkpoint) if transformer_file is None else _vae_file_weights(files),
        subfolder="vae",
        **options,
    )
    wide = {"default": half, "text_encoder": torch.float32} if dtype == "float16" else half
    pipe = diffusers.LTXConditionPipeline.from_pretrained(
        files.folder, local_files_only=True, transformer=transformer, vae=vae, dtype=wide
    )
    pipe.set_progress_bar_config(disable=True)
    return pipe


def _vae_file_weights(files: TinyLtx095Files) -> StateDict:
    """The VAE file's weights under `vae.`, where diffusers' LTX converter reads them."""
    from safetensors.torch import load_file

    bare = load_file(str(files.models / "vae" / VAE_FILE))
    return {VAE_PREFIX + key: value for key, value in bare.items()}


def save_weights(weights: StateDict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in weights.items()}, str(path))


def ltx_095_vae_to_original(state: StateDict) -> StateDict:
    """The 0.9.5-shaped VAE in Lightricks' keys, under `vae.`: its encoder's blocks and
    downsamplers numbered in turn (diffusers' VAE_095_RENAME_DICT backwards), its decoder
    and statistics as 0.9.1's."""
    return {VAE_PREFIX + _vae_095_key(key): value for key, value in state.items()}


def _vae_095_key(key: str) -> str:
    if not key.startswith("encoder."):
        return _vae_key(key)
    key = key.replace("resnets", "res_blocks")
    if match := re.fullmatch(r"encoder\.mid_block\.(.*)", key):
        return f"encoder.down_blocks.8.{match[1]}"
    if match := re.fullmatch(r"encoder\.down_blocks\.(\d)\.downsamplers\.0\.(.*)", key):
        return f"encoder.down_blocks.{2 * int(match[1]) + 1}.{match[2]}"
    if match := re.fullmatch(r"encoder\.down_blocks\.(\d)\.(.*)", key):
        return f"encoder.down_blocks.{2 * int(match[1])}.{match[2]}"
    return key

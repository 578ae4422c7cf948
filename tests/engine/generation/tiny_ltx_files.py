"""A tiny LTX-Video written as the files artists have: Lightricks' all-in-one file (the
transformer under `model.diffusion_model.`, the VAE under `vae.`, in Lightricks' keys) in
`models/checkpoints/`, ComfyUI's T5 in `models/text_encoders/`, and a GGUF Q8_0 of the
transformer in `models/diffusion_models/` beside the VAE alone in `models/vae/`; with the
diffusers folder of the same weights (the reference) and the config folder Easel loads the
files with (the folder without its weights, named as the shipped 0.9.1 one).

The VAE has LTX-Video 0.9.1's shape (a timestep-conditioned decoder of three up blocks,
each upsampling first), a few channels wide: the key layout diffusers converts is that
shape's. The converters' renames run backwards, and `write_tiny_ltx_files` checks that
diffusers' own conversion gives the folder's keys back, so a wrong inverse cannot pass.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from app.testing.tiny.ltx import LATENT_CHANNELS, build_tiny_ltx
from tests.engine.generation.tiny_wan_files import write_wan_gguf

CONFIG_NAME = "ltx-video-0.9.1"  # what a 2B file with 0.9.1's VAE loads with
FILE_NAME = "ltx-video-2b-v0.9.1"  # Lightricks' name of the released file
TRANSFORMER_PREFIX = "model.diffusion_model."
VAE_PREFIX = "vae."
StateDict = dict[str, torch.Tensor]


@dataclass(frozen=True)
class TinyLtxFiles:
    folder: Path  # the diffusers folder of the same weights
    models: Path  # the models folder of the files
    checkpoint: Path  # models/checkpoints/<FILE_NAME>.safetensors: transformer and VAE
    gguf_model: Path  # models/diffusion_models/<FILE_NAME>-Q8_0.gguf: the transformer alone
    configs: Path  # <configs>/<CONFIG_NAME>: the folder without weights


def tiny_ltx_091_vae(seed: int = 0) -> Any:
    """An LTX-Video VAE of 0.9.1's shape (encoder as 0.9.0's; a decoder of a middle block
    and three upsampling blocks, noise injected, conditioned on the decode timestep)."""
    from diffusers import AutoencoderKLLTXVideo

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        vae: Any = AutoencoderKLLTXVideo(
            latent_channels=LATENT_CHANNELS,
            block_out_channels=(8, 8, 8, 8),
            decoder_block_out_channels=(8, 16, 32),  # halving, as (256, 512, 1024)
            layers_per_block=(1, 1, 1, 1, 1),
            decoder_layers_per_block=(1, 1, 1, 1),
            spatio_temporal_scaling=(True, True, True, False),
            decoder_spatio_temporal_scaling=(True, True, True),
            decoder_inject_noise=(True, True, True, False),
            upsample_residual=(True, True, True),
            upsample_factor=(2, 2, 2),
            timestep_conditioning=True,
            patch_size=4,
            patch_size_t=1,
        )
        vae.latents_mean.copy_(torch.randn(LATENT_CHANNELS) * 0.1)
        vae.latents_std.copy_(torch.rand(LATENT_CHANNELS) + 0.5)
        for name, tensor in vae.named_parameters():  # zero-initialised tables drawn
            if "scale_shift_table" in name or "per_channel_scale" in name:
                tensor.data.copy_(torch.randn_like(tensor) * 0.1)
    return vae


def write_tiny_ltx_files(root: Path) -> TinyLtxFiles:
    from diffusers.loaders.single_file_utils import (
        convert_ltx_transformer_checkpoint_to_diffusers,
        convert_ltx_vae_checkpoint_to_diffusers,
    )

    pipe = build_tiny_ltx()
    pipe.vae = tiny_ltx_091_vae()
    pipe.register_modules(vae=pipe.vae)
    folder = root / "folder" / FILE_NAME
    pipe.save_pretrained(folder)
    configs = root / "configs"
    shutil.copytree(folder, configs / CONFIG_NAME, ignore=shutil.ignore_patterns("*.safetensors"))

    transformer = ltx_transformer_to_original(pipe.transformer.state_dict())
    vae = ltx_vae_to_original(pipe.vae.state_dict())
    assert set(convert_ltx_transformer_checkpoint_to_diffusers(dict(transformer))) == set(
        pipe.transformer.state_dict()
    )
    assert set(convert_ltx_vae_checkpoint_to_diffusers(dict(vae))) == set(pipe.vae.state_dict())
    # ComfyUI's T5 file holds the embedding once, as `shared.weight`.
    encoder = pipe.text_encoder.state_dict()
    t5 = {k: v for k, v in encoder.items() if k != "encoder.embed_tokens.weight"}
    models = root / "models"
    checkpoint = models / "checkpoints" / f"{FILE_NAME}.safetensors"
    _save({**transformer, **vae}, checkpoint)
    _save(t5, models / "text_encoders" / "t5xxl_fp16.safetensors")
    bare_vae = {k.removeprefix(VAE_PREFIX): v for k, v in vae.items()}
    _save(bare_vae, models / "vae" / "ltx-video-0.9.1-vae.safetensors")
    bare = {k.removeprefix(TRANSFORMER_PREFIX): v for k, v in transformer.items()}
    gguf_model = models / "diffusion_models" / f"{FILE_NAME}-Q8_0.gguf"
    gguf_model.parent.mkdir(parents=True, exist_ok=True)
    write_wan_gguf(bare, gguf_model)
    return TinyLtxFiles(folder, models, checkpoint, gguf_model, configs / CONFIG_NAME)


def stock_from_files(files: TinyLtxFiles, transformer_file: Path) -> Any:
    """The folder's stock `LTXPipeline` with diffusers' own single-file loads of the
    transformer (the all-in-one file, or the GGUF) and of the VAE (the all-in-one file)."""
    import diffusers

    from app.engine.generation.load.assemble import gguf_weights

    options: dict[str, Any] = {"config": str(files.configs), "local_files_only": True}
    source: Any = str(transformer_file)
    if transformer_file.suffix == ".gguf":
        source = gguf_weights(transformer_file)
        options["quantization_config"] = diffusers.GGUFQuantizationConfig(
            compute_dtype=torch.float32
        )
    transformer = diffusers.LTXVideoTransformer3DModel.from_single_file(
        source, subfolder="transformer", **options
    )
    vae = diffusers.AutoencoderKLLTXVideo.from_single_file(
        str(files.checkpoint), subfolder="vae", config=str(files.configs), local_files_only=True
    )
    pipe = diffusers.LTXPipeline.from_pretrained(
        files.folder, local_files_only=True, transformer=transformer, vae=vae
    )
    pipe.set_progress_bar_config(disable=True)
    return pipe


def _save(weights: StateDict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in weights.items()}, str(path))


_TRANSFORMER_RENAMES = (  # diffusers' name -> Lightricks'
    ("proj_in", "patchify_proj"),
    ("time_embed", "adaln_single"),
    ("norm_q", "q_norm"),
    ("norm_k", "k_norm"),
)


def ltx_transformer_to_original(state: StateDict) -> StateDict:
    out = {}
    for key, value in state.items():
        new = key
        for diffusers_name, original in _TRANSFORMER_RENAMES:
            new = new.replace(diffusers_name, original)
        out[TRANSFORMER_PREFIX + new] = value
    return out


_ENCODER_BLOCKS = {"resnets": (0, 3, 6, 8), "downsamplers.0": (1, 4, 7), "conv_out": (2, 5)}
_TOP = {
    "latents_mean": "per_channel_statistics.mean-of-means",
    "latents_std": "per_channel_statistics.std-of-means",
    "decoder.time_embedder": "decoder.last_time_embedder",
    "decoder.scale_shift_table": "decoder.last_scale_shift_table",
}


def ltx_vae_to_original(state: StateDict) -> StateDict:
    """The 0.9.1-shaped VAE in Lightricks' keys, under `vae.`."""
    return {VAE_PREFIX + _vae_key(key): value for key, value in state.items()}


def _vae_key(key: str) -> str:
    for diffusers_name, original in _TOP.items():
        if key == diffusers_name or key.startswith(diffusers_name + "."):
            return original + key[len(diffusers_name) :]
    key = key.replace("resnets", "res_blocks").replace("conv_shortcut.conv", "conv_shortcut")
    key = re.sub(r"\.norm3\.", ".norm3.norm.", key)
    if match := re.fullmatch(r"encoder\.mid_block\.(.*)", key):
        return f"encoder.down_blocks.9.{match[1]}"
    encoder_block = r"encoder\.down_blocks\.(\d)\.(res_blocks|downsamplers\.0|conv_out)(.*)"
    if match := re.fullmatch(encoder_block, key):
        index, part, rest = match.groups()
        block = _ENCODER_BLOCKS["resnets" if part == "res_blocks" else part][int(index)]
        tail = f".res_blocks{rest}" if part == "res_blocks" else rest
        return f"encoder.down_blocks.{block}{tail}"
    if match := re.fullmatch(r"decoder\.mid_block\.(.*)", key):
        return f"decoder.up_blocks.0.{match[1]}"
    if match := re.fullmatch(r"decoder\.up_blocks\.(\d)\.upsamplers\.0\.(.*)", key):
        return f"decoder.up_blocks.{2 * int(match[1]) + 1}.{match[2]}"
    if match := re.fullmatch(r"decoder\.up_blocks\.(\d)\.(.*)", key):
        return f"decoder.up_blocks.{2 * int(match[1]) + 2}.{match[2]}"
    return key

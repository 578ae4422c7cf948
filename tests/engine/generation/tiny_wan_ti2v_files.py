"""A tiny Wan 2.2 TI2V 5B written as ComfyUI's split files (`diffusion_models/` in Wan-AI's
keys, `text_encoders/umt5_xxl_fp16.safetensors` carrying its tokenizer,
`vae/wan2.2_vae.safetensors` in the keys of Wan-AI's `Wan2.2_VAE.pth`), beside the
diffusers folder of the same weights (the reference) and the config folder the files load
with: Easel's shipped `wan2.2-ti2v-5b` but for the tiny networks' configs.

Its VAE has the released one's shape (dim_mult 1, 2, 4, 4, two residual blocks a level:
shortcut convolutions where the width changes), a few channels wide. The VAE's renames run
backwards here (each level's resampler after its residual blocks, as Wan-AI's
`Down_ResidualBlock`/`Up_ResidualBlock` number them), and the writer checks that Easel's
converter gives the folder's keys back.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from app.engine.generation.families.wan.vae22 import diffusers_vae_keys
from app.testing.tiny.wan import TI2V_LATENT_CHANNELS, build_tiny_wan_ti2v, tiny_umt5_encoder
from tests.engine.generation.tiny_umt5 import reference_tokenizer, spiece_tensor, train_tiny_spiece
from tests.engine.generation.tiny_wan_files import (
    _resnet,
    _save,
    shipped_configs,
    wan_transformer_to_original,
)

CONFIG_NAME = "wan2.2-ti2v-5b"
FILE_NAME = "wan2.2_ti2v_5B_fp16"  # ComfyUI's name of the released file
VAE_NAME = "wan2.2_vae.safetensors"
StateDict = dict[str, torch.Tensor]


@dataclass(frozen=True)
class TinyTi2vFiles:
    folder: Path  # the diffusers folder of the same weights
    model: Path  # models/diffusion_models/<FILE_NAME>.safetensors
    configs: Path  # <configs>/<CONFIG_NAME>


def tiny_wan22_released_vae(tiny: Any, seed: int = 0) -> Any:
    """The released VAE's levels, with the latents' statistics of the `tiny` TI2V VAE."""
    from diffusers import AutoencoderKLWan

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return AutoencoderKLWan(
            base_dim=4, z_dim=TI2V_LATENT_CHANNELS, in_channels=12, out_channels=12,
            is_residual=True, patch_size=2, dim_mult=[1, 2, 4, 4], num_res_blocks=2,
            temperal_downsample=[False, True, True], scale_factor_spatial=16,
            latents_mean=tiny.config.latents_mean, latents_std=tiny.config.latents_std,
        )  # fmt: skip


def write_tiny_ti2v_files(root: Path) -> TinyTi2vFiles:
    pipe = build_tiny_wan_ti2v(released=True)
    spiece = train_tiny_spiece()
    tokenizer = reference_tokenizer(spiece, root / "google-umt5-xxl")
    pipe.register_modules(
        vae=tiny_wan22_released_vae(pipe.vae),
        tokenizer=tokenizer,
        text_encoder=tiny_umt5_encoder(seed=1, vocab_size=len(tokenizer)),
    )
    folder = root / "folder" / FILE_NAME
    pipe.save_pretrained(folder)
    configs = root / "configs" / CONFIG_NAME
    shutil.copytree(shipped_configs() / CONFIG_NAME, configs)
    for component in ("transformer", "vae", "text_encoder"):
        shutil.copy(folder / component / "config.json", configs / component / "config.json")

    vae_state = pipe.vae.state_dict()
    vae = wan22_vae_to_original(vae_state)
    back = diffusers_vae_keys(dict(vae))
    assert set(back) == set(vae_state) and all(back[k] is vae[o] for o, k in _pairs(vae))
    encoder = pipe.text_encoder.state_dict()
    umt5 = {k: v for k, v in encoder.items() if k != "encoder.embed_tokens.weight"}
    umt5["spiece_model"] = spiece_tensor(spiece)
    models = root / "models"
    model = models / "diffusion_models" / f"{FILE_NAME}.safetensors"
    _save(wan_transformer_to_original(pipe.transformer.state_dict()), model)
    _save(umt5, models / "text_encoders" / "umt5_xxl_fp16.safetensors")
    _save(vae, models / "vae" / VAE_NAME)
    return TinyTi2vFiles(folder, model, configs)


def stock_from_files(files: TinyTi2vFiles, image: bool) -> Any:
    """The stock pipeline as the model card runs it (`WanImageToVideoPipeline` for an image,
    the folder's `WanPipeline` for text alone), its transformer read from the file by
    diffusers' own single-file code; its VAE the folder's (diffusers 0.42 cannot read Wan
    2.2's VAE file: the folder's is what Easel's conversion must give back)."""
    import diffusers

    transformer = diffusers.WanTransformer3DModel.from_single_file(
        str(files.model), subfolder="transformer", config=str(files.configs),
        local_files_only=True,
    )  # fmt: skip
    pipeline = diffusers.WanImageToVideoPipeline if image else diffusers.WanPipeline
    pipe = pipeline.from_pretrained(files.folder, local_files_only=True, transformer=transformer)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def _pairs(original: StateDict) -> list[tuple[str, str]]:
    from app.engine.generation.families.wan.vae22 import diffusers_key

    return [(key, diffusers_key(key)) for key in original]


_SAMPLER = re.compile(r"(encoder\.down_blocks|decoder\.up_blocks)\.(\d+)\.(?:down|up)sampler\.(.*)")
_LEVEL_RESNET = re.compile(
    r"(encoder\.down_blocks|decoder\.up_blocks)\.(\d+)\.resnets\.(\d+)\.(.*)"
)
_ORIGINAL_LEVELS = {"encoder.down_blocks": "encoder.downsamples.{}.downsamples",
                    "decoder.up_blocks": "decoder.upsamples.{}.upsamples"}  # fmt: skip
_ENDS = {"conv_in": "conv1", "norm_out": "head.0", "conv_out": "head.2"}


def wan22_vae_to_original(state: StateDict) -> StateDict:
    """diffusers' Wan 2.2 VAE keys -> Wan-AI's: a level's resampler numbered after its
    residual blocks (how many the level has, counted from the keys)."""
    resnets: dict[tuple[str, str], set[str]] = {}
    for key in state:
        if match := _LEVEL_RESNET.fullmatch(key):
            resnets.setdefault((match[1], match[2]), set()).add(match[3])
    out = {}
    for key, value in state.items():
        out[_original_key(key, resnets)] = value
    return out


def _original_key(key: str, resnets: dict[tuple[str, str], set[str]]) -> str:
    top, _, rest = key.partition(".")
    if top in ("quant_conv", "post_quant_conv"):
        return f"{'conv1' if top == 'quant_conv' else 'conv2'}.{rest}"
    side, _, tail = rest.partition(".")
    if side in _ENDS:
        return f"{top}.{_ENDS[side]}.{tail}"
    if match := re.fullmatch(r"(encoder|decoder)\.mid_block\.resnets\.(\d)\.(.*)", key):
        return f"{match[1]}.middle.{2 * int(match[2])}.{_resnet(match[3])}"
    if match := re.fullmatch(r"(encoder|decoder)\.mid_block\.attentions\.0\.(.*)", key):
        return f"{match[1]}.middle.1.{match[2]}"
    if match := _LEVEL_RESNET.fullmatch(key):
        level = _ORIGINAL_LEVELS[match[1]].format(match[2])
        return f"{level}.{match[3]}.{_resnet(match[4])}"
    if match := _SAMPLER.fullmatch(key):
        level = _ORIGINAL_LEVELS[match[1]].format(match[2])
        return f"{level}.{len(resnets[(match[1], match[2])])}.{match[3]}"
    return key

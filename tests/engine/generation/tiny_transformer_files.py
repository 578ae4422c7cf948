"""Tiny random Flux.1 and SD 3.5 pipelines, as a diffusers folder and as the files artists
have: an all-in-one `.safetensors` in the original key layout (Black Forest Labs' and
Stability's names, text encoders under `text_encoders.*`, the VAE in LDM names) and the
ComfyUI split layout (diffusion_models/, text_encoders/, vae/).

The original layouts are written from the folder's weights with diffusers' own key
conversions inverted (`sd3_to_original`, `vae_to_ldm`, and families/flux/keys.flux_from_diffusers);
tests check each inverse round-trips through diffusers' forward conversion.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

os.environ["HF_HUB_OFFLINE"] = "1"

from app.engine.generation.families.flux.keys import flux_from_diffusers
from app.engine.generation.files.architecture import Architecture
from app.testing.tiny.unet import (
    _text_config,
    _tokenizer,
    tiny_t5_encoder,
    tiny_t5_tokenizer,
)

CONFIG_NAMES = {Architecture.FLUX1: "flux1-dev", Architecture.SD3: "sd3.5-medium"}
FILE_NAMES = {Architecture.FLUX1: "flux1-dev", Architecture.SD3: "sd3.5_medium"}
CLIP_L_WIDTH, CLIP_G_WIDTH, T5_WIDTH = 32, 48, 96  # SD 3: L + G = 80 <= T5 (the context)


@dataclass(frozen=True)
class TinyLayouts:
    folder: Path  # the diffusers folder (the twin every other layout must equal)
    all_in_one: Path  # one file: transformer, text encoders and VAE in original keys
    split_root: Path  # a models folder: diffusion_models/, text_encoders/, vae/
    split_model: Path  # the diffusion model file in it
    configs: Path  # config folders named as the shipped ones (resources/model_configs)


def _vae() -> Any:
    from diffusers import AutoencoderKL

    return AutoencoderKL(
        latent_channels=16,
        block_out_channels=(8, 16),
        down_block_types=("DownEncoderBlock2D",) * 2,
        up_block_types=("UpDecoderBlock2D",) * 2,
        norm_num_groups=8,
        layers_per_block=1,
        sample_size=32,
        use_quant_conv=False,
        use_post_quant_conv=False,
        scaling_factor=0.3611,
        shift_factor=0.1159,
    )


def build_tiny_flux(seed: int = 0) -> Any:
    from diffusers import FlowMatchEulerDiscreteScheduler, FluxPipeline, FluxTransformer2DModel
    from transformers import CLIPTextModel

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        transformer = FluxTransformer2DModel(
            patch_size=1,
            in_channels=64,  # 16 latent channels in 2 x 2 patches
            num_layers=1,
            num_single_layers=1,
            attention_head_dim=16,
            num_attention_heads=2,
            joint_attention_dim=T5_WIDTH,
            pooled_projection_dim=CLIP_L_WIDTH,
            guidance_embeds=True,
            axes_dims_rope=(4, 6, 6),
        )
        return FluxPipeline(
            scheduler=FlowMatchEulerDiscreteScheduler(shift=3.0, use_dynamic_shifting=True),
            vae=_vae(),
            text_encoder=CLIPTextModel(_text_config(hidden_size=CLIP_L_WIDTH)).eval(),
            tokenizer=_tokenizer(),
            text_encoder_2=tiny_t5_encoder(d_model=T5_WIDTH, seed=seed),
            tokenizer_2=tiny_t5_tokenizer(),
            transformer=transformer,
        )


def build_tiny_sd3(seed: int = 0) -> Any:
    from diffusers import (
        FlowMatchEulerDiscreteScheduler,
        SD3Transformer2DModel,
        StableDiffusion3Pipeline,
    )
    from transformers import CLIPTextModelWithProjection

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        transformer = SD3Transformer2DModel(
            sample_size=8,
            patch_size=2,
            in_channels=16,
            out_channels=16,
            num_layers=2,
            attention_head_dim=8,
            num_attention_heads=2,
            joint_attention_dim=T5_WIDTH,
            caption_projection_dim=16,
            pooled_projection_dim=CLIP_L_WIDTH + CLIP_G_WIDTH,
            pos_embed_max_size=16,
            dual_attention_layers=(0,),  # MMDiT-X, as SD 3.5 medium
            qk_norm="rms_norm",
        )
        clip_l = CLIPTextModelWithProjection(
            _text_config(hidden_size=CLIP_L_WIDTH, projection_dim=CLIP_L_WIDTH)
        ).eval()
        # SD 3.x pools CLIP-L unprojected: diffusers loads the original files' CLIP-L
        # with an identity projection, so the twin folder has one too.
        with torch.no_grad():
            clip_l.text_projection.weight.copy_(torch.eye(CLIP_L_WIDTH))
        clip_g = CLIPTextModelWithProjection(
            _text_config(v2=True, hidden_size=CLIP_G_WIDTH, projection_dim=CLIP_G_WIDTH)
        ).eval()
        return StableDiffusion3Pipeline(
            scheduler=FlowMatchEulerDiscreteScheduler(shift=3.0),
            vae=_vae(),
            text_encoder=clip_l,
            tokenizer=_tokenizer(),
            text_encoder_2=clip_g,
            tokenizer_2=_tokenizer(),
            text_encoder_3=tiny_t5_encoder(d_model=T5_WIDTH, seed=seed + 1),
            tokenizer_3=tiny_t5_tokenizer(),
            transformer=transformer,
        )


def write_tiny_layouts(architecture: Architecture, root: Path) -> TinyLayouts:
    pipe = build_tiny_flux() if architecture is Architecture.FLUX1 else build_tiny_sd3()
    folder = root / "folder" / FILE_NAMES[architecture]
    pipe.save_pretrained(folder)
    configs = root / "configs"
    shutil.copytree(
        folder,
        configs / CONFIG_NAMES[architecture],
        ignore=shutil.ignore_patterns("*.safetensors"),
    )
    name = FILE_NAMES[architecture]
    transformer = _transformer_original(architecture, pipe.transformer.state_dict())
    vae = vae_to_ldm(pipe.vae.state_dict())
    encoders = _encoders(architecture, pipe)

    all_in_one = root / "checkpoints" / f"{name}.safetensors"
    everything = {"model.diffusion_model." + k: v for k, v in transformer.items()}
    vae_prefix = "vae." if architecture is Architecture.FLUX1 else "first_stage_model."
    everything.update({vae_prefix + k: v for k, v in vae.items()})
    for prefix, weights in encoders.values():
        everything.update({prefix + k: v for k, v in weights.items()})
    _save(everything, all_in_one)

    split_root = root / "models"
    split_model = split_root / "diffusion_models" / f"{name}.safetensors"
    _save(transformer, split_model)  # no prefix, as the released split files
    _save(vae, split_root / "vae" / f"{name}_ae.safetensors")
    for file_name, (_prefix, weights) in encoders.items():
        _save(weights, split_root / "text_encoders" / f"{file_name}.safetensors")
    return TinyLayouts(folder, all_in_one, split_root, split_model, configs)


def _save(weights: dict[str, torch.Tensor], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in weights.items()}, str(path))


def _transformer_original(
    architecture: Architecture, state: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    if architecture is Architecture.FLUX1:
        return flux_from_diffusers(state)
    return sd3_to_original(state)


def _encoders(architecture: Architecture, pipe: Any) -> dict[str, tuple[str, dict[str, Any]]]:
    """file name -> (prefix in an all-in-one file, weights in transformers' own layout)."""
    clip_l = _clip_keys(pipe.text_encoder.state_dict())
    t5 = pipe.text_encoder_2 if architecture is Architecture.FLUX1 else pipe.text_encoder_3
    # The released T5 files hold the embedding once, as `shared.weight`.
    t5_weights = {k: v for k, v in t5.state_dict().items() if k != "encoder.embed_tokens.weight"}
    encoders = {
        "clip_l": ("text_encoders.clip_l.transformer.", clip_l),
        "t5xxl_fp16": ("text_encoders.t5xxl.transformer.", t5_weights),
    }
    if architecture is Architecture.SD3:
        clip_g = _clip_keys(pipe.text_encoder_2.state_dict())
        encoders["clip_g"] = ("text_encoders.clip_g.transformer.", clip_g)
    return encoders


def _clip_keys(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """As the released files name them: `text_model.` ... (transformers 5 drops the
    prefix in CLIPTextModel's own state dict)."""
    return {
        k if k.startswith(("text_model.", "text_projection")) else "text_model." + k: v
        for k, v in state.items()
    }


# ---------------------------------------------------------------- inverse conversions


def sd3_to_original(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """diffusers' SD3Transformer2DModel keys -> Stability's MMDiT keys: the inverse of
    diffusers' `convert_sd3_transformer_checkpoint_to_diffusers`."""
    source = dict(state)
    out: dict[str, torch.Tensor] = {}

    def swap(t: torch.Tensor) -> torch.Tensor:
        first, second = t.chunk(2, dim=0)
        return torch.cat([second, first], dim=0)

    renames = {
        "pos_embed.pos_embed": "pos_embed",
        "pos_embed.proj.weight": "x_embedder.proj.weight",
        "pos_embed.proj.bias": "x_embedder.proj.bias",
        "context_embedder.weight": "context_embedder.weight",
        "context_embedder.bias": "context_embedder.bias",
        "proj_out.weight": "final_layer.linear.weight",
        "proj_out.bias": "final_layer.linear.bias",
    }
    for embedder, original in (
        ("timestep_embedder", "t_embedder"),
        ("text_embedder", "y_embedder"),
    ):
        for n, m in (("linear_1", "0"), ("linear_2", "2")):
            for kind in ("weight", "bias"):
                renames[f"time_text_embed.{embedder}.{n}.{kind}"] = f"{original}.mlp.{m}.{kind}"
    for new, old in renames.items():
        out[old] = source.pop(new)
    for kind in ("weight", "bias"):
        out[f"final_layer.adaLN_modulation.1.{kind}"] = swap(source.pop(f"norm_out.linear.{kind}"))
    layers = sorted({int(k.split(".")[1]) for k in source if k.startswith("transformer_blocks.")})
    for i in layers:
        new, old = f"transformer_blocks.{i}.", f"joint_blocks.{i}."
        last = i == layers[-1]
        block: dict[str, str] = {
            "attn.norm_q.weight": "x_block.attn.ln_q.weight",
            "attn.norm_k.weight": "x_block.attn.ln_k.weight",
            "attn.norm_added_q.weight": "context_block.attn.ln_q.weight",
            "attn.norm_added_k.weight": "context_block.attn.ln_k.weight",
            "attn2.norm_q.weight": "x_block.attn2.ln_q.weight",
            "attn2.norm_k.weight": "x_block.attn2.ln_k.weight",
        }
        for kind in ("weight", "bias"):
            block.update(
                {
                    f"attn.to_out.0.{kind}": f"x_block.attn.proj.{kind}",
                    f"attn.to_add_out.{kind}": f"context_block.attn.proj.{kind}",
                    f"attn2.to_out.0.{kind}": f"x_block.attn2.proj.{kind}",
                    f"norm1.linear.{kind}": f"x_block.adaLN_modulation.1.{kind}",
                    f"ff.net.0.proj.{kind}": f"x_block.mlp.fc1.{kind}",
                    f"ff.net.2.{kind}": f"x_block.mlp.fc2.{kind}",
                    f"ff_context.net.0.proj.{kind}": f"context_block.mlp.fc1.{kind}",
                    f"ff_context.net.2.{kind}": f"context_block.mlp.fc2.{kind}",
                }
            )
            context_norm = source.pop(f"{new}norm1_context.linear.{kind}")
            out[f"{old}context_block.adaLN_modulation.1.{kind}"] = (
                swap(context_norm) if last else context_norm
            )
            for attn, names, original in (
                ("attn", ("to_q", "to_k", "to_v"), "x_block.attn"),
                ("attn", ("add_q_proj", "add_k_proj", "add_v_proj"), "context_block.attn"),
                ("attn2", ("to_q", "to_k", "to_v"), "x_block.attn2"),
            ):
                keys = [f"{new}{attn}.{name}.{kind}" for name in names]
                if keys[0] in source:
                    qkv = torch.cat([source.pop(key) for key in keys], dim=0)
                    out[f"{old}{original}.qkv.{kind}"] = qkv
        for suffix, original in block.items():
            if new + suffix in source:
                out[old + original] = source.pop(new + suffix)
    if source:
        raise ValueError(f"keys not in the SD 3 layout: {sorted(source)[:5]}")
    return out


def vae_to_ldm(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """diffusers' AutoencoderKL keys -> the original LDM keys (Flux's ae.safetensors,
    first_stage_model.* of SD files): the inverse of diffusers' `convert_ldm_vae_checkpoint`."""
    ups = 1 + max(int(k.split(".")[2]) for k in state if k.startswith("decoder.up_blocks."))
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        parts = key.split(".")
        new = key
        if parts[1] == "down_blocks":
            block, rest = parts[2], ".".join(parts[3:])
            rest = rest.replace("resnets.", "block.").replace("downsamplers.0.", "downsample.")
            new = f"{parts[0]}.down.{block}.{rest}"
        elif parts[1] == "up_blocks":
            up, rest = ups - 1 - int(parts[2]), ".".join(parts[3:])
            rest = rest.replace("resnets.", "block.").replace("upsamplers.0.", "upsample.")
            new = f"{parts[0]}.up.{up}.{rest}"
        elif parts[1] == "mid_block" and parts[2] == "resnets":
            new = f"{parts[0]}.mid.block_{int(parts[3]) + 1}.{'.'.join(parts[4:])}"
        elif parts[1] == "mid_block" and parts[2] == "attentions":
            rest = ".".join(parts[4:])
            for diffusers_name, ldm_name in (
                ("group_norm", "norm"), ("to_q", "q"), ("to_k", "k"), ("to_v", "v"),
                ("to_out.0", "proj_out"),
            ):  # fmt: skip
                if rest.startswith(diffusers_name + "."):
                    rest = ldm_name + rest[len(diffusers_name) :]
            new = f"{parts[0]}.mid.attn_1.{rest}"
            if value.ndim == 2:  # LDM's attention projections are 1x1 convolutions
                value = value[:, :, None, None]
        elif parts[1] == "conv_norm_out":
            new = f"{parts[0]}.norm_out.{parts[2]}"
        out[new.replace("conv_shortcut", "nin_shortcut")] = value
    return out


def write_gguf(original: dict[str, torch.Tensor], path: Path, architecture: Architecture) -> Path:
    """A GGUF Q8_0 file of a transformer in its original key layout, as city96's
    ComfyUI-GGUF conversions are laid out: weight matrices whose rows are whole 32-value
    blocks in Q8_0, the rest (norms, biases, small or odd tensors) in F32."""
    import gguf
    import numpy as np

    # city96 names the Kontext and Chroma conversions "flux" too (their blocks are Flux's).
    writer = gguf.GGUFWriter(str(path), "sd3" if architecture is Architecture.SD3 else "flux")
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    for name, tensor in original.items():
        data = tensor.float().numpy()
        if data.ndim >= 2 and data.shape[-1] % 32 == 0:
            quantised = gguf.quants.quantize(data, gguf.GGMLQuantizationType.Q8_0)
            writer.add_tensor(name, quantised, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            writer.add_tensor(name, np.ascontiguousarray(data))
    path.parent.mkdir(parents=True, exist_ok=True)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


# ---------------------------------------------------------------- Chroma and Flux.1 Kontext

# The released file names (the Kontext rule reads the name: its keys are Flux.1 dev's).
SPLIT_FILE_NAMES = {"chroma": "chroma-unlocked-v50", "flux1-kontext": "flux1-kontext-dev"}
SPLIT_CONFIG_NAMES = {"chroma": "chroma", "flux1-kontext": "flux1-kontext-dev"}


def write_tiny_split(architecture: Architecture, root: Path) -> TinyLayouts:
    """Tiny Chroma or Flux.1 Kontext as a diffusers folder (the twin) and in ComfyUI's split
    layout: the transformer in its original keys in diffusion_models/ (lodestones' for
    Chroma, Black Forest Labs' for Kontext), the T5 (and Kontext's CLIP-L) in
    text_encoders/, Flux's VAE as LDM-keyed ae.safetensors in vae/. No all-in-one file
    (`all_in_one` is the split model)."""
    from app.engine.generation.families.chroma.keys import chroma_from_diffusers
    from app.testing.tiny.chroma import build_tiny_chroma
    from app.testing.tiny.kontext import build_tiny_kontext

    chroma = architecture is Architecture.CHROMA
    pipe = build_tiny_chroma() if chroma else build_tiny_kontext()
    folder = root / "folder" / SPLIT_FILE_NAMES[architecture.value]
    pipe.save_pretrained(folder)
    configs = root / "configs"
    shutil.copytree(
        folder,
        configs / SPLIT_CONFIG_NAMES[architecture.value],
        ignore=shutil.ignore_patterns("*.safetensors"),
    )
    state = pipe.transformer.state_dict()
    transformer = chroma_from_diffusers(state) if chroma else flux_from_diffusers(state)
    split_root = root / "models"
    split_model = (
        split_root / "diffusion_models" / f"{SPLIT_FILE_NAMES[architecture.value]}.safetensors"
    )
    _save(transformer, split_model)
    _save(vae_to_ldm(pipe.vae.state_dict()), split_root / "vae" / "ae.safetensors")
    t5 = pipe.text_encoder if chroma else pipe.text_encoder_2
    t5_weights = {k: v for k, v in t5.state_dict().items() if k != "encoder.embed_tokens.weight"}
    _save(t5_weights, split_root / "text_encoders" / "t5xxl_fp16.safetensors")
    if not chroma:
        clip = _clip_keys(pipe.text_encoder.state_dict())
        _save(clip, split_root / "text_encoders" / "clip_l.safetensors")
    return TinyLayouts(folder, split_model, split_root, split_model, configs)

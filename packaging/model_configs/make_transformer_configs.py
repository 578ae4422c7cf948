"""Write the offline configs of the transformer families (Flux.1, SD 3.5) to resources/.

For each released model (flux1-dev, flux1-schnell, sd3.5-medium, sd3.5-large,
sd3.5-large-turbo, flux1-kontext-dev, chroma, ltx-video-0.9.0, ltx-video-0.9.1,
ltx-video-0.9.5, ltx-video-0.9.7-13b) it writes
model_index.json, each component's config and the tokenizer settings, so Easel assembles
a pipeline from an artist's single or split files without a hub. Sources, all offline:
- component configs: the constructor defaults of the installed diffusers/transformers
  classes, overridden by each release's published hyperparameters (the table below: the
  values of the reference repositories' config files);
- the CLIP vocabulary is the one `make_model_configs.py` already ships (clip-vocabulary/);
- the T5 v1.1 vocabulary (Google's SentencePiece model of T5, Apache-2.0, 32,100 tokens) as
  a `tokenizers` JSON, taken from the stable-diffusion.cpp sources (MIT) that the PyPI
  sdist of `stable-diffusion-cpp-python` vendors (`src/tokenizers/vocab/clip_t5.hpp`, a C
  array of the file's bytes); stored once in t5-vocabulary/.

Run: `pip download stable-diffusion-cpp-python==0.4.7 --no-deps --no-binary :all: -d /tmp/sd`
then `.venv/bin/python packaging/model_configs/make_transformer_configs.py --sdcpp
/tmp/sd/stable_diffusion_cpp_python-0.4.7.tar.gz`; it checks the vocabulary against known
T5 token ids ("Hello world" -> 8774, 296, </s>). `--only flux1-kontext-dev chroma` (without
`--sdcpp`) writes those alone, keeping the T5 vocabulary already in --out.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tarfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from make_model_configs import (
    CLIP_L,
    OPEN_CLIP_BIG_G,
    OUT,
    ROOT,
    write_diffusers_config,
    write_json,
    write_text_config,
    write_tokenizer_settings,
)

T5_VOCABULARY = "t5-vocabulary"
T5_MEMBER = "src/tokenizers/vocab/clip_t5.hpp"
T5_ARRAY = "t5_tokenizer_json_str"
T5_KNOWN_IDS = [8774, 296, 1]  # "Hello world" in the released T5 vocabulary
T5_SIZE = 32100

T5_XXL = {  # google/t5-v1_1-xxl, the encoder half (Flux and SD 3.x use only the encoder)
    "vocab_size": 32128,
    "d_model": 4096,
    "d_kv": 64,
    "d_ff": 10240,
    "num_layers": 24,
    "num_heads": 64,
    "relative_attention_num_buckets": 32,
    "feed_forward_proj": "gated-gelu",
    "layer_norm_epsilon": 1e-6,
    # One embedding table: the released files hold only `shared.weight` (4,762,310,656
    # parameters), and transformers 5 ties `encoder.embed_tokens` to it only when this is
    # set (the reference configs say false, written when the tie was unconditional).
    "tie_word_embeddings": True,
}
VAE_16 = {  # the 16-channel autoencoder of Flux and SD 3.x (same layout, other scaling)
    "block_out_channels": [128, 256, 512, 512],
    "down_block_types": ["DownEncoderBlock2D"] * 4,
    "up_block_types": ["UpDecoderBlock2D"] * 4,
    "latent_channels": 16,
    "layers_per_block": 2,
    "sample_size": 1024,
    "force_upcast": True,
    "use_quant_conv": False,
    "use_post_quant_conv": False,
}
FLUX_TRANSFORMER = {
    "attention_head_dim": 128,
    "in_channels": 64,
    "joint_attention_dim": 4096,
    "num_attention_heads": 24,
    "num_layers": 19,
    "num_single_layers": 38,
    "patch_size": 1,
    "pooled_projection_dim": 768,
}
FLUX_SCHEDULER = {
    "base_image_seq_len": 256,
    "base_shift": 0.5,
    "max_image_seq_len": 4096,
    "max_shift": 1.15,
    "num_train_timesteps": 1000,
}
SD35_LARGE = {
    "attention_head_dim": 64,
    "caption_projection_dim": 2432,
    "in_channels": 16,
    "joint_attention_dim": 4096,
    "num_attention_heads": 38,
    "num_layers": 38,
    "out_channels": 16,
    "patch_size": 2,
    "pooled_projection_dim": 2048,
    "pos_embed_max_size": 192,
    "qk_norm": "rms_norm",
    "sample_size": 128,
}
SD35_MEDIUM = {  # MMDiT-X: a second self-attention in its first 13 blocks
    **SD35_LARGE,
    "caption_projection_dim": 1536,
    "num_attention_heads": 24,
    "num_layers": 24,
    "pos_embed_max_size": 384,
    "dual_attention_layers": list(range(13)),
}

_FLUX_TEXT = {
    "text_encoder": ("CLIPTextModel", CLIP_L, "<|endoftext|>"),
}
_SD3_TEXT = {
    "text_encoder": ("CLIPTextModelWithProjection", CLIP_L, "<|endoftext|>"),
    "text_encoder_2": ("CLIPTextModelWithProjection", OPEN_CLIP_BIG_G, "!"),
}


def _flux(guidance: bool, scheduler: dict[str, Any]) -> dict[str, Any]:
    return {
        "pipeline": "FluxPipeline",
        "transformer": (
            "FluxTransformer2DModel",
            {**FLUX_TRANSFORMER, "guidance_embeds": guidance},
        ),
        "scheduler": {**FLUX_SCHEDULER, **scheduler},
        "vae": {**VAE_16, "scaling_factor": 0.3611, "shift_factor": 0.1159},
        "clips": _FLUX_TEXT,
        "t5": ("text_encoder_2", "tokenizer_2", 512, "gelu_pytorch_tanh"),
    }


def _flux_kontext() -> dict[str, Any]:
    """FLUX.1-Kontext-dev: Flux.1 dev's transformer, VAE, text encoders and scheduler."""
    return {**_flux(True, {"shift": 3.0, "use_dynamic_shifting": True}),
            "pipeline": "FluxKontextPipeline"}  # fmt: skip


CHROMA_TRANSFORMER = {  # lodestones/Chroma1-HD: Flux.1 schnell's blocks, the approximator
    **{k: v for k, v in FLUX_TRANSFORMER.items() if k != "pooled_projection_dim"},
    "approximator_num_channels": 64,
    "approximator_hidden_dim": 5120,
    "approximator_layers": 5,
}


def _chroma() -> dict[str, Any]:
    """Chroma (Chroma1-HD, the chroma-unlocked-v* files): T5 alone, Flux.1's VAE and dev's
    dynamic-shift schedule."""
    return {
        "pipeline": "ChromaPipeline",
        "transformer": ("ChromaTransformer2DModel", CHROMA_TRANSFORMER),
        "scheduler": {**FLUX_SCHEDULER, "shift": 3.0, "use_dynamic_shifting": True},
        "vae": {**VAE_16, "scaling_factor": 0.3611, "shift_factor": 0.1159},
        "clips": {},
        "t5": ("text_encoder", "tokenizer", 512, "gelu_pytorch_tanh"),
    }


def _sd35(transformer: dict[str, Any]) -> dict[str, Any]:
    return {
        "pipeline": "StableDiffusion3Pipeline",
        "transformer": ("SD3Transformer2DModel", transformer),
        "scheduler": {"num_train_timesteps": 1000, "shift": 3.0},
        "vae": {**VAE_16, "scaling_factor": 1.5305, "shift_factor": 0.0609},
        "clips": _SD3_TEXT,
        "t5": ("text_encoder_3", "tokenizer_3", 256, "gelu_new"),
    }


# LTX-Video 2B (Lightricks/LTX-Video): `LTXVideoTransformer3DModel`'s defaults are the 2B's
# (28 blocks of 32 heads x 64, T5's 4096 in); the VAEs and the scheduler as diffusers'
# scripts/convert_ltx_to_diffusers.py writes them (`get_vae_config`, the scheduler of
# `--save_pipeline`); 0.9.5 on as `LTXConditionPipeline` folders below.
LTX_SCHEDULER = {
    "num_train_timesteps": 1000, "shift": 1.0, "use_dynamic_shifting": True,
    "base_shift": 0.95, "max_shift": 2.05, "base_image_seq_len": 1024,
    "max_image_seq_len": 4096, "shift_terminal": 0.1,
}  # fmt: skip
LTX_VAE_090 = {
    "latent_channels": 128,
    "block_out_channels": (128, 256, 512, 512),
    "decoder_block_out_channels": (128, 256, 512, 512),
    "layers_per_block": (4, 3, 3, 3, 4),
    "decoder_layers_per_block": (4, 3, 3, 3, 4),
    "spatio_temporal_scaling": (True, True, True, False),
    "decoder_spatio_temporal_scaling": (True, True, True, False),
    "decoder_inject_noise": (False, False, False, False, False),
    "upsample_residual": (False, False, False, False),
    "upsample_factor": (1, 1, 1, 1),
    "timestep_conditioning": False,
    "patch_size": 4,
    "patch_size_t": 1,
    "scaling_factor": 1.0,
    "encoder_causal": True,
    "decoder_causal": False,
}
LTX_VAE_091 = {  # 0.9.0's encoder; a wider decoder conditioned on the decode timestep
    **LTX_VAE_090,
    "decoder_block_out_channels": (256, 512, 1024),
    "decoder_layers_per_block": (5, 6, 7, 8),
    "decoder_spatio_temporal_scaling": (True, True, True),
    "decoder_inject_noise": (True, True, True, False),
    "upsample_residual": (True, True, True),
    "upsample_factor": (2, 2, 2),
    "timestep_conditioning": True,
}


# LTX-Video 0.9.5 on, from the same script at diffusers commit
# 2843b3d37ad7c83b44cdcd098b9c064e1569457d (2026-02-13): `get_vae_config("0.9.5")`, which
# 0.9.7 repeats (and 0.9.8's files carry: its encoder ends on 2048 channels too);
# `get_transformer_config("0.9.7")` for the 13B (48 blocks of 32 heads x 128, cross
# attention 4096; the 2B's is the class's defaults, as above); the scheduler of
# `--save_pipeline` for "0.9.5" and "0.9.7": `FlowMatchEulerDiscreteScheduler(
# use_dynamic_shifting=False)`, as `LTXConditionPipeline` passes its own timesteps.
LTX_VAE_095 = {
    **LTX_VAE_090,
    "block_out_channels": (128, 256, 512, 1024, 2048),
    "down_block_types": ("LTXVideo095DownBlock3D",) * 4,
    "decoder_block_out_channels": (256, 512, 1024),
    "layers_per_block": (4, 6, 6, 2, 2),
    "decoder_layers_per_block": (5, 5, 5, 5),
    "spatio_temporal_scaling": (True, True, True, True),
    "decoder_spatio_temporal_scaling": (True, True, True),
    "decoder_inject_noise": (False, False, False, False),
    "downsample_type": ("spatial", "temporal", "spatiotemporal", "spatiotemporal"),
    "upsample_residual": (True, True, True),
    "upsample_factor": (2, 2, 2),
    "timestep_conditioning": True,
    "spatial_compression_ratio": 32,
    "temporal_compression_ratio": 8,
}
LTX_13B = {
    "num_attention_heads": 32, "attention_head_dim": 128, "cross_attention_dim": 4096,
    "num_layers": 48,
}  # fmt: skip
LTX_CONDITION_SCHEDULER = {"use_dynamic_shifting": False}


def _ltx(
    vae: dict[str, Any],
    transformer: dict[str, Any] | None = None,
    pipeline: str = "LTXPipeline",
    scheduler: dict[str, Any] = LTX_SCHEDULER,
) -> dict[str, Any]:
    """LTX-Video: T5 alone (128 tokens), its own VAE and transformer (2B: the defaults),
    the release's scheduler and pipeline."""
    return {
        "pipeline": pipeline,
        "transformer": ("LTXVideoTransformer3DModel", transformer or {}),
        "scheduler": scheduler,
        "vae_class": "AutoencoderKLLTXVideo",
        "vae": vae,
        "clips": {},
        "t5": ("text_encoder", "tokenizer", 128, "gelu_new"),  # google/t5-v1_1-xxl's
    }


RELEASES: dict[str, dict[str, Any]] = {
    "flux1-dev": _flux(True, {"shift": 3.0, "use_dynamic_shifting": True}),
    "flux1-schnell": _flux(False, {"shift": 1.0, "use_dynamic_shifting": False}),
    "sd3.5-medium": _sd35(SD35_MEDIUM),
    "sd3.5-large": _sd35(SD35_LARGE),
    # The same network as large, distilled for 4 steps without guidance; its scheduler
    # config is large's (the step count and guidance are the sampling defaults).
    "sd3.5-large-turbo": _sd35(SD35_LARGE),
    "flux1-kontext-dev": _flux_kontext(),
    "chroma": _chroma(),
    "ltx-video-0.9.0": _ltx(LTX_VAE_090),
    "ltx-video-0.9.1": _ltx(LTX_VAE_091),
    "ltx-video-0.9.5": _ltx(
        LTX_VAE_095, pipeline="LTXConditionPipeline", scheduler=LTX_CONDITION_SCHEDULER
    ),
    "ltx-video-0.9.7-13b": _ltx(
        LTX_VAE_095, LTX_13B, pipeline="LTXConditionPipeline", scheduler=LTX_CONDITION_SCHEDULER
    ),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--sdcpp",
        type=Path,
        help="the sdist (.tar.gz); without it, the T5 vocabulary already in --out is kept",
    )
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--only", nargs="*", help="these releases alone (default: all)")
    args = parser.parse_args()
    if args.sdcpp:
        write_t5_vocabulary(args.out / T5_VOCABULARY, read_t5_tokenizer_json(args.sdcpp))
    for name, spec in RELEASES.items():
        if args.only and name not in args.only:
            continue
        folder = args.out / name
        shutil.rmtree(folder, ignore_errors=True)
        write_release(folder, spec)
        check_t5(folder / spec["t5"][1])
        print(f"{name}: {folder}")


def read_t5_tokenizer_json(sdist: Path) -> bytes:
    with tarfile.open(sdist) as archive:
        member = next(m for m in archive.getmembers() if m.name.endswith(T5_MEMBER))
        handle = archive.extractfile(member)
        assert handle is not None
        source = handle.read().decode("utf-8")
    start = source.index(f"{T5_ARRAY}[] = {{")
    body = source[start : source.index("};", start)].split("{", 1)[1]
    return bytes(int(byte, 16) for byte in re.findall(r"0x[0-9a-fA-F]+", body))


def write_t5_vocabulary(folder: Path, data: bytes) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tokenizer.json").write_bytes(data)


def write_release(folder: Path, spec: dict[str, Any]) -> None:
    import diffusers

    transformer_class, transformer = spec["transformer"]
    index: dict[str, Any] = {
        "_class_name": spec["pipeline"],
        "_diffusers_version": diffusers.__version__,
        "scheduler": ["diffusers", "FlowMatchEulerDiscreteScheduler"],
        "transformer": ["diffusers", transformer_class],
        "vae": ["diffusers", spec.get("vae_class", "AutoencoderKL")],
    }
    write_diffusers_config(
        folder / "scheduler" / "scheduler_config.json",
        "FlowMatchEulerDiscreteScheduler",
        spec["scheduler"],
    )
    write_diffusers_config(folder / "transformer" / "config.json", transformer_class, transformer)
    write_diffusers_config(folder / "vae" / "config.json", index["vae"][1], spec["vae"])
    for component, (model_class, text, pad) in spec["clips"].items():
        tokenizer = component.replace("text_encoder", "tokenizer")
        index[component] = ["transformers", model_class]
        index[tokenizer] = ["transformers", "CLIPTokenizer"]
        write_text_config(folder / component, model_class, text)
        write_tokenizer_settings(folder / tokenizer, pad)
    encoder, tokenizer, max_length, activation = spec["t5"]
    index[encoder] = ["transformers", "T5EncoderModel"]
    index[tokenizer] = ["transformers", "T5TokenizerFast"]
    write_t5_config(folder / encoder, activation)
    write_t5_tokenizer_settings(folder / tokenizer, max_length)
    write_json(folder / "model_index.json", index)


def write_t5_config(folder: Path, activation: str) -> None:
    from transformers import T5Config

    config = T5Config(**T5_XXL, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
    config.dense_act_fn = activation  # Flux's file says gelu_pytorch_tanh, SD 3.x gelu_new
    config.architectures = ["T5EncoderModel"]
    folder.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(folder)


def write_t5_tokenizer_settings(folder: Path, max_length: int) -> None:
    specials = {"eos_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>"}
    write_json(folder / "special_tokens_map.json", specials)
    write_json(
        folder / "tokenizer_config.json",
        {
            **specials,
            "tokenizer_class": "T5Tokenizer",
            "model_max_length": max_length,
            "extra_ids": 100,
            "clean_up_tokenization_spaces": True,
        },
    )


def check_t5(folder: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from app.engine.generation.load.pipelines import shipped_t5_tokenizer

    tokenizer = shipped_t5_tokenizer(folder)
    ids = tokenizer("Hello world").input_ids
    if ids != T5_KNOWN_IDS or len(tokenizer) != T5_SIZE:
        raise SystemExit(f"{folder}: 'Hello world' -> {ids} ({len(tokenizer)} tokens)")


if __name__ == "__main__":
    sys.exit(main())

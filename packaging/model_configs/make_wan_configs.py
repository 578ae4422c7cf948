"""Write the offline configs of the Wan releases to resources/model_configs/wan*.

What Easel needs to assemble a Wan pipeline from ComfyUI's split files or city96's GGUFs
without a hub: each release's model_index.json (with Wan 2.2's `boundary_ratio` and
`expand_timesteps`), the transformer(s), VAE, UMT5 text encoder and UniPC scheduler
configs (and, for Wan 2.1 I2V, the CLIP ViT-H image encoder's and its image processor's).

Sources, all offline:
- the transformer hyperparameters, the Wan 2.2 VAE's and the scheduler's (UniPC, flow
  prediction, flow_shift 3.0, or 5.0 for TI2V) are those of diffusers' own conversion script
  `scripts/convert_wan_to_diffusers.py` (`get_transformer_config`, `vae22_diffusers_config`,
  its `__main__`), which made the Wan-AI *-Diffusers repositories; the Wan 2.1 VAE is
  `AutoencoderKLWan()`'s defaults, as that script builds it;
- every other value: the installed classes' constructor defaults (make_model_configs.py's
  `write_diffusers_config`);
- UMT5-XXL: google/umt5-xxl's published hyperparameters (below).

No tokenizer folder is written: UMT5's vocabulary (256,000 SentencePiece pieces) comes with
the text encoder file or beside it (app/engine/generation/families/wan/umt5.py).

Run: `.venv/bin/python packaging/model_configs/make_wan_configs.py`.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from make_model_configs import OUT, write_diffusers_config, write_json

_WAN_BLOCKS = {  # what every Wan transformer of convert_wan_to_diffusers.py shares
    "added_kv_proj_dim": None,
    "attention_head_dim": 128,
    "cross_attn_norm": True,
    "eps": 1e-06,
    "freq_dim": 256,
    "patch_size": [1, 2, 2],
    "qk_norm": "rms_norm_across_heads",
    "text_dim": 4096,
}
WAN21_1_3B = {**_WAN_BLOCKS, "ffn_dim": 8960, "in_channels": 16, "num_attention_heads": 12,
              "num_layers": 30, "out_channels": 16}  # fmt: skip
WAN_14B = {**_WAN_BLOCKS, "ffn_dim": 13824, "in_channels": 16, "num_attention_heads": 40,
           "num_layers": 40, "out_channels": 16}  # fmt: skip
# Wan 2.1 I2V: the image's latents and mask beside the noise (16 + 20), CLIP's states.
WAN21_I2V_14B = {**WAN_14B, "in_channels": 36, "image_dim": 1280, "added_kv_proj_dim": 5120}
WAN22_I2V_A14B = {**WAN_14B, "in_channels": 36}  # each expert; no CLIP
WAN22_TI2V_5B = {**_WAN_BLOCKS, "ffn_dim": 14336, "in_channels": 48, "num_attention_heads": 24,
                 "num_layers": 30, "out_channels": 48}  # fmt: skip

WAN21_VAE: dict[str, Any] = {}  # AutoencoderKLWan's defaults are the Wan 2.1 VAE
WAN22_VAE = {
    "base_dim": 160, "z_dim": 48, "is_residual": True, "in_channels": 12, "out_channels": 12,
    "decoder_base_dim": 256, "scale_factor_temporal": 4, "scale_factor_spatial": 16,
    "patch_size": 2,  # (the script's clip_output: not a parameter in diffusers 0.42)
    "latents_mean": [
        -0.2289, -0.0052, -0.1323, -0.2339, -0.2799, 0.0174, 0.1838, 0.1557, -0.1382, 0.0542,
        0.2813, 0.0891, 0.1570, -0.0098, 0.0375, -0.1825, -0.2246, -0.1207, -0.0698, 0.5109,
        0.2665, -0.2108, -0.2158, 0.2502, -0.2055, -0.0322, 0.1109, 0.1567, -0.0729, 0.0899,
        -0.2799, -0.1230, -0.0313, -0.1649, 0.0117, 0.0723, -0.2839, -0.2083, -0.0520, 0.3748,
        0.0152, 0.1957, 0.1433, -0.2944, 0.3573, -0.0548, -0.1681, -0.0667,
    ],
    "latents_std": [
        0.4765, 1.0364, 0.4514, 1.1677, 0.5313, 0.4990, 0.4818, 0.5013, 0.8158, 1.0344,
        0.5894, 1.0901, 0.6885, 0.6165, 0.8454, 0.4978, 0.5759, 0.3523, 0.7135, 0.6804,
        0.5833, 1.4146, 0.8986, 0.5659, 0.7069, 0.5338, 0.4889, 0.4917, 0.4069, 0.4999,
        0.6866, 0.4093, 0.5709, 0.6065, 0.6415, 0.4944, 0.5726, 1.2042, 0.5458, 1.6887,
        0.3971, 1.0600, 0.3943, 0.5537, 0.5444, 0.4089, 0.7468, 0.7744,
    ],
}  # fmt: skip

UMT5_XXL = {  # google/umt5-xxl (Wan keeps its encoder)
    "vocab_size": 256384,
    "d_model": 4096,
    "d_kv": 64,
    "d_ff": 10240,
    "num_layers": 24,
    "num_decoder_layers": 24,
    "num_heads": 64,
    "relative_attention_num_buckets": 32,
    "relative_attention_max_distance": 128,
    "feed_forward_proj": "gated-gelu",
    "layer_norm_epsilon": 1e-6,
    "scalable_attention": True,
    # One embedding table: the files hold `shared.weight` alone, which transformers 5 ties to
    # `encoder.embed_tokens` only when this is set (as make_transformer_configs.py's T5-XXL).
    "tie_word_embeddings": True,
}
CLIP_VIT_H = {  # laion/CLIP-ViT-H-14-laion2B-s32B-b79K's vision tower (Wan 2.1 I2V)
    "hidden_size": 1280,
    "intermediate_size": 5120,
    "num_attention_heads": 16,
    "num_hidden_layers": 32,
    "patch_size": 14,
    "image_size": 224,
    "projection_dim": 1024,
    "hidden_act": "gelu",
    "layer_norm_eps": 1e-5,
}


def _release(pipeline: str, transformer: dict[str, Any], **pipe: Any) -> dict[str, Any]:
    return {"pipeline": pipeline, "transformer": transformer, "vae": WAN21_VAE,
            "flow_shift": 3.0, "experts": False, "clip": False, "pipe": pipe}  # fmt: skip


RELEASES: dict[str, dict[str, Any]] = {
    "wan2.1-t2v-1.3b": _release("WanPipeline", WAN21_1_3B),
    "wan2.1-t2v-14b": _release("WanPipeline", WAN_14B),
    "wan2.1-i2v-14b-480p": {**_release("WanImageToVideoPipeline", WAN21_I2V_14B), "clip": True},
    "wan2.1-i2v-14b-720p": {**_release("WanImageToVideoPipeline", WAN21_I2V_14B), "clip": True},
    "wan2.2-ti2v-5b": {
        **_release("WanPipeline", WAN22_TI2V_5B, expand_timesteps=True),
        "vae": WAN22_VAE,
        "flow_shift": 5.0,
    },
    "wan2.2-t2v-a14b": {
        **_release("WanPipeline", WAN_14B, boundary_ratio=0.875),
        "experts": True,
    },
    "wan2.2-i2v-a14b": {
        **_release("WanImageToVideoPipeline", WAN22_I2V_A14B, boundary_ratio=0.9),
        "experts": True,
    },
}


def write_release(folder: Path, spec: dict[str, Any]) -> None:
    import diffusers

    index: dict[str, Any] = {
        "_class_name": spec["pipeline"],
        "_diffusers_version": diffusers.__version__,
        "scheduler": ["diffusers", "UniPCMultistepScheduler"],
        "text_encoder": ["transformers", "UMT5EncoderModel"],
        "tokenizer": ["transformers", "T5TokenizerFast"],
        "transformer": ["diffusers", "WanTransformer3DModel"],
        "transformer_2": [None, None],
        "vae": ["diffusers", "AutoencoderKLWan"],
        **spec["pipe"],
    }
    transformers = ("transformer", "transformer_2") if spec["experts"] else ("transformer",)
    for name in transformers:
        index[name] = ["diffusers", "WanTransformer3DModel"]
        write_diffusers_config(
            folder / name / "config.json", "WanTransformer3DModel", spec["transformer"]
        )
    if spec["pipeline"] == "WanImageToVideoPipeline":
        index["image_encoder"] = index["image_processor"] = [None, None]
    if spec["clip"]:
        index["image_encoder"] = ["transformers", "CLIPVisionModelWithProjection"]
        index["image_processor"] = ["transformers", "CLIPImageProcessor"]
        write_image_encoder(folder)
    write_diffusers_config(folder / "vae" / "config.json", "AutoencoderKLWan", spec["vae"])
    write_diffusers_config(
        folder / "scheduler" / "scheduler_config.json",
        "UniPCMultistepScheduler",
        {"prediction_type": "flow_prediction", "use_flow_sigmas": True,
         "num_train_timesteps": 1000, "flow_shift": spec["flow_shift"]},
    )  # fmt: skip
    write_umt5_config(folder / "text_encoder")
    write_json(folder / "model_index.json", index)


def write_umt5_config(folder: Path) -> None:
    from transformers import UMT5Config

    config = UMT5Config(**UMT5_XXL, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
    config.architectures = ["UMT5EncoderModel"]
    folder.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(folder)


def write_image_encoder(folder: Path) -> None:
    from transformers import CLIPImageProcessor, CLIPVisionConfig

    config = CLIPVisionConfig(**CLIP_VIT_H)
    config.architectures = ["CLIPVisionModelWithProjection"]
    (folder / "image_encoder").mkdir(parents=True, exist_ok=True)
    config.save_pretrained(folder / "image_encoder")
    CLIPImageProcessor().save_pretrained(folder / "image_processor")  # CLIP's 224, its mean/std


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    for name, spec in RELEASES.items():
        folder = args.out / name
        shutil.rmtree(folder, ignore_errors=True)
        write_release(folder, spec)
        print(f"{name}: {folder}")


if __name__ == "__main__":
    sys.exit(main())

"""A tiny Wan 2.2 I2V A14B written as the files artists have: its two experts (Wan 2.1 I2V's
36 input channels, no CLIP image embedding) as two diffusion model files named as ComfyUI's
(`wan2.2_i2v_high_noise_14B_fp16.safetensors`, `..._low_...`) and city96's GGUF Q8_0
(`Wan2.2-I2V-A14B-HighNoise-Q8_0.gguf`, `...-LowNoise-...`), UMT5 (carrying its tokenizer)
and the Wan 2.1 VAE beside them in the split layout of tiny_wan_files, and no
`clip_vision/` (the experts read none); the diffusers folder of the same weights
(`transformer` and `transformer_2`: the reference) and the config folder the files load
with: Easel's shipped `wan2.2-i2v-a14b` (its model index: boundary 0.9, no image encoder;
its UniPC) but for the tiny networks' configs.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from app.engine.generation.files.expert_files import I2V_PAIR_CONFIG, TRANSFORMER_2
from tests.engine.generation.tiny_umt5 import reference_tokenizer, spiece_tensor, train_tiny_spiece
from tests.engine.generation.tiny_wan_files import (
    _save,
    shipped_configs,
    tiny_wan_released_vae,
    wan_vae_to_original,
    write_wan_gguf,
)
from tests.engine.generation.tiny_wan_i2v_files import wan_i2v_transformer_to_original

HIGH = "wan2.2_i2v_high_noise_14B_fp16.safetensors"
LOW = "wan2.2_i2v_low_noise_14B_fp16.safetensors"
GGUF_HIGH = "Wan2.2-I2V-A14B-HighNoise-Q8_0.gguf"
GGUF_LOW = "Wan2.2-I2V-A14B-LowNoise-Q8_0.gguf"
LAYOUTS = {"split": (HIGH, LOW), "gguf-q8_0": (GGUF_HIGH, GGUF_LOW)}


@dataclass(frozen=True)
class I2vExpertFiles:
    folder: Path  # the diffusers folder with transformer and transformer_2 (the reference)
    models: Path  # the split layout: diffusion_models/, text_encoders/, vae/
    configs: Path  # the config root: <configs>/wan2.2-i2v-a14b

    def expert(self, name: str) -> Path:
        return self.models / "diffusion_models" / name


def write_tiny_i2v_expert_files(root: Path) -> I2vExpertFiles:
    from diffusers import UniPCMultistepScheduler

    from app.testing.tiny.wan import build_tiny_wan_i2v, tiny_umt5_encoder

    shipped = shipped_configs() / I2V_PAIR_CONFIG
    pipe = build_tiny_wan_i2v(experts=True)
    spiece = train_tiny_spiece()
    tokenizer = reference_tokenizer(spiece, root / "google-umt5-xxl")
    pipe.register_modules(
        vae=tiny_wan_released_vae(),
        tokenizer=tokenizer,
        text_encoder=tiny_umt5_encoder(seed=1, vocab_size=len(tokenizer)),
        scheduler=UniPCMultistepScheduler.from_pretrained(shipped / "scheduler"),
    )
    index = (shipped / "model_index.json").read_text(encoding="utf-8")
    pipe.register_to_config(boundary_ratio=float(_boundary_ratio(index)))
    folder = root / "folder" / "i2v-a14b"
    pipe.save_pretrained(folder)
    configs = root / "configs"
    shutil.copytree(shipped, configs / I2V_PAIR_CONFIG)
    for component in ("transformer", TRANSFORMER_2, "vae", "text_encoder"):
        config = f"{component}/config.json"
        shutil.copy(folder / config, configs / I2V_PAIR_CONFIG / config)
    models = root / "models"
    files = I2vExpertFiles(folder, models, configs)
    high = wan_i2v_transformer_to_original(pipe.transformer.state_dict())
    low = wan_i2v_transformer_to_original(pipe.transformer_2.state_dict())
    _save(high, files.expert(HIGH))
    _save(low, files.expert(LOW))
    write_wan_gguf(high, files.expert(GGUF_HIGH))
    write_wan_gguf(low, files.expert(GGUF_LOW))
    encoder = pipe.text_encoder.state_dict()  # the embedding once, as `shared.weight`
    umt5 = {k: v for k, v in encoder.items() if k != "encoder.embed_tokens.weight"}
    umt5["spiece_model"] = spiece_tensor(spiece)
    _save(umt5, models / "text_encoders" / "umt5_xxl_fp16.safetensors")
    _save(wan_vae_to_original(pipe.vae.state_dict()), models / "vae" / "wan_2.1_vae.safetensors")
    return files


def _boundary_ratio(model_index: str) -> float:
    import json

    return float(json.loads(model_index)["boundary_ratio"])


def stock_from_i2v_expert_files(
    files: I2vExpertFiles, layout: str = "split", dtype: str = "float32"
) -> Any:
    """Stock `WanImageToVideoPipeline` of the folder with diffusers' own single-file loads of
    the two expert files of `layout` (a GGUF kept quantised, as diffusers' GGUF loads it)
    and of the VAE file, in `dtype` (float16: UMT5 in float32, as a float16-only GPU's
    users load it)."""
    import diffusers

    half = getattr(torch, dtype)
    config = str(files.configs / I2V_PAIR_CONFIG)
    options: dict[str, Any] = {"config": config, "local_files_only": True, "torch_dtype": half}
    transformers = {}
    for name, file in zip(("transformer", TRANSFORMER_2), LAYOUTS[layout], strict=True):
        source: Any = str(files.expert(file))
        extra: dict[str, Any] = {}
        if file.endswith(".gguf"):
            from app.engine.generation.load.assemble import gguf_weights

            source = gguf_weights(files.expert(file))
            extra["quantization_config"] = diffusers.GGUFQuantizationConfig(compute_dtype=half)
        transformers[name] = diffusers.WanTransformer3DModel.from_single_file(
            source, subfolder=name, **options, **extra
        )
    vae = diffusers.AutoencoderKLWan.from_single_file(
        str(files.models / "vae" / "wan_2.1_vae.safetensors"), subfolder="vae", **options
    )
    wide = {"default": half, "text_encoder": torch.float32} if dtype == "float16" else half
    pipe = diffusers.WanImageToVideoPipeline.from_pretrained(
        files.folder, local_files_only=True, vae=vae, dtype=wide, **transformers
    )
    pipe.set_progress_bar_config(disable=True)
    return pipe

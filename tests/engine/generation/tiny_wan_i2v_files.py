"""A tiny Wan 2.1 I2V written as ComfyUI's files: `diffusion_models/
wan2.1_i2v_480p_14B_fp16.safetensors` in Wan-AI's keys (its image embedding `img_emb.` and
the cross-attention's image keys `k_img`/`v_img`/`norm_k_img` too), the UMT5 file carrying
its tokenizer, `vae/wan_2.1_vae.safetensors` in Wan-AI's keys, and
`clip_vision/clip_vision_h.safetensors` in transformers' keys, as ComfyUI stores it (a
tiny `CLIPVisionModelWithProjection`); beside the diffusers folder of the same weights with
the released UniPC (the reference) and the config folder the files load with: Easel's
shipped `wan2.1-i2v-14b-480p` but for the tiny networks' configs and the tiny image
processor's sizes.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from app.testing.tiny.wan import (
    I2V_IMAGE_SIZE,
    I2V_IMAGE_WIDTH,
    RELEASED_SCHEDULER,
    build_tiny_wan_i2v,
    tiny_umt5_encoder,
)
from tests.engine.generation.tiny_umt5 import reference_tokenizer, spiece_tensor, train_tiny_spiece
from tests.engine.generation.tiny_wan_files import (
    _save,
    shipped_configs,
    tiny_wan_released_vae,
    wan_transformer_to_original,
    wan_vae_to_original,
)

CONFIG_NAME = "wan2.1-i2v-14b-480p"
FILE_NAME = "wan2.1_i2v_480p_14B_fp16"
CLIP_VISION_NAME = "clip_vision_h.safetensors"
StateDict = dict[str, torch.Tensor]


@dataclass(frozen=True)
class TinyI2vFiles:
    folder: Path
    model: Path
    models: Path
    configs: Path


def tiny_clip_vision_with_projection(seed: int = 2) -> Any:
    from transformers import CLIPVisionConfig, CLIPVisionModelWithProjection

    config = CLIPVisionConfig(
        hidden_size=I2V_IMAGE_WIDTH, projection_dim=I2V_IMAGE_WIDTH, num_hidden_layers=2,
        num_attention_heads=2, image_size=I2V_IMAGE_SIZE, intermediate_size=16, patch_size=1,
    )  # fmt: skip
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return CLIPVisionModelWithProjection(config).eval()


def write_tiny_i2v_files(root: Path) -> TinyI2vFiles:
    from diffusers import UniPCMultistepScheduler
    from diffusers.loaders.single_file_utils import convert_wan_transformer_to_diffusers

    pipe = build_tiny_wan_i2v()
    spiece = train_tiny_spiece()
    tokenizer = reference_tokenizer(spiece, root / "google-umt5-xxl")
    pipe.register_modules(
        vae=tiny_wan_released_vae(),
        tokenizer=tokenizer,
        text_encoder=tiny_umt5_encoder(seed=1, vocab_size=len(tokenizer)),
        image_encoder=tiny_clip_vision_with_projection(),
        scheduler=UniPCMultistepScheduler(**RELEASED_SCHEDULER),
    )
    folder = root / "folder" / FILE_NAME
    pipe.save_pretrained(folder)
    configs = root / "configs" / CONFIG_NAME
    shutil.copytree(shipped_configs() / CONFIG_NAME, configs)
    for component in ("transformer", "vae", "text_encoder", "image_encoder"):
        shutil.copy(folder / component / "config.json", configs / component / "config.json")
    processor = "image_processor/preprocessor_config.json"
    shutil.copy(folder / processor, configs / processor)

    transformer = wan_i2v_transformer_to_original(pipe.transformer.state_dict())
    assert set(convert_wan_transformer_to_diffusers(dict(transformer))) == set(
        pipe.transformer.state_dict()
    )
    encoder = pipe.text_encoder.state_dict()
    umt5 = {k: v for k, v in encoder.items() if k != "encoder.embed_tokens.weight"}
    umt5["spiece_model"] = spiece_tensor(spiece)
    models = root / "models"
    model = models / "diffusion_models" / f"{FILE_NAME}.safetensors"
    _save(transformer, model)
    _save(umt5, models / "text_encoders" / "umt5_xxl_fp16.safetensors")
    _save(wan_vae_to_original(pipe.vae.state_dict()), models / "vae" / "wan_2.1_vae.safetensors")
    _save(pipe.image_encoder.state_dict(), models / "clip_vision" / CLIP_VISION_NAME)
    return TinyI2vFiles(folder, model, models, configs)


_IMAGE_RENAMES = (  # diffusers' -> Wan-AI's, before the text-to-video renames
    ("condition_embedder.image_embedder.norm1", "img_emb.proj.0"),
    ("condition_embedder.image_embedder.ff.net.0.proj", "img_emb.proj.1"),
    ("condition_embedder.image_embedder.ff.net.2", "img_emb.proj.3"),
    ("condition_embedder.image_embedder.norm2", "img_emb.proj.4"),
    (".add_k_proj.", ".k_img."),
    (".add_v_proj.", ".v_img."),
    (".norm_added_k.", ".norm_k_img."),
)


def wan_i2v_transformer_to_original(state: StateDict) -> StateDict:
    renamed = {}
    for key, value in state.items():
        for diffusers_name, original in _IMAGE_RENAMES:
            key = key.replace(diffusers_name, original)
        renamed[key] = value
    return wan_transformer_to_original(renamed)


def stock_from_files(files: TinyI2vFiles) -> Any:
    """The folder's stock `WanImageToVideoPipeline` with diffusers' own single-file loads
    of the transformer and VAE files (its CLIP encoder the folder's: diffusers has no
    single-file loader for it)."""
    import diffusers

    options: dict[str, Any] = {"config": str(files.configs), "local_files_only": True}
    transformer = diffusers.WanTransformer3DModel.from_single_file(
        str(files.model), subfolder="transformer", **options
    )
    vae = diffusers.AutoencoderKLWan.from_single_file(
        str(files.models / "vae" / "wan_2.1_vae.safetensors"), subfolder="vae", **options
    )
    pipe = diffusers.WanImageToVideoPipeline.from_pretrained(
        files.folder, local_files_only=True, transformer=transformer, vae=vae
    )
    pipe.set_progress_bar_config(disable=True)
    return pipe

"""Tiny random Qwen-Image and Qwen-Image-Edit as a diffusers folder (the twin) and as
ComfyUI's split files: `diffusion_models/qwen_image_bf16.safetensors` (diffusers' keys, as
released), `text_encoders/qwen_2.5_vl_7b.safetensors` (Qwen's released Qwen2.5-VL keys,
`model.` and `visual.`, without `lm_head`, as ComfyUI's file), `vae/qwen_image_vae.safetensors`
(Wan-AI's original VAE keys), and `text_encoders/tokenizer/` (the tiny tokenizer, where an
artist puts a copy of Qwen/Qwen-Image's); an fp8 e4m3fn and a GGUF Q8_0 copy of the
transformer beside it. The config folder is the folder's without weights or tokenizer (an
Edit model's `processor/` keeps only its image processor settings), named as the shipped one.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from app.engine.generation.files.architecture import Architecture
from app.testing.tiny.qwen import build_tiny_qwen, build_tiny_qwen_edit
from tests.engine.generation.tiny_transformer_files import write_gguf
from tests.engine.generation.tiny_wan_files import wan_vae_to_original

StateDict = dict[str, torch.Tensor]

FILE_NAMES = {"qwen-image": "qwen_image_bf16", "qwen-image-edit": "qwen_image_edit_bf16"}
CONFIG_NAMES = {"qwen-image": "qwen-image", "qwen-image-edit": "qwen-image-edit"}
TOKENIZER_FILES = ("vocab.json", "merges.txt", "tokenizer.json", "tokenizer_config.json")


@dataclass(frozen=True)
class TinyQwenFiles:
    folder: Path  # the diffusers folder: the twin every file layout must equal
    configs: Path  # a config root, as resources/model_configs (SingleFileConfigs)
    split_model: Path  # diffusion_models/qwen_image_*.safetensors
    fp8_model: Path  # the same transformer in float8 e4m3fn
    gguf_model: Path  # the same transformer as a GGUF Q8_0
    tokenizer: Path  # text_encoders/tokenizer/


def write_tiny_qwen_files(architecture: Architecture, root: Path) -> TinyQwenFiles:
    edit = architecture is Architecture.QWEN_IMAGE_EDIT
    pipe: Any = build_tiny_qwen_edit() if edit else build_tiny_qwen()
    pipe.register_modules(vae=released_shape_vae(pipe.vae))
    name = FILE_NAMES[architecture.value]
    folder = root / "folder" / name
    pipe.save_pretrained(folder)
    if edit:
        _name_processor_as_released(folder)
    configs = root / "configs"
    config = configs / CONFIG_NAMES[architecture.value]
    shutil.copytree(folder, config, ignore=shutil.ignore_patterns("*.safetensors"))
    shutil.rmtree(config / "tokenizer")
    if edit:  # the shipped processor/ holds the image processor's settings alone
        for file in (config / "processor").iterdir():
            if file.name not in ("preprocessor_config.json", "processor_config.json"):
                file.unlink()
    models = root / "models"
    transformer = {k: v.contiguous() for k, v in pipe.transformer.state_dict().items()}
    split_model = _save(transformer, models / "diffusion_models" / f"{name}.safetensors")
    fp8 = {k: v.to(torch.float8_e4m3fn) if v.ndim >= 2 else v for k, v in transformer.items()}
    fp8_model = _save(
        fp8, split_model.with_name(name.replace("bf16", "fp8_e4m3fn") + ".safetensors")
    )
    gguf_model = split_model.with_name(name.replace("_bf16", "").replace("_", "-") + "-Q8_0.gguf")
    write_gguf(transformer, gguf_model, architecture)
    encoder = released_qwen25_vl_keys(pipe.text_encoder.state_dict())
    _save(encoder, models / "text_encoders" / "qwen_2.5_vl_7b.safetensors")
    _save(wan_vae_to_original(pipe.vae.state_dict()), models / "vae" / "qwen_image_vae.safetensors")
    tokenizer = models / "text_encoders" / "tokenizer"
    pipe.tokenizer.save_pretrained(tokenizer)
    return TinyQwenFiles(folder, configs, split_model, fp8_model, gguf_model, tokenizer)


def in_fresh_memory(pipe: Any) -> Any:
    """`pipe` with every weight cloned: the folder's weights as `from_pretrained` maps them
    can sit at memory alignments that take other CPU kernels (an edit's image differs by 1
    here); in fresh memory, as Easel's are, they agree exactly."""
    for component in pipe.components.values():
        if isinstance(component, torch.nn.Module):
            for parameter in component.parameters():
                parameter.data = parameter.data.clone()
    return pipe


def released_shape_vae(tiny: Any, seed: int = 0) -> Any:
    """Qwen-Image's VAE of the released one's shape (dim_mult 1, 2, 4, 4; two residual
    blocks a level), a few channels wide, with `tiny`'s latent statistics: the Wan-AI key
    layout diffusers converts is that shape's."""
    from diffusers import AutoencoderKLQwenImage

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return AutoencoderKLQwenImage(
            base_dim=2, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=2,
            temperal_downsample=[False, True, True], latents_mean=tiny.config.latents_mean,
            latents_std=tiny.config.latents_std,
        )  # fmt: skip


def released_qwen25_vl_keys(state: StateDict) -> StateDict:
    """transformers 5's Qwen2.5-VL keys -> Qwen's released ones as ComfyUI's file holds them
    (`model.language_model.` -> `model.`, `model.visual.` -> `visual.`), without the head."""
    out = {}
    for key, value in state.items():
        if key.startswith("model.visual."):
            key = key.removeprefix("model.")
        elif key.startswith("model.language_model."):
            key = "model." + key.removeprefix("model.language_model.")
        elif key.startswith("lm_head."):
            continue
        out[key] = value.contiguous()
    return out


def _name_processor_as_released(folder: Path) -> None:
    """The processor named `Qwen2VLProcessor`, as the released folder names it, not by the
    class that built it (as app/testing/tiny/qwen.write_tiny_qwen_edit does)."""
    for path, key, value in (
        (folder / "model_index.json", "processor", ["transformers", "Qwen2VLProcessor"]),
        (folder / "processor" / "processor_config.json", "processor_class", "Qwen2VLProcessor"),
    ):
        settings = json.loads(path.read_text(encoding="utf-8"))
        settings[key] = value
        path.write_text(json.dumps(settings, indent=2), encoding="utf-8")


def _save(weights: StateDict, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(weights, str(path))
    return path


K_BLOCK = 256  # values per Q4_K block
K_BLOCK_BYTES = 144  # its bytes: scale and minimum (float16 each), 12 of sub-scales, 128 of 4-bit


def write_q4_k_gguf(state: StateDict, path: Path, seed: int = 0) -> Path:
    """A GGUF whose weight matrices with rows of whole 256-value blocks are Q4_K (as the
    K-quant conversions of city96 and QuantStack store most layers), the rest F32. gguf-py
    cannot quantise to K-quants, so the blocks are random bytes with a small float16 scale
    and minimum: a valid Q4_K tensor, the file's own weights (stock diffusers reads the
    same ones)."""
    import gguf
    import numpy as np

    generator = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(path), "qwen_image")
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    for name, tensor in state.items():
        data = tensor.float().numpy()
        if data.ndim == 2 and data.shape[-1] % K_BLOCK == 0:
            blocks = generator.integers(
                0, 256, (data.shape[0], data.shape[1] // K_BLOCK, K_BLOCK_BYTES), dtype=np.uint8
            )
            scales = np.array([0.002, 0.001], dtype=np.float16).view(np.uint8)
            blocks[:, :, :4] = scales  # d, dmin: small, so the weights stay near zero
            raw = blocks.reshape(data.shape[0], -1)
            writer.add_tensor(name, raw, raw_dtype=gguf.GGMLQuantizationType.Q4_K)
        else:
            writer.add_tensor(name, np.ascontiguousarray(data))
    path.parent.mkdir(parents=True, exist_ok=True)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def wide_tiny_transformer(seed: int = 1) -> Any:
    """A one-block Qwen-Image transformer 256 wide (two heads of 128, as the released
    model's), so that its weight rows are whole Q4_K blocks; the tiny text width."""
    from diffusers import QwenImageTransformer2DModel

    from app.testing.tiny.qwen import LATENT_CHANNELS, TEXT_WIDTH

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return QwenImageTransformer2DModel(
            patch_size=2, in_channels=LATENT_CHANNELS * 4, out_channels=LATENT_CHANNELS,
            num_layers=1, attention_head_dim=128, num_attention_heads=2,
            joint_attention_dim=TEXT_WIDTH, axes_dims_rope=(32, 48, 48),
        )  # fmt: skip

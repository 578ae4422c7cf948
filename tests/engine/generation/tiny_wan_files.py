"""A tiny Wan 2.1 text-to-video model written as the files artists have: ComfyUI's split
layout (`models/diffusion_models/`, `text_encoders/`, `vae/`, each in its original keys)
and city96's GGUF Q8_0, beside the diffusers folder of the same weights (the reference)
and the config folder Easel loads the files with (`write_test_configs`). The UMT5 file
carries its tokenizer as ComfyUI's does (a SentencePiece model trained here, tiny_umt5).

The keys are Wan-AI's (what `diffusers.loaders.single_file_utils.convert_wan_*` read):
the converters' renames run backwards, and `write_tiny_wan_files` checks that diffusers'
own conversion gives the folder's keys back, so a wrong inverse cannot pass unnoticed.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from app.testing.tiny.wan import build_tiny_wan, tiny_umt5_encoder
from tests.engine.generation.tiny_umt5 import (
    reference_tokenizer,
    spiece_tensor,
    train_tiny_spiece,
)

CONFIG_NAME = "wan2.1-t2v-1.3b"  # what a transformer no wider than 1.3B's loads with
FILE_NAME = "wan2.1_t2v_1.3B_fp16"  # ComfyUI's name of the released file
StateDict = dict[str, torch.Tensor]


@dataclass(frozen=True)
class TinyWanFiles:
    folder: Path  # the diffusers folder of the same weights
    models: Path  # the split layout's models folder
    split_model: Path  # models/diffusion_models/<FILE_NAME>.safetensors
    gguf_model: Path  # models/diffusion_models/<FILE_NAME>-Q8_0.gguf
    configs: Path  # <configs>/<CONFIG_NAME>: the shipped folder with the tiny networks' configs


def tiny_wan_released_vae(seed: int = 0) -> Any:
    """A Wan VAE of the released one's shape (dim_mult 1, 2, 4, 4; two residual blocks a
    level), a few channels wide: the original key layout diffusers converts is that shape's."""
    from diffusers import AutoencoderKLWan

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return AutoencoderKLWan(base_dim=2, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=2)


def write_tiny_wan_files(root: Path) -> TinyWanFiles:
    from diffusers.loaders.single_file_utils import (
        convert_wan_transformer_to_diffusers,
        convert_wan_vae_to_diffusers,
    )

    pipe = build_tiny_wan(released=True)
    # UMT5's tokenizer as the released files carry it: a SentencePiece model (trained here),
    # which the folder holds as transformers' tokenizer of a google/umt5-xxl folder.
    spiece = train_tiny_spiece()
    tokenizer = reference_tokenizer(spiece, root / "google-umt5-xxl")
    pipe.register_modules(
        vae=tiny_wan_released_vae(),
        tokenizer=tokenizer,
        text_encoder=tiny_umt5_encoder(seed=1, vocab_size=len(tokenizer)),
    )
    folder = root / "folder" / FILE_NAME
    pipe.save_pretrained(folder)
    configs = write_test_configs(folder, root / "configs")

    transformer = wan_transformer_to_original(pipe.transformer.state_dict())
    vae = wan_vae_to_original(pipe.vae.state_dict())
    assert set(convert_wan_transformer_to_diffusers(dict(transformer))) == set(
        pipe.transformer.state_dict()
    )
    assert set(convert_wan_vae_to_diffusers(dict(vae))) == set(pipe.vae.state_dict())
    # The released UMT5 file holds the embedding once, as `shared.weight`.
    encoder = pipe.text_encoder.state_dict()
    umt5 = {k: v for k, v in encoder.items() if k != "encoder.embed_tokens.weight"}
    umt5["spiece_model"] = spiece_tensor(spiece)  # ComfyUI's: the tokenizer in the file
    models = root / "models"
    split_model = models / "diffusion_models" / f"{FILE_NAME}.safetensors"
    _save(transformer, split_model)
    _save(umt5, models / "text_encoders" / "umt5_xxl_fp16.safetensors")
    _save(vae, models / "vae" / "wan_2.1_vae.safetensors")
    gguf_model = write_wan_gguf(transformer, split_model.with_name(f"{FILE_NAME}-Q8_0.gguf"))
    return TinyWanFiles(folder, models, split_model, gguf_model, configs)


def write_test_configs(folder: Path, root: Path) -> Path:
    """The config folder the tiny files load with: Easel's shipped `wan2.1-t2v-1.3b` (its
    model index and scheduler), but for the tiny networks' own configs (the transformer,
    VAE and UMT5 configs of the folder: a one-block DiT 24 wide cannot load into the
    shipped 30 blocks of 1536). No tokenizer: it comes from the UMT5 file."""
    configs = root / CONFIG_NAME
    shutil.copytree(shipped_configs() / CONFIG_NAME, configs)
    for component in ("transformer", "vae", "text_encoder"):
        shutil.copy(folder / component / "config.json", configs / component / "config.json")
    return configs


def shipped_configs() -> Path:
    from app.engine.generation.load.pipelines import bundled_configs

    return bundled_configs().root


def stock_from_files(files: TinyWanFiles, transformer_file: Path) -> Any:
    """The folder's stock `WanPipeline` with diffusers' own single-file loads of the
    transformer and the VAE files (its converters; the GGUF's flattened patch embedding
    given back its shape, as diffusers refuses city96's flattening: the last test). Its
    folder twin differs by at most 1: the same weights, but mapped at other alignments,
    which CPU matrix kernels round differently."""
    import diffusers

    from app.engine.generation.load.assemble import gguf_weights

    options: dict[str, Any] = {"config": str(files.configs), "local_files_only": True}
    source: Any = str(transformer_file)
    if transformer_file.suffix == ".gguf":
        source = gguf_weights(transformer_file)
        options["quantization_config"] = diffusers.GGUFQuantizationConfig(
            compute_dtype=torch.float32
        )
    transformer = diffusers.WanTransformer3DModel.from_single_file(
        source, subfolder="transformer", **options
    )
    vae = diffusers.AutoencoderKLWan.from_single_file(
        str(files.models / "vae" / "wan_2.1_vae.safetensors"), subfolder="vae",
        config=str(files.configs), local_files_only=True,
    )  # fmt: skip
    pipe = diffusers.WanPipeline.from_pretrained(
        files.folder, local_files_only=True, transformer=transformer, vae=vae
    )
    pipe.set_progress_bar_config(disable=True)
    return pipe


def _save(weights: StateDict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in weights.items()}, str(path))


_TRANSFORMER_RENAMES = (  # diffusers' name -> Wan-AI's, in this order
    ("condition_embedder.time_embedder.linear_1", "time_embedding.0"),
    ("condition_embedder.time_embedder.linear_2", "time_embedding.2"),
    ("condition_embedder.text_embedder.linear_1", "text_embedding.0"),
    ("condition_embedder.text_embedder.linear_2", "text_embedding.2"),
    ("condition_embedder.time_proj", "time_projection.1"),
    ("attn2", "cross_attn"),
    ("attn1", "self_attn"),
    (".to_out.0.", ".o."),
    (".to_q.", ".q."),
    (".to_k.", ".k."),
    (".to_v.", ".v."),
    ("ffn.net.0.proj", "ffn.0"),
    ("ffn.net.2", "ffn.2"),
    ("proj_out", "head.head"),
    (".norm2.", ".norm3."),  # diffusers' cross-attention norm is Wan-AI's norm3
)


def wan_transformer_to_original(state: StateDict) -> StateDict:
    out = {}
    for key, value in state.items():
        new = key
        for diffusers_name, original in _TRANSFORMER_RENAMES:
            new = new.replace(diffusers_name, original)
        if new == "scale_shift_table":
            new = "head.modulation"
        new = new.replace(".scale_shift_table", ".modulation")
        out[new] = value
    return out


_RESNET = {
    "norm1.gamma": "residual.0.gamma", "conv1": "residual.2", "norm2.gamma": "residual.3.gamma",
    "conv2": "residual.6", "conv_shortcut": "shortcut",
}  # fmt: skip
_TOP = {"quant_conv": "conv1", "post_quant_conv": "conv2"}


def _resnet(rest: str) -> str:
    for diffusers_name, original in _RESNET.items():
        if rest == diffusers_name or rest.startswith(diffusers_name + "."):
            return original + rest[len(diffusers_name) :]
    return rest


def wan_vae_to_original(state: StateDict) -> StateDict:
    """The Wan VAE in Wan-AI's keys (three resnets and an upsampler per decoder level)."""
    out = {}
    for key, value in state.items():
        out[_vae_key(key)] = value
    return out


def _vae_key(key: str) -> str:
    top, _, rest = key.partition(".")
    if top in _TOP:
        return f"{_TOP[top]}.{rest}"
    if match := re.fullmatch(r"(encoder|decoder)\.mid_block\.resnets\.(\d)\.(.*)", key):
        side, index, tail = match.groups()
        return f"{side}.middle.{2 * int(index)}.{_resnet(tail)}"
    if match := re.fullmatch(r"(encoder|decoder)\.mid_block\.attentions\.0\.(.*)", key):
        return f"{match[1]}.middle.1.{match[2]}"
    if match := re.fullmatch(r"(encoder|decoder)\.(conv_in|norm_out|conv_out)\.(.*)", key):
        name = {"conv_in": "conv1", "norm_out": "head.0", "conv_out": "head.2"}[match[2]]
        return f"{match[1]}.{name}.{match[3]}"
    if match := re.fullmatch(r"encoder\.down_blocks\.(\d+)\.(.*)", key):
        return f"encoder.downsamples.{match[1]}.{_resnet(match[2])}"
    if match := re.fullmatch(r"decoder\.up_blocks\.(\d)\.resnets\.(\d)\.(.*)", key):
        level, resnet, tail = match.groups()
        return f"decoder.upsamples.{4 * int(level) + int(resnet)}.{_resnet(tail)}"
    if match := re.fullmatch(r"decoder\.up_blocks\.(\d)\.upsamplers\.0\.(.*)", key):
        return f"decoder.upsamples.{4 * int(match[1]) + 3}.{match[2]}"
    return key


ORIGINAL_SHAPE_KEY = "comfy.gguf.orig_shape."


def write_wan_gguf(
    original: StateDict, path: Path, stated_shapes: dict[str, list[int]] | None = None
) -> Path:
    """city96's layout of a Wan GGUF Q8_0: weight matrices whose rows are whole 32-value
    blocks in Q8_0, the rest in F32; a tensor of more than GGUF's four dimensions (the 5D
    patch embedding) flattened to two, its shape in `comfy.gguf.orig_shape.<name>`
    (`stated_shapes`: other shapes to state there, as a damaged file would)."""
    import gguf
    import numpy as np

    writer = gguf.GGUFWriter(str(path), "wan")
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    for name, tensor in original.items():
        data = tensor.float().numpy()
        if data.ndim > 4:
            stated = (stated_shapes or {}).get(name, list(data.shape))
            writer.add_array(ORIGINAL_SHAPE_KEY + name, stated)
            data = data.reshape(data.shape[0], -1)
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

"""Random-weight SDXL and Flux.1 pipelines for benchmarks/gpu.py, built where they will run.

Full size: the released networks, from the configs Easel ships (resources/model_configs/sdxl
and flux1-dev). Each module is created inside a `torch.device` context in the dtype it runs
in (SDXL float16, Flux bfloat16), so its default initialisation runs on the GPU: seconds
for SDXL's 3.5 B parameters and Flux's 12 B transformer, where a CPU init and a copy would
take minutes. Flux's T5-XXL keeps its width (4096, what the transformer reads) with 2 of its
24 layers: the figures are the transformer's, and a whole T5 would add 9 GB to write and to
read twice.

Smoke (`--smoke`): the same builders on the same configs with small widths (`SMOKE_SIZES`)
and the tiny vocabularies of `tiny.unet` (the released CLIP vocabulary takes seconds to
load, and every load of a pipeline reads it again), on the CPU in the same dtypes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from app.engine.generation.load.pipelines import (
    bundled_configs,
    shipped_t5_tokenizer,
    shipped_tokenizer,
)
from app.testing.tiny.unet import _tokenizer, tiny_t5_tokenizer, tokenizer_vocab

SDXL_DTYPE = torch.float16
FLUX_DTYPE = torch.bfloat16
FLUX_T5_LAYERS = 2  # of T5-XXL's 24: see the module's docstring
# The SDXL VAE overflows float16 inside its encoder; random weights do not, so the stressed
# encoder's first convolution is scaled until its largest output is this many times
# float16's largest number (finite in float32, where the group norm after it rescales it).
OVERFLOW_FACTOR = 4.0

# Small widths for `--smoke`, over the shipped configs (component -> changed keys).
_SMALL_CLIP = {"intermediate_size": 37, "num_attention_heads": 4, "num_hidden_layers": 2}
_SMALL_VAE = {"block_out_channels": [8, 16, 16, 16], "layers_per_block": 1, "norm_num_groups": 8}
SMOKE_SIZES: dict[str, dict[str, dict[str, Any]]] = {
    "sdxl": {
        "unet": {
            "block_out_channels": [16, 32, 32], "layers_per_block": 1, "norm_num_groups": 8,
            "attention_head_dim": [2, 4, 4], "transformer_layers_per_block": [1, 1, 1],
            "cross_attention_dim": 80,  # the two encoders' widths side by side (32 + 48)
            "addition_time_embed_dim": 8,
            "projection_class_embeddings_input_dim": 6 * 8 + 32,  # 6 sizes + pooled (32)
            "sample_size": 8,
        },
        "vae": _SMALL_VAE,
        "text_encoder": {**_SMALL_CLIP, "hidden_size": 32, "projection_dim": 32},
        "text_encoder_2": {**_SMALL_CLIP, "hidden_size": 48, "projection_dim": 32},
    },
    "flux1-dev": {
        "transformer": {
            "num_layers": 1, "num_single_layers": 1, "attention_head_dim": 16,
            "num_attention_heads": 2, "joint_attention_dim": 32, "pooled_projection_dim": 32,
            "axes_dims_rope": [4, 6, 6],  # sums to attention_head_dim, as 16+56+56 to 128
        },
        "vae": _SMALL_VAE,
        "text_encoder": {**_SMALL_CLIP, "hidden_size": 32, "projection_dim": 32},
        "text_encoder_2": {"d_model": 32, "d_ff": 37, "d_kv": 8, "num_heads": 4, "num_layers": 1},
    },
}  # fmt: skip


def write_sdxl(folder: Path, device: str, picture: Image.Image, *, smoke: bool) -> Path:
    """A random SDXL diffusers folder at `folder`, its VAE encoder stressed on `picture`."""
    pipe = build_sdxl(device, smoke=smoke)
    stress_vae_encoder(pipe.vae, picture)
    pipe.save_pretrained(folder)
    del pipe
    _free(device)
    return folder


def write_flux(folder: Path, device: str, *, smoke: bool) -> Path:
    pipe = build_flux(device, smoke=smoke)
    pipe.save_pretrained(folder)
    del pipe
    _free(device)
    return folder


def build_sdxl(device: str, *, smoke: bool) -> Any:
    from diffusers import (
        AutoencoderKL,
        EulerDiscreteScheduler,
        StableDiffusionXLPipeline,
        UNet2DConditionModel,
    )
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection

    parts = _Parts("sdxl", smoke)
    with _initialising_on(device, SDXL_DTYPE):
        unet = UNet2DConditionModel.from_config(parts.diffusers(UNet2DConditionModel, "unet"))
        vae = AutoencoderKL.from_config(parts.diffusers(AutoencoderKL, "vae"))
        text_encoder = CLIPTextModel(parts.transformers(CLIPTextConfig, "text_encoder"))
        text_encoder_2 = CLIPTextModelWithProjection(
            parts.transformers(CLIPTextConfig, "text_encoder_2")
        )
    return StableDiffusionXLPipeline(
        vae=vae.eval(),
        text_encoder=text_encoder.eval(),
        text_encoder_2=text_encoder_2.eval(),
        tokenizer=parts.clip_tokenizer("tokenizer"),
        tokenizer_2=parts.clip_tokenizer("tokenizer_2"),
        unet=unet.eval(),
        scheduler=EulerDiscreteScheduler.from_config(
            parts.diffusers(EulerDiscreteScheduler, "scheduler")
        ),
    )


def build_flux(device: str, *, smoke: bool) -> Any:
    from diffusers import (
        AutoencoderKL,
        FlowMatchEulerDiscreteScheduler,
        FluxPipeline,
        FluxTransformer2DModel,
    )
    from transformers import CLIPTextConfig, CLIPTextModel, T5Config, T5EncoderModel

    parts = _Parts("flux1-dev", smoke)
    t5 = parts.transformers(T5Config, "text_encoder_2", num_layers=FLUX_T5_LAYERS)
    with _initialising_on(device, FLUX_DTYPE):
        transformer = FluxTransformer2DModel.from_config(
            parts.diffusers(FluxTransformer2DModel, "transformer")
        )
        vae = AutoencoderKL.from_config(parts.diffusers(AutoencoderKL, "vae"))
        text_encoder = CLIPTextModel(parts.transformers(CLIPTextConfig, "text_encoder"))
        text_encoder_2 = T5EncoderModel(t5)
    return FluxPipeline(
        scheduler=FlowMatchEulerDiscreteScheduler.from_config(
            parts.diffusers(FlowMatchEulerDiscreteScheduler, "scheduler")
        ),
        vae=vae.eval(),
        text_encoder=text_encoder.eval(),
        tokenizer=parts.clip_tokenizer("tokenizer"),
        text_encoder_2=text_encoder_2.eval(),
        tokenizer_2=parts.t5_tokenizer("tokenizer_2"),
        transformer=transformer.eval(),
    )


class _Parts:
    """A shipped config folder's component configs and tokenizers; for the smoke run, the
    small sizes over them and the tiny vocabularies."""

    def __init__(self, name: str, smoke: bool) -> None:
        self.folder = bundled_configs().root / name
        self._smoke = smoke
        self._small = SMOKE_SIZES[name] if smoke else {}

    def diffusers(self, cls: Any, component: str) -> dict[str, Any]:
        config = dict(cls.load_config(self.folder / component))
        return {**config, **self._small.get(component, {})}

    def transformers(self, cls: Any, component: str, **changes: Any) -> Any:
        changes = {**changes, **self._small.get(component, {})}
        if self._smoke:
            changes.update(_tiny_vocabulary(t5=cls.__name__ == "T5Config"))
        return cls.from_pretrained(self.folder / component, **changes)

    def clip_tokenizer(self, component: str) -> Any:
        return _tokenizer() if self._smoke else shipped_tokenizer(self.folder / component)

    def t5_tokenizer(self, component: str) -> Any:
        return tiny_t5_tokenizer() if self._smoke else shipped_t5_tokenizer(self.folder / component)


def _tiny_vocabulary(*, t5: bool) -> dict[str, int]:
    """A text encoder config's vocabulary keys for the tiny tokenizers."""
    if t5:
        return {"vocab_size": len(tiny_t5_tokenizer())}
    vocabulary = tokenizer_vocab()
    end = vocabulary["<|endoftext|>"]
    return {
        "vocab_size": len(vocabulary), "bos_token_id": vocabulary["<|startoftext|>"],
        "eos_token_id": end, "pad_token_id": end,
    }  # fmt: skip


@contextmanager
def _initialising_on(device: str, dtype: torch.dtype) -> Iterator[None]:
    """Modules created inside are allocated and initialised on `device`, in `dtype`."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device), torch.no_grad():
            yield
    finally:
        torch.set_default_dtype(previous)


def init_picture(size: int) -> Image.Image:
    """The img2img picture: colour gradients, so the encoder sees more than one value."""
    ramp = np.tile(np.linspace(0, 255, size, dtype=np.uint8), (size, 1))
    return Image.fromarray(np.stack([ramp, ramp[::-1], ramp.T], axis=-1))


def picture_tensor(picture: Image.Image, device: str, dtype: torch.dtype) -> torch.Tensor:
    """`picture` as a VAE reads it: NCHW in [-1, 1]."""
    array = np.asarray(picture.convert("RGB"), dtype=np.float32) / 127.5 - 1.0
    return torch.from_numpy(array).permute(2, 0, 1)[None].to(device, dtype)


def stress_vae_encoder(vae: Any, picture: Image.Image) -> float:
    """Scale the encoder's first convolution so that on `picture` its largest output is
    `OVERFLOW_FACTOR` x float16's largest number: what the released SDXL VAE does inside,
    and why its config asks for float32 (`force_upcast`). The scale is returned."""
    conv = vae.encoder.conv_in
    with torch.no_grad():
        weight, bias = conv.weight.float(), conv.bias.float()
        pixels = picture_tensor(picture, str(weight.device), torch.float32)
        out = torch.nn.functional.conv2d(pixels, weight, bias, conv.stride, conv.padding)
        scale = OVERFLOW_FACTOR * torch.finfo(torch.float16).max / float(out.abs().max())
        conv.weight.copy_(weight * scale)
        conv.bias.copy_(bias * scale)
        if not (torch.isfinite(conv.weight).all() and torch.isfinite(conv.bias).all()):
            raise ValueError(f"a scale of {scale:.0f} overflows the VAE's stored weights")
    return scale


def _free(device: str) -> None:
    if device.startswith("cuda"):
        import gc

        gc.collect()
        torch.cuda.empty_cache()

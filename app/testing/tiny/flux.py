"""A tiny random Flux.1 pipeline (dev-style or schnell-style), for tests and benchmarks.

The same components as the released FLUX.1 folders, each a few thousand parameters: a
`FluxTransformer2DModel` of one double and one single block, the tiny CLIP text encoder and
tokenizer of `tiny.unet`, the tiny T5 v1.1-style encoder and unigram tokenizer, an
`AutoencoderKL` with Flux's 16 latent channels, no quant convs and its scaling and shift
factors, and a `FlowMatchEulerDiscreteScheduler` with the released configs: dev's
resolution-dependent shift (`use_dynamic_shifting`), schnell's fixed shift of 1.
dev-style has a guidance embedder (distilled guidance as a model input); schnell-style has
none. Saved with `save_pretrained`, the folder loads as a `FluxPipeline` from disk alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.testing.tiny.unet import (
    _text_config,
    _tokenizer,
    tiny_flow_vae,
    tiny_t5_encoder,
    tiny_t5_tokenizer,
)

# FLUX.1's VAE (black-forest-labs/FLUX.1-dev, vae/config.json).
FLUX_SCALING_FACTOR = 0.3611
FLUX_SHIFT_FACTOR = 0.1159
FLUX_LATENT_CHANNELS = 16
# scheduler/scheduler_config.json of FLUX.1-dev (dynamic shift) and FLUX.1-schnell (none).
DEV_SCHEDULER = {
    "base_image_seq_len": 256,
    "base_shift": 0.5,
    "max_image_seq_len": 4096,
    "max_shift": 1.15,
    "num_train_timesteps": 1000,
    "shift": 3.0,
    "use_dynamic_shifting": True,
}
SCHNELL_SCHEDULER = {**DEV_SCHEDULER, "shift": 1.0, "use_dynamic_shifting": False}
T5_WIDTH = 32  # the tiny T5's d_model: the transformer's joint_attention_dim
CLIP_WIDTH = 32  # the tiny CLIP's hidden size: its pooled output, the pooled projection


def build_tiny_flux(*, guidance_embeds: bool, seed: int = 0) -> Any:
    """A tiny `FluxPipeline`: dev-style with `guidance_embeds`, schnell-style without."""
    import torch
    from diffusers import (
        FlowMatchEulerDiscreteScheduler,
        FluxPipeline,
        FluxTransformer2DModel,
    )
    from transformers import CLIPTextModel

    with torch.random.fork_rng():  # seed the weights without disturbing the caller's RNG
        torch.manual_seed(seed)
        transformer = FluxTransformer2DModel(
            patch_size=1,
            in_channels=FLUX_LATENT_CHANNELS * 4,  # 2x2 patches of the latents, packed
            num_layers=1,
            num_single_layers=1,
            attention_head_dim=16,
            num_attention_heads=2,
            joint_attention_dim=T5_WIDTH,
            pooled_projection_dim=CLIP_WIDTH,
            guidance_embeds=guidance_embeds,
            axes_dims_rope=(4, 6, 6),  # sums to attention_head_dim, as (16, 56, 56) to 128
        )
        text_encoder = CLIPTextModel(_text_config(hidden_size=CLIP_WIDTH))
        vae = tiny_flow_vae(scaling_factor=FLUX_SCALING_FACTOR, shift_factor=FLUX_SHIFT_FACTOR)
        text_encoder_2 = tiny_t5_encoder(d_model=T5_WIDTH, seed=seed + 1)
    config = DEV_SCHEDULER if guidance_embeds else SCHNELL_SCHEDULER
    return FluxPipeline(
        scheduler=FlowMatchEulerDiscreteScheduler(**config),
        vae=vae,
        text_encoder=text_encoder.eval(),
        tokenizer=_tokenizer(),
        text_encoder_2=text_encoder_2,
        tokenizer_2=tiny_t5_tokenizer(),
        transformer=transformer,
    )


def write_tiny_flux(dest: Path, *, guidance_embeds: bool = True, seed: int = 0) -> Path:
    """Save `build_tiny_flux(...)` as a diffusers folder at `dest`."""
    pipe = build_tiny_flux(guidance_embeds=guidance_embeds, seed=seed)
    dest.mkdir(parents=True, exist_ok=True)
    pipe.save_pretrained(dest)
    return dest


def write_tiny_flux_lora(dest: Path, *, guidance_embeds: bool = True, seed: int = 1) -> Path:
    """A random LoRA (rank 4: the transformer's attention and the CLIP text encoder) for
    `build_tiny_flux(guidance_embeds=...)`, saved in diffusers' Flux LoRA format as `dest`."""
    import torch
    from peft import LoraConfig, inject_adapter_in_model
    from peft.utils import get_peft_model_state_dict

    pipe = build_tiny_flux(guidance_embeds=guidance_embeds)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        # init_lora_weights=False: random A and B, so the LoRA visibly changes the image.
        targets = ["to_q", "to_k", "to_v", "to_out.0", "add_q_proj", "add_k_proj", "add_v_proj"]
        pipe.transformer.add_adapter(
            LoraConfig(r=4, target_modules=targets, init_lora_weights=False)
        )
        text = LoraConfig(
            r=4, target_modules=["q_proj", "k_proj", "v_proj", "out_proj"], init_lora_weights=False
        )
        inject_adapter_in_model(text, pipe.text_encoder)
    dest.parent.mkdir(parents=True, exist_ok=True)
    type(pipe).save_lora_weights(
        dest.parent,
        weight_name=dest.name,
        transformer_lora_layers=get_peft_model_state_dict(pipe.transformer),
        text_encoder_lora_layers=get_peft_model_state_dict(pipe.text_encoder),
    )
    return dest


def write_tiny_flux_kohya_lora(dest: Path, *, seed: int = 3) -> Path:
    """A random LoRA for the tiny Flux transformer's double block in kohya's (sd-scripts)
    key layout, as most Flux LoRAs artists download are: `lora_unet_double_blocks_0_img_attn_qkv`
    with `lora_down`/`lora_up` and an alpha, on the fused q/k/v of the original model,
    which diffusers' loader splits into `to_q`/`to_k`/`to_v`."""
    import torch
    from safetensors.torch import save_file

    width = 2 * 16  # heads x head dim of `build_tiny_flux`
    generator = torch.Generator().manual_seed(seed)
    weights: dict[str, torch.Tensor] = {}
    for stream in ("img", "txt"):
        for layer, outputs in (("qkv", 3 * width), ("proj", width)):
            key = f"lora_unet_double_blocks_0_{stream}_attn_{layer}"
            weights[f"{key}.lora_down.weight"] = torch.randn(4, width, generator=generator)
            weights[f"{key}.lora_up.weight"] = torch.randn(outputs, 4, generator=generator)
            weights[f"{key}.alpha"] = torch.tensor(2.0)
    dest.parent.mkdir(parents=True, exist_ok=True)
    save_file(weights, str(dest))
    return dest


# InstantX/FLUX.1-dev-Controlnet-Union's `num_mode`: its control types (FLUX_UNION_TYPES).
FLUX_UNION_MODES = 10


def build_tiny_flux_controlnet(
    *, union: bool = False, xlabs: bool = False, seed: int = 5, single_layers: int = 1
) -> Any:
    """A tiny random `FluxControlNetModel` for `build_tiny_flux(guidance_embeds=True)`: one
    double and one single block of its width. InstantX-style (reads the VAE's latents), or
    with `xlabs` XLabs-style (reads pixels through its own hint block, in 2x2 patches);
    with `union` a Union (`num_mode`). Its zero-initialised output layers are drawn at
    random too, so its residuals change the image."""
    import torch
    from diffusers import FluxControlNetModel

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        net = FluxControlNetModel(
            patch_size=2 if xlabs else 1,
            in_channels=FLUX_LATENT_CHANNELS * 4,
            num_layers=1,
            num_single_layers=single_layers,
            attention_head_dim=16,
            num_attention_heads=2,
            joint_attention_dim=T5_WIDTH,
            pooled_projection_dim=CLIP_WIDTH,
            guidance_embeds=True,
            axes_dims_rope=(4, 6, 6),
            num_mode=FLUX_UNION_MODES if union else None,
            conditioning_embedding_channels=FLUX_LATENT_CHANNELS if xlabs else None,
        )
        with torch.no_grad():
            for parameter in net.parameters():  # type: ignore[attr-defined]
                if not parameter.any():
                    parameter.normal_(0.0, 0.3)
    return net.eval()  # type: ignore[attr-defined]


def write_tiny_flux_controlnet(dest: Path, **kwargs: Any) -> Path:
    """Save `build_tiny_flux_controlnet(**kwargs)` as a diffusers folder at `dest`."""
    dest.mkdir(parents=True, exist_ok=True)
    build_tiny_flux_controlnet(**kwargs).save_pretrained(dest)
    return dest


def write_tiny_flux_controlnet_file(
    dest: Path, *, layout: str = "diffusers", **kwargs: Any
) -> Path:
    """Save `build_tiny_flux_controlnet(**kwargs)` as one `.safetensors` file at `dest`, no
    config: with diffusers' keys (InstantX's and Shakker-Labs' files renamed) or, with
    `layout="xlabs"`, in XLabs' own layout (`xlabs_state`)."""
    from safetensors.torch import save_file

    state = build_tiny_flux_controlnet(**kwargs).state_dict()
    if layout == "xlabs":
        state = xlabs_state(state)
    dest.parent.mkdir(parents=True, exist_ok=True)
    save_file({key: value.contiguous() for key, value in state.items()}, str(dest))
    return dest


# FluxControlNetModel's names -> XLabs' (x-flux's `ControlNetFlux`), written out here on
# their own rather than derived from Easel's mapping, so the two check each other.
_TO_XLABS_TOP = {
    "time_text_embed.timestep_embedder.linear_1.": "time_in.in_layer.",
    "time_text_embed.timestep_embedder.linear_2.": "time_in.out_layer.",
    "time_text_embed.text_embedder.linear_1.": "vector_in.in_layer.",
    "time_text_embed.text_embedder.linear_2.": "vector_in.out_layer.",
    "time_text_embed.guidance_embedder.linear_1.": "guidance_in.in_layer.",
    "time_text_embed.guidance_embedder.linear_2.": "guidance_in.out_layer.",
    "context_embedder.": "txt_in.",
    "x_embedder.": "img_in.",
    "controlnet_x_embedder.": "pos_embed_input.",
    "controlnet_blocks.": "controlnet_blocks.",
    "input_hint_block.conv_in.": "input_hint_block.0.",
    "input_hint_block.conv_out.": "input_hint_block.14.",
    **{f"input_hint_block.blocks.{n}.": f"input_hint_block.{2 * n + 2}." for n in range(6)},
}
_TO_XLABS_BLOCK = {
    "norm1.linear.": "img_mod.lin.", "norm1_context.linear.": "txt_mod.lin.",
    "attn.norm_q.weight": "img_attn.norm.query_norm.scale",
    "attn.norm_k.weight": "img_attn.norm.key_norm.scale",
    "attn.norm_added_q.weight": "txt_attn.norm.query_norm.scale",
    "attn.norm_added_k.weight": "txt_attn.norm.key_norm.scale",
    "ff.net.0.proj.": "img_mlp.0.", "ff.net.2.": "img_mlp.2.",
    "ff_context.net.0.proj.": "txt_mlp.0.", "ff_context.net.2.": "txt_mlp.2.",
    "attn.to_out.0.": "img_attn.proj.", "attn.to_add_out.": "txt_attn.proj.",
}  # fmt: skip


def xlabs_state(state: dict[str, Any]) -> dict[str, Any]:
    """A `FluxControlNetModel`'s state dict (XLabs-style: a hint block, no single blocks)
    in XLabs' file layout: q, k and v fused per stream, as Flux's original blocks keep them."""
    import torch

    out: dict[str, Any] = {}
    blocks = {key.split(".")[1] for key in state if key.startswith("transformer_blocks.")}
    for n in sorted(blocks):
        ours, theirs = f"transformer_blocks.{n}.", f"double_blocks.{n}."
        for kind in ("weight", "bias"):
            for stream, parts in (
                ("img", "to_q to_k to_v"),
                ("txt", "add_q_proj add_k_proj add_v_proj"),
            ):
                fused = [state[f"{ours}attn.{part}.{kind}"] for part in parts.split()]
                out[f"{theirs}{stream}_attn.qkv.{kind}"] = torch.cat(fused)
        for key, value in state.items():
            for old, new in _TO_XLABS_BLOCK.items():
                if key.startswith(ours + old):
                    out[theirs + new + key[len(ours + old) :]] = value
    for key, value in state.items():
        for old, new in _TO_XLABS_TOP.items():
            if key.startswith(old):
                out[new + key[len(old) :]] = value
    return out


def stock_flux_controlnet(
    flux: Path,
    nets: Sequence[Path],
    params: Any,
    pictures: Sequence[Any],
    dtype: Any,
    **inputs: Any,
) -> Any:
    """Stock `FluxControlNetPipeline` as its documentation calls it, on the Flux folder
    `flux` and the ControlNet folders `nets` (several: `FluxMultiControlNetModel`), in
    `dtype`: `params`' layers' images (`pictures`), weights, starts, ends and (a Union's)
    control types as `control_mode`, the index in Flux's Union table. With an `image`
    among `inputs` (and `strength`), `FluxControlNetImg2ImgPipeline`; with a `mask_image`
    too, `FluxControlNetInpaintPipeline`."""
    import diffusers
    import torch

    from app.engine.jobs.params import FLUX_UNION_TYPES

    kind = "Inpaint" if "mask_image" in inputs else "Img2Img" if "image" in inputs else ""
    pipeline_class = getattr(diffusers, f"FluxControlNet{kind}Pipeline")
    loaded = [diffusers.FluxControlNetModel.from_pretrained(n, torch_dtype=dtype) for n in nets]
    one = len(loaded) == 1
    multi = diffusers.FluxMultiControlNetModel
    pipe = pipeline_class.from_pretrained(
        flux, controlnet=loaded[0] if one else multi(loaded), torch_dtype=dtype
    )
    pipe.set_progress_bar_config(disable=True)
    layers = params.control_layers
    modes = [FLUX_UNION_TYPES.index(x.control_type) if x.control_type else None for x in layers]

    def each(values: list[Any]) -> Any:
        return values[0] if one else values

    return pipe(
        params.prompt,
        control_image=each(list(pictures)),
        control_mode=each(list(modes)),
        controlnet_conditioning_scale=each([layer.weight for layer in layers]),
        control_guidance_start=each([layer.start for layer in layers]),
        control_guidance_end=each([layer.end for layer in layers]),
        num_inference_steps=params.steps,
        guidance_scale=params.cfg,
        width=params.width,
        height=params.height,
        generator=torch.Generator().manual_seed(params.seed),
        **inputs,
    ).images[0]

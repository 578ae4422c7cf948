"""A Flux.1 or SD 3.x pipeline assembled from the files transformer_files.py found for it.

Each component is read from its own file (or its prefix in an all-in-one file) and built
by diffusers' single-file code from the shipped config folder, local files only:
- the transformer: `SD3Transformer2DModel.from_single_file` (diffusers converts Stability's
  keys); Flux's Black Forest Labs keys are converted here first (`flux_to_diffusers`, the
  same renames, splits and swaps as diffusers' `convert_flux_transformer_checkpoint_to_
  diffusers`, which fixes the width at 3072 and so cannot read a smaller model; a test
  checks the two agree at the released width), then `FluxTransformer2DModel.from_single_file`;
- the VAE: `AutoencoderKL.from_single_file` (original LDM keys or diffusers' own);
- the text encoders: diffusers' `create_diffusers_clip_model_from_ldm` and
  `create_diffusers_t5_model_from_checkpoint`, given the keys under the prefixes an
  all-in-one file has (a split file's transformers-layout keys are put under them);
- the scheduler and tokenizers from the config folder (tokenizers: the shipped vocabularies).
The pipeline is then the stock `FluxPipeline` / `StableDiffusion3Pipeline` of these parts.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

from app.engine.generation.files.architecture import Architecture, Part
from app.engine.generation.files.transformer_files import (
    CLIP_G,
    CLIP_G_PREFIX,
    CLIP_L,
    CLIP_L_PREFIX,
    FP8,
    FP8_E5M2,
    GGUF_SUFFIX,
    T5,
    T5_PREFIX,
    TRANSFORMER,
    VAE,
)

StateDict = dict[str, torch.Tensor]


def assemble_pipeline(
    architecture: Architecture,
    pipeline_class: Any,
    parts: tuple[Part, ...],
    config: Path,
    dtype: torch.dtype,
    tokenizers: dict[str, Any],
    quantisation: str = "",
    encoder_dtypes: dict[str, torch.dtype] | None = None,
) -> Any:
    """The stock pipeline of `architecture` from `parts`, configured by `config`, in
    `dtype` but for the text encoders `encoder_dtypes` names (by component); an fp8
    diffusion model stays in fp8, each layer upcast to `dtype` only while it runs. The
    files are read ahead meanwhile (fast_load.prefetch), as single UNet files are."""
    from app.engine.generation.load.single_file import prefetch

    files = list(dict.fromkeys(part.path for part in parts))
    with ThreadPoolExecutor(1, thread_name_prefix="prefetch") as pool:
        reading = pool.submit(lambda: [prefetch(path) for path in files])
        pipe = _assemble(
            architecture, pipeline_class, parts, config, dtype, tokenizers, quantisation,
            encoder_dtypes or {},
        )  # fmt: skip
        reading.result()
    return pipe


def _assemble(
    architecture: Architecture,
    pipeline_class: Any,
    parts: tuple[Part, ...],
    config: Path,
    dtype: torch.dtype,
    tokenizers: dict[str, Any],
    quantisation: str,
    encoder_dtypes: dict[str, torch.dtype],
) -> Any:
    import diffusers
    from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler

    declared = architecture.spec.transformer_file
    if declared is None:
        raise ValueError(f"{architecture.label} is not assembled from files")
    by_kind = {part.kind: part for part in parts}
    files = _Files()
    options = {"config": str(config), "torch_dtype": dtype, "local_files_only": True}
    transformer_weights = _KEY_CONVERSIONS[declared.key_layout](files.weights(by_kind[TRANSFORMER]))
    transformer_class = getattr(diffusers, declared.transformer_class)
    transformer_options = dict(options)
    storage = _FP8_STORAGE.get(quantisation)
    if by_kind[TRANSFORMER].path.suffix.lower() == GGUF_SUFFIX:
        # Kept quantised in memory, each layer dequantised as it runs (diffusers' GGUF).
        gguf = diffusers.GGUFQuantizationConfig(compute_dtype=dtype)
        transformer_options["quantization_config"] = gguf
    elif storage is not None:
        transformer_options["torch_dtype"] = None  # as stored: not widened at load
    transformer = transformer_class.from_single_file(
        transformer_weights, subfolder="transformer", **transformer_options
    )
    if storage is not None:
        upcast_per_layer(transformer, storage, dtype)
    components: dict[str, Any] = {
        "transformer": transformer,
        "vae": AutoencoderKL.from_single_file(
            files.weights(by_kind[VAE]), subfolder="vae", **options
        ),
        "scheduler": FlowMatchEulerDiscreteScheduler.from_pretrained(
            config, subfolder="scheduler", local_files_only=True
        ),
    }
    del transformer_weights
    index = json.loads((config / "model_index.json").read_text(encoding="utf-8"))
    for kind, component in declared.components:
        encoder_options = {**options, "torch_dtype": encoder_dtypes.get(component, dtype)}
        components[component] = _text_encoder(
            kind, index[component][1], files.weights(by_kind[kind]), component, encoder_options
        )
        tokenizer = component.replace("text_encoder", "tokenizer")
        components[tokenizer] = tokenizers.get(tokenizer) or _tokenizer(config, index, tokenizer)
    return pipeline_class(**components)


_FP8_STORAGE = {FP8: torch.float8_e4m3fn, FP8_E5M2: torch.float8_e5m2}


def _as_is(checkpoint: StateDict) -> StateDict:
    return checkpoint


def upcast_per_layer(model: Any, storage: torch.dtype, compute: torch.dtype) -> None:
    """diffusers' layerwise casting: the weight layers stay in `storage` (fp8) and are cast
    to `compute` only while each runs; what it leaves alone (norms, embeddings of
    positions, the output projection: diffusers' skip patterns) is held in `compute`, as
    stock `from_single_file(torch_dtype=compute)` + `enable_layerwise_casting` holds it."""
    model.enable_layerwise_casting(storage_dtype=storage, compute_dtype=compute)
    for module in model.modules():
        registry = getattr(module, "_diffusers_hook", None)
        if registry is not None and registry.get_hook("layerwise_casting") is not None:
            continue
        for tensor in [*module.parameters(recurse=False), *module.buffers(recurse=False)]:
            if tensor.is_floating_point() and tensor.dtype != compute:
                tensor.data = tensor.data.to(compute)


class _Files:
    """Each file opened once (mapped, not read): a component takes only its keys."""

    def __init__(self) -> None:
        self._open: dict[Path, Any] = {}

    def weights(self, part: Part) -> StateDict:
        from safetensors import safe_open

        if part.path.suffix.lower() == GGUF_SUFFIX:
            from diffusers.models.model_loading_utils import load_gguf_checkpoint

            return dict(load_gguf_checkpoint(str(part.path), return_tensors=True))

        handle = self._open.get(part.path)
        if handle is None:
            handle = self._open[part.path] = safe_open(str(part.path), framework="pt")
        return {
            key.removeprefix(part.prefix): handle.get_tensor(key)
            for key in handle.keys()  # noqa: SIM118 (safe_open is not a mapping)
            if key.startswith(part.prefix) and _belongs(part, key)
        }


def _belongs(part: Part, key: str) -> bool:
    """In a file without a prefix for the part (a bare transformer beside embedded text
    encoders), the other parts' keys are not its own."""
    if part.prefix:
        return True
    return not key.startswith(("text_encoders.", "first_stage_model.", "vae.", "conditioner."))


_ENCODER_PREFIXES = {CLIP_L: CLIP_L_PREFIX, CLIP_G: CLIP_G_PREFIX, T5: T5_PREFIX}


def _text_encoder(
    kind: str, class_name: str, weights: StateDict, component: str, options: dict[str, Any]
) -> Any:
    import transformers
    from diffusers.loaders.single_file_utils import (
        create_diffusers_clip_model_from_ldm,
        create_diffusers_t5_model_from_checkpoint,
    )

    cls = getattr(transformers, class_name)
    prefix = _ENCODER_PREFIXES[kind]
    if kind == T5:
        checkpoint = {prefix + key: value for key, value in weights.items()}
        model = create_diffusers_t5_model_from_checkpoint(
            cls, checkpoint, subfolder=component, **_encoder_options(options)
        )
        # The files hold the embedding once (`shared`); built on the meta device, the
        # encoder's copy is left untied (transformers 5): it is the same table.
        if model.encoder.embed_tokens.weight.is_meta:
            model.encoder.embed_tokens = model.shared
        return model.eval()  # built, not loaded by from_pretrained: dropout would be on
    # transformers' own layout (`text_model.` ..., or flat since transformers 5).
    checkpoint = {
        prefix
        + (
            key if key.startswith(("text_model.", "text_projection")) else "text_model." + key
        ): value
        for key, value in weights.items()
    }
    return create_diffusers_clip_model_from_ldm(
        cls, checkpoint, subfolder=component, **_encoder_options(options)
    )


def _encoder_options(options: dict[str, Any]) -> dict[str, Any]:
    return {
        "config": options["config"],
        "torch_dtype": options["torch_dtype"],
        "local_files_only": True,
    }


def _tokenizer(config: Path, index: dict[str, Any], name: str) -> Any:
    import transformers

    return getattr(transformers, index[name][1]).from_pretrained(config / name)


# ---------------------------------------------------------------- Flux keys


def flux_to_diffusers(checkpoint: StateDict) -> StateDict:
    """Black Forest Labs' Flux.1 keys -> diffusers' `FluxTransformer2DModel` keys.

    The conversion of diffusers' `convert_flux_transformer_checkpoint_to_diffusers`, with
    the attention width read from the weights (`img_in`) instead of fixed at 3072."""
    source = {
        key.removeprefix("model.diffusion_model."): value for key, value in checkpoint.items()
    }
    inner = source["img_in.weight"].shape[0]
    out: StateDict = {}

    def move(new: str, old: str) -> None:
        out[new] = source.pop(old)

    for new, old in _FLUX_RENAMES:
        if old in source:
            move(new, old)
    for i in _block_indices(source, "double_blocks."):
        new, old = f"transformer_blocks.{i}.", f"double_blocks.{i}."
        for suffix, original in _FLUX_DOUBLE_RENAMES:
            move(new + suffix, old + original)
        for stream, names in (("img", ("to_q", "to_k", "to_v")), ("txt", _ADDED_QKV)):
            for kind in ("weight", "bias"):
                parts = torch.chunk(source.pop(f"{old}{stream}_attn.qkv.{kind}"), 3, dim=0)
                for name, tensor in zip(names, parts, strict=True):
                    out[f"{new}attn.{name}.{kind}"] = tensor
    for i in _block_indices(source, "single_blocks."):
        new, old = f"single_transformer_blocks.{i}.", f"single_blocks.{i}."
        for suffix, original in _FLUX_SINGLE_RENAMES:
            move(new + suffix, old + original)
        for kind in ("weight", "bias"):
            linear1 = source.pop(f"{old}linear1.{kind}")
            sizes = [inner, inner, inner, linear1.shape[0] - 3 * inner]
            q, k, v, mlp = torch.split(linear1, sizes, dim=0)
            out[f"{new}attn.to_q.{kind}"], out[f"{new}attn.to_k.{kind}"] = q, k
            out[f"{new}attn.to_v.{kind}"], out[f"{new}proj_mlp.{kind}"] = v, mlp
    for kind in ("weight", "bias"):
        out[f"proj_out.{kind}"] = source.pop(f"final_layer.linear.{kind}")
        shift, scale = source.pop(f"final_layer.adaLN_modulation.1.{kind}").chunk(2, dim=0)
        out[f"norm_out.linear.{kind}"] = torch.cat([scale, shift], dim=0)
    return out


def flux_from_diffusers(state: StateDict) -> StateDict:
    """The inverse of `flux_to_diffusers`: diffusers' keys -> Black Forest Labs' layout."""
    source = dict(state)
    out: StateDict = {}
    for new, old in _FLUX_RENAMES:
        if new in source:
            out[old] = source.pop(new)
    for i in _block_indices(source, "transformer_blocks."):
        new, old = f"transformer_blocks.{i}.", f"double_blocks.{i}."
        for suffix, original in _FLUX_DOUBLE_RENAMES:
            out[old + original] = source.pop(new + suffix)
        for stream, names in (("img", ("to_q", "to_k", "to_v")), ("txt", _ADDED_QKV)):
            for kind in ("weight", "bias"):
                qkv = [source.pop(f"{new}attn.{name}.{kind}") for name in names]
                out[f"{old}{stream}_attn.qkv.{kind}"] = torch.cat(qkv, dim=0)
    for i in _block_indices(source, "single_transformer_blocks."):
        new, old = f"single_transformer_blocks.{i}.", f"single_blocks.{i}."
        for suffix, original in _FLUX_SINGLE_RENAMES:
            out[old + original] = source.pop(new + suffix)
        for kind in ("weight", "bias"):
            linear1_names = ("attn.to_q", "attn.to_k", "attn.to_v", "proj_mlp")
            out[f"{old}linear1.{kind}"] = torch.cat(
                [source.pop(f"{new}{name}.{kind}") for name in linear1_names], dim=0
            )
    for kind in ("weight", "bias"):
        out[f"final_layer.linear.{kind}"] = source.pop(f"proj_out.{kind}")
        scale, shift = source.pop(f"norm_out.linear.{kind}").chunk(2, dim=0)
        out[f"final_layer.adaLN_modulation.1.{kind}"] = torch.cat([shift, scale], dim=0)
    if source:
        raise ValueError(f"keys not in the Flux layout: {sorted(source)[:5]}")
    return out


def _block_indices(keys: Any, prefix: str) -> list[int]:
    return sorted(
        {int(key[len(prefix) :].split(".", 1)[0]) for key in keys if key.startswith(prefix)}
    )


_ADDED_QKV = ("add_q_proj", "add_k_proj", "add_v_proj")


def _pairs(new: str, old: str) -> list[tuple[str, str]]:
    return [(f"{new}.weight", f"{old}.weight"), (f"{new}.bias", f"{old}.bias")]


_FLUX_RENAMES = [
    *_pairs("time_text_embed.timestep_embedder.linear_1", "time_in.in_layer"),
    *_pairs("time_text_embed.timestep_embedder.linear_2", "time_in.out_layer"),
    *_pairs("time_text_embed.text_embedder.linear_1", "vector_in.in_layer"),
    *_pairs("time_text_embed.text_embedder.linear_2", "vector_in.out_layer"),
    *_pairs("time_text_embed.guidance_embedder.linear_1", "guidance_in.in_layer"),
    *_pairs("time_text_embed.guidance_embedder.linear_2", "guidance_in.out_layer"),
    *_pairs("context_embedder", "txt_in"),
    *_pairs("x_embedder", "img_in"),
]
_FLUX_DOUBLE_RENAMES = [
    *_pairs("norm1.linear", "img_mod.lin"),
    *_pairs("norm1_context.linear", "txt_mod.lin"),
    ("attn.norm_q.weight", "img_attn.norm.query_norm.scale"),
    ("attn.norm_k.weight", "img_attn.norm.key_norm.scale"),
    ("attn.norm_added_q.weight", "txt_attn.norm.query_norm.scale"),
    ("attn.norm_added_k.weight", "txt_attn.norm.key_norm.scale"),
    *_pairs("ff.net.0.proj", "img_mlp.0"),
    *_pairs("ff.net.2", "img_mlp.2"),
    *_pairs("ff_context.net.0.proj", "txt_mlp.0"),
    *_pairs("ff_context.net.2", "txt_mlp.2"),
    *_pairs("attn.to_out.0", "img_attn.proj"),
    *_pairs("attn.to_add_out", "txt_attn.proj"),
]
_FLUX_SINGLE_RENAMES = [
    *_pairs("norm.linear", "modulation.lin"),
    ("attn.norm_q.weight", "norm.query_norm.scale"),
    ("attn.norm_k.weight", "norm.key_norm.scale"),
    *_pairs("proj_out", "linear2"),
]


# A transformer file's key layout (`TransformerFile.key_layout`) -> diffusers' keys.
_KEY_CONVERSIONS = {"diffusers": _as_is, "bfl": flux_to_diffusers}

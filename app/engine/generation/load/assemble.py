"""A Flux.1, Flux.1 Kontext, Chroma, SD 3.x or Wan 2.1 pipeline assembled from the files
transformer_files.py found for it.

Each component is read from its own file (or its prefix in an all-in-one file) and built
by diffusers' single-file code from the shipped config folder, local files only:
- the transformer: its diffusers class's `from_single_file` (`SD3Transformer2DModel`:
  diffusers converts Stability's keys), after the family's own key converter where it
  declares one (Black Forest Labs' keys of Flux.1 and Kontext: families/flux/keys.py;
  lodestones' of Chroma: families/chroma/keys.py);
- the VAE: its config folder's class's `from_single_file` (`AutoencoderKL`: original LDM
  keys or diffusers' own; `AutoencoderKLWan`: Wan-AI's keys, which diffusers converts);
- the text encoders: diffusers' `create_diffusers_clip_model_from_ldm` and
  `create_diffusers_t5_model_from_checkpoint`, given the keys under the prefixes an
  all-in-one file has (a split file's transformers-layout keys are put under them);
- the scheduler and tokenizers from the config folder (tokenizers: the shipped vocabularies),
  or the tokenizers the text encoder files carry (UMT5's SentencePiece model in ComfyUI's
  file: the family's `TransformerFile.tokenizers`); ComfyUI's scaled fp8 text encoders
  and diffusion models (`*_fp8_scaled`, `*_fp8mixed`) given their scales back
  (scaled_fp8.py's `unscaled_fp8`: dequantised at load, before the family's key converter).
The pipeline is then the family's stock pipeline (`FluxPipeline`, `FluxKontextPipeline`,
`ChromaPipeline`, `StableDiffusion3Pipeline`, `WanPipeline`, `LTXPipeline`) of these parts
(an LTX-Video VAE handed over under `vae.`, as Lightricks' all-in-one files hold it: diffusers'
converter reads those keys). A city96 GGUF's
tensors that GGUF's four dimensions flattened (Wan's 5D patch embedding) get their shape
back from the file's metadata, dequantised if they were quantised: diffusers quantises only
linear layers.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from app.engine.generation.errors import ModelLoadFailed
from app.engine.generation.files.architecture import Architecture, Part
from app.engine.generation.files.expert_files import TRANSFORMER_2
from app.engine.generation.files.transformer_files import (
    CLIP_G,
    CLIP_G_PREFIX,
    CLIP_L,
    CLIP_L_PREFIX,
    FP8,
    FP8_E5M2,
    GGUF_SUFFIX,
    LTX_VAE,
    LTX_VAE_PREFIX,
    SCALED_FP8,
    T5,
    T5_PREFIX,
    TRANSFORMER,
    UMT5,
    VAE,
    WAN_VAE,
)
from app.engine.generation.scaled_fp8 import unscaled_fp8

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

    declared = architecture.spec.transformer_file
    if declared is None:
        raise ValueError(f"{architecture.label} is not assembled from files")
    by_kind = {part.kind: part for part in parts}
    files = _Files()
    options = {"config": str(config), "torch_dtype": dtype, "local_files_only": True}
    diffusion_model = partial(
        _diffusion_model, getattr(diffusers, declared.transformer_class), files,
        diffusers_keys(declared.to_diffusers_keys), options, quantisation,
    )  # fmt: skip
    transformer = diffusion_model(by_kind[TRANSFORMER], TRANSFORMER)
    index = json.loads((config / "model_index.json").read_text(encoding="utf-8"))
    vae = by_kind.get(VAE) or by_kind.get(WAN_VAE) or by_kind[LTX_VAE]
    vae_weights = files.weights(vae)
    if vae.kind == LTX_VAE:  # diffusers' LTX converter reads the all-in-one file's keys
        vae_weights = {LTX_VAE_PREFIX + key: value for key, value in vae_weights.items()}
    loaders = dict(declared.part_loaders)  # parts diffusers' single-file code cannot build
    components: dict[str, Any] = {
        "transformer": transformer,
        "vae": (
            declared_function(loaders[vae.kind])(vae_weights, config, "vae", dtype)
            if vae.kind in loaders
            else getattr(diffusers, index["vae"][1]).from_single_file(
                vae_weights, subfolder="vae", **options
            )
        ),
        "scheduler": getattr(diffusers, index["scheduler"][1]).from_pretrained(
            config, subfolder="scheduler", local_files_only=True
        ),
        **_from_folders(declared, by_kind[TRANSFORMER].path, config, dtype),
    }
    if TRANSFORMER_2 in by_kind:  # Wan 2.2 A14B's low-noise expert, a file of its own
        components[TRANSFORMER_2] = diffusion_model(by_kind[TRANSFORMER_2], TRANSFORMER_2)
        components["boundary_ratio"] = index.get("boundary_ratio")
    if index.get("expand_timesteps"):  # Wan 2.2 TI2V: a timestep per latent patch
        components["expand_timesteps"] = True
    # Tokenizers the text encoder files carry (UMT5's SentencePiece model in ComfyUI's file).
    carried = declared_function(declared.tokenizers)(parts) if declared.tokenizers else {}
    for kind, component in declared.components:
        encoder_dtype = encoder_dtypes.get(component, dtype)
        weights = files.weights(by_kind[kind])
        if kind in loaders:
            components[component] = declared_function(loaders[kind])(
                weights, config, component, encoder_dtype
            )
        else:
            encoder_options = {**options, "torch_dtype": encoder_dtype}
            components[component] = _text_encoder(
                kind, index[component][1], weights, component, encoder_options
            )
        tokenizer = component.replace("text_encoder", "tokenizer")
        if tokenizer not in components:
            components[tokenizer] = (
                tokenizers.get(tokenizer)
                or carried.get(tokenizer)
                or _tokenizer(config, index, tokenizer)
            )
    return pipeline_class(**components)


def _from_folders(
    declared: Any, model_file: Path, config: Path, dtype: torch.dtype
) -> dict[str, Any]:
    """The components a family builds from folders found beside its file (Qwen-Image's
    tokenizer, Wan 2.1 I2V's CLIP image encoder: `TransformerFile.find_folders` and
    `folder_components`), a network among them in the pipeline's `dtype` (as stock
    `from_pretrained(torch_dtype=...)` loads a folder's, whatever its file stores)."""
    if declared.find_folders is None or not declared.folder_components:
        return {}
    folders = declared.find_folders(model_file)
    if isinstance(folders, str):  # detection refused it; the folder went since
        raise ModelLoadFailed(f"{model_file.stem}: {folders}")
    built: dict[str, Any] = declared_function(declared.folder_components)(config, folders)
    return {
        name: part.to(dtype) if isinstance(part, torch.nn.Module) else part
        for name, part in built.items()
    }


_FP8_STORAGE = {FP8: torch.float8_e4m3fn, FP8_E5M2: torch.float8_e5m2}


def _diffusion_model(
    transformer_class: Any,
    files: _Files,
    to_diffusers: Callable[[StateDict], StateDict],
    options: dict[str, Any],
    quantisation: str,
    part: Part,
    subfolder: str,
) -> Any:
    """One diffusion model from its file, configured by `subfolder` of the config folder:
    a GGUF kept quantised (each layer dequantised as it runs, diffusers' GGUF), fp8 kept
    in fp8 (each layer upcast as it runs), anything else in the pipeline's dtype (but
    for what its class keeps in float32, as a folder keeps it)."""
    import diffusers

    dtype = options["torch_dtype"]
    transformer_options = dict(options)
    storage = _FP8_STORAGE.get(quantisation)
    if part.path.suffix.lower() == GGUF_SUFFIX:
        transformer_options["quantization_config"] = diffusers.GGUFQuantizationConfig(
            compute_dtype=dtype
        )
    elif storage is not None:
        transformer_options["torch_dtype"] = None  # as stored: not widened at load
    weights = files.weights(part)
    if quantisation == SCALED_FP8:  # each weight times its scale, in `dtype`, as it loads
        weights = unscaled_fp8(weights, dtype)
    checkpoint = to_diffusers(weights)
    keeps = "quantization_config" not in transformer_options and storage is None
    keeps = keeps and _keeps_float32(transformer_class, dtype)
    # The tensors as read, where needed after (diffusers' conversion pops its input's).
    stored = dict(checkpoint) if keeps else {}
    model = transformer_class.from_single_file(
        checkpoint, subfolder=subfolder, **transformer_options
    )
    if storage is not None:
        upcast_per_layer(model, storage, dtype)
    elif keeps:
        keep_float32_as_a_folder_does(model, stored)
    return model


def _keeps_float32(transformer_class: Any, dtype: torch.dtype) -> bool:
    """Whether `transformer_class` in half precision keeps modules in float32 (Wan's)."""
    return bool(getattr(transformer_class, "_keep_in_fp32_modules", None)) and dtype in (
        torch.float16,
        torch.bfloat16,
    )


def keep_float32_as_a_folder_does(model: Any, checkpoint: StateDict) -> None:
    """The modules `model`'s class keeps in float32 (Wan's time embedder, norms and
    modulation tables: `_keep_in_fp32_modules`) back in float32 from the file's values,
    and its buffers (Wan's rotary tables) as its class makes them, as stock
    `from_pretrained(torch_dtype=...)` loads a folder and as Wan's own code computes them.
    diffusers' `from_single_file(torch_dtype=...)` casts them all to the half dtype (and
    warns that it should not): on the tiny Wan 2.2 I2V pair that clip was 89 levels
    (bfloat16) and 42 (float16) from the folder of the same weights; this one is the
    folder's. Loaded in the half dtype first, so a file costs no float32 copy of itself."""
    from accelerate import init_empty_weights
    from diffusers.loaders.single_file_model import SINGLE_FILE_LOADABLE_CLASSES

    keep = model._keep_in_fp32_modules
    kept = [name for name, _ in model.named_parameters()
            if any(module in name.split(".") for module in keep)]  # fmt: skip
    loadable: Any = SINGLE_FILE_LOADABLE_CLASSES[type(model).__name__]
    convert = loadable["checkpoint_mapping_fn"]
    converted = convert(checkpoint=dict(checkpoint), config=model.config)  # renamed, not copied
    for name in kept:
        model.get_parameter(name).data = converted[name].to(torch.float32)
    with init_empty_weights(include_buffers=False):  # weights unmade, buffers computed
        made = type(model).from_config(model.config)
    for name, buffer in made.named_buffers():
        model.get_buffer(name).data = buffer


def diffusers_keys(converter: str) -> Callable[[StateDict], StateDict]:
    """A transformer file's keys -> diffusers' by the family's converter (its
    `TransformerFile.to_diffusers_keys`, "module:function"); "": they are diffusers' already."""
    if not converter:
        return lambda checkpoint: checkpoint
    convert: Callable[[StateDict], StateDict] = declared_function(converter)
    return convert


def declared_function(reference: str) -> Callable[..., Any]:
    """The function a family's declaration names as "module:function" (imported lazily:
    the declarations stay torch-free)."""
    module, name = reference.split(":")
    function: Callable[..., Any] = getattr(importlib.import_module(module), name)
    return function


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
            return gguf_weights(part.path)

        handle = self._open.get(part.path)
        if handle is None:
            handle = self._open[part.path] = safe_open(str(part.path), framework="pt")
        return {
            key.removeprefix(part.prefix): handle.get_tensor(key)
            for key in handle.keys()  # noqa: SIM118 (safe_open is not a mapping)
            if key.startswith(part.prefix) and _belongs(part, key)
        }


ORIGINAL_SHAPE_KEY = "comfy.gguf.orig_shape."  # city96's ComfyUI-GGUF: a flattened tensor's


def gguf_weights(path: Path) -> StateDict:
    """A GGUF diffusion model's tensors as diffusers' GGUF loader reads them, those stored
    flattened given back their original shape (unquantised: no linear layer takes them)."""
    from diffusers.models.model_loading_utils import load_gguf_checkpoint
    from gguf import GGUFReader
    from gguf.quants import dequantize

    weights = dict(load_gguf_checkpoint(str(path), return_tensors=True))
    reader = GGUFReader(str(path))
    shapes = {
        name.removeprefix(ORIGINAL_SHAPE_KEY): [int(n) for n in field.contents()]
        for name, field in reader.fields.items()
        if name.startswith(ORIGINAL_SHAPE_KEY)
    }
    for tensor in reader.tensors:
        if tensor.name in shapes:
            values = dequantize(tensor.data, tensor.tensor_type)
            weights[tensor.name] = _restored(path, tensor.name, values, shapes[tensor.name])
    return weights


def _restored(path: Path, name: str, values: Any, shape: list[int]) -> torch.Tensor:
    """`values` in the shape the file's metadata states, checked first: the metadata is the
    file's word, and a shape that does not hold the tensor's values is a damaged file."""
    if any(n <= 0 for n in shape) or int(np.prod(shape, dtype=np.float64)) != values.size:
        stated = "x".join(str(n) for n in shape[:8]) or "nothing"
        raise ModelLoadFailed(
            f"{path.name}: its metadata gives {name} the shape {stated}, which does not hold "
            f"its {values.size} values; the file is damaged or was not written by ComfyUI-GGUF"
        )
    return torch.from_numpy(values.copy()).reshape(shape)


def _belongs(part: Part, key: str) -> bool:
    """In a file without a prefix for the part (a bare transformer beside embedded text
    encoders), the other parts' keys are not its own."""
    if part.prefix:
        return True
    return not key.startswith(("text_encoders.", "first_stage_model.", "vae.", "conditioner."))


_ENCODER_PREFIXES = {CLIP_L: CLIP_L_PREFIX, CLIP_G: CLIP_G_PREFIX, T5: T5_PREFIX, UMT5: T5_PREFIX}
# ComfyUI keeps a text encoder's SentencePiece model in its file as a byte tensor: no weight.
_NOT_WEIGHTS = ("spiece_model",)


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
    weights = unscaled_fp8(weights)
    if kind in (T5, UMT5):  # UMT5 is laid out as T5 (diffusers' T5 loader builds either)
        checkpoint = {
            prefix + key: value for key, value in weights.items() if key not in _NOT_WEIGHTS
        }
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

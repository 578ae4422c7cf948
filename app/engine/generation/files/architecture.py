"""Which kind of model a folder or a checkpoint file is, without loading it.

Pure filesystem and JSON (no torch): a diffusers folder is read through its config files,
a `.safetensors` file through its header alone (the first 8 bytes give the length of a JSON
table of tensor names and shapes), so the GUI can list many multi-GB files in milliseconds.
What each family's folders and files look like is its declaration's (files/registry.py);
this module only reads the configs and headers and asks the registry. Anything no family
claims (a transformer family's single files: transformer_files.py), and a checkpoint file
without one of its parts (UNet, VAE, text encoders), gets an `unsupported_reason` instead
of an architecture: the listing shows it, `submit` refuses it and so does the loader,
never a crash in the worker.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path
from typing import Any

# Re-exported: Architecture and families_easel_runs are asked of this module all over.
from app.engine.generation.files.registry import Architecture as Architecture
from app.engine.generation.files.registry import FamilySpec, FolderConfigs, families, spec_of
from app.engine.generation.files.registry import families_easel_runs as families_easel_runs

# Re-exported: the header readers of LoRAs, ControlNets, upscalers and IP-Adapters use it.
from app.engine.generation.files.safetensors_header import (
    read_safetensors_header as read_safetensors_header,
)

MODEL_INDEX = "model_index.json"
SAFETENSORS_SUFFIX = ".safetensors"
PICKLE_SUFFIXES = (".ckpt", ".pt", ".pth", ".bin")
INPAINT_CHANNELS = 9  # an inpainting UNet's input: latents (4), mask (1), masked image (4)


class Prediction(Enum):
    EPSILON = "epsilon"
    V = "v_prediction"
    FLOW = "flow_prediction"  # flow matching (Flux, SD 3.x): the model predicts a velocity


@dataclass(frozen=True)
class Part:
    """Where one component's weights are: a file, and the prefix of its keys in it
    (a Flux or SD 3.x model assembled from single or split files: transformer_files.py)."""

    kind: str  # "transformer", "clip_l", "clip_g", "t5", "vae"
    path: Path
    prefix: str = ""


@dataclass(frozen=True)
class Detected:
    """What a model is; `architecture` is None exactly when `unsupported_reason` is set."""

    architecture: Architecture | None = None
    prediction: Prediction = Prediction.EPSILON
    native_size: int = 0
    unsupported_reason: str = ""
    inpainting: bool = False  # a 9-channel UNet (latents, mask, masked image): needs a mask
    config_name: str = ""  # the shipped config folder of a transformer-family file
    parts: tuple[Part, ...] = ()  # where a transformer-family file's components are
    quantisation: str = ""  # how the diffusion model's weights are stored: "Q8_0", "fp8"

    @property
    def supported(self) -> bool:
        return self.architecture is not None


def unsupported(reason: str) -> Detected:
    return Detected(unsupported_reason=reason)


# The SDXL training buckets (about one megapixel each); other models get them scaled to their
# native size, so a 512 model is offered 512x512, 576x448, ... and never a 1024 canvas.
_SDXL_BUCKETS = (
    (1024, 1024),
    (1152, 896),
    (896, 1152),
    (1216, 832),
    (832, 1216),
    (1344, 768),
    (768, 1344),
    (1536, 640),
    (640, 1536),
)


def size_presets(native_size: int) -> tuple[tuple[int, int], ...]:
    """(width, height) presets for a model trained at `native_size` squared, square first."""
    if native_size <= 0:
        return ()
    grid = 64 if native_size >= 512 else 8  # latents of real models tile best on 64 pixels

    def scaled(side: int) -> int:
        return max(grid, round(side * native_size / 1024 / grid) * grid)

    return tuple(dict.fromkeys((scaled(w), scaled(h)) for w, h in _SDXL_BUCKETS))


MAX_SIDE_PER_NATIVE = 4


def size_problem(native_size: int, width: int, height: int) -> str:
    """Why `width` x `height` does not suit a model trained at `native_size`, or "".

    Far beyond the native side the UNet has never seen such a canvas (repeated subjects)
    and memory grows with the square; an upscale job (img2img on the bigger image) is the
    way there. Four times the side still allows the usual 2x "hires" sizes of every family
    (and 256 px on the 64 px bundled model, which the benchmarks use)."""
    if native_size <= 0:
        return ""
    limit = MAX_SIDE_PER_NATIVE * native_size
    if width > limit or height > limit:
        return (
            f"{width}x{height} is too large for a model trained at {native_size}x{native_size} "
            f"(at most {limit} pixels per side)"
        )
    return ""


# ---------------------------------------------------------------- diffusers folders


def detect_folder(folder: Path) -> Detected:
    index = _read_json(folder / MODEL_INDEX)
    if index is None:
        return unsupported(f"cannot read {folder / MODEL_INDEX}")
    pipeline = str(index.get("_class_name", ""))
    claimants = [spec for spec in families() if pipeline in spec.folder.pipelines]
    if not claimants:
        kind = pipeline or "an unknown pipeline"
        families_run = families_easel_runs()
        return unsupported(
            f"{kind} is not a text-to-image pipeline of a family Easel runs ({families_run})"
        )
    if claimants[0].transformer:
        # Families that share a pipeline class claim by their configs and model index
        # (Wan 2.1 and 2.2 TI2V; Flux.1 and Flux.1 Fill).
        configs = {name: _read_json(folder / name / "config.json") or {} for name in _DIT_CONFIGS}
        transformer_spec = _claimant(claimants, {**configs, MODEL_INDEX: index})
        if transformer_spec is None:
            return unsupported(f"a {pipeline} whose configs no family Easel runs claims")
        return _detect_transformer_folder(folder, index, transformer_spec)
    configs = {name: _read_json(folder / name / "config.json") or {} for name in _UNET_CONFIGS}
    spec = _claimant(claimants, configs)
    if spec is None:
        return unsupported(f"a {pipeline} whose configs no family Easel runs claims")
    unet = configs["unet"]
    reason = _unet_folder_reason(spec, index, unet)
    if reason:
        return unsupported(reason)
    scheduler = _read_json(folder / "scheduler" / "scheduler_config.json") or {}
    prediction = (
        Prediction.V if scheduler.get("prediction_type") == "v_prediction" else Prediction.EPSILON
    )
    vae = configs["vae"]
    vae_factor = 2 ** (len(vae.get("block_out_channels", [0] * 4)) - 1)
    native = int(unet.get("sample_size", 64)) * vae_factor
    inpainting = unet.get("in_channels", 4) == INPAINT_CHANNELS
    return Detected(spec.architecture, prediction, native, inpainting=inpainting)


_UNET_CONFIGS = ("unet", "vae", "text_encoder")
_DIT_CONFIGS = ("transformer", "vae")


def _claimant(claimants: list[FamilySpec], configs: FolderConfigs) -> FamilySpec | None:
    """The family whose folder these configs are: one that claims them by its configs first
    (Flux.1 Fill's transformer in a FluxPipeline folder), else one that claims every folder."""
    by_configs = (s for s in claimants if s.folder.claims is not None and s.folder.claims(configs))
    every = (s for s in claimants if s.folder.claims is None)
    return next(by_configs, None) or next(every, None)


def _detect_transformer_folder(folder: Path, index: dict[str, Any], spec: FamilySpec) -> Detected:
    missing = [name for name in spec.folder.parts if index.get(name) in (None, [None, None])]
    if missing:
        return unsupported(f"the {spec.label} pipeline has no {_listed(missing)}")
    transformer = _read_json(folder / "transformer" / "config.json") or {}
    vae = _read_json(folder / "vae" / "config.json") or {}
    vae_factor = 2 ** (len(vae.get("block_out_channels", [0] * 4)) - 1)
    # SD 3.x's transformer states its latent size; Flux's and Z-Image's do not.
    sample_size = transformer.get("sample_size")
    native = int(sample_size) * vae_factor if sample_size else spec.native_size
    return Detected(spec.architecture, Prediction.FLOW, native)


def is_distilled_folder(folder: Path) -> bool:
    """Whether a Flux.2 Klein folder is step-distilled (`is_distilled` in its model index):
    it then runs without CFG, so `cfg` and a negative prompt change nothing."""
    index = _read_json(folder / MODEL_INDEX) or {}
    return bool(index.get("is_distilled", False))


def is_step_distilled(architecture: Architecture | None, path: Path) -> bool:
    """Whether a model runs without CFG because its folder says it is step-distilled (a
    family whose folders may be: Flux.2 Klein); then a negative prompt changes nothing."""
    if architecture is None or not spec_of(architecture).requests.step_distilled_folders:
        return False
    return is_distilled_folder(path)


def _unet_folder_reason(spec: FamilySpec, index: dict[str, Any], unet: dict[str, Any]) -> str:
    missing = [name for name in spec.folder.parts if name not in index]
    if missing or index.get("text_encoder") in (None, [None, None]):
        return f"the pipeline has no {', '.join(missing) or 'text_encoder'} (a refiner-only model?)"
    in_channels = unet.get("in_channels", 4)
    if in_channels not in (4, INPAINT_CHANNELS):
        return _in_channels_reason(in_channels)
    return ""


def _in_channels_reason(in_channels: int) -> str:
    if in_channels == 8:
        return "an instruct-pix2pix model (8 input channels); image editing is not supported"
    return f"its UNet takes {in_channels} input channels, not 4"


# ---------------------------------------------------------------- single files


def detect_file(path: Path, shapes: dict[str, list[int]] | None = None) -> Detected:
    """A checkpoint file of the UNet families, from its header (`shapes`: already read)."""
    suffix = path.suffix.lower()
    if suffix in PICKLE_SUFFIXES:
        return unsupported(pickle_refusal(path))
    if suffix != SAFETENSORS_SUFFIX:
        return unsupported(f"{path.name} is not a .safetensors checkpoint")
    if shapes is None:
        try:
            shapes = header_shapes(read_safetensors_header(path))
        except ValueError as error:
            return unsupported(f"{path.name} cannot be used: {error}")
    return detect_state_dict(shapes, sidecar_yaml=_sidecar_yaml(path))


def header_shapes(header: dict[str, Any]) -> dict[str, list[int]]:
    return {k: v.get("shape", []) for k, v in header.items() if isinstance(v, dict)}


def is_lora(keys: list[str]) -> bool:
    return any(marker in key for key in keys for marker in _LORA_MARKERS)


def pickle_refusal(path: Path) -> str:
    return (
        f"{path.name} is a pickle checkpoint ({path.suffix}); Easel does not open these "
        "because unpickling a file can run any code hidden in it. Convert it to .safetensors "
        "(for example with the 'Checkpoint Merger' of AUTOMATIC1111, or "
        "`safetensors.torch.save_file(torch.load(f, weights_only=True)['state_dict'], ...)` "
        "on a file you trust) and put the .safetensors file in the models folder"
    )


def _sidecar_yaml(path: Path) -> str | None:
    """The A1111 convention: `model.yaml` next to `model.safetensors` holds its LDM config."""
    yaml = path.with_suffix(".yaml")
    try:
        return yaml.read_text(encoding="utf-8") if yaml.is_file() else None
    except OSError:
        return None


_LORA_MARKERS = ("lora_unet_", "lora_te", "lora_down", "lora_up", "lora_A", "lora_B")
_UNET = "model.diffusion_model."


def detect_state_dict(shapes: dict[str, list[int]], sidecar_yaml: str | None = None) -> Detected:
    """Classify an original (LDM / A1111 layout) checkpoint from its tensor names and shapes."""
    keys = list(shapes)
    if is_lora(keys):
        return unsupported(
            "this is a LoRA, not a checkpoint; put it in the 'lora' folder and use it in the "
            "prompt as <lora:name:1>"
        )
    reason = _family_reason(keys)
    if reason:
        return unsupported(reason)
    first_conv = shapes.get(_UNET + "input_blocks.0.0.weight", [])
    if len(first_conv) == 4 and first_conv[1] not in (4, INPAINT_CHANNELS):
        return unsupported(_in_channels_reason(first_conv[1]))
    inpainting = len(first_conv) == 4 and first_conv[1] == INPAINT_CHANNELS
    architecture = _architecture(keys)
    if architecture is None:
        return unsupported(_no_architecture_reason(keys))
    missing = _missing_parts(architecture, keys)
    if missing:
        return unsupported(_incomplete_reason(architecture, missing))
    return replace(_complete(architecture, keys, sidecar_yaml), inpainting=inpainting)


def _missing_parts(architecture: Architecture, keys: list[str]) -> list[str]:
    """The parts (UNet, VAE, text encoders) a checkpoint of `architecture` has no weights of."""
    file = spec_of(architecture).checkpoint_file
    assert file is not None  # _architecture found it by these markers
    return [part for part, prefix in file.parts if not _has_prefix(keys, prefix)]


def _complete(architecture: Architecture, keys: list[str], sidecar_yaml: str | None) -> Detected:
    spec = spec_of(architecture)
    file = spec.checkpoint_file
    assert file is not None
    default = Prediction.V if file.v_prediction else Prediction.EPSILON
    prediction = _prediction(keys, sidecar_yaml, default)
    v_size = file.native_size_v if prediction is Prediction.V else 0
    return Detected(architecture, prediction, v_size or spec.native_size)


def _architecture(keys: list[str]) -> Architecture | None:
    """Which family's checkpoint the text encoder(s) make it, whatever else it lacks."""
    for spec in families():
        file = spec.checkpoint_file
        if file is not None and any(_has_prefix(keys, marker) for marker in file.markers):
            return spec.architecture
    return None


def _no_architecture_reason(keys: list[str]) -> str:
    for spec in families():  # a file a family knows as a part of its own (SDXL's refiner)
        refused = spec.checkpoint_file.refused if spec.checkpoint_file else ()
        for prefix, reason in refused:
            if _has_prefix(keys, prefix):
                return reason
    if _has_prefix(keys, _UNET):
        return "the file has a UNet but no text encoder (an incomplete checkpoint)"
    return f"no diffusion model Easel knows in it (not an {families_easel_runs()} checkpoint)"


def _incomplete_reason(architecture: Architecture, missing: list[str]) -> str:
    file = spec_of(architecture).checkpoint_file
    assert file is not None
    encoders = [part for part, _ in file.parts if "text encoder" in part]
    encoders_named = "text encoders" if len(encoders) > 1 else "text encoder"
    return (
        f"an incomplete {architecture.label} checkpoint, without its {_listed(missing)}; "
        f"Easel needs the UNet, the VAE and the {encoders_named} in the one file"
    )


def _listed(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"


def _family_reason(keys: list[str]) -> str:
    bare = [k.removeprefix(_UNET) for k in keys]
    for spec in families():  # transformer_files.py detects these
        file = spec.transformer_file
        if file is not None and any(k.startswith(file.markers) for k in bare):
            return f"a model of {spec.label} (its file is read by transformer_files)"
    if "edm_mean" in keys:
        return "a Playground v2.5 model (EDM); it is not supported"
    if _has_prefix(keys, "control_model.") or _has_prefix(keys, "controlnet_cond_embedding."):
        return "a ControlNet; it is not a checkpoint that generates by itself"
    if any(k.startswith(("encoder.", "decoder.")) for k in keys) and not _has_prefix(keys, _UNET):
        return "a VAE on its own, not a full checkpoint"
    return ""


def _prediction(keys: list[str], sidecar_yaml: str | None, default: Prediction) -> Prediction:
    if "v_pred" in keys:  # ComfyUI/A1111 mark v-prediction fine-tunes with this empty tensor
        return Prediction.V
    if sidecar_yaml is not None:
        compact = sidecar_yaml.replace(" ", "").replace("'", '"')
        return Prediction.V if 'parameterization:"v"' in compact else Prediction.EPSILON
    return default


def _has_prefix(keys: list[str], prefix: str) -> bool:
    return any(key.startswith(prefix) for key in keys)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # RecursionError: nested beyond reason
        return None
    return data if isinstance(data, dict) else None

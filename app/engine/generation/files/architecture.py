"""Which kind of model a folder or a checkpoint file is, without loading it.

Pure filesystem and JSON (no torch): a diffusers folder is read through its config files,
a `.safetensors` file through its header alone (the first 8 bytes give the length of a JSON
table of tensor names and shapes), so the GUI can list many multi-GB files in milliseconds.
Anything that is not a UNet family here or a transformer family (its files:
transformer_files.py), and a checkpoint file without one of its parts (UNet, VAE, text
encoders), gets an `unsupported_reason` instead of an architecture: the listing shows it,
`submit` refuses it and so does the loader, never a crash in the worker.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path
from typing import Any

# Re-exported: the header readers of LoRAs, ControlNets, upscalers and IP-Adapters use it.
from app.engine.generation.files.safetensors_header import (
    read_safetensors_header as read_safetensors_header,
)

MODEL_INDEX = "model_index.json"
SAFETENSORS_SUFFIX = ".safetensors"
PICKLE_SUFFIXES = (".ckpt", ".pt", ".pth", ".bin")
INPAINT_CHANNELS = 9  # an inpainting UNet's input: latents (4), mask (1), masked image (4)


class Architecture(Enum):
    SD1 = "sd1"
    SD2 = "sd2"
    SDXL = "sdxl"
    FLUX1 = "flux1"  # Flux.1 dev and schnell: a transformer on packed latents, CLIP + T5
    SD3 = "sd3"  # SD 3 and 3.5 (medium, large, large turbo): MMDiT, two CLIPs + T5
    ZIMAGE = "zimage"  # Z-Image (Turbo): a single-stream DiT, a Qwen3 text encoder
    FLUX2_KLEIN = "flux2-klein"  # Flux.2 Klein (4B, 9B; base and distilled): Qwen3, patched

    @property
    def label(self) -> str:
        return _ARCHITECTURE_LABELS[self.value]

    @property
    def is_transformer(self) -> bool:
        """A flow-matching transformer family (no UNet): Flux, SD 3.x, Z-Image, Flux.2 Klein."""
        return self in (
            Architecture.FLUX1, Architecture.SD3, Architecture.ZIMAGE, Architecture.FLUX2_KLEIN
        )  # fmt: skip


# The UNet families (SD 1.x, 2.x, SDXL): what single-file configs, ControlNets and the
# tiny test models exist for today.
UNET_ARCHITECTURES = (Architecture.SD1, Architecture.SD2, Architecture.SDXL)

_ARCHITECTURE_LABELS = {
    "sd1": "SD 1.x",
    "sd2": "SD 2.x",
    "sdxl": "SDXL",
    "flux1": "Flux.1",
    "sd3": "SD 3.5",
    "zimage": "Z-Image",
    "flux2-klein": "Flux.2 Klein",
}


def families_easel_runs() -> str:
    """ "SD 1.x, SD 2.x, ..., or Flux.2 Klein": for messages that say what a model is not, so
    that they name every family and never fall behind when one is added."""
    labels = [architecture.label for architecture in Architecture]
    return f"{', '.join(labels[:-1])} or {labels[-1]}"


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
    if pipeline in _TRANSFORMER_PIPELINES:
        return _detect_transformer_folder(folder, index, _TRANSFORMER_PIPELINES[pipeline])
    unet = _read_json(folder / "unet" / "config.json") or {}
    reason = _folder_unsupported_reason(pipeline, index, unet)
    if reason:
        return unsupported(reason)
    scheduler = _read_json(folder / "scheduler" / "scheduler_config.json") or {}
    prediction = (
        Prediction.V if scheduler.get("prediction_type") == "v_prediction" else Prediction.EPSILON
    )
    vae = _read_json(folder / "vae" / "config.json") or {}
    vae_factor = 2 ** (len(vae.get("block_out_channels", [0] * 4)) - 1)
    native = int(unet.get("sample_size", 64)) * vae_factor
    inpainting = unet.get("in_channels", 4) == INPAINT_CHANNELS
    if pipeline in ("StableDiffusionXLPipeline", "StableDiffusionXLInpaintPipeline"):
        return Detected(Architecture.SDXL, prediction, native, inpainting=inpainting)
    text_encoder = _read_json(folder / "text_encoder" / "config.json") or {}
    # SD 2.x's text encoder is OpenCLIP ViT-H (1024 wide, plain GELU); SD 1.x's is OpenAI
    # CLIP ViT-L (768 wide, quick GELU).
    is_sd2 = unet.get("cross_attention_dim") == 1024 or text_encoder.get("hidden_act") == "gelu"
    architecture = Architecture.SD2 if is_sd2 else Architecture.SD1
    return Detected(architecture, prediction, native, inpainting=inpainting)


# The transformer families' diffusers folders: (pipeline class name, architecture).
_TRANSFORMER_PIPELINES = {
    "FluxPipeline": Architecture.FLUX1,
    "StableDiffusion3Pipeline": Architecture.SD3,
    "ZImagePipeline": Architecture.ZIMAGE,
    "Flux2KleinPipeline": Architecture.FLUX2_KLEIN,
}
# The parts every folder of these families must have (T5 may be absent in SD 3.x, where the
# stock pipeline encodes the T5 part as zeros; Flux cannot run without it).
_TRANSFORMER_PARTS = {
    Architecture.FLUX1: ("transformer", "vae", "scheduler", "text_encoder", "text_encoder_2"),
    Architecture.SD3: ("transformer", "vae", "scheduler", "text_encoder", "text_encoder_2"),
    Architecture.ZIMAGE: ("transformer", "vae", "scheduler", "text_encoder", "tokenizer"),
    Architecture.FLUX2_KLEIN: ("transformer", "vae", "scheduler", "text_encoder", "tokenizer"),
}


def _detect_transformer_folder(
    folder: Path, index: dict[str, Any], architecture: Architecture
) -> Detected:
    missing = [
        name for name in _TRANSFORMER_PARTS[architecture] if index.get(name) in (None, [None, None])
    ]
    if missing:
        return unsupported(f"the {architecture.label} pipeline has no {_listed(missing)}")
    transformer = _read_json(folder / "transformer" / "config.json") or {}
    vae = _read_json(folder / "vae" / "config.json") or {}
    vae_factor = 2 ** (len(vae.get("block_out_channels", [0] * 4)) - 1)
    # SD 3.x's transformer states its latent size; Flux's and Z-Image's do not (1024).
    sample_size = transformer.get("sample_size")
    native = int(sample_size) * vae_factor if sample_size else 1024
    return Detected(architecture, Prediction.FLOW, native)


def is_distilled_folder(folder: Path) -> bool:
    """Whether a Flux.2 Klein folder is step-distilled (`is_distilled` in its model index):
    it then runs without CFG, so `cfg` and a negative prompt change nothing."""
    index = _read_json(folder / MODEL_INDEX) or {}
    return bool(index.get("is_distilled", False))


_FOLDER_PIPELINES = (
    "StableDiffusionPipeline",
    "StableDiffusionXLPipeline",
    "StableDiffusionInpaintPipeline",
    "StableDiffusionXLInpaintPipeline",
)


def _folder_unsupported_reason(pipeline: str, index: dict[str, Any], unet: dict[str, Any]) -> str:
    if pipeline not in _FOLDER_PIPELINES:
        kind = pipeline or "an unknown pipeline"
        families = families_easel_runs()
        return f"{kind} is not a text-to-image pipeline of a family Easel runs ({families})"
    missing = [name for name in ("unet", "vae", "scheduler", "text_encoder") if name not in index]
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
_FLUX_MARKERS = ("double_blocks.", "single_blocks.")
_SD3_MARKERS = ("joint_blocks.",)
_UNET = "model.diffusion_model."
_VAE = "first_stage_model."
_SDXL_CLIP = "conditioner.embedders.0.transformer."  # CLIP ViT-L, as SD 1.x's
_SDXL_OPEN_CLIP = "conditioner.embedders.1.model."  # OpenCLIP ViT-bigG
_SD2_OPEN_CLIP = "cond_stage_model.model."  # OpenCLIP ViT-H
_SD1_CLIP = "cond_stage_model.transformer."

# What a single-file checkpoint of each kind holds: (the part, the prefix of its weights).
# diffusers builds every part it lacks from the config folder, which has no weights, and
# fails in the worker with a page of Python advice; the header shows the gap at once.
_PARTS: dict[Architecture, tuple[tuple[str, str], ...]] = {
    Architecture.SD1: (("UNet", _UNET), ("VAE", _VAE), ("text encoder", _SD1_CLIP)),
    Architecture.SD2: (("UNet", _UNET), ("VAE", _VAE), ("text encoder", _SD2_OPEN_CLIP)),
    Architecture.SDXL: (
        ("UNet", _UNET),
        ("VAE", _VAE),
        ("first text encoder (CLIP ViT-L)", _SDXL_CLIP),
        ("second text encoder (OpenCLIP ViT-bigG)", _SDXL_OPEN_CLIP),
    ),
}


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
    return [part for part, prefix in _PARTS[architecture] if not _has_prefix(keys, prefix)]


def _complete(architecture: Architecture, keys: list[str], sidecar_yaml: str | None) -> Detected:
    if architecture is Architecture.SDXL:
        return Detected(
            Architecture.SDXL, _prediction(keys, sidecar_yaml, Prediction.EPSILON), 1024
        )
    if architecture is Architecture.SD2:
        # SD 2.x ships two kinds: 512 epsilon (base) and 768 v-prediction (the common one).
        prediction = _prediction(keys, sidecar_yaml, Prediction.V)
        return Detected(Architecture.SD2, prediction, 768 if prediction is Prediction.V else 512)
    return Detected(Architecture.SD1, _prediction(keys, sidecar_yaml, Prediction.EPSILON), 512)


def _architecture(keys: list[str]) -> Architecture | None:
    """Which kind of checkpoint the text encoder(s) make it, whatever else it lacks."""
    if _has_prefix(keys, _SDXL_OPEN_CLIP) or _has_prefix(keys, _SDXL_CLIP):
        return Architecture.SDXL
    if _has_prefix(keys, _SD2_OPEN_CLIP):
        return Architecture.SD2
    if _has_prefix(keys, _SD1_CLIP):
        return Architecture.SD1
    return None


def _no_architecture_reason(keys: list[str]) -> str:
    if _has_prefix(keys, "conditioner.embedders.0.model."):
        return (
            "an SDXL refiner (it has only the OpenCLIP text encoder); "
            "refiner-only models cannot make an image from a prompt alone"
        )
    if _has_prefix(keys, _UNET):
        return "the file has a UNet but no text encoder (an incomplete checkpoint)"
    return f"no diffusion model Easel knows in it (not an {families_easel_runs()} checkpoint)"


def _incomplete_reason(architecture: Architecture, missing: list[str]) -> str:
    encoders = "text encoders" if architecture is Architecture.SDXL else "text encoder"
    return (
        f"an incomplete {architecture.label} checkpoint, without its {_listed(missing)}; "
        f"Easel needs the UNet, the VAE and the {encoders} in the one file"
    )


def _listed(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"


def _family_reason(keys: list[str]) -> str:
    bare = [k.removeprefix(_UNET) for k in keys]
    if any(k.startswith(_FLUX_MARKERS) for k in bare):  # transformer_files.py detects these
        return "a Flux model (its file is read by transformer_files.detect_model_file)"
    if any(k.startswith(_SD3_MARKERS) for k in bare):
        return "an SD 3 model (its file is read by transformer_files.detect_model_file)"
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

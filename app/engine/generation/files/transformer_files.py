"""Flux.1, Flux.1 Kontext, Chroma, SD 3.5 and Wan 2.1 from the files artists download,
told apart by their headers (Kontext's by its name: its keys are Flux.1 dev's; Wan 2.1 text
to video: its transformer in Wan-AI's keys, `.safetensors` or city96's GGUF, beside
ComfyUI's `umt5_xxl_*.safetensors` and `wan_2.1_vae.safetensors`).

Pure filesystem and JSON (no torch), like architecture.py. A diffusion model of these
families comes as
- one all-in-one `.safetensors` in the original key layout (Black Forest Labs'
  `double_blocks.` / `single_blocks.`, Stability's `joint_blocks.`, either possibly under
  `model.diffusion_model.`), with or without its text encoders (`text_encoders.clip_l.`,
  `text_encoders.clip_g.`, `text_encoders.t5xxl.`) and VAE (`first_stage_model.`, `vae.`);
- or the split layout ComfyUI made common: the diffusion model in `diffusion_models/` (or
  `unet/`), the text encoders in `text_encoders/` (or `clip/`), the VAE in `vae/`, all in
  one models folder.

Every part the diffusion model file lacks is looked for in the split folders beside it, and
paired by family and size, from the headers: the transformer's input layers state the
width of each text encoder it was trained with (Flux and Kontext: `vector_in` = CLIP-L,
`txt_in` = T5; Chroma: `txt_in` = T5 alone; SD 3.x: `y_embedder` = CLIP-L + CLIP-G,
`context_embedder` = T5) and the latent channels of its VAE. Families whose files share
block names (Flux.1, Kontext, Chroma) are told apart by their declarations' `claims`:
Chroma by its `distilled_guidance_layer`, Kontext by "kontext" in the file name (its
tensors are Flux.1 dev's, and its releases carry no metadata saying otherwise). Of several
files that fit, the first by name is used (`text_encoders/` before `clip/`); a file of the
right kind but the wrong size is named in the refusal when nothing fits. What is still
missing is said in one sentence, e.g. "flux1-dev: needs a T5-XXL text encoder in
text_encoders/".
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from app.engine.generation.files.architecture import (
    SAFETENSORS_SUFFIX,
    Architecture,
    Detected,
    Part,
    Prediction,
    detect_file,
    header_shapes,
    is_lora,
    read_safetensors_header,
    unsupported,
)
from app.engine.generation.files.registry import FamilySpec, families

Shapes = dict[str, list[int]]

DIFFUSION_MODEL_FOLDERS = ("diffusion_models", "unet")
TEXT_ENCODER_FOLDERS = ("text_encoders", "clip")
VAE_FOLDERS = ("vae",)
CHECKPOINT_FOLDERS = ("checkpoints",)

DIFFUSION_PREFIX = "model.diffusion_model."
CLIP_L_PREFIX = "text_encoders.clip_l.transformer."
CLIP_G_PREFIX = "text_encoders.clip_g.transformer."
T5_PREFIX = "text_encoders.t5xxl.transformer."
VAE_PREFIXES = ("first_stage_model.", "vae.")
# The other parts' keys in an all-in-one file: not the diffusion model's.
NOT_DIFFUSION_PREFIXES = ("text_encoders.", "first_stage_model.", "vae.", "conditioner.")

_CLIP_EMBEDDING = "text_model.embeddings.token_embedding.weight"
_CLIP_EMBEDDING_FLAT = "embeddings.token_embedding.weight"  # transformers >= 5 saves these
_T5_NORM = "encoder.final_layer_norm.weight"
# UMT5 (Wan's text encoder) is laid out as T5, but every layer has its own relative
# positions: the second layer's table tells it from T5 v1.1 of the same width.
_UMT5_SECOND_BIAS = "encoder.block.1.layer.0.SelfAttention.relative_attention_bias.weight"
_WAN_VAE_MIDDLE = "decoder.middle.0.residual.0.gamma"  # the Wan VAE, original keys
_WAN_VAE_LATENTS = "conv2.weight"  # (latent channels, latent channels, 1, 1, 1)
_VAE_DECODER_IN = "decoder.conv_in.weight"
# A Qwen2 language model (Qwen2.5-VL's, in Qwen's released layout as ComfyUI keeps it:
# `model.` and `visual.`, or transformers 5's `model.language_model.`): its embedding
# gives the width; the attention biases tell it from Qwen3 (Z-Image's), which has none.
_QWEN2_EMBEDDINGS = ("model.embed_tokens.weight", "model.language_model.embed_tokens.weight")
_QWEN2_BIASES = (
    "model.layers.0.self_attn.q_proj.bias",
    "model.language_model.layers.0.self_attn.q_proj.bias",
)
# The LTX-Video VAE, Lightricks' keys: its convolutions are causal 3D ones (`.conv.` inside);
# under `vae.` in Lightricks' all-in-one files, bare in a VAE file of its own.
_LTX_VAE_DECODER_IN = "decoder.conv_in.conv.weight"  # (out, latent channels, t, h, w)
LTX_VAE_PREFIX = "vae."

# The parts of each family, in the order a refusal names them.
CLIP_L = "clip_l"
CLIP_G = "clip_g"
T5 = "t5"
UMT5 = "umt5"
QWEN_VL = "qwen2.5-vl"
VAE = "vae"
WAN_VAE = "wan_vae"
LTX_VAE = "ltx_vae"
TRANSFORMER = "transformer"
CLIP_PAIR = CLIP_L + "+" + CLIP_G  # the width of CLIP-L's and CLIP-G's pooled vectors together
_PART_NAMES = {
    CLIP_L: "a CLIP-L text encoder",
    CLIP_G: "a CLIP-G text encoder",
    T5: "a T5-XXL text encoder",
    UMT5: "a UMT5-XXL text encoder",
    QWEN_VL: "a Qwen2.5-VL text encoder",
    VAE: "a VAE",
    WAN_VAE: "a Wan VAE",
    LTX_VAE: "an LTX-Video VAE",
}
_VAE_KINDS = (VAE, WAN_VAE, LTX_VAE)


@dataclass(frozen=True)
class _Candidate:
    # "clip", "t5", "umt5", "qwen2.5-vl", "vae", "wan_vae" or "ltx_vae" (CLIP: its width says)
    kind: str
    path: Path
    prefix: str
    width: int  # hidden size of a text encoder; latent channels of a VAE


@dataclass(frozen=True)
class FileNeeds:
    """What a transformer's header says its other parts must be (each family reads its own
    header: `TransformerFile.read_header` of its declaration)."""

    architecture: Architecture
    config_name: str
    widths: dict[str, int]  # part -> width it must have


GGUF_SUFFIX = ".gguf"
# The GGUF tensor types diffusers 0.42 runs (diffusers.quantizers.gguf.utils.
# SUPPORTED_GGUF_QUANT_TYPES, plus the plain F32 / F16; a test checks they agree).
GGUF_RUNNABLE = (
    "F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0",
    "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS",
)  # fmt: skip
_UNQUANTISED = ("F32", "F16", "BF16")


def detect_model_file(path: Path) -> Detected:
    """Any checkpoint file: Flux / SD 3.x here, the UNet families by architecture.py."""
    if path.suffix.lower() == GGUF_SUFFIX:
        return _detect_gguf(path)
    if path.suffix.lower() != SAFETENSORS_SUFFIX:
        return detect_file(path)
    try:
        header = read_safetensors_header(path)
    except ValueError as error:
        return unsupported(f"{path.name} cannot be used: {error}")
    shapes = header_shapes(header)
    if _family_of_keys(list(shapes)) is not None and not is_lora(list(shapes)):
        found = detect_transformer_file(path, shapes)
        quantisation = _fp8(header)
        problem = scaled_fp8_problem(header) if quantisation == SCALED_FP8 else ""
        if problem and found.supported:
            return unsupported(f"{path.name} cannot be used: {problem}")
        return replace(found, quantisation=quantisation) if found.supported else found
    return detect_file(path, shapes)


FP8 = "fp8"  # float8_e4m3fn weights, as the fp8 Flux / SD 3.5 files are stored
FP8_E5M2 = "fp8 e5m2"
# ComfyUI's fp8_scaled files (`<layer>.scale_weight`, and the `scaled_fp8` mark) and its
# later mixed ones (`<layer>.weight_scale`, as qwen_image_edit_2511_fp8mixed): each weight
# is its fp8 values times its scale, dequantised as it loads (load/assemble.py).
SCALED_FP8 = "fp8 scaled"
FP8_SCALES = (".scale_weight", ".weight_scale")  # the same scale (comfy.utils.convert_old_quants)
_FP8_DTYPES = {"F8_E4M3": FP8, "F8_E5M2": FP8_E5M2}


def _fp8(header: dict[str, Any]) -> str:
    """ "fp8" when the diffusion model's weight matrices are stored in float8, "fp8 scaled"
    when they carry ComfyUI's scales ("" if neither)."""
    own = [key for key in header if not key.startswith(NOT_DIFFUSION_PREFIXES)]
    if any(k == "scaled_fp8" or k.endswith((".scaled_fp8", *FP8_SCALES)) for k in own):
        return SCALED_FP8
    kinds = [
        entry.get("dtype", "")
        for key, entry in header.items()
        if isinstance(entry, dict)
        and not key.startswith(NOT_DIFFUSION_PREFIXES)
        and len(entry.get("shape", [])) == 2
    ]
    fp8 = [_FP8_DTYPES[kind] for kind in kinds if kind in _FP8_DTYPES]
    return max(set(fp8), key=fp8.count) if len(fp8) * 2 > len(kinds) else ""


def scaled_fp8_problem(header: dict[str, Any]) -> str:
    """Why a scaled fp8 file's scales cannot be applied ("" if they can): each must be one
    number (ComfyUI's fp8 layers scale a whole tensor) beside an fp8 weight in the file;
    a block scale (nvfp4's) or a scale of no weight is a layout Easel does not read."""
    for key, entry in header.items():
        if not key.endswith(FP8_SCALES) or not isinstance(entry, dict):
            continue
        weight = key[: -len(".weight_scale")] + ".weight"  # both spellings are 13 long
        stored = header.get(weight)
        if not isinstance(stored, dict):
            return f"its scale {key} belongs to no weight ({weight} is not in the file)"
        values = math.prod(entry.get("shape", []))
        if values != 1:
            return (
                f"its scale {key} holds {values} values, not the one per tensor of "
                "ComfyUI's fp8 scaled files (a block-quantised layout Easel cannot run)"
            )
        if stored.get("dtype") not in _FP8_DTYPES:
            return (
                f"its weight {weight} is stored as {stored.get('dtype')}, not fp8, with a "
                f"scale ({key}): a quantisation Easel cannot run"
            )
    return ""


def _detect_gguf(path: Path) -> Detected:
    """A GGUF diffusion model (city96's ComfyUI-GGUF layout: the original keys, without
    `model.diffusion_model.`), from its tensor table; the weights are not read."""
    problem = gguf_counts_problem(path)
    if problem:
        return unsupported(f"{path.name} cannot be used: {problem}")
    try:
        shapes, types = read_gguf_table(path)
    except Exception:  # gguf's reader fails on damage in many ways (numpy's)
        return unsupported(
            f"{path.name} cannot be used: it is not a readable GGUF file (its tables are damaged)"
        )
    if _family_of_keys(list(shapes)) is None:
        kinds = " or ".join(spec.label for spec in families() if spec.transformer_file)
        return unsupported(f"{path.name} is a GGUF file, but not a {kinds} diffusion model")
    odd = sorted({kind for kind in types.values() if kind not in GGUF_RUNNABLE})
    if odd:
        return unsupported(
            f"{path.stem}: its weights are GGUF {_listed(odd)}, a quantisation diffusers "
            f"cannot run (it runs {', '.join(k for k in GGUF_RUNNABLE if k not in _UNQUANTISED)})"
        )
    found = detect_transformer_file(path, shapes)
    quantised = [kind for kind in types.values() if kind not in _UNQUANTISED]
    main = max(set(quantised), key=quantised.count) if quantised else "F16"
    return replace(found, quantisation=main) if found.supported else found


_GGUF_MAGIC = b"GGUF"
_GGUF_COUNTS = struct.Struct("<4sIQQ")  # magic, version, tensor count, key/value count
_GGUF_COUNTS_BIG_ENDIAN = struct.Struct(">4sIQQ")
# The fewest bytes one table entry takes: a tensor (name length, dimension count, type,
# offset) and a key/value (key length, value type, a one-byte value).
_GGUF_MIN_TENSOR_BYTES = 8 + 4 + 4 + 8
_GGUF_MIN_KV_BYTES = 8 + 4 + 1


def gguf_counts_problem(path: Path) -> str:
    """Why the counts at the start of a GGUF file cannot be true ("" if they can): gguf's
    reader loops over them in Python, so a file that claims 2^62 entries is refused first."""
    try:
        with path.open("rb") as handle:
            start = handle.read(_GGUF_COUNTS.size)
            size = path.stat().st_size
    except OSError as error:
        return f"it cannot be read ({error.strerror or 'read error'})"
    if len(start) < _GGUF_COUNTS.size or not start.startswith(_GGUF_MAGIC):
        return "it is not a readable GGUF file (no GGUF header)"
    _, version, tensors, keys = _GGUF_COUNTS.unpack(start)
    if version & 0xFFFF == 0:  # a big-endian file (gguf's reader tells them apart so too)
        _, _, tensors, keys = _GGUF_COUNTS_BIG_ENDIAN.unpack(start)
    room = size - _GGUF_COUNTS.size
    if tensors * _GGUF_MIN_TENSOR_BYTES + keys * _GGUF_MIN_KV_BYTES > room:
        return (
            f"it is not a readable GGUF file (it claims {tensors} tensors and {keys} "
            f"metadata entries, more than its {size} bytes can hold)"
        )
    return ""


def read_gguf_table(path: Path) -> tuple[Shapes, dict[str, str]]:
    """Tensor name -> shape (torch order) and -> GGUF type name, from the file's table."""
    from gguf import GGUFReader  # numpy, not torch: fine for the listing

    reader = GGUFReader(str(path))
    shapes = {t.name: [int(n) for n in reversed(t.shape)] for t in reader.tensors}
    return shapes, {t.name: t.tensor_type.name for t in reader.tensors}


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _family_of_keys(keys: list[str], name: str = "") -> FamilySpec | None:
    """The transformer family whose block keys these are (original layout), if any: of the
    families with these markers, one whose declaration claims the file (by its keys or its
    `name`: Chroma, Flux.1 Kontext) first, else the one that takes every such file."""
    bare = [k.removeprefix(DIFFUSION_PREFIX) for k in keys]
    marked = [
        (spec, spec.transformer_file)
        for spec in families()
        if spec.transformer_file is not None
        and any(k.startswith(spec.transformer_file.markers) for k in bare)
    ]
    claimed = (spec for spec, file in marked if file.claims is not None and file.claims(bare, name))
    every = (spec for spec, file in marked if file.claims is None)
    return next(claimed, None) or next(every, None)


def detect_transformer_file(path: Path, shapes: Shapes) -> Detected:
    """A Flux.1 or SD 3.x diffusion model file, with the parts found for it, or the reason
    it cannot be used (what is missing, or which file does not fit)."""
    name = path.stem
    prefix = DIFFUSION_PREFIX if any(k.startswith(DIFFUSION_PREFIX) for k in shapes) else ""
    bare = {k.removeprefix(prefix): v for k, v in shapes.items() if k.startswith(prefix)}
    spec = _family_of_keys(list(bare), name)
    if spec is None or spec.transformer_file is None:
        return unsupported(f"{name}: no diffusion model Easel knows in it")
    needs = spec.transformer_file.read_header(bare, name)
    if isinstance(needs, str):
        return unsupported(f"{name}: {needs}")
    parts = {TRANSFORMER: Part(TRANSFORMER, path, prefix)}
    embedded = _embedded_candidates(path, shapes)
    wanted = spec.transformer_file.split_parts
    split = _split_candidates(path)
    found, problems = _pair(needs, wanted, embedded, split)
    parts.update(found)
    missing = [kind for kind in wanted if kind not in parts]
    if missing:
        if problems:
            return unsupported(f"{name}: {problems[0]}")
        names = {**_PART_NAMES, **dict(spec.transformer_file.part_names)}
        return unsupported(f"{name}: needs {_needs_sentence(missing, names)}")
    check = spec.transformer_file.parts_problem
    problem = check(parts) if check is not None else ""
    if problem:
        return unsupported(f"{name}: {problem}")
    declared = needs.architecture.spec.transformer_file
    if declared is not None and declared.find_folders is not None:
        folders = declared.find_folders(path)
        if isinstance(folders, str):
            return unsupported(f"{name}: {folders}")
    read_vae = spec.transformer_file.read_vae
    if read_vae is not None:  # the config also depends on the VAE's version (LTX-Video)
        released = _release_of_vae(read_vae, needs, parts, embedded + split, path, shapes)
        if isinstance(released, str):
            return unsupported(f"{name}: {released}")
        needs, parts = released
    return Detected(
        needs.architecture,
        Prediction.FLOW,
        spec.native_size,
        config_name=needs.config_name,
        parts=tuple(sorted(parts.values(), key=lambda p: p.kind)),
    )


def _release_of_vae(
    read_vae: Callable[[FileNeeds, Shapes], FileNeeds | str],
    needs: FileNeeds,
    parts: dict[str, Part],
    candidates: list[_Candidate],
    path: Path,
    shapes: Shapes,
) -> tuple[FileNeeds, dict[str, Part]] | str:
    """What the files need once the paired VAE's release is read (`read_vae`); where that
    VAE does not fit the transformer (an LTX-Video 13B's beside an older VAE), the first
    other VAE of its kind and width that does (its own, further down `vae/`); else why
    the paired one does not."""
    paired = next(part for part in parts.values() if part.kind in _VAE_KINDS)
    first = read_vae(needs, _part_shapes(paired, path, shapes))
    if not isinstance(first, str):
        return first, parts
    width = needs.widths[paired.kind]
    for candidate in candidates:
        other = _part(paired.kind, candidate)
        if candidate.kind != paired.kind or candidate.width != width or other == paired:
            continue
        read = read_vae(needs, _part_shapes(other, path, shapes))
        if not isinstance(read, str):
            return read, {**parts, paired.kind: other}
    return first


def _part_shapes(part: Part, path: Path, shapes: Shapes) -> Shapes:
    """A part's tensor shapes, its prefix taken off: from `shapes` where it is in the
    transformer's own file `path`, else from its file's header."""
    if part.path != path:
        try:
            shapes = header_shapes(read_safetensors_header(part.path))
        except ValueError:
            return {}  # listed readable a moment ago: the loader will name the damage
    return {
        key.removeprefix(part.prefix): shape
        for key, shape in shapes.items()
        if key.startswith(part.prefix)
    }


def _embedded_candidates(path: Path, shapes: Shapes) -> list[_Candidate]:
    found = []
    for prefix in (CLIP_L_PREFIX, CLIP_G_PREFIX):
        clip = _clip_width(shapes, prefix)
        if clip:
            found.append(_Candidate("clip", path, prefix, clip))
    t5 = shapes.get(T5_PREFIX + _T5_NORM)
    if t5:
        found.append(_Candidate("t5", path, T5_PREFIX, t5[0]))
    for prefix in VAE_PREFIXES:
        vae = shapes.get(prefix + _VAE_DECODER_IN)
        if vae and len(vae) == 4:
            found.append(_Candidate("vae", path, prefix, vae[1]))
            break
    ltx_vae = shapes.get(LTX_VAE_PREFIX + _LTX_VAE_DECODER_IN)
    if ltx_vae and len(ltx_vae) == 5:
        found.append(_Candidate(LTX_VAE, path, LTX_VAE_PREFIX, ltx_vae[1]))
    return found


def _clip_width(shapes: Shapes, prefix: str) -> int:
    for key in (_CLIP_EMBEDDING, _CLIP_EMBEDDING_FLAT):
        shape = shapes.get(prefix + key)
        if shape and len(shape) == 2:
            return shape[1]
    return 0


def _split_candidates(path: Path) -> list[_Candidate]:
    """Text encoder and VAE files in the split folders of the models folder `path` is in."""
    root = path.parent
    if root.name in (*DIFFUSION_MODEL_FOLDERS, *CHECKPOINT_FOLDERS):
        root = root.parent
    found: list[_Candidate] = []
    for folder in (*TEXT_ENCODER_FOLDERS, *VAE_FOLDERS):
        for file in _safetensors_in(root / folder):
            candidate = _classify(file)
            if candidate is not None:
                found.append(candidate)
    return found


def _safetensors_in(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.suffix.lower() == SAFETENSORS_SUFFIX)
    except OSError:
        return []


def _classify(path: Path) -> _Candidate | None:
    try:
        header = read_safetensors_header(path)
    except ValueError:
        return None  # a damaged file is no candidate; it is named if the part stays missing
    shapes = header_shapes(header)
    clip = _clip_width(shapes, "")
    if clip:
        return _Candidate("clip", path, "", clip)
    t5 = shapes.get(_T5_NORM)
    if t5:
        return _Candidate(UMT5 if _UMT5_SECOND_BIAS in shapes else T5, path, "", t5[0])
    qwen = next((shapes[key] for key in _QWEN2_EMBEDDINGS if key in shapes), None)
    if qwen and len(qwen) == 2 and any(key in shapes for key in _QWEN2_BIASES):
        return _Candidate(QWEN_VL, path, "", qwen[1])
    wan_vae = shapes.get(_WAN_VAE_LATENTS)
    if _WAN_VAE_MIDDLE in shapes and wan_vae:
        return _Candidate(WAN_VAE, path, "", wan_vae[0])
    vae = shapes.get(_VAE_DECODER_IN)
    if vae and len(vae) == 4:
        return _Candidate("vae", path, "", vae[1])
    ltx_vae = shapes.get(_LTX_VAE_DECODER_IN)
    if ltx_vae and len(ltx_vae) == 5:
        return _Candidate(LTX_VAE, path, "", ltx_vae[1])
    embedded = _embedded_candidates(path, shapes)  # an all-in-one file's parts also serve
    return embedded[0] if len(embedded) == 1 else None


def _pair(
    needs: FileNeeds, wanted: tuple[str, ...], embedded: list[_Candidate], split: list[_Candidate]
) -> tuple[dict[str, Part], list[str]]:
    """The parts that fit, the file's own first, and why a file of a kind did not fit."""
    parts: dict[str, Part] = {}
    problems: list[str] = []
    candidates = embedded + split
    for kind in (kind for kind in (T5, UMT5, QWEN_VL, VAE, WAN_VAE, LTX_VAE) if kind in wanted):
        width = needs.widths[kind]
        fits = [c for c in candidates if c.kind == kind and c.width == width]
        if fits:
            parts[kind] = _part(kind, fits[0])
        else:
            problems += [_misfit(kind, c, width) for c in candidates if c.kind == kind]
    clips = [c for c in candidates if c.kind == "clip"]
    if CLIP_L not in wanted:  # T5 alone (Chroma), UMT5 alone (Wan), Qwen2.5-VL (Qwen-Image)
        return parts, problems
    if CLIP_G not in wanted:  # one CLIP (Flux.1): its width is stated alone
        width = needs.widths[CLIP_L]
        fits = [c for c in clips if c.width == width]
        if fits:
            parts[CLIP_L] = _part(CLIP_L, fits[0])
        else:
            problems += [_misfit(CLIP_L, c, width) for c in clips]
        return parts, problems
    pooled = needs.widths[CLIP_PAIR]
    pairs = [
        (small, wide)
        for small in clips
        for wide in clips
        if small.width < wide.width and small.width + wide.width == pooled
    ]
    if pairs:
        parts[CLIP_L], parts[CLIP_G] = _part(CLIP_L, pairs[0][0]), _part(CLIP_G, pairs[0][1])
    elif clips:
        widths = ", ".join(f"{c.path.name} ({c.width})" for c in clips)
        problems.append(
            f"its CLIP-L and CLIP-G text encoders must be {pooled} wide together; found {widths}"
        )
    return parts, problems


def _part(kind: str, candidate: _Candidate) -> Part:
    return Part(kind, candidate.path, candidate.prefix)


def _misfit(kind: str, candidate: _Candidate, width: int) -> str:
    if kind in _VAE_KINDS:
        return (
            f"{_where(candidate)} is {_PART_NAMES[kind]} of {candidate.width} latent channels, "
            f"but the model needs {width}"
        )
    what = {T5: "T5", UMT5: "UMT5", QWEN_VL: "Qwen2.5-VL"}.get(kind, "CLIP")
    return (
        f"{_where(candidate)} is a {what} text encoder {candidate.width} wide, but the model "
        f"needs {_PART_NAMES[kind]} {width} wide"
    )


def _where(candidate: _Candidate) -> str:
    return f"{candidate.path.name} in {candidate.path.parent.name}/"


def _folder_of(kind: str) -> str:
    return VAE_FOLDERS[0] if kind in _VAE_KINDS else TEXT_ENCODER_FOLDERS[0]


def _needs_sentence(missing: list[str], names: dict[str, str]) -> str:
    phrases = [f"{names[kind]} in {_folder_of(kind)}/" for kind in missing]
    return phrases[0] if len(phrases) == 1 else f"{', '.join(phrases[:-1])} and {phrases[-1]}"

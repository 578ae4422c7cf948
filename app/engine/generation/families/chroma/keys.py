"""Chroma's transformer keys: lodestones' layout (the `chroma-unlocked-v*.safetensors` and
Chroma1-HD files artists download, Flux.1-schnell's blocks without their modulation layers,
beside a `distilled_guidance_layer` that makes every block's modulation) to diffusers'
`ChromaTransformer2DModel` and back (the back way builds the tests' files).

The renames of diffusers' `convert_chroma_transformer_checkpoint_to_diffusers`, which fixes
the attention width at 3072 and so cannot read a smaller model; the blocks go through
Flux.1's converter (families/flux/keys.py, `modulated=False`), which reads the width from
`img_in`. A test checks the two agree at the released width.
"""

from __future__ import annotations

from app.engine.generation.families.flux.keys import (
    StateDict,
    flux_from_diffusers,
    flux_to_diffusers,
)

GUIDANCE = "distilled_guidance_layer."
# lodestones' names in the guidance layer -> diffusers' (the rest of its keys are equal).
_GUIDANCE_RENAMES = ((".in_layer.", ".linear_1."), (".out_layer.", ".linear_2."))


def chroma_to_diffusers(checkpoint: StateDict) -> StateDict:
    """lodestones' Chroma keys (possibly under `model.diffusion_model.`) -> diffusers'."""
    source = {
        key.removeprefix("model.diffusion_model."): value for key, value in checkpoint.items()
    }
    guidance = {key: source.pop(key) for key in list(source) if key.startswith(GUIDANCE)}
    out = flux_to_diffusers(source, modulated=False)
    for key, value in guidance.items():
        out[_guidance_to_diffusers(key)] = value
    return out


def chroma_from_diffusers(state: StateDict) -> StateDict:
    """The inverse of `chroma_to_diffusers`: diffusers' keys -> lodestones' layout."""
    blocks = {key: value for key, value in state.items() if not key.startswith(GUIDANCE)}
    out = flux_from_diffusers(blocks, modulated=False)
    for key, value in state.items():
        if key.startswith(GUIDANCE):
            out[_guidance_from_diffusers(key)] = value
    return out


def _guidance_to_diffusers(key: str) -> str:
    if ".norms." in key:
        return key.removesuffix(".scale") + ".weight"
    for original, diffusers_name in _GUIDANCE_RENAMES:
        key = key.replace(original, diffusers_name)
    return key


def _guidance_from_diffusers(key: str) -> str:
    if ".norms." in key:
        return key.removesuffix(".weight") + ".scale"
    for original, diffusers_name in _GUIDANCE_RENAMES:
        key = key.replace(diffusers_name, original)
    return key

"""What a flow-matching model (Flux, SD 3.x) cannot run, said at submit time (no torch).

Their stock pipelines have one scheduler, the flow-matching Euler of diffusers
(`FlowMatchEulerDiscreteScheduler`), which Easel offers under A1111's name "Euler"; the
other A1111 samplers are noise-prediction schedulers these models were not made for. Their
latents are patched two by two after the VAE's factor of 8, so a side must be a multiple
of 16 (`StableDiffusion3Pipeline.check_inputs`; Flux packs 2x2 the same way). IP-Adapter
reference images are the UNet families' (SD 3.5's IP-Adapter is another format).
`request_checks.check_runnable` asks `flow_problem`; the families raise the same sentence.
"""

from __future__ import annotations

from app.engine.generation.architecture import Architecture
from app.engine.jobs.params import GenerationParams

FLOW_SAMPLERS = ("Euler",)
FLOW_SIZE_MULTIPLE = 16


def sampler_problem(scheduler: str, label: str) -> str:
    if scheduler in FLOW_SAMPLERS:
        return ""
    return (
        f"{label} models run with the {' or '.join(FLOW_SAMPLERS)} sampler only "
        f"(flow matching), not {scheduler!r}"
    )


def flow_problem(params: GenerationParams, architecture: Architecture | None) -> str:
    """Why a flow-matching model of `architecture` cannot run `params`, or "" (also "" for
    the UNet families, which this does not judge)."""
    if architecture is None or not architecture.is_transformer:
        return ""
    label = architecture.label
    if problem := sampler_problem(params.scheduler, label):
        return problem
    if params.width % FLOW_SIZE_MULTIPLE or params.height % FLOW_SIZE_MULTIPLE:
        return (
            f"{label} models draw sizes in multiples of {FLOW_SIZE_MULTIPLE} pixels, "
            f"not {params.width}x{params.height}"
        )
    if params.reference:
        return f"reference images (IP-Adapter) work with SD 1.x, 2.x and SDXL models, not {label}"
    return ""

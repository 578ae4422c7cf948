"""What the flow-matching families (Flux.1, SD 3.x, Z-Image, Flux.2 Klein) make of
`GenerationParams`, torch-free.

`request_checks.check_runnable` asks `flow_problems` at submit time, so a sampler or size
such a model cannot take is one sentence then, never a FAILED job later.

- The sampler: only "Euler" (Easel's default) is a flow-matching sampler here; it maps
  to diffusers' `FlowMatchEulerDiscreteScheduler`, the scheduler the released folders ship.
  The other A1111 names are noise-prediction (epsilon/v) samplers and are refused.
- The size: the transformer sees 2x2 patches of the latents, so a side must be a multiple
  of 16 pixels (the VAE's 8 times the patch's 2); the stock pipelines would otherwise
  draw a smaller image than asked (they round down and warn).
- Flux.1's guidance: `cfg` is the distilled guidance the dev model takes as an input
  (ComfyUI's FluxGuidance, Forge's "Distilled CFG"), one model call per step; schnell has
  no guidance input and ignores it. Easel runs no true CFG on Flux.1, so a negative
  prompt would change nothing: it is refused rather than silently dropped.
- Flux.2 Klein: `cfg` is true CFG on the base models (the negative prompt is read) and
  ignored by the step-distilled ones, as by the stock pipelines (`families.klein.model`); text to
  image and inpaint (`Flux2KleinInpaintPipeline`), no img2img: diffusers has no Klein
  img2img pipeline to mirror.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from app.engine.generation.files.registry import Requests, families
from app.engine.jobs.params import KIND_EDIT

if TYPE_CHECKING:
    from app.engine.generation.files.architecture import Architecture
    from app.engine.jobs.params import GenerationParams

FLOW_SAMPLERS: dict[str, str] = {"Euler": "FlowMatchEulerDiscreteScheduler"}
FLOW_SIZE_MULTIPLE = 16  # the VAE's 8 times the transformer's 2x2 patches
# What every flow-matching family takes unless its declaration says otherwise.
FLOW_REQUESTS = Requests(
    samplers=tuple(FLOW_SAMPLERS), size_multiple=FLOW_SIZE_MULTIPLE, reference_images=False
)
KLEIN_IMG2IMG_REFUSAL = (  # diffusers has a Klein inpaint pipeline, no img2img one
    "Flux.2 Klein cannot run img2img in Easel (an init image without a mask), only text to "
    "image and inpaint; add a mask or clear the init image"
)


def sampler_problem(
    scheduler: str, label: str, samplers: Sequence[str] = tuple(FLOW_SAMPLERS)
) -> str | None:
    """Why a `label` (flow-matching) model, which takes `samplers`, cannot use sampler
    `scheduler`, or None."""
    if scheduler in samplers:
        return None
    known = " or ".join(samplers)
    noun = "sampler" if len(samplers) == 1 else "samplers"
    return f"{label} models run with the {known} {noun} (flow matching), not {scheduler!r}"


def edit_images_refusal(label: str, takes: int, given: int) -> str:
    """The sentence refusing an edit of `given` input images on a `label` model, which
    reads `takes`."""
    if takes == 1:
        return (
            f"{label} edits one input image, not {given}; give only the picture it edits "
            "(Qwen-Image-Edit Plus reads several)"
        )
    return f"{label} reads at most {takes} input images for an edit, not {given}"


def flow_problems(
    architecture: Architecture, params: GenerationParams, distilled: bool = False
) -> list[str]:
    """Every reason `params` cannot run on a flow-matching `architecture` model
    (`distilled`: a step-distilled Flux.2 Klein, which runs without CFG), from what its
    declaration says it takes (`Requests`)."""
    label, takes = architecture.label, architecture.spec.requests
    edit = params.kind == KIND_EDIT
    problems = []
    if problem := sampler_problem(params.scheduler, label, takes.samplers or tuple(FLOW_SAMPLERS)):
        problems.append(problem)
    multiple = takes.size_multiple
    if params.width % multiple or params.height % multiple:
        problems.append(
            f"{label} draws sizes in multiples of {multiple} pixels, "
            f"not {params.width}x{params.height}; the nearest are "
            + " or ".join(nearest_sizes(params.width, params.height, multiple))
        )
    if not takes.negative_prompt and params.negative_prompt.strip():
        problems.append(
            f"{label} takes no negative prompt (it is guidance-distilled and runs without "
            "true CFG); clear the negative prompt"
        )
    if distilled and params.negative_prompt.strip():
        problems.append(
            f"this {label} model is step-distilled and runs without CFG, so it "
            "takes no negative prompt; clear the negative prompt"
        )
    if params.reference and not (takes.reference_images or takes.redux_references):
        problems.append(reference_refusal(label))
    if not takes.img2img and params.init_image and not params.mask and not edit:
        problems.append(takes.img2img_refusal)
    if takes.needs_mask and not params.mask and not edit:  # an edit has its own refusal
        problems.append(takes.needs_mask)
    if takes.needs_edit and not edit:
        problems.append(takes.needs_edit)
    if edit and params.edit_image_count > takes.edit_images:
        problems.append(edit_images_refusal(label, takes.edit_images, params.edit_image_count))
    area = params.width * params.height
    sized_inpaint = bool(params.mask and takes.inpaint_sizes)
    if sized_inpaint:
        problems.extend(inpaint_size_problems(label, params, takes.inpaint_sizes))
    elif takes.max_area and area > takes.max_area:
        problems.append(
            f"{label} draws at most {takes.max_area} pixels (1024x1024 or the same area), "
            f"not {params.width}x{params.height}"
        )
    return problems


def inpaint_size_problems(
    label: str, params: GenerationParams, sizes: Sequence[tuple[int, int]]
) -> list[str]:
    """Why a `label` model, which inpaints a whole picture at `sizes` only (the one nearest
    the picture's shape, as Flux.1 Kontext's inpaint pipeline), cannot inpaint `params`."""
    if params.only_masked:
        return [f'{label} inpaints the whole picture; turn "only masked" off']
    shape = params.width / params.height
    width, height = min(sizes, key=lambda size: abs(shape - size[0] / size[1]))
    if (params.width, params.height) == (width, height):
        return []
    return [
        f"{label} inpaints at its preferred size nearest the picture's shape, {width}x{height} "
        f"here, not {params.width}x{params.height}; resize the picture to it"
    ]


def nearest_sizes(width: int, height: int, multiple: int) -> tuple[str, ...]:
    """ "64x32", "96x32": the sizes in multiples of `multiple` nearest `width` x `height`,
    each side rounded down, then up (a side rounded down to nothing is left out)."""
    down = (width // multiple * multiple, height // multiple * multiple)
    up = tuple(-(-side // multiple) * multiple for side in (width, height))
    sizes = [f"{w}x{h}" for w, h in (down, up) if w and h]
    return tuple(dict.fromkeys(sizes))


def samplers_for(architecture: Architecture | None) -> tuple[str, ...]:
    """The samplers a model of `architecture` takes; () when it takes every one Easel has."""
    return architecture.spec.requests.samplers if architecture is not None else ()


def edit_defaults(architecture: Architecture | None) -> tuple[int, float]:
    """The steps and cfg an edit on a model of `architecture` runs with unless told: its
    stock pipeline's defaults (Flux.1 Kontext's where it is not a model that edits)."""
    takes = architecture.spec.requests if architecture is not None else None
    if takes is None or not takes.edit:
        takes = Requests()
    return takes.edit_steps, takes.edit_cfg


def edits_images(architecture: Architecture | None) -> bool:
    """Whether a model of `architecture` follows an instruction to edit an image (an edit
    job: Flux.1 Kontext)."""
    return architecture is not None and architecture.spec.requests.edit


def takes_negative_prompt(architecture: Architecture | None, distilled: bool = False) -> bool:
    """Whether a negative prompt changes anything: not on Flux.1 (no true CFG), nor on a
    step-distilled model (`distilled`: a Flux.2 Klein folder that says so), which run
    without CFG."""
    takes = architecture is None or architecture.spec.requests.negative_prompt
    return takes and not distilled


def guidance_is_distilled(architecture: Architecture | None) -> bool:
    """Whether `cfg` is a distilled-guidance input of the model (Flux.1) rather than CFG."""
    return architecture is not None and architecture.spec.requests.distilled_guidance


def reference_refusal(label: str) -> str:
    """A reference image on a family no IP-Adapter or Redux model guides: which ones do."""
    ip_adapters = [s.label for s in families() if s.guidance.cross_attention_width]
    redux = [s.label for s in families() if s.requests.redux_references]
    return (
        f"reference images do not work with {label}; they guide {', '.join(ip_adapters)} "
        f"models through an IP-Adapter and {', '.join(redux)} models through a Redux model"
    )

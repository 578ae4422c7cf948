"""What a worker would refuse, found when the job is submitted (files only: no torch).

The CLI and the window both call `check_runnable` next to `GenerationParams.validated()`,
so an unknown model, an unsupported file, a size the model cannot draw, an unknown LoRA or
a prompt weight that is no number, a ControlNet missing or made for another architecture
is one sentence at submit time, never a FAILED job later; so is a clip whose rolling
checkpoints the data folder has no room for (`video_budget`).

`names_only` is for requests from the network (the server) and jobs on a shared queue:
every model, LoRA, ControlNet, IP-Adapter and upscaler is a name installed in the model
folders, its files inside them (links followed), and no refusal names a server folder.
The command line and the window on this machine's own queue may also name a model by path.
"""

from __future__ import annotations

from collections.abc import Callable

from app.engine.generation.errors import UnsupportedModel
from app.engine.generation.families.flow_params import edit_defaults, flow_problems
from app.engine.generation.families.video_params import video_problems
from app.engine.generation.files.architecture import families_easel_runs, is_step_distilled
from app.engine.generation.files.registry import Architecture, families, step_cache_families
from app.engine.generation.files.sources import (
    MODEL_INDEX,
    ModelInfo,
    ModelSearchPath,
    resolve_model,
    resolve_model_name,
)
from app.engine.generation.guidance.controlnets import (
    check_control_type,
    check_fits,
    check_job_kind,
    controlnet_folders,
    find_controlnet,
)
from app.engine.generation.guidance.ip_adapters import find_ip_adapter, ip_adapter_folders
from app.engine.generation.guidance.redux_models import find_redux_model, redux_folders
from app.engine.generation.post.upscalers import check_upscaler
from app.engine.generation.prompts.loras import check_loras
from app.engine.generation.prompts.syntax import check_prompt_syntax
from app.engine.generation.video_budget import check_checkpoint_room
from app.engine.jobs.params import (
    KIND_EDIT,
    KIND_TILED,
    KIND_UPSCALE,
    KIND_VIDEO,
    SPEED_OFF,
    TIMESTEPS,
    GenerationParams,
    InvalidParameters,
    decode_scheduler_config,
)
from app.errors import BadInput, UserError


def check_runnable(
    params: GenerationParams, search: ModelSearchPath, *, names_only: bool = False
) -> ModelInfo:
    """The model `params` names, if a worker can run `params` on it; else a `UserError`."""
    resolve = resolve_model_name if names_only else resolve_model
    if params.kind == KIND_UPSCALE:  # the upscaler alone: no diffusion model runs
        check_upscaler(params.upscaler, search, names_only=names_only)
        return resolve(params.model, search)
    info = resolve(params.model, search)
    if not info.supported:
        where = "" if names_only else f" at {info.path}"
        raise UnsupportedModel(f"model {params.model!r}{where} {_why_not(info)}")
    if params.kind == KIND_TILED:  # redrawn region by region at the model's own size
        native = info.native_size or 0
        if params.width < native or params.height < native:
            raise BadInput(
                f"a tiled upscale to {params.width}x{params.height} is smaller than one "
                f"{native}x{native} region of {params.model!r}"
            )
    elif problem := info.size_problem(params.width, params.height):
        raise BadInput(problem)
    arch = info.architecture
    if params.kind == KIND_EDIT and (arch is None or not arch.spec.requests.edit):
        raise InvalidParameters(_cannot_edit(params.model, arch))
    distilled = is_step_distilled(arch, info.path)
    if (
        arch is not None
        and arch.is_transformer
        and (problems := flow_problems(arch, params, distilled))
    ):
        raise InvalidParameters("; ".join(problems))  # sampler, size, guidance (Flux, SD 3.x)
    if problem := _timesteps_problem(arch, params):
        raise InvalidParameters(problem)
    if problems := video_problems(arch, params):
        raise InvalidParameters("; ".join(problems))  # frames, sizes; a video of an image model
    if params.kind == KIND_VIDEO:
        check_checkpoint_room(params, info.path)  # this machine's data folder holds its progress
    if params.speed != SPEED_OFF and (arch is None or not arch.spec.step_cache):
        raise InvalidParameters(
            f"step caching (speed {params.speed}) works on {step_cache_families()} models, not "
            f"on {arch.label if arch is not None else 'this'} models yet; set speed to off"
        )
    check_loras(params.prompt, search, names_only=names_only)
    check_prompt_syntax(params.prompt)
    check_prompt_syntax(params.negative_prompt)
    if params.upscaler:
        check_upscaler(params.upscaler, search, names_only=names_only)  # the worker loads it
    for index, layer in enumerate(params.control_layers):  # here, and made for this model
        control = find_controlnet(layer.model, controlnet_folders(search), names_only=names_only)
        check_fits(control, params.model, info.architecture)
        check_control_type(control, layer, index)
        check_job_kind(control, params, index)
    redux = arch is not None and arch.spec.requests.redux_references
    if redux and len({reference.model for reference in params.references}) > 1:
        raise InvalidParameters(
            "reference images on Flux.1 go through one Redux model (it encodes them all); "
            "name the same one for each"
        )
    for reference in params.references:  # each IP-Adapter or Redux is here (width: at load)
        if redux:
            find_redux_model(reference.model, redux_folders(search), names_only=names_only)
        else:
            find_ip_adapter(reference.model, ip_adapter_folders(search), names_only=names_only)
    return info


def _timesteps_problem(arch: Architecture | None, params: GenerationParams) -> str:
    """A list of timesteps (a distilled LTX-Video's defaults) on a model whose sampler
    makes its own: said at submit rather than run on a schedule the job does not name (a
    model of no known architecture is refused before this)."""
    if arch is None or arch.spec.requests.timesteps:
        return ""
    if TIMESTEPS not in decode_scheduler_config(params.scheduler_config):
        return ""
    return (
        f"{arch.label} models make their own timesteps and run no list of them (a distilled "
        "LTX-Video's); clear the scheduler config's timesteps"
    )


def edit_defaults_of(
    search: ModelSearchPath, *, names_only: bool = False
) -> Callable[[str], tuple[int, float]]:
    """The steps and cfg an edit on a model (by name) runs with unless told: its family's
    stock pipeline's (`flow_params.edit_defaults`); Flux.1 Kontext's for a name that names
    no model here (the check refuses it)."""
    resolve = resolve_model_name if names_only else resolve_model

    def defaults(model: str) -> tuple[int, float]:
        try:
            architecture = resolve(model, search).architecture
        except UserError:
            architecture = None
        return edit_defaults(architecture)

    return defaults


def _cannot_edit(model: str, arch: Architecture | None) -> str:
    """An edit (an instruction) on a model that draws from a prompt only."""
    editors = editing_families()
    what = f"a {arch.label}" if arch is not None else "this"
    return (
        f"model {model!r} is {what} model, which draws from a prompt and cannot follow an "
        f"instruction to edit an image; pick a model that edits ({editors})"
    )


def editing_families() -> str:
    """ "Flux.1 Kontext, Qwen-Image-Edit or Qwen-Image-Edit Plus": the families whose
    declaration says they edit from an instruction (the refusal; the window's word when no
    such model is installed)."""
    labels = [spec.label for spec in families() if spec.requests.edit]
    return " or ".join([", ".join(labels[:-1]), labels[-1]] if len(labels) > 1 else labels)


def _why_not(info: ModelInfo) -> str:
    if info.unsupported_reason:
        return f"cannot be used: {info.unsupported_reason}"
    if (info.path / MODEL_INDEX).is_file():
        return f"has an unreadable {MODEL_INDEX}"
    return f"is not a model of a family Easel runs ({families_easel_runs()})"

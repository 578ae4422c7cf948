"""Few-step LoRAs (Lightning, Hyper, Turbo): the steps, CFG and schedule each was distilled
for, as a job's defaults (DESIGN.md "Edit with words", issue 37 build 4). Torch-free: the
window, the CLI and the API apply them at submit, so the job stores what runs and a resume
or another machine runs the same.

A few-step LoRA is told by its file name (the name in `<lora:NAME>`), or where a trainer
wrote one, by the file's `ss_output_name` metadata (kohya's scripts). Each row says where
its settings come from. Only the fields the artist did not set take a row's values: an
explicit steps, CFG or sampler wins.

A few-step model (LTX-Video's distilled releases) is told the same way, by its name (the
file's, the folder's or its Hugging Face repository's) within its family: its row's
settings are the model's defaults where no few-step LoRA in the prompt sets them.

Not recognised (yet): LCM-LoRA and DMD2 (they need diffusers' LCMScheduler, which Easel's
samplers do not offer), Hyper-SD's 1-step LoRAs (TCDScheduler).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from app.engine.generation.files.safetensors_header import METADATA_KEY, read_safetensors_header
from app.engine.generation.files.sources import (
    ModelInfo,
    ModelSearchPath,
    resolve_model,
    resolve_model_name,
)
from app.engine.generation.prompts.loras import (
    LoraError,
    available_loras,
    installed_loras,
    lora_folders,
    parse_loras,
)
from app.engine.jobs.params import TIMESTEPS, GenerationParams, encode_scheduler_config
from app.errors import UserError

# The fields a row may set; the same names as GenerationParams' (and the API body's).
STEPS, CFG, SCHEDULER = "steps", "cfg", "scheduler"

# ModelTC/Qwen-Image-Lightning, generate_with_diffusers.py lines 82-97 at 342260e (the
# model card's diffusers example, copied by nunchaku's examples/v1/qwen-image-lightning.py):
# "We use shift=3 in distillation", as a constant exponential shift of log(3).
QWEN_LIGHTNING_SCHEDULER: dict[str, Any] = {
    "base_image_seq_len": 256,
    "base_shift": math.log(3),
    "invert_sigmas": False,
    "max_image_seq_len": 8192,
    "max_shift": math.log(3),
    "num_train_timesteps": 1000,
    "shift": 1.0,
    "shift_terminal": None,
    "stochastic_sampling": False,
    "time_shift_type": "exponential",
    "use_beta_sigmas": False,
    "use_dynamic_shifting": True,
    "use_exponential_sigmas": False,
    "use_karras_sigmas": False,
}
# ByteDance/SDXL-Lightning's model card: EulerDiscreteScheduler with "trailing" timesteps,
# guidance_scale=0. ByteDance/Hyper-SD's card: DDIMScheduler, "trailing", guidance_scale=0.
TRAILING: dict[str, Any] = {"timestep_spacing": "trailing"}


@dataclass(frozen=True)
class FewStep:
    """One kind of few-step LoRA: what it is called and the settings it was made for."""

    label: str  # for people: "Qwen-Image-Lightning"
    pattern: str  # a regular expression on the file name (lower case); `(\d+)` the steps
    cfg: float
    sampler: str = "Euler"
    scheduler_config: dict[str, Any] | None = None  # over the model's own; None: as it is
    steps: int = 0  # 0: the steps in the name
    weight_note: str = ""  # a weight the authors recommend (the artist's tag keeps its own)
    kind: str = "LoRA"  # what the name is of: "LoRA", or "model" (FEW_STEP_MODELS)


# Each row: its source. File names as published (and as artists rename them on Civitai).
FEW_STEP_LORAS: tuple[FewStep, ...] = (
    # lightx2v/Qwen-Image-Lightning: Qwen-Image-Lightning-{4,8}steps-V1.x/V2.0 and the
    # Qwen-Image-Edit(-2509)-Lightning files; the card runs true_cfg_scale=1.0 and the
    # scheduler above.
    FewStep(
        "Qwen-Image-Lightning",
        r"qwen.?image.*lightning.*?(\d+).?steps?",
        1.0,
        scheduler_config=QWEN_LIGHTNING_SCHEDULER,
    ),
    # ByteDance/Hyper-SD: Hyper-FLUX.1-dev-{8,16}steps-lora, guidance 3.5, lora_scale 0.125.
    FewStep("Hyper-FLUX", r"hyper.?flux.*?(\d+).?steps?", 3.5, weight_note="0.125"),
    # alimama-creative/FLUX.1-Turbo-Alpha: 8 steps, guidance_scale 3.5 (its card).
    FewStep("FLUX.1-Turbo-Alpha", r"flux.*turbo.?alpha", 3.5, steps=8),
    # ByteDance/SDXL-Lightning: sdxl_lightning_{2,4,8}step_lora (see TRAILING).
    FewStep("SDXL-Lightning", r"sdxl.?lightning.*?(\d+).?steps?", 0.0, scheduler_config=TRAILING),
    # ByteDance/Hyper-SD: Hyper-SDXL-{2,4,8}steps-lora (see TRAILING); the -CFG files are
    # meant for guidance 5-8 with a negative prompt: the card's 5.
    FewStep(
        "Hyper-SDXL CFG",
        r"hyper.?sdxl.*?([2-9]|\d\d).?steps?.?cfg",
        5.0,
        sampler="DDIM",
        scheduler_config=TRAILING,
    ),
    FewStep(
        "Hyper-SDXL",
        r"hyper.?sdxl.*?([2-9]|\d\d).?steps?",
        0.0,
        sampler="DDIM",
        scheduler_config=TRAILING,
    ),
)


# diffusers' LTX-Video docs (docs/source/en/api/pipelines/ltx_video.md, "LTX-Video 0.9.7
# distilled model is guidance and timestep-distilled ... requires guidance_scale 1.0 ...
# custom timesteps": the base inference's) and their LTXConditionPipeline example, a single
# pass at `timesteps=` these and `guidance_scale=1.0`. Lightricks' own
# configs/ltxv-13b-0.9.8-distilled.yaml and ltxv-2b-0.9.8-distilled.yaml (github:Lightricks/
# LTX-Video at 5260738) run the same first seven (as sigmas: 1.0, 0.9937, ... 0.725) at
# guidance 1 in their first pass, then upscale and refine: Easel runs the single pass.
LTX_DISTILLED_TIMESTEPS = [1000, 993, 987, 981, 975, 909, 725, 0.03]

# Few-step models: their family's id (`Architecture.value`) and row. Names as Lightricks
# publishes them: the single files ltxv-13b-0.9.7-distilled(-fp8), ltxv-13b-0.9.8-distilled
# (-fp8), ltxv-2b-0.9.8-distilled(-fp8).safetensors (and GGUFs of them keeping the name),
# the diffusers folders Lightricks/LTX-Video-0.9.7-distilled and
# LTX-Video-0.9.8-13B-distilled. Not 0.9.6's 2B distilled file: its schedule is in its
# file's metadata, not the list above.
FEW_STEP_MODELS: tuple[tuple[str, FewStep], ...] = (
    (
        "ltx-condition",
        FewStep(
            "LTX-Video distilled",
            r"0[._]9[._][78]\b.*distill",
            1.0,
            steps=len(LTX_DISTILLED_TIMESTEPS),
            scheduler_config={TIMESTEPS: LTX_DISTILLED_TIMESTEPS},
            kind="model",
        ),
    ),
)


@dataclass(frozen=True)
class Recognised:
    """A few-step LoRA found in a job's prompt: its row and its steps."""

    lora: str  # the name in the prompt (of a few-step model: the model's name)
    row: FewStep
    steps: int

    def settings(self) -> dict[str, Any]:
        """The job's fields this LoRA sets (scheduler_config: "" for the model's own)."""
        return {
            STEPS: self.steps,
            CFG: self.row.cfg,
            SCHEDULER: self.row.sampler,
            "scheduler_config": encode_scheduler_config(self.row.scheduler_config or {}),
        }


def recognise(name: str, path: Path | None = None) -> Recognised | None:
    """The few-step LoRA `name` (its file at `path`, whose metadata may name it) is, if any."""
    for candidate in (name, _output_name(path)):
        if candidate and (found := _by_name(name, candidate.lower())):
            return found
    return None


def _by_name(lora: str, text: str) -> Recognised | None:
    for row in FEW_STEP_LORAS:
        match = re.search(row.pattern, text)
        if match is None:
            continue
        steps = row.steps or int(match.group(1))
        if 1 <= steps <= 64:
            return Recognised(lora, row, steps)
    return None


def _output_name(path: Path | None) -> str:
    """kohya's `ss_output_name` in the file's metadata; "" if none (or no readable file)."""
    if path is None:
        return ""
    try:
        metadata = read_safetensors_header(path).get(METADATA_KEY, {})
    except ValueError:
        return ""  # check_loras says what is wrong with the file
    value = metadata.get("ss_output_name", "")
    return value if isinstance(value, str) else ""


@dataclass(frozen=True)
class Applied:
    """`params` with a few-step LoRA's settings where the artist left them unset."""

    params: GenerationParams
    lora: Recognised | None = None
    fields: tuple[str, ...] = ()  # what changed

    def note(self) -> str:
        """What was applied, in one line: "Qwen-Image-Lightning 8-step LoRA: 8 steps, CFG
        1, its schedule" ("" when nothing was)."""
        if self.lora is None or not self.fields:
            return ""
        text = f"{describe(self.lora)}: {settings_text(self.params, self.fields)}"
        weight = self.lora.row.weight_note
        return f"{text} (its authors use it at weight {weight})" if weight else text


def describe(lora: Recognised) -> str:
    return f"{lora.row.label} {lora.steps}-step {lora.row.kind}"


def settings_text(params: GenerationParams, changed: Collection[str]) -> str:
    parts = []
    if STEPS in changed:
        parts.append(f"{params.steps} steps")
    if CFG in changed:
        parts.append(f"CFG {params.cfg:g}")
    if SCHEDULER in changed:
        parts.append(f"sampler {params.scheduler}")
    if "scheduler_config" in changed:
        parts.append(f"schedule {schedule_text(params.scheduler_config)}")
    return ", ".join(parts)


def schedule_text(config: str) -> str:
    """A schedule override for people: "shift 3" or "trailing timesteps"."""
    values = json.loads(config) if config else {}
    parts = []
    if "max_shift" in values and values.get("base_shift") == values["max_shift"]:
        parts.append(f"shift {math.exp(values['max_shift']):g}")
    if "timestep_spacing" in values:
        parts.append(f"{values['timestep_spacing']} timesteps")
    if TIMESTEPS in values:
        parts.append("timesteps " + " ".join(f"{t:g}" for t in values[TIMESTEPS]))
    return ", ".join(parts) or "the LoRA's"


def few_step_defaults(
    params: GenerationParams,
    explicit: Collection[str],
    loras: Sequence[tuple[str, Path | None]],
) -> Applied:
    """`params` with the first few-step LoRA's settings (of `loras`: name and file) in the
    fields not in `explicit` (the ones the artist set). A sampler the artist chose keeps
    the model's own schedule: the LoRA's schedule goes with its sampler."""
    found = next((r for name, path in loras if (r := recognise(name, path))), None)
    return Applied(params) if found is None else _with_row(params, explicit, found)


def _with_row(params: GenerationParams, explicit: Collection[str], found: Recognised) -> Applied:
    """`params` with `found`'s settings in the fields not in `explicit`."""
    settings = found.settings()
    chosen = SCHEDULER in explicit or "scheduler_config" in explicit
    if chosen or _other_count(found, params, explicit):
        settings.pop(SCHEDULER)
        settings.pop("scheduler_config")
    changes = {
        field: value
        for field, value in settings.items()
        if field not in explicit and getattr(params, field) != value
    }
    return Applied(replace(params, **changes), found, tuple(changes))


def lora_defaults(
    params: GenerationParams,
    explicit: Collection[str],
    search: ModelSearchPath | None = None,
    *,
    names_only: bool = False,
) -> Applied:
    """`few_step_defaults` for the LoRAs `params.prompt` names, their files found as a
    worker finds them (`names_only`: inside the LoRA folders). A prompt whose LoRAs cannot
    be used is left as it is: the submit checks refuse it in their own words."""
    try:
        refs = parse_loras(params.prompt)[1]
    except LoraError:
        return Applied(params)
    if not refs:
        return Applied(params)
    files = installed_loras(search) if names_only else available_loras(lora_folders(search))
    return few_step_defaults(params, explicit, [(ref.name, files.get(ref.name)) for ref in refs])


def _other_count(found: Recognised, params: GenerationParams, explicit: Collection[str]) -> bool:
    """Whether the artist set steps other than the length of the row's list of timesteps:
    the list goes with its count (the family's own schedule runs theirs)."""
    timesteps = (found.row.scheduler_config or {}).get(TIMESTEPS)
    return timesteps is not None and STEPS in explicit and params.steps != len(timesteps)


def recognise_model(info: ModelInfo) -> Recognised | None:
    """The few-step model `info` is (LTX-Video's distilled releases), if any: by its name
    in the model list, or its file's or folder's name, within its family."""
    family = info.architecture.value if info.architecture is not None else ""
    for candidate in (info.name, info.path.name):
        for architecture, row in FEW_STEP_MODELS:
            if architecture == family and re.search(row.pattern, candidate.lower()):
                return Recognised(info.name, row, row.steps)
    return None


def job_defaults(
    params: GenerationParams,
    explicit: Collection[str],
    search: ModelSearchPath | None = None,
    *,
    names_only: bool = False,
) -> Applied:
    """`lora_defaults`, or where no few-step LoRA set anything, the few-step model's (a
    distilled LTX-Video: its steps, CFG and timesteps) in the fields not in `explicit`. A
    model that names nothing here is left as it is: the submit checks refuse it."""
    applied = lora_defaults(params, explicit, search, names_only=names_only)
    if applied.lora is not None:
        return applied
    resolve = resolve_model_name if names_only else resolve_model
    try:
        found = recognise_model(resolve(params.model, search))
    except UserError:
        return applied
    return applied if found is None else _with_row(params, explicit, found)

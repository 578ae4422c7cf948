"""The body of `POST /api/v1/jobs`: every job the window and the command line can submit.

Each part says one thing the job does: a mask (inpaint), an outpaint, control layers,
reference images, LoRAs, a batch (seed modes, variation seeds, wildcard prompts) or an
X/Y/Z grid. An image is base64 (PNG, JPEG or WebP; a `data:` URL too) or `{"job": ID}`,
the picture an earlier job made. Unknown fields are refused: a field Easel does not read
could change the image the client expects. `job_build` turns a body into jobs.

Limits the engine checks are only published here (`json_schema_extra`), so that a refusal
reads as it does from the command line, not in pydantic's words.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import JsonDict

from app.engine.jobs.grid_spec import LABELS
from app.engine.jobs.groups import MAX_BATCH, SeedMode
from app.engine.jobs.mask import Fill
from app.engine.jobs.params import (
    CONTROL_MODULES,
    DEFAULT_FPS,
    DEFAULT_MASK_BLUR,
    DEFAULT_MASK_PADDING,
    DEFAULT_MODEL,
    DEFAULT_SCHEDULER,
    LAST_FRAME,
    MAX_CONTROL_LAYERS,
    MAX_CONTROL_WEIGHT,
    MAX_EDIT_IMAGES,
    MAX_FPS,
    MAX_FRAMES,
    MAX_IMAGES,
    MAX_MASK_BLUR,
    MAX_MASK_PADDING,
    MAX_REFERENCES,
    RANDOM_SEED,
    SPEED_OFF,
    SPEED_THRESHOLDS,
    UNION_TYPES,
    GenerationParams,
)
from app.engine.jobs.queue import MAX_JOB_ID
from app.server.requests import (
    CFG_LIMITS,
    PROMPT_LIMITS,
    SCHEDULER_LIMITS,
    SEED_LIMITS,
    SIDE_LIMITS,
    STEPS_LIMITS,
    TEXT_LIMITS,
)

DEFAULT_STRENGTH = 0.75  # img2img's, as the command line's and A1111's img2img tab
WEIGHT_LIMITS: JsonDict = {"minimum": 0, "maximum": MAX_CONTROL_WEIGHT}
SHARE_LIMITS: JsonDict = {"minimum": 0, "maximum": 1}
# What any image field takes, in the examples (the image's base64 cut short).
EXAMPLE_PNG = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAA..."
MASK_EXAMPLE: JsonDict = {"image": EXAMPLE_PNG, "blur": 4, "only_masked": True, "padding": 32}
CONTROL_EXAMPLE: JsonDict = {"image": EXAMPLE_PNG, "module": "canny", "model": "control-canny",
                   "weight": 0.8, "start": 0.0, "end": 0.9}  # fmt: skip
REFERENCE_EXAMPLE: JsonDict = {"image": {"job": 12}, "model": "ip-adapter_sd15", "weight": 0.6}


class Strict(BaseModel):
    """Every part of the body: a field it does not know is refused, not ignored."""

    model_config = ConfigDict(extra="forbid")


class JobImage(Strict):
    """The finished picture of an earlier job (an init image waits for it to finish)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"job": 12}]})

    job: int = Field(ge=1, le=MAX_JOB_ID, description="the id of the job whose picture to use")


ImageInput = Annotated[
    str | JobImage,
    Field(description='base64 PNG, JPEG or WebP (a data: URL too), or {"job": ID}'),
]


class MaskBody(Strict):
    """Inpaint: repaint where the mask is white (the init image's size)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [MASK_EXAMPLE]},
    )

    image: ImageInput
    blur: int = Field(DEFAULT_MASK_BLUR, json_schema_extra={"minimum": 0, "maximum": MAX_MASK_BLUR})
    only_masked: bool = Field(
        False, description="draw only the mask's box (plus padding) at the job's size, paste back"
    )
    padding: int = Field(
        DEFAULT_MASK_PADDING, json_schema_extra={"minimum": 0, "maximum": MAX_MASK_PADDING}
    )


class OutpaintBody(Strict):
    """Extend the init image's canvas by these pixels (multiples of 8) and paint the new area."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"right": 64, "fill": "edge"}]}
    )

    left: int = Field(0, json_schema_extra={"minimum": 0, "multipleOf": 8})
    right: int = Field(0, json_schema_extra={"minimum": 0, "multipleOf": 8})
    top: int = Field(0, json_schema_extra={"minimum": 0, "multipleOf": 8})
    bottom: int = Field(0, json_schema_extra={"minimum": 0, "multipleOf": 8})
    fill: Literal["edge", "noise"] = Field(
        Fill.EDGE.value, description="what the new area starts as: the edges stretched, or noise"
    )
    blur: int = Field(DEFAULT_MASK_BLUR, json_schema_extra={"minimum": 0, "maximum": MAX_MASK_BLUR})


class ControlBody(Strict):
    """A ControlNet layer: its image (preprocessed once, at submit), the ControlNet, how
    strongly and over which share of the steps it guides."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [CONTROL_EXAMPLE]},
    )

    image: ImageInput
    model: str = Field(description="a ControlNet's name (GET /controlnet/model_list)")
    module: str = Field(
        "none", description="the preprocessor; none: the image is a control image already",
        json_schema_extra={"enum": list(CONTROL_MODULES)},
    )  # fmt: skip
    type: str = Field(
        "", description="a ControlNet Union's control type; default: the preprocessor's kind",
        json_schema_extra={"enum": ["", *UNION_TYPES]},
    )  # fmt: skip
    weight: float = Field(1.0, json_schema_extra=WEIGHT_LIMITS)
    start: float = Field(0.0, json_schema_extra=SHARE_LIMITS)
    end: float = Field(1.0, json_schema_extra=SHARE_LIMITS)


class ReferenceBody(Strict):
    """A reference image (IP-Adapter; on Flux.1, Redux): its style or subject guides the job."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [REFERENCE_EXAMPLE]},
    )

    image: ImageInput
    model: str = Field(description="an IP-Adapter's name; on Flux.1, a Redux model's")
    weight: float = Field(1.0, json_schema_extra=WEIGHT_LIMITS)


class LoraBody(Strict):
    """A LoRA by name (GET /api/v1/loras), added to the prompt as `<lora:NAME:WEIGHT>`."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"name": "ink-style", "weight": 0.7}]}
    )

    name: str = Field(min_length=1, max_length=200, pattern=r"^[^<>:]+$")
    weight: float = Field(1.0, ge=-10, le=10)


class GridBody(Strict):
    """An X/Y/Z plot, each axis as the command line's `--x`: `NAME=V1,V2,...`."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"x": "steps=4,8", "y": "cfg=3,7"}]},
    )

    x: str = Field(max_length=2000, description=f"NAME=V1,V2,... NAME one of: {', '.join(LABELS)}")
    y: str | None = Field(None, max_length=2000)
    z: str | None = Field(None, max_length=2000)


class JobBody(Strict):
    """A job as the window and the command line submit it; see each part's description."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"prompt": "a red circle", "width": 64, "height": 64},
                {"prompt": "a boat", "init_image": EXAMPLE_PNG, "mask": MASK_EXAMPLE},
                {"prompt": "a wide sea", "init_image": {"job": 12},
                 "outpaint": {"right": 64}},
                {"prompt": "a cat", "control": [CONTROL_EXAMPLE]},
                {"prompt": "a cat", "references": [REFERENCE_EXAMPLE]},
                {"prompt": "a cat", "loras": [{"name": "ink-style", "weight": 0.7}]},
                {"prompt": "a {red|blue} __animal__", "batch_count": 4, "seed": 7,
                 "seed_mode": "increment", "variation_strength": 0.2},
                {"prompt": "a cat", "seed": 7, "grid": {"x": "steps=4,8", "y": "cfg=3,7"}},
                {"prompt": "make it night", "model": "kontext", "edit_image": {"job": 12}},
            ]
        },
    )  # fmt: skip

    prompt: str = Field(max_length=20_000, json_schema_extra=PROMPT_LIMITS)
    negative_prompt: str = Field("", max_length=20_000, json_schema_extra=TEXT_LIMITS)
    model: str = DEFAULT_MODEL
    scheduler: str = Field(DEFAULT_SCHEDULER, json_schema_extra=SCHEDULER_LIMITS)
    steps: int = Field(GenerationParams.steps, json_schema_extra=STEPS_LIMITS)
    cfg: float = Field(GenerationParams.cfg, json_schema_extra=CFG_LIMITS)
    width: int | None = Field(
        None, description="default: the init image's, else 64", json_schema_extra=SIDE_LIMITS
    )
    height: int | None = Field(
        None, description="default: the init image's, else 64", json_schema_extra=SIDE_LIMITS
    )
    seed: int = Field(GenerationParams.seed, json_schema_extra=SEED_LIMITS)
    count: int = Field(1, ge=1, le=MAX_IMAGES, description="jobs to make (a seed batch)")
    parents: list[Annotated[int, Field(ge=1, le=MAX_JOB_ID)]] = Field(
        default_factory=list, max_length=64
    )
    init_image: ImageInput | None = Field(None, description="img2img: the image to start from")
    strength: float = Field(DEFAULT_STRENGTH, description="img2img: share of the schedule redrawn")
    edit_image: ImageInput | list[ImageInput] | None = Field(
        None,
        description="an edit (a model that edits, e.g. Flux.1 Kontext): the picture the "
        "prompt's instruction edits; {\"job\": ID} makes the edit that job's child, at its size. "
        "A list gives a model that reads several (Qwen-Image-Edit Plus, up to "
        f"{MAX_EDIT_IMAGES}) its input images in order: the edited picture first",
    )
    mask: MaskBody | None = None
    outpaint: OutpaintBody | None = None
    control: list[ControlBody] = Field(default_factory=list, max_length=MAX_CONTROL_LAYERS)
    references: list[ReferenceBody] = Field(default_factory=list, max_length=MAX_REFERENCES)
    loras: list[LoraBody] = Field(default_factory=list, max_length=32)
    batch_count: int = Field(1, ge=1, le=MAX_BATCH, description="jobs queued as one group")
    seed_mode: SeedMode | None = Field(
        None, description="default: increment with a seed, else random"
    )
    variation_seed: int = Field(
        RANDOM_SEED, description="A1111's subseed", json_schema_extra=SEED_LIMITS
    )
    variation_strength: float = Field(0.0, json_schema_extra=SHARE_LIMITS)
    combinatorial: bool = Field(False, description="one job per combination of {a|b} choices")
    grid: GridBody | None = None
    speed: str = Field(SPEED_OFF, json_schema_extra={"enum": list(SPEED_THRESHOLDS)})
    speed_threshold: float = Field(0.0, json_schema_extra={"minimum": 0, "maximum": 1})
    compile: bool = Field(False, description="run the model compiled (torch.compile)")
    frames: int | None = Field(
        None, ge=1, le=MAX_FRAMES,
        description="a video (an MP4) of this many frames, on a video model (Wan: 4k+1)",
    )  # fmt: skip
    fps: int = Field(DEFAULT_FPS, ge=1, le=MAX_FPS, description="a video's frames a second")
    last_image: str | None = Field(
        None, description="a video's last frame (base64), its first being init_image: "
        "a first-and-last-frame model such as Wan 2.1 FLF2V",
    )  # fmt: skip
    image_strength: float = Field(
        1.0, description="a video's hold on init_image, its first frame, 0 to 1 (LTX-Video "
        "0.9.5+; 1: exactly, lower lets the clip move away from it)",
        json_schema_extra=SHARE_LIMITS,
    )  # fmt: skip
    last_image_strength: float = Field(
        1.0, description="a video's hold on last_image, 0 to 1 (LTX-Video 0.9.5+)",
        json_schema_extra=SHARE_LIMITS,
    )  # fmt: skip
    last_image_frame: int = Field(
        LAST_FRAME, description="the frame last_image is, 1 to frames - 1 (LTX-Video "
        f"0.9.5+); {LAST_FRAME}: the clip's last",
        json_schema_extra={"minimum": LAST_FRAME, "maximum": MAX_FRAMES - 1},
    )  # fmt: skip
    priority: int = Field(0, ge=-1_000_000, le=1_000_000)
    max_attempts: int | None = Field(None, ge=1, le=20)
    callback_url: str | None = Field(None, description="POSTed the job's final status")

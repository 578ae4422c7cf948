"""Generation parameters and their validation, checked before anything is stored.

Pure data: no torch, no Qt, no database, so the GUI, the CLI, the queue and the
worker all share one definition of what a valid request is.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields, replace
from itertools import pairwise
from typing import Any

from app.errors import BadInput

DEFAULT_MODEL = "easel-tiny"

# Names as AUTOMATIC1111 shows them; the runner maps each to a diffusers scheduler class.
SCHEDULERS: tuple[str, ...] = (
    "Euler", "Euler a", "DDIM", "DPM++ 2M", "DPM++ 2M Karras", "Euler Karras", "UniPC",
)  # fmt: skip
DEFAULT_SCHEDULER = "Euler"

MIN_SIZE, MAX_SIZE, SIZE_MULTIPLE = 32, 2048, 8
MIN_STEPS, MAX_STEPS = 1, 150
MIN_CFG, MAX_CFG = 0.0, 30.0
MAX_SEED = 2**32 - 1
RANDOM_SEED = -1
MAX_IMAGES = 16  # one request of the window queues at most this many jobs
MAX_PROMPT_CHARS = 2000
# img2img's init image: a parent job's output, or an image stored with the job (job_input).
INIT_FROM_JOB, INIT_UPLOADED = "job:", "upload:"
# Inpaint: the mask is stored with the job (job_input, kind "mask"), named by its digest.
DEFAULT_MASK_BLUR, MAX_MASK_BLUR = 4, 64  # A1111's default and slider's end
DEFAULT_MASK_PADDING, MAX_MASK_PADDING = 32, 256  # "Only masked padding, pixels"
# What a job does (schema 9): draw an image, compose its group's grid, or upscale its
# parent's image with an upscaler model (see docs/architecture.md, *Groups of jobs*).
# A tiled upscale (Ultimate SD Upscale) enlarges, then redraws the image region by region.
KIND_GENERATE, KIND_GRID, KIND_UPSCALE, KIND_TILED = "generate", "grid", "upscale", "tiled"
# An edit (DESIGN.md "Edit with words"): the prompt is an instruction, the init image the
# picture it edits (`job:<id>`: a child of that job), on a model that edits (Flux.1 Kontext).
KIND_EDIT = "edit"
# An edit's further input images (Qwen-Image-Edit Plus reads several: "Picture 1", "Picture
# 2", ...), after the one it edits (its init image): each stored with the job (job_input,
# kind "edit0", "edit1", ...). Qwen's card for Edit Plus (2509) says it works best with 1 to
# 3 input images, and Alibaba's own service takes at most 3: the cap, whatever the model.
MAX_EDIT_IMAGES = 3
# A video clip (issue 38): drawn as an image is (the same loop), `frames` at `fps`, its
# output an MP4 (outputs/video.py). Which frame counts and sizes a model takes is its
# family's (families/video_params.py), checked at submit.
KIND_VIDEO = "video"
KINDS = (KIND_GENERATE, KIND_GRID, KIND_UPSCALE, KIND_TILED, KIND_EDIT, KIND_VIDEO)
# The kinds whose work is the denoising loop on a model (txt2img, img2img, ..., a clip).
DRAWN_KINDS = (KIND_GENERATE, KIND_VIDEO)
MAX_FRAMES = 481  # 30 s at 16 fps: far beyond what any video model draws in one clip
DEFAULT_FPS, MAX_FPS = 16, 60  # Wan 2.1's 16 frames a second
LAST_FRAME = -1  # a last image's frame: the clip's last (`last_image_frame`)
DEFAULT_FRAMES = 81  # a clip's frames when none are given: Wan 2.1's 5 s at 16 fps
# Upscale jobs hold one model-size region (or tile) in memory at a time, so they may be
# larger than what a model draws in one piece.
MAX_UPSCALED_SIZE = 8192
MAX_VARIATION_STRENGTH = 1.0
# ControlNet: each layer's image is stored with the job (job_input, kind "control<i>").
MAX_CONTROL_LAYERS = 4
MAX_CONTROL_WEIGHT = 2.0  # A1111's "Control Weight" slider's end
CONTROL_MODULES = ("none", "canny", "softedge", "lineart", "scribble")  # preprocessors
# A ControlNet Union's control types, by their index (xinsir/controlnet-union-sdxl-1.0's
# model card: 0 openpose, 1 depth, 2 hed/pidi/scribble/ted, 3 canny/lineart/mlsd, 4 normal,
# 5 segment; its ProMax adds 6 tile and 7 repaint).
SDXL_UNION_TYPES = (
    "openpose", "depth", "softedge", "canny", "normal", "segment", "tile", "inpaint",
)  # fmt: skip
# Flux.1's Union ControlNets' `control_mode` table (InstantX/FLUX.1-dev-Controlnet-Union and
# Shakker-Labs' Union Pro: 0 canny, 1 tile, 2 depth, 3 blur, 4 pose, 5 gray, 6 low quality).
FLUX_UNION_TYPES = ("canny", "tile", "depth", "blur", "openpose", "gray", "low-quality")
# Every type some Union takes (a layer's type is checked against its net's table at submit).
UNION_TYPES = (*SDXL_UNION_TYPES, *(t for t in FLUX_UNION_TYPES if t not in SDXL_UNION_TYPES))
_UNION_TYPE_OF_MODULE = {"canny": "canny", "lineart": "canny", "softedge": "softedge",
                         "scribble": "softedge"}  # fmt: skip
# IP-Adapter: each reference image is stored with the job (job_input, kind "reference<i>"),
# and has an adapter (and so a weight) of its own: diffusers' multi IP-Adapter.
MAX_REFERENCES = 4
# Step caching ("Speed", issue 40): diffusers' First Block Cache skips a step's remaining
# transformer blocks when the first block's output changed less than a threshold (relative
# mean absolute change) since the last full step, reusing that step's residual instead.
# Higher thresholds skip more steps and cost more detail. 0.08 is what ParaAttention (the
# method's authors) recommends for FLUX.1-dev (about 1.5x, little visible loss); 0.12
# about 2x with some softening. `speed_threshold` (0: the setting's own) overrides them.
SPEED_OFF, SPEED_FAST, SPEED_FASTEST = "off", "fast", "fastest"
SPEED_THRESHOLDS: dict[str, float] = {SPEED_OFF: 0.0, SPEED_FAST: 0.08, SPEED_FASTEST: 0.12}
MAX_SPEED_THRESHOLD = 1.0  # a relative change: above 1 nearly every step would be skipped
# A schedule of the sampler's own other than the model's (a few-step LoRA's: Qwen-Image
# Lightning's shift 3, SDXL Lightning's trailing timesteps; prompts/few_step.py): scheduler
# config values over the model's, as canonical JSON. Only these keys, of these types: a
# job from the network builds no scheduler its sampler would not.
SCHEDULER_CONFIG_KEYS: dict[str, tuple[type, ...]] = {
    "base_image_seq_len": (int,), "max_image_seq_len": (int,), "num_train_timesteps": (int,),
    "base_shift": (int, float), "max_shift": (int, float), "shift": (int, float),
    "shift_terminal": (int, float, type(None)), "time_shift_type": (str,),
    "invert_sigmas": (bool,), "stochastic_sampling": (bool,), "use_beta_sigmas": (bool,),
    "use_dynamic_shifting": (bool,), "use_exponential_sigmas": (bool,),
    "use_karras_sigmas": (bool,), "timestep_spacing": (str,),
}  # fmt: skip
# A timestep-distilled model's own timesteps (LTX-Video 0.9.7 and 0.9.8 distilled;
# prompts/few_step.py): the sampler runs exactly these, one step each, so `steps` is their
# count. Only families whose declaration says so take them (`Requests.timesteps`).
TIMESTEPS = "timesteps"
SCHEDULER_CONFIG_CHOICES = {
    "time_shift_type": ("exponential", "linear"),
    "timestep_spacing": ("leading", "linspace", "trailing"),
}


class InvalidParameters(BadInput):
    """A generation request that cannot run; the message says exactly what is wrong."""


@dataclass(frozen=True)
class ControlLayer:
    """One ControlNet layer: its (already preprocessed) image, the ControlNet, how strongly
    and over which share of the steps it guides (A1111's Guidance Start/End)."""

    image: str  # f"{INIT_UPLOADED}<sha256>" of the control image stored with the job
    model: str  # the ControlNet's name (`controlnets.list_controlnets`)
    module: str = "none"  # the preprocessor that made the image (recorded, not re-run)
    weight: float = 1.0  # diffusers' controlnet_conditioning_scale
    start: float = 0.0  # control_guidance_start
    end: float = 1.0  # control_guidance_end
    # A ControlNet Union's control type (`UNION_TYPES`); "": the preprocessor's kind.
    control_type: str = ""

    @property
    def union_type(self) -> str:
        """The control type a ControlNet Union is told ("" when neither it nor the
        preprocessor says: an image that is a control image already needs it given)."""
        return self.control_type or _UNION_TYPE_OF_MODULE.get(self.module, "")


@dataclass(frozen=True)
class ReferenceImage:
    """A reference image (IP-Adapter): its picture guides the style or subject."""

    image: str  # f"{INIT_UPLOADED}<sha256>" of the image stored with the job
    model: str  # the IP-Adapter's name (`ip_adapters.list_ip_adapters`)
    weight: float = 1.0  # diffusers' `set_ip_adapter_scale`


def encode_reference(references: Sequence[ReferenceImage]) -> str:
    """How `GenerationParams.reference` spells `references` (canonical JSON, or "")."""
    if not references:
        return ""
    return json.dumps([asdict(reference) for reference in references], sort_keys=True)


def decode_reference(text: str) -> tuple[ReferenceImage, ...]:
    if not text:
        return ()
    try:
        raw = json.loads(text)
        names = {f.name for f in fields(ReferenceImage)}
        if not isinstance(raw, list) or not all(
            isinstance(item, dict) and set(item) <= names for item in raw
        ):
            raise ValueError("not a list of reference images")
        return tuple(ReferenceImage(**item) for item in raw)
    except (ValueError, TypeError) as error:
        raise InvalidParameters(f"the reference images are not readable ({error})") from error


def encode_scheduler_config(config: dict[str, Any]) -> str:
    """How `GenerationParams.scheduler_config` spells `config` (canonical JSON, or "")."""
    return json.dumps(config, sort_keys=True) if config else ""


def decode_scheduler_config(text: str, *, takes_timesteps: bool = True) -> dict[str, Any]:
    """The scheduler config values `encode_scheduler_config` wrote, checked; with
    `takes_timesteps` False (a sampler that makes its own timesteps) a list of timesteps is
    refused rather than silently not run."""
    if not text:
        return {}
    try:
        raw = json.loads(text)
    except ValueError as error:
        raise InvalidParameters(f"the scheduler config is not JSON ({error})") from error
    if not isinstance(raw, dict):
        raise InvalidParameters("the scheduler config must be a JSON object")
    problems = [_config_problem(key, value) for key, value in sorted(raw.items())]
    if found := [problem for problem in problems if problem]:
        raise InvalidParameters("; ".join(found))
    if TIMESTEPS in raw and not takes_timesteps:
        raise InvalidParameters(
            "this model's sampler makes its own timesteps and runs no list of them (a "
            "timestep-distilled LTX-Video's); clear the scheduler config's timesteps"
        )
    return raw


def _config_problem(key: str, value: Any) -> str:
    if key == TIMESTEPS:
        return _timesteps_problem(value)
    types = SCHEDULER_CONFIG_KEYS.get(key)
    if types is None:
        known = ", ".join(SCHEDULER_CONFIG_KEYS)
        return f"the scheduler config cannot set {key!r} (it can set: {known})"
    if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
        return f"the scheduler config's {key} cannot be {value!r}"
    choices = SCHEDULER_CONFIG_CHOICES.get(key)
    if choices and value not in choices:
        return f"the scheduler config's {key} must be one of {', '.join(choices)}, not {value!r}"
    if isinstance(value, float) and not -100 <= value <= 100:
        return f"the scheduler config's {key} is out of range ({value:g})"
    if isinstance(value, int) and not isinstance(value, bool) and not 1 <= value <= 1_000_000:
        return f"the scheduler config's {key} is out of range ({value})"
    return ""


def _timesteps_problem(value: Any) -> str:
    """Why `value` is no list of timesteps a sampler can run ("" if it is one): 1 to
    MAX_STEPS numbers on the 1000-step training scale, each below the one before."""
    numbers = isinstance(value, list) and all(
        isinstance(t, (int, float)) and not isinstance(t, bool) for t in value
    )
    if not numbers or not MIN_STEPS <= len(value) <= MAX_STEPS:
        return f"the scheduler config's timesteps must be 1 to {MAX_STEPS} numbers, not {value!r}"
    if not all(0 < t <= 1000 for t in value) or any(a <= b for a, b in pairwise(value)):
        return (
            "the scheduler config's timesteps must fall from at most 1000 to above 0, "
            f"not {value!r}"
        )
    return ""


def encode_edit_images(images: Sequence[str]) -> str:
    """How `GenerationParams.edit_images` spells an edit's further input images (their
    `upload:<sha256>` names, in order): canonical JSON, or "" for none."""
    return json.dumps(list(images)) if images else ""


def decode_edit_images(text: str) -> tuple[str, ...]:
    if not text:
        return ()
    try:
        raw = json.loads(text)
    except ValueError as error:
        raise InvalidParameters(f"the edit's input images are not readable ({error})") from error
    if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
        raise InvalidParameters("the edit's input images are not a list of image names")
    return tuple(raw)


def encode_control(layers: Sequence[ControlLayer]) -> str:
    """How `GenerationParams.control` spells `layers`: one canonical JSON text, so params
    stay flat values (one column, one checkpoint field) and compare exactly."""
    if not layers:
        return ""
    # Without an empty control type: layers written before it existed keep their text.
    written = [
        {k: v for k, v in asdict(layer).items() if k != "control_type" or v} for layer in layers
    ]
    return json.dumps(written, sort_keys=True)


def decode_control(text: str) -> tuple[ControlLayer, ...]:
    """The layers `encode_control` wrote; `InvalidParameters` for anything else."""
    if not text:
        return ()
    try:
        raw = json.loads(text)
        names = {f.name for f in fields(ControlLayer)}
        if not isinstance(raw, list) or not all(
            isinstance(item, dict) and set(item) <= names for item in raw
        ):
            raise ValueError("not a list of layers")
        return tuple(ControlLayer(**item) for item in raw)
    except (ValueError, TypeError) as error:
        raise InvalidParameters(f"the control layers are not readable ({error})") from error


@dataclass(frozen=True)
class GenerationParams:
    prompt: str
    negative_prompt: str = ""
    model: str = DEFAULT_MODEL
    scheduler: str = DEFAULT_SCHEDULER
    steps: int = 20
    cfg: float = 4.0  # what the bundled model was tuned for (see its model card)
    width: int = 64
    height: int = 64
    seed: int = RANDOM_SEED
    init_image: str = ""  # img2img: "", f"{INIT_FROM_JOB}<id>" or f"{INIT_UPLOADED}<sha256>"
    strength: float = 1.0  # img2img: share of the schedule re-run on the init image (0, 1]
    mask: str = ""  # inpaint: "" or f"{INIT_UPLOADED}<sha256>" of the mask (white = repaint)
    mask_blur: int = DEFAULT_MASK_BLUR  # inpaint: Gaussian blur radius of the mask, pixels
    only_masked: bool = False  # inpaint: A1111's "Inpaint area: Only masked"
    mask_padding: int = DEFAULT_MASK_PADDING  # inpaint, only masked: pixels around the mask
    # A1111's variation seed ("subseed") and strength: the start noise is the slerp of the
    # seed's noise and this seed's, by `variation_strength` (0: none). -1: random at submit.
    variation_seed: int = RANDOM_SEED
    variation_strength: float = 0.0
    prompt_template: str = ""  # the prompt before wildcards were expanded ("" if none)
    kind: str = KIND_GENERATE
    # An upscaler model file in models/upscale_models/ (an upscale job's model; for a
    # hires-fix img2img, how its init image is enlarged first). "": Lanczos.
    upscaler: str = ""
    control: str = ""  # ControlNet layers, as `encode_control` writes them ("" for none)
    reference: str = ""  # IP-Adapter reference images, as `encode_reference` writes them
    speed: str = SPEED_OFF  # step caching: "off", "fast" or "fastest" (`SPEED_THRESHOLDS`)
    speed_threshold: float = 0.0  # the cache's threshold; 0: the speed setting's own
    # Run the model's blocks compiled (torch.compile; load/compiled.py): faster steps after
    # a one-off compile per worker and model; images may differ from eager in the last bits.
    compile: bool = False
    frames: int = 1  # a video job's frame count (1 for every other kind)
    fps: int = DEFAULT_FPS  # a video job's frames a second, as its MP4 plays them
    # The sampler's schedule over the model's (`encode_scheduler_config`; "": the model's).
    scheduler_config: str = ""
    # An edit's input images after its init image, as `encode_edit_images` writes them
    # ("" for none: an edit of one image, and every other kind).
    edit_images: str = ""
    # A video's last frame (first-and-last-frame models: Wan 2.1 FLF2V), as the init image
    # is its first: "" or f"{INIT_UPLOADED}<sha256>" of the image (a job_input row "last").
    last_image: str = ""
    # How firmly a clip's conditioning frames hold (LTX-Video 0.9.5+: `LTXVideoCondition.
    # strength`, 0 to 1; stock's 1.0 fixes them): the init image at frame 0, the last image
    # at `last_image_frame` (LAST_FRAME: the clip's last frame).
    image_strength: float = 1.0
    last_image_strength: float = 1.0
    last_image_frame: int = LAST_FRAME

    @property
    def cache_threshold(self) -> float:
        """First Block Cache's threshold for this job; 0 when it runs uncached."""
        if self.speed == SPEED_OFF:
            return 0.0
        return self.speed_threshold or SPEED_THRESHOLDS[self.speed]

    def validated(self) -> GenerationParams:
        """These parameters with the prompt trimmed, or `InvalidParameters`."""
        problems = list(_problems(self))
        if problems:
            raise InvalidParameters("; ".join(problems))
        return replace(
            self, prompt=self.prompt.strip(), negative_prompt=self.negative_prompt.strip()
        )

    def with_concrete_seed(self, rng: random.Random | None = None) -> GenerationParams:
        """Fix a random seed now, so the stored job always regenerates the same image."""
        rng = rng or random.SystemRandom()
        params = self
        if params.seed == RANDOM_SEED:
            params = replace(params, seed=rng.randint(0, MAX_SEED))
        if params.variation_strength > 0 and params.variation_seed == RANDOM_SEED:
            params = replace(params, variation_seed=rng.randint(0, MAX_SEED))
        return params

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def denoising_steps(self) -> int:
        """The steps that actually run: img2img skips the first `steps * (1 - strength)`.
        A grid is one step (composing); an upscale job counts its tiles as it goes."""
        if self.kind in (KIND_EDIT, KIND_VIDEO):
            return self.steps  # the input image is read beside the latents, not trimmed to
        if self.kind not in DRAWN_KINDS:
            return 1
        if not self.init_image:
            return self.steps
        return min(int(self.steps * self.strength), self.steps)

    @property
    def has_condition_settings(self) -> bool:
        """Whether a clip's conditioning frames are set other than stock's (full strength,
        the last image at the clip's last frame)."""
        return (self.image_strength, self.last_image_strength, self.last_image_frame) != (
            1.0, 1.0, LAST_FRAME,
        )  # fmt: skip

    @property
    def last_image_index(self) -> int:
        """The frame a clip's last image conditions (its `last_image_frame`, or its last)."""
        if self.last_image_frame == LAST_FRAME:
            return self.frames - 1
        return self.last_image_frame

    @property
    def is_inpaint(self) -> bool:
        return bool(self.mask)

    @property
    def control_layers(self) -> tuple[ControlLayer, ...]:
        return decode_control(self.control)

    @property
    def references(self) -> tuple[ReferenceImage, ...]:
        return decode_reference(self.reference)

    @property
    def more_edit_images(self) -> tuple[str, ...]:
        """An edit's input images after its init image (`upload:<sha256>` each), in order."""
        return decode_edit_images(self.edit_images)

    @property
    def edit_image_count(self) -> int:
        """How many input images an edit reads (its init image first); 0 for other kinds."""
        return 1 + len(self.more_edit_images) if self.kind == KIND_EDIT else 0

    @property
    def init_parent(self) -> int | None:
        """The job whose output image is this job's init image, if any."""
        if not self.init_image.startswith(INIT_FROM_JOB):
            return None
        return int(self.init_image.removeprefix(INIT_FROM_JOB))


def _problems(p: GenerationParams) -> list[str]:
    problems: list[str] = []
    if not p.prompt.strip():
        problems.append("the prompt is empty")
    elif len(p.prompt) > MAX_PROMPT_CHARS:
        problems.append(f"the prompt is longer than {MAX_PROMPT_CHARS} characters")
    if len(p.negative_prompt) > MAX_PROMPT_CHARS:
        problems.append(f"the negative prompt is longer than {MAX_PROMPT_CHARS} characters")
    if not p.model.strip():
        problems.append("no model is given")
    for label, text in (
        ("prompt", p.prompt), ("negative prompt", p.negative_prompt), ("model name", p.model),
    ):  # fmt: skip
        problems.extend(_text_problems(label, text))
    if p.scheduler not in SCHEDULERS:
        known = ", ".join(SCHEDULERS)
        problems.append(f"unknown scheduler {p.scheduler!r} (known: {known})")
    largest = MAX_UPSCALED_SIZE if p.kind in (KIND_UPSCALE, KIND_TILED) else MAX_SIZE
    for name, value in (("width", p.width), ("height", p.height)):
        problems.extend(_size_problems(name, value, largest))
    if not MIN_STEPS <= p.steps <= MAX_STEPS:
        problems.append(f"steps must be between {MIN_STEPS} and {MAX_STEPS}, not {p.steps}")
    if not MIN_CFG <= p.cfg <= MAX_CFG:
        problems.append(f"CFG must be between {MIN_CFG:g} and {MAX_CFG:g}, not {p.cfg:g}")
    if p.seed != RANDOM_SEED and not 0 <= p.seed <= MAX_SEED:
        problems.append(f"seed must be {RANDOM_SEED} (random) or between 0 and {MAX_SEED}")
    if p.init_image:
        problems.extend(_init_problems(p))
    if p.mask:
        problems.extend(_mask_problems(p))
    problems.extend(_group_problems(p))
    if p.control:
        problems.extend(_control_problems(p))
    if p.reference:
        problems.extend(_reference_problems(p))
    if p.edit_images:
        problems.extend(_edit_image_problems(p))
    problems.extend(_speed_problems(p))
    if not isinstance(p.compile, bool):
        problems.append(f"compile must be true or false, not {p.compile!r}")
    problems.extend(_video_problems(p))
    if p.scheduler_config:
        try:
            timesteps = decode_scheduler_config(p.scheduler_config).get(TIMESTEPS)
        except InvalidParameters as error:
            problems.append(str(error))
        else:
            if timesteps is not None and len(timesteps) != p.steps:
                problems.append(
                    f"the scheduler config's {len(timesteps)} timesteps are "
                    f"{len(timesteps)} steps, not {p.steps}"
                )
    return problems


def _video_problems(p: GenerationParams) -> list[str]:
    """A clip's frame count and rate (the model's own rules, 4k+1 frames for Wan, are its
    family's: `video_params`, at submit); other kinds draw one frame. A clip's init image
    is the image it animates (whether its model takes one: `video_params`); it conditions
    every step, so `strength` means nothing there (`denoising_steps`)."""
    if p.kind != KIND_VIDEO:
        if p.last_image:
            return ["a last image needs a video job (--video)"]
        if p.has_condition_settings:
            return ["an image strength or a last image's frame needs a video job (--video)"]
        return [] if p.frames == 1 else [f"{p.frames} frames need a video job (--video)"]
    problems = [*_last_image_problems(p), *_condition_problems(p)]
    if not isinstance(p.frames, int) or not 1 <= p.frames <= MAX_FRAMES:
        problems.append(f"a video takes 1 to {MAX_FRAMES} frames, not {p.frames}")
    if not isinstance(p.fps, int) or not 1 <= p.fps <= MAX_FPS:
        problems.append(f"a video plays at 1 to {MAX_FPS} frames a second, not {p.fps}")
    if p.mask or p.control or p.reference or p.upscaler:
        problems.append("a video job takes a prompt and an input image only (no mask or guidance)")
    return problems


def _edit_image_problems(p: GenerationParams) -> list[str]:
    """An edit's further input images: uploaded ones, on an edit, at most `MAX_EDIT_IMAGES`
    in all (whether its model reads more than one is its family's: at submit)."""
    if p.kind != KIND_EDIT:
        return ["more input images are for an edit only"]
    try:
        names = decode_edit_images(p.edit_images)
    except InvalidParameters as error:
        return [str(error)]
    if 1 + len(names) > MAX_EDIT_IMAGES:
        return [f"an edit reads at most {MAX_EDIT_IMAGES} input images, not {1 + len(names)}"]
    return [
        f"input image {index} {name!r} is not {INIT_UPLOADED}<sha256>"
        for index, name in enumerate(names, start=2)
        if not name.startswith(INIT_UPLOADED) or name == INIT_UPLOADED
    ]


def _last_image_problems(p: GenerationParams) -> list[str]:
    """A clip's last frame is an uploaded image, and only beside a first one (whether its
    model takes one: `video_params`)."""
    if not p.last_image:
        return []
    kind, _, ref = p.last_image.partition(":")
    if f"{kind}:" != INIT_UPLOADED or not ref:
        return [f"last image {p.last_image!r} is not {INIT_UPLOADED}<sha256>"]
    if not p.init_image:
        return ["a last image needs a first image too (the init image)"]
    return []


def _condition_problems(p: GenerationParams) -> list[str]:
    """A clip's conditioning strengths, each between 0 and 1 and for an image it has, and
    its last image's frame after the first and within the clip (whether its model weighs
    its images: `video_params`)."""
    problems: list[str] = []
    for label, value, image, needed in (
        ("image", p.image_strength, p.init_image, "an input image (the init image)"),
        ("last image", p.last_image_strength, p.last_image, "a last image"),
    ):
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            problems.append(f"the {label} strength must be between 0 and 1, not {value}")
        elif value != 1 and not image:
            problems.append(f"the {label} strength needs {needed}")
    frame = p.last_image_frame
    if frame == LAST_FRAME:
        return problems
    if not p.last_image:
        problems.append("the last image's frame needs a last image")
    elif not isinstance(frame, int) or not 1 <= frame < p.frames:
        problems.append(
            f"the last image's frame must be between 1 and {p.frames - 1} (the clip's last),"
            f" not {frame}"
        )
    return problems


def _speed_problems(p: GenerationParams) -> list[str]:
    if p.speed not in SPEED_THRESHOLDS:
        known = ", ".join(SPEED_THRESHOLDS)
        return [f"unknown speed {p.speed!r} (known: {known})"]
    threshold = p.speed_threshold
    if not isinstance(threshold, int | float) or not 0 <= threshold <= MAX_SPEED_THRESHOLD:
        return [f"the speed threshold must be between 0 and {MAX_SPEED_THRESHOLD:g}"]
    if threshold and p.speed == SPEED_OFF:
        return ["a speed threshold needs speed fast or fastest (step caching is off)"]
    return []


def _reference_problems(p: GenerationParams) -> list[str]:
    try:
        references = decode_reference(p.reference)
    except InvalidParameters as error:
        return [str(error)]
    if len(references) > MAX_REFERENCES:
        return [f"at most {MAX_REFERENCES} reference images, not {len(references)}"]
    problems = []
    for index, reference in enumerate(references):
        name = f"reference image {index}"
        if not reference.image.startswith(INIT_UPLOADED) or reference.image == INIT_UPLOADED:
            problems.append(f"{name} {reference.image!r} is not {INIT_UPLOADED}<sha256>")
        if not str(reference.model).strip():
            problems.append(f"{name} names no IP-Adapter")
        weight = reference.weight
        if not isinstance(weight, int | float) or not 0 <= weight <= MAX_CONTROL_WEIGHT:
            problems.append(f"{name}'s weight must be between 0 and {MAX_CONTROL_WEIGHT:g}")
    return problems


def _control_problems(p: GenerationParams) -> list[str]:
    try:
        layers = decode_control(p.control)
    except InvalidParameters as error:
        return [str(error)]
    if len(layers) > MAX_CONTROL_LAYERS:
        return [f"at most {MAX_CONTROL_LAYERS} control layers, not {len(layers)}"]
    problems = []
    for index, layer in enumerate(layers):
        name = f"control layer {index}"
        if not layer.image.startswith(INIT_UPLOADED) or layer.image == INIT_UPLOADED:
            problems.append(f"{name}'s image {layer.image!r} is not {INIT_UPLOADED}<sha256>")
        if not str(layer.model).strip():
            problems.append(f"{name} names no ControlNet model")
        if layer.control_type and layer.control_type not in UNION_TYPES:
            known = ", ".join(UNION_TYPES)
            problems.append(
                f"{name}'s control type {layer.control_type!r} is unknown (known: {known})"
            )
        if layer.module not in CONTROL_MODULES:
            known = ", ".join(CONTROL_MODULES)
            problems.append(f"{name}'s preprocessor {layer.module!r} is unknown (known: {known})")
        if not isinstance(layer.weight, int | float) or not 0 <= layer.weight <= MAX_CONTROL_WEIGHT:
            problems.append(f"{name}'s weight must be between 0 and {MAX_CONTROL_WEIGHT:g}")
        elif not (
            isinstance(layer.start, int | float)
            and isinstance(layer.end, int | float)
            and 0 <= layer.start < layer.end <= 1
        ):
            problems.append(
                f"{name}'s start and end must satisfy 0 <= start < end <= 1, "
                f"not {layer.start}, {layer.end}"
            )
    return problems


def _mask_problems(p: GenerationParams) -> list[str]:
    if not p.init_image:
        return ["a mask needs an image to inpaint (init_image)"]
    if not p.mask.startswith(INIT_UPLOADED) or p.mask == INIT_UPLOADED:
        return [f"mask {p.mask!r} is not {INIT_UPLOADED}<sha256>"]
    problems = []
    if not 0 <= p.mask_blur <= MAX_MASK_BLUR:
        problems.append(f"mask blur must be between 0 and {MAX_MASK_BLUR}, not {p.mask_blur}")
    if not 0 <= p.mask_padding <= MAX_MASK_PADDING:
        problems.append(
            f"masked area padding must be between 0 and {MAX_MASK_PADDING}, not {p.mask_padding}"
        )
    return problems


def _group_problems(p: GenerationParams) -> list[str]:
    problems: list[str] = []
    if p.kind not in KINDS:
        problems.append(f"unknown job kind {p.kind!r} (known: {', '.join(KINDS)})")
    if not 0 <= p.variation_strength <= MAX_VARIATION_STRENGTH:
        problems.append(f"variation strength must be between 0 and 1, not {p.variation_strength:g}")
    if p.variation_seed != RANDOM_SEED and not 0 <= p.variation_seed <= MAX_SEED:
        problems.append(
            f"variation seed must be {RANDOM_SEED} (random) or between 0 and {MAX_SEED}"
        )
    if p.variation_strength > 0 and p.init_image:
        problems.append("a variation seed applies to txt2img only, not with an init image")
    if p.kind == KIND_UPSCALE and not (p.upscaler and p.init_image):
        problems.append("an upscale job needs an upscaler model and an image to upscale")
    if p.kind == KIND_TILED and not p.init_image:
        problems.append("a tiled upscale needs an image to upscale")
    if p.kind == KIND_EDIT and not p.init_image:
        problems.append("an edit needs the image it edits (init_image)")
    if p.kind == KIND_EDIT and p.mask:
        problems.append("an edit takes no mask: the instruction says what to change")
    for label, text in (("prompt template", p.prompt_template), ("upscaler", p.upscaler)):
        problems.extend(_text_problems(label, text))
    return problems


def _init_problems(p: GenerationParams) -> list[str]:
    kind, _, ref = p.init_image.partition(":")
    if f"{kind}:" == INIT_FROM_JOB and not ref.isdigit():
        return [f"init image {p.init_image!r} does not name a job number"]
    if f"{kind}:" not in (INIT_FROM_JOB, INIT_UPLOADED) or not ref:
        return [f"init image {p.init_image!r} is neither {INIT_FROM_JOB}<id> nor {INIT_UPLOADED}"]
    if not 0 < p.strength <= 1:
        return [f"strength must be above 0 and at most 1, not {p.strength:g}"]
    if p.denoising_steps < 1:
        return [f"strength {p.strength:g} of {p.steps} steps leaves no step to run"]
    return []


def _text_problems(label: str, text: str) -> list[str]:
    # A NUL cuts strings short in C code downstream; lone surrogates are undecodable bytes
    # (a command line's invalid UTF-8, kept by Python's surrogateescape) that cannot be stored.
    if "\x00" in text:
        return [f"the {label} contains a NUL character"]
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return [f"the {label} contains bytes that are not valid UTF-8 text"]
    return []


def _size_problems(name: str, value: int, largest: int = MAX_SIZE) -> list[str]:
    if value % SIZE_MULTIPLE:
        return [f"{name} {value} is not a multiple of {SIZE_MULTIPLE}"]
    if not MIN_SIZE <= value <= largest:
        return [f"{name} must be between {MIN_SIZE} and {largest}, not {value}"]
    return []


def parse_size(text: str) -> tuple[int, int]:
    """`"512x768"` -> (512, 768), with a clear error for anything else."""
    parts = text.lower().replace(" ", "").split("x")
    if len(parts) != 2 or not all(part.isdigit() for part in parts):
        raise InvalidParameters(f"size {text!r} is not WIDTHxHEIGHT, e.g. 512x512")
    return int(parts[0]), int(parts[1])

"""Every field of AUTOMATIC1111's txt2img and img2img requests, and what Easel does with it.

The fields are those of A1111 1.10's `StableDiffusionTxt2ImgProcessingAPI` and
`StableDiffusionImg2ImgProcessingAPI` (modules/api/models.py: the `__init__` parameters of
modules/processing.py's `StableDiffusionProcessingTxt2Img`/`Img2Img`, less its
`API_NOT_ALLOWED`, plus the API's own additions). Each is honoured, harmless to ignore (it
changes what A1111's UI saves or shows, never the image), or refused with one sentence
when it asks for something Easel cannot do; a refused field's neutral values (A1111's
defaults, and what clients such as webuiapi send when they mean "off") are accepted.
A field that is in neither model is refused: it may change the image, and a client
should learn that Easel did not understand it rather than get an image without it.

README's "Use Easel from other programs" shows `markdown_table()` (a test keeps them equal).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from app.errors import BadInput


class UnsupportedRequest(BadInput):
    """An A1111 feature Easel does not have: refused, never silently ignored."""


class Treatment(StrEnum):
    HONOURED = "honoured"
    IGNORED = "ignored"
    REFUSED = "refused"


class Endpoint(StrEnum):
    BOTH = "both"
    TXT2IMG = "txt2img"
    IMG2IMG = "img2img"


@dataclass(frozen=True)
class A1111Field:
    name: str
    endpoint: Endpoint
    treatment: Treatment
    # Honoured: what it becomes in Easel. Ignored: why that is harmless. Refused: the
    # sentence a request that sets it gets.
    note: str
    # Refused fields only: the values that ask for nothing, accepted as they are.
    neutral: tuple[Any, ...] = (None,)

    def asks_for_something(self, value: object) -> bool:
        return not any(_same(value, neutral) for neutral in self.neutral)


def _same(value: object, neutral: object) -> bool:
    if isinstance(value, bool) or isinstance(neutral, bool) or value is None or neutral is None:
        return value is neutral or (value == neutral and type(value) is type(neutral))
    if isinstance(value, int | float) and isinstance(neutral, int | float):
        return math.isclose(value, neutral)
    return value == neutral


HON, IGN, REF = Treatment.HONOURED, Treatment.IGNORED, Treatment.REFUSED
BOTH, TXT, IMG = Endpoint.BOTH, Endpoint.TXT2IMG, Endpoint.IMG2IMG
OFF: tuple[Any, ...] = (None, False)
EMPTY: tuple[Any, ...] = (None, "", [], {})

FIELDS: tuple[A1111Field, ...] = (
    A1111Field("prompt", BOTH, HON, "the job's prompt"),
    A1111Field("negative_prompt", BOTH, HON, "the job's negative prompt"),
    A1111Field(
        "styles",
        BOTH,
        REF,
        "Easel has no saved prompt styles: put their text in the prompt.",
        EMPTY,
    ),
    A1111Field("seed", BOTH, HON, "the seed (-1: a random one, fixed at submit)"),
    A1111Field("subseed", BOTH, HON, "the variation seed (-1: a random one)"),
    A1111Field("subseed_strength", BOTH, HON, "the variation strength (txt2img only, as in Easel)"),
    A1111Field(
        "seed_resize_from_h",
        BOTH,
        REF,
        "Easel does not resize a seed's noise from another size (seed_resize_from_h).",
        (None, -1, 0),
    ),
    A1111Field(
        "seed_resize_from_w",
        BOTH,
        REF,
        "Easel does not resize a seed's noise from another size (seed_resize_from_w).",
        (None, -1, 0),
    ),
    A1111Field("sampler_name", BOTH, HON, "the scheduler (GET /sdapi/v1/samplers)"),
    A1111Field(
        "scheduler", BOTH, HON, "the schedule type: automatic, or Karras where Easel has it"
    ),
    A1111Field("batch_size", BOTH, HON, "batch_size x n_iter jobs, seeds counting up"),
    A1111Field("n_iter", BOTH, HON, "batch_size x n_iter jobs, seeds counting up"),
    A1111Field("steps", BOTH, HON, "the steps"),
    A1111Field("cfg_scale", BOTH, HON, "the CFG scale"),
    A1111Field("width", BOTH, HON, "the width"),
    A1111Field("height", BOTH, HON, "the height"),
    A1111Field("restore_faces", BOTH, REF, "Easel does not restore faces (restore_faces).", OFF),
    A1111Field("tiling", BOTH, REF, "Easel does not make tileable images (tiling).", OFF),
    A1111Field("do_not_save_samples", BOTH, IGN, "Easel keeps every image in its history"),
    A1111Field("do_not_save_grid", BOTH, IGN, "Easel makes no grid of a request's images"),
    A1111Field(
        "eta",
        BOTH,
        REF,
        "Easel's samplers run at A1111's default eta only (1 for Euler a, 0 for DDIM).",
        (None,),
    ),
    A1111Field(
        "denoising_strength",
        BOTH,
        HON,
        "img2img: the strength; txt2img with enable_hr: the hires pass's strength",
    ),
    A1111Field(
        "s_min_uncond",
        BOTH,
        REF,
        "Easel does not skip the negative prompt at low sigmas (s_min_uncond).",
        (None, 0),
    ),
    A1111Field("s_churn", BOTH, REF, "Easel's samplers take no churn (s_churn).", (None, 0)),
    A1111Field("s_tmax", BOTH, REF, "Easel's samplers take no churn range (s_tmax).", (None, 0)),
    A1111Field("s_tmin", BOTH, REF, "Easel's samplers take no churn range (s_tmin).", (None, 0)),
    A1111Field("s_noise", BOTH, REF, "Easel's samplers take no extra noise (s_noise).", (None, 1)),
    A1111Field(
        "override_settings",
        BOTH,
        HON,
        "sd_model_checkpoint: the model; SD.Next's cuda_compile and para_cache_enabled: "
        "compile, speed (other caches refused); image settings refused, UI settings ignored",
    ),
    A1111Field(
        "override_settings_restore_afterwards",
        BOTH,
        IGN,
        "an override applies to its own request only",
    ),
    A1111Field(
        "refiner_checkpoint",
        BOTH,
        REF,
        "Easel does not switch to a refiner model mid-run (refiner_checkpoint).",
        (None, "", "None"),
    ),
    A1111Field(
        "refiner_switch_at", BOTH, IGN, "only read with refiner_checkpoint, which is refused"
    ),
    A1111Field(
        "disable_extra_networks",
        BOTH,
        REF,
        "Easel always applies the LoRAs a prompt names (disable_extra_networks).",
        OFF,
    ),
    A1111Field(
        "firstpass_image",
        BOTH,
        REF,
        "Easel's hires fix starts from its own first pass (firstpass_image).",
        EMPTY,
    ),
    A1111Field("comments", BOTH, IGN, "A1111's notes for its infotext"),
    A1111Field("sampler_index", BOTH, HON, "the scheduler, when sampler_name is not given"),
    A1111Field("script_name", BOTH, REF, "Easel runs no A1111 scripts (script_name).", (None, "")),
    A1111Field("script_args", BOTH, IGN, "only read by script_name's script, which is refused"),
    A1111Field("send_images", BOTH, HON, "whether the answer carries the images"),
    A1111Field("save_images", BOTH, IGN, "Easel keeps every image in its history"),
    A1111Field(
        "alwayson_scripts",
        BOTH,
        HON,
        "ControlNet's units become control layers; Forge's First Block Cache / TeaCache "
        "the speed (its TeaCache refused); any other script is refused",
    ),
    A1111Field(
        "force_task_id", BOTH, IGN, "A1111's progress id: /sdapi/v1/progress covers every A1111 job"
    ),
    A1111Field(
        "infotext",
        BOTH,
        REF,
        "Easel does not read settings from an infotext: send the fields themselves.",
        (None, ""),
    ),
    # txt2img: the hires fix
    A1111Field(
        "enable_hr",
        TXT,
        HON,
        "hires fix: an upscale job follows each image, and its image is answered",
    ),
    A1111Field(
        "firstphase_width",
        TXT,
        REF,
        "the old hires fix's first pass size is not supported: use hr_scale.",
        (None, 0),
    ),
    A1111Field(
        "firstphase_height",
        TXT,
        REF,
        "the old hires fix's first pass size is not supported: use hr_scale.",
        (None, 0),
    ),
    A1111Field("hr_scale", TXT, HON, "the upscale's scale (sides rounded to multiples of 8)"),
    A1111Field(
        "hr_upscaler",
        TXT,
        HON,
        "Lanczos (also None or omitted), or an upscaler model; latent ones refused",
    ),
    A1111Field("hr_second_pass_steps", TXT, HON, "the upscale job's steps (0: the first pass's)"),
    A1111Field("hr_resize_x", TXT, HON, "the upscale's width, at the first pass's aspect ratio"),
    A1111Field("hr_resize_y", TXT, HON, "the upscale's height, at the first pass's aspect ratio"),
    A1111Field(
        "hr_checkpoint_name",
        TXT,
        REF,
        "Easel's hires pass runs on the first pass's model (hr_checkpoint_name).",
        (None, "", "Use same checkpoint"),
    ),
    A1111Field(
        "hr_sampler_name",
        TXT,
        REF,
        "Easel's hires pass runs with the first pass's sampler (hr_sampler_name).",
        (None, "", "Use same sampler"),
    ),
    A1111Field(
        "hr_scheduler",
        TXT,
        REF,
        "Easel's hires pass runs with the first pass's schedule (hr_scheduler).",
        (None, "", "Use same scheduler"),
    ),
    A1111Field(
        "hr_prompt",
        TXT,
        REF,
        "Easel's hires pass runs with the first pass's prompt (hr_prompt).",
        (None, ""),
    ),
    A1111Field(
        "hr_negative_prompt",
        TXT,
        REF,
        "Easel's hires pass runs with the first pass's negative prompt (hr_negative_prompt).",
        (None, ""),
    ),
    # img2img
    A1111Field("init_images", IMG, HON, "the init image (exactly one)"),
    A1111Field("resize_mode", IMG, HON, "0 (just resize, Lanczos) only; the others are refused"),
    A1111Field(
        "image_cfg_scale",
        IMG,
        IGN,
        "read by instruct-pix2pix models only (as in A1111), which Easel does not run",
    ),
    A1111Field("mask", IMG, HON, "inpaint: repaint where the mask is white"),
    A1111Field("mask_blur_x", IMG, HON, "the mask blur, when equal to mask_blur_y"),
    A1111Field("mask_blur_y", IMG, HON, "the mask blur, when equal to mask_blur_x"),
    A1111Field("mask_blur", IMG, HON, "the mask blur, pixels"),
    A1111Field(
        "mask_round",
        IMG,
        REF,
        "Easel does not keep a transparent mask's soft edge unrounded (mask_round false).",
        (None, True),
    ),
    A1111Field(
        "inpainting_fill",
        IMG,
        HON,
        "1 (original) only: Easel repaints from the image itself; the others are refused",
    ),
    A1111Field(
        "inpaint_full_res",
        IMG,
        HON,
        "only masked: the mask's box is generated at the job's size and pasted back",
    ),
    A1111Field(
        "inpaint_full_res_padding", IMG, HON, "only masked: the pixels around the mask's box"
    ),
    A1111Field("inpainting_mask_invert", IMG, HON, "1: repaint where the mask is black"),
    A1111Field(
        "initial_noise_multiplier",
        IMG,
        REF,
        "Easel does not scale img2img's starting noise (initial_noise_multiplier).",
        (None, 1),
    ),
    A1111Field(
        "latent_mask",
        IMG,
        REF,
        "Easel takes one mask, not a second latent one (latent_mask).",
        EMPTY,
    ),
    A1111Field("include_init_images", IMG, IGN, "Easel's answer carries the generated images only"),
)

# Fields video tools send for a clip's length and rate: A1111's API has no video, so a
# client sending one asked for a clip, and is told where clips are asked for.
VIDEO_FIELDS = ("frames", "num_frames", "video_length", "video_frames", "fps")
NO_VIDEO = "Easel's A1111 API draws images only"
WHERE_CLIPS = "ask for a clip through POST /api/v1/jobs with frames and fps"


def check_no_video_fields(sent: Mapping[str, Any]) -> None:
    """Refuse, in one sentence saying where clips are asked for, a video field sent to an
    A1111 endpoint (before the unknown-field refusal, which would not say so)."""
    asked = [name for name in VIDEO_FIELDS if name in sent]
    if asked:
        raise UnsupportedRequest(f"{NO_VIDEO} ({asked[0]!r} asks for a video); {WHERE_CLIPS}")


def refuse_video_model(model: str, label: str) -> UnsupportedRequest:
    """The one sentence for an A1111 request on a model that draws videos."""
    return UnsupportedRequest(
        f"{NO_VIDEO}, and {model!r} is a {label} model, which draws videos; {WHERE_CLIPS}"
    )


# Settings in `override_settings` that would change the image, and their neutral values.
# Other settings are A1111's UI's (as POST /sdapi/v1/options keeps only the model).
IMAGE_SETTINGS: Mapping[str, tuple[Any, ...]] = {
    "CLIP_stop_at_last_layers": (1,),
    "sd_vae": (None, "", "Automatic", "None"),
    "eta_noise_seed_delta": (0,),
    "eta_ancestral": (1,),
    "eta_ddim": (0,),
    "randn_source": ("GPU", "CPU"),  # Easel's noise comes from the seed alone
}


# SD.Next's compile setting in `override_settings`: parts to compile (["Model"]), or a bool
# in its older releases. Easel compiles the model's repeated blocks only.
COMPILE_SETTING = "cuda_compile"


def compile_asked(settings: Mapping[str, Any]) -> bool:
    """Whether `override_settings` asks to compile the model (SD.Next's `cuda_compile`);
    `UnsupportedRequest` for parts Easel does not compile."""
    value = settings.get(COMPILE_SETTING, False)
    if isinstance(value, bool):
        return value
    if not isinstance(value, list) or not all(isinstance(part, str) for part in value):
        raise UnsupportedRequest(f"{COMPILE_SETTING} must be true, false or a list of parts")
    others = sorted(set(value) - {"Model"})
    if others:
        raise UnsupportedRequest(
            f"Easel compiles the model only, not {', '.join(others)} ({COMPILE_SETTING})"
        )
    return "Model" in value


def fields_of(endpoint: Endpoint) -> dict[str, A1111Field]:
    return {f.name: f for f in FIELDS if f.endpoint in (Endpoint.BOTH, endpoint)}


def check_fields(sent: Mapping[str, Any], endpoint: Endpoint, sampler: str) -> None:
    """Refuse, in one sentence, a field A1111's request has not, or a refused one set."""
    known = fields_of(endpoint)
    unknown = sorted(name for name in sent if name not in known)
    if unknown:
        names = ", ".join(repr(name) for name in unknown)
        raise UnsupportedRequest(
            f"{names} {'is' if len(unknown) == 1 else 'are'} not in A1111's {endpoint} "
            "request: Easel refuses what it does not know rather than ignore it"
        )
    for name, value in sent.items():
        field = known[name]
        if field.treatment is Treatment.REFUSED and _asks(field, value, sampler):
            raise UnsupportedRequest(field.note)
    settings = sent.get("override_settings") or {}
    for key, value in settings.items():
        neutral = IMAGE_SETTINGS.get(key)
        if neutral is not None and not any(_same(value, n) for n in neutral):
            raise UnsupportedRequest(
                f"the setting {key} = {value!r} would change the image and Easel does not have it"
            )


# eta: the value Easel's sampler runs at (k-diffusion's Euler and DPM++ 2M take none).
_ETA_OF: Mapping[str, Callable[[float], bool]] = {
    "Euler a": lambda eta: math.isclose(eta, 1.0),
    "DDIM": lambda eta: math.isclose(eta, 0.0),
}


def _asks(field: A1111Field, value: object, sampler: str) -> bool:
    if field.name == "eta" and isinstance(value, int | float) and not isinstance(value, bool):
        return not _ETA_OF.get(sampler, lambda _eta: True)(float(value))
    return field.asks_for_something(value)


def markdown_table() -> str:
    """The table README shows: one row a field, in A1111's order."""
    rows = ["| Field | Endpoint | Easel | What Easel does |", "|---|---|---|---|"]
    for f in FIELDS:
        rows.append(f"| `{f.name}` | {f.endpoint} | {f.treatment} | {f.note.replace('|', '/')} |")
    return "\n".join(rows)


def model_name(title: str) -> str:
    """A1111 titles carry a hash: `name [abc123]` -> `name`."""
    text = title.strip()
    if text.endswith("]") and " [" in text:
        text = text.rsplit(" [", 1)[0]
    return text

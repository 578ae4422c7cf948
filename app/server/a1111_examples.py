"""Examples for the A1111 routes (`/sdapi/v1`, `/controlnet`) in the published OpenAPI
schema, as `openapi_examples` gives `/api/v1` its own: a request each client sends (valid
on a bare server: no model beyond the bundled one, no ControlNet installed) and what it is
answered. Lists and names come from the code that answers them, so they cannot go stale;
the images are a 64x64 PNG (red), its mask (a white square) and the PNG with A1111's
`parameters` text."""

from __future__ import annotations

import json
from typing import Any

from app.engine.jobs.params import CONTROL_MODULES
from app.server.a1111 import SAMPLER_ALIASES, parse_parameters
from app.server.a1111_controlnet import CONTROLNET_API_VERSION

SDAPI = "/sdapi/v1"

PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAEAAAABACAIAAAAlC+aJAAAAUElEQVR42u3PQREAAAQAMKTRP4VYUni42xos"
    "pzs+q3hOQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBA4N4CCH8BmEZ1WSwA"
    "AAAASUVORK5CYII="
)
MASK = (
    "iVBORw0KGgoAAAANSUhEUgAAAEAAAABACAAAAACPAi4CAAAAM0lEQVR42u3OIQ4AMAgEQej//1xEU4MjNRUz"
    "8hI2RAAc2Yc9PFivHwgICAgICAj8FgC4CjPiAUBwf1GKAAAAAElFTkSuQmCC"
)
INFOTEXT = (
    "a lighthouse at dusk, oil on canvas\nNegative prompt: blurry\nSteps: 20, Sampler: Euler, "
    "CFG scale: 7.0, Seed: 7, Size: 64x64, Model: easel-tiny"
)
PNG_WITH_TEXT = (
    "iVBORw0KGgoAAAANSUhEUgAAAEAAAABACAIAAAAlC+aJAAAAmXRFWHRwYXJhbWV0ZXJzAGEgbGlnaHRob3VzZSBh"
    "dCBkdXNrLCBvaWwgb24gY2FudmFzCk5lZ2F0aXZlIHByb21wdDogYmx1cnJ5ClN0ZXBzOiAyMCwgU2FtcGxlcjog"
    "RXVsZXIsIENGRyBzY2FsZTogNy4wLCBTZWVkOiA3LCBTaXplOiA2NHg2NCwgTW9kZWw6IGVhc2VsLXRpbnmCVlY9"
    "AAAAUElEQVR42u3PQREAAAQAMKTRP4VYUni42xospzs+q3hOQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBA"
    "QEBAQEBAQEBAQEBAQEBA4N4CCH8BmEZ1WSwAAAAASUVORK5CYII="
)

TXT2IMG = {
    "prompt": "a lighthouse at dusk, oil on canvas", "negative_prompt": "blurry", "seed": 7,
    "sampler_name": "Euler", "steps": 20, "cfg_scale": 7, "width": 64, "height": 64,
}  # fmt: skip
HIRES = {
    **TXT2IMG, "enable_hr": True, "hr_scale": 2, "hr_upscaler": "Lanczos",
    "hr_second_pass_steps": 10, "denoising_strength": 0.5,
}  # fmt: skip
VARIATIONS = {**TXT2IMG, "subseed": 8, "subseed_strength": 0.3, "batch_size": 2}
IMG2IMG = {**TXT2IMG, "init_images": [PNG], "denoising_strength": 0.6}
INPAINT = {
    **IMG2IMG, "mask": MASK, "mask_blur": 4, "inpainting_fill": 1, "inpaint_full_res": True,
    "inpaint_full_res_padding": 32,
}  # fmt: skip

# (method, full path) -> named request bodies, each {"summary", "value"} (OpenAPI's form)
BODIES: dict[tuple[str, str], dict[str, dict[str, Any]]] = {
    ("post", f"{SDAPI}/txt2img"): {
        "txt2img": {"summary": "an image from a prompt", "value": TXT2IMG},
        "hires": {"summary": "with the hires fix (an upscale job follows)", "value": HIRES},
        "variations": {"summary": "two images with a variation seed", "value": VARIATIONS},
    },
    ("post", f"{SDAPI}/img2img"): {
        "img2img": {"summary": "from an image", "value": IMG2IMG},
        "inpaint": {"summary": "repaint inside the mask only", "value": INPAINT},
    },
    ("post", f"{SDAPI}/options"): {
        "model": {"summary": "the model A1111 requests get", "value": {
            "sd_model_checkpoint": "easel-tiny"}},
    },
    ("post", f"{SDAPI}/png-info"): {
        "png-info": {"summary": "the text an image carries", "value": {"image": PNG_WITH_TEXT}},
    },
    ("post", f"{SDAPI}/extra-single-image"): {
        "upscale": {"summary": "twice the size with Lanczos", "value": {
            "image": PNG, "upscaling_resize": 2, "upscaler_1": "Lanczos"}},
    },
}  # fmt: skip

INFO = {
    "prompt": TXT2IMG["prompt"], "all_prompts": [TXT2IMG["prompt"]],
    "negative_prompt": "blurry", "all_negative_prompts": ["blurry"], "seed": 7,
    "all_seeds": [7], "subseed": -1, "all_subseeds": [-1], "subseed_strength": 0.0,
    "width": 64, "height": 64, "sampler_name": "Euler", "cfg_scale": 7.0, "steps": 20,
    "batch_size": 1, "sd_model_name": "easel-tiny", "infotexts": [INFOTEXT],
    "easel_job_ids": [12], "easel_statuses": {"12": "SUCCESS"},
}  # fmt: skip
GENERATED = {"images": [PNG], "parameters": TXT2IMG, "info": json.dumps(INFO)}
STOPPED = {"cancelled": [12], "at_step": {"12": 9}}
SAMPLERS = [
    {"name": name, "aliases": list(aliases), "options": {}}
    for name, aliases in SAMPLER_ALIASES.items()
]
UPSCALERS = [
    {"name": "None", "model_name": None, "model_path": None, "model_url": None, "scale": 4},
    {"name": "Lanczos", "model_name": None, "model_path": None, "model_url": None,
     "scale": None},
    {"name": "4x-UltraSharp", "model_name": "4x-UltraSharp", "model_path": None,
     "model_url": None, "scale": None},
]  # fmt: skip

# (method, full path) -> the example of the 2xx answer (JSON)
ANSWERS: dict[tuple[str, str], Any] = {
    ("post", f"{SDAPI}/txt2img"): GENERATED,
    ("post", f"{SDAPI}/img2img"): {**GENERATED, "parameters": IMG2IMG},
    ("get", f"{SDAPI}/progress"): {
        "progress": 0.45, "eta_relative": 1.8,
        "state": {"skipped": False, "interrupted": False, "job": "job 12", "job_count": 1,
                  "job_timestamp": "0", "job_no": 0, "sampling_step": 9,
                  "sampling_steps": 20},
        "current_image": PNG, "textinfo": None,
    },
    ("post", f"{SDAPI}/interrupt"): STOPPED,
    ("post", f"{SDAPI}/skip"): STOPPED,
    ("get", f"{SDAPI}/sd-models"): [{
        "title": "easel-tiny", "model_name": "easel-tiny", "hash": None, "sha256": None,
        "filename": "easel-tiny", "config": None,
    }],
    ("get", f"{SDAPI}/loras"): [
        {"name": "ink", "alias": "ink", "path": "ink.safetensors", "metadata": {}}
    ],
    ("get", f"{SDAPI}/samplers"): SAMPLERS,
    ("get", f"{SDAPI}/schedulers"): [{
        "name": "automatic", "label": "Automatic", "aliases": None, "default_rho": -1,
        "need_inner_model": False,
    }],
    ("get", f"{SDAPI}/scripts"): {"txt2img": [], "img2img": []},
    ("get", f"{SDAPI}/options"): {
        "sd_model_checkpoint": "easel-tiny", "sd_checkpoint_hash": None, "samples_format": "png"
    },
    ("post", f"{SDAPI}/options"): None,
    ("post", f"{SDAPI}/png-info"): {
        "info": INFOTEXT, "items": {}, "parameters": parse_parameters(INFOTEXT)
    },
    ("get", f"{SDAPI}/upscalers"): UPSCALERS,
    ("post", f"{SDAPI}/refresh-checkpoints"): None,
    ("get", f"{SDAPI}/sd-vae"): [],
    ("get", f"{SDAPI}/memory"): {
        "ram": {"free": 9_000_000_000, "used": 7_000_000_000, "total": 16_000_000_000},
        "cuda": {"error": "the server process holds no GPU: GET /api/v1/queue for the workers"},
    },
    ("post", f"{SDAPI}/extra-single-image"): {"html_info": "", "image": PNG},
    ("get", "/controlnet/model_list"): {"model_list": ["control_canny"]},
    ("get", "/controlnet/module_list"): {
        "module_list": list(CONTROL_MODULES), "module_detail": {}
    },
    ("get", "/controlnet/version"): {"version": CONTROLNET_API_VERSION},
}  # fmt: skip

"""A1111's ControlNet extension, as its clients speak to it: the units of
`alwayson_scripts["controlnet"]` become Easel's control layers, and `/controlnet/...` lists
what Easel has. A unit asks for nothing Easel would silently leave out: a setting Easel does
not have is refused in one sentence."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fastapi import APIRouter, Request

from app.engine.jobs.graph_sql import digest
from app.engine.jobs.params import CONTROL_MODULES, ControlLayer, encode_control
from app.server.a1111_fields import UnsupportedRequest, model_name
from app.server.requests import JobRequest, decode_image
from app.server.state import ServerState

router = APIRouter(prefix="/controlnet", tags=["automatic1111"])

CONTROLNET_SCRIPT = "controlnet"  # the extension's name, matched as clients spell it
CONTROLNET_API_VERSION = 2  # what sd-webui-controlnet's /controlnet/version answers
# A unit's keys and what Easel does with them (A1111 ControlNet's `ControlNetUnit`).
UNIT_KEYS = {
    "enabled", "image", "input_image", "mask", "module", "model", "weight",
    "guidance_start", "guidance_end", "control_mode", "pixel_perfect", "resize_mode",
    "processor_res", "threshold_a", "threshold_b", "low_vram", "hr_option", "guessmode",
}  # fmt: skip
BALANCED = ("Balanced", 0, None)  # A1111's default control mode: Easel's only one
JUST_RESIZE = ("Just Resize", 0)
BOTH_PASSES = ("Both", None)


def control_job(
    scripts: dict[str, Any], job: JobRequest, state: ServerState, *, hires: bool
) -> JobRequest:
    """`job` with the control layers of ControlNet's units; any other script refused."""
    units: list[Any] = []
    for name, script in scripts.items():
        if name.lower() != CONTROLNET_SCRIPT:
            raise UnsupportedRequest(
                f"Easel runs no A1111 extension script {name!r}: only ControlNet's units are taken"
            )
        args = script.get("args", []) if isinstance(script, dict) else None
        if not isinstance(args, list):
            raise UnsupportedRequest("alwayson_scripts' controlnet needs its units in a list, args")
        units.extend(args)
    layers, images = [], []
    for index, unit in enumerate(units):
        if not isinstance(unit, dict):
            raise UnsupportedRequest(f"ControlNet unit {index} is not an object of named settings")
        if unit.get("enabled", True) is False:
            continue
        layer, png = _layer(index, unit, job, hires=hires)
        layers.append(layer)
        images.append(png)
    if not layers:
        return job
    params = replace(job.params, control=encode_control(layers))
    return replace(job, params=params, control_pngs=tuple(images))


def _layer(
    index: int, unit: dict[str, Any], job: JobRequest, *, hires: bool
) -> tuple[ControlLayer, bytes]:
    from app.engine.jobs.control_image import preprocess

    name = f"ControlNet unit {index}"
    unknown = sorted(set(unit) - UNIT_KEYS)
    if unknown:
        raise UnsupportedRequest(f"{name} has settings Easel does not know: {', '.join(unknown)}")
    image = unit.get("image") or unit.get("input_image")
    if isinstance(image, dict):  # the extension's older {"image": ..., "mask": ...}
        unit = {**unit, "mask": image.get("mask")}
        image = image.get("image")
    if not image:
        raise UnsupportedRequest(f"{name} has no image (Easel does not guide from the init image)")
    if unit.get("mask"):
        raise UnsupportedRequest(f"{name} has a mask: Easel's control layers take none")
    module = str(unit.get("module") or "none").strip().lower()
    if module not in CONTROL_MODULES:
        known = ", ".join(CONTROL_MODULES)
        raise UnsupportedRequest(f"{name}'s module {module!r} is not Easel's (it has: {known})")
    if module != "none" and any(
        unit.get(key) not in (None, -1) for key in ("processor_res", "threshold_a", "threshold_b")
    ):
        raise UnsupportedRequest(
            f"{name}: Easel's preprocessors take no resolution or thresholds; "
            "send module none with a preprocessed image, or leave them out"
        )
    model = model_name(str(unit.get("model") or ""))
    if model.lower() in ("", "none"):
        raise UnsupportedRequest(f"{name} names no ControlNet model (GET /controlnet/model_list)")
    if unit.get("control_mode", 0) not in BALANCED:
        raise UnsupportedRequest(
            f"{name}'s control_mode {unit['control_mode']!r} is not supported: "
            "Easel's ControlNet guides as A1111's Balanced mode"
        )
    if hires and unit.get("hr_option", "Both") in (*BOTH_PASSES, "High res only"):
        raise UnsupportedRequest(
            f"{name} would guide the hires pass too: Easel's hires pass is not guided "
            '(send hr_option "Low res only")'
        )
    data = decode_image(str(image), f"{name}'s image")
    _check_resize(name, unit.get("resize_mode", "Just Resize"), data, job)
    png = preprocess(module, data)  # checked, stored as an RGB PNG (as `submit --control`)
    layer = ControlLayer(
        image=digest(png), model=model, module=module, weight=float(unit.get("weight", 1.0)),
        start=float(unit.get("guidance_start", 0.0)), end=float(unit.get("guidance_end", 1.0)),
    )  # fmt: skip
    return layer, png


def _check_resize(name: str, mode: object, data: bytes, job: JobRequest) -> None:
    """Easel stretches a control image to the job's size: A1111's modes agree when the
    image already has the job's aspect ratio; otherwise only "Just Resize" does."""
    from app.engine.jobs.init_image import open_rgb

    if mode in JUST_RESIZE:
        return
    width, height = open_rgb(data).size
    if width * job.params.height != height * job.params.width:
        raise UnsupportedRequest(
            f"{name}'s resize_mode {mode!r} would crop or pad its {width}x{height} image; "
            'Easel stretches it to the job\'s size ("Just Resize")'
        )


@router.get("/model_list")
def model_list(request: Request, update: bool = True) -> dict[str, list[str]]:
    from app.engine.generation.guidance.controlnets import controlnet_folders, list_controlnets

    state: ServerState = request.app.state.easel
    folders = controlnet_folders(state.settings.model_search_path())
    return {"model_list": [info.name for info in list_controlnets(folders) if info.supported]}


@router.get("/module_list")
def module_list(alias_names: bool = False) -> dict[str, Any]:
    return {"module_list": list(CONTROL_MODULES), "module_detail": {}}


@router.get("/version")
def version() -> dict[str, int]:
    return {"version": CONTROLNET_API_VERSION}

"""The dtype matrix of the UNet families (SD 1.x, SD 2.x v-prediction, SDXL): every job kind
each supports, in a given dtype on the CPU, against the stock diffusers pipeline loaded in
that same dtype and called with its defaults, and paused at step k then resumed in a fresh
process against the uninterrupted run in that dtype.

The interface every matrix module keeps (this one's `CASES`; `dtype_matrix_flow.CASES` for
the flow families), so that `benchmarks/architectures.py --dtype` and the suite run them all
alike:

    CASES: list[Case]

    @dataclass(frozen=True)
    class Case:
        name: str  # "<family>-<kind>", e.g. "sdxl-img2img", "sd2-inpaint-masked"
        easel: Callable[[str, Path], Image.Image]
        stock: Callable[[str, Path], Image.Image]
        pause_resume: Callable[[str, Path], tuple[Image.Image, Image.Image]]

- The first argument of each callable is the dtype's name: "float16", "bfloat16" or
  "float32" (as `DeviceChoice` and $EASEL_DTYPE spell it).
- The second, `workdir`, is a folder shared by all the cases of one run (and one dtype or
  several): a case writes its tiny models there once (the next case of the family finds
  them) and its images in a sub-folder of its own name and dtype. It must outlive the run.
  This module keeps to `workdir/models/{sd1,sd2,sdxl,controlnet,ipadapter}` and
  `workdir/runs/<name>-<dtype>`; another module's cases keep to names of their own.
- `easel`: Easel's image (a `Runner` on `DeviceChoice("cpu", dtype)`).
- `stock`: the stock pipeline's image, the pipeline loaded with `torch_dtype=dtype` from
  the same files and called as its documentation shows.
- `pause_resume`: (the uninterrupted run's image, the image of a run paused at step k in
  this process and resumed in a fresh one, spawned as workers are).
- `close()`, also exported, ends the fresh process the module keeps for its resumes.

A figure is `max_diff(pixels(a), pixels(b))` (`app.testing.images`) on 0..255; the goal is
at most 1 for both comparisons, and a NaN anywhere shows as a black image, far above 1.
"""

from __future__ import annotations

import hashlib
import io
import multiprocessing
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from PIL import Image

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from app.engine.generation.files.architecture import Architecture
from app.engine.jobs.params import (
    KIND_TILED,
    ControlLayer,
    GenerationParams,
    ReferenceImage,
    encode_control,
    encode_reference,
)
from app.engine.jobs.run_inputs import NO_INPUTS, RunInputs

SCHEDULER = "Euler a"  # A1111's default; its per-step noise makes a resume's RNG state count
STEPS, PAUSE_AT = 6, 2
TILED_PAUSE_AT = 5  # of the 12 regions of a 96 px tiled upscale of the 64 px tiny model
NATIVE = 64  # the tiny models' native side
BIG = 96  # hires fix and tiled upscale: 1.5 x native (the VAE is tiled only beyond 2 x)
MASK_NAME = "upload:" + "0" * 64  # the runner is handed the bytes; only the name is checked
CONTROLNET, IP_ADAPTER = "cn-tiny", "ip-adapter_tiny"
FAMILIES = {"sd1": Architecture.SD1, "sd2": Architecture.SD2, "sdxl": Architecture.SDXL}
KINDS = (
    "txt2img", "img2img", "inpaint", "inpaint-masked", "hires", "tiled", "controlnet",
    "ip-adapter", "variation",
)  # fmt: skip
# SD 2.x has neither ControlNets nor IP-Adapters that diffusers' stock pipelines load.
UNSUPPORTED = {("sd2", "controlnet"), ("sd2", "ip-adapter")}


@dataclass(frozen=True)
class Case:
    name: str
    easel: Callable[[str, Path], Image.Image]
    stock: Callable[[str, Path], Image.Image]
    pause_resume: Callable[[str, Path], tuple[Image.Image, Image.Image]]


# --- the pictures the jobs start from: the float32 tests' own ----------------------------


def picture(size: tuple[int, int] = (NATIVE, NATIVE)) -> bytes:
    """A gradient with a red square: something for img2img to keep."""
    from tests.engine.generation.test_img2img import init_png

    return init_png(size)


def mask(size: tuple[int, int], box: tuple[int, int, int, int]) -> bytes:
    from tests.engine.generation.test_inpaint import mask_png

    return mask_png(size, box)


def control_png() -> bytes:
    """White strokes on black, as a canny map looks."""
    from tests.engine.generation.test_controlnet import control_png as strokes

    return strokes(7)


def reference_png() -> bytes:
    from tests.engine.generation.test_ip_adapter import reference_png as gradient

    return gradient()


def _upload(png: bytes) -> str:
    return "upload:" + hashlib.sha256(png).hexdigest()


# --- one job of each kind -------------------------------------------------------------------


@dataclass(frozen=True)
class Job:
    params: GenerationParams
    inputs: RunInputs = NO_INPUTS

    @property
    def pause_at(self) -> int:
        return TILED_PAUSE_AT if self.params.kind == KIND_TILED else PAUSE_AT


def job(family: str, kind: str) -> Job:
    """The job of `kind` on `family`'s tiny model (named as the family)."""
    base = GenerationParams(
        "the cat", negative_prompt="a dog", model=family, scheduler=SCHEDULER, steps=STEPS,
        cfg=7.0, width=NATIVE, height=NATIVE, seed=1234,
    )  # fmt: skip
    square = (NATIVE, NATIVE)
    if kind == "txt2img":
        return Job(base)
    if kind == "img2img":
        return Job(replace(base, init_image="job:1", strength=0.6), RunInputs(picture()))
    if kind == "inpaint":
        inpaint = replace(base, init_image="job:1", mask=MASK_NAME, strength=0.8, mask_blur=4)
        return Job(inpaint, RunInputs(picture(), mask(square, (16, 8, 48, 40))))
    if kind == "inpaint-masked":  # A1111's "only masked": the box + padding drawn at 64x64
        masked = replace(
            base, init_image="job:1", mask=MASK_NAME, strength=0.9, mask_blur=4,
            only_masked=True, mask_padding=8,
        )  # fmt: skip
        return Job(masked, RunInputs(picture((128, 96)), mask((128, 96), (70, 30, 100, 60))))
    if kind == "hires":  # the second pass: the picture enlarged (Lanczos), then img2img
        hires = replace(base, init_image="job:1", strength=0.5, width=BIG, height=BIG)
        return Job(hires, RunInputs(picture()))
    if kind == "tiled":
        tiled = replace(
            base, kind=KIND_TILED, init_image="job:1", strength=0.35, width=BIG, height=BIG
        )
        return Job(tiled, RunInputs(picture()))
    if kind == "controlnet":
        png = control_png()
        layer = ControlLayer(_upload(png), f"{CONTROLNET}-{family}", "canny", 0.8, 0.0, 1.0)
        controlled = replace(base, control=encode_control([layer])).validated()
        return Job(controlled, RunInputs(control_images=[png]))
    if kind == "ip-adapter":
        png = reference_png()
        reference = ReferenceImage(_upload(png), _adapter_name(family), 0.7)
        referenced = replace(base, reference=encode_reference([reference]))
        return Job(referenced, RunInputs(reference_images=[png]))
    if kind == "variation":
        return Job(replace(base, variation_seed=77, variation_strength=0.3))
    raise ValueError(f"no job kind {kind!r}")


def _adapter_name(family: str) -> str:
    return f"{IP_ADAPTER}_sdxl" if family == "sdxl" else IP_ADAPTER


# --- the tiny models, written once per workdir --------------------------------------------------


def _models(workdir: Path) -> Path:
    return workdir / "models"


def model_folder(workdir: Path, family: str) -> Path:
    """`family`'s tiny diffusers folder under `workdir`, written the first time it is asked."""
    from app.testing.tiny.unet import write_tiny_pipeline

    folder = _models(workdir) / family
    if not (folder / "model_index.json").is_file():
        write_tiny_pipeline(folder, architecture=FAMILIES[family])
    return folder


def controlnet_folder(workdir: Path, family: str) -> Path:
    from app.testing.tiny.unet import write_tiny_controlnet

    folder = _models(workdir) / "controlnet" / f"{CONTROLNET}-{family}"
    if not (folder / "config.json").is_file():
        write_tiny_controlnet(folder, architecture=FAMILIES[family])
    return folder


def adapters_folder(workdir: Path, family: str) -> tuple[Path, str]:
    """(the folder artists download, h94/IP-Adapter's layout; the subfolder of `family`)."""
    from app.testing.tiny.unet import write_tiny_ip_adapter

    root = _models(workdir) / "ipadapter"
    subfolder = "sdxl_models" if family == "sdxl" else "models"
    weights = root / subfolder / f"{_adapter_name(family)}.safetensors"
    if not weights.is_file():
        write_tiny_ip_adapter(root / subfolder, architecture=FAMILIES[family])
        written = root / subfolder / f"{IP_ADAPTER}.safetensors"
        if written != weights:
            written.rename(weights)
    return root, subfolder


# --- Easel ----------------------------------------------------------------------------------

_RUNNERS: dict[tuple[Path, str, str], Any] = {}


def runner(workdir: Path, family: str, dtype: str) -> Any:
    """One Runner per (workdir, family, dtype) in this process: its pipeline stays loaded."""
    key = (workdir, family, dtype)
    if key not in _RUNNERS:
        _RUNNERS[key] = _new_runner(workdir, family, dtype)
    return _RUNNERS[key]


def _new_runner(workdir: Path, family: str, dtype: str) -> Any:
    from app.engine.generation.device import DeviceChoice
    from app.engine.generation.files.sources import ModelInfo, ModelSource, detected
    from app.engine.generation.guidance.controlnets import find_controlnet
    from app.engine.generation.guidance.ip_adapters import find_ip_adapter
    from app.engine.generation.runner import Runner

    model = detected(ModelInfo(family, model_folder(workdir, family), ModelSource.USER))
    return Runner(
        device=DeviceChoice("cpu", dtype), resolve=lambda _name: model, threads=1,
        resolve_control=lambda name: find_controlnet(name, [_models(workdir) / "controlnet"]),
        resolve_reference=lambda name: find_ip_adapter(name, [_models(workdir) / "ipadapter"]),
    )  # fmt: skip


def _prepare(workdir: Path, family: str, kind: str) -> None:
    """The extra models `kind` names, written before a runner resolves them."""
    if kind == "controlnet":
        controlnet_folder(workdir, family)
    if kind == "ip-adapter":
        adapters_folder(workdir, family)


def _run(workdir: Path, family: str, kind: str, dtype: str, out: Path, pause_at: int = 0) -> Any:
    from app.engine.generation.outcome import StepDecision

    _prepare(workdir, family, kind)
    the_job = job(family, kind)

    def decide(progress: Any) -> StepDecision:
        return StepDecision.PAUSE if progress.step == pause_at else StepDecision.CONTINUE

    return runner(workdir, family, dtype).run(
        the_job.params, the_job.inputs, output_path=out, checkpoint_path=out.with_suffix(".ckpt"),
        on_step=decide,
    )  # fmt: skip


def _folder(workdir: Path, family: str, kind: str, dtype: str) -> Path:
    folder = workdir / "runs" / f"{family}-{kind}-{dtype}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _opened(path: Path) -> Image.Image:
    with Image.open(path) as image:
        return image.convert("RGB")


def easel_image(family: str, kind: str, dtype: str, workdir: Path) -> Image.Image:
    from app.engine.generation.outcome import OutcomeKind

    out = _folder(workdir, family, kind, dtype) / "easel.png"
    outcome = _run(workdir, family, kind, dtype, out)
    if outcome.kind is not OutcomeKind.COMPLETED:
        raise RuntimeError(f"{family}-{kind}-{dtype} ended {outcome.kind.name}: {outcome}")
    return _opened(out)


def pause_resume(
    family: str, kind: str, dtype: str, workdir: Path
) -> tuple[Image.Image, Image.Image]:
    """(uninterrupted, paused at step k here and resumed in a fresh process)."""
    from app.engine.generation.outcome import OutcomeKind

    folder = _folder(workdir, family, kind, dtype)
    whole = easel_image(family, kind, dtype, workdir)
    resumed = folder / "resumed.png"
    paused = _run(workdir, family, kind, dtype, resumed, pause_at=job(family, kind).pause_at)
    if paused.kind is not OutcomeKind.PAUSED:
        raise RuntimeError(f"{family}-{kind}-{dtype} did not pause: {paused.kind.name}")
    fresh_process(_finish_in_child, workdir, family, kind, dtype, resumed)
    return whole, _opened(resumed)


def _finish_in_child(workdir: Path, family: str, kind: str, dtype: str, out: Path) -> None:
    from app.engine.generation.outcome import OutcomeKind

    outcome = _run(workdir, family, kind, dtype, out)
    if outcome.kind is not OutcomeKind.COMPLETED or outcome.resumed_from is None:
        raise RuntimeError(f"the resume of {family}-{kind}-{dtype} did not resume: {outcome}")


_POOL: Any = None


def fresh_process(target: Callable[..., Any], *args: Any) -> Any:
    """`target(*args)` in a spawned process that has only the files (one kept for them all:
    each spawn pays torch's import again)."""
    global _POOL
    if _POOL is None:
        _POOL = multiprocessing.get_context("spawn").Pool(1)
    return _POOL.apply_async(target, args).get(600)


def close() -> None:
    """End the fresh process (at once: a clean exit waits seconds for torch)."""
    global _POOL
    if _POOL is not None:
        _POOL.terminate()
        _POOL.join()
        _POOL = None


# --- stock diffusers ------------------------------------------------------------------------

_STOCK: dict[tuple[Path, str, str, str], Any] = {}


def _stock_pipe(workdir: Path, family: str, kind: str, dtype: str) -> Any:
    """The stock pipeline for `kind`, loaded from the tiny model's files with
    `torch_dtype=dtype`, as its users load it (a ControlNet or an IP-Adapter as its
    documentation loads them); kept per (workdir, family, class, dtype)."""
    import diffusers
    import torch

    from app.engine.generation import denoise

    xl = "XL" if family == "sdxl" else ""
    pipeline = {
        "img2img": "Img2Img", "hires": "Img2Img", "tiled": "Img2Img", "inpaint": "Inpaint",
        "inpaint-masked": "Inpaint", "controlnet": "ControlNet",
    }.get(kind, "")  # fmt: skip
    key = (workdir, family, pipeline, dtype)
    if key not in _STOCK:
        torch_dtype = getattr(torch, dtype)
        cls = getattr(diffusers, f"StableDiffusion{xl}{pipeline}Pipeline")
        extra: dict[str, Any] = {}
        if kind == "controlnet":
            extra["controlnet"] = diffusers.ControlNetModel.from_pretrained(
                controlnet_folder(workdir, family), dtype=torch_dtype
            )
        pipe = cls.from_pretrained(model_folder(workdir, family), dtype=torch_dtype, **extra)
        pipe.set_progress_bar_config(disable=True)
        _STOCK[key] = pipe
    pipe = _STOCK[key]
    pipe.scheduler = denoise.make_scheduler(pipe, SCHEDULER)
    if kind == "ip-adapter":  # a fresh text-to-image pipe: it keeps the adapter loaded
        root, subfolder = adapters_folder(workdir, family)
        torch_dtype = getattr(torch, dtype)
        cls = type(pipe)
        pipe = cls.from_pretrained(model_folder(workdir, family), dtype=torch_dtype)
        pipe.set_progress_bar_config(disable=True)
        pipe.scheduler = denoise.make_scheduler(pipe, SCHEDULER)
        pipe.load_ip_adapter(
            str(root), subfolder=subfolder, weight_name=f"{_adapter_name(family)}.safetensors"
        )
    return pipe


def stock_image(family: str, kind: str, dtype: str, workdir: Path) -> Image.Image:
    import torch

    the_job = job(family, kind)
    params = the_job.params
    pipe = _stock_pipe(workdir, family, kind, dtype)
    if kind == "tiled":
        return _stock_tiled(pipe, the_job)
    call: dict[str, Any] = {
        "negative_prompt": params.negative_prompt, "num_inference_steps": params.steps,
        "guidance_scale": params.cfg, "generator": torch.Generator().manual_seed(params.seed),
    }  # fmt: skip
    if the_job.inputs.init_image is not None:
        image = _opened_bytes(the_job.inputs.init_image)
        if kind == "hires":
            image = image.resize((params.width, params.height), Image.Resampling.LANCZOS)
        call |= {"image": image, "strength": params.strength}
    if the_job.inputs.mask is not None:
        blurred = pipe.mask_processor.blur(_opened_bytes(the_job.inputs.mask), params.mask_blur)
        call |= {"mask_image": blurred, "width": params.width, "height": params.height}
        if params.only_masked:
            call["padding_mask_crop"] = params.mask_padding
    if kind == "controlnet":
        [layer] = params.control_layers
        call |= {
            "image": _opened_bytes(the_job.inputs.control_images[0]),
            "controlnet_conditioning_scale": layer.weight,
            "control_guidance_start": layer.start, "control_guidance_end": layer.end,
        }  # fmt: skip
    if kind == "ip-adapter":
        [reference] = params.references
        pipe.set_ip_adapter_scale(reference.weight)
        call["ip_adapter_image"] = _opened_bytes(the_job.inputs.reference_images[0])
    if kind == "variation":  # the seed's noise drawn from the generator the steps go on with
        call["latents"] = _a1111_variation_noise(
            pipe, params, getattr(torch, dtype), call["generator"]
        )
    return pipe(params.prompt, **call).images[0].convert("RGB")


def _opened_bytes(png: bytes) -> Image.Image:
    with Image.open(io.BytesIO(png)) as image:
        return image.convert("RGB") if image.mode != "L" else image.copy()


def _a1111_variation_noise(pipe: Any, params: GenerationParams, dtype: Any, generator: Any) -> Any:
    """A1111's variation noise, as its `create_random_tensors` makes it: each seed's noise
    drawn as the stock pipeline draws its own (`randn_tensor` in the pipeline's dtype; the
    seed's from `generator`, which the sampler's own draws then go on from), then its
    `slerp` of the two (A1111's verbatim, as the variation test has it), per image."""
    import torch
    from diffusers.utils.torch_utils import randn_tensor

    from tests.engine.generation.test_variation_seed import a1111_slerp

    side = params.width // pipe.vae_scale_factor
    shape = (1, pipe.unet.config.in_channels, side, side)
    noise = randn_tensor(shape, generator=generator, dtype=dtype)
    variation = torch.Generator().manual_seed(params.variation_seed)
    subnoise = randn_tensor(shape, generator=variation, dtype=dtype)
    mixed = a1111_slerp(params.variation_strength, noise[0].float(), subnoise[0].float())
    return mixed.unsqueeze(0).to(dtype)


def _stock_tiled(pipe: Any, the_job: Job) -> Image.Image:
    """Ultimate SD Upscale's plan (`tiled`: the regions, their seeds and fading masks) with
    every region redrawn by the stock img2img pipeline: the tiling is Easel's, the
    diffusion is diffusers'."""
    import torch

    from app.engine.generation.post import tiled

    params = the_job.params
    assert the_job.inputs.init_image is not None
    image = _opened_bytes(the_job.inputs.init_image).resize(
        (params.width, params.height), Image.Resampling.LANCZOS
    )

    def redraw(crop: Image.Image, region: GenerationParams) -> Image.Image:
        result = pipe(
            region.prompt, image=crop, strength=region.strength,
            negative_prompt=region.negative_prompt, num_inference_steps=region.steps,
            guidance_scale=region.cfg, generator=torch.Generator().manual_seed(region.seed),
        ).images[0]  # fmt: skip
        return result.convert("RGB")

    plan = tiled.regions(params.width, params.height, NATIVE)
    for index, region in enumerate(plan):
        image = tiled.redraw_region(image, region, index, params, NATIVE, redraw, plan)
    return image


# --- the cases ------------------------------------------------------------------------------


def _case(family: str, kind: str) -> Case:
    return Case(
        name=f"{family}-{kind}",
        easel=lambda dtype, workdir: easel_image(family, kind, dtype, workdir),
        stock=lambda dtype, workdir: stock_image(family, kind, dtype, workdir),
        pause_resume=lambda dtype, workdir: pause_resume(family, kind, dtype, workdir),
    )


CASES: list[Case] = [
    _case(family, kind)
    for family in FAMILIES
    for kind in KINDS
    if (family, kind) not in UNSUPPORTED
]

__all__ = ["CASES", "Case", "close"]

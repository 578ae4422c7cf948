"""The half-precision matrix of the flow-matching transformer families: prints `name: value`.

For SD 3.5, Flux.1 (dev-style, with a guidance embedder, and schnell-style), Flux.2 Klein
(base and step-distilled), Z-Image, Qwen-Image (`cfg` its `true_cfg_scale`), Chroma,
Flux.1 Kontext and Flux.1 Fill (an inpaint), as tiny random diffusers
folders, and each job kind the family takes (`txt2img`, `img2img`, `inpaint`,
`inpaint-masked` for "only masked", `hires` fix, `tiled` upscale, `variation` seed, a
Kontext `edit`; no family here takes a ControlNet or an IP-Adapter, and Klein no img2img,
so neither its hires fix nor its tiled upscale), in the
dtype asked (float16 or bfloat16, computed on the CPU as a GPU would; float32 runs too):
- `same_as_diffusers_max_diff[<case>-<dtype>]`: the pixel difference (of 255) between
  Easel's image and the stock diffusers pipeline's, loaded in that same dtype
  (`from_pretrained(..., dtype=dtype)`) and called as its users call it; in float16 as
  its users run it on a float16-only GPU: the text encoder float16 overflows (T5, Qwen3)
  in float32 (diffusers' Flux docs), its embeddings cast to float16 where the pipeline
  would otherwise hand float32 ones to its float16 transformer;
- `pause_resume_max_diff[<case>-<dtype>]`: between the uninterrupted run and one paused at
  step k and resumed in a fresh (spawned) process, in that dtype;
- `cases_within_one[<dtype>]`: how many cases have both figures <= 1, of how many.
A run that stops (`NonFiniteLatents`: NaN or inf in half precision) prints `nan` and names
the error on stderr.

Each case is an object with `name`, `easel(dtype, workdir)`, `stock(dtype, workdir)` and
`pause_resume(dtype, workdir)`; the tiny models are written once into `workdir/models`.
The stock references, per kind: the text-to-image pipeline; its img2img pipeline on the
picture (hires fix: on the small picture enlarged with Lanczos, as Easel enlarges it);
its inpaint pipeline on the picture and the blurred mask (only masked: its
`padding_mask_crop`, or for Z-Image, whose pipeline lacks it, the same crop done around
it); a variation: the text-to-image pipeline handed A1111's slerp of the seed's noise
(drawn as the pipeline draws it) and the variation seed's as `latents`; a tiled upscale
(SD 3.5 only: the other tiny folders' native side is 1024 px): Easel's regions, each
redrawn by the stock img2img pipeline. SD 3.5's inpaint is the stock pipeline's latents
decoded as every other SD 3 pipeline decodes them: diffusers 0.42's inpaint pipeline leaves
the VAE's shift factor out of its decode (diffusers #13611, see tests/.../test_sd3.py).

Run alone: `.venv/bin/python benchmarks/dtype_matrix_flow.py --dtype float16` (both when
`--dtype` is not given; `--only NAME` for the cases whose name contains NAME).
"""

from __future__ import annotations

import argparse
import atexit
import io
import math
import multiprocessing
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from app.engine.generation.device import DTYPE_NAMES, DeviceChoice
from app.engine.generation.families import family_of
from app.engine.generation.files.sources import ModelInfo, ModelSource, detected
from app.engine.generation.loop.variation import varied_noise
from app.engine.generation.outcome import (
    GenerationOutcome,
    OutcomeKind,
    StepDecision,
    StepProgress,
)
from app.engine.generation.post import tiled
from app.engine.generation.runner import Runner
from app.engine.jobs.params import KIND_EDIT, KIND_TILED, GenerationParams
from app.engine.jobs.run_inputs import RunInputs
from app.testing.images import max_diff, pixels

DTYPES = ("float16", "bfloat16")  # the matrix's; float32 (as the suite's tests) also runs
MASK_DIGEST = "upload:" + "0" * 64  # the runner is handed the bytes; only the name is checked
JOB = "job:1"
Fresh = Callable[..., Any]  # `fresh(target, *args)`: target(*args) in a spawned process


# --- the tiny models ------------------------------------------------------------------------


def _write_model(model: str, dest: Path) -> None:
    from app.testing.tiny.chroma import write_tiny_chroma
    from app.testing.tiny.flux import write_tiny_flux
    from app.testing.tiny.flux_fill import write_tiny_flux_fill
    from app.testing.tiny.klein import write_tiny_klein
    from app.testing.tiny.kontext import write_tiny_kontext
    from app.testing.tiny.qwen import write_tiny_qwen
    from app.testing.tiny.sd3 import write_tiny_sd3
    from app.testing.tiny.zimage import write_tiny_zimage

    writers: dict[str, Callable[[Path], Any]] = {
        "flux1-dev": lambda d: write_tiny_flux(d, guidance_embeds=True),
        "flux1-schnell": lambda d: write_tiny_flux(d, guidance_embeds=False),
        "sd3.5": lambda d: write_tiny_sd3(d),
        "zimage": lambda d: write_tiny_zimage(d),
        "flux2-klein": lambda d: write_tiny_klein(d, is_distilled=False),
        "flux2-klein-distilled": lambda d: write_tiny_klein(d, is_distilled=True),
        "qwen": lambda d: write_tiny_qwen(d),
        "chroma": lambda d: write_tiny_chroma(d),
        "flux1-kontext": lambda d: write_tiny_kontext(d),
        "flux1-fill": lambda d: write_tiny_flux_fill(d),
    }
    writers[model](dest)


def model_folder(model: str, workdir: Path) -> Path:
    """The tiny `model`'s diffusers folder in `workdir`, written on first use."""
    folder = workdir / "models" / model
    if not (folder / "model_index.json").is_file():
        _write_model(model, folder)
    return folder


@cache
def _runner(folder: Path, dtype: str) -> Runner:
    """One runner per model and dtype (a process's loads shared by its cases)."""
    info = detected(ModelInfo("m", folder, ModelSource.USER))
    return Runner(device=DeviceChoice("cpu", dtype), resolve=lambda _n: info, threads=1)


# The text encoders float16 overflows (T5 v1.1 XXL; the Qwen3 LLMs, trained in bfloat16), by
# family: on a float16-only GPU their users load them in float32, as diffusers' Flux docs
# advise, and the rest in float16.
WIDE_ENCODERS = {
    "flux1": "text_encoder_2",
    "sd3.5": "text_encoder_3",
    "zimage": "text_encoder",
    "flux2": "text_encoder",
    "qwen": "text_encoder",  # Qwen2.5-VL
    "chroma": "text_encoder",
}


@cache
def _stock_pipeline(cls_name: str, folder: Path, dtype: str) -> Any:
    """The stock pipeline `cls_name` as its users load it in `dtype` (float16: the text
    encoder that overflows it in float32, as they run it on a float16-only GPU)."""
    import diffusers

    cls = getattr(diffusers, cls_name)
    dtypes: Any = getattr(torch, dtype)
    if dtype == "float16":
        dtypes = {"default": torch.float16, WIDE_ENCODERS[_family_of(folder.name)]: torch.float32}
    pipe = cls.from_pretrained(folder, dtype=dtypes, local_files_only=True)
    pipe.set_progress_bar_config(disable=True)
    return pipe


# --- the pictures ---------------------------------------------------------------------------


def picture_png(size: tuple[int, int]) -> bytes:
    """A gradient with a red square: structure for img2img to keep (as test_img2img's)."""
    x = np.linspace(0, 255, size[0], dtype=np.uint8)
    rgb = np.stack([np.tile(x, (size[1], 1))] * 3, axis=-1)
    rgb[size[1] // 4 : size[1] // 2, size[0] // 4 : size[0] // 2] = (200, 30, 30)
    return _png(Image.fromarray(rgb))


def mask_png(size: tuple[int, int], box: tuple[int, int, int, int]) -> bytes:
    mask = Image.new("L", size, 0)
    mask.paste(255, box)
    return _png(mask)


def _png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def _open(png: bytes) -> Image.Image:
    with Image.open(io.BytesIO(png)) as image:
        return image.copy()


# --- a case ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class FlowCase:
    """One family's model and job kind: Easel's image, the stock one, a pause and resume."""

    model: str  # "flux1-dev", "sd3.5", ...: the tiny folder
    kind: str  # "txt2img", "img2img", "inpaint", "inpaint-masked", "hires", "tiled", "variation"
    params: GenerationParams
    picture: tuple[int, int] = (0, 0)  # the init picture's size; (0, 0): none
    box: tuple[int, int, int, int] | None = None  # the mask's white box (inpaint)
    pause_at: int = 2
    stock_call: Callable[[FlowCase, Path, str], Image.Image] = field(
        default=lambda case, folder, dtype: _txt2img(case, folder, dtype), repr=False
    )

    @property
    def name(self) -> str:
        return f"{self.model}-{self.kind}"

    def init_png(self) -> bytes | None:
        return picture_png(self.picture) if self.params.init_image else None

    def mask_png(self) -> bytes | None:
        return mask_png(self.picture, self.box) if self.box is not None else None

    def easel(self, dtype: str, workdir: Path) -> Image.Image:
        """Easel's image of the uninterrupted job, run in `dtype` on the CPU."""
        out = self._run_dir(dtype, workdir) / "whole.png"
        outcome = self._run(dtype, workdir, out, _go_on)
        assert outcome.kind is OutcomeKind.COMPLETED, outcome
        return _open(out.read_bytes())

    def stock(self, dtype: str, workdir: Path) -> Image.Image:
        """The stock diffusers pipeline's image, loaded in `dtype`, called with its defaults."""
        return self.stock_call(self, model_folder(self.model, workdir), dtype)

    def pause_resume(
        self, dtype: str, workdir: Path, fresh: Fresh | None = None
    ) -> tuple[Image.Image, Image.Image]:
        """(the uninterrupted image, the one paused at step `pause_at` here and resumed in a
        fresh process); `fresh` runs a function in another process (default: a spawned one
        this module keeps for all its cases)."""
        whole = self.easel(dtype, workdir)
        out = self._run_dir(dtype, workdir) / "resumed.png"
        out.unlink(missing_ok=True)  # a figure of this call's resume, never an older one's
        paused = self._run(dtype, workdir, out, _pause_at(self.pause_at))
        assert paused.kind is OutcomeKind.PAUSED and out.with_suffix(".ckpt").is_file(), paused
        (fresh or _fresh_process())(_resume, self.name, dtype, str(workdir))
        return whole, _open(out.read_bytes())

    def _run(
        self,
        dtype: str,
        workdir: Path,
        out: Path,
        on_step: Callable[[StepProgress], StepDecision],
    ) -> GenerationOutcome:
        runner = _runner(model_folder(self.model, workdir), dtype)
        return runner.run(
            self.params, RunInputs(init_image=self.init_png(), mask=self.mask_png()),
            output_path=out, checkpoint_path=out.with_suffix(".ckpt"), on_step=on_step,
        )  # fmt: skip

    def _run_dir(self, dtype: str, workdir: Path) -> Path:
        folder = workdir / "runs" / f"{self.name}-{dtype}"
        folder.mkdir(parents=True, exist_ok=True)
        return folder


def _go_on(_: StepProgress) -> StepDecision:
    return StepDecision.CONTINUE


def _pause_at(step: int) -> Callable[[StepProgress], StepDecision]:
    return lambda p: StepDecision.PAUSE if p.step == step else StepDecision.CONTINUE


def _resume(name: str, dtype: str, workdir: str) -> None:
    """In the fresh process: the paused job of case `name` run on to its end."""
    case = case_named(name)
    out = case._run_dir(dtype, Path(workdir)) / "resumed.png"
    outcome = case._run(dtype, Path(workdir), out, _go_on)
    assert outcome.kind is OutcomeKind.COMPLETED, outcome
    assert outcome.resumed_from is not None and outcome.resumed_from.step == case.pause_at


_POOL: list[Any] = []


def _fresh_process() -> Fresh:
    """One spawned process (as workers are) serves every resume of this process: it has
    nothing of the process that paused but the files, and torch is imported once."""
    if not _POOL:
        pool = multiprocessing.get_context("spawn").Pool(1)
        atexit.register(pool.terminate)
        _POOL.append(pool)

    def run(target: Callable[..., Any], *args: Any) -> Any:
        return _POOL[0].apply_async(target, args).get(600)

    return run


# --- the stock calls ------------------------------------------------------------------------


def _common(case: FlowCase, pipe: Any) -> dict[str, Any]:
    """What every stock call gets: the prompt (and negative, where the family reads one),
    steps, guidance, size and the seeded generator."""
    params = case.params
    call: dict[str, Any] = {
        "num_inference_steps": params.steps, _cfg_argument(case): params.cfg,
        "height": params.height, "width": params.width,
        "generator": torch.Generator("cpu").manual_seed(params.seed),
    }  # fmt: skip
    return {**call, **_prompt(case, pipe)}


def _cfg_argument(case: FlowCase) -> str:
    """The stock argument `cfg` is: Qwen-Image's true CFG is `true_cfg_scale`."""
    return "true_cfg_scale" if _family(case) == "qwen" else "guidance_scale"


def _prompt(case: FlowCase, pipe: Any) -> dict[str, Any]:
    """The prompt as the stock pipeline takes it. With its text encoder in float32 and its
    transformer in float16, Flux.1's, SD 3.5's, Klein's and Qwen-Image's pipelines make
    their latents in the embeddings' dtype, which the float16 transformer then refuses, and
    Z-Image's img2img and inpaint pipelines encode the picture in it with the float16 VAE
    ("Input type (float) and bias type (c10::Half)"): there the prompt is encoded first and
    the embeddings cast to float16 and passed in. Z-Image's text-to-image pipeline runs
    uncast."""
    params, family = case.params, _family(case)
    half = pipe.transformer.dtype
    encodes_picture = type(pipe).__name__ in (IMG2IMG["zimage"], INPAINT["zimage"])
    if getattr(pipe, WIDE_ENCODERS[family]).dtype == half or (
        family == "zimage" and not encodes_picture
    ):
        negative = {"negative_prompt": params.negative_prompt} if params.negative_prompt else {}
        return {"prompt": params.prompt, **negative}
    with torch.no_grad():  # as the pipelines encode
        if family == "zimage":
            embeds, negatives = pipe.encode_prompt(
                params.prompt, do_classifier_free_guidance=params.cfg > 0,
                negative_prompt=params.negative_prompt or None,
            )  # fmt: skip
            return {
                "prompt_embeds": [embed.to(half) for embed in embeds],
                "negative_prompt_embeds": [negative.to(half) for negative in negatives],
            }
        if family == "flux1":
            embeds, pooled, _ = pipe.encode_prompt(params.prompt, None, max_sequence_length=512)
            return {"prompt_embeds": embeds.to(half), "pooled_prompt_embeds": pooled}
        if family == "qwen":  # one text each: never padded, so no attention masks
            embeds, _ = pipe.encode_prompt(params.prompt)
            negative, _ = pipe.encode_prompt(params.negative_prompt)
            return {"prompt_embeds": embeds.to(half), "negative_prompt_embeds": negative.to(half)}
        if family == "chroma":
            return _chroma_prompt(case, pipe)
        if family == "flux2":
            embeds, _ = pipe.encode_prompt(params.prompt)
            negative, _ = pipe.encode_prompt("")  # the pipeline's own negative prompt
            return {"prompt_embeds": embeds.to(half), "negative_prompt_embeds": negative.to(half)}
        embeds, negative, pooled, negative_pooled = pipe.encode_prompt(
            params.prompt, None, None, negative_prompt=params.negative_prompt,
            max_sequence_length=256,
        )  # fmt: skip
    return {
        "prompt_embeds": embeds.to(half), "negative_prompt_embeds": negative.to(half),
        "pooled_prompt_embeds": pooled, "negative_pooled_prompt_embeds": negative_pooled,
    }  # fmt: skip


def _chroma_prompt(case: FlowCase, pipe: Any) -> dict[str, Any]:
    """Chroma's embeddings and attention masks (its pipeline's `encode_prompt`, at the
    pipeline's own default length: 256 tokens for inpaint, 512 for the others), cast."""
    params, half = case.params, pipe.transformer.dtype
    length = 256 if type(pipe).__name__ == INPAINT["chroma"] else 512
    embeds, _, mask, negative, _, negative_mask = pipe.encode_prompt(
        params.prompt, negative_prompt=params.negative_prompt or None,
        do_classifier_free_guidance=params.cfg > 1, max_sequence_length=length,
    )  # fmt: skip
    return {
        "prompt_embeds": embeds.to(half), "prompt_attention_mask": mask.to(half),
        "negative_prompt_embeds": negative.to(half),
        "negative_prompt_attention_mask": negative_mask.to(half),
    }  # fmt: skip


TXT2IMG = {
    "flux1": "FluxPipeline",
    "sd3.5": "StableDiffusion3Pipeline",
    "zimage": "ZImagePipeline",
    "flux2": "Flux2KleinPipeline",
    "qwen": "QwenImagePipeline",
    "chroma": "ChromaPipeline",
}
IMG2IMG = {
    "flux1": "FluxImg2ImgPipeline",
    "sd3.5": "StableDiffusion3Img2ImgPipeline",
    "zimage": "ZImageImg2ImgPipeline",
    "qwen": "QwenImageImg2ImgPipeline",
    "chroma": "ChromaImg2ImgPipeline",
}
INPAINT = {
    "flux1": "FluxInpaintPipeline",
    "sd3.5": "StableDiffusion3InpaintPipeline",
    "zimage": "ZImageInpaintPipeline",
    "flux2": "Flux2KleinInpaintPipeline",
    "qwen": "QwenImageInpaintPipeline",
    "chroma": "ChromaInpaintPipeline",
}


def _family(case: FlowCase) -> str:
    return _family_of(case.model)


def _family_of(model: str) -> str:
    """ "flux1", "sd3.5", "zimage", "flux2", "qwen" or "chroma", of a model ("flux1-dev",
    ...) or its folder."""
    return model.split("-")[0]


def _txt2img(case: FlowCase, folder: Path, dtype: str) -> Image.Image:
    pipe = _stock_pipeline(TXT2IMG[_family(case)], folder, dtype)
    image: Image.Image = pipe(**_common(case, pipe)).images[0]
    return image


def _img2img(case: FlowCase, folder: Path, dtype: str) -> Image.Image:
    """img2img, and hires fix: the picture enlarged to the job's size with Lanczos (as
    Easel's hires fix without an upscaler model), then the stock img2img pipeline."""
    pipe = _stock_pipeline(IMG2IMG[_family(case)], folder, dtype)
    picture = _open(picture_png(case.picture)).convert("RGB")
    size = (case.params.width, case.params.height)
    if picture.size != size:
        picture = picture.resize(size, Image.Resampling.LANCZOS)
    image: Image.Image = pipe(
        **_common(case, pipe), image=picture, strength=case.params.strength
    ).images[0]
    return image


def _edit(case: FlowCase, folder: Path, dtype: str) -> Image.Image:
    """A Kontext edit: `FluxKontextPipeline` on the picture and the instruction, its input
    at the preferred resolution nearest the picture's aspect ratio (its `_auto_resize`),
    the job's size as `height`, `width` and `max_area` (their product: the size kept)."""
    pipe = _stock_pipeline("FluxKontextPipeline", folder, dtype)
    call = _common(case, pipe)
    call["max_area"] = case.params.width * case.params.height
    picture = _open(picture_png(case.picture)).convert("RGB")
    image: Image.Image = pipe(**call, image=picture).images[0]
    return image


def _fill(case: FlowCase, folder: Path, dtype: str) -> Image.Image:
    """A Flux.1 Fill inpaint: `FluxFillPipeline` on the picture and the blurred mask, with
    its guidance and strength defaults (30 and 1: the job's)."""
    pipe = _stock_pipeline("FluxFillPipeline", folder, dtype)
    mask_png_bytes = case.mask_png()
    assert mask_png_bytes is not None
    mask = pipe.mask_processor.blur(_open(mask_png_bytes), blur_factor=case.params.mask_blur)
    call = _common(case, pipe)
    call.pop("guidance_scale")  # its default, 30, is the job's cfg
    picture = _open(picture_png(case.picture)).convert("RGB")
    image: Image.Image = pipe(**call, image=picture, mask_image=mask).images[0]
    return image


def _variation(case: FlowCase, folder: Path, dtype: str) -> Image.Image:
    """The text-to-image pipeline handed, as `latents`, A1111's slerp of its own noise (the
    seed's, drawn as its `prepare_latents` draws it) and the variation seed's."""
    pipe = _stock_pipeline(TXT2IMG[_family(case)], folder, dtype)
    params = case.params
    shape = family_of(pipe).latent_shape(params)
    # The dtype each stock pipeline draws its noise in: Z-Image's is float32, the others
    # draw in their prompt embeddings' dtype, the pipeline's (all loaded in `dtype`).
    draw = torch.float32 if _family(case) == "zimage" else getattr(torch, dtype)
    generator = torch.Generator("cpu").manual_seed(params.seed)
    noise = varied_noise(torch.randn(shape, generator=generator, dtype=draw), params)
    if _family(case) in ("flux1", "qwen", "chroma"):  # their pipelines take the latents packed
        noise = pipe._pack_latents(noise, *noise.shape)
    image: Image.Image = pipe(**_common(case, pipe), latents=noise).images[0]
    return image


def _inpaint(case: FlowCase, folder: Path, dtype: str) -> Image.Image:
    """The stock inpaint pipeline on the picture and the mask blurred by its mask processor
    (as the inpaint pipelines' documentation shows); only masked: `padding_mask_crop`."""
    if _family(case) == "zimage" and case.params.only_masked:
        return _zimage_only_masked(case, folder, dtype)
    pipe = _stock_pipeline(INPAINT[_family(case)], folder, dtype)
    if _family(case) == "chroma":
        # diffusers 0.42's Chroma inpaint pipeline reads `guidance_embeds` from the
        # transformer's config, which Chroma's has not, and passes nothing made of it on.
        pipe.transformer.register_to_config(guidance_embeds=False)
    params = case.params
    picture = _open(picture_png(case.picture)).convert("RGB")
    mask_png_bytes = case.mask_png()
    assert mask_png_bytes is not None
    mask = pipe.mask_processor.blur(_open(mask_png_bytes), blur_factor=params.mask_blur)
    call = {
        **_common(case, pipe),
        "image": picture,
        "mask_image": mask,
        "strength": params.strength,
    }
    if params.only_masked:
        call["padding_mask_crop"] = params.mask_padding
    if _family(case) == "flux2":  # Klein's draws at the picture's size: its users pass none
        call.pop("height"), call.pop("width")
    if _family(case) == "chroma" and params.only_masked:
        # diffusers 0.42's Chroma inpaint pipeline crops (`padding_mask_crop`) but returns
        # the box alone: pasted back as every other inpaint pipeline does at its end.
        drawn = pipe(**call).images[0]
        crop = pipe.mask_processor.get_crop_region(
            mask, params.width, params.height, pad=params.mask_padding
        )
        pasted: Image.Image = pipe.image_processor.apply_overlay(mask, picture, drawn, crop)
        return pasted
    if _family(case) != "sd3.5":
        image: Image.Image = pipe(**call).images[0]
        return image
    # SD 3.5: the stock latents (kept after its last step: its `output_type="latent"`
    # fails with `padding_mask_crop`), decoded as every other SD 3 pipeline does (#13611).
    kept: dict[str, torch.Tensor] = {}

    def keep(_pipe: Any, _i: int, _t: Any, tensors: dict[str, Any]) -> dict[str, Any]:
        kept["latents"] = tensors["latents"]
        return {}

    pipe(**call, callback_on_step_end=keep)
    vae = pipe.vae
    unscaled = kept["latents"] / vae.config.scaling_factor + vae.config.shift_factor
    with torch.no_grad():
        decoded = vae.decode(unscaled.to(vae.dtype), return_dict=False)[0]
    image = pipe.image_processor.postprocess(decoded, output_type="pil")[0]
    if params.only_masked:
        crop = pipe.mask_processor.get_crop_region(
            mask, params.width, params.height, pad=params.mask_padding
        )
        image = pipe.image_processor.apply_overlay(mask, picture, image, crop)
    return image


def _zimage_only_masked(case: FlowCase, folder: Path, dtype: str) -> Image.Image:
    """`ZImageInpaintPipeline` has no `padding_mask_crop`: the crop done around it as the
    other inpaint pipelines do it inside (the box cut and resized, pasted back)."""
    pipe = _stock_pipeline(INPAINT["zimage"], folder, dtype)
    params = case.params
    picture = _open(picture_png(case.picture)).convert("RGB")
    mask_png_bytes = case.mask_png()
    assert mask_png_bytes is not None
    mask = pipe.mask_processor.blur(_open(mask_png_bytes), params.mask_blur)
    size = {"height": params.height, "width": params.width}
    crop = pipe.mask_processor.get_crop_region(mask, **size, pad=params.mask_padding)
    out = pipe(
        **_common(case, pipe), strength=params.strength,
        image=pipe.image_processor.resize(picture.crop(crop), **size, resize_mode="fill"),
        mask_image=pipe.mask_processor.resize(mask.crop(crop), **size, resize_mode="fill"),
    ).images[0]  # fmt: skip
    image: Image.Image = pipe.image_processor.apply_overlay(mask, picture, out, crop)
    return image


def _tiled(case: FlowCase, folder: Path, dtype: str) -> Image.Image:
    """Easel's regions (`tiled`: the plan, each region's params, the blend), each redrawn by
    the stock img2img pipeline instead of Easel's loop."""
    pipe = _stock_pipeline(IMG2IMG[_family(case)], folder, dtype)
    params = case.params
    size = family_of(_stock_pipeline(TXT2IMG[_family(case)], folder, dtype)).native_size()
    image = _open(picture_png(case.picture)).convert("RGB")
    image = image.resize((params.width, params.height), Image.Resampling.LANCZOS)

    def redraw(region: Image.Image, job: GenerationParams) -> Image.Image:
        call = _common(replace(case, params=job), pipe)
        drawn: Image.Image = pipe(**call, image=region, strength=job.strength).images[0]
        return drawn

    plan = tiled.regions(params.width, params.height, size)
    for index, region in enumerate(plan):
        image = tiled.redraw_region(image, region, index, params, size, redraw, plan)
    return image


# --- the cases ------------------------------------------------------------------------------


def _base(model: str) -> GenerationParams:
    """Each family's job as its tests draw it: tiny sizes, few steps."""
    family = model.split("-")[0]
    if family == "flux1":  # distilled guidance (schnell: ignored); no negative prompt
        return GenerationParams("the cat", model="m", steps=4, cfg=3.5, width=64, height=48,
                                seed=1234)  # fmt: skip
    if family == "flux2":  # true CFG on the base model; the distilled one ignores it
        return GenerationParams("the cat", model="m", steps=3, cfg=4.0, width=64, height=48,
                                seed=1234)  # fmt: skip
    if family == "sd3.5":  # the tiny transformer's native side is 64 px
        return GenerationParams("the cat", negative_prompt="a dog", model="m", steps=4, cfg=7.0,
                                width=64, height=64, seed=1234)  # fmt: skip
    return GenerationParams("the cat", negative_prompt="a dog", model="m", steps=4, cfg=5.0,
                            width=64, height=48, seed=1234)  # fmt: skip


BOX = (16, 8, 48, 40)  # the mask's box in a 64x48 or 64x64 picture


def _cases_of(model: str, kinds: tuple[str, ...]) -> list[FlowCase]:
    base = _base(model)
    size = (base.width, base.height)
    klein = model.startswith("flux2")
    strength = 0.6 if klein else 0.9  # Klein: 3 steps at 0.6 run 2; the others 4 at 0.9 run 3
    inpaint = replace(base, init_image=JOB, mask=MASK_DIGEST, strength=strength, mask_blur=4)
    img2img = replace(base, init_image=JOB, strength=0.6)  # 4 steps at 0.6: 3 run
    made = {
        "txt2img": FlowCase(model, "txt2img", base),
        "img2img": FlowCase(model, "img2img", img2img, size, stock_call=_img2img),
        "hires": FlowCase(
            model, "hires", img2img, (size[0] // 2, size[1] // 2), stock_call=_img2img
        ),
        "inpaint": FlowCase(model, "inpaint", inpaint, size, BOX, 1, stock_call=_inpaint),
        "inpaint-masked": FlowCase(
            model,
            "inpaint-masked",
            replace(inpaint, only_masked=True, mask_padding=4)
            if klein
            else replace(inpaint, only_masked=True, mask_padding=8, width=32, height=32),
            size,
            (28, 20, 36, 28) if klein else BOX,
            1,
            stock_call=_inpaint,
        ),
        "variation": FlowCase(
            model,
            "variation",
            replace(base, variation_seed=99, variation_strength=0.3),
            stock_call=_variation,
        ),
        "tiled": FlowCase(
            model,
            "tiled",
            replace(base, kind=KIND_TILED, init_image=JOB, strength=0.5, width=96, height=96),
            (48, 48),
            pause_at=3,
            stock_call=_tiled,
        ),
    }
    return [made[kind] for kind in kinds]


# Which kinds each family takes (request_checks / flow_params): no ControlNet or IP-Adapter
# on any (submit refuses them), no img2img on Klein (so no hires fix or tiled upscale); the
# tiled upscale only where the tiny folder's native side is small (SD 3.5's 64 px; Flux's,
# Z-Image's and Klein's pipelines say 1024).
CASES: list[FlowCase] = [
    *_cases_of(
        "flux1-dev", ("txt2img", "img2img", "inpaint", "inpaint-masked", "hires", "variation")
    ),
    *_cases_of("flux1-schnell", ("txt2img", "img2img")),
    *_cases_of(
        "sd3.5",
        ("txt2img", "img2img", "inpaint", "inpaint-masked", "hires", "tiled", "variation"),
    ),
    *_cases_of("zimage", ("txt2img", "img2img", "inpaint", "inpaint-masked", "hires", "variation")),
    *_cases_of("flux2-klein", ("txt2img", "inpaint", "inpaint-masked", "variation")),
    *_cases_of("flux2-klein-distilled", ("txt2img", "inpaint")),
    *_cases_of("qwen", ("txt2img", "img2img", "inpaint", "inpaint-masked", "hires", "variation")),
    *_cases_of("chroma", ("txt2img", "img2img", "inpaint", "inpaint-masked", "hires", "variation")),
    # An edit reads its input at about 1 megapixel (the real table): the slowest case here.
    FlowCase(
        "flux1-kontext",
        "edit",
        replace(_base("flux1"), kind=KIND_EDIT, init_image=JOB, prompt="make it night"),
        (64, 48),
        pause_at=2,
        stock_call=_edit,
    ),
    FlowCase(
        "flux1-fill",
        "inpaint",
        replace(
            _base("flux1"), cfg=30.0, init_image=JOB, mask=MASK_DIGEST, strength=1.0, mask_blur=4
        ),
        (64, 48),
        BOX,
        1,
        stock_call=_fill,
    ),
]


def case_named(name: str) -> FlowCase:
    for case in CASES:
        if case.name == name:
            return case
    raise KeyError(f"no dtype-matrix case named {name!r}")


# --- the figures ----------------------------------------------------------------------------


def figures(case: FlowCase, dtype: str, workdir: Path) -> tuple[float, float]:
    """(same_as_diffusers_max_diff, pause_resume_max_diff); nan where a run stopped."""

    def same() -> float:
        ours, theirs = case.easel(dtype, workdir), case.stock(dtype, workdir)
        return float(max_diff(pixels(ours), pixels(theirs)))

    def resumed() -> float:
        whole, resumed = case.pause_resume(dtype, workdir)
        return float(max_diff(pixels(whole), pixels(resumed)))

    return _or_nan(same, f"{case.name}-{dtype} easel/stock"), _or_nan(
        resumed, f"{case.name}-{dtype} pause/resume"
    )


def _or_nan(figure: Callable[[], float], what: str) -> float:
    try:
        return figure()
    except Exception as error:  # a figure of nan, the reason on stderr: the rest still runs
        print(f"# {what}: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
        return math.nan


def run_matrix(dtypes: tuple[str, ...], only: str = "") -> None:
    with tempfile.TemporaryDirectory() as temp:
        workdir = Path(temp)
        for dtype in dtypes:
            good = total = 0
            for case in CASES:
                if only and only not in case.name:
                    continue
                started = time.perf_counter()
                same, paused = figures(case, dtype, workdir)
                label = f"{case.name}-{dtype}"
                report(f"same_as_diffusers_max_diff[{label}]", same)
                report(f"pause_resume_max_diff[{label}]", paused)
                print(f"# {label}: {time.perf_counter() - started:.1f} s", file=sys.stderr)
                total += 1
                good += int(same <= 1 and paused <= 1)  # nan compares False
            report(f"cases_within_one[{dtype}]", f"{good} of {total}")


def report(name: str, value: object) -> None:
    if isinstance(value, float) and not math.isnan(value):
        value = int(value)
    print(f"{name}: {value}", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", choices=DTYPE_NAMES, action="append")
    parser.add_argument("--only", default="", help="the cases whose name contains this")
    args = parser.parse_args(argv)
    run_matrix(tuple(args.dtype or DTYPES), args.only)


if __name__ == "__main__":
    main()

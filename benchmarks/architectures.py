"""Per-architecture generation figures on tiny random models: prints `name[arch]: value`.

For SD 1.x, SD 2.x v-prediction and SDXL, each as a diffusers folder and as a single
`.safetensors` file with the original key names:
- `load_s[arch]`: loading the pipeline (cold, from disk);
- `step_ms[arch]`: median UNet + scheduler step with CFG;
- `pause_resume_max_diff[arch]`: pixel difference (1/255) between an uninterrupted run
  and pause at step 3 + resume, worst of the four schedulers;
- `same_as_diffusers_max_diff[arch]`: pixel difference from the stock diffusers pipeline
  (StableDiffusionPipeline / StableDiffusionXLPipeline), worst of the four schedulers.

And for SD 3.x as diffusers folders (`sd3.5-medium`, with T5; `sd3.5-medium-no-t5`, the
pipeline without T5, as diffusers allows; `sd3.5-large`, also large turbo's network;
`sd3-medium`): the same four figures with its one sampler (Euler, the flow-matching one),
`step_ms` being one transformer + scheduler step with true CFG, and
`same_as_diffusers_max_diff` against stock `StableDiffusion3Pipeline`.
And for Flux.1 as a diffusers folder, dev-style (`flux1-dev`, a guidance embedder) and
schnell-style (`flux1-schnell`): the same four figures with its one sampler (Euler, the
flow-matching one), `step_ms` being one transformer + scheduler step (no CFG: distilled
guidance is a model input), and `same_as_diffusers_max_diff` against stock `FluxPipeline`.
And for Z-Image as a diffusers folder, with true CFG and a negative prompt (`zimage`) and at
Turbo's guidance 0 (`zimage-turbo`): the same four figures with its one sampler (Euler),
`step_ms` being one transformer + scheduler step, and `same_as_diffusers_max_diff` against
stock `ZImagePipeline`.
And for Qwen-Image as a diffusers folder, with true CFG and a negative prompt (`qwen-image`,
two transformer calls per step) and at `cfg` 1 (`qwen-image-no-cfg`, one): the same four
figures with its one sampler (Euler), against stock `QwenImagePipeline` given the job's
`cfg` as its `true_cfg_scale`; and an inpaint (`qwen-image-inpaint`: a 64x64 picture, a
blurred square mask, strength 0.8, true CFG): `pause_resume_max_diff` and
`same_as_diffusers_max_diff` against stock `QwenImageInpaintPipeline`; and a few-step LoRA
(`qwen-image-lightning-lora`: a tiny random LoRA named as lightx2v's 8-step Lightning file,
the job's steps, CFG and schedule its defaults) against stock with the LoRA loaded and the
scheduler built from Qwen-Image-Lightning's published config.
And for Flux.2 Klein as diffusers folders, the base model (`flux2-klein`, true CFG: two
transformer calls per step) and a step-distilled one (`flux2-klein-distilled`, one call):
the same four figures with its one sampler (Euler), against stock `Flux2KleinPipeline`;
and a Klein inpaint of each (`flux2-klein-inpaint`, `flux2-klein-distilled-inpaint`: a
64x64 picture, a blurred square mask, strength 0.8): `step_ms` being one step with the
picture's reference tokens, `pause_resume_max_diff`, and `same_as_diffusers_max_diff`
against stock `Flux2KleinInpaintPipeline` called with the picture and mask.
And for Chroma as a diffusers folder (`chroma`: true CFG with a negative prompt, T5 alone):
the same four figures with its one sampler (Euler), `step_ms` being one step of two
transformer calls, against stock `ChromaPipeline`.
And for Flux.1 Kontext as a diffusers folder (`flux1-kontext`): an edit of a 64x48 picture
("make it night") at the stock pipeline's defaults but for its steps (2: the input is read
at about 1 megapixel, its real table of preferred resolutions, and the output is
1024x1024): `pause_resume_max_diff` (paused at step 1) and `same_as_diffusers_max_diff`
against stock `FluxKontextPipeline` called with the picture, the instruction and the steps.
And a Kontext inpaint (`flux1-kontext-inpaint`: a 1024x1024 picture, a square mask, the
instruction "a red hat", 2 steps, strength 1: the stock defaults but for the steps):
`pause_resume_max_diff` (paused at step 1) and `same_as_diffusers_max_diff` against stock
`FluxKontextInpaintPipeline` called with the picture, the mask, the instruction, the steps.
And for Qwen-Image-Edit as a diffusers folder (`qwen-image-edit`): an edit of a 64x64 picture
("make it night", the negative prompt "blurry", so true CFG at the stock `true_cfg_scale`
4) at the stock pipeline's defaults but for its steps (2: the input is
read at about 1 megapixel and the output is 1024x1024): `pause_resume_max_diff` (paused at
step 1) and `same_as_diffusers_max_diff` against stock `QwenImageEditPipeline` called with
the picture, the instruction, the negative prompt and the steps, loaded with the processor
its users build without torchvision (families/qwen/processor.py). The same for
Qwen-Image-Edit Plus (`qwen-image-edit-plus`, 2509: the picture read at about 384x384 for
Qwen2.5-VL and 1 megapixel for the VAE) against stock `QwenImageEditPlusPipeline`, and Edit
Plus reading two square pictures (`qwen-image-edit-plus-2-images`: the second the first
turned a quarter) against the stock pipeline called with the list of both; the resumed run
in a fresh runner.
And for Flux.1 Fill as a diffusers folder: an inpaint (`flux1-fill-inpaint`: a 64x64
picture, a square mask off the 8-pixel grid, as drawn) and an outpaint (`flux1-fill-outpaint`:
that picture grown 16 pixels right and down, its edges stretched, the new area's mask blurred
by 4, as `python -m app outpaint` makes it), each at the stock defaults (guidance 30, strength
1): `pause_resume_max_diff` and `same_as_diffusers_max_diff` against stock `FluxFillPipeline`
called with the picture and mask (blurred first where the job blurs it).
And for Flux.1 Redux (`flux1-redux`, and `flux1-redux-bfloat16` in bfloat16; `flux1-redux-file`:
the same Redux as ComfyUI's style_models/ and clip_vision/ files, against the folder's stock
pair, float32): a tiny Flux.1
dev with a tiny FLUX.1-Redux-dev folder, a 64x64 job with one reference image (a 48x40
gradient, weight 1), guidance 2.5: `pause_resume_max_diff` and `same_as_diffusers_max_diff`
against stock `FluxPriorReduxPipeline` (given the base pipeline's text encoders, the prompt)
feeding `FluxPipeline(guidance_scale=2.5, **pipe_prior_output)`.
And for Flux.1 ControlNets (`flux1-controlnet`: a tiny Flux.1 dev with a tiny InstantX-style
`FluxControlNetModel` folder, one control layer of weight 0.8 over the first 80% of the steps;
`flux1-controlnet-union`: a tiny Union of it, two layers with control modes canny and depth,
as `FluxMultiControlNetModel` runs them; `flux1-controlnet-bfloat16`: the first in bfloat16;
`flux1-controlnet-file`: that Union as one `.safetensors` file with diffusers' keys and no
config, `flux1-controlnet-xlabs-file`: a tiny XLabs-style net as one file in XLabs' own
layout, each against stock with the same net as a folder),
a 64x64 job, guidance 2.5: `pause_resume_max_diff` and `same_as_diffusers_max_diff` against
stock `FluxControlNetPipeline` called with the control images, scales, starts, ends and modes.
And for Wan 2.1 text to video as a diffusers folder (`wan2.1`: a 9-frame 32x32 clip, CFG
with a negative prompt): `load_s`, `step_ms` (one transformer + scheduler step of the whole
clip, two calls), and `pause_resume_max_diff` and `same_as_diffusers_max_diff` over every
frame: the decoded frames of Easel's loop (before the MP4's lossy encoding), against a run
paused at step 3 and resumed from its checkpoint file, and against stock `WanPipeline`.
The same four for Wan 2.2 TI2V 5B (`wan2.2-ti2v`: text only, against its folder's own
`WanPipeline`; `wan2.2-ti2v-image`: with a 32x32 input image as the first frame) and Wan
2.1 I2V (`wan2.1-i2v`: the image's latents and mask beside the noise, CLIP image states;
`wan2.2-i2v-a14b`: its shape with two experts and no CLIP, switched at the boundary), the
image ones against stock `WanImageToVideoPipeline` given the image; Wan 2.1 FLF2V
(`wan2.1-flf2v`, `architectures_wan.py`): between a first and a last image, the two figures
against stock `WanImageToVideoPipeline(image=..., last_image=...)`; and Wan 2.2 A14B's
experts as two files paired by name (`wan2.2-a14b-expert-files`, `-gguf-q8_0`), against
stock `WanPipeline` with diffusers' single-file loads of the same two files; and Wan 2.2
TI2V 5B as ComfyUI's split files with Wan 2.2's VAE (`wan2.2-ti2v-files`, `-image`) and
Wan 2.1 I2V's with ComfyUI's CLIP vision file (`wan2.1-i2v-files`; `-open-clip`: one in
open-clip's key layout); and Wan 2.2 I2V
A14B's experts as two files (`wan2.2-i2v-a14b-expert-files`, `-gguf-q8_0`, `-last-image`).
And for LTX-Video text to video as a diffusers folder (`ltx-video`: a 17-frame 64x32 clip at
25 fps, CFG with a negative prompt): the same four figures, `step_ms` being one transformer
call on the batch of two plus the scheduler step, against stock `LTXPipeline`; and from an
input image (`ltx-video-i2v`: a 64x32 picture as the clip's first frame, the job's init
image): `pause_resume_max_diff` and `same_as_diffusers_max_diff` against stock
`LTXImageToVideoPipeline` given the picture.
And LTX-Video 0.9.5+ (`LTXConditionPipeline` folders): from a 64x32 picture at frame 0
(`ltx-condition`), with a second one at the last frame (`ltx-condition-first-last`) and
the two held weaker (`ltx-condition-strength`: the first at strength 0.8, the last at 0.6),
`pause_resume_max_diff` (paused after step 3, its checkpoint written to a file and finished
from it) and `same_as_diffusers_max_diff` against stock `LTXConditionPipeline` given those
`conditions` (their strengths; its defaults otherwise).
For Flux.1 and SD 3.5 as the files artists have (`run_file_layouts`): an all-in-one file
in the original key layout (`-file`), ComfyUI's split layout (`-split`), a GGUF Q8_0
diffusion model (`-gguf-q8_0`), an fp8 one (`-fp8`) and ComfyUI's scaled fp8 one
(`-fp8-scaled`: each weight fp8 times its `scale_weight`), each beside split text encoders
and VAE: the same four figures through Easel's loop, `load_s` being the assembly of the
pipeline from the files, and `same_as_diffusers_max_diff` against stock diffusers' own
load (the diffusers-folder twin for the full-precision files; the same quantised file for
GGUF and fp8, for Flux through Easel's key conversion, as diffusers' own fixes the width at
the released 3072; for scaled fp8, its weights multiplied out by the test and loaded as a
plain file); and `vs_unquantised_max_diff[arch-layout]`: the quantised file's image
against the full-precision one's.

And for Wan 2.1 text to video as those files (`run_wan_file_layouts`): ComfyUI's split
layout (`wan2.1-split`: the transformer in Wan-AI's keys in `diffusion_models/`, UMT5 in
`text_encoders/`, the Wan VAE in `vae/`) and city96's GGUF Q8_0 (`wan2.1-gguf-q8_0`, its 5D
patch embedding flattened as city96's are) and ComfyUI's scaled fp8 (`wan2.1-fp8-scaled`,
as `wan2.1_t2v_14B_fp8_scaled`: its reference file holds the weights multiplied out by the
test), the tiny Wan's 9-frame 32x32 clip with the
released UniPC: `load_s`, `pause_resume_max_diff` and `same_as_diffusers_max_diff` (every
frame; the reference is the folder's stock `WanPipeline` with diffusers' own single-file
loads of the transformer and VAE files), and `vs_unquantised_max_diff` of the GGUF and the
scaled fp8 against the split file.
They load as released files do: with the shipped `wan2.1-t2v-1.3b` model index and
scheduler (the tiny networks' own transformer, VAE and UMT5 configs beside them), UMT5's
tokenizer from the SentencePiece model in the UMT5 file (ComfyUI's `spiece_model`).

And LTX-Video as those files (`run_ltx_file_layouts`): Lightricks' all-in-one file
(`ltx-single-file`: transformer and a 0.9.1-shaped VAE in Lightricks' keys, beside ComfyUI's
T5 in `text_encoders/`) and a GGUF Q8_0 of its transformer beside the VAE file alone
(`ltx-gguf-q8_0`), the 17-frame 64x32 clip: the same figures, the reference being the
folder's stock `LTXPipeline` with diffusers' own single-file loads (called right after
`torch.manual_seed(seed)`: 0.9.1's decoder draws its injected noise from torch's global
generator), and `vs_unquantised_max_diff[ltx-gguf-q8_0]`; LTX-Video 0.9.5+ as those files
(`ltx-0.9.5-single-file`, `-single-file-image`, `ltx-0.9.5-gguf-q8_0`: `architectures_ltx.py`),
against stock `LTXConditionPipeline`.

And Chroma and Flux.1 Kontext as the files artists have (`run_split_layouts`): ComfyUI's split
layout (`chroma-split`, `flux1-kontext-split`: `chroma-unlocked-v50.safetensors` in
lodestones' keys / `flux1-kontext-dev.safetensors` in Black Forest Labs' beside
text_encoders/ and vae/ae.safetensors), a GGUF Q8_0 of the same transformer
(`chroma-gguf-q8_0`, `flux1-kontext-gguf-q8_0`) and an fp8 one (`chroma-fp8`,
`flux1-kontext-fp8`), with the same figures and references
(Kontext drawing from text alone at the job's size: stock with `max_area` = its area).
Qwen-Image the same way (`run_qwen_file_layouts`: `qwen-image-split`,
`qwen-image-gguf-q8_0`, `qwen-image-fp8`), its reference stock `QwenImagePipeline` with true
CFG on the diffusers folder of the same tiny model; and Qwen-Image-Edit's split files
(`qwen-image-edit-split`: an edit as the `qwen-image-edit` row, paused at step 1 of 2,
against stock `QwenImageEditPipeline` on the folder).

With `--dtype float16` or `--dtype bfloat16` (float32, the default, prints the figures
above), the dtype matrix instead: every family and job kind of `dtype_matrix.CASES` (SD 1.x,
SD 2.x v-prediction, SDXL) and of `dtype_matrix_flow.CASES` (SD 3.5, Flux.1, Flux.2 Klein, Z-Image,
Chroma),
computed in that dtype on the CPU:
- `same_as_diffusers_max_diff[<family>-<kind>-<dtype>]`: pixel difference (1/255) between
  Easel's image and the stock pipeline's, loaded in that dtype and called with its defaults;
- `pause_resume_max_diff[<family>-<kind>-<dtype>]`: between an uninterrupted run and one
  paused at step k and resumed in a fresh process;
- `dtype_cases[<dtype>]` (figures printed), `dtype_cases_within_1[<dtype>]` (those at
  most 1) and `dtype_cases_failed[<dtype>]`: the names of the others. A case that raises
  prints `error (<exception>: <message>)` as its value.
Then four video rows in that dtype (`architectures_video_half.py`: LTX-Video 0.9.5+'s
condition strengths, a distilled LTX-Video file from an image, LTX-Video 0.9.5's file, Wan
2.2 I2V A14B's expert files with a last image), the same two figures each (every frame).

Run alone (`.venv/bin/python benchmarks/architectures.py [--dtype float16]`) or from
benchmarks/generation.py (float32).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image, ImageDraw

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


from diffusers import Flux2KleinInpaintPipeline

from app.engine.generation import denoise
from app.engine.generation.device import CPU, DTYPE_NAMES
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.files.sources import ModelInfo, ModelSource, detected
from app.engine.generation.files.transformer_files import SCALED_FP8
from app.engine.generation.load.pipelines import (
    PipelineCache,
    SingleFileConfigs,
    _pipeline_class,
    load_pipeline,
)
from app.engine.generation.outcome import StepDecision, StepProgress
from app.engine.generation.runner import Runner
from app.engine.jobs.params import INIT_UPLOADED, SCHEDULERS, GenerationParams
from app.engine.jobs.run_inputs import RunInputs
from app.testing.images import max_diff, pixels, stock_image
from app.testing.tiny.chroma import write_tiny_chroma
from app.testing.tiny.flux import (
    stock_flux_controlnet,
    write_tiny_flux,
    write_tiny_flux_controlnet,
    write_tiny_flux_controlnet_file,
)
from app.testing.tiny.flux_fill import write_tiny_flux_fill
from app.testing.tiny.klein import write_tiny_klein
from app.testing.tiny.kontext import write_tiny_kontext
from app.testing.tiny.ltx import write_tiny_ltx
from app.testing.tiny.qwen import write_tiny_qwen, write_tiny_qwen_edit
from app.testing.tiny.redux import stock_redux_flux, write_tiny_redux
from app.testing.tiny.sd3 import write_tiny_sd3
from app.testing.tiny.unet import UNET_ARCHITECTURES, write_tiny_pipeline, write_tiny_single_file
from app.testing.tiny.wan import write_tiny_wan
from app.testing.tiny.zimage import write_tiny_zimage

STEPS, PAUSE_AT, TIMED_STEPS = 8, 3, 10
CONFIG_NAMES = {Architecture.SD1: "sd1", Architecture.SD2: "sd2-v", Architecture.SDXL: "sdxl"}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--dtype", choices=DTYPE_NAMES, default="float32")
    dtype = parser.parse_args(argv).dtype
    if dtype != "float32":
        run_dtype_matrix(dtype)
        from benchmarks import architectures_video_half  # its rows import this module's helpers

        architectures_video_half.run_video_rows(dtype)
        return
    run_architectures()
    run_file_layouts()
    run_wan_file_layouts()
    run_ltx_file_layouts()
    from benchmarks import architectures_ltx  # its rows import this module's helpers

    architectures_ltx.run_ltx_condition_files()
    architectures_ltx.run_ltx_distilled_file()


def matrix_cases() -> list[Any]:
    """The UNet families' cases, then the flow families'."""
    from benchmarks.dtype_matrix import CASES
    from benchmarks.dtype_matrix_flow import CASES as FLOW_CASES

    return [*CASES, *FLOW_CASES]


def run_dtype_matrix(dtype: str) -> None:
    """Each case's two figures in `dtype`, then the count (see the docstring)."""
    from diffusers.utils import logging as diffusers_logging

    from benchmarks import dtype_matrix

    # Quiet diffusers' notices (half precision "cannot run" on a CPU, which it does here).
    diffusers_logging.set_verbosity_error()
    within, failed = 0, []
    cases = matrix_cases()
    try:
        with tempfile.TemporaryDirectory() as temp:
            for case in cases:
                label = f"{case.name}-{dtype}"
                stock = _figure(lambda c=case: _diff(*_pair(c, dtype, Path(temp))))
                resumed = _figure(lambda c=case: _diff(*c.pause_resume(dtype, Path(temp))))
                report(f"same_as_diffusers_max_diff[{label}]", stock)
                report(f"pause_resume_max_diff[{label}]", resumed)
                if all(isinstance(v, int) and v <= 1 for v in (stock, resumed)):
                    within += 1
                else:
                    failed.append(case.name)
    finally:
        dtype_matrix.close()
    report(f"dtype_cases[{dtype}]", len(cases))
    report(f"dtype_cases_within_1[{dtype}]", within)
    report(f"dtype_cases_failed[{dtype}]", " ".join(failed) or "none")


def _pair(case: Any, dtype: str, workdir: Path) -> tuple[Image.Image, Image.Image]:
    return case.easel(dtype, workdir), case.stock(dtype, workdir)


def _diff(a: Image.Image, b: Image.Image) -> int:
    return max_diff(pixels(a), pixels(b))


def _figure(compute: Any) -> int | str:
    """The figure, or `error (...)` when the case raised (a NaN stop, a load that failed)."""
    try:
        return int(compute())
    except Exception as error:  # the matrix goes on: one case's failure is its figure
        return error_figure(error)


def error_figure(error: Exception) -> str:
    """What a case that raised prints as its figure: `error (<exception>: <first line>)`."""
    return f"error ({type(error).__name__}: {str(error).splitlines()[0][:200]})"


def run_architectures() -> None:
    with tempfile.TemporaryDirectory() as temp:
        work = Path(temp)
        configs = SingleFileConfigs(work / "configs")
        for arch in UNET_ARCHITECTURES:
            folder = write_tiny_pipeline(work / "configs" / CONFIG_NAMES[arch], architecture=arch)
            file = write_tiny_single_file(work / f"{arch.value}.safetensors", architecture=arch)
            _figures(arch.value, folder, work, configs)
            _figures(f"{arch.value}-file", file, work, configs)
        run_sd3(work)
        run_flux(work)
        run_zimage(work)
        run_klein(work)
        run_qwen(work)
        run_chroma(work)
        run_kontext(work)
        run_kontext_inpaint(work)
        run_qwen_edit(work)
        run_qwen_edit(work, plus=True)
        run_qwen_edit(work, plus=True, images=2)
        run_flux_fill(work)
        run_flux_redux(work)
        run_flux_controlnet(work)
        run_wan(work)
        run_ltx(work)
        run_ltx_condition(work)


def run_chroma(work: Path) -> None:
    """The Chroma row: a tiny diffusers folder, true CFG with a negative prompt."""
    folder = write_tiny_chroma(work / "chroma")
    params = GenerationParams(
        prompt="a red circle", negative_prompt="blue", model="m", steps=STEPS, cfg=5.0, seed=42
    )
    _flow_figures("chroma", detected(ModelInfo("m", folder, ModelSource.USER)), work, params)


def run_kontext(work: Path) -> None:
    """The Flux.1 Kontext row: an edit at the stock pipeline's defaults (see the docstring)."""
    from diffusers import FluxKontextPipeline

    from app.engine.jobs.params import KIND_EDIT

    folder = write_tiny_kontext(work / "flux1-kontext")
    model = detected(ModelInfo("m", folder, ModelSource.USER))
    gradient = np.tile(np.linspace(0, 255, 64, dtype=np.uint8), (48, 1))
    picture = Image.fromarray(np.stack([gradient, gradient[::-1], gradient], axis=-1))
    params = GenerationParams(
        prompt="make it night", model="m", steps=2, cfg=3.5, seed=42, width=1024, height=1024,
        kind=KIND_EDIT, init_image="job:1",
    )  # fmt: skip
    runner = Runner(device=CPU, resolve=lambda _n: model, threads=1)
    folder_run = work / "flux1-kontext-run"
    folder_run.mkdir(exist_ok=True)
    ours, resumed = folder_run / "ref.png", folder_run / "job.png"
    pause_at_1 = lambda p: StepDecision.PAUSE if p.step == 1 else StepDecision.CONTINUE  # noqa: E731
    for out, on_step in ((ours, _go), (resumed, pause_at_1), (resumed, _go)):
        runner.run(
            params, RunInputs(init_image=_png(picture)), output_path=out,
            checkpoint_path=out.with_suffix(".ckpt"), on_step=on_step,
        )  # fmt: skip
    stock_pipe: Any = FluxKontextPipeline.from_pretrained(folder, local_files_only=True)
    stock_pipe.set_progress_bar_config(disable=True)
    stock = stock_pipe(
        image=picture, prompt=params.prompt, num_inference_steps=params.steps,
        generator=torch.Generator().manual_seed(params.seed),
    ).images[0]  # fmt: skip
    report("pause_resume_max_diff[flux1-kontext]", max_diff(pixels(ours), pixels(resumed)))
    report("same_as_diffusers_max_diff[flux1-kontext]", max_diff(pixels(ours), pixels(stock)))
    shutil.rmtree(folder_run)


def run_qwen_edit(work: Path, *, plus: bool = False, images: int = 1) -> None:
    """The Qwen-Image-Edit row (`plus`: Edit Plus's; `images` > 1: Edit Plus reading that
    many pictures): an edit at the stock pipeline's defaults (see the docstring)."""
    from diffusers import QwenImageEditPipeline, QwenImageEditPlusPipeline

    from app.engine.generation.families.qwen.processor import image_only_processor
    from app.engine.jobs.graph_sql import digest
    from app.engine.jobs.params import KIND_EDIT, encode_edit_images

    label = "qwen-image-edit-plus" if plus else "qwen-image-edit"
    label += f"-{images}-images" if images > 1 else ""
    pipeline_class = QwenImageEditPlusPipeline if plus else QwenImageEditPipeline
    folder = write_tiny_qwen_edit(work / label, plus=plus)
    model = detected(ModelInfo("m", folder, ModelSource.USER))
    gradient = np.tile(np.linspace(0, 255, 64, dtype=np.uint8), (64, 1))
    first = Image.fromarray(np.stack([gradient, gradient.T, gradient[::-1]], axis=-1))
    # Square pictures: the stock default size (the last picture's shape at 1 megapixel)
    # is then the job's 1024x1024.
    pictures = [first, *(first.rotate(90 * n) for n in range(1, images))]
    pngs = [_png(picture) for picture in pictures]
    params = GenerationParams(
        prompt="make it night", negative_prompt="blurry", model="m", steps=2, cfg=4.0, seed=42,
        width=1024, height=1024, kind=KIND_EDIT, init_image="job:1",
        edit_images=encode_edit_images([digest(png) for png in pngs[1:]]),
    )  # fmt: skip
    inputs = RunInputs(init_image=pngs[0], edit_images=pngs[1:])
    folder_run = work / f"{label}-run"
    folder_run.mkdir(exist_ok=True)
    ours, resumed = folder_run / "ref.png", folder_run / "job.png"
    pause_at_1 = lambda p: StepDecision.PAUSE if p.step == 1 else StepDecision.CONTINUE  # noqa: E731
    for out, on_step in ((ours, _go), (resumed, pause_at_1), (resumed, _go)):
        runner = Runner(device=CPU, resolve=lambda _n: model, threads=1)  # a fresh run each
        runner.run(
            params, inputs, output_path=out, checkpoint_path=out.with_suffix(".ckpt"),
            on_step=on_step,
        )  # fmt: skip
    stock_pipe: Any = pipeline_class.from_pretrained(
        folder, processor=image_only_processor(folder / "processor"), local_files_only=True
    )
    stock_pipe.set_progress_bar_config(disable=True)
    stock = stock_pipe(
        image=pictures if images > 1 else first, prompt=params.prompt,
        negative_prompt=params.negative_prompt, num_inference_steps=params.steps,
        generator=torch.Generator().manual_seed(params.seed),
    ).images[0]  # fmt: skip
    report(f"pause_resume_max_diff[{label}]", max_diff(pixels(ours), pixels(resumed)))
    report(f"same_as_diffusers_max_diff[{label}]", max_diff(pixels(ours), pixels(stock)))
    shutil.rmtree(folder_run)


def run_flux_fill(work: Path) -> None:
    """The Flux.1 Fill rows: an inpaint and an outpaint (see the docstring)."""
    from app.engine.jobs.mask import Extension, Fill, outpaint

    folder = write_tiny_flux_fill(work / "flux1-fill")
    model = detected(ModelInfo("m", folder, ModelSource.USER))
    gradient = np.tile(np.linspace(0, 255, 64, dtype=np.uint8), (64, 1))
    picture = _png(Image.fromarray(np.stack([gradient, gradient[::-1], gradient.T], axis=-1)))
    mask = Image.new("L", (64, 64), 0)
    mask.paste(255, (13, 21, 45, 51))
    grown = outpaint(picture, Extension(right=16, bottom=16), Fill.EDGE, seed=42)
    base: dict[str, Any] = {
        "prompt": "a red hat", "model": "m", "steps": STEPS, "cfg": 30.0, "seed": 42,
        "init_image": "job:1", "mask": "upload:" + "0" * 64, "strength": 1.0,
    }  # fmt: skip
    inpaint = {"width": 64, "height": 64, "mask_blur": 0}
    out = {"width": grown.width, "height": grown.height, "mask_blur": 4}
    jobs: dict[str, tuple[RunInputs, dict[str, Any]]] = {
        "flux1-fill-inpaint": (RunInputs(picture, _png(mask)), inpaint),
        "flux1-fill-outpaint": (RunInputs(grown.image_png, grown.mask_png), out),
    }
    for label, (inputs, size) in jobs.items():
        params = GenerationParams(**base, **size)
        _fill_figures(label, model, work, params, inputs)


def _fill_figures(
    label: str, model: ModelInfo, work: Path, params: GenerationParams, inputs: RunInputs
) -> None:
    from diffusers import FluxFillPipeline

    runner = Runner(device=CPU, resolve=lambda _n: model, threads=1)
    folder_run = work / f"{label}-run"
    folder_run.mkdir(exist_ok=True)
    ours, resumed = folder_run / "ref.png", folder_run / "job.png"
    _whole_and_resumed(runner, params, inputs, ours, resumed)
    stock_pipe: Any = FluxFillPipeline.from_pretrained(model.path, local_files_only=True)
    stock_pipe.set_progress_bar_config(disable=True)
    assert inputs.init_image is not None and inputs.mask is not None
    mask = Image.open(io.BytesIO(inputs.mask))
    if params.mask_blur:
        mask = stock_pipe.mask_processor.blur(mask, blur_factor=params.mask_blur)
    stock = stock_pipe(
        prompt=params.prompt, image=Image.open(io.BytesIO(inputs.init_image)), mask_image=mask,
        height=params.height, width=params.width, num_inference_steps=params.steps,
        generator=torch.Generator().manual_seed(params.seed),
    ).images[0]  # fmt: skip
    report(f"pause_resume_max_diff[{label}]", max_diff(pixels(ours), pixels(resumed)))
    report(f"same_as_diffusers_max_diff[{label}]", max_diff(pixels(ours), pixels(stock)))
    shutil.rmtree(folder_run)


def run_flux_redux(work: Path) -> None:
    """The Flux.1 Redux rows: a tiny Flux.1 dev and a tiny FLUX.1-Redux-dev folder, one
    reference image (see the docstring), in float32 and bfloat16."""
    from app.engine.generation.device import DeviceChoice
    from app.engine.generation.guidance.redux_models import find_redux_model
    from app.engine.jobs.params import ReferenceImage, encode_reference

    flux = write_tiny_flux(work / "flux1-redux-base", guidance_embeds=True)
    redux = write_tiny_redux(work / "redux" / "FLUX.1-Redux-dev")
    model = detected(ModelInfo("m", flux, ModelSource.USER))
    gradient = np.tile(np.linspace(0, 255, 48, dtype=np.uint8), (40, 1))
    picture = Image.fromarray(np.stack([gradient, gradient[::-1], gradient], axis=-1))
    png = _png(picture)
    reference = ReferenceImage("upload:" + hashlib.sha256(png).hexdigest(), redux.name, 1.0)
    params = GenerationParams(
        prompt="a red circle", model="m", steps=STEPS, cfg=2.5, seed=42, width=64, height=64,
        reference=encode_reference([reference]),
    )  # fmt: skip
    for dtype, label in (("float32", "flux1-redux"), ("bfloat16", "flux1-redux-bfloat16")):
        runner = Runner(
            device=DeviceChoice("cpu", dtype), resolve=lambda _n: model, threads=1,
            resolve_redux=lambda name: find_redux_model(name, [redux.parent]),
        )  # fmt: skip
        folder_run = work / f"{label}-run"
        folder_run.mkdir(exist_ok=True)
        ours, resumed = folder_run / "ref.png", folder_run / "job.png"
        _whole_and_resumed(runner, params, RunInputs(reference_images=[png]), ours, resumed)
        stock = stock_redux_flux(flux, redux, params, [picture], getattr(torch, dtype))
        report(f"pause_resume_max_diff[{label}]", max_diff(pixels(ours), pixels(resumed)))
        report(f"same_as_diffusers_max_diff[{label}]", max_diff(pixels(ours), pixels(stock)))
        shutil.rmtree(folder_run)
    _redux_file_figures(work, flux, redux, params, picture)


def _redux_file_figures(
    work: Path, flux: Path, redux: Path, params: GenerationParams, picture: Image.Image
) -> None:
    """`flux1-redux-file`: the same Redux as ComfyUI's files (style_models/ and clip_vision/,
    the tiny folder's weights), the reference named by the file; stock is the folder's."""
    from app.engine.generation.guidance.redux_models import find_redux_model
    from app.engine.jobs.params import ReferenceImage, encode_reference
    from app.testing.tiny.redux import REDUX_FILE, write_tiny_redux_files

    root = work / "redux-files"
    configs = write_tiny_redux_files(root)
    model = detected(ModelInfo("m", flux, ModelSource.USER))
    png = _png(picture)
    reference = ReferenceImage("upload:" + hashlib.sha256(png).hexdigest(), REDUX_FILE, 1.0)
    job = GenerationParams(**{**params.to_dict(), "reference": encode_reference([reference])})
    runner = Runner(
        device=CPU, resolve=lambda _n: model, threads=1,
        resolve_redux=lambda name: find_redux_model(name, [root / "style_models"], config=configs),
    )  # fmt: skip
    ours, resumed = work / "redux-file-ref.png", work / "redux-file-job.png"
    _whole_and_resumed(runner, job, RunInputs(reference_images=[png]), ours, resumed)
    stock = stock_redux_flux(flux, redux, params, [picture], torch.float32)
    report("pause_resume_max_diff[flux1-redux-file]", max_diff(pixels(ours), pixels(resumed)))
    report("same_as_diffusers_max_diff[flux1-redux-file]", max_diff(pixels(ours), pixels(stock)))


def run_flux_controlnet(work: Path) -> None:
    """The Flux.1 ControlNet rows (see the docstring)."""
    from app.engine.generation.device import DeviceChoice
    from app.engine.generation.guidance.controlnets import find_controlnet
    from app.engine.jobs.params import ControlLayer, encode_control

    flux = write_tiny_flux(work / "flux1-controlnet-base", guidance_embeds=True)
    nets = work / "flux-controlnets"
    write_tiny_flux_controlnet(nets / "instantx")
    write_tiny_flux_controlnet(nets / "union", union=True)
    # The same tiny nets as single files (no config), beside their folders for stock.
    folders = work / "flux-controlnet-folders"
    for name, build, layout in (
        ("union-file", {"union": True, "seed": 8}, "diffusers"),
        ("xlabs-v3", {"xlabs": True, "single_layers": 0, "seed": 7}, "xlabs"),
    ):
        write_tiny_flux_controlnet_file(nets / f"{name}.safetensors", layout=layout, **build)
        write_tiny_flux_controlnet(folders / name, **build)
    model = detected(ModelInfo("m", flux, ModelSource.USER))
    pictures = [_control_picture(seed) for seed in (1, 2)]
    pngs = [_png(picture) for picture in pictures]
    rows = (
        ("flux1-controlnet", "float32", [("instantx", 0.8, 0.0, 0.8, "")]),
        ("flux1-controlnet-union", "float32", [("union", 1.0, 0.0, 1.0, "canny"),
                                               ("union", 0.6, 0.0, 1.0, "depth")]),
        ("flux1-controlnet-bfloat16", "bfloat16", [("instantx", 0.8, 0.0, 0.8, "")]),
        ("flux1-controlnet-file", "float32", [("union-file", 1.0, 0.0, 1.0, "canny"),
                                              ("union-file", 0.6, 0.0, 1.0, "depth")]),
        ("flux1-controlnet-xlabs-file", "float32", [("xlabs-v3", 0.8, 0.0, 0.8, "")]),
    )  # fmt: skip
    for label, dtype, layers in rows:
        control = [
            ControlLayer(
                "upload:" + hashlib.sha256(png).hexdigest(), net, "none", weight, start, end, kind
            )
            for png, (net, weight, start, end, kind) in zip(pngs, layers, strict=False)
        ]
        params = GenerationParams(
            prompt="a red circle", model="m", steps=STEPS, cfg=2.5, seed=42, width=64,
            height=64, control=encode_control(control),
        )  # fmt: skip
        runner = Runner(
            device=DeviceChoice("cpu", dtype), resolve=lambda _n: model, threads=1,
            resolve_control=lambda name: find_controlnet(name, [nets]),
        )  # fmt: skip
        folder_run = work / f"{label}-run"
        folder_run.mkdir(exist_ok=True)
        ours, resumed = folder_run / "ref.png", folder_run / "job.png"
        inputs = RunInputs(control_images=pngs[: len(control)])
        _whole_and_resumed(runner, params, inputs, ours, resumed)
        as_folders = [
            folders / x.model if (folders / x.model).is_dir() else nets / x.model for x in control
        ]
        stock = stock_flux_controlnet(
            flux, as_folders, params, pictures[: len(control)], getattr(torch, dtype)
        )
        report(f"pause_resume_max_diff[{label}]", max_diff(pixels(ours), pixels(resumed)))
        report(f"same_as_diffusers_max_diff[{label}]", max_diff(pixels(ours), pixels(stock)))
        shutil.rmtree(folder_run)


def _control_picture(seed: int) -> Image.Image:
    """White strokes on black, as a canny map looks."""
    rng = np.random.default_rng(seed)
    picture = Image.new("RGB", (64, 64))
    draw = ImageDraw.Draw(picture)
    for _ in range(6):
        x, y = (int(v) for v in rng.integers(0, 48, size=2))
        draw.line((x, y, x + 16, y + int(rng.integers(-8, 8))), fill="white", width=2)
    return picture


def run_kontext_inpaint(work: Path) -> None:
    """The Flux.1 Kontext inpaint row (see the docstring)."""
    from diffusers import FluxKontextInpaintPipeline

    folder = work / "flux1-kontext"
    if not folder.is_dir():
        write_tiny_kontext(folder)
    model = detected(ModelInfo("m", folder, ModelSource.USER))
    gradient = np.tile(np.linspace(0, 255, 1024, dtype=np.uint8), (1024, 1))
    picture = Image.fromarray(np.stack([gradient, gradient[::-1], gradient.T], axis=-1))
    mask = Image.new("L", (1024, 1024), 0)
    mask.paste(255, (300, 200, 700, 650))
    params = GenerationParams(
        prompt="a red hat", model="m", steps=2, cfg=3.5, seed=42, width=1024, height=1024,
        init_image="job:1", mask="upload:" + "0" * 64, mask_blur=0, strength=1.0,
    )  # fmt: skip
    runner = Runner(device=CPU, resolve=lambda _n: model, threads=1)
    folder_run = work / "flux1-kontext-inpaint-run"
    folder_run.mkdir(exist_ok=True)
    ours, resumed = folder_run / "ref.png", folder_run / "job.png"
    pause_at_1 = lambda p: StepDecision.PAUSE if p.step == 1 else StepDecision.CONTINUE  # noqa: E731
    for out, on_step in ((ours, _go), (resumed, pause_at_1), (resumed, _go)):
        runner.run(
            params, RunInputs(init_image=_png(picture), mask=_png(mask)), output_path=out,
            checkpoint_path=out.with_suffix(".ckpt"), on_step=on_step,
        )  # fmt: skip
    stock_pipe: Any = FluxKontextInpaintPipeline.from_pretrained(folder, local_files_only=True)
    stock_pipe.set_progress_bar_config(disable=True)
    stock = stock_pipe(
        prompt=params.prompt, image=picture, mask_image=mask, num_inference_steps=params.steps,
        generator=torch.Generator().manual_seed(params.seed),
    ).images[0]  # fmt: skip
    label = "flux1-kontext-inpaint"
    report(f"pause_resume_max_diff[{label}]", max_diff(pixels(ours), pixels(resumed)))
    report(f"same_as_diffusers_max_diff[{label}]", max_diff(pixels(ours), pixels(stock)))
    shutil.rmtree(folder_run)


def run_flux(work: Path) -> None:
    """The Flux.1 rows: tiny dev-style and schnell-style diffusers folders."""
    for kind in ("dev", "schnell"):
        folder = write_tiny_flux(work / f"flux1-{kind}", guidance_embeds=kind == "dev")
        _flux_figures(f"flux1-{kind}", folder, work)


def _flux_figures(label: str, path: Path, work: Path) -> None:
    # No negative prompt: Flux.1 has none (see flow_params); the sampler is Euler.
    params = GenerationParams(prompt="a red circle", model="m", steps=STEPS, cfg=3.5, seed=42)
    _flow_figures(label, detected(ModelInfo("m", path, ModelSource.USER)), work, params)


def run_zimage(work: Path) -> None:
    """The Z-Image rows: a tiny diffusers folder with true CFG and a negative prompt
    (`zimage`), and the same at guidance 0 as Turbo runs (`zimage-turbo`: no CFG)."""
    folder = write_tiny_zimage(work / "zimage")
    model = detected(ModelInfo("m", folder, ModelSource.USER))
    for label, cfg, negative in (("zimage", 5.0, "blue"), ("zimage-turbo", 0.0, "")):
        params = GenerationParams(
            prompt="a red circle", negative_prompt=negative, model="m", steps=STEPS, cfg=cfg,
            seed=42,
        )  # fmt: skip
        _flow_figures(label, model, work, params)


def run_qwen(work: Path) -> None:
    """The Qwen-Image rows: a tiny diffusers folder with true CFG and a negative prompt
    (`qwen-image`), and at `cfg` 1 (`qwen-image-no-cfg`: one transformer call a step)."""
    folder = write_tiny_qwen(work / "qwen-image")
    model = detected(ModelInfo("m", folder, ModelSource.USER))
    for label, cfg in (("qwen-image", 4.0), ("qwen-image-no-cfg", 1.0)):
        params = GenerationParams(
            prompt="a red circle", negative_prompt="blue", model="m", steps=STEPS, cfg=cfg,
            seed=42,
        )  # fmt: skip
        _flow_figures(label, model, work, params, cfg_as="true_cfg_scale")
    _qwen_inpaint_figures("qwen-image-inpaint", model, work)
    _qwen_lightning_figures("qwen-image-lightning-lora", folder, model, work)


def _qwen_lightning_figures(label: str, folder: Path, model: ModelInfo, work: Path) -> None:
    """A job naming a tiny random LoRA called as lightx2v's 8-step Qwen-Image-Lightning file,
    its steps, CFG and schedule the LoRA's defaults (prompts/few_step.py), against stock
    `QwenImagePipeline` as the LoRA's card runs it: the scheduler built
    `FlowMatchEulerDiscreteScheduler.from_config(published config)`, `load_lora_weights`,
    `true_cfg_scale` 1 and 8 steps."""
    from diffusers import FlowMatchEulerDiscreteScheduler, QwenImagePipeline

    from app.engine.generation.prompts.few_step import QWEN_LIGHTNING_SCHEDULER, few_step_defaults
    from app.testing.tiny.qwen import write_tiny_qwen_lora

    name = "Qwen-Image-Lightning-8steps-V1.0"
    lora = write_tiny_qwen_lora(work / "lora" / f"{name}.safetensors")
    asked = GenerationParams(prompt=f"a red circle <lora:{name}:1>", model="m", seed=42)
    params = few_step_defaults(asked, (), [(name, lora)]).params
    cache = PipelineCache(lora_folders=[lora.parent])
    runner = Runner(device=CPU, resolve=lambda _n: model, cache=cache, threads=1)
    run = work / f"{label}-run"
    run.mkdir(exist_ok=True)
    ours, resumed = run / "ref.png", run / "job.png"
    _whole_and_resumed(runner, params, RunInputs(), ours, resumed)
    scheduler = FlowMatchEulerDiscreteScheduler.from_config(QWEN_LIGHTNING_SCHEDULER)
    stock_pipe: Any = QwenImagePipeline.from_pretrained(
        folder, scheduler=scheduler, local_files_only=True
    )
    stock_pipe.load_lora_weights(str(lora))
    stock_pipe.set_progress_bar_config(disable=True)
    stock = stock_pipe(
        prompt="a red circle", negative_prompt=" ", true_cfg_scale=1.0,
        num_inference_steps=8, width=params.width, height=params.height,
        generator=torch.Generator().manual_seed(params.seed),
    ).images[0]  # fmt: skip
    report(f"pause_resume_max_diff[{label}]", max_diff(pixels(ours), pixels(resumed)))
    report(f"same_as_diffusers_max_diff[{label}]", max_diff(pixels(ours), pixels(stock)))
    shutil.rmtree(run)


def _qwen_inpaint_figures(label: str, model: ModelInfo, work: Path) -> None:
    """A Qwen-Image inpaint's `pause_resume_max_diff` and `same_as_diffusers_max_diff`
    (against stock `QwenImageInpaintPipeline`, its mask blurred first as its documentation
    shows): a 64x64 picture, a square mask, strength 0.8, true CFG."""
    from diffusers import QwenImageInpaintPipeline

    gradient = np.tile(np.linspace(0, 255, 64, dtype=np.uint8), (64, 1))
    picture = Image.fromarray(np.stack([gradient, gradient[::-1], gradient.T], axis=-1))
    mask = Image.new("L", (64, 64), 0)
    mask.paste(255, (16, 16, 48, 48))
    inputs = RunInputs(init_image=_png(picture), mask=_png(mask))
    params = GenerationParams(
        prompt="a red circle", negative_prompt="blue", model="m", steps=STEPS, cfg=4.0,
        seed=42, width=64, height=64, init_image="job:1", mask="upload:" + "0" * 64,
        strength=0.8, mask_blur=4,
    )  # fmt: skip
    runner = Runner(device=CPU, resolve=lambda _n: model, threads=1)
    folder = work / f"{label}-run"
    folder.mkdir(exist_ok=True)
    ours, resumed = folder / "ref.png", folder / "job.png"
    _whole_and_resumed(runner, params, inputs, ours, resumed)
    stock_pipe: Any = QwenImageInpaintPipeline(**runner.load("m").pipe.components)
    stock_pipe.set_progress_bar_config(disable=True)
    stock = stock_pipe(
        prompt=params.prompt, negative_prompt=params.negative_prompt, image=picture,
        mask_image=stock_pipe.mask_processor.blur(mask, blur_factor=params.mask_blur),
        strength=params.strength, num_inference_steps=params.steps, true_cfg_scale=params.cfg,
        height=64, width=64, generator=torch.Generator().manual_seed(params.seed),
    ).images[0]  # fmt: skip
    report(f"pause_resume_max_diff[{label}]", max_diff(pixels(ours), pixels(resumed)))
    report(f"same_as_diffusers_max_diff[{label}]", max_diff(pixels(ours), pixels(stock)))
    shutil.rmtree(folder)


def run_klein(work: Path) -> None:
    """The Flux.2 Klein rows: tiny diffusers folders, the base model (`flux2-klein`, true
    CFG) and a step-distilled one (`flux2-klein-distilled`, no CFG)."""
    for label, distilled in (("flux2-klein", False), ("flux2-klein-distilled", True)):
        folder = write_tiny_klein(work / label, is_distilled=distilled)
        # No negative prompt: the stock pipeline's is always "" (Easel's default).
        params = GenerationParams(prompt="a red circle", model="m", steps=STEPS, cfg=4.0, seed=42)
        # The stock pipeline from the folder, as its users load it: `is_distilled` is in its
        # model_index.json, not among the components `_flow_figures` would rebuild it from.
        stock = _pipeline_class(Architecture.FLUX2_KLEIN).from_pretrained(
            folder, local_files_only=True
        )
        model = detected(ModelInfo("m", folder, ModelSource.USER))
        _flow_figures(label, model, work, params, reference=stock)
        _klein_inpaint_figures(f"{label}-inpaint", model, work, folder)


def _klein_inpaint_figures(label: str, model: ModelInfo, work: Path, folder: Path) -> None:
    """A Klein inpaint's `step_ms`, `pause_resume_max_diff` and `same_as_diffusers_max_diff`
    (against stock `Flux2KleinInpaintPipeline`, called as its documentation shows)."""
    gradient = np.tile(np.linspace(0, 255, 64, dtype=np.uint8), (64, 1))
    rgb = np.stack([gradient, gradient[::-1], gradient.T], axis=-1)
    picture, mask = Image.fromarray(rgb), Image.new("L", (64, 64), 0)
    mask.paste(255, (16, 16, 48, 48))
    init_png, mask_png = _png(picture), _png(mask)
    params = GenerationParams(
        prompt="a red circle", model="m", steps=STEPS, cfg=4.0, seed=42, width=64, height=64,
        init_image="job:1", mask="upload:" + "0" * 64, strength=0.8, mask_blur=4,
    )  # fmt: skip
    runner = Runner(device=CPU, resolve=lambda _n: model, threads=1)
    pipe = runner.load("m").pipe
    timed = GenerationParams(**{**params.to_dict(), "steps": TIMED_STEPS + 1, "strength": 1.0})
    state = denoise.start(pipe, timed, init_image=init_png, mask=mask_png)
    report(f"step_ms[{label}]", f"{_timed_steps(pipe, state):.1f}")
    folder_run = work / f"{label}-run"
    folder_run.mkdir(exist_ok=True)
    ours, resumed = folder_run / "ref.png", folder_run / "job.png"
    _whole_and_resumed(runner, params, RunInputs(init_image=init_png, mask=mask_png), ours, resumed)
    stock_pipe: Any = Flux2KleinInpaintPipeline.from_pretrained(folder, local_files_only=True)
    stock_pipe.set_progress_bar_config(disable=True)
    stock = stock_pipe(
        prompt=params.prompt, image=picture,
        mask_image=stock_pipe.mask_processor.blur(mask, blur_factor=params.mask_blur),
        strength=params.strength, num_inference_steps=params.steps, guidance_scale=params.cfg,
        generator=torch.Generator().manual_seed(params.seed),
    ).images[0]  # fmt: skip
    report(f"pause_resume_max_diff[{label}]", max_diff(pixels(ours), pixels(resumed)))
    report(f"same_as_diffusers_max_diff[{label}]", max_diff(pixels(ours), pixels(stock)))
    shutil.rmtree(folder_run)


WAN_CLIP: dict[str, Any] = {"width": 32, "height": 32, "kind": "video", "frames": 9}


def run_wan(work: Path) -> None:
    """The Wan rows (see the docstring): every frame compared, before the MP4."""
    from app.testing.tiny.wan import write_tiny_wan_i2v, write_tiny_wan_ti2v

    _wan_row("wan2.1", write_tiny_wan(work / "wan2.1"), work, None)
    ti2v = write_tiny_wan_ti2v(work / "wan2.2-ti2v")
    _wan_row("wan2.2-ti2v", ti2v, work, None)
    _wan_row("wan2.2-ti2v-image", ti2v, work, _clip_image())
    _wan_row("wan2.1-i2v", write_tiny_wan_i2v(work / "wan2.1-i2v"), work, _clip_image())
    a14b = write_tiny_wan_i2v(work / "wan2.2-i2v-a14b", experts=True)
    _wan_row("wan2.2-i2v-a14b", a14b, work, _clip_image())
    from benchmarks import architectures_wan  # its rows import this module's helpers

    architectures_wan.run_wan_flf2v(work)
    architectures_wan.run_wan_expert_files(work)
    architectures_wan.run_wan_ti2v_files(work)
    architectures_wan.run_wan_i2v_files(work)
    architectures_wan.run_wan_i2v_expert_files(work)


def _clip_image() -> Image.Image:
    """The input image of the image-to-video rows: a red disc on a grey-blue ground."""
    image = Image.new("RGB", (32, 32), (90, 110, 140))
    ImageDraw.Draw(image).ellipse((8, 6, 24, 22), fill=(220, 40, 40))
    return image


def _wan_row(label: str, folder: Path, work: Path, image: Image.Image | None) -> None:
    """One Wan row: Easel's clip against a paused-and-resumed one and the stock pipeline's
    (`WanImageToVideoPipeline` given `image`, the folder's own `WanPipeline` without)."""
    model = detected(ModelInfo("m", folder, ModelSource.USER))
    png = _png(image) if image is not None else None
    named = f"{INIT_UPLOADED}{hashlib.sha256(png).hexdigest()}" if png else ""
    params = GenerationParams(
        prompt="a red circle", negative_prompt="blue", model="m", steps=STEPS, cfg=5.0,
        seed=42, init_image=named, **WAN_CLIP,
    )  # fmt: skip
    runner = Runner(device=CPU, resolve=lambda _n: model, threads=1)
    started = time.perf_counter()
    pipe = runner.load("m").pipe
    report(f"load_s[{label}]", f"{time.perf_counter() - started:.2f}")
    timed = GenerationParams(**{**params.to_dict(), "steps": TIMED_STEPS + 1})
    report(f"step_ms[{label}]", f"{_timed_steps(pipe, denoise.start(pipe, timed, png)):.1f}")
    ours = clip_frames(pipe, params, png)
    paused = work / f"{label}-paused.mp4"
    runner.run(params, RunInputs(init_image=png), output_path=paused,
               checkpoint_path=paused.with_suffix(".ckpt"), on_step=_pause)  # fmt: skip
    resumed = resumed_frames(pipe, params, paused.with_suffix(".ckpt"))
    import diffusers

    stock_class = "WanImageToVideoPipeline" if image is not None else "WanPipeline"
    stock_pipe: Any = getattr(diffusers, stock_class).from_pretrained(folder, local_files_only=True)
    stock_pipe.set_progress_bar_config(disable=True)
    stock = stock_pipe(
        prompt=params.prompt, negative_prompt=params.negative_prompt, height=params.height,
        width=params.width, num_frames=params.frames, num_inference_steps=params.steps,
        guidance_scale=params.cfg, generator=torch.Generator().manual_seed(params.seed),
        output_type="pil", **({"image": image} if image is not None else {}),
    ).frames[0]  # fmt: skip
    report(f"pause_resume_max_diff[{label}]", _frames_diff(ours, resumed))
    report(f"same_as_diffusers_max_diff[{label}]", _frames_diff(ours, stock))


def run_ltx(work: Path) -> None:
    """The LTX-Video row (see the docstring): every frame compared, before the MP4."""
    folder = write_tiny_ltx(work / "ltx-video")
    model = detected(ModelInfo("m", folder, ModelSource.USER))
    params = GenerationParams(
        prompt="a red circle", negative_prompt="blue", model="m", steps=STEPS, cfg=3.0,
        seed=42, width=64, height=32, kind="video", frames=17, fps=25,
    )  # fmt: skip
    runner = Runner(device=CPU, resolve=lambda _n: model, threads=1)
    started = time.perf_counter()
    pipe = runner.load("m").pipe
    report("load_s[ltx-video]", f"{time.perf_counter() - started:.2f}")
    report("step_ms[ltx-video]", f"{_step_ms(pipe, params):.1f}")
    ours = clip_frames(pipe, params)
    paused = work / "ltx-paused.mp4"
    runner.run(params, output_path=paused, checkpoint_path=paused.with_suffix(".ckpt"),
               on_step=_pause)  # fmt: skip
    resumed = resumed_frames(pipe, params, paused.with_suffix(".ckpt"))
    stock_pipe: Any = _pipeline_class(Architecture.LTX_VIDEO).from_pretrained(
        folder, local_files_only=True
    )
    stock_pipe.set_progress_bar_config(disable=True)
    stock = stock_pipe(
        prompt=params.prompt, negative_prompt=params.negative_prompt, height=params.height,
        width=params.width, num_frames=params.frames, frame_rate=params.fps,
        num_inference_steps=params.steps, guidance_scale=params.cfg,
        generator=torch.Generator().manual_seed(params.seed), output_type="pil",
    ).frames[0]  # fmt: skip
    report("pause_resume_max_diff[ltx-video]", _frames_diff(ours, resumed))
    report("same_as_diffusers_max_diff[ltx-video]", _frames_diff(ours, stock))
    _ltx_i2v_figures(runner, pipe, folder, params, work)


def run_ltx_condition(work: Path) -> None:
    """The `ltx-condition` rows: LTX-Video 0.9.5+ (`LTXConditionPipeline`) from an image
    at frame 0, with a last image at the last frame (`-first-last`), and the two held at
    strengths 0.8 and 0.6 (`-strength`), every frame."""
    from diffusers import LTXConditionPipeline
    from diffusers.pipelines.ltx.pipeline_ltx_condition import LTXVideoCondition

    from app.testing.tiny.ltx import write_tiny_ltx_condition

    folder = write_tiny_ltx_condition(work / "ltx-condition")
    model = detected(ModelInfo("m", folder, ModelSource.USER))
    pipe = Runner(device=CPU, resolve=lambda _n: model, threads=1).load("m").pipe
    first, last = _ltx_picture((240, 30, 60)), _ltx_picture((30, 200, 90))
    named = f"{INIT_UPLOADED}{hashlib.sha256(_png(first)).hexdigest()}"
    params = GenerationParams(
        prompt="a red circle", negative_prompt="blue", model="m", steps=STEPS, cfg=3.0,
        seed=42, width=64, height=32, kind="video", frames=17, fps=25, init_image=named,
    )  # fmt: skip
    stock_pipe: Any = LTXConditionPipeline.from_pretrained(folder, local_files_only=True)
    stock_pipe.set_progress_bar_config(disable=True)
    for label, pictures, strengths in (
        ("ltx-condition", [first], (1.0, 1.0)),
        ("ltx-condition-first-last", [first, last], (1.0, 1.0)),
        ("ltx-condition-strength", [first, last], (0.8, 0.6)),
    ):
        last_png = _png(last) if len(pictures) > 1 else None
        weighed = replace(params, image_strength=strengths[0], last_image_strength=strengths[1])
        ours = _condition_frames(pipe, weighed, _png(first), last_png)
        resumed = _condition_frames(pipe, weighed, _png(first), last_png, pause_at=PAUSE_AT)
        torch.manual_seed(params.seed)  # where a decoder injecting noise draws it
        frame_indices = (0, params.frames - 1)
        conditions = [
            LTXVideoCondition(image=picture, frame_index=index, strength=strength)
            for picture, index, strength in zip(pictures, frame_indices, strengths, strict=False)
        ]
        stock = stock_pipe(
            conditions=conditions, prompt=params.prompt, negative_prompt=params.negative_prompt,
            height=params.height, width=params.width, num_frames=params.frames,
            frame_rate=params.fps, num_inference_steps=params.steps, guidance_scale=params.cfg,
            generator=torch.Generator().manual_seed(params.seed), output_type="pil",
        ).frames[0]  # fmt: skip
        report(f"pause_resume_max_diff[{label}]", _frames_diff(ours, resumed))
        report(f"same_as_diffusers_max_diff[{label}]", _frames_diff(ours, stock))


def _ltx_picture(color: tuple[int, int, int]) -> Image.Image:
    pixels = np.zeros((32, 64, 3), dtype=np.uint8)
    pixels[..., 2] = np.linspace(0, 255, 64, dtype=np.uint8)  # a gradient, a square
    pixels[8:20, 10:30] = color
    return Image.fromarray(pixels)


def _condition_frames(
    pipe: Any, params: GenerationParams, first: bytes, last: bytes | None,
    pause_at: int = 0,
) -> list[Image.Image]:  # fmt: skip
    """A clip through Easel's loop; paused after `pause_at` steps (0: never), its
    checkpoint written to a file and finished from that file."""
    from app.engine.generation.loop.checkpoint import load_checkpoint, save_checkpoint

    state = denoise.start(pipe, params, init_image=first, last_image=last)
    while not state.finished:
        denoise.advance(pipe, state)
        if pause_at and state.steps_done == pause_at:
            with tempfile.TemporaryDirectory() as temp:
                path = Path(temp) / "paused.ckpt"
                save_checkpoint(path, denoise.snapshot(state, params, 0.0))
                state = denoise.restore(pipe, params, load_checkpoint(path, params).checkpoint)
            pause_at = 0
    return _frames(denoise.decode(pipe, state))


def _ltx_i2v_figures(
    runner: Runner, pipe: Any, folder: Path, params: GenerationParams, work: Path
) -> None:
    """The `ltx-video-i2v` row: the clip from a picture, resumed and against stock."""
    import hashlib

    from diffusers import LTXImageToVideoPipeline

    from app.engine.jobs.params import INIT_UPLOADED

    pixels = np.zeros((32, 64, 3), dtype=np.uint8)
    pixels[..., 0] = np.linspace(0, 255, 64, dtype=np.uint8)  # a gradient, a red square
    pixels[8:20, 10:30] = (240, 30, 60)
    picture = Image.fromarray(pixels)
    png = _png(picture)
    named = f"{INIT_UPLOADED}{hashlib.sha256(png).hexdigest()}"
    params = GenerationParams(**{**params.to_dict(), "init_image": named})
    state = denoise.start(pipe, params, init_image=png)
    while not state.finished:
        denoise.advance(pipe, state)
    ours = _frames(denoise.decode(pipe, state))
    paused = work / "ltx-i2v-paused.mp4"
    runner.run(params, RunInputs(init_image=png), output_path=paused,
               checkpoint_path=paused.with_suffix(".ckpt"), on_step=_pause)  # fmt: skip
    resumed = resumed_frames(pipe, params, paused.with_suffix(".ckpt"))
    stock_pipe: Any = LTXImageToVideoPipeline.from_pretrained(folder, local_files_only=True)
    stock_pipe.set_progress_bar_config(disable=True)
    stock = stock_pipe(
        image=picture, prompt=params.prompt, negative_prompt=params.negative_prompt,
        height=params.height, width=params.width, num_frames=params.frames,
        frame_rate=params.fps, num_inference_steps=params.steps, guidance_scale=params.cfg,
        generator=torch.Generator().manual_seed(params.seed), output_type="pil",
    ).frames[0]  # fmt: skip
    report("pause_resume_max_diff[ltx-video-i2v]", _frames_diff(ours, resumed))
    report("same_as_diffusers_max_diff[ltx-video-i2v]", _frames_diff(ours, stock))


def clip_frames(
    pipe: Any, params: GenerationParams, image: bytes | None = None
) -> list[Image.Image]:
    """A clip through Easel's loop, start to decoded frames (no MP4: its encoding is lossy)."""
    state = denoise.start(pipe, params, image)
    while not state.finished:
        denoise.advance(pipe, state)
    return _frames(denoise.decode(pipe, state))


def resumed_frames(pipe: Any, params: GenerationParams, checkpoint: Path) -> list[Image.Image]:
    """The clip finished from a checkpoint file, as a fresh runner would."""
    from app.engine.generation.loop.checkpoint import load_checkpoint

    state = denoise.restore(pipe, params, load_checkpoint(checkpoint, params).checkpoint)
    while not state.finished:
        denoise.advance(pipe, state)
    return _frames(denoise.decode(pipe, state))


def _frames(decoded: Any) -> list[Image.Image]:
    """A clip's decode: its frames (`denoise.decode` is typed for the image families)."""
    return list(decoded)


def _frames_diff(ours: list[Image.Image], theirs: list[Image.Image]) -> int:
    if len(ours) != len(theirs):
        return 255
    return max(max_diff(pixels(a), pixels(b)) for a, b in zip(ours, theirs, strict=True))


def _png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def _flow_figures(
    label: str,
    model: ModelInfo,
    work: Path,
    params: GenerationParams,
    cache: PipelineCache | None = None,
    reference: Any = None,
    cfg_as: str = "guidance_scale",
    stock_options: dict[str, Any] | None = None,
) -> Any:
    """A flow model's four figures through Easel's loop; `reference`: the stock pipeline to
    compare with (default: the stock class on the components Easel loaded); `cfg_as`: the
    stock argument `params.cfg` is (Qwen-Image's true CFG is `true_cfg_scale`);
    `stock_options`: more stock arguments (Kontext's `max_area`). The image."""
    runner = Runner(device=CPU, resolve=lambda _n: model, cache=cache, threads=1)
    started = time.perf_counter()
    pipe = runner.load("m").pipe
    report(f"load_s[{label}]", f"{time.perf_counter() - started:.2f}")
    report(f"step_ms[{label}]", f"{_step_ms(pipe, params):.1f}")
    folder = work / f"{label}-run"
    folder.mkdir(exist_ok=True)
    ours = _run(runner, params, folder / "ref.png", _go)
    resumed = folder / "job.png"
    _run(runner, params, resumed, _pause)
    _run(runner, params, resumed, _go)
    stock_pipe: Any = reference if reference is not None else type(pipe)(**pipe.components)
    stock_pipe.set_progress_bar_config(disable=True)
    negative = {"negative_prompt": params.negative_prompt} if params.negative_prompt else {}
    stock = stock_pipe(
        prompt=params.prompt, num_inference_steps=params.steps, **{cfg_as: params.cfg},
        width=params.width, height=params.height,
        generator=torch.Generator().manual_seed(params.seed), **negative,
        **(stock_options or {}),
    ).images[0]  # fmt: skip
    report(f"pause_resume_max_diff[{label}]", max_diff(pixels(ours), pixels(resumed)))
    report(f"same_as_diffusers_max_diff[{label}]", max_diff(pixels(ours), pixels(stock)))
    image = pixels(ours)
    shutil.rmtree(folder)
    return image


def _figures(label: str, path: Path, work: Path, configs: SingleFileConfigs) -> None:
    model = detected(ModelInfo("m", path, ModelSource.USER))
    runner = Runner(
        device=CPU, resolve=lambda _n: model, cache=PipelineCache(configs=configs), threads=1
    )
    started = time.perf_counter()
    pipe = runner.load("m").pipe
    report(f"load_s[{label}]", f"{time.perf_counter() - started:.2f}")
    params = GenerationParams(
        prompt="a red circle", negative_prompt="blue", model="m", steps=STEPS, cfg=5.0, seed=42
    )
    report(f"step_ms[{label}]", f"{_step_ms(pipe, params):.1f}")
    pause_diffs, stock_diffs = [], []
    folder = work / label
    folder.mkdir(exist_ok=True)
    for scheduler in SCHEDULERS:
        job = GenerationParams(**{**params.to_dict(), "scheduler": scheduler})
        reference = _run(runner, job, folder / "ref.png", _go)
        resumed = folder / "job.png"
        _run(runner, job, resumed, _pause)
        _run(runner, job, resumed, _go)
        pause_diffs.append(max_diff(pixels(reference), pixels(resumed)))
        stock_diffs.append(max_diff(pixels(reference), stock_image(pipe, job)))
    report(f"pause_resume_max_diff[{label}]", max(pause_diffs))
    report(f"same_as_diffusers_max_diff[{label}]", max(stock_diffs))
    shutil.rmtree(folder)


SD3_FOLDERS = {  # label: (tiny.sd3 variant, with T5)
    "sd3.5-medium": ("3.5-medium", True),
    "sd3.5-medium-no-t5": ("3.5-medium", False),
    "sd3.5-large": ("3.5-large", True),
    "sd3-medium": ("3-medium", True),
}


def run_sd3(work: Path) -> None:
    """The SD 3.x rows: tiny diffusers folders of each transformer shape."""
    for label, (variant, with_t5) in SD3_FOLDERS.items():
        folder = write_tiny_sd3(work / label, variant=variant, with_t5=with_t5)
        _sd3_figures(label, folder, work)


def _sd3_figures(label: str, path: Path, work: Path) -> None:
    params = GenerationParams(
        prompt="a red circle", negative_prompt="blue", model="m", steps=STEPS, cfg=5.0, seed=42
    )
    _flow_figures(label, detected(ModelInfo("m", path, ModelSource.USER)), work, params)


def report(name: str, value: object) -> None:
    print(f"{name}: {value}", flush=True)


def _step_ms(pipe: Any, params: GenerationParams) -> float:
    timed = GenerationParams(**{**params.to_dict(), "steps": TIMED_STEPS + 1})
    return _timed_steps(pipe, denoise.start(pipe, timed))


def _timed_steps(pipe: Any, state: Any) -> float:
    """The median time of `state`'s steps after the first (a warm-up), in ms."""
    denoise.advance(pipe, state)  # warm-up
    times = []
    while not state.finished:
        started = time.perf_counter()
        denoise.advance(pipe, state)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def _run(runner: Runner, params: GenerationParams, out: Path, on_step: Any) -> Path:
    runner.run(params, output_path=out, checkpoint_path=out.with_suffix(".ckpt"), on_step=on_step)
    return out


def _whole_and_resumed(
    runner: Runner, params: GenerationParams, inputs: RunInputs, whole: Path, resumed: Path
) -> None:
    """`params` run through into `whole`, and into `resumed` paused at `PAUSE_AT` and
    resumed from its checkpoint file."""
    for out, on_step in ((whole, _go), (resumed, _pause), (resumed, _go)):
        runner.run(
            params, inputs, output_path=out, checkpoint_path=out.with_suffix(".ckpt"),
            on_step=on_step,
        )  # fmt: skip


def _go(_: StepProgress) -> StepDecision:
    return StepDecision.CONTINUE


def _pause(progress: StepProgress) -> StepDecision:
    return StepDecision.PAUSE if progress.step == PAUSE_AT else StepDecision.CONTINUE


def run_file_layouts() -> None:
    """Flux.1 and SD 3.5 from single, split, GGUF and fp8 files (transformer_files.py), through
    Easel's loop; the reference is stock diffusers' own load: the diffusers-folder twin for
    the full-precision files, the same quantised file for GGUF and fp8."""
    from safetensors.torch import load_file, save_file

    from tests.engine.generation.test_scaled_fp8_files import scaled_fp8
    from tests.engine.generation.tiny_transformer_files import (
        FILE_NAMES,
        write_gguf,
        write_tiny_layouts,
    )

    with tempfile.TemporaryDirectory() as temp:
        for arch in (Architecture.FLUX1, Architecture.SD3):
            layout = write_tiny_layouts(arch, Path(temp) / arch.value)
            configs = SingleFileConfigs(layout.configs)
            twin = _pipeline_class(arch).from_pretrained(layout.folder, local_files_only=True)
            original = load_file(str(layout.split_model))
            gguf_file = layout.split_model.with_name(f"{FILE_NAMES[arch]}-Q8_0.gguf")
            write_gguf(original, gguf_file, arch)
            fp8_file = layout.split_model.with_name(f"{FILE_NAMES[arch]}-fp8.safetensors")
            fp8 = {k: v.to(torch.float8_e4m3fn) if v.ndim >= 2 else v for k, v in original.items()}
            save_file(fp8, str(fp8_file))
            scaled_file = layout.split_model.with_name(f"{FILE_NAMES[arch]}-fp8-scaled.safetensors")
            save_file(scaled_fp8(original), str(scaled_file))
            params = _file_params(arch)
            twin_image = None
            for layout_name, path in (
                ("file", layout.all_in_one),
                ("split", layout.split_model),
                ("gguf-q8_0", gguf_file),
                ("fp8", fp8_file),
                ("fp8-scaled", scaled_file),
            ):
                label = f"{arch.value}-{layout_name}"
                model = detected(ModelInfo(path.stem, path, ModelSource.USER))
                reference = twin
                if model.quantisation:
                    loaded = load_pipeline(model, CPU, configs).pipe
                    stock_transformer = _stock_transformer(loaded, model, configs)
                    reference = type(twin)(**{**twin.components, "transformer": stock_transformer})
                image = _flow_figures(
                    label, model, Path(temp), params, PipelineCache(configs=configs), reference
                )
                if twin_image is None:
                    twin_image = image  # the all-in-one file's: equal to the twin's (0 above)
                elif model.quantisation:
                    report(f"vs_unquantised_max_diff[{label}]", max_diff(image, twin_image))
        run_split_layouts(Path(temp))
        run_qwen_file_layouts(Path(temp))


def run_qwen_file_layouts(work: Path) -> None:
    """Qwen-Image from ComfyUI's split files (`qwen-image-split`: qwen_image_bf16.safetensors
    beside text_encoders/qwen_2.5_vl_7b.safetensors in Qwen's released keys, a tokenizer/
    folder and vae/qwen_image_vae.safetensors in Wan-AI's keys), a GGUF Q8_0
    (`qwen-image-gguf-q8_0`), an fp8 e4m3fn copy (`qwen-image-fp8`) and ComfyUI's fp8mixed
    layout (`qwen-image-fp8mixed`: `weight_scale` beside each fp8 weight) of its transformer;
    the reference is stock `QwenImagePipeline` on the diffusers folder of the same tiny
    model, with diffusers' own load of the quantised file for those (of the mixed file's
    weights multiplied out by the test)."""
    from safetensors.torch import load_file, save_file

    from tests.engine.generation.test_scaled_fp8_files import scaled_fp8
    from tests.engine.generation.tiny_qwen_files import in_fresh_memory, write_tiny_qwen_files

    files = write_tiny_qwen_files(Architecture.QWEN_IMAGE, work / "qwen-files")
    configs = SingleFileConfigs(files.configs)
    mixed_file = files.split_model.with_name("qwen_image_fp8mixed.safetensors")
    save_file(scaled_fp8(load_file(str(files.split_model)), mixed=True), str(mixed_file))
    # In fresh memory, as Easel's weights are (mapped from the folder, some sizes take
    # other CPU kernels: 1 off at 64x64).
    twin: Any = in_fresh_memory(
        _pipeline_class(Architecture.QWEN_IMAGE).from_pretrained(
            files.folder, local_files_only=True
        )
    )
    params = GenerationParams(
        prompt="a red circle", negative_prompt="blue", model="m", steps=STEPS, cfg=4.0,
        width=64, height=64, seed=42,
    )  # fmt: skip
    split_image = None
    for layout, path in (
        ("split", files.split_model), ("gguf-q8_0", files.gguf_model), ("fp8", files.fp8_model),
        ("fp8mixed", mixed_file),
    ):  # fmt: skip
        label = f"qwen-image-{layout}"
        model = detected(ModelInfo(path.stem, path, ModelSource.USER))
        reference = twin
        if model.quantisation:
            loaded = load_pipeline(model, CPU, configs).pipe
            stock_transformer = _stock_transformer(loaded, model, configs)
            reference = type(twin)(**{**twin.components, "transformer": stock_transformer})
        image = _flow_figures(
            label, model, work, params, PipelineCache(configs=configs), reference,
            cfg_as="true_cfg_scale",
        )  # fmt: skip
        if split_image is None:
            split_image = image
        else:
            report(f"vs_unquantised_max_diff[{label}]", max_diff(image, split_image))
    _qwen_edit_file_figures(work)


def _qwen_edit_file_figures(work: Path) -> None:
    """`qwen-image-edit-split`: Qwen-Image-Edit's split files (qwen_image_edit_bf16 beside
    the same parts), an edit at the stock pipeline's defaults as the `qwen-image-edit` row;
    the reference is stock `QwenImageEditPipeline` on the diffusers folder of the same model."""
    from diffusers import QwenImageEditPipeline

    from app.engine.generation.families.qwen.processor import image_only_processor
    from app.engine.jobs.params import KIND_EDIT
    from tests.engine.generation.tiny_qwen_files import in_fresh_memory, write_tiny_qwen_files

    label = "qwen-image-edit-split"
    files = write_tiny_qwen_files(Architecture.QWEN_IMAGE_EDIT, work / "qwen-edit-files")
    model = detected(ModelInfo("m", files.split_model, ModelSource.USER))
    gradient = np.tile(np.linspace(0, 255, 64, dtype=np.uint8), (64, 1))
    picture = Image.fromarray(np.stack([gradient, gradient.T, gradient[::-1]], axis=-1))
    params = GenerationParams(
        prompt="make it night", negative_prompt="blurry", model="m", steps=2, cfg=4.0, seed=42,
        width=1024, height=1024, kind=KIND_EDIT, init_image="job:1",
    )  # fmt: skip
    runner = Runner(
        device=CPU, resolve=lambda _n: model, threads=1,
        cache=PipelineCache(configs=SingleFileConfigs(files.configs)),
    )  # fmt: skip
    ours, resumed = work / "qwen-edit-file-ref.png", work / "qwen-edit-file-job.png"
    pause_at_1 = lambda p: StepDecision.PAUSE if p.step == 1 else StepDecision.CONTINUE  # noqa: E731
    for out, on_step in ((ours, _go), (resumed, pause_at_1), (resumed, _go)):
        outcome = runner.run(
            params, RunInputs(init_image=_png(picture)), output_path=out,
            checkpoint_path=out.with_suffix(".ckpt"), on_step=on_step,
        )  # fmt: skip
    assert outcome.resumed_from is not None and outcome.resumed_from.step == 1
    stock_pipe: Any = in_fresh_memory(
        QwenImageEditPipeline.from_pretrained(
            files.folder, processor=image_only_processor(files.folder / "processor"),
            local_files_only=True,
        )
    )  # fmt: skip
    stock_pipe.set_progress_bar_config(disable=True)
    stock = stock_pipe(
        image=picture, prompt=params.prompt, negative_prompt=params.negative_prompt,
        num_inference_steps=params.steps, generator=torch.Generator().manual_seed(params.seed),
    ).images[0]  # fmt: skip
    report(f"pause_resume_max_diff[{label}]", max_diff(pixels(ours), pixels(resumed)))
    report(f"same_as_diffusers_max_diff[{label}]", max_diff(pixels(ours), pixels(stock)))


def run_split_layouts(work: Path) -> None:
    """Chroma and Flux.1 Kontext from ComfyUI's split layout and a GGUF Q8_0 of the same
    transformer (`chroma-split`, `chroma-gguf-q8_0`, `flux1-kontext-split`,
    `flux1-kontext-gguf-q8_0`) and an fp8 one (`-fp8`), as `run_file_layouts`; Kontext
    drawing from text alone (its stock pipeline without an input image)."""
    from safetensors.torch import load_file, save_file

    from tests.engine.generation.tiny_transformer_files import (
        SPLIT_FILE_NAMES,
        write_gguf,
        write_tiny_split,
    )

    for arch in (Architecture.CHROMA, Architecture.FLUX1_KONTEXT):
        layout = write_tiny_split(arch, work / arch.value)
        configs = SingleFileConfigs(layout.configs)
        twin = _pipeline_class(arch).from_pretrained(layout.folder, local_files_only=True)
        gguf_file = layout.split_model.with_name(f"{SPLIT_FILE_NAMES[arch.value]}-Q8_0.gguf")
        original = load_file(str(layout.split_model))
        write_gguf(original, gguf_file, arch)
        fp8_file = layout.split_model.with_name(f"{SPLIT_FILE_NAMES[arch.value]}-fp8.safetensors")
        fp8 = {k: v.to(torch.float8_e4m3fn) if v.ndim >= 2 else v for k, v in original.items()}
        save_file(fp8, str(fp8_file))
        params = _split_params(arch)
        split_image = None
        for layout_name, path in (
            ("split", layout.split_model), ("gguf-q8_0", gguf_file), ("fp8", fp8_file),
        ):  # fmt: skip
            label = f"{arch.value}-{layout_name}"
            model = detected(ModelInfo(path.stem, path, ModelSource.USER))
            reference = twin
            if model.quantisation:
                loaded = load_pipeline(model, CPU, configs).pipe
                stock_transformer = _stock_transformer(loaded, model, configs)
                reference = type(twin)(**{**twin.components, "transformer": stock_transformer})
            # Kontext's stock pipeline draws `max_area` pixels (1 MP unless told): the job's.
            area = (
                {"max_area": params.width * params.height}
                if arch is not Architecture.CHROMA
                else {}
            )
            image = _flow_figures(
                label, model, work, params, PipelineCache(configs=configs), reference,
                stock_options=area,
            )  # fmt: skip
            if split_image is None:
                split_image = image  # the split file's: equal to the twin's (0 above)
            else:
                report(f"vs_unquantised_max_diff[{label}]", max_diff(image, split_image))


def _split_params(arch: Architecture) -> GenerationParams:
    """Chroma: true CFG with a negative prompt (its stock default); Kontext: guidance."""
    if arch is Architecture.CHROMA:
        return GenerationParams(
            prompt="a red circle", negative_prompt="blue", model="m", steps=STEPS, cfg=5.0,
            width=64, height=64, seed=42,
        )  # fmt: skip
    return GenerationParams(
        prompt="a red circle", model="m", steps=STEPS, cfg=3.5, width=64, height=64, seed=42
    )


def run_wan_file_layouts() -> None:
    """Wan 2.1 as ComfyUI's split files and city96's GGUF Q8_0 (see the docstring)."""
    from safetensors.torch import load_file, save_file

    from tests.engine.generation.test_scaled_fp8_files import multiplied_out, scaled_fp8
    from tests.engine.generation.tiny_wan_files import stock_from_files, write_tiny_wan_files

    with tempfile.TemporaryDirectory() as temp:
        work = Path(temp)
        files = write_tiny_wan_files(work / "wan-files")
        configs = SingleFileConfigs(files.configs.parent)
        # ComfyUI's fp8_scaled layout, and (the reference's file) its weights multiplied out.
        scaled = scaled_fp8(load_file(str(files.split_model)))
        scaled_file = files.split_model.with_name("wan2.1_t2v_1.3B_fp8_scaled.safetensors")
        save_file(scaled, str(scaled_file))
        plain_file = work / "wan2.1-fp8-scaled-multiplied-out.safetensors"
        save_file(multiplied_out(scaled), str(plain_file))
        references = {scaled_file: plain_file}
        params = GenerationParams(
            prompt="a red circle", negative_prompt="blue", model="m", scheduler="UniPC",
            steps=STEPS, cfg=5.0, seed=42, **WAN_CLIP,
        )  # fmt: skip
        split_frames: list[Image.Image] = []
        for layout, path in (
            ("split", files.split_model), ("gguf-q8_0", files.gguf_model),
            ("fp8-scaled", scaled_file),
        ):  # fmt: skip
            label = f"wan2.1-{layout}"
            ours, resumed = _clip_file_and_resumed(label, path, configs, params, work)
            stock = stock_from_files(files, references.get(path, path))(
                prompt=params.prompt, negative_prompt=params.negative_prompt,
                height=params.height, width=params.width, num_frames=params.frames,
                num_inference_steps=params.steps, guidance_scale=params.cfg,
                generator=torch.Generator().manual_seed(params.seed), output_type="pil",
            ).frames[0]  # fmt: skip
            report(f"pause_resume_max_diff[{label}]", _frames_diff(ours, resumed))
            report(f"same_as_diffusers_max_diff[{label}]", _frames_diff(ours, stock))
            if split_frames:
                report(f"vs_unquantised_max_diff[{label}]", _frames_diff(ours, split_frames))
            split_frames = split_frames or ours


def _clip_file_and_resumed(
    label: str, path: Path, configs: Any, params: GenerationParams, work: Path
) -> tuple[list[Image.Image], list[Image.Image]]:
    """A video model file's clip through Easel's loop (its load time reported), and the same
    clip paused at `PAUSE_AT` and resumed from the checkpoint."""
    model = detected(ModelInfo("m", path, ModelSource.USER))
    runner = Runner(
        device=CPU, resolve=_resolving(model), threads=1, cache=PipelineCache(configs=configs)
    )
    started = time.perf_counter()
    pipe = runner.load("m").pipe
    report(f"load_s[{label}]", f"{time.perf_counter() - started:.2f}")
    ours = clip_frames(pipe, params)
    paused = work / f"{label}-paused.mp4"
    runner.run(params, output_path=paused, checkpoint_path=paused.with_suffix(".ckpt"),
               on_step=_pause)  # fmt: skip
    return ours, resumed_frames(pipe, params, paused.with_suffix(".ckpt"))


def run_ltx_file_layouts() -> None:
    """LTX-Video as Lightricks' all-in-one file and a GGUF Q8_0 (see the docstring)."""
    from tests.engine.generation.tiny_ltx_files import stock_from_files, write_tiny_ltx_files

    with tempfile.TemporaryDirectory() as temp:
        work = Path(temp)
        files = write_tiny_ltx_files(work / "ltx-files")
        configs = SingleFileConfigs(files.configs.parent)
        params = GenerationParams(
            prompt="a red circle", negative_prompt="blue", model="m", steps=STEPS, cfg=3.0,
            seed=42, width=64, height=32, kind="video", frames=17, fps=25,
        )  # fmt: skip
        single_frames: list[Image.Image] = []
        for label, path in (("ltx-single-file", files.checkpoint),
                            ("ltx-gguf-q8_0", files.gguf_model)):  # fmt: skip
            ours, resumed = _clip_file_and_resumed(label, path, configs, params, work)
            stock_pipe = stock_from_files(files, path)
            torch.manual_seed(params.seed)  # 0.9.1's decoder draws its noise from there
            stock = stock_pipe(
                prompt=params.prompt, negative_prompt=params.negative_prompt,
                height=params.height, width=params.width, num_frames=params.frames,
                frame_rate=params.fps, num_inference_steps=params.steps,
                guidance_scale=params.cfg, generator=torch.Generator().manual_seed(params.seed),
                output_type="pil",
            ).frames[0]  # fmt: skip
            report(f"pause_resume_max_diff[{label}]", _frames_diff(ours, resumed))
            report(f"same_as_diffusers_max_diff[{label}]", _frames_diff(ours, stock))
            if single_frames:
                report(f"vs_unquantised_max_diff[{label}]", _frames_diff(ours, single_frames))
            single_frames = ours


def _resolving(model: ModelInfo) -> Any:
    return lambda _name: model


def _file_params(arch: Architecture) -> GenerationParams:
    """The tiny SD3 transformer's native side is 16 px: beyond twice that Easel tiles the VAE
    (as for every family's big images), which the stock pipeline never does."""
    if arch is Architecture.SD3:
        return GenerationParams(
            prompt="a red circle", negative_prompt="blue", model="m", steps=STEPS, cfg=4.0,
            width=32, height=32, seed=42,
        )  # fmt: skip
    return GenerationParams(
        prompt="a red circle", model="m", steps=STEPS, cfg=3.5, width=64, height=64, seed=42
    )


def _stock_transformer(pipe: Any, model: ModelInfo, configs: SingleFileConfigs) -> Any:
    """diffusers' own load of the same quantised file (for Flux, Kontext and Chroma, of its
    keys converted by Easel: diffusers' conversions fix the width at 3072, wider than the
    tiny model)."""
    from diffusers import GGUFQuantizationConfig
    from safetensors.torch import load_file

    from app.engine.generation.load.assemble import diffusers_keys

    transformer_file = model.architecture.spec.transformer_file if model.architecture else None
    assert transformer_file is not None
    to_diffusers = diffusers_keys(transformer_file.to_diffusers_keys)
    cls = type(pipe.transformer)
    options: dict[str, Any] = {
        "config": str(configs.root / model.config_name),
        "subfolder": "transformer",
        "torch_dtype": torch.float32,
        "local_files_only": True,
    }
    source: Any = str(model.path)
    if model.path.suffix == ".gguf":
        options["quantization_config"] = GGUFQuantizationConfig(compute_dtype=torch.float32)
        if transformer_file.to_diffusers_keys:
            from diffusers.models.model_loading_utils import load_gguf_checkpoint

            source = to_diffusers(dict(load_gguf_checkpoint(str(model.path), True)))
        return cls.from_single_file(source, **options)
    if model.quantisation == SCALED_FP8:  # its weights multiplied out apart from Easel's code
        from tests.engine.generation.test_scaled_fp8_files import multiplied_out

        return cls.from_single_file(
            to_diffusers(multiplied_out(load_file(str(model.path)))), **options
        )
    if transformer_file.to_diffusers_keys:
        source = to_diffusers(load_file(str(model.path)))
    transformer = cls.from_single_file(source, **options)
    transformer.enable_layerwise_casting(
        storage_dtype=torch.float8_e4m3fn, compute_dtype=torch.float32
    )
    return transformer


if __name__ == "__main__":
    main()

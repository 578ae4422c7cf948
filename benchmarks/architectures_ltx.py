"""LTX-Video 0.9.5+ rows of `architectures.py` as the files artists have (issue 38), tiny
models on the CPU, every frame compared before the MP4:

- `ltx-0.9.5-single-file` and `ltx-0.9.5-single-file-image`: Lightricks' all-in-one
  `ltx-video-2b-v0.9.5.safetensors` (transformer and a 0.9.5-shaped VAE in Lightricks'
  keys: tests/engine/generation/tiny_ltx095_files.py) beside ComfyUI's T5 in
  `text_encoders/`, detected as `ltx-condition` and loaded with the shipped
  `ltx-video-0.9.5` layout (the tiny networks' configs in it); a 17-frame 64x32 clip from
  text alone and from a 64x32 picture at frame 0: against stock `LTXConditionPipeline`
  with its defaults on diffusers' own single-file loads of the same file, and paused at
  step 3 (`PAUSE_AT`) then finished from the checkpoint.

- `ltx-0.9.5-gguf-q8_0`: a GGUF Q8_0 of that transformer in `diffusion_models/` beside
  the VAE alone in `vae/`, from text: the same figures (the reference: diffusers' own
  GGUF load of the same file), and `vs_unquantised_max_diff` against the all-in-one file.

- `ltx-0.9.8-distilled-single-file`: the same all-in-one file named as Lightricks' 2B
  distilled release (`ltxv-2b-0.9.8-distilled.safetensors`), from text, with the defaults
  its name gives a job where the artist set none (prompts/few_step.py: 8 steps, CFG 1,
  diffusers' 8 timesteps): against stock `LTXConditionPipeline` called with `timesteps=`
  those and `guidance_scale=1` on diffusers' single-file loads, and paused at step 3.

Each prints `same_as_diffusers_max_diff[<row>]` and `pause_resume_max_diff[<row>]`.
Alone: `python -m benchmarks.architectures_ltx` (`--distilled`: the distilled row only).
"""

from __future__ import annotations

import hashlib
import io
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from app.engine.generation.device import CPU
from app.engine.generation.files.sources import (
    ModelInfo,
    ModelSearchPath,
    ModelSource,
    detected,
    list_models,
)
from app.engine.generation.load.pipelines import PipelineCache, SingleFileConfigs
from app.engine.generation.runner import Runner
from app.engine.jobs.params import INIT_UPLOADED, GenerationParams
from app.engine.jobs.run_inputs import RunInputs
from benchmarks.architectures import (
    STEPS,
    _frames_diff,
    _pause,
    _resolving,
    clip_frames,
    report,
    resumed_frames,
)


def run_ltx_condition_files() -> None:
    """The rows above (see the docstring)."""
    from tests.engine.generation.tiny_ltx095_files import stock_from_file, write_tiny_ltx095_files

    with tempfile.TemporaryDirectory() as temp:
        work = Path(temp)
        files = write_tiny_ltx095_files(work / "ltx095-files")
        configs = SingleFileConfigs(files.configs.parent)
        picture = _picture()
        png = _png(picture)
        text = GenerationParams(
            prompt="a red circle", negative_prompt="blue", model="m", steps=STEPS, cfg=3.0,
            seed=42, width=64, height=32, kind="video", frames=17, fps=25,
        )  # fmt: skip
        image = GenerationParams(**{**text.to_dict(), "init_image": _named(png)})
        rows = (
            ("ltx-0.9.5-single-file", files.checkpoint, text, None),
            ("ltx-0.9.5-single-file-image", files.checkpoint, image, png),
            ("ltx-0.9.5-gguf-q8_0", files.gguf_model, text, None),
        )
        unquantised: list[Image.Image] = []
        for label, path, params, first in rows:
            ours, resumed = _clip_and_resumed(label, path, configs, params, work, first)
            transformer_file = path if path.suffix == ".gguf" else None
            extra = {} if first is None else {"image": picture}
            stock = _stock_clip(stock_from_file(files, transformer_file), params, **extra)
            report(f"pause_resume_max_diff[{label}]", _frames_diff(ours, resumed))
            report(f"same_as_diffusers_max_diff[{label}]", _frames_diff(ours, stock))
            if transformer_file is not None:
                report(f"vs_unquantised_max_diff[{label}]", _frames_diff(ours, unquantised))
            elif first is None:
                unquantised = ours


DISTILLED_FILE = "ltxv-2b-0.9.8-distilled.safetensors"  # Lightricks' name of the release


def run_ltx_distilled_file() -> None:
    """The distilled row (see the docstring): its defaults applied as at submit."""
    from app.engine.generation.prompts.few_step import LTX_DISTILLED_TIMESTEPS, job_defaults
    from tests.engine.generation.tiny_ltx095_files import stock_from_file, write_tiny_ltx095_files

    label = "ltx-0.9.8-distilled-single-file"
    with tempfile.TemporaryDirectory() as temp:
        work = Path(temp)
        files = write_tiny_ltx095_files(work / "ltx095-files")
        distilled = files.checkpoint.with_name(DISTILLED_FILE)
        os.link(files.checkpoint, distilled)  # the same bytes under the release's name
        search = ModelSearchPath(user=(files.models,))
        name = next(info.name for info in list_models(search) if info.path == distilled)
        asked = GenerationParams(
            prompt="a red circle", negative_prompt="blue", model=name, seed=42, width=64,
            height=32, kind="video", frames=17, fps=25,
        )  # fmt: skip
        applied = job_defaults(asked, (), search)
        print(f"# {name}: {applied.note()}")
        params = applied.params.validated()
        configs = SingleFileConfigs(files.configs.parent)
        ours, resumed = _clip_and_resumed(label, distilled, configs, params, work, None)
        stock = _stock_clip(stock_from_file(files), params, timesteps=LTX_DISTILLED_TIMESTEPS)
        report(f"pause_resume_max_diff[{label}]", _frames_diff(ours, resumed))
        report(f"same_as_diffusers_max_diff[{label}]", _frames_diff(ours, stock))


def _clip_and_resumed(
    label: str, path: Path, configs: Any, params: GenerationParams, work: Path,
    first: bytes | None,
) -> tuple[list[Image.Image], list[Image.Image]]:  # fmt: skip
    """The file's clip through Easel's loop (its load time reported), and the same clip
    paused at `PAUSE_AT` by a runner and finished from its checkpoint."""
    model = detected(ModelInfo("m", path, ModelSource.USER))
    runner = Runner(
        device=CPU, resolve=_resolving(model), threads=1, cache=PipelineCache(configs=configs)
    )
    started = time.perf_counter()
    pipe = runner.load("m").pipe
    report(f"load_s[{label}]", f"{time.perf_counter() - started:.2f}")
    ours = clip_frames(pipe, params, first)
    paused = work / f"{label}-paused.mp4"
    runner.run(params, RunInputs(init_image=first), output_path=paused,
               checkpoint_path=paused.with_suffix(".ckpt"), on_step=_pause)  # fmt: skip
    return ours, resumed_frames(pipe, params, paused.with_suffix(".ckpt"))


def _stock_clip(pipe: Any, params: GenerationParams, **extra: Any) -> list[Image.Image]:
    """Stock `LTXConditionPipeline` with its defaults (size, frames, steps, guidance and
    the prompts aside), right after `torch.manual_seed(seed)` as Easel's decode is."""
    torch.manual_seed(params.seed)
    frames: list[Image.Image] = pipe(
        prompt=params.prompt, negative_prompt=params.negative_prompt, height=params.height,
        width=params.width, num_frames=params.frames, frame_rate=params.fps,
        num_inference_steps=params.steps, guidance_scale=params.cfg,
        generator=torch.Generator().manual_seed(params.seed), output_type="pil", **extra,
    ).frames[0]  # fmt: skip
    return frames


def _picture() -> Image.Image:
    """A 64x32 gradient with a red square: the clip's first frame."""
    pixels = np.zeros((32, 64, 3), dtype=np.uint8)
    pixels[..., 0] = np.linspace(0, 255, 64, dtype=np.uint8)
    pixels[8:20, 10:30] = (240, 30, 60)
    return Image.fromarray(pixels)


def _png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def _named(png: bytes) -> str:
    return f"{INIT_UPLOADED}{hashlib.sha256(png).hexdigest()}"


if __name__ == "__main__":
    if "--distilled" not in sys.argv[1:]:
        run_ltx_condition_files()
    run_ltx_distilled_file()

"""Wan rows of `architectures.py` beyond a folder's own clip (issue 38), tiny models on the
CPU, every frame compared before the MP4:

- `wan2.1-flf2v`: Wan 2.1 first-and-last-frame (a 9-frame 32x32 clip between two 32x32
  images) against stock `WanImageToVideoPipeline(image=..., last_image=...)` with its
  defaults, and paused at step 3 (`PAUSE_AT`) then finished from the checkpoint;
  `wan2.2-i2v-a14b-last-image` the same on a Wan 2.2 I2V A14B folder (two experts, no CLIP:
  stock takes `last_image` there too).

- `wan2.2-a14b-expert-files` and `wan2.2-a14b-expert-files-gguf-q8_0`: Wan 2.2 A14B's two
  experts as two files, ComfyUI's `wan2.2_t2v_high_noise_14B_fp16.safetensors` and its
  low-noise twin, and city96's `...-HighNoise-Q8_0.gguf` pair (tests/engine/generation/
  tiny_wan_expert_files.py: a 9-frame 32x32 clip, the released UniPC, the switch at step 2
  of 8), paired by name into one model: against stock `WanPipeline` with diffusers' own
  single-file loads of the same two files, and paused at step 3 (after the switch); the
  split pair also `vs_folder_max_diff` against the diffusers folder with `transformer` and
  `transformer_2` (the same weights: within 1, mapped at other alignments).

- `wan2.2-ti2v-files` and `wan2.2-ti2v-files-image`: Wan 2.2 TI2V 5B as ComfyUI's split
  files (`wan2.2_ti2v_5B_fp16.safetensors` in Wan-AI's keys, the UMT5 file carrying its
  tokenizer, `wan2.2_vae.safetensors` in the keys of Wan-AI's `Wan2.2_VAE.pth`:
  tests/engine/generation/tiny_wan_ti2v_files.py, the released UniPC), a 9-frame 32x32
  clip from text alone and from a 32x32 image: against stock `WanPipeline` /
  `WanImageToVideoPipeline` on the same weights (the transformer read from the file by
  diffusers, the VAE the folder twin's: diffusers 0.42 cannot read Wan 2.2's VAE file),
  and paused at step 3.

- `wan2.1-i2v-files`: Wan 2.1 I2V as ComfyUI's files (`wan2.1_i2v_480p_14B_fp16.safetensors`,
  the UMT5 file, the Wan 2.1 VAE, `clip_vision/clip_vision_h.safetensors` in transformers'
  keys: tests/engine/generation/tiny_wan_i2v_files.py, the released UniPC), a 9-frame 32x32
  clip from a 32x32 image: against stock `WanImageToVideoPipeline` with diffusers' own
  single-file loads of the transformer and VAE files (the folder twin's CLIP encoder), and
  paused at step 3; `wan2.1-i2v-files-open-clip`: the same with the CLIP vision file in
  open-clip's key layout (`visual.transformer.resblocks.`), converted as it loads.

- `wan2.2-i2v-a14b-expert-files`, `-gguf-q8_0` and `-last-image`: Wan 2.2 I2V A14B's two
  experts as two files, ComfyUI's `wan2.2_i2v_high_noise_14B_fp16.safetensors` and its
  low-noise twin, and city96's `Wan2.2-I2V-A14B-HighNoise-Q8_0.gguf` pair (tests/engine/
  generation/tiny_wan_i2v_expert_files.py: the shipped `wan2.2-i2v-a14b` folder, its UniPC
  and boundary 0.9, no CLIP file), paired by name into one model, a 9-frame 32x32 clip from
  a 32x32 image (`-last-image`: the split pair between it and a last image): against stock
  `WanImageToVideoPipeline` with diffusers' own single-file loads of the same two files,
  and paused at step 3 (after the switch).

Each prints `same_as_diffusers_max_diff[<row>]` and `pause_resume_max_diff[<row>]`.
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Any

import torch
from PIL import Image, ImageDraw

from app.engine.generation import denoise
from app.engine.generation.device import CPU
from app.engine.generation.files.sources import ModelInfo, ModelSource, detected
from app.engine.generation.runner import Runner
from app.engine.jobs.params import INIT_UPLOADED, GenerationParams
from app.engine.jobs.run_inputs import RunInputs
from benchmarks.architectures import (
    STEPS,
    WAN_CLIP,
    _clip_image,
    _frames,
    _frames_diff,
    _pause,
    _resolving,
    report,
    resumed_frames,
)


def run_wan_flf2v(work: Path) -> None:
    """The `wan2.1-flf2v` and `wan2.2-i2v-a14b-last-image` rows (see the docstring)."""
    from app.testing.tiny.wan import write_tiny_wan_i2v

    _first_last_row(work, "wan2.1-flf2v", write_tiny_wan_i2v(work / "flf2v", last_frame=True))
    a14b = write_tiny_wan_i2v(work / "i2v-a14b", experts=True)
    _first_last_row(work, "wan2.2-i2v-a14b-last-image", a14b)


def _first_last_row(work: Path, label: str, folder: Path) -> None:
    """A clip between a first and a last image on `folder`: against stock and a resume."""
    first, last = _clip_image(), _last_image()
    first_png, last_png = _png(first), _png(last)
    params = GenerationParams(
        prompt="a red circle", negative_prompt="blue", model="m", steps=STEPS, cfg=5.0,
        seed=42, init_image=_named(first_png), last_image=_named(last_png), **WAN_CLIP,
    )  # fmt: skip
    model = detected(ModelInfo("m", folder, ModelSource.USER))
    runner = Runner(device=CPU, resolve=lambda _n: model, threads=1)
    pipe = runner.load("m").pipe
    ours = _clip(pipe, params, first_png, last_png)
    paused = work / f"{label}-paused.mp4"
    inputs = RunInputs(init_image=first_png, last_image=last_png)
    runner.run(params, inputs, output_path=paused, checkpoint_path=paused.with_suffix(".ckpt"),
               on_step=_pause)  # fmt: skip
    resumed = resumed_frames(pipe, params, paused.with_suffix(".ckpt"))
    from diffusers import WanImageToVideoPipeline

    stock_pipe: Any = WanImageToVideoPipeline.from_pretrained(folder, local_files_only=True)
    stock_pipe.set_progress_bar_config(disable=True)
    stock = stock_pipe(
        image=first, last_image=last, prompt=params.prompt,
        negative_prompt=params.negative_prompt, height=params.height, width=params.width,
        num_frames=params.frames, num_inference_steps=params.steps, guidance_scale=params.cfg,
        generator=torch.Generator().manual_seed(params.seed), output_type="pil",
    ).frames[0]  # fmt: skip
    report(f"pause_resume_max_diff[{label}]", _frames_diff(ours, resumed))
    report(f"same_as_diffusers_max_diff[{label}]", _frames_diff(ours, stock))


def run_wan_expert_files(work: Path) -> None:
    """The two `wan2.2-a14b-expert-files` rows (see the docstring)."""
    from app.engine.generation.load.pipelines import PipelineCache, SingleFileConfigs
    from tests.engine.generation.tiny_wan_expert_files import (
        LAYOUTS,
        stock_from_expert_files,
        write_tiny_expert_files,
    )

    files = write_tiny_expert_files(work / "wan-expert-files")
    params = GenerationParams(
        prompt="a red circle", negative_prompt="blue", model="m", scheduler="UniPC",
        steps=STEPS, cfg=5.0, seed=42, **WAN_CLIP,
    )  # fmt: skip
    for layout, (high, _low) in LAYOUTS.items():
        label = "wan2.2-a14b-expert-files" + ("" if layout == "split" else f"-{layout}")
        model = detected(ModelInfo("m", files.expert(high), ModelSource.USER))
        cache = PipelineCache(configs=SingleFileConfigs(files.configs))
        runner = Runner(device=CPU, resolve=_resolving(model), threads=1, cache=cache)
        pipe = runner.load("m").pipe
        ours = _clip(pipe, params)
        paused = work / f"{label}-paused.mp4"
        runner.run(params, output_path=paused, checkpoint_path=paused.with_suffix(".ckpt"),
                   on_step=_pause)  # fmt: skip
        resumed = resumed_frames(pipe, params, paused.with_suffix(".ckpt"))
        stock = _stock_clip(stock_from_expert_files(files, layout), params)
        report(f"pause_resume_max_diff[{label}]", _frames_diff(ours, resumed))
        report(f"same_as_diffusers_max_diff[{label}]", _frames_diff(ours, stock))
        if layout == "split":
            from diffusers import WanPipeline

            folder = WanPipeline.from_pretrained(files.folder, local_files_only=True)
            folder.set_progress_bar_config(disable=True)
            report(f"vs_folder_max_diff[{label}]", _frames_diff(ours, _stock_clip(folder, params)))


def run_wan_ti2v_files(work: Path) -> None:
    """The two `wan2.2-ti2v-files` rows (see the docstring)."""
    from app.engine.generation.load.pipelines import PipelineCache, SingleFileConfigs
    from tests.engine.generation.tiny_wan_ti2v_files import (
        stock_from_files,
        write_tiny_ti2v_files,
    )

    files = write_tiny_ti2v_files(work / "wan-ti2v-files")
    model = detected(ModelInfo("m", files.model, ModelSource.USER))
    cache = PipelineCache(configs=SingleFileConfigs(files.configs.parent))
    runner = Runner(device=CPU, resolve=_resolving(model), threads=1, cache=cache)
    pipe = runner.load("m").pipe
    for label, image in (("wan2.2-ti2v-files", None), ("wan2.2-ti2v-files-image", _clip_image())):
        png = _png(image) if image is not None else None
        params = GenerationParams(
            prompt="a red circle", negative_prompt="blue", model="m", scheduler="UniPC",
            steps=STEPS, cfg=5.0, seed=42, init_image=_named(png) if png else "", **WAN_CLIP,
        )  # fmt: skip
        ours = _clip(pipe, params, png)
        paused = work / f"{label}-paused.mp4"
        runner.run(params, RunInputs(init_image=png), output_path=paused,
                   checkpoint_path=paused.with_suffix(".ckpt"), on_step=_pause)  # fmt: skip
        resumed = resumed_frames(pipe, params, paused.with_suffix(".ckpt"))
        stock_pipe = stock_from_files(files, image is not None)
        stock = _stock_clip(stock_pipe, params, **({"image": image} if image else {}))
        report(f"pause_resume_max_diff[{label}]", _frames_diff(ours, resumed))
        report(f"same_as_diffusers_max_diff[{label}]", _frames_diff(ours, stock))


def run_wan_i2v_files(work: Path) -> None:
    """The `wan2.1-i2v-files` and `wan2.1-i2v-files-open-clip` rows (see the docstring)."""
    from app.engine.generation.load.pipelines import PipelineCache, SingleFileConfigs
    from tests.engine.generation.tiny_wan_i2v_files import stock_from_files, write_tiny_i2v_files

    files = write_tiny_i2v_files(work / "wan-i2v-files")
    image = _clip_image()
    png = _png(image)
    params = GenerationParams(
        prompt="a red circle", negative_prompt="blue", model="m", scheduler="UniPC",
        steps=STEPS, cfg=5.0, seed=42, init_image=_named(png), **WAN_CLIP,
    )  # fmt: skip
    stock = _stock_clip(stock_from_files(files), params, image=image)
    open_clip = _with_open_clip(files.models, work / "wan-i2v-open-clip")
    for label, models in (("wan2.1-i2v-files", files.models), (_OPEN_CLIP_ROW, open_clip)):
        model_file = models / "diffusion_models" / files.model.name
        model = detected(ModelInfo("m", model_file, ModelSource.USER))
        cache = PipelineCache(configs=SingleFileConfigs(files.configs.parent))
        runner = Runner(device=CPU, resolve=_resolving(model), threads=1, cache=cache)
        pipe = runner.load("m").pipe
        ours = _clip(pipe, params, png)
        paused = work / f"{label}-paused.mp4"
        runner.run(params, RunInputs(init_image=png), output_path=paused,
                   checkpoint_path=paused.with_suffix(".ckpt"), on_step=_pause)  # fmt: skip
        resumed = resumed_frames(pipe, params, paused.with_suffix(".ckpt"))
        report(f"pause_resume_max_diff[{label}]", _frames_diff(ours, resumed))
        report(f"same_as_diffusers_max_diff[{label}]", _frames_diff(ours, stock))


_OPEN_CLIP_ROW = "wan2.1-i2v-files-open-clip"


def _with_open_clip(models: Path, dest: Path) -> Path:
    """A models folder of links to `models`' I2V files, its `clip_vision/` holding their CLIP
    file in open-clip's key layout instead (tests/engine/generation/tiny_open_clip.py)."""
    from safetensors.torch import load_file, save_file

    from tests.engine.generation.tiny_open_clip import to_open_clip
    from tests.engine.generation.tiny_wan_i2v_files import CLIP_VISION_NAME

    dest.mkdir(parents=True)
    for folder in ("diffusion_models", "text_encoders", "vae"):
        (dest / folder).symlink_to(models / folder)
    state = load_file(str(models / "clip_vision" / CLIP_VISION_NAME))
    layers = 1 + max(int(k.split(".")[3]) for k in state if ".layers." in k)
    (dest / "clip_vision").mkdir()
    save_file(
        to_open_clip(state, layers), str(dest / "clip_vision" / "open_clip_vit_h.safetensors")
    )
    return dest


def run_wan_i2v_expert_files(work: Path) -> None:
    """The three `wan2.2-i2v-a14b-expert-files` rows (see the docstring)."""
    from app.engine.generation.load.pipelines import PipelineCache, SingleFileConfigs
    from tests.engine.generation.tiny_wan_i2v_expert_files import (
        LAYOUTS,
        stock_from_i2v_expert_files,
        write_tiny_i2v_expert_files,
    )

    files = write_tiny_i2v_expert_files(work / "wan-i2v-expert-files")
    first, last = _clip_image(), _last_image()
    first_png, last_png = _png(first), _png(last)
    rows = [("split", None), ("gguf-q8_0", None), ("split", last)]
    for layout, last_frame in rows:
        label = "wan2.2-i2v-a14b-expert-files" + ("" if layout == "split" else f"-{layout}")
        label += "" if last_frame is None else "-last-image"
        last_bytes = None if last_frame is None else last_png
        params = GenerationParams(
            prompt="a red circle", negative_prompt="blue", model="m", scheduler="UniPC",
            steps=STEPS, cfg=5.0, seed=42, init_image=_named(first_png),
            last_image=_named(last_bytes) if last_bytes else "", **WAN_CLIP,
        )  # fmt: skip
        model = detected(ModelInfo("m", files.expert(LAYOUTS[layout][0]), ModelSource.USER))
        cache = PipelineCache(configs=SingleFileConfigs(files.configs))
        runner = Runner(device=CPU, resolve=_resolving(model), threads=1, cache=cache)
        pipe = runner.load("m").pipe
        ours = _clip(pipe, params, first_png, last_bytes)
        paused = work / f"{label}-paused.mp4"
        runner.run(params, RunInputs(init_image=first_png, last_image=last_bytes),
                   output_path=paused, checkpoint_path=paused.with_suffix(".ckpt"),
                   on_step=_pause)  # fmt: skip
        resumed = resumed_frames(pipe, params, paused.with_suffix(".ckpt"))
        extra = {"image": first, **({} if last_frame is None else {"last_image": last_frame})}
        stock = _stock_clip(stock_from_i2v_expert_files(files, layout), params, **extra)
        report(f"pause_resume_max_diff[{label}]", _frames_diff(ours, resumed))
        report(f"same_as_diffusers_max_diff[{label}]", _frames_diff(ours, stock))


def _stock_clip(pipe: Any, params: GenerationParams, **extra: Any) -> list[Image.Image]:
    frames: list[Image.Image] = pipe(
        prompt=params.prompt, negative_prompt=params.negative_prompt, height=params.height,
        width=params.width, num_frames=params.frames, num_inference_steps=params.steps,
        guidance_scale=params.cfg, generator=torch.Generator().manual_seed(params.seed),
        output_type="pil", **extra,
    ).frames[0]  # fmt: skip
    return frames


def _clip(
    pipe: Any, params: GenerationParams, first: bytes | None = None, last: bytes | None = None
) -> list[Image.Image]:
    """The clip through Easel's loop, start to decoded frames (no MP4: its encoding is lossy)."""
    state = denoise.start(pipe, params, first, last_image=last)
    while not state.finished:
        denoise.advance(pipe, state)
    return _frames(denoise.decode(pipe, state))


def _last_image() -> Image.Image:
    """The last frame: the disc moved to the other corner, on a warmer ground."""
    image = Image.new("RGB", (32, 32), (140, 110, 90))
    ImageDraw.Draw(image).ellipse((14, 12, 30, 28), fill=(40, 60, 220))
    return image


def _png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def _named(png: bytes) -> str:
    return f"{INIT_UPLOADED}{hashlib.sha256(png).hexdigest()}"


ROWS = {
    "flf2v": run_wan_flf2v,
    "expert-files": run_wan_expert_files,
    "ti2v-files": run_wan_ti2v_files,
    "i2v-files": run_wan_i2v_files,
    "i2v-expert-files": run_wan_i2v_expert_files,
}

if __name__ == "__main__":
    import sys
    import tempfile

    # `python -m benchmarks.architectures_wan [row ...]`: those rows' functions, else all.
    with tempfile.TemporaryDirectory() as work:
        for name in sys.argv[1:] or list(ROWS):
            ROWS[name](Path(work))

"""Quality and speed benchmark for the bundled easel-tiny model.

Generates a fixed grid of captions x seeds with the stock StableDiffusionPipeline
and scores each image by classifying, to the nearest palette colour:
  * the background colour (median of the border pixels),
  * the shape colour (median of the pixels that clearly differ from the background),
and the shape itself from how much of its bounding box it fills
(square ~1.0, circle ~0.79, triangle ~0.5).

Prints ``name: value`` lines and writes a contact sheet (default
/tmp/easel-model-samples.png).

    .venv/bin/python benchmarks/model_quality.py [--guidance 4] [--steps 20]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from diffusers import (
    DDIMScheduler,
    DPMSolverMultistepScheduler,
    EulerDiscreteScheduler,
    StableDiffusionPipeline,
)
from PIL import Image, ImageDraw

REPO = Path(__file__).resolve().parent.parent
DEFAULT_MODEL = REPO / "resources" / "models" / "easel-tiny"

# Must match packaging/model/shapes_data.py (duplicated so the benchmark needs
# nothing but the shipped model directory).
PALETTE: dict[str, tuple[int, int, int]] = {
    "red": (220, 30, 30),
    "green": (30, 170, 50),
    "blue": (30, 70, 220),
    "yellow": (245, 215, 30),
    "orange": (245, 130, 20),
    "purple": (130, 40, 170),
    "white": (245, 245, 245),
    "black": (15, 15, 15),
}

# (shape colour, shape, background colour): every colour appears once as a
# background and once as a shape colour. Same prompts as the feasibility sheet.
CASES: tuple[tuple[str, str, str], ...] = (
    ("red", "circle", "blue"),
    ("yellow", "square", "purple"),
    ("white", "triangle", "black"),
    ("green", "circle", "yellow"),
    ("blue", "square", "white"),
    ("orange", "triangle", "green"),
    ("black", "circle", "orange"),
    ("purple", "triangle", "red"),
)

SCHEDULERS = {
    "ddim": DDIMScheduler,
    "euler": EulerDiscreteScheduler,
    "dpm": DPMSolverMultistepScheduler,
}


def article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def caption(colour: str, shape: str, background: str) -> str:
    return f"{article(colour)} {colour} {shape} on {article(background)} {background} background"


@dataclass(frozen=True)
class Scored:
    background: str
    shape_colour: str
    shape: str


def nearest_colour(rgb: np.ndarray) -> str:
    names = list(PALETTE)
    ref = np.array([PALETTE[n] for n in names], dtype=np.float32)
    return names[int(np.argmin(((ref - rgb) ** 2).sum(axis=1)))]


def classify_shape(mask: np.ndarray) -> str:
    # Ignore stray pixels: a row/column counts only if it has several mask pixels.
    rows = np.flatnonzero(mask.sum(axis=1) >= 2)
    cols = np.flatnonzero(mask.sum(axis=0) >= 2)
    if len(rows) < 3 or len(cols) < 3:
        return "none"
    box = (rows[-1] - rows[0] + 1) * (cols[-1] - cols[0] + 1)
    fill = mask[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1].sum() / box
    if fill > 0.9:
        return "square"
    return "circle" if fill > 0.64 else "triangle"


def score(image: Image.Image) -> Scored:
    px = np.asarray(image.convert("RGB"), dtype=np.float32)
    border = np.concatenate(
        [
            px[:2].reshape(-1, 3),
            px[-2:].reshape(-1, 3),
            px[:, :2].reshape(-1, 3),
            px[:, -2:].reshape(-1, 3),
        ]
    )
    bg_rgb = np.median(border, axis=0)
    # Pixels far from the background colour belong to the shape; 80 (RGB
    # distance) is well below the distance between any two palette colours.
    mask = np.sqrt(((px - bg_rgb) ** 2).sum(axis=2)) > 80
    if mask.sum() < 4:
        return Scored(nearest_colour(bg_rgb), "none", "none")
    return Scored(
        nearest_colour(bg_rgb), nearest_colour(np.median(px[mask], axis=0)), classify_shape(mask)
    )


def contact_sheet(rows: list[tuple[str, list[Image.Image]]], cell: int = 96) -> Image.Image:
    label_h = 14
    n_cols = max(len(imgs) for _, imgs in rows)
    sheet = Image.new("RGB", (n_cols * (cell + 4), len(rows) * (cell + label_h + 4)), "white")
    draw = ImageDraw.Draw(sheet)
    for r, (text, imgs) in enumerate(rows):
        y = r * (cell + label_h + 4)
        draw.text((2, y), text, fill="black")
        for c, img in enumerate(imgs):
            sheet.paste(
                img.resize((cell, cell), Image.Resampling.NEAREST), (c * (cell + 4), y + label_h)
            )
    return sheet


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--guidance", type=float, default=4.0)
    p.add_argument(
        "--scheduler",
        choices=sorted(SCHEDULERS),
        default=None,
        help="override the model's saved scheduler (same config)",
    )
    p.add_argument("--seeds", type=int, default=4)
    p.add_argument("--size", type=int, default=None, help="default: the model's native size")
    p.add_argument("--sheet", type=Path, default=Path("/tmp/easel-model-samples.png"))
    return p.parse_args()


def main() -> None:
    args = parse_args()
    torch.set_num_threads(2)
    start = time.perf_counter()
    pipe = StableDiffusionPipeline.from_pretrained(args.model, local_files_only=True)
    load_s = time.perf_counter() - start
    if args.scheduler:
        pipe.scheduler = SCHEDULERS[args.scheduler].from_config(pipe.scheduler.config)
    pipe.set_progress_bar_config(disable=True)
    size = args.size or pipe.unet.config.sample_size * pipe.vae_scale_factor

    def generate(prompt: str, seed: int) -> Image.Image:
        gen = torch.Generator().manual_seed(seed)
        return pipe(
            prompt,
            height=size,
            width=size,
            num_inference_steps=args.steps,
            guidance_scale=args.guidance,
            generator=gen,
        ).images[0]

    generate("a red circle on a blue background", 0)  # warm-up
    hits = {"background": 0, "shape_colour": 0, "shape": 0, "all": 0}
    rows: list[tuple[str, list[Image.Image]]] = []
    gen_time, n = 0.0, 0
    for colour, shape, background in CASES:
        prompt = caption(colour, shape, background)
        imgs = []
        for seed in range(args.seeds):
            t0 = time.perf_counter()
            img = generate(prompt, seed)
            gen_time += time.perf_counter() - t0
            got = score(img)
            ok = (got.background == background, got.shape_colour == colour, got.shape == shape)
            for key, good in zip(("background", "shape_colour", "shape"), ok, strict=True):
                hits[key] += good
            hits["all"] += all(ok)
            imgs.append(img)
            n += 1
        rows.append((prompt, imgs))
    contact_sheet(rows).save(args.sheet)

    print(f"model: {args.model}")
    print(f"scheduler: {type(pipe.scheduler).__name__}")
    print(f"size: {size}")
    print(f"steps: {args.steps}")
    print(f"guidance: {args.guidance}")
    print(f"images: {n}")
    print(f"background_colour_acc: {hits['background'] / n:.3f}")
    print(f"shape_colour_acc: {hits['shape_colour'] / n:.3f}")
    print(f"shape_acc: {hits['shape'] / n:.3f}")
    print(f"all_correct_acc: {hits['all'] / n:.3f}")
    print(f"load_s: {load_s:.2f}")
    # Per denoising step including CFG (two UNet passes) and amortised VAE decode.
    print(f"step_ms: {1000 * gen_time / n / args.steps:.1f}")
    print(f"image_s: {gen_time / n:.3f}")
    print(f"sheet: {args.sheet}")


if __name__ == "__main__":
    main()

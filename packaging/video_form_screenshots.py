"""Screenshot of the form an artist fills in to make a clip (docs/screenshots/video-form.png):
an LTX-Video 0.9.5+ model picked, so the form shows the clip's frames with its length in
seconds beside them and its frames a second, an init image (the clip's first frame) with
its Image strength, and a last frame with its own strength and frame.

    xvfb-run -a .venv/bin/python packaging/video_form_screenshots.py [--out DIR]

The model is the shipped `ltx-video-0.9.5` config folder copied into a temporary models
folder: the window lists it as it lists Lightricks' folder (the same model index and
configs), without its weights, which nothing here loads. The two images are drawn here. The
gallery holds the finished pictures and clip of `video_screenshots.py`. No model runs:
torch stays out.
"""

from __future__ import annotations

import argparse
import io
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "packaging"))
from PIL import Image, ImageDraw, ImageFilter  # noqa: E402
from PySide6.QtCore import QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

# (It sets EASEL_HOME to a new temporary folder as it loads: before Easel's own modules.)
from video_screenshots import fill_queue, grab_later, window_on  # noqa: E402

from app.engine.jobs.params import KIND_VIDEO, GenerationParams  # noqa: E402
from app.engine.settings import load_settings  # noqa: E402
from app.engine.store.opening import open_queue  # noqa: E402
from app.ui.presenters.queue_service import QueueService  # noqa: E402
from app.ui.qt.theme import apply_theme  # noqa: E402
from app.ui.widgets.window import MainWindow  # noqa: E402

MODEL = "LTX-Video-0.9.5"  # Lightricks/LTX-Video-0.9.5's folder name
CONFIGS = ROOT / "resources" / "model_configs" / "ltx-video-0.9.5"
PROMPT = (
    "a small fishing boat drifting out of a calm harbour into thick morning fog, "
    "gentle ripples, soft light, slow camera pull-back"
)
NEGATIVE = "blurry, jittery, distorted"
WIDTH, HEIGHT, FRAMES, FPS = 768, 512, 97, 24  # LTX-Video: sides of 32k, 8k+1 frames
IMAGE_STRENGTH, LAST_STRENGTH = 0.8, 0.7


def harbour(fog: float) -> bytes:
    """The drawn picture: sky, sea and a boat; `fog` (0 to 1) veils it and moves the boat
    out. The first frame has none, the last frame is mostly fog."""
    width, height = WIDTH // 4, HEIGHT // 4
    image = Image.new("RGB", (width, height))
    draw = ImageDraw.Draw(image)
    horizon = int(height * 0.55)
    for y in range(horizon):
        shade = y / horizon
        draw.line([(0, y), (width, y)], fill=(int(150 + 80 * shade), int(170 + 60 * shade), 215))
    for y in range(horizon, height):
        shade = (y - horizon) / (height - horizon)
        draw.line([(0, y), (width, y)], fill=(40, int(80 + 40 * shade), int(120 + 40 * shade)))
    x = int(width * (0.3 + 0.35 * fog))
    draw.polygon([(x - 26, horizon + 8), (x + 26, horizon + 8), (x + 18, horizon + 18),
                  (x - 18, horizon + 18)], fill=(120, 45, 30))  # fmt: skip
    draw.line([(x, horizon + 8), (x, horizon - 30)], fill=(60, 40, 30), width=2)
    draw.polygon([(x + 2, horizon - 28), (x + 2, horizon + 4), (x + 22, horizon + 4)],
                 fill=(240, 235, 220))  # fmt: skip
    veil = Image.new("RGB", (width, height), (222, 226, 230))
    picture = Image.blend(image, veil, 0.85 * fog).filter(ImageFilter.GaussianBlur(0.6 + fog))
    buffer = io.BytesIO()
    picture.save(buffer, format="PNG")
    return buffer.getvalue()


def install_model(models: Path) -> None:
    """The LTX-Video 0.9.5 folder's configs where the artist's models are (no weights)."""
    shutil.copytree(CONFIGS, models / MODEL)


def fill_form(window: MainWindow) -> None:
    """The clip the artist is about to queue: a prompt, the size and frames, two images."""
    form = window.prompt
    form.set_params(GenerationParams(
        PROMPT, negative_prompt=NEGATIVE, model=MODEL, width=WIDTH, height=HEIGHT, steps=40,
        cfg=3.0, scheduler="Euler", seed=1234, kind=KIND_VIDEO, frames=FRAMES, fps=FPS,
        image_strength=IMAGE_STRENGTH, last_image_strength=LAST_STRENGTH,
    ))  # fmt: skip
    form.set_init(QueueService.prepare_init(harbour(0.0), "harbour.png"))
    form.last_frame.set_image(QueueService.prepare_init(harbour(1.0), "fog.png"))
    form.width_box.setValue(WIDTH)  # the init image set its own (smaller) size
    form.height_box.setValue(HEIGHT)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    app = QApplication(sys.argv)
    apply_theme(app)
    settings = load_settings()
    install_model(settings.models_path())
    queue = open_queue()
    fill_queue(queue, settings.outputs_path(), None)
    window = window_on(queue)
    window.show()
    QTimer.singleShot(1500, lambda: fill_form(window))  # once the model list is in
    return grab_later(app, window, args.out / "video-form.png", 1500 + 800)


if __name__ == "__main__":
    raise SystemExit(main())

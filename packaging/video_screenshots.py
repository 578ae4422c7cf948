"""Screenshot of the window playing a finished clip (docs/screenshots/video-player.png): the
clip in the image area with its player (play/pause, position bar, loop), the gallery with
the clip's ▶ thumbnail beside finished pictures.

    xvfb-run -a .venv/bin/python packaging/video_screenshots.py [--out DIR] [--clip MP4]

The clip is drawn here (a ball bouncing along a floor, 33 frames at 16 fps) and written by
Easel's own video writer, as a finished Wan job's would be: the tiny random-weight Wan the
tests build draws noise, and a real Wan needs a GPU. `--clip` plays another MP4 instead
(docs/video/tiny-wan-random-weights.mp4, say). No model runs: torch stays out.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ["EASEL_HOME"] = tempfile.mkdtemp(prefix="easel-video-shots-")

from PIL import Image, ImageDraw, ImageFilter  # noqa: E402
from PySide6.QtCore import QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from app.engine.jobs.params import KIND_VIDEO, GenerationParams  # noqa: E402
from app.engine.jobs.queue import JobQueue  # noqa: E402
from app.engine.jobs.states import JobEvent  # noqa: E402
from app.engine.outputs.image import write_png  # noqa: E402
from app.engine.outputs.video import write_video  # noqa: E402
from app.engine.settings import load_settings, save_settings  # noqa: E402
from app.engine.store.opening import open_queue  # noqa: E402
from app.ui.presenters.interfaces import NoWorkers  # noqa: E402
from app.ui.presenters.queue_service import QueueService  # noqa: E402
from app.ui.qt.theme import apply_theme  # noqa: E402
from app.ui.widgets.window import Dependencies, MainWindow  # noqa: E402
from app.ui.wiring import model_choices  # noqa: E402

WINDOW_SIZE = (1366, 768)  # a laptop's screen, as the other screenshots
WIDTH, HEIGHT, FRAMES, FPS = 416, 240, 33, 16  # Wan's 480p shape, halved; 4k+1 frames
PROMPT = "a red ball bouncing along a wooden floor, evening light"
MODEL = "Wan2.1-T2V-1.3B-Diffusers"
PICTURES = [("a lighthouse at dusk", (40, 60, 120)), ("a teapot, still life", (150, 90, 40))]


def ball_frame(index: int) -> Image.Image:
    """Frame `index` of the drawn clip: sky, floor, and a ball bouncing left to right."""
    image = Image.new("RGB", (WIDTH, HEIGHT), (120, 150, 200))
    draw = ImageDraw.Draw(image)
    floor = int(HEIGHT * 0.72)
    for y in range(floor):  # the evening sky, lighter towards the floor
        shade = y / floor
        draw.line([(0, y), (WIDTH, y)], fill=(int(70 + 160 * shade), int(80 + 100 * shade), 170))
    draw.rectangle((0, floor, WIDTH, HEIGHT), fill=(130, 85, 50))
    for x in range(0, WIDTH, 52):  # floorboards
        draw.line([(x, floor), (x - 30, HEIGHT)], fill=(105, 65, 38), width=2)
    t = index / (FRAMES - 1)
    radius = 22
    x = 40 + t * (WIDTH - 80)
    bounce = abs(math.sin(t * math.pi * 3))
    y = floor - radius - bounce * HEIGHT * 0.45
    draw.ellipse((x - radius, floor - 6, x + radius, floor + 4), fill=(95, 60, 35))  # shadow
    draw.ellipse((x - radius, y - radius, x + radius, y + radius), fill=(205, 35, 30))
    draw.ellipse((x - 9, y - 14, x - 1, y - 6), fill=(250, 160, 150))  # the light on it
    return image.filter(ImageFilter.GaussianBlur(0.7))


def finished(queue: JobQueue, params: GenerationParams, output: Path) -> int:
    job_id = queue.submit(params)
    queue.claim("screens")
    queue.fire(job_id, JobEvent.COMPLETE, source="worker", worker_id="screens",
               changes={"output_path": str(output)})  # fmt: skip
    return job_id


def fill_queue(queue: JobQueue, outputs: Path, clip: Path | None) -> int:
    """Two finished pictures, then the clip (the job shown)."""
    for n, (prompt, colour) in enumerate(PICTURES, start=1):
        params = GenerationParams(prompt, width=64, height=64, seed=n)
        picture = outputs / f"{n:06d}-{n}.png"
        write_png(Image.new("RGB", (64, 64), colour), picture, params)
        finished(queue, params, picture)
    params = GenerationParams(
        PROMPT, model=MODEL, width=WIDTH, height=HEIGHT, seed=7, steps=30, cfg=5.0,
        scheduler="UniPC", kind=KIND_VIDEO, frames=FRAMES, fps=FPS,
    )  # fmt: skip
    target = outputs / "000003-7.mp4"
    if clip is None:
        write_video([ball_frame(i) for i in range(FRAMES)], target, params)
    else:
        outputs.mkdir(parents=True, exist_ok=True)
        shutil.copy(clip, target)
    return finished(queue, params, target)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument("--clip", type=Path, help="play this MP4 instead of the drawn clip")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    app = QApplication(sys.argv)
    apply_theme(app)
    queue = open_queue()
    clip_job = fill_queue(queue, load_settings().outputs_path(), args.clip)
    window = window_on(queue)
    window.prompt.set_params(GenerationParams(prompt=PROMPT))
    window.show()
    QTimer.singleShot(1500, lambda: window.jobs.select_jobs([clip_job]))
    return grab_later(app, window, args.out / "video-player.png", 1500 + 1400)  # mid-clip


def window_on(queue: JobQueue) -> MainWindow:
    """The main window on `queue`, its models listed from the settings, no workers started,
    at the screenshots' size."""
    deps = Dependencies(
        queue=QueueService(queue), workers=NoWorkers(), settings=load_settings(),
        save_settings=save_settings, list_models=lambda: model_choices(load_settings()),
        confirm_quit=lambda _n: True,
    )  # fmt: skip
    window = MainWindow(deps)
    window.resize(*WINDOW_SIZE)
    return window


def grab_later(app: QApplication, window: MainWindow, path: Path, after_ms: int) -> int:
    """Run the app until `after_ms`, then save the window's picture at `path` and quit; the
    temporary data folder goes with it. The app's exit code."""

    def shoot() -> None:
        window.grab().save(str(path))
        print(f"saved {path}")
        window.close()
        app.quit()

    QTimer.singleShot(after_ms, shoot)
    code = app.exec()
    shutil.rmtree(os.environ["EASEL_HOME"], ignore_errors=True)
    return code


if __name__ == "__main__":
    raise SystemExit(main())

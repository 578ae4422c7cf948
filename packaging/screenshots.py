"""Screenshots of the window with finished, running, paused and failed jobs, in English
and (main-zh_CN.png) in Chinese.

    xvfb-run -a .venv/bin/python packaging/screenshots.py [--out docs/screenshots] [--real]

Builds a throw-away data folder, fills the queue through the real `JobQueue` (with a
clock set in the past, so times and durations look like an afternoon's work), and shows
the window with a stand-in worker pool that streams previews for the two running jobs.
`--real` makes the finished images with the bundled model (`python -m app generate`,
torch in a subprocess); without it they are drawn here in the model's style.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ["EASEL_HOME"] = tempfile.mkdtemp(prefix="easel-shots-")

from PIL import Image, ImageDraw, ImageFilter  # noqa: E402
from PySide6.QtCore import QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication, QWidget  # noqa: E402

from app.engine.jobs.follow_ups import submit_upscale  # noqa: E402
from app.engine.jobs.params import GenerationParams  # noqa: E402
from app.engine.jobs.queue import JobQueue  # noqa: E402
from app.engine.jobs.states import JobEvent  # noqa: E402
from app.engine.settings import load_settings, save_settings  # noqa: E402
from app.engine.store.opening import open_queue  # noqa: E402
from app.engine.workers.liveness import this_host  # noqa: E402
from app.engine.workers.messages import MessageKind, WorkerMessage  # noqa: E402
from app.engine.workers.presence import Presence  # noqa: E402
from app.engine.workers.worker_states import WorkerState  # noqa: E402
from app.ui.presenters.interfaces import RestoreSummary  # noqa: E402
from app.ui.presenters.queue_service import QueueService  # noqa: E402
from app.ui.qt.language import Language, use_language  # noqa: E402
from app.ui.qt.theme import apply_theme  # noqa: E402
from app.ui.qt.window_state import PAUSED_AT_QUIT, ui_settings  # noqa: E402
from app.ui.widgets.quit_dialog import quit_box  # noqa: E402
from app.ui.widgets.settings_dialog import SettingsDialog  # noqa: E402
from app.ui.widgets.window import Dependencies, MainWindow  # noqa: E402
from app.ui.wiring import model_choices  # noqa: E402

PALETTE = {
    "red": (220, 30, 30), "green": (30, 170, 50), "blue": (30, 70, 220),
    "yellow": (245, 215, 30), "orange": (245, 130, 20), "purple": (130, 40, 170),
    "white": (245, 245, 245), "black": (15, 15, 15),
}  # fmt: skip
FINISHED = [
    ("a red circle on a blue background", "red", "circle", "blue"),
    ("a yellow square on a purple background", "yellow", "square", "purple"),
    ("a white triangle on a black background", "white", "triangle", "black"),
    ("a large green circle on a yellow background", "green", "circle", "yellow"),
    ("a blue square on a white background", "blue", "square", "white"),
    ("an orange triangle on a green background", "orange", "triangle", "green"),
    ("a black circle on an orange background", "black", "circle", "orange"),
    ("a small purple triangle on a red background", "purple", "triangle", "red"),
]
RUNNING = [("a yellow circle on a blue background", "yellow", "circle", "blue"),
           ("a red square on a white background", "red", "square", "white")]  # fmt: skip
WINDOW_SIZE = (1366, 768)  # a laptop's screen (issue 28): what most artists have
WORKER = f"{this_host()}:4242:screens"  # this computer: its jobs name no machine
GPU_BOX = "gpu-box:977:a1c3e5"  # another machine on the same queue
# The Workers panel: (id, machine, device, state, jobs done, seconds since last heard).
FLEET = [
    (WORKER, this_host(), "cuda/float16", WorkerState.BUSY, 6, 1.0),
    (GPU_BOX, "gpu-box", "cuda:1/float16", WorkerState.BUSY, 9, 2.0),
    ("gpu-box:978:b2d4f6", "gpu-box", "cuda:0/float16", WorkerState.IDLE, 7, 3.0),
    ("rented-a100:31:c3e5a7", "rented-a100", "cuda/bfloat16", WorkerState.EXITED, 40, 3000.0),
    ("old-laptop:12:d4f6b8", "old-laptop", "mps/float16", WorkerState.IDLE, 2, 200.0),
]


class Clock:
    """The queue's clock, moved by hand so the history reads like real work."""

    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def wait(self, seconds: float) -> None:
        self.now += seconds * random.uniform(0.85, 1.15)


def draw_image(colour: str, shape: str, background: str, seed: int, size: int = 64) -> Image.Image:
    """A 64 px picture in the bundled model's style: soft edges, slightly uneven colour."""
    rng = random.Random(seed)
    big = size * 4
    image = Image.new("RGB", (big, big), PALETTE[background])
    draw = ImageDraw.Draw(image)
    cx, cy = big * rng.uniform(0.42, 0.58), big * rng.uniform(0.42, 0.58)
    r = big * rng.uniform(0.24, 0.34)
    fill = PALETTE[colour]
    if shape == "circle":
        draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=fill)
    elif shape == "square":
        draw.rectangle((cx - r * 0.88, cy - r * 0.88, cx + r * 0.88, cy + r * 0.88), fill=fill)
    else:
        draw.polygon([(cx, cy - r), (cx - r * 0.95, cy + r * 0.7), (cx + r * 0.95, cy + r * 0.7)],
                     fill=fill)  # fmt: skip
    image = image.resize((size, size), Image.Resampling.BOX).filter(ImageFilter.GaussianBlur(0.6))
    noise = Image.effect_noise((size, size), 18).convert("RGB")
    return Image.blend(image, noise, 0.06)


def preview(final: Image.Image, fraction: float, seed: int) -> bytes:
    """What a preview mid-denoise looks like: the picture emerging from coloured noise."""
    rng = random.Random(seed)
    noise = Image.new("RGB", final.size)
    noise.putdata(
        [tuple(rng.randrange(256) for _ in range(3)) for _ in range(final.width * final.height)]
    )
    mixed = Image.blend(
        noise.filter(ImageFilter.GaussianBlur(1.5)), final, min(1.0, 0.15 + fraction)
    )
    buffer = io.BytesIO()
    mixed.resize((32, 32), Image.Resampling.BILINEAR).save(buffer, format="PNG")
    return buffer.getvalue()


def real_image(prompt: str, seed: int, out: Path) -> Path:
    """One image from the bundled model, generated by the CLI in its own process.

    The CLI gets a data folder of its own: its job must not meet the staged ones.
    """
    env = {**os.environ, "EASEL_HOME": tempfile.mkdtemp(prefix="easel-shots-cli-")}
    result = subprocess.run(
        [sys.executable, "-m", "app", "generate", prompt, "--seed", str(seed), "--out", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    shutil.rmtree(env["EASEL_HOME"], ignore_errors=True)
    return Path(result.stdout.strip().splitlines()[-1])


class PreviewWorkers:
    """Stands in for the supervisor: streams progress and previews for the running jobs."""

    def __init__(self, running: dict[int, tuple[Image.Image, int]]) -> None:
        self.running = running
        self.announced = False

    def start(self) -> None:
        pass

    def own_running_ids(self) -> list[int]:
        return list(self.running)

    def shutdown(self, timeout: float) -> list[int]:
        return []

    def poll(self) -> Sequence[WorkerMessage]:
        messages = []
        if not self.announced:  # ready, and busy with the running jobs (the status bar says so)
            messages.append(WorkerMessage(MessageKind.READY, WORKER))
            messages += [WorkerMessage(MessageKind.STARTED, WORKER, i) for i in self.running]
        self.announced = True
        for job_id, (final, step) in self.running.items():
            messages.append(WorkerMessage(
                MessageKind.PROGRESS, WORKER, job_id, step=step, total=20,
                elapsed_s=step * 0.42, preview_png=preview(final, step / 20, job_id),
            ))  # fmt: skip
        return messages


def fill_queue(queue: JobQueue, clock: Clock, outputs: Path, real: bool) -> dict[str, object]:
    ids: dict[str, object] = {}
    finished = []
    for i, (prompt, colour, shape, background) in enumerate(FINISHED):
        seed = 1000 + i * 7
        job_id = queue.submit(GenerationParams(prompt=prompt, seed=seed))
        clock.wait(0.4)
        queue.claim(WORKER)
        clock.wait(8.5)
        path = outputs / f"{job_id:05d}.png"
        if real:
            path = real_image(prompt, seed, outputs)
        else:
            draw_image(colour, shape, background, seed).save(path)
        queue.report_progress(job_id, WORKER, 20, 20)
        queue.fire(job_id, JobEvent.COMPLETE, source="worker", worker_id=WORKER,
                   changes={"output_path": str(path)})  # fmt: skip
        finished.append(job_id)
        clock.wait(20)
        if i == 2:
            ids["failed"] = _failed_job(queue, clock)
        if i == 4:
            ids["cancelled"] = _cancelled_job(queue, clock)
    ids["finished"] = finished
    ids["paused"] = _paused_job(queue, clock)
    ids["upscaled"] = _upscale_chain(queue, clock, finished[1], outputs)
    ids["waiting"] = submit_upscale(queue, ids["failed"])  # type: ignore[arg-type]
    return ids


def _upscale_chain(queue: JobQueue, clock: Clock, parent: int, outputs: Path) -> int:
    """An upscale x2 queued while its parent ran: BLOCKED, UNBLOCK at the parent's success,
    then run like any job (the parent already succeeded here, so it unblocks at once)."""
    child = submit_upscale(queue, parent)
    clock.wait(0.5)
    queue.claim(WORKER)
    clock.wait(14.0)
    path = outputs / f"{child:05d}.png"
    Image.open(queue.get(parent).output_path or "").resize(
        (128, 128), Image.Resampling.LANCZOS
    ).save(path)
    queue.report_progress(child, WORKER, 7, 7)
    queue.fire(child, JobEvent.COMPLETE, source="worker", worker_id=WORKER,
               changes={"output_path": str(path)})  # fmt: skip
    clock.wait(5)
    return child


def _failed_job(queue: JobQueue, clock: Clock) -> int:
    job_id = queue.submit(
        GenerationParams(prompt="a green triangle on a purple background", seed=77)
    )
    for attempt in (1, 2):
        clock.wait(0.3)
        queue.claim(WORKER)
        clock.wait(3.1)
        queue.report_progress(job_id, WORKER, 6, 20)
        error = "transient error: RuntimeError: CPU out of memory while decoding the image"
        queue.fire(job_id, JobEvent.FAIL, source="worker", worker_id=WORKER, message=error,
                   changes={"error": error.split(": ", 1)[1]})  # fmt: skip
        if attempt == 1:
            clock.wait(2.0)
            queue.retry(job_id, source="retry-policy", message="automatic retry 1 of 2")
    queue.mark_given_up(job_id, "gave up after 2 attempts: CPU out of memory while decoding")
    return job_id


def _cancelled_job(queue: JobQueue, clock: Clock) -> int:
    job_id = queue.submit(GenerationParams(prompt="a white square on a red background", seed=5))
    clock.wait(0.3)
    queue.claim(WORKER)
    clock.wait(2.4)
    queue.cancel(job_id, message="cancelled from the job list")
    clock.wait(0.4)
    queue.fire(
        job_id, JobEvent.STOPPED, source="worker", worker_id=WORKER, message="stopped at step 5"
    )
    return job_id


def _paused_job(queue: JobQueue, clock: Clock) -> int:
    job_id = queue.submit(GenerationParams(prompt="a purple circle on a green background", seed=12))
    clock.wait(0.3)
    queue.claim(WORKER)
    clock.wait(4.0)
    queue.report_progress(job_id, WORKER, 9, 20)
    queue.pause(job_id)
    clock.wait(0.3)
    queue.fire(job_id, JobEvent.STOPPED, source="worker", worker_id=WORKER,
               message="checkpoint saved at step 9")  # fmt: skip
    return job_id


def start_running(queue: JobQueue, clock: Clock) -> dict[int, tuple[Image.Image, int]]:
    running = {}
    workers = (WORKER, GPU_BOX)
    for (prompt, colour, shape, background), step, worker in zip(
        RUNNING, (14, 5), workers, strict=True
    ):
        job_id = queue.submit(GenerationParams(prompt=prompt, seed=300 + step))
        clock.wait(0.5)
        queue.claim(worker)
        queue.report_progress(job_id, worker, step, 20)
        running[job_id] = (draw_image(colour, shape, background, job_id), step)
        clock.wait(3.0)
    for prompt in (
        "a small black square on a yellow background",
        "an orange circle on a blue background",
    ):
        queue.submit(GenerationParams(prompt=prompt))
    return running


def add_fleet(queue: JobQueue) -> None:
    """The worker rows the Workers panel lists, as those workers would have written them."""
    now = time.time()
    for worker_id, machine, device, state, done, heard_s in FLEET:
        presence = Presence(queue.db, worker_id, machine, clock=lambda t=now - heard_s: t)
        presence.register(device=device)
        presence.update(state, model="easel-tiny", jobs_done=done)


def save(widget: QWidget, path: Path) -> None:
    widget.grab().save(str(path))
    print(f"saved {path}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument(
        "--real", action="store_true", help="finished images from the bundled model"
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    app = QApplication(sys.argv)
    app.setQuitOnLastWindowClosed(False)  # two windows in turn: English, then Chinese
    apply_theme(app)
    queue = open_queue()
    outputs = load_settings().outputs_path()
    clock = Clock(time.time() - 15 * 60)
    queue.clock = clock
    ids = fill_queue(queue, clock, outputs, args.real)
    clock.now = time.time() - 40
    running = start_running(queue, clock)
    queue.clock = time.time
    add_fleet(queue)
    restore = RestoreSummary(requeued=(list(running)[1],), paused=(ids["paused"],))
    window = show_window(queue, running, restore)
    finished: list[int] = ids["finished"]  # type: ignore[assignment]
    steps = [
        (1500, lambda: window.jobs.select_jobs([finished[5]])),
        (1200, lambda: save(window, args.out / "main.png")),
        (100, lambda: _workers_shot(window, args.out / "workers.png")),
        (100, lambda: window.jobs.select_jobs([next(iter(running))])),
        (1200, lambda: save(window, args.out / "running.png")),
        (100, lambda: window.restore_banner.hide()),
        (100, lambda: window.jobs.select_jobs([ids["failed"]])),  # type: ignore[list-item]
        (1000, lambda: save(window, args.out / "failed.png")),
        (100, lambda: window.jobs.select_jobs([ids["paused"]])),  # type: ignore[list-item]
        (1000, lambda: save(window, args.out / "paused.png")),
        (100, lambda: _refused_numbers(window)),
        (800, lambda: save(window, args.out / "refused.png")),
        (100, lambda: window.error_banner.hide()),
        (100, lambda: window.jobs.select_jobs([ids["upscaled"]])),  # type: ignore[list-item]
        (1000, lambda: save(window, args.out / "chain.png")),
        (100, lambda: window.jobs.select_jobs([ids["waiting"]])),  # type: ignore[list-item]
        (1000, lambda: save(window, args.out / "chain-blocked.png")),
        (100, lambda: window.jobs.search.setText("circle")),
        (600, lambda: window.jobs.select_jobs([finished[0]])),
        (1200, lambda: save(window, args.out / "search.png")),
        (100, lambda: window.jobs.search.clear()),
        (100, lambda: _stats_shot(window, args.out / "stats.png")),
        (1200, lambda: _settings_shot(window, args.out / "settings.png")),
        (700, lambda: _quit_shot(window, args.out / "quit.png")),
        (900, lambda: window.close()),
        (300, lambda: _chinese_shot(queue, running, restore, finished[5], args.out)),
    ]
    _run_steps(steps)
    code = app.exec()
    shutil.rmtree(os.environ["EASEL_HOME"], ignore_errors=True)
    return code


def show_window(
    queue: JobQueue, running: dict[int, tuple[Image.Image, int]], restore: RestoreSummary
) -> MainWindow:
    deps = Dependencies(
        queue=QueueService(queue), workers=PreviewWorkers(running), settings=load_settings(),
        save_settings=save_settings, list_models=lambda: model_choices(load_settings()),
        restore=restore,
        confirm_quit=lambda _n: True,
    )  # fmt: skip
    window = MainWindow(deps)
    window.resize(*WINDOW_SIZE)
    window.prompt.set_params(
        GenerationParams(prompt="a red circle on a blue background", seed=1006)
    )
    window.prompt.count.setValue(1)  # not the refused 20 an earlier shot left in the form
    window.show()
    return window


def _chinese_shot(
    queue: JobQueue,
    running: dict[int, tuple[Image.Image, int]],
    restore: RestoreSummary,
    selected: int,
    out: Path,
) -> None:
    """The main window again, in Chinese (texts are set when widgets are made: a new one)."""
    use_language(Language.CHINESE)
    ui_settings().remove(PAUSED_AT_QUIT)  # the English window's quit is not news here
    window = show_window(queue, running, restore)
    steps = [
        (1500, lambda: window.jobs.select_jobs([selected])),
        (1200, lambda: save(window, out / "main-zh_CN.png")),
        (100, lambda: _settings_shot(window, out / "settings-zh_CN.png")),
        (900, lambda: window.close()),
        (300, QApplication.quit),
    ]
    _run_steps(steps)


def _refused_numbers(window: MainWindow) -> None:
    """Out-of-range numbers stay as typed, flagged beside the field; Generate says why."""
    window.prompt.steps.setText("999")
    window.prompt.count.setText("20")
    window.generate()


def _quit_shot(window: MainWindow, path: Path) -> None:
    box, _pause = quit_box(window, 2)
    box.show()
    QTimer.singleShot(300, lambda: (save(box, path), box.close()))


def _stats_shot(window: MainWindow, path: Path) -> None:
    window.dialogs.show_stats()
    dialog = window.dialogs.stats_dialog
    assert dialog is not None
    QTimer.singleShot(900, lambda: (save(dialog, path), dialog.close()))


def _workers_shot(window: MainWindow, path: Path) -> None:
    window.dialogs.show_workers()
    panel = window.dialogs.workers_panel
    assert panel is not None
    panel.resize(980, 300)
    QTimer.singleShot(900, lambda: (save(panel, path), panel.close()))


def _settings_shot(window: MainWindow, path: Path) -> None:
    dialog = SettingsDialog(
        window.deps.settings, lambda _s: None, window, store=window.store,
        models=window.prompt.model_choices(),
    )  # fmt: skip
    dialog.show()
    QTimer.singleShot(300, lambda: (save(dialog, path), dialog.close()))


def _run_steps(steps: list) -> None:
    """Each step `delay` ms after the previous one ran: on a busy machine timers set for
    fixed times fire late and together, and a shot could show the next step's selection."""
    if not steps:
        return
    (delay, step), rest = steps[0], steps[1:]

    def run() -> None:
        step()
        _run_steps(rest)

    QTimer.singleShot(delay, run)


if __name__ == "__main__":
    sys.exit(main())

"""Screenshots of issue 27's tools: a composed X/Y/Z grid in the window, the grid builder,
and an upscaled example (a tiled upscale of one cell).

    xvfb-run -a .venv/bin/python packaging/groups_screenshots.py [--out docs/screenshots]

Makes everything with the bundled model in a throw-away data folder: a 3x3 grid (steps
against CFG) and a 4x tiled upscale of one of its cells, run by a real worker in this
process, then shows the window with the grid selected. Writes grid-window.png,
grid-builder.png, grid.png (the grid job's own image) and upscaled.png.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ["EASEL_HOME"] = tempfile.mkdtemp(prefix="easel-groups-shots-")

from PySide6.QtCore import QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication, QWidget  # noqa: E402

from app.engine.jobs.follow_ups import submit_upscale  # noqa: E402
from app.engine.jobs.grid_spec import spec_from_axes  # noqa: E402
from app.engine.jobs.groups import submit_grid  # noqa: E402
from app.engine.jobs.params import DEFAULT_MODEL, GenerationParams  # noqa: E402
from app.engine.jobs.queue import JobQueue  # noqa: E402
from app.engine.settings import load_settings, save_settings  # noqa: E402
from app.engine.store.opening import open_queue  # noqa: E402
from app.engine.workers.liveness import WorkerIdentity, new_token, this_host  # noqa: E402
from app.engine.workers.messages import WorkerMessage  # noqa: E402
from app.engine.workers.worker import Outbox, Worker, WorkerConfig, default_runner  # noqa: E402
from app.ui.presenters.queue_service import QueueService  # noqa: E402
from app.ui.qt.theme import apply_theme  # noqa: E402
from app.ui.widgets.window import Dependencies, MainWindow  # noqa: E402
from app.ui.wiring import model_choices  # noqa: E402

PROMPT = "a red circle on a blue background"


class NoWorkers:
    """The jobs are done already: a pool with nothing to run."""

    def start(self) -> None:
        pass

    def own_running_ids(self) -> list[int]:
        return []

    def shutdown(self, timeout: float) -> list[int]:
        return []

    def poll(self) -> Sequence[WorkerMessage]:
        return []


def run_jobs(queue: JobQueue) -> None:
    """A real worker on the bundled model, in this process, until nothing is left."""
    home = Path(os.environ["EASEL_HOME"])
    config = WorkerConfig(
        db_path=str(queue.db.location), outputs_dir=str(load_settings().outputs_path()),
        checkpoints_dir=str(home / "checkpoints"), liveness_dir=str(home / "workers"),
        warm_model=None, until_idle=True,
    )  # fmt: skip
    worker_id = str(WorkerIdentity(this_host(), os.getpid(), new_token()))
    outbox = Outbox(None)
    Worker(config, queue, default_runner(), worker_id, outbox).run()
    outbox.close()


def save(widget: QWidget, path: Path) -> None:
    widget.grab().save(str(path))
    print(f"saved {path}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    queue = open_queue()
    base = GenerationParams(PROMPT, model=DEFAULT_MODEL, seed=1006, steps=8)
    grid = submit_grid(queue, base, spec_from_axes([("x", "steps=4,8,16"), ("y", "cfg=2,4,7")]))
    upscaled = submit_upscale(queue, grid.jobs[4], scale=4, strength=0.35, tiled=True)
    run_jobs(queue)
    grid_job, upscale_job = queue.get(grid.composer or 0), queue.get(upscaled)
    shutil.copy(grid_job.output_path or "", args.out / "grid.png")
    shutil.copy(upscale_job.output_path or "", args.out / "upscaled.png")
    print(f"saved {args.out / 'grid.png'} and {args.out / 'upscaled.png'}")

    app = QApplication(sys.argv)
    apply_theme(app)
    deps = Dependencies(
        queue=QueueService(queue), workers=NoWorkers(), settings=load_settings(),
        save_settings=save_settings, list_models=lambda: model_choices(load_settings()),
        confirm_quit=lambda _n: True,
    )  # fmt: skip
    window = MainWindow(deps)
    window.resize(1600, 960)
    window.prompt.set_params(base)
    window.show()

    def builder() -> None:
        window.groups_menu.open_grid_builder()
        dialog = window.groups_menu.dialog
        assert dialog is not None
        QTimer.singleShot(600, lambda: (save(dialog, args.out / "grid-builder.png"),
                                        dialog.reject(), window.close()))  # fmt: skip

    QTimer.singleShot(1500, lambda: window.jobs.select_jobs([grid.composer or 0]))
    QTimer.singleShot(3500, lambda: save(window, args.out / "grid-window.png"))
    QTimer.singleShot(4000, builder)
    code = app.exec()
    shutil.rmtree(os.environ["EASEL_HOME"], ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())

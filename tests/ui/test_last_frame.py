"""The form's "Last frame" picker beside the init image: shown only for a model that takes a
last image (Wan 2.1 FLF2V), a picked file's thumbnail, Remove, and the picked image stored with
the job through the queue service as a durable input (`job_input` "last", the job's
`last_image` its digest)."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path

from PIL import Image
from pytestqt.qtbot import QtBot

from app.engine.jobs.graph_sql import InputKind, digest, stored_input
from app.engine.jobs.params import KIND_VIDEO, GenerationParams
from app.engine.jobs.queue import JobQueue
from app.ui.presenters.model_choices import ModelChoice
from app.ui.presenters.queue_service import QueueService
from app.ui.widgets.last_frame import LastFrameRow
from app.ui.widgets.prompt_panel import PromptPanel

WAN = ModelChoice(
    "wan-tiny", "Wan 2.1", 832, ((832, 480),), samplers=("UniPC", "Euler"),
    frame_step=4, default_frames=81, default_fps=16,
)  # fmt: skip
FLF = replace(WAN, name="flf-tiny", kind="Wan 2.1 FLF2V", takes_last_image=True)


def png_file(path: Path, colour: tuple[int, int, int]) -> Path:
    buffer = io.BytesIO()
    Image.new("RGB", (32, 32), colour).save(buffer, format="PNG")
    path.write_bytes(buffer.getvalue())
    return path


def test_the_last_frame_picker_follows_the_model_and_gives_the_picked_image(
    qtbot: QtBot, tmp_path: Path
) -> None:
    picked = png_file(tmp_path / "ending.png", (10, 200, 30))
    panel = PromptPanel()
    qtbot.addWidget(panel)
    panel.show()
    panel.last_frame._ask_path = lambda _parent: picked  # the file dialog's answer
    panel.set_models([WAN, FLF])
    panel.model.setCurrentIndex(panel.model.findData("wan-tiny"))
    assert not panel.last_frame.isVisible() and panel.last_png() is None
    panel.model.setCurrentIndex(panel.model.findData("flf-tiny"))
    assert panel.last_frame.isVisible() and panel.last_frame.choose.text() == "Last frame…"
    assert not panel.last_frame.clear.isVisible() and panel.last_png() is None
    panel.last_frame.choose.click()
    assert panel.last_frame.thumb.pixmap() is not None and panel.last_frame.clear.isVisible()
    assert panel.last_frame.caption.text() == "Ends on ending.png (32 × 32)"
    png = panel.last_png()
    assert png is not None and Image.open(io.BytesIO(png)).getpixel((5, 5)) == (10, 200, 30)
    panel.model.setCurrentIndex(panel.model.findData("wan-tiny"))  # a model that takes none
    assert not panel.last_frame.isVisible() and panel.last_png() is None
    panel.model.setCurrentIndex(panel.model.findData("flf-tiny"))  # kept for the next
    assert panel.last_png() == png
    panel.last_frame.clear.click()
    assert panel.last_png() is None and not panel.last_frame.clear.isVisible()


def test_a_file_that_is_no_image_is_one_sentence_on_the_banner(
    qtbot: QtBot, tmp_path: Path
) -> None:
    broken = tmp_path / "notes.png"
    broken.write_text("not a picture")
    row = LastFrameRow(ask_path=lambda _parent: broken)
    qtbot.addWidget(row)
    with qtbot.waitSignal(row.problem) as said:
        row.choose.click()
    assert said.args is not None and said.args[0] == (
        "The last frame is not an image that can be read: it is not a PNG, JPEG or WebP file"
    )
    assert row.png() is None


def test_the_queue_service_stores_the_last_frame_with_the_clip(
    queue: JobQueue, tmp_path: Path
) -> None:
    first = QueueService.prepare_init(png_file(tmp_path / "a.png", (200, 0, 0))).png
    last = QueueService.prepare_init(png_file(tmp_path / "b.png", (0, 0, 200))).png
    service = QueueService(opener=lambda: queue)
    params = GenerationParams("a fox", width=32, height=32, kind=KIND_VIDEO, frames=5)
    outcome = service.submit(params, init_png=first, last_png=last)
    assert outcome.errors == () and len(outcome.job_ids) == 1
    job = queue.get(outcome.job_ids[0])
    assert job.last_image == digest(last)
    assert stored_input(queue.db, outcome.job_ids[0], InputKind.LAST) == last

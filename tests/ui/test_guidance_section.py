"""The prompt panel's Control section: layers from a file, a paste or a drop, their
preprocessed image shown and stored, weight and start/end, switched off or removed; a
reference image; what Generate queues with them."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image
from PySide6.QtGui import QGuiApplication, QImage
from pytestqt.qtbot import QtBot

from app.engine.jobs.graph import control_images_of, reference_images_of
from app.engine.jobs.params import decode_control, decode_reference
from app.engine.jobs.queue import JobQueue
from app.ui.widgets.window import MainWindow
from tests.cli.test_cli_control import drawing, install_controlnet, install_ip_adapter

TIMEOUT_MS = 5000


def png_of(path: Path) -> bytes:
    return path.read_bytes()


def only_job(queue: JobQueue) -> int:
    [job] = queue.jobs(None)
    assert job.id is not None
    return job.id


def test_generate_queues_the_form_with_its_layers_and_reference(
    qtbot: QtBot, window: MainWindow, queue: JobQueue, tmp_path: Path
) -> None:
    install_controlnet("edges-sd15")
    install_ip_adapter("ip-adapter_sd15")
    section = window.guidance
    window.prompt.prompt.setPlainText("a cat")
    picture = drawing(tmp_path / "pose.png")
    section.controls.add_file_path(picture)
    row = section.controls.rows[0]
    assert row.model.currentText() == "edges-sd15" and row.layer.module == "canny"
    thumb = row.thumb.pixmap().toImage()
    assert not thumb.isNull()  # the canny output is shown: black with white edges
    assert QImage(thumb).pixelColor(thumb.width() // 2, thumb.height() // 2).value() < 30
    row.weight.setValue(0.6)
    row.start.setValue(0.1)
    section.references.add(png_of(picture))
    section.references.rows[0].weight.setValue(0.8)
    window.generate()
    qtbot.waitUntil(lambda: len(queue.jobs(None)) == 1, timeout=TIMEOUT_MS)
    job = queue.get(only_job(queue))
    [layer] = decode_control(job.control)
    assert (layer.model, layer.module, layer.weight, layer.start, layer.end) == (
        "edges-sd15", "canny", 0.6, 0.1, 1.0,
    )  # fmt: skip
    [stored] = control_images_of(queue, job)
    assert stored == row.layer.image  # what was shown is what is stored
    edges = np.asarray(Image.open(io.BytesIO(stored)))
    assert set(np.unique(edges)) == {0, 255}
    [reference] = decode_reference(job.reference)
    assert (reference.model, reference.weight) == ("ip-adapter_sd15", 0.8)
    assert len(reference_images_of(queue, job)) == 1


def test_a_layer_switched_off_or_removed_is_not_queued_and_a_paste_adds_one(
    qtbot: QtBot, window: MainWindow, queue: JobQueue, tmp_path: Path
) -> None:
    install_controlnet("edges-sd15")
    section = window.guidance
    window.prompt.prompt.setPlainText("a cat")
    section.controls.add_file_path(drawing(tmp_path / "a.png"))
    section.controls.rows[0].enabled.setChecked(False)
    QGuiApplication.clipboard().setImage(QImage(str(drawing(tmp_path / "b.png"))))
    section.controls.paste_image()
    assert len(section.controls.rows) == 2
    section.controls.rows[1].remove.click()
    assert len(section.controls.rows) == 1 and not section.in_use()
    window.generate()
    qtbot.waitUntil(lambda: len(queue.jobs(None)) == 1, timeout=TIMEOUT_MS)
    job = queue.get(only_job(queue))
    assert job.control == "" and job.reference == ""


def test_a_broken_image_is_refused_in_one_sentence(window: MainWindow, tmp_path: Path) -> None:
    messages: list[str] = []
    window.show_error = lambda text, **_: messages.append(text)  # type: ignore[method-assign]
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"not a png")
    window.guidance.controls.add_file_path(bad)
    assert window.guidance.controls.rows == []
    assert len(messages) == 1 and "not an image" in messages[0]

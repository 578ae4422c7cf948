"""The prompt panel's Control section: layers from a file, a paste or a drop, their
preprocessed image shown and stored, weight and start/end, switched off or removed; a
reference image; what Generate queues with them."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image
from PySide6.QtGui import QGuiApplication, QImage
from PySide6.QtWidgets import QPushButton
from pytestqt.qtbot import QtBot

from app.engine.jobs.graph import control_images_of, reference_images_of
from app.engine.jobs.params import decode_control, decode_reference
from app.engine.jobs.queue import JobQueue
from app.ui.widgets.window import MainWindow
from tests.cli.test_cli_control import drawing, install_controlnet, install_ip_adapter

TIMEOUT_MS = 5000


def png_of(path: Path) -> bytes:
    return path.read_bytes()


def picture_file(path: Path) -> Path:
    Image.new("RGB", (40, 48), (200, 40, 90)).save(path)
    return path


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


def test_a_dropped_png_gives_its_layers_back_waiting_for_their_images(
    qtbot: QtBot, window: MainWindow, queue: JobQueue, tmp_path: Path
) -> None:
    from app.engine.jobs.params import ControlLayer, GenerationParams, encode_control
    from app.engine.outputs.image import write_png

    install_controlnet("edges-sd15")
    layers = [
        ControlLayer("upload:" + "1" * 64, "edges-sd15", "scribble", 0.7, 0.1, 0.9),
        ControlLayer("upload:" + "2" * 64, "not-installed", "canny"),
    ]
    made = tmp_path / "made.png"
    write_png(
        Image.new("RGB", (8, 8)), made, GenerationParams("a dancer", control=encode_control(layers))
    )
    assert window.prompt.load_png(made)
    section = window.guidance
    [row] = section.controls.rows  # the layer whose ControlNet is here
    assert (row.layer.model, row.layer.module, row.weight.value(), row.end.value()) == (
        "edges-sd15", "scribble", 0.7, 0.9,
    )  # fmt: skip
    assert row.layer.waiting and not row.enabled.isEnabled() and not section.in_use()
    row.set_source(png_of(drawing(tmp_path / "sketch.png")))
    assert section.in_use() and row.thumb.pixmap() is not None
    window.generate()
    qtbot.waitUntil(lambda: len(queue.jobs(None)) == 1, timeout=TIMEOUT_MS)
    [layer] = decode_control(queue.get(only_job(queue)).control)
    assert (layer.model, layer.module, layer.weight, layer.start) == (
        "edges-sd15",
        "scribble",
        0.7,
        0.1,
    )


def test_layers_move_up_and_are_queued_in_their_order_and_result_needs_a_selection(
    qtbot: QtBot, window: MainWindow, queue: JobQueue, tmp_path: Path
) -> None:
    install_controlnet("edges-sd15")
    section = window.guidance
    window.prompt.prompt.setPlainText("a cat")
    section.controls.add_file_path(drawing(tmp_path / "a.png"))
    section.controls.add_file_path(drawing(tmp_path / "b.png"))
    first, second = section.controls.rows
    second.module.setCurrentIndex(second.module.findData("scribble"))
    second.up.click()
    assert section.controls.rows == [second, first]
    window.generate()
    qtbot.waitUntil(lambda: len(queue.jobs(None)) == 1, timeout=TIMEOUT_MS)
    modules = [layer.module for layer in decode_control(queue.get(only_job(queue)).control)]
    assert modules == ["scribble", "canny"]
    window.jobs.select_jobs([])
    result = next(
        button for button in section.controls.findChildren(QPushButton)
        if button.text() == "Result"
    )  # fmt: skip
    result.click()
    assert window.error_banner.label.text() == "Select a finished job first"
    assert len(section.controls.rows) == 2


def test_guidance_goes_with_the_forms_init_image_and_with_an_inpaint_from_the_editor(
    qtbot: QtBot, window: MainWindow, queue: JobQueue, tmp_path: Path
) -> None:
    """img2img and inpaint are guided too: the form's init image and the mask editor's
    mask are stored beside the control layers and the reference image."""
    from app.engine.jobs.graph import init_image_of, mask_of
    from app.ui.presenters.queue_service import InitImage
    from tests.ui.test_mask_editor import picture, stroke

    install_controlnet("edges-sd15")
    install_ip_adapter("ip-adapter_sd15")
    section = window.guidance
    window.prompt.prompt.setPlainText("a cat")
    section.controls.add_file_path(drawing(tmp_path / "pose.png"))
    assert section.controls.rows[0].control_type.isHidden()  # a single-mode net: no type
    section.references.add(png_of(drawing(tmp_path / "style.png")))
    section.references.add(png_of(picture_file(tmp_path / "face.png")))
    section.references.rows[1].weight.setValue(0.4)
    init = png_of(drawing(tmp_path / "init.png"))
    window.prompt.set_init(InitImage(init, 64, 64, source="init.png"))
    window.generate()
    qtbot.waitUntil(lambda: len(queue.jobs(None)) == 1, timeout=TIMEOUT_MS)
    job = queue.get(only_job(queue))
    assert job.init_image.startswith("upload:") and init_image_of(queue, job) is not None
    assert len(control_images_of(queue, job)) == 1 and len(reference_images_of(queue, job)) == 2
    assert [r.weight for r in decode_reference(job.reference)] == [1.0, 0.4]  # each its own
    assert [layer.control_type for layer in decode_control(job.control)] == [""]
    editor = window.mask_editing.open(picture(), None, None)
    qtbot.addWidget(editor)
    qtbot.waitExposed(editor)
    editor.canvas.fit()
    stroke(editor.canvas, (8, 32), (56, 32))
    editor.prompt.setText("a hat")
    editor.inpaint.click()
    qtbot.waitUntil(lambda: len(queue.jobs(None)) == 2, timeout=TIMEOUT_MS)
    [inpaint] = [j for j in queue.jobs(None) if j.id != job.id]
    assert inpaint.mask and mask_of(queue, inpaint) is not None
    [layer] = decode_control(inpaint.control)
    assert layer.model == "edges-sd15" and len(control_images_of(queue, inpaint)) == 1
    assert len(reference_images_of(queue, inpaint)) == 2


def test_weight_and_start_end_are_sliders_with_their_number_beside_them(
    window: MainWindow, tmp_path: Path
) -> None:
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    install_controlnet("edges-sd15")
    section = window.guidance
    section.controls.add_file_path(drawing(tmp_path / "pose.png"))
    section.references.add(png_of(drawing(tmp_path / "style.png")))
    row = section.controls.rows[0]
    assert (row.weight.number.text(), row.start.number.text(), row.end.number.text()) == (
        "1.00", "0.00", "1.00",
    )  # fmt: skip
    row.weight.slider.setFocus()
    QTest.keyClick(row.weight.slider, Qt.Key.Key_Left)  # one step: 0.05
    assert row.weight.number.text() == "0.95" and row.layer.weight == 0.95
    row.end.slider.setValue(70)
    assert row.end.number.text() == "0.70" and row.layer.end == 0.7
    reference = section.references.rows[0]
    assert reference.weight.isVisibleTo(reference) and not reference.start.isVisibleTo(reference)
    reference.weight.slider.setValue(40)
    assert reference.weight.number.text() == "0.40" and reference.layer.weight == 0.4


def test_a_new_layer_offers_the_controlnets_made_for_the_forms_model(
    window: MainWindow, tmp_path: Path
) -> None:
    """On a Flux.1 model the layer's picker lists Flux ControlNets, not SD ones; on SD 1.x
    the other way round; on a model of unknown kind, every usable one."""
    from app.ui.presenters.model_choices import ModelChoice
    from tests.cli.test_cli_control import install_flux_controlnet

    install_controlnet("edges-sd15")
    install_flux_controlnet("flux-union", union=True)
    window.prompt.set_models(
        [ModelChoice("flux-dev", "Flux.1", 1024, architecture="flux1"),
         ModelChoice("sd15", "SD 1.x", 512, architecture="sd1")]
    )  # fmt: skip
    picture = drawing(tmp_path / "edges.png")
    offered = {}
    for model in ("flux-dev", "sd15", "elsewhere"):
        window.prompt._select_model(model)
        row = window.guidance.controls.add(png_of(picture))
        offered[model] = [row.model.itemText(i) for i in range(row.model.count())]
    assert offered == {
        "flux-dev": ["flux-union"], "sd15": ["edges-sd15"],
        "elsewhere": ["edges-sd15", "flux-union"],
    }  # fmt: skip

"""A control layer's type box offers the chosen ControlNet's own control types: a Flux.1
Union file its table (canny ... low-quality), an SDXL Union its own, a single-mode net
none (the box hidden); picked with real key presses, the type travels with the job."""

from __future__ import annotations

import json
from pathlib import Path

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.engine.jobs.params import FLUX_UNION_TYPES, SDXL_UNION_TYPES, decode_control
from app.engine.jobs.queue import JobQueue
from app.engine.paths import models_dir
from app.ui.widgets.window import MainWindow
from tests.cli.test_cli_control import drawing, install_controlnet

TIMEOUT_MS = 5000


def install_sdxl_union(name: str) -> Path:
    folder = models_dir() / "controlnet" / name
    folder.mkdir(parents=True)
    config = {"_class_name": "ControlNetUnionModel", "addition_embed_type": "text_time"}
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def install_flux_union_file(name: str) -> Path:
    """A Flux.1 Union file as the listing sees it: the tensors its header names and their
    shapes (the window never loads weights; numpy, so no torch is imported for it)."""
    import numpy as np
    from safetensors.numpy import save_file

    width, head = 32, 16
    shapes = {
        "x_embedder.weight": (width, 64), "controlnet_x_embedder.weight": (width, 64),
        "transformer_blocks.0.attn.norm_q.weight": (head,),
        "context_embedder.weight": (width, 32),
        "time_text_embed.text_embedder.linear_1.weight": (width, 32),
        "controlnet_mode_embedder.weight": (len(FLUX_UNION_TYPES), width),
    }  # fmt: skip
    path = models_dir() / "controlnet" / f"{name}.safetensors"
    save_file({key: np.zeros(shape, np.float32) for key, shape in shapes.items()}, str(path))
    return path


def offered(box: object) -> list[str]:
    from PySide6.QtWidgets import QComboBox

    assert isinstance(box, QComboBox)
    return [str(box.itemData(i)) for i in range(box.count())]


def pick(qtbot: QtBot, box: object, text: str) -> None:
    """Choose the item `text` as an artist does with the keyboard: arrow keys on the box."""
    from PySide6.QtWidgets import QComboBox

    assert isinstance(box, QComboBox)
    box.setFocus()
    moves = box.findText(text) - box.currentIndex()
    for _ in range(abs(moves)):
        qtbot.keyClick(box, Qt.Key.Key_Down if moves > 0 else Qt.Key.Key_Up)
    assert box.currentText() == text


def test_the_type_box_offers_the_chosen_nets_own_table(
    qtbot: QtBot, window: MainWindow, queue: JobQueue, tmp_path: Path
) -> None:
    install_controlnet("a-edges-sd15")
    install_sdxl_union("b-union-sdxl")
    install_flux_union_file("c-union-flux")
    section = window.guidance
    section.unfold()
    window.prompt.prompt.setPlainText("a cat")
    section.controls.add_file_path(drawing(tmp_path / "pose.png"))
    row = section.controls.rows[0]
    qtbot.waitExposed(row)
    assert row.model.currentText() == "a-edges-sd15"
    assert row.control_type.isHidden() and row.layer.control_type == ""  # single-mode: none

    pick(qtbot, row.model, "c-union-flux")
    assert offered(row.control_type) == ["", *FLUX_UNION_TYPES]
    assert not row.control_type.isHidden()
    pick(qtbot, row.control_type, "type: low-quality")
    assert row.layer.control_type == "low-quality"

    pick(
        qtbot, row.model, "b-union-sdxl"
    )  # SDXL's table has no low-quality: back to the preprocessor's
    assert offered(row.control_type) == ["", *SDXL_UNION_TYPES]
    assert row.layer.control_type == "" and row.control_type.currentIndex() == 0
    row.control_type.setFocus()
    qtbot.keyClick(row.control_type, Qt.Key.Key_Down)
    assert row.layer.control_type == SDXL_UNION_TYPES[0]

    pick(qtbot, row.model, "c-union-flux")  # Flux's table has the type: kept
    assert row.layer.control_type == SDXL_UNION_TYPES[0]
    row.control_type.setFocus()
    qtbot.keyClick(row.control_type, Qt.Key.Key_Down)
    kept = FLUX_UNION_TYPES[FLUX_UNION_TYPES.index(SDXL_UNION_TYPES[0]) + 1]
    assert row.layer.control_type == kept
    window.generate()
    qtbot.waitUntil(lambda: len(queue.jobs(None)) == 1, timeout=TIMEOUT_MS)
    [job] = queue.jobs(None)
    assert [(x.model, x.control_type) for x in decode_control(job.control)] == [
        ("c-union-flux", kept)
    ]

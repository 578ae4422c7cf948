"""The model picker follows the model and the LoRA picker writes A1111 tags (issue 12.2, 12.4).

Driven with real key events on the window's own combo boxes; the submitted job is read back
from the real SQLite queue.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QStandardItemModel
from PySide6.QtWidgets import QComboBox
from pytestqt.qtbot import QtBot

from app.engine.jobs.queue import JobQueue
from app.engine.settings import Settings
from app.ui.presenters.model_choices import ModelChoice
from app.ui.widgets.window import MainWindow
from app.ui.wiring import lora_choices, model_choices

pytestmark = pytest.mark.timeout(60)

TIMEOUT_MS = 5000
CTRL = Qt.KeyboardModifier.ControlModifier


def window_with_models(make_window: Callable[..., MainWindow], qtbot: QtBot) -> MainWindow:
    window = make_window()
    qtbot.waitUntil(lambda: window.prompt.model.count() == 3, timeout=TIMEOUT_MS)
    qtbot.waitUntil(lambda: window.prompt.lora.count() == 3, timeout=TIMEOUT_MS)
    return window


def pick_next(qtbot: QtBot, window: MainWindow, combo: QComboBox) -> None:
    """Down arrow on a focused combo box: what a keyboard user does to choose the next item."""
    window.activateWindow()
    combo.setFocus()
    qtbot.keyClick(combo, Qt.Key.Key_Down)


def presets(window: MainWindow) -> list[str]:
    box = window.prompt.size_preset
    return [box.itemText(i) for i in range(box.count())]


def test_each_model_shows_its_architecture_and_native_size(
    make_window: Callable[..., MainWindow], qtbot: QtBot
) -> None:
    window = window_with_models(make_window, qtbot)
    picker = window.prompt.model
    labels = [picker.itemText(i) for i in range(picker.count())]
    assert labels == ["easel-tiny · SD 1.x v-prediction, 64 px", "other-model · SDXL, 1024 px",
                      "refiner · unsupported"]  # fmt: skip
    items = picker.model()
    assert isinstance(items, QStandardItemModel)
    assert [items.item(i).isEnabled() for i in range(3)] == [True, True, False]
    tooltip = picker.itemData(2, Qt.ItemDataRole.ToolTipRole)
    assert tooltip == "an SDXL refiner cannot generate on its own"


def test_size_presets_follow_the_chosen_model(
    make_window: Callable[..., MainWindow], qtbot: QtBot, queue: JobQueue
) -> None:
    window = window_with_models(make_window, qtbot)
    assert presets(window) == ["64 × 64 · native", "72 × 56", "56 × 72", "Custom"]
    pick_next(qtbot, window, window.prompt.model)
    assert window.prompt.model_name() == "other-model"
    assert presets(window) == ["1024 × 1024 · native", "1152 × 896", "Custom"]
    # 64 x 64 is not an SDXL size: choosing the model moved the size to its native square
    assert (window.prompt.width_box.text(), window.prompt.height_box.text()) == ("1024", "1024")
    pick_next(qtbot, window, window.prompt.model)  # the unsupported refiner cannot be chosen
    assert window.prompt.model_name() == "other-model"
    qtbot.keyClick(window.prompt.model, Qt.Key.Key_Up)
    assert window.prompt.model_name() == "easel-tiny"
    assert (window.prompt.width_box.text(), window.prompt.height_box.text()) == ("64", "64")
    window.prompt.prompt.setFocus()
    qtbot.keyClicks(window.prompt.prompt, "a red kite")
    qtbot.keyClick(window.prompt.prompt, Qt.Key.Key_Return, CTRL)
    qtbot.waitUntil(lambda: len(queue.jobs()) == 1, timeout=TIMEOUT_MS)
    job = queue.jobs()[0]
    assert (job.model, job.width, job.height) == ("easel-tiny", 64, 64)


def test_a_remembered_size_too_large_for_the_model_becomes_its_native_one(
    make_window: Callable[..., MainWindow], qtbot: QtBot
) -> None:
    window = make_window()
    window.prompt.width_box.setText("1024")
    window.prompt.height_box.setText("1024")
    qtbot.waitUntil(lambda: window.prompt.model.count() == 3, timeout=TIMEOUT_MS)
    assert (window.prompt.width_box.text(), window.prompt.height_box.text()) == ("64", "64")


def test_a_dropped_image_keeps_a_model_that_is_not_installed(
    make_window: Callable[..., MainWindow], qtbot: QtBot
) -> None:
    from app.engine.jobs.params import GenerationParams

    window = window_with_models(make_window, qtbot)
    window.prompt.set_params(GenerationParams(prompt="x", model="dreamshaper_8", width=512,
                                              height=768))  # fmt: skip
    assert window.prompt.model_name() == "dreamshaper_8"
    assert window.prompt.size_preset.currentText() == "512 × 768"


def test_the_lora_picker_inserts_a_tag_at_the_cursor(
    make_window: Callable[..., MainWindow], qtbot: QtBot
) -> None:
    window = window_with_models(make_window, qtbot)
    prompt = window.prompt.prompt
    prompt.setFocus()
    qtbot.keyClicks(prompt, "a cat, by the sea")
    for _ in range(len(", by the sea")):
        qtbot.keyClick(prompt, Qt.Key.Key_Left)
    pick_next(qtbot, window, window.prompt.lora)
    assert prompt.toPlainText() == "a cat<lora:ink_style:1>, by the sea"
    assert window.prompt.lora.currentIndex() == 0  # ready for the next one
    assert prompt.hasFocus()  # back to typing


def test_no_lora_files_says_so(make_window: Callable[..., MainWindow], qtbot: QtBot) -> None:
    window = make_window()
    window.prompt.set_loras([])
    assert not window.prompt.lora.isEnabled()
    assert window.prompt.lora.currentText() == "No LoRA files in the models folder"


def test_the_scan_describes_the_bundled_model_and_finds_lora_files(tmp_path: Path) -> None:
    (tmp_path / "lora").mkdir()
    for name in ("Watercolor", "ink_style"):
        (tmp_path / "lora" / f"{name}.safetensors").write_bytes(b"")
    (tmp_path / "lora" / "notes.txt").write_text("not a LoRA")
    settings = Settings(models_dir=str(tmp_path))
    tiny = next(c for c in model_choices(settings) if c.name == "easel-tiny")
    assert (tiny.kind, tiny.native_size, tiny.presets[0], tiny.max_side) == (
        "SD 1.x v-prediction", 64, (64, 64), 256)  # fmt: skip
    assert tiny.label().startswith("easel-tiny · SD 1.x v-prediction, 64 px · ")
    assert [lora.name for lora in lora_choices(settings)] == ["ink_style", "Watercolor"]


def test_the_picker_says_each_models_size_and_the_lora_list_shows_previews(
    make_window: Callable[..., MainWindow], qtbot: QtBot, tmp_path: Path
) -> None:
    """Issue 28.8: a model's kind and size on disk in the picker; a LoRA's preview picture
    (A1111's name.preview.png, else name.png, beside the file) in the LoRA list."""
    from PIL import Image

    from app.engine.generation.files.sources import disk_bytes, list_models
    from app.ui.presenters.model_choices import disk_size_text

    lora = tmp_path / "lora"
    lora.mkdir()
    (lora / "ink_style.safetensors").write_bytes(b"x" * 2_500_000)
    (lora / "watercolor.safetensors").write_bytes(b"x" * 1000)
    (lora / "plain.safetensors").write_bytes(b"x" * 1000)
    Image.new("RGB", (32, 32), "red").save(lora / "ink_style.preview.png")
    Image.new("RGB", (32, 32), "blue").save(lora / "ink_style.png")  # .preview.png wins
    Image.new("RGB", (32, 32), "green").save(lora / "watercolor.png")
    settings = Settings(models_dir=str(tmp_path))
    tiny = next(c for c in model_choices(settings) if c.name == "easel-tiny")
    folder = next(
        m.path for m in list_models(settings.model_search_path()) if m.name == "easel-tiny"
    )
    on_disk = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
    assert tiny.disk_bytes == disk_bytes(folder) == on_disk > 0
    assert tiny.label().endswith(" · " + disk_size_text(on_disk))
    loras = {choice.name: choice for choice in lora_choices(settings)}
    assert loras["ink_style"].preview == str(lora / "ink_style.preview.png")
    assert loras["watercolor"].preview == str(lora / "watercolor.png")
    assert loras["plain"].preview == ""
    assert loras["ink_style"].disk_bytes == 2_500_000

    window = make_window()
    window.prompt.set_loras(list(loras.values()))
    box = window.prompt.lora
    index = box.findData("ink_style")
    assert not box.itemIcon(index).isNull() and box.itemIcon(box.findData("plain")).isNull()
    tip = box.itemData(index, Qt.ItemDataRole.ToolTipRole)
    assert "2.5 MB" in tip and (lora / "ink_style.preview.png").as_uri() in tip
    assert "<img" not in box.itemData(box.findData("plain"), Qt.ItemDataRole.ToolTipRole)
    assert (disk_size_text(6_500_000_000), disk_size_text(320_000_000)) == ("6.5 GB", "320 MB")


FLUX = ModelChoice(
    "flux-dev", "Flux.1", 1024, ((1024, 1024),), max_side=4096, samplers=("Euler",),
    takes_negative_prompt=False, distilled_guidance=True,
)  # fmt: skip


def test_a_flux_model_offers_only_what_it_takes_and_gives_the_rest_back(
    make_window: Callable[..., MainWindow], qtbot: QtBot, queue: JobQueue
) -> None:
    window = window_with_models(make_window, qtbot)
    panel = window.prompt
    panel.set_models([*panel.model_choices(), FLUX])
    panel.scheduler.setCurrentText("DPM++ 2M")
    panel.scheduler.activated.emit(panel.scheduler.currentIndex())  # as a click picks it
    qtbot.keyClicks(panel.negative, "blurry")
    for _ in range(3):  # down past other-model and the refiner, which cannot be chosen
        pick_next(qtbot, window, panel.model)
    assert panel.model_name() == "flux-dev"
    items = panel.scheduler.model()
    assert isinstance(items, QStandardItemModel)
    offered = [items.item(i).text() for i in range(items.rowCount()) if items.item(i).isEnabled()]
    assert (offered, panel.scheduler.currentText()) == (["Euler"], "Euler")
    assert not panel.negative.isEnabled() and panel.negative.toPlainText() == "blurry"
    assert panel._cfg_caption.text() == "Guidance"
    panel.prompt.setFocus()
    qtbot.keyClicks(panel.prompt, "a red kite")
    qtbot.keyClick(panel.prompt, Qt.Key.Key_Return, CTRL)
    qtbot.waitUntil(lambda: len(queue.jobs()) == 1, timeout=TIMEOUT_MS)
    job = queue.jobs()[0]
    assert (job.model, job.scheduler, job.negative_prompt) == ("flux-dev", "Euler", "")
    panel.model.setCurrentIndex(panel.model.findData("easel-tiny"))  # back to a UNet model
    assert panel.scheduler.currentText() == "DPM++ 2M"  # what the artist had picked
    assert panel.negative.isEnabled() and panel._cfg_caption.text() == "CFG"


def test_the_scan_says_what_a_flux_folder_takes(tmp_path: Path) -> None:
    from app.testing.tiny.flux import write_tiny_flux

    write_tiny_flux(tmp_path / "flux-tiny", guidance_embeds=True)
    choices = model_choices(Settings(models_dir=str(tmp_path)))
    choice = next(c for c in choices if c.name == "flux-tiny")
    assert (choice.name, choice.kind, choice.samplers) == ("flux-tiny", "Flux.1", ("Euler",))
    assert (choice.takes_negative_prompt, choice.distilled_guidance) == (False, True)


def test_the_scan_greys_out_the_negative_prompt_of_a_step_distilled_klein(tmp_path: Path) -> None:
    from app.testing.tiny.klein import write_tiny_klein

    write_tiny_klein(tmp_path / "klein-base", is_distilled=False)
    write_tiny_klein(tmp_path / "klein-distilled", is_distilled=True)
    choices = {c.name: c for c in model_choices(Settings(models_dir=str(tmp_path)))}
    assert choices["klein-base"].takes_negative_prompt
    assert not choices["klein-distilled"].takes_negative_prompt
    assert choices["klein-distilled"].samplers == ("Euler",)

"""How a clip's form reads on screen (LTX-Video 0.9.5+, an init and a last image picked), at
the form's narrowest, with the app's style sheet: each image's strength named on a line
under its image, the last frame's caption on at most two lines, the blank frame field's
"the end" whole, a clip's Frames and FPS right under Model, and no line's gap for a
hidden unlabelled row (docs/screenshots/video-form.png shows it)."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
from PIL import Image
from PySide6.QtCore import QPoint
from PySide6.QtWidgets import QApplication, QLabel, QStyle, QStyleOptionFrame, QWidget

from app.ui.presenters.model_choices import ModelChoice
from app.ui.presenters.queue_service import InitImage, QueueService
from app.ui.qt.theme import style_sheet
from app.ui.widgets.number_field import NumberEdit
from app.ui.widgets.prompt_panel import PromptPanel

LTX = ModelChoice(
    "ltx-tiny", "LTX-Video 0.9.5+", 704, ((704, 480),), samplers=("Euler",), frame_step=8,
    default_frames=97, default_fps=24, takes_last_image=True, weighs_images=True,
)  # fmt: skip
LINE_EDIT_MARGIN = 2  # px QLineEdit keeps inside its contents on each side (Qt's own)


def picture(name: str) -> InitImage:
    buffer = io.BytesIO()
    Image.new("RGB", (192, 128), (90, 120, 160)).save(buffer, format="PNG")
    return QueueService.prepare_init(buffer.getvalue(), name)


@pytest.fixture(scope="module")
def panel(qapp: QApplication) -> Iterator[PromptPanel]:
    panel = PromptPanel()
    panel.setStyleSheet(style_sheet())
    panel.set_models([LTX])
    panel.model.setCurrentIndex(panel.model.findData("ltx-tiny"))
    panel.set_init(picture("harbour.png"))
    panel.last_frame.set_image(picture("fog.png"))
    panel.resize(panel.minimumSizeHint().width(), panel.sizeHint().height())
    panel.show()
    QApplication.processEvents()
    yield panel
    panel.close()


def top(widget: QWidget, panel: QWidget) -> int:
    return widget.mapTo(panel, QPoint(0, 0)).y()


def bottom(widget: QWidget, panel: QWidget) -> int:
    return top(widget, panel) + widget.height()


def label_of(field: NumberEdit, panel: QWidget) -> QLabel:
    found = [label for label in panel.findChildren(QLabel) if label.buddy() is field]
    assert len(found) == 1, f"{field.rule.name} has {len(found)} labels"
    return found[0]


def test_each_images_strength_is_named_on_a_line_under_its_image(panel: PromptPanel) -> None:
    last = panel.last_frame
    for field, name, image in (
        (panel.image_strength, "Image strength", panel.init_thumb),
        (last.strength, "Last frame strength", last.thumb),
        (last.frame, "at frame", last.thumb),
    ):
        label = label_of(field, panel)
        assert label.isVisible() and field.isVisible() and label.text() == name
        assert top(field, panel) >= bottom(image, panel), f"{name} is beside its image"
        assert top(label, panel) >= bottom(image, panel)
        assert label.mapTo(panel, QPoint(0, 0)).x() < field.mapTo(panel, QPoint(0, 0)).x()


def test_the_last_frames_caption_and_the_blank_frame_read_whole(panel: PromptPanel) -> None:
    caption = panel.last_frame.caption
    assert caption.text() == "Ends on fog.png (192 × 128)"
    lines = caption.heightForWidth(caption.width()) / caption.fontMetrics().lineSpacing()
    assert lines <= 2.5  # was 5: a word a line
    frame = panel.last_frame.frame
    assert frame.text() == "" and frame.placeholderText() == "the end"
    option = QStyleOptionFrame()
    frame.initStyleOption(option)
    contents = frame.style().subElementRect(QStyle.SubElement.SE_LineEditContents, option, frame)
    room = contents.width() - 2 * LINE_EDIT_MARGIN
    assert room >= frame.fontMetrics().horizontalAdvance("the end")  # was "t…"


def test_a_clips_fields_come_under_model_with_no_gap_for_a_hidden_row(
    panel: PromptPanel,
) -> None:
    assert panel.frames.isVisible() and not panel.few_step_note.isVisible()
    spacing = top(panel.fps, panel) - bottom(panel.frames, panel)  # the form's own
    assert top(panel.frames, panel) - bottom(panel.model, panel) == pytest.approx(spacing, abs=3)
    assert top(panel.lora, panel) - bottom(panel.fps, panel) == pytest.approx(spacing, abs=3)
    # the few-step note's row (hidden, no label) between LoRA and Sampler: was a line's gap
    assert top(panel.scheduler, panel) - bottom(panel.lora, panel) == pytest.approx(spacing, abs=3)

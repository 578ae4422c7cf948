"""The form for a video model: its frames (with the clip's length beside them) and frames a
second, shown only for a model that draws video, and read into a clip's parameters (the scan that
says a model draws video: tests/engine/generation/test_wan.py)."""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from app.engine.jobs.params import KIND_GENERATE, KIND_VIDEO, GenerationParams
from app.ui.presenters.model_choices import ModelChoice
from app.ui.widgets.prompt_panel import PromptPanel

IMAGE_MODEL = ModelChoice("easel-tiny", "SD 1.x", 64, ((64, 64),))
WAN = ModelChoice(
    "wan-tiny", "Wan 2.1", 832, ((832, 480),), samplers=("UniPC", "Euler"),
    frame_step=4, default_frames=81, default_fps=16,
)  # fmt: skip


def test_the_frame_fields_follow_the_model_and_make_a_clip(qtbot: QtBot) -> None:
    panel = PromptPanel()
    qtbot.addWidget(panel)
    panel.show()
    panel.set_models([IMAGE_MODEL, WAN])
    panel.prompt.setPlainText("a fox")
    panel.model.setCurrentIndex(panel.model.findData("easel-tiny"))
    assert not panel.frames.isVisible() and panel.params().kind == KIND_GENERATE
    panel.model.setCurrentIndex(panel.model.findData("wan-tiny"))
    assert panel.frames.isVisible() and panel.fps.isVisible()
    assert (panel.frames.text(), panel.fps.text(), panel.clip_length.text()) == (
        "81", "16", "5.1 s",
    )  # fmt: skip
    panel.frames.setText("33")
    params = panel.params()
    assert (params.kind, params.frames, params.fps, params.model) == (
        KIND_VIDEO,
        33,
        16,
        "wan-tiny",
    )
    assert panel.clip_length.text() == "2.1 s"
    panel.model.setCurrentIndex(panel.model.findData("easel-tiny"))  # back to an image model
    assert not panel.frames.isVisible() and panel.params().kind == KIND_GENERATE
    panel.set_params(GenerationParams("again", model="wan-tiny", kind=KIND_VIDEO, frames=9, fps=8))
    assert (panel.params().frames, panel.params().fps) == (9, 8)

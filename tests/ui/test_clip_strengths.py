"""The form's strengths of a clip's images, on a model that weighs them (LTX-Video 0.9.5+):
"Image strength" in img2img's Strength's place once an init image is in, a strength and a
frame beside the picked last frame; in the job the form makes (stock's elsewhere), a bad
value flagged in one sentence, stored with the clip through the queue service and shown
again for a reused job."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path

import pytest
from PIL import Image
from pytestqt.qtbot import QtBot

from app.engine.jobs.params import InvalidParameters
from app.engine.jobs.queue import JobQueue, params_of
from app.ui.presenters.model_choices import ModelChoice
from app.ui.presenters.queue_service import QueueService
from app.ui.widgets.prompt_panel import PromptPanel

FLF = ModelChoice(
    "flf-tiny", "Wan 2.1 FLF2V", 832, ((832, 480),), samplers=("UniPC", "Euler"),
    frame_step=4, default_frames=81, default_fps=16, takes_last_image=True,
)  # fmt: skip
LTX = replace(
    FLF, name="ltx-tiny", kind="LTX-Video 0.9.5+", frame_step=8, default_frames=17,
    default_fps=25, weighs_images=True,
)  # fmt: skip


def png_file(path: Path, colour: tuple[int, int, int]) -> Path:
    buffer = io.BytesIO()
    Image.new("RGB", (32, 32), colour).save(buffer, format="PNG")
    path.write_bytes(buffer.getvalue())
    return path


def test_the_form_weighs_a_clips_images_on_a_model_that_takes_strengths(
    qtbot: QtBot, tmp_path: Path, queue: JobQueue
) -> None:
    first = QueueService.prepare_init(png_file(tmp_path / "first.png", (200, 0, 0)), "first")
    last = png_file(tmp_path / "last.png", (0, 0, 200))
    panel = PromptPanel()
    qtbot.addWidget(panel)
    panel.show()
    panel.last_frame._ask_path = lambda _parent: last  # the file dialog's answer
    panel.set_models([FLF, LTX])
    panel.prompt.setPlainText("a fox")
    panel.model.setCurrentIndex(panel.model.findData("ltx-tiny"))
    panel.set_init(first)
    assert panel.image_strength.isVisible() and not panel.strength.isVisible()
    assert not panel.last_frame.strength.isVisible()  # no last frame picked yet
    panel.last_frame.choose.click()
    assert panel.last_frame.strength.isVisible()
    assert panel.last_frame.frame.isVisible() and panel.last_frame.frame.text() == ""
    panel.image_strength.setText("0.8")
    panel.last_frame.strength.setText("0.6")
    assert panel.params().last_image_frame == -1  # blank: the clip's last frame
    panel.last_frame.frame.setText("9")
    params = panel.params()
    assert (params.image_strength, params.last_image_strength) == (0.8, 0.6)
    assert params.last_image_frame == 9

    panel.last_frame.strength.setText("1.5")
    with pytest.raises(InvalidParameters, match="Last frame strength"):
        panel.params()
    panel.last_frame.strength.setText("0.6")

    panel.model.setCurrentIndex(panel.model.findData("flf-tiny"))  # full strength only
    assert panel.strength.isVisible() and not panel.image_strength.isVisible()
    assert not panel.last_frame.strength.isVisible() and not panel.last_frame.frame.isVisible()
    unweighed = panel.params()
    assert (unweighed.image_strength, unweighed.last_image_strength) == (1.0, 1.0)
    assert unweighed.last_image_frame == -1

    service = QueueService(opener=lambda: queue)
    outcome = service.submit(
        replace(params, width=32, height=32), init_png=first.png, last_png=panel.last_png()
    )
    assert outcome.errors == () and len(outcome.job_ids) == 1
    stored = params_of(queue.get(outcome.job_ids[0]))
    assert (stored.image_strength, stored.last_image_strength) == (0.8, 0.6)
    assert stored.last_image_frame == 9
    shown_again = PromptPanel()  # a reused job: its values back in the form
    qtbot.addWidget(shown_again)
    shown_again.set_params(stored)
    assert shown_again.image_strength.text() == "0.8"
    assert shown_again.last_frame.strength.text() == "0.6"
    assert shown_again.last_frame.frame.text() == "9"

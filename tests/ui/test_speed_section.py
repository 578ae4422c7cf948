"""The prompt panel's speed controls: what is chosen goes into the job, a job's (or a PNG's)
settings come back into them, they are remembered, and the threshold is only for a speed."""

from __future__ import annotations

from dataclasses import replace

from pytestqt.qtbot import QtBot

from app.engine.jobs.params import GenerationParams
from app.ui.widgets.prompt_panel import PromptPanel


def panel(qtbot: QtBot) -> PromptPanel:
    made = PromptPanel()
    qtbot.addWidget(made)
    made.prompt.setPlainText("a cat")
    return made


def test_the_speed_threshold_and_compile_go_into_the_job_and_come_back(qtbot: QtBot) -> None:
    form = panel(qtbot)
    speed = form.speed
    assert form.params().speed == "off" and not form.params().compile
    assert not speed.threshold.isEnabled() and speed.advanced.isHidden()
    speed.show_advanced.click()
    assert not speed.advanced.isHidden() and "SDPA" in speed.attention.text()
    speed.speed.setCurrentIndex(speed.speed.findData("fastest"))
    speed.threshold.setValue(0.3)
    speed.compile.setChecked(True)
    asked = form.params()
    assert (asked.speed, asked.speed_threshold, asked.compile) == ("fastest", 0.3, True)
    assert asked.validated().cache_threshold == 0.3
    remembered = form.remembered()
    form.set_params(GenerationParams(prompt="plain"))  # a job without: all back to off
    assert (form.params().speed, form.params().compile) == ("off", False)
    form.recall(remembered)
    assert form.params() == replace(asked, prompt=form.params().prompt)
    speed.speed.setCurrentIndex(speed.speed.findData("off"))  # no threshold without a speed
    assert form.params().speed_threshold == 0.0 and not speed.threshold.isEnabled()

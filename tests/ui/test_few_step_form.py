"""A few-step LoRA picked in the form (keys on the LoRA list): steps, CFG and sampler
change to its own, a note says why, its schedule goes with the job while its tag stays;
what the artist types afterwards wins (the rules: tests/engine/generation/test_few_step.py)."""

from __future__ import annotations

import json

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.engine.generation.prompts.few_step import QWEN_LIGHTNING_SCHEDULER
from app.engine.jobs.params import GenerationParams
from app.ui.presenters.model_choices import ModelChoice
from app.ui.widgets.prompt_panel import PromptPanel

QWEN = ModelChoice("qwen", "Qwen-Image", 1024, ((1024, 1024),), samplers=("Euler",))
LIGHTNING = "Qwen-Image-Lightning-8steps-V1.0"


def test_picking_a_lightning_lora_sets_its_settings_and_says_so(qtbot: QtBot) -> None:
    panel = PromptPanel()
    qtbot.addWidget(panel)
    panel.show()
    panel.set_models([QWEN])
    panel.set_loras([LIGHTNING, "ink_style"])
    qtbot.keyClicks(panel.prompt, "a sign that says EASEL ")
    panel.lora.setFocus()
    qtbot.keyClick(panel.lora, Qt.Key.Key_Down)  # the list's first LoRA
    assert panel.few_step_note.isVisible()
    assert panel.few_step_note.text() == (
        "Qwen-Image-Lightning 8-step LoRA: 8 steps, CFG 1, Euler with its own schedule"
    )
    params = panel.params()
    assert (params.steps, params.cfg, params.scheduler) == (8, 1.0, "Euler")
    assert json.loads(params.scheduler_config) == QWEN_LIGHTNING_SCHEDULER
    panel.steps.selectAll()
    qtbot.keyClicks(panel.steps, "4")  # the artist's own value wins
    assert panel.params().steps == 4 and panel.params().scheduler_config
    panel.prompt.setPlainText("a sign that says EASEL ")  # the tag is gone
    assert not panel.few_step_note.isVisible() and panel.params().scheduler_config == ""
    panel.lora.setCurrentIndex(1)
    qtbot.keyClick(panel.lora, Qt.Key.Key_Down)  # a plain LoRA changes nothing
    assert "<lora:ink_style:1>" in panel.prompt.toPlainText()
    assert not panel.few_step_note.isVisible() and panel.params().steps == 4


def test_a_reused_jobs_schedule_comes_back_with_it(qtbot: QtBot) -> None:
    panel = PromptPanel()
    qtbot.addWidget(panel)
    panel.show()
    panel.set_models([QWEN])
    schedule = '{"shift": 1.0}'
    job = GenerationParams(f"x <lora:{LIGHTNING}:1>", model="qwen", scheduler_config=schedule)
    panel.set_params(job)
    assert panel.params().scheduler_config == schedule and panel.few_step_note.isVisible()
    panel.set_params(GenerationParams("y", model="qwen"))
    assert panel.params().scheduler_config == "" and not panel.few_step_note.isVisible()


def test_a_hyper_flux_lora_says_the_weight_its_authors_use(qtbot: QtBot) -> None:
    panel = PromptPanel()
    qtbot.addWidget(panel)
    panel.show()
    panel.set_loras(["Hyper-FLUX.1-dev-8steps-lora"])
    panel.lora.setFocus()
    qtbot.keyClick(panel.lora, Qt.Key.Key_Down)
    assert panel.few_step_note.text() == (
        "Hyper-FLUX 8-step LoRA: 8 steps, CFG 3.5, Euler. Its authors use it at weight 0.125."
    )
    assert panel.params().scheduler_config == ""  # Flux's own schedule


def test_picking_a_distilled_ltx_video_sets_its_timesteps_and_guidance_and_says_so(
    qtbot: QtBot,
) -> None:
    """A distilled LTX-Video (0.9.7/0.9.8 distilled) picked by the artist: its 8 steps, CFG
    1 and timesteps, said in the note; the timesteps go with the job while its 8 steps stay,
    and the note goes with the model."""
    from app.engine.generation.prompts.few_step import LTX_DISTILLED_TIMESTEPS
    from app.ui.presenters.model_choices import FewStepModel

    schedule = json.dumps({"timesteps": LTX_DISTILLED_TIMESTEPS})
    few_step = FewStepModel("LTX-Video distilled", 8, 1.0, "Euler", schedule)
    distilled = ModelChoice("ltxv-13b-0.9.8-distilled", "LTX-Video 0.9.5+", 704,
                            ((704, 512),), samplers=("Euler",), few_step=few_step)  # fmt: skip
    panel = PromptPanel()
    qtbot.addWidget(panel)
    panel.show()
    panel.set_models([QWEN, distilled])
    panel.model.setCurrentIndex(1)
    panel.model.activated.emit(1)  # as the artist's pick
    assert panel.few_step_note.isVisible()
    assert panel.few_step_note.text() == (
        "LTX-Video distilled 8-step model: 8 steps, CFG 1, Euler with its own timesteps"
    )
    params = panel.params()
    assert (params.steps, params.cfg, params.scheduler_config) == (8, 1.0, schedule)
    panel.steps.selectAll()
    qtbot.keyClicks(panel.steps, "12")  # the family's own schedule of 12 steps
    assert panel.params().scheduler_config == ""
    panel.model.setCurrentIndex(0)
    assert not panel.few_step_note.isVisible()

"""An edit's PNG dropped on the window (or "Reuse"): its instruction comes back, and one
sentence says its further input images (Qwen-Image-Edit Plus) are not in the PNG, which
records only their hashes."""

from __future__ import annotations

from pathlib import Path

from PIL import Image
from pytestqt.qtbot import QtBot

from app.engine.jobs.params import KIND_EDIT, GenerationParams, encode_edit_images
from app.engine.outputs.image import write_png
from app.ui.presenters.model_choices import ModelChoice
from app.ui.presenters.png_params import read_png_params
from app.ui.widgets.prompt_panel import PromptPanel

PLUS = ModelChoice("plus", "Qwen-Image-Edit Plus", 1024, ((1024, 1024),), samplers=("Euler",))
FURTHER = "the edit's further input images are not in the PNG; add them again"


def edit_png(tmp_path: Path, further: int) -> Path:
    path = tmp_path / f"edit-{further}.png"
    more = encode_edit_images([f"upload:{n}" + "a" * 63 for n in range(further)])
    params = GenerationParams(
        "put the hat of picture 2 on the cat", model="plus", kind=KIND_EDIT,
        init_image="job:1", edit_images=more, steps=8, cfg=1.0, width=64, height=48,
    )  # fmt: skip
    write_png(Image.new("RGB", (64, 48)), path, params)
    return path


def test_an_edit_png_restores_its_instruction_and_says_its_further_pictures_are_not_in_it(
    tmp_path: Path,
) -> None:
    parsed = read_png_params(edit_png(tmp_path, 2), controlnets=[])
    restored = parsed.params
    assert (restored.prompt, restored.kind) == ("put the hat of picture 2 on the cat", KIND_EDIT)
    assert (restored.steps, restored.cfg, restored.edit_images) == (8, 1.0, "")
    assert parsed.warnings == [FURTHER]


def test_an_edit_of_one_picture_restores_without_that_sentence(tmp_path: Path) -> None:
    parsed = read_png_params(edit_png(tmp_path, 0), controlnets=[])
    assert parsed.params.prompt.startswith("put the hat") and parsed.warnings == []


def test_the_form_takes_the_instruction_and_its_message_says_the_pictures_are_not_in_it(
    qtbot: QtBot, tmp_path: Path
) -> None:
    panel = PromptPanel()
    qtbot.addWidget(panel)
    panel.set_models([PLUS])
    messages: list[str] = []
    panel.message.connect(messages.append)
    assert panel.load_png(edit_png(tmp_path, 2))
    assert panel.prompt.toPlainText() == "put the hat of picture 2 on the cat"
    assert messages == [f"Settings from edit-2.png; {FURTHER}"]

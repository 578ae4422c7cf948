"""Screenshot of the window's "Edit with words" dialog (docs/screenshots/edit-with-words.png):
a result's picture, the instruction typed with real key events, a Qwen-Image-Edit Plus model
picked (its own 50 steps and cfg 4 shown) with a second input picture added.

    xvfb-run -a .venv/bin/python packaging/edit_screenshots.py [--out docs/screenshots]

The picture is made with the bundled model in a subprocess (torch stays out of this, the
GUI's, process), through the same loop as a queued job, the second input picture likewise.
No edit is run: a real one needs Qwen-Image-Edit's or Kontext's weights, so the dialog is
shown as it is once the edit is queued.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ["EASEL_HOME"] = tempfile.mkdtemp(prefix="easel-edit-shots-")

from PySide6.QtGui import QImage  # noqa: E402
from PySide6.QtTest import QTest  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from app.ui.presenters.word_edits import EditModel  # noqa: E402
from app.ui.qt.theme import apply_theme  # noqa: E402
from app.ui.widgets.edit_dialog import EditDialog  # noqa: E402

SIZE = 256  # 4x the bundled model's side
PROMPT = "a red circle on a blue background"
MAKE = """
import sys
from pathlib import Path
from app.engine.generation.runner import Runner
from app.engine.generation.outcome import StepDecision
from app.engine.jobs.params import GenerationParams
work, prompt, size = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
runner = Runner(threads=2)
for name, text, seed in (("picture", prompt, 11), ("second", "a yellow hat", 12)):
    params = GenerationParams(text, steps=20, width=size, height=size, seed=seed)
    runner.run(params, output_path=work / f"{name}.png", checkpoint_path=work / f"{name}.ckpt",
        on_step=lambda _p: StepDecision.CONTINUE)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="easel-edit-"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", MAKE, str(work), PROMPT, str(SIZE)], check=True, env=env)
    app = QApplication(sys.argv)
    apply_theme(app)
    plus = EditModel("qwen-image-edit-2511", images=3, steps=50, cfg=4.0)
    models = [plus, "flux1-kontext-dev"]
    dialog = EditDialog(QImage(str(work / "picture.png")), f"Job 12: {PROMPT}", models, plus.name)
    dialog.resize(460, 700)
    dialog.show()
    QTest.qWaitForWindowExposed(dialog)
    dialog.add_input((work / "second.png").read_bytes())
    QTest.keyClicks(dialog.instruction, "put the hat of picture 2 on the circle, at night")
    dialog.queued(13)  # as the window says once the edit is queued
    app.processEvents()
    dialog.grab().save(str(args.out / "edit-with-words.png"))
    print(args.out / "edit-with-words.png")


if __name__ == "__main__":
    main()

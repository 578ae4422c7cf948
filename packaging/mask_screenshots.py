"""Screenshots of the mask editor (docs/screenshots/mask-editor.png) and of a finished
inpaint shown with the before/after toggle (mask-before-after.png).

    xvfb-run -a .venv/bin/python packaging/mask_screenshots.py [--out docs/screenshots]

The picture and the inpaint are made with the bundled model in a subprocess (torch stays
out of this, the GUI's, process), through the same loop as a queued job; the strokes are
painted with real mouse events.
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
os.environ["EASEL_HOME"] = tempfile.mkdtemp(prefix="easel-mask-shots-")

from PySide6.QtCore import QPointF, Qt  # noqa: E402
from PySide6.QtGui import QImage  # noqa: E402
from PySide6.QtTest import QTest  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from app.ui.qt.language import Language, use_language  # noqa: E402
from app.ui.qt.theme import apply_theme  # noqa: E402
from app.ui.widgets.mask_canvas import widget_point  # noqa: E402
from app.ui.widgets.mask_editor import MaskEditor  # noqa: E402

SIZE = 256  # 4x the bundled model's side: its upscale-sized canvas
PROMPT = "a red circle on a blue background"
MAKE = """
import sys
from pathlib import Path
from app.engine.generation.runner import Runner
from app.engine.generation.outcome import StepDecision
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.run_inputs import RunInputs
work, mask, prompt, size = Path(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
runner = Runner(threads=2)
go = lambda _p: StepDecision.CONTINUE
base = GenerationParams(prompt, steps=20, width=size, height=size, seed=11)
if mask == "-":
    runner.run(base, output_path=work / "before.png", checkpoint_path=work / "a.ckpt", on_step=go)
else:
    params = GenerationParams("a yellow square", steps=20, width=size, height=size,
        seed=12, init_image="job:1", strength=1.0, mask="upload:" + "0" * 64, mask_blur=4)
    inputs = RunInputs(init_image=(work / "before.png").read_bytes(), mask=Path(mask).read_bytes())
    runner.run(params, inputs, output_path=work / "after.png", checkpoint_path=work / "b.ckpt",
        on_step=go)
"""


def _engine(work: Path, mask: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run(
        [sys.executable, "-c", MAKE, str(work), mask, PROMPT, str(SIZE)], check=True, env=env
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="easel-mask-"))
    _engine(work, "-")
    app = QApplication(sys.argv)
    apply_theme(app)
    editor = MaskEditor(QImage(str(work / "before.png")), "a yellow square")
    editor.resize(1100, 720)
    editor.show()
    QTest.qWaitForWindowExposed(editor)
    editor.canvas.fit()
    editor.canvas.set_brush_size(44)
    editor.size_slider.setValue(44)
    editor.strength.setValue(1.0)  # as the inpaint below is made
    canvas = editor.canvas
    for y in range(80, 180, 20):  # scribble over the middle, as a hand would
        points = [widget_point(canvas, QPointF(x, y + (x % 40) / 4)) for x in range(70, 190, 8)]
        QTest.mousePress(
            canvas, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, points[0]
        )
        for point in points[1:]:
            QTest.mouseMove(canvas, point)
        QTest.mouseRelease(
            canvas, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, points[-1]
        )
    app.processEvents()
    editor.grab().save(str(args.out / "mask-editor.png"))
    (work / "mask.png").write_bytes(canvas.mask_png())
    _engine(work, str(work / "mask.png"))
    editor.set_result(QImage(str(work / "after.png")))
    app.processEvents()
    editor.grab().save(str(args.out / "mask-before-after.png"))
    use_language(Language.CHINESE)  # the same editor, made again in Chinese
    chinese = MaskEditor(QImage(str(work / "before.png")), "a yellow square")
    chinese.resize(1100, 720)
    chinese.show()
    QTest.qWaitForWindowExposed(chinese)
    chinese.canvas.fit()
    chinese.canvas.load_mask(canvas.mask_image())
    chinese.set_result(QImage(str(work / "after.png")))
    chinese.before_after.setChecked(False)
    app.processEvents()
    chinese.grab().save(str(args.out / "mask-editor-zh_CN.png"))
    for name in ("mask-editor.png", "mask-before-after.png", "mask-editor-zh_CN.png"):
        print(args.out / name)


if __name__ == "__main__":
    main()

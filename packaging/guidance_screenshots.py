"""Screenshots of the prompt panel's Control section (docs/screenshots/control*.png), in
English and Chinese: two control layers (canny of a drawing, a scribble) and a reference.

    xvfb-run -a .venv/bin/python packaging/guidance_screenshots.py [FOLDER [PREFIX]]

(FOLDER: docs/screenshots by default; PREFIX is put before each file's name.)
"""

from __future__ import annotations

import io
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from PIL import Image, ImageDraw
from PySide6.QtWidgets import QApplication, QVBoxLayout

from app.ui.qt.language import Language, use_language
from app.ui.qt.theme import apply_theme

OUT = Path(__file__).resolve().parents[1] / "docs" / "screenshots"


def drawing(kind: str) -> bytes:
    image = Image.new("RGB", (128, 128), (238, 232, 220))
    pen = ImageDraw.Draw(image)
    if kind == "figure":
        pen.ellipse((48, 10, 80, 42), outline=(30, 30, 30), width=3)
        pen.line([(64, 42), (64, 92), (40, 124)], fill=(30, 30, 30), width=3)
        pen.line([(64, 92), (88, 124)], fill=(30, 30, 30), width=3)
        pen.line([(30, 60), (64, 52), (100, 40)], fill=(30, 30, 30), width=3)
    elif kind == "sketch":
        pen.arc((10, 30, 118, 140), 200, 340, fill=(60, 60, 60), width=4)
        pen.line([(20, 100), (108, 100)], fill=(60, 60, 60), width=4)
    else:
        for i in range(8):
            pen.rectangle((i * 16, 0, i * 16 + 15, 127), fill=(40 + 25 * i, 80, 200 - 20 * i))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def shot(name: str, out: Path = OUT) -> None:
    from app.ui.widgets.guidance_section import GuidanceSection
    from app.ui.widgets.prompt_panel import PromptPanel

    panel = PromptPanel()
    section = GuidanceSection(
        controlnets=lambda: ["control_v11p_sd15_canny", "control_v11p_sd15_scribble"],
        adapters=lambda: ["ip-adapter_sd15"],
    )
    layout = panel.layout()
    assert isinstance(layout, QVBoxLayout)
    layout.insertWidget(layout.indexOf(panel.reset) + 1, section)
    panel.prompt.setPlainText("a dancer on a rooftop at dusk, oil painting")
    section.unfold()
    first = section.controls.add(drawing("figure"), "canny")
    first.weight.setValue(0.8)
    second = section.controls.add(drawing("sketch"), "scribble")
    second.model.setCurrentIndex(1)
    second.end.setValue(0.6)
    second.start.setValue(0.1)
    section.references.add(drawing("style"))
    section.references.rows[0].weight.setValue(0.6)
    section.references.add(drawing("figure"))
    section.references.rows[1].weight.setValue(0.35)
    panel.resize(460, 1500)
    panel.show()
    QApplication.processEvents()
    out.mkdir(parents=True, exist_ok=True)
    panel.grab().save(str(out / name))
    print(f"saved {out / name}")
    panel.close()


def main() -> int:
    with tempfile.TemporaryDirectory() as home:
        import os

        os.environ["EASEL_HOME"] = home
        app = QApplication(sys.argv)
        apply_theme(app)
        out = Path(sys.argv[1]) if len(sys.argv) > 1 else OUT
        prefix = sys.argv[2] if len(sys.argv) > 2 else ""
        shot(f"{prefix}control.png", out)
        use_language(Language.CHINESE)
        shot(f"{prefix}control-zh_CN.png", out)
        del app
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Does the mask editor keep up while painting on a big picture?

    xvfb-run -a .venv/bin/python benchmarks/mask_editor.py [--side 2048] [--seconds 3]

Opens the mask editor on a `--side` x `--side` picture and paints strokes with real mouse
events (press, a move every 8 ms as a 125 Hz mouse sends them, release; a new stroke,
with its undo snapshot, every 60 moves) while a 10 ms precise QTimer measures how late the
event loop serves it. Prints `mask_editor_max_stall_ms` (goal: 16) and
`mask_editor_p99_stall_ms`. Run from benchmarks/generation.py too (in a subprocess, with
the offscreen platform when there is no display).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TICK_MS, MOVE_MS, MOVES_PER_STROKE = 10, 8, 60


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--side", type=int, default=2048)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    if not os.environ.get("DISPLAY") and not os.environ.get("QT_QPA_PLATFORM"):
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
    delays = measure(args.side, args.seconds)
    print(f"mask_editor_max_stall_ms: {delays[-1]:.1f}")
    print(f"mask_editor_p99_stall_ms: {delays[int(len(delays) * 0.99) - 1]:.1f}")


def measure(side: int, seconds: float) -> list[float]:
    import numpy as np
    from PySide6.QtCore import QElapsedTimer, QPointF, Qt, QTimer
    from PySide6.QtGui import QImage
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QApplication

    from app.ui.widgets.mask_canvas import widget_point
    from app.ui.widgets.mask_editor import MaskEditor

    app = QApplication.instance() or QApplication(sys.argv)
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, size=(side, side, 4), dtype=np.uint8)
    picture = QImage(pixels.data, side, side, side * 4, QImage.Format.Format_RGB32).copy()
    editor = MaskEditor(picture, "a cat")
    editor.resize(1100, 760)
    editor.show()
    QTest.qWaitForWindowExposed(editor)
    canvas = editor.canvas
    canvas.fit()
    canvas.set_brush_size(side // 24)
    app.processEvents()
    moves = 0
    pressed = False

    def point(index: int) -> QPointF:
        t = index / MOVES_PER_STROKE
        row = (index // MOVES_PER_STROKE) % 8
        x = side * (0.1 + 0.8 * t)
        y = side * (0.1 + 0.1 * row) + side * 0.04 * math.sin(t * 12)
        return QPointF(x, y)

    def move() -> None:
        nonlocal moves, pressed
        at = widget_point(canvas, point(moves))
        no = Qt.KeyboardModifier.NoModifier
        if not pressed:
            QTest.mousePress(canvas, Qt.MouseButton.LeftButton, no, at)
            pressed = True
        elif (moves + 1) % MOVES_PER_STROKE == 0:
            QTest.mouseRelease(canvas, Qt.MouseButton.LeftButton, no, at)
            pressed = False
        else:
            QTest.mouseMove(canvas, at)
        moves += 1

    clock = QElapsedTimer()
    delays: list[float] = []
    last = [0.0]

    def tick() -> None:
        now = clock.nsecsElapsed() / 1e6
        delays.append(max(0.0, now - last[0] - TICK_MS))
        last[0] = now

    ticker = QTimer(timerType=Qt.TimerType.PreciseTimer, interval=TICK_MS)
    ticker.timeout.connect(tick)
    mover = QTimer(timerType=Qt.TimerType.PreciseTimer, interval=MOVE_MS)
    mover.timeout.connect(move)
    clock.start()
    ticker.start()
    mover.start()
    QTimer.singleShot(round(seconds * 1000), app.quit)
    app.exec()
    mover.stop()
    ticker.stop()
    assert not canvas.is_empty(), "the strokes painted nothing"
    editor.close()
    return sorted(delays[1:])  # the first tick measures the start, not a stall


if __name__ == "__main__":
    main()

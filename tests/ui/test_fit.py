"""The window fits a laptop (issue 28.1): at 1366x768 and 1920x1080, in English and Chinese,
every button shows whole inside the window, and the dividers move under a real mouse drag."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from PySide6.QtCore import QEvent, QPoint, QPointF, QRect, Qt
from PySide6.QtGui import QMouseEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QAbstractButton, QApplication, QScrollArea, QSplitter, QWidget
from pytestqt.qtbot import QtBot

from app.ui.presenters.actions import Action
from app.ui.qt.language import Language, use_language
from app.ui.widgets.window import MainWindow

pytestmark = pytest.mark.timeout(120)

LAPTOP, DESKTOP = (1366, 768), (1920, 1080)
GOAL_WIDTH = 1280


@pytest.fixture(params=[Language.ENGLISH, Language.CHINESE], ids=["en", "zh_CN"])
def language(request: pytest.FixtureRequest, qapp: object) -> Iterator[Language]:
    assert use_language(request.param) is request.param
    yield request.param
    use_language(Language.ENGLISH)


def in_scroll_area(widget: QWidget) -> QScrollArea | None:
    parent = widget.parentWidget()
    while parent is not None:
        if isinstance(parent, QScrollArea):
            return parent
        parent = parent.parentWidget()
    return None


def clipped_buttons(window: MainWindow) -> list[str]:
    """Buttons shown cut: outside the window, narrower than their text, or (in the form's
    scroll area) not inside the area's width."""
    inside = window.rect()
    found = []
    for button in window.findChildren(QAbstractButton):
        if not button.isVisibleTo(window) or button.parentWidget() is None:
            continue
        name = f"{type(button).__name__} {button.text()!r}"
        if button.width() < button.minimumSizeHint().width():
            found.append(f"{name}: {button.width()} px < {button.minimumSizeHint().width()}")
        area = in_scroll_area(button)
        top_left = button.mapTo(window, QPoint(0, 0))
        rect = QRect(top_left, button.size())
        if area is not None:  # scrolled into view, it is reachable; its width must fit
            area.ensureWidgetVisible(button)
            QApplication.processEvents()
            seen = QRect(area.viewport().mapTo(window, QPoint(0, 0)), area.viewport().size())
            rect = QRect(button.mapTo(window, QPoint(0, 0)), button.size())
            if not seen.contains(rect):
                found.append(f"{name} not reachable in the form at {rect}")
        elif not inside.contains(rect):
            found.append(f"{name} at {rect} outside the window {inside}")
    return found


@pytest.mark.parametrize("size", [LAPTOP, DESKTOP], ids=["1366x768", "1920x1080"])
def test_everything_fits(
    language: Language, size: tuple[int, int], make_window: Callable[..., MainWindow],
    qtbot: QtBot,
) -> None:  # fmt: skip
    window = make_window()
    hint = window.minimumSizeHint()
    assert hint.width() <= GOAL_WIDTH, hint
    assert hint.height() <= size[1] - 60, hint  # a title bar and a task bar left over
    window.resize(*size)
    qtbot.waitUntil(lambda: window.width() == size[0] and window.height() == size[1])
    QApplication.processEvents()
    assert clipped_buttons(window) == []
    # Every action of the image and the job list is on screen (wrapped, not folded away).
    for button in [*window.image.follow_ups.values(), window.image.reuse, window.image.more,
                   window.image.show_in_folder, *window.jobs.buttons.values()]:  # fmt: skip
        if button is window.jobs.buttons[Action.UNDO]:
            continue  # shown only while a cancel can be undone
        assert button.isVisibleTo(window), button.text()
    # Seed, copy, pixels: folded, not lost (a clip's actions join them only under a clip).
    actions = window.image.more_menu.actions()
    menu = [a.text() for a in actions if a.isVisible() and not a.isSeparator()]
    assert len(menu) == 3 and all(menu), menu
    # The job list's prompt gets real room: at least a third of the list's width.
    table = window.jobs.table
    assert table.columnWidth(1) >= table.viewport().width() // 3


def drag(handle: QWidget, by: int) -> None:
    """A real press, move and release on a splitter handle."""
    start = QPoint(handle.width() // 2, handle.height() // 2)
    QTest.mousePress(handle, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, start)
    for x in range(0, by + (1 if by > 0 else -1), 10 if by > 0 else -10):
        point = QPointF(start + QPoint(x, 0))
        move = QMouseEvent(
            QEvent.Type.MouseMove, point, handle.mapToGlobal(point),
            Qt.MouseButton.NoButton, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
        )  # fmt: skip
        QApplication.sendEvent(handle, move)
    QTest.mouseRelease(
        handle, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, start + QPoint(by, 0)
    )


def test_the_dividers_move_on_a_laptop(
    language: Language, make_window: Callable[..., MainWindow], qtbot: QtBot
) -> None:
    window = make_window()
    window.resize(*LAPTOP)
    qtbot.waitUntil(lambda: window.width() == LAPTOP[0])
    main = window.findChild(QSplitter, "main")
    assert main is not None
    before = main.sizes()
    drag(main.handle(2), -120)  # the job list wider, the image narrower
    after = main.sizes()
    assert after[2] > before[2] + 60 and after[1] < before[1] - 60, (before, after)
    drag(main.handle(1), -60)  # the form narrower... as far as its minimum lets it
    assert main.sizes()[0] <= after[0]
    assert clipped_buttons(window) == []

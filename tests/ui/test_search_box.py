"""The search box announces a valid search once typing pauses, and refuses malformed text."""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from app.ui.widgets.search_box import SearchBox


def test_typing_announces_the_search_once_after_the_last_key(qtbot: QtBot) -> None:
    box = SearchBox()
    qtbot.addWidget(box)
    seen: list[str] = []
    box.searchChanged.connect(seen.append)
    with qtbot.waitSignal(box.searchChanged, timeout=2000):
        qtbot.keyClicks(box, "red circle")
    assert seen == ["red circle"]  # not one search per key


def test_an_unclosed_quote_marks_the_box_and_announces_nothing(qtbot: QtBot) -> None:
    box = SearchBox()
    qtbot.addWidget(box)
    seen: list[str] = []
    box.searchChanged.connect(seen.append)
    qtbot.keyClicks(box, '"red circle')
    qtbot.waitUntil(lambda: bool(box.toolTip()), timeout=2000)
    assert "quote that is never closed" in box.toolTip()
    assert box.property("invalid") is True and seen == []

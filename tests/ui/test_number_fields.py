"""Numeric inputs never lie (issue 16.1): typed with real key events, checked in the store.

Each field keeps every key typed, shows its range beside it, says in red what is wrong, and
Generate queues exactly the numbers on screen (read back from the real SQLite queue) or
queues nothing and says why.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.engine.jobs.queue import JobQueue
from app.ui.presenters import number_rules as rules
from app.ui.widgets.number_field import FieldNote, NumberEdit
from app.ui.widgets.window import MainWindow
from tests.ui.fakes import FakeWorkers

pytestmark = pytest.mark.timeout(60)

TIMEOUT_MS = 5000
CTRL = Qt.KeyboardModifier.ControlModifier


# --- the rules (no Qt) -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "text", "value"),
    [(rules.STEPS, "37", 37), (rules.STEPS, " 150 ", 150), (rules.CFG, "6.5", 6.5),
     (rules.CFG, ".5", 0.5), (rules.WIDTH, "320", 320), (rules.SEED, "", None),
     (rules.SEED, "4294967295", 4294967295), (rules.IMAGES, "16", 16)],
)  # fmt: skip
def test_a_usable_number_reads_as_itself(rule: rules.NumberRule, text: str, value: object) -> None:
    reading = rule.read(text)
    assert reading.ok and reading.value == value


@pytest.mark.parametrize(
    ("rule", "text", "problem", "short"),
    [(rules.STEPS, "999", "Steps must be between 1 and 150, not 999", "max 150"),
     (rules.STEPS, "0", "Steps must be between 1 and 150, not 0", "min 1"),
     (rules.STEPS, "", "Steps is empty: type a number from 1 to 150", "empty"),
     (rules.STEPS, "1_000", "Steps must be a whole number, not '1_000'", "not a number"),
     (rules.STEPS, "7.5", "Steps must be a whole number, not '7.5'", "not a number"),
     (rules.CFG, "31", "CFG must be between 0 and 30, not 31", "max 30"),
     (rules.CFG, "7.555", "CFG takes at most 2 decimals, not 7.555", "2 decimals max"),
     (rules.CFG, "nan", "CFG must be a number, not 'nan'", "not a number"),
     (rules.WIDTH, "513", "Width must be a multiple of 8, not 513", "×8 only"),
     (rules.IMAGES, "20", "Images must be between 1 and 16, not 20", "max 16"),
     (rules.SEED, "99999999999", "Seed must be between 0 and 4294967295, not 99999999999",
      "max 4294967295")],
)  # fmt: skip
def test_an_unusable_number_says_why(
    rule: rules.NumberRule, text: str, problem: str, short: str
) -> None:
    assert rule.read(text) == rules.Reading(problem=problem, short=short)


def test_ranges_read_as_the_engine_checks_them() -> None:
    assert [r.range_text() for r in (rules.STEPS, rules.CFG, rules.WIDTH, rules.IMAGES)] == [
        "1–150", "0–30", "32–2048, ×8", "1–16"
    ]  # fmt: skip


# --- the form, typed into ----------------------------------------------------------------------


@pytest.fixture
def window(
    qtbot: QtBot, make_window: Callable[..., MainWindow], workers: FakeWorkers
) -> MainWindow:
    workers.claiming = False  # jobs stay PENDING with the parameters they were submitted with
    window = make_window()
    with qtbot.waitActive(window):  # window shortcuts only fire in the active window
        window.activateWindow()
    qtbot.keyClicks(window.prompt.prompt, "a lighthouse")
    return window


def retype(qtbot: QtBot, edit: NumberEdit, text: str) -> None:
    """Click into the field, select what is there, and type over it, key by key."""
    qtbot.mouseClick(edit, Qt.MouseButton.LeftButton)
    qtbot.keyClick(edit, Qt.Key.Key_A, CTRL)
    if text:
        qtbot.keyClicks(edit, text)
    else:
        qtbot.keyClick(edit, Qt.Key.Key_Delete)


def ctrl_enter(qtbot: QtBot, window: MainWindow) -> None:
    focused = QApplication.focusWidget() or window.prompt.prompt
    qtbot.keyClick(focused, Qt.Key.Key_Return, CTRL)


def note_of(window: MainWindow, edit: NumberEdit) -> FieldNote:
    return next(n for n in window.prompt.findChildren(FieldNote) if edit in n._edits)


def submitted(queue: JobQueue) -> list:
    return queue.jobs()


def test_every_number_field_shows_its_range(window: MainWindow) -> None:
    p = window.prompt
    shown = {edit.rule.name: note_of(window, edit).text() for edit in p.number_fields()}
    # The seed's range is in its tooltip: beside it, only what is wrong (it made the form wide).
    assert shown == {"Steps": "1–150", "CFG": "0–30", "Seed": "",
                     "Width": "32–2048, ×8", "Height": "32–2048, ×8", "Images": "1–16"}  # fmt: skip
    assert p.seed.placeholderText() == "random"


@pytest.mark.parametrize(
    ("field", "typed", "problem"),
    [("steps", "999", "Steps must be between 1 and 150, not 999"),
     ("steps", "200", "Steps must be between 1 and 150, not 200"),
     ("steps", "0", "Steps must be between 1 and 150, not 0"),
     ("count", "20", "Images must be between 1 and 16, not 20"),
     ("cfg", "45", "CFG must be between 0 and 30, not 45"),
     ("width_box", "1004", "Width must be a multiple of 8, not 1004"),
     ("height_box", "4096", "Height must be between 32 and 2048, not 4096"),
     ("seed", "12x", "Seed must be a whole number, not '12x'")],
)  # fmt: skip
def test_a_bad_number_stays_on_screen_is_flagged_and_queues_nothing(
    qtbot: QtBot, window: MainWindow, queue: JobQueue, field: str, typed: str, problem: str
) -> None:
    edit: NumberEdit = getattr(window.prompt, field)
    retype(qtbot, edit, typed)
    assert edit.text() == typed  # no key dropped
    note = note_of(window, edit)
    assert note.property("invalid") is True and edit.property("invalid") is True
    assert note.toolTip() == problem and note.text() != edit.rule.range_text()
    ctrl_enter(qtbot, window)
    qtbot.waitUntil(window.error_banner.isVisible, timeout=TIMEOUT_MS)
    assert window.error_banner.label.text() == f"Not queued: {problem}"
    assert QApplication.focusWidget() is edit  # the cursor goes to what needs fixing
    assert submitted(queue) == []
    edit.clearFocus()  # leaving the field keeps what was typed (no fallback to an old value)
    assert edit.text() == typed


def test_zero_steps_then_ctrl_enter_does_not_queue_the_previous_value(
    qtbot: QtBot, window: MainWindow, queue: JobQueue
) -> None:
    retype(qtbot, window.prompt.steps, "99")
    retype(qtbot, window.prompt.steps, "0")
    ctrl_enter(qtbot, window)
    qtbot.waitUntil(window.error_banner.isVisible, timeout=TIMEOUT_MS)
    assert submitted(queue) == [] and window.prompt.steps.text() == "0"


def test_an_emptied_field_is_refused_not_refilled(
    qtbot: QtBot, window: MainWindow, queue: JobQueue
) -> None:
    retype(qtbot, window.prompt.steps, "")
    qtbot.keyClick(window.prompt.steps, Qt.Key.Key_Tab)  # leave the field
    assert window.prompt.steps.text() == ""
    assert note_of(window, window.prompt.steps).text() == "empty"
    ctrl_enter(qtbot, window)
    qtbot.waitUntil(window.error_banner.isVisible, timeout=TIMEOUT_MS)
    assert "Steps is empty" in window.error_banner.label.text()
    assert submitted(queue) == []


def test_generate_queues_exactly_what_is_typed(
    qtbot: QtBot, window: MainWindow, queue: JobQueue
) -> None:
    p = window.prompt
    for edit, text in ((p.steps, "37"), (p.cfg, "6.25"), (p.seed, "1234"),
                       (p.width_box, "320"), (p.height_box, "448"), (p.count, "2")):  # fmt: skip
        retype(qtbot, edit, text)
    assert p.generate.text() == "Generate 2 images"
    qtbot.mouseClick(p.generate, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(submitted(queue)) == 2, timeout=TIMEOUT_MS)
    jobs = sorted(submitted(queue), key=lambda job: job.seed)
    assert [(j.steps, j.cfg, j.width, j.height, j.seed) for j in jobs] == [
        (37, 6.25, 320, 448, 1234), (37, 6.25, 320, 448, 1235)
    ]  # fmt: skip
    assert not window.error_banner.isVisible()


def test_fixing_the_number_clears_the_flag_and_then_queues(
    qtbot: QtBot, window: MainWindow, queue: JobQueue
) -> None:
    retype(qtbot, window.prompt.count, "20")
    qtbot.keyClick(window.prompt.count, Qt.Key.Key_Backspace)  # "2"
    note = note_of(window, window.prompt.count)
    assert note.property("invalid") is False and note.text() == "1–16"
    ctrl_enter(qtbot, window)
    qtbot.waitUntil(lambda: len(submitted(queue)) == 2, timeout=TIMEOUT_MS)


def test_arrow_keys_step_inside_the_range(qtbot: QtBot, window: MainWindow) -> None:
    steps, width = window.prompt.steps, window.prompt.width_box
    retype(qtbot, steps, "149")
    qtbot.keyClick(steps, Qt.Key.Key_Up)
    qtbot.keyClick(steps, Qt.Key.Key_Up)
    assert steps.text() == "150"
    retype(qtbot, steps, "999")
    qtbot.keyClick(steps, Qt.Key.Key_Down)  # from out of range to the nearest usable value
    assert steps.text() == "150"
    retype(qtbot, width, "512")
    qtbot.keyClick(width, Qt.Key.Key_Up)
    assert width.text() == "520"
    qtbot.keyClick(width, Qt.Key.Key_PageDown)
    assert width.text() == "440"

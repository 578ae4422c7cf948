"""The Chinese window: every string of the code is translated, and none is left in English.

The .ts is the translation source the Makefile keeps (`make translations`); these tests check
that it covers every string the code marks, that the committed .qm says the same, and that
a window switched to zh_CN shows no English beyond names (Easel, CFG, keys, model names).
"""

from __future__ import annotations

import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QLocale, QModelIndex, QSettings, Qt
from PySide6.QtWidgets import (
    QAbstractButton,
    QComboBox,
    QLabel,
    QLineEdit,
    QMenu,
    QPlainTextEdit,
    QTableView,
    QTreeView,
    QWidget,
)
from pytestqt.qtbot import QtBot

from app.engine.generation.files.registry import families
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.workers.worker_states import WorkerRequest, WorkerState, WorkerSummary
from app.ui.presenters import i18n
from app.ui.presenters.timeline_words import plain_words
from app.ui.qt.language import (
    I18N_DIR,
    LANGUAGE_KEY,
    Language,
    chosen_language,
    effective_language,
    use_language,
)
from app.ui.widgets.empty_views import EmptyListView, EmptyTableView
from app.ui.widgets.settings_dialog import SettingsDialog
from app.ui.widgets.window import MainWindow
from app.ui.widgets.workers_panel import WorkersPanel

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]
TS = I18N_DIR / "easel_zh_CN.ts"
QM = I18N_DIR / "easel_zh_CN.qm"
TOOLS = Path(sys.executable).parent

# Names that stay as they are in Chinese: the app, keys, file kinds, the CFG setting, the
# model, family and sampler names the user picks (data, not words of the interface) and the
# name of the step cache diffusers gives it.
# Longest first: "Qwen-Image-Edit Plus" whole, not "Qwen-Image" and two English words.
FAMILY_LABELS = "|".join(
    re.escape(label) for label in sorted({spec.label for spec in families()}, key=len, reverse=True)
)
KEEP = re.compile(
    r"Ctrl\+(?:Up|Down)|Easel|CFG|LoRA|lora/|A1111|PNG|GIF|WebP"
    r"|Ctrl|Enter|Shift|Page ?Up|Page ?Down|F\d+"
    r"|easel-tiny|other-model|SD 1\.x v-prediction|SDXL"  # model names and kinds: data
    r"|Euler a|Euler|DPM\+\+ 2M|DDIM|PNDM|LMS|Heun|UniPC|DEIS|LCM|First Block Cache|"
    + FAMILY_LABELS
)
ENGLISH_WORD = re.compile(r"[A-Za-z]{2,}")


def english_left(text: str) -> list[str]:
    """The English words in `text` once names and markup are taken out."""
    plain = re.sub(r"<[^>]+>", " ", text).replace("&nbsp;", " ").replace("&", "")
    return ENGLISH_WORD.findall(KEEP.sub(" ", plain))


def messages(ts: Path) -> dict[tuple[str, str], str | None]:
    """(context, source) -> translation (None: unfinished) of a .ts file."""
    found: dict[tuple[str, str], str | None] = {}
    for context in ET.parse(ts).getroot().iter("context"):
        name = context.findtext("name") or ""
        for message in context.iter("message"):
            translation = message.find("translation")
            done = translation is not None and translation.get("type") != "unfinished"
            text = translation.text if translation is not None else None
            found[(name, message.findtext("source") or "")] = text if done else None
    return found


def lupdate(ts: Path) -> None:
    sources = sorted(str(p) for p in (ROOT / "app" / "ui").rglob("*.py"))
    subprocess.run(
        [str(TOOLS / "pyside6-lupdate"), "-no-obsolete", "-locations", "none", *sources,
         "-ts", str(ts)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip


def test_every_marked_string_has_a_chinese_translation(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh.ts"
    fresh.write_bytes(TS.read_bytes())
    lupdate(fresh)  # what the code marks today, merged into the committed translations
    found = messages(fresh)
    assert len(found) > 200  # not vacuous: the window's strings were collected
    untranslated = [key for key, text in found.items() if not text]
    assert not untranslated, f"run `make translations` and translate: {untranslated}"
    assert messages(TS) == found, "the .ts is out of date: run `make translations`"


def test_the_committed_qm_is_built_from_the_ts(tmp_path: Path) -> None:
    built = tmp_path / "easel_zh_CN.qm"
    subprocess.run(
        [str(TOOLS / "pyside6-lrelease"), str(TS), "-qm", str(built)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    assert built.read_bytes() == QM.read_bytes(), "run `make translations` and commit the .qm"


def test_translations_keep_their_placeholders() -> None:
    for (context, source), text in messages(TS).items():
        wanted = sorted(re.findall(r"\{\w*\}", source))
        assert sorted(re.findall(r"\{\w*\}", text or "")) == wanted, (context, source, text)


def test_the_system_locale_picks_the_language() -> None:
    assert effective_language(Language.SYSTEM, QLocale("zh_CN")) is Language.CHINESE
    assert effective_language(Language.SYSTEM, QLocale("zh_TW")) is Language.CHINESE
    assert effective_language(Language.SYSTEM, QLocale("de_DE")) is Language.ENGLISH
    assert effective_language(Language.ENGLISH, QLocale("zh_CN")) is Language.ENGLISH
    assert effective_language(Language.CHINESE, QLocale("en_US")) is Language.CHINESE


@pytest.fixture
def chinese(qapp: object) -> Iterator[None]:
    assert use_language(Language.CHINESE) is Language.CHINESE
    yield
    use_language(Language.ENGLISH)


def visible_texts(window: MainWindow) -> list[tuple[str, str]]:
    """(where, text) for what the window shows: labels, buttons, placeholders, tooltips,
    menus and their actions, column headers, the empty-view hints."""
    texts: list[tuple[str, str]] = [("title", window.windowTitle())]
    for widget in window.findChildren(QWidget):
        if not widget.isVisibleTo(window):
            continue
        kind = type(widget).__name__
        texts.append((f"{kind} tooltip", widget.toolTip()))
        if isinstance(widget, QLabel | QAbstractButton):
            texts.append((kind, widget.text()))
        if isinstance(widget, QLineEdit | QPlainTextEdit):
            texts.append((f"{kind} placeholder", widget.placeholderText()))
        if isinstance(widget, EmptyTableView | EmptyListView):
            texts.append((f"{kind} empty", widget.empty_text))
        if isinstance(widget, QComboBox) and widget is window.prompt.size_preset:
            texts += [("size", widget.itemText(i)) for i in range(widget.count())]
        if isinstance(widget, QTableView | QTreeView) and (model := widget.model()) is not None:
            for col in range(model.columnCount(QModelIndex())):
                header = model.headerData(col, Qt.Orientation.Horizontal)
                texts.append((f"{kind} header", str(header or "")))
    for menu in window.menuBar().findChildren(QMenu):
        texts.append(("menu", menu.title()))
        for action in menu.actions():
            texts += [("action", action.text()), ("action tooltip", action.toolTip())]
    texts.append(("image placeholder", window.image.canvas.placeholder))
    return texts


def test_the_chinese_window_shows_no_english(
    chinese: None, make_window: Callable[..., MainWindow], queue: JobQueue, qtbot: QtBot
) -> None:
    job_id = queue.submit(GenerationParams(prompt="a lighthouse"))
    window = make_window()
    qtbot.waitUntil(lambda: window.vm.jobs.row_of(job_id) is not None, timeout=20_000)
    window.jobs.select_jobs([job_id])
    qtbot.waitUntil(lambda: window.timeline.model.rowCount() > 0, timeout=20_000)
    texts = visible_texts(window)
    model = window.vm.jobs
    texts += [(f"cell {col}", str(model.index(0, col).data() or "")) for col in range(2, 7)]
    timeline = window.timeline.model
    attempt = timeline.index(0, 0)
    texts += [("timeline", str(timeline.index(r, 1, attempt).data())) for r in range(1)]
    texts += [("attempt", str(timeline.index(0, c).data())) for c in range(2)]
    assert sum("生成" in text for _where, text in texts) >= 1  # Chinese is really on
    left = [(where, text) for where, text in texts if english_left(text)]
    assert not left, left


def test_the_check_finds_english() -> None:
    assert english_left("生成 3 张图像") == []
    assert english_left("<b>Ctrl+Enter</b> 生成 · CFG 7") == []
    assert english_left("排队中 · 20 steps") == ["steps"]


def test_english_is_back_after_switching(qapp: object) -> None:
    use_language(Language.CHINESE)
    assert i18n.translate("Filter", "All") == "全部"
    use_language(Language.ENGLISH)
    assert i18n.translate("Filter", "All") == "All"


def test_presenters_speak_chinese_through_the_hook(chinese: None) -> None:
    from app.engine.jobs.states import JobEvent, JobStatus
    from app.ui.presenters.rows import TransitionRow

    row = TransitionRow(1, 1, JobStatus.PROCESSING, JobStatus.PAUSING, JobEvent.PAUSE, "user",
                        "", 0.0)  # fmt: skip
    assert plain_words(row) == "由你请求暂停；工作进程会在当前步骤完成后停下"


def test_the_automatic_prune_speaks_chinese(chinese: None) -> None:
    from app.engine.history.auto_prune import Pruned
    from app.ui.wiring import prune_note

    note = prune_note(Pruned(removed=120, freed_bytes=12_000_000, days=30, keep=500))
    assert note == "已删除超过 30 天或最新 500 个之外的 120 个已完成的任务；释放了 12 MB"
    one = prune_note(Pruned(removed=1, freed_bytes=400_000, days=1, keep=0))
    assert one == "已删除超过 1 天的 1 个已完成的任务；释放了 0.4 MB"


def test_settings_offer_the_language(qtbot: QtBot, tmp_path: Path) -> None:
    from app.engine.settings import load_settings

    store = QSettings(str(tmp_path / "window.ini"), QSettings.Format.IniFormat)
    dialog = SettingsDialog(load_settings(), lambda _s: None, store=store)
    qtbot.addWidget(dialog)
    names = [dialog.language.itemText(i) for i in range(dialog.language.count())]
    assert names == ["System", "English", "简体中文"]
    dialog.language.setCurrentIndex(2)
    dialog.accept()
    assert store.value(LANGUAGE_KEY) == "zh_CN"
    assert chosen_language(store) is Language.CHINESE


def test_the_chinese_workers_panel_shows_no_english(chinese: None, qtbot: QtBot) -> None:
    """Every worker state and the "ago" words, in the panel as it shows them."""
    states = [state for state in WorkerState if state is not WorkerState.LOST]
    drain = WorkerRequest.DRAIN
    workers = [
        WorkerSummary(f"box-{i}:1:t{i}", f"box-{i}", state, None, 4.0 * 60**i, i, request=drain)
        for i, state in enumerate(states)
    ]
    workers.append(WorkerSummary("box-9:1:t9", "box-9", WorkerState.LOST, 7, 2 * 86400.0, 0))
    panel = WorkersPanel(lambda show: show(workers), lambda _id, _request: None)
    qtbot.addWidget(panel)
    panel.show()
    qtbot.waitUntil(lambda: panel.table.rowCount() == len(workers), timeout=5000)
    texts = [("title", panel.windowTitle()), ("note", panel.note.text())]
    for widget in panel.findChildren(QAbstractButton):
        texts += [("button", widget.text()), ("button tooltip", widget.toolTip())]
    headers = [panel.table.model().headerData(c, Qt.Orientation.Horizontal) for c in range(7)]
    texts += [("header", str(header)) for header in headers]
    for row in range(panel.table.rowCount()):
        items = [panel.table.item(row, col) for col in (3, 4, 6)]  # job, heard, state
        texts += [("cell", item.text()) for item in items if item is not None]
    assert len(texts) > 3 * len(workers) and "工作进程" in panel.windowTitle()
    left = [(where, text) for where, text in texts if english_left(text)]
    assert not left, left

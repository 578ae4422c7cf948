"""PNGs from strangers: parameters parsed in time linear in their length, oversized text
chunks refused in one sentence (the picture still usable), bombs and non-images a sentence,
and the window reading a dropped PNG off its GUI thread."""

from __future__ import annotations

import random
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from PIL import Image
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent
from pytestqt.qtbot import QtBot

from app.engine.jobs.image_text import MAX_TEXT_BYTES, read_image_text
from app.ui.presenters.png_params import (
    NoParameters,
    ParametersTooLong,
    parse_a1111,
    read_png_params,
    settings_pairs,
)
from app.ui.widgets.window import MainWindow
from tests.hostile_files import itxt_chunk, png_bytes, text_chunk, ztxt_chunk

pytestmark = pytest.mark.timeout(120)
TIMEOUT_MS = 5000

# The pattern the settings line was read with until issue 34 (quadratic on a long run of
# words without a colon): the new scanner must find exactly the same pairs.
OLD_SETTING = re.compile(r'\s*([\w ]+?):\s*("(?:[^"\\]|\\.)*"|[^,]*)(?:,|$)')
SETTINGS = (
    "Steps: 20, Sampler: DPM++ 2M Karras, CFG scale: 7, Seed: 1, Size: 512x768, Model hash: "
    'abc123, Model: dreamshaper_8, Lora hashes: "a: 1, b: 2", ControlNet 0: "Module: canny, '
    'Model: control_sd15_canny [fef5e48e], Weight: 1, Guidance Start: 0, Guidance End: 1", '
    "Version: v1.9.4"
)


def test_the_settings_scanner_finds_what_the_old_pattern_found() -> None:
    rng = random.Random(34)
    alphabet = list('aZ1_ é: : ,, "" \\\n\t[]f')
    lines = [SETTINGS, "", ",", " :", "\t:", 'a: "x\\\n", b: 1', 'k: "v"\n', "  Steps:  20 ,"]
    lines += ["".join(rng.choices(alphabet, k=rng.randint(0, 30))) for _ in range(30_000)]
    for line in lines:
        assert settings_pairs(line) == OLD_SETTING.findall(line), line


@pytest.mark.parametrize(
    "body", ["a" * 65_536, "word " * 13_107, "a," * 32_768, " " * 32_768 + "b" * 32_768],
    ids=["letters", "words", "commas", "spaces-then-letters"],
)  # fmt: skip
def test_a_64_kb_settings_line_parses_quickly(body: str) -> None:
    text = "a cat\nSteps: 20, " + body  # 33 s for the letters before issue 34
    started = time.perf_counter()
    parsed = parse_a1111(text)
    assert time.perf_counter() - started < 0.5  # about 1 ms here; generous for slow machines
    assert parsed.params.prompt == "a cat" and parsed.params.steps == 20


def test_a_1_mb_parameters_chunk_is_refused_in_one_sentence_and_quickly(tmp_path: Path) -> None:
    path = tmp_path / "big.png"
    path.write_bytes(png_bytes(8, 8, text_chunk("parameters", "a cat\nSteps: 20, " + "a" * 2**20)))
    started = time.perf_counter()
    with pytest.raises(ParametersTooLong) as refused:
        read_png_params(path, controlnets=[])
    assert time.perf_counter() - started < 0.5  # the goal is 50 ms; see benchmarks
    message = str(refused.value)
    assert message.startswith("big.png: its 'parameters' text is 1024 KB, more than the ")
    assert "\n" not in message
    with Image.open(path) as image:  # the picture itself is fine
        assert image.size == (8, 8)


@pytest.mark.parametrize("make_chunk", [ztxt_chunk, itxt_chunk], ids=["zTXt", "iTXt"])
def test_a_compressed_chunk_is_refused_past_the_limit_without_inflating_it_all(
    tmp_path: Path, make_chunk: Callable[[str, str], bytes]
) -> None:
    path = tmp_path / "zipped.png"  # 1 KB on disk, 4 MB of text (PIL: ValueError)
    path.write_bytes(png_bytes(8, 8, make_chunk("parameters", "x" * 4 * 2**20)))
    found = read_image_text(path)
    assert found.texts == {} and "over 256 KB" in found.refused["parameters"]
    with pytest.raises(ParametersTooLong, match=r"zipped\.png: its 'parameters' text is over"):
        read_png_params(path, controlnets=[])


def test_text_just_under_the_limit_is_read(tmp_path: Path) -> None:
    text = "a cat\nSteps: 7, " + "b" * (MAX_TEXT_BYTES - 100)
    path = tmp_path / "ok.png"
    path.write_bytes(png_bytes(8, 8, ztxt_chunk("parameters", text)))
    assert read_png_params(path, controlnets=[]).params.steps == 7


@pytest.mark.parametrize(
    ("data", "phrase"),
    [
        (b"not an image at all", "it is not a PNG, JPEG or WebP file"),
        (png_bytes(20_000, 20_000), "no generation parameters"),  # the text is all it reads
    ],
    ids=["not-an-image", "bomb"],
)
def test_non_images_and_bombs_are_a_sentence(tmp_path: Path, data: bytes, phrase: str) -> None:
    path = tmp_path / "odd.png"
    path.write_bytes(data)
    with pytest.raises(NoParameters) as refused:
        read_png_params(path, controlnets=[])
    assert phrase in str(refused.value) and "<" not in str(refused.value)


def test_deeply_nested_easel_json_is_a_sentence(tmp_path: Path) -> None:
    path = tmp_path / "nested.png"
    path.write_bytes(png_bytes(8, 8, text_chunk("easel", "[" * 100_000 + "]" * 100_000)))
    with pytest.raises(NoParameters, match="nested too deeply"):
        read_png_params(path, controlnets=[])


def _drop(window: MainWindow, path: Path) -> None:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    event = QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime,
                       Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier)  # fmt: skip
    window.prompt.dropEvent(event)  # Qt delivers a Drop only inside a real drag


def test_the_window_reads_a_dropped_png_off_its_gui_thread(
    qtbot: QtBot, window: MainWindow, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.engine.jobs import image_text

    path = tmp_path / "from-a-stranger.png"
    Image.new("RGB", (64, 64)).save(path, pnginfo=_info("a fox\nSteps: 9, Seed: 3"))
    threads: list[threading.Thread] = []
    real = image_text.read_image_text

    def watched(source: object) -> object:
        threads.append(threading.current_thread())
        return real(source)  # type: ignore[arg-type]

    monkeypatch.setattr(image_text, "read_image_text", watched)
    _drop(window, path)
    qtbot.waitUntil(lambda: window.prompt.params().prompt == "a fox", timeout=TIMEOUT_MS)
    assert window.prompt.params().steps == 9
    assert threads and threads[0] is not threading.main_thread()


def test_a_dropped_png_with_oversized_parameters_says_so_and_still_starts_the_image(
    qtbot: QtBot, window: MainWindow, tmp_path: Path
) -> None:
    path = tmp_path / "huge-text.png"
    Image.new("RGB", (64, 64)).save(path, pnginfo=_info("a cat\nSteps: 20, " + "a" * 2**20))
    notes: list[str] = []
    window.prompt.message.connect(notes.append)
    before = window.prompt.params()
    _drop(window, path)
    qtbot.waitUntil(lambda: window.prompt.init is not None, timeout=TIMEOUT_MS)
    assert any("huge-text.png: its 'parameters' text is" in note for note in notes), notes
    assert window.prompt.params().prompt == before.prompt  # the text was not used
    assert not window.error_banner.isVisible()


def _info(parameters: str) -> object:
    from PIL.PngImagePlugin import PngInfo

    info = PngInfo()
    info.add_text("parameters", parameters)
    return info


@pytest.mark.parametrize(
    ("data", "phrase"),
    [
        (png_bytes(20_000, 20_000), "too large to load"),
        (png_bytes(64, 64, ztxt_chunk("parameters", "x" * 2 * 2**20)), "'parameters' text"),
        (b"\x89PNG\r\n\x1a\n but nothing after", "not an image that can be read"),
    ],
    ids=["bomb", "zTXt-2MB", "not-an-image"],
)
def test_a_dropped_hostile_png_is_one_sentence_and_the_window_goes_on(
    qtbot: QtBot, window: MainWindow, tmp_path: Path, data: bytes, phrase: str
) -> None:
    path = tmp_path / "hostile.png"
    path.write_bytes(data)
    said: list[str] = []
    window.prompt.message.connect(said.append)
    window.prompt.problem.connect(said.append)
    _drop(window, path)
    qtbot.waitUntil(
        lambda: any(phrase in text for text in [*said, window.error_banner.label.text()]),
        timeout=TIMEOUT_MS,
    )
    shown = " ".join([*said, window.error_banner.label.text()])
    assert "<" not in shown.replace("<br>", "") and "object at 0x" not in shown
    window.prompt.prompt.setPlainText("still working")  # the form is alive
    assert window.prompt.params().prompt == "still working"


def test_the_viewer_shows_parameters_within_the_limit_and_says_why_not_beyond(
    tmp_path: Path,
) -> None:
    from app.ui.widgets.image_viewer import png_parameters

    fine, huge, bomb = tmp_path / "fine.png", tmp_path / "huge.png", tmp_path / "bomb.png"
    fine.write_bytes(png_bytes(8, 8, text_chunk("parameters", "a fox\nSteps: 9\n")))
    huge.write_bytes(png_bytes(8, 8, ztxt_chunk("parameters", "x" * 2 * 2**20)))
    bomb.write_bytes(png_bytes(20_000, 20_000, text_chunk("parameters", "a bomb\nSteps: 2")))
    assert png_parameters(str(fine)) == "a fox\nSteps: 9"
    assert png_parameters(str(huge)).startswith("huge.png: its 'parameters' text is over ")
    assert png_parameters(str(bomb)) == "a bomb\nSteps: 2"  # its text, never its pixels
    assert png_parameters(str(tmp_path / "missing.png")) == ""

"""Show in folder (issue 16.5): the file selected in the file manager, else its folder opened.

The choice per system is tested with a fake launcher. The Linux way is tested for real: a
private D-Bus daemon (no service activation, so no real file manager can start) with a
stand-in org.freedesktop.FileManager1, and the fallback with no file manager on that bus.
Folders "opened" are caught with QDesktopServices' URL handler, so nothing is launched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path, PurePosixPath, PureWindowsPath

import pytest
from PIL import Image
from PySide6.QtCore import ClassInfo, QObject, Qt, QUrl, Slot
from PySide6.QtDBus import QDBusConnection
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QMenu
from pytestqt.qtbot import QtBot

from app.engine.jobs.queue import JobQueue
from app.ui.presenters.reveal import RevealCommand, reveal_command, show_in_folder
from app.ui.qt.file_manager import FileManager
from app.ui.widgets.image_viewer import ImageViewer
from app.ui.widgets.window import MainWindow
from tests.ui.test_keyboard import finished_job, list_with

pytestmark = pytest.mark.timeout(60)

TIMEOUT_MS = 5000
# A session bus of our own: no <servicedir>, so nothing is activated on demand.
BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:tmpdir=/tmp</listen>
  <policy context="default">
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""


# --- which way, per system (no Qt) -------------------------------------------------------------


def test_each_system_reveals_its_own_way() -> None:
    windows = PureWindowsPath(r"C:\Users\Ana\Easel outputs\000012.png")
    assert reveal_command(windows, "win32") == RevealCommand(
        "explorer.exe", ("/select,", r"C:\Users\Ana\Easel outputs\000012.png")
    )
    mac = PurePosixPath("/Users/ana/Easel outputs/000012.png")
    assert reveal_command(mac, "darwin") == RevealCommand(
        "open", ("-R", "/Users/ana/Easel outputs/000012.png")
    )
    linux = PurePosixPath("/home/ana/Easel outputs/000012.png")
    for platform in ("linux", "freebsd14"):
        assert reveal_command(linux, platform) == RevealCommand(
            show_items=("file:///home/ana/Easel%20outputs/000012.png",)
        )


class FakeLauncher:
    """Records what it was asked; `starts`, `answers`, `opens`: whether each one works."""

    def __init__(self, starts: bool = True, answers: bool = True, opens: bool = True) -> None:
        self.starts, self.answers, self.opens = starts, answers, opens
        self.calls: list[tuple[str, object]] = []

    def start(self, program: str, arguments: Sequence[str]) -> bool:
        self.calls.append(("start", (program, *arguments)))
        return self.starts

    def show_items(self, uris: Sequence[str], failed: Callable[[], None]) -> None:
        self.calls.append(("show_items", tuple(uris)))
        if not self.answers:
            failed()

    def open_folder(self, folder: Path) -> bool:
        self.calls.append(("open_folder", folder))
        return self.opens


def reveal(path: Path, launcher: FakeLauncher, platform: str) -> list[str]:
    problems: list[str] = []
    show_in_folder(path, launcher, problems.append, platform)
    return problems


@pytest.fixture
def image(tmp_path: Path) -> Path:
    path = tmp_path / "outputs" / "000012.png"
    path.parent.mkdir()
    Image.new("RGB", (64, 48), "red").save(path)
    return path


def test_a_file_manager_that_answers_selects_the_file(image: Path) -> None:
    launcher = FakeLauncher()
    assert reveal(image, launcher, "linux") == []
    assert launcher.calls == [("show_items", (image.as_uri(),))]  # no folder opened as well
    mac = FakeLauncher()
    assert reveal(image, mac, "darwin") == []
    assert mac.calls == [("start", ("open", "-R", str(image)))]


@pytest.mark.parametrize(
    ("platform", "launcher", "first"),
    [("linux", FakeLauncher(answers=False), "show_items"),
     ("win32", FakeLauncher(starts=False), "start"),
     ("darwin", FakeLauncher(starts=False), "start")],
)  # fmt: skip
def test_when_nothing_selects_the_file_its_folder_opens(
    image: Path, platform: str, launcher: FakeLauncher, first: str
) -> None:
    assert reveal(image, launcher, platform) == []
    assert [name for name, _ in launcher.calls] == [first, "open_folder"]
    assert launcher.calls[-1] == ("open_folder", image.parent)


def test_a_missing_file_opens_its_folder_and_a_missing_folder_is_a_problem(
    image: Path,
) -> None:
    gone = image.with_name("000013.png")
    launcher = FakeLauncher()
    assert reveal(gone, launcher, "linux") == []
    assert launcher.calls == [("open_folder", image.parent)]
    nowhere = FakeLauncher(opens=False)
    problems = reveal(image.parent / "deleted" / "1.png", nowhere, "linux")
    assert problems == [f"Could not open the folder {image.parent / 'deleted'}"]


# --- for real: QtDBus on a private bus --------------------------------------------------------


# The stubs type ClassInfo wrongly (each value a dict, and not callable as a decorator).
@ClassInfo({"D-Bus Interface": "org.freedesktop.FileManager1"})  # type: ignore[call-arg]
class StandInFileManager(QObject):  # type: ignore[operator]
    """Answers ShowItems as Nautilus, Dolphin and the others do (and remembers the URIs)."""

    def __init__(self) -> None:
        super().__init__()
        self.shown: list[list[str]] = []

    @Slot("QStringList", str)
    def ShowItems(self, uris: list[str], startup_id: str) -> None:  # the D-Bus method's name
        self.shown.append(list(uris))


class Bus:
    def __init__(self, address: str) -> None:
        self.address = address
        self.names: list[str] = []

    def connect(self) -> QDBusConnection:
        name = f"easel-test-{uuid.uuid4().hex}"
        self.names.append(name)
        connection = QDBusConnection.connectToBus(self.address, name)
        assert connection.isConnected()
        return connection

    def with_file_manager(self) -> StandInFileManager:
        service = StandInFileManager()
        server = self.connect()
        assert server.registerService("org.freedesktop.FileManager1")
        assert server.registerObject("/org/freedesktop/FileManager1", service,
                                     QDBusConnection.RegisterOption.ExportAllSlots)  # fmt: skip
        return service


@pytest.fixture
def bus(tmp_path: Path) -> Iterator[Bus]:
    if shutil.which("dbus-daemon") is None:
        # `.ci/run` installs it; elsewhere say what is missing (in CI: fail, never skip).
        reason = "dbus-daemon is not installed (apt-get install dbus-daemon)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    config = tmp_path / "bus.conf"
    config.write_text(BUS_CONFIG, encoding="utf-8")
    daemon = subprocess.Popen(
        ["dbus-daemon", f"--config-file={config}", "--nofork", "--print-address"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert daemon.stdout is not None
    bus = Bus(daemon.stdout.readline().strip())
    yield bus
    for name in bus.names:
        QDBusConnection.disconnectFromBus(name)
    daemon.terminate()
    daemon.wait(10)


class OpenedUrls(QObject):
    """Stands in for the desktop's folder opener (QDesktopServices' handler for file: URLs)."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[QUrl] = []

    @Slot(QUrl)
    def open(self, url: QUrl) -> None:
        self.urls.append(url)

    def folders(self) -> list[Path]:
        return [Path(url.toLocalFile()) for url in self.urls]


@pytest.fixture
def opened() -> Iterator[OpenedUrls]:
    handler = OpenedUrls()
    # The stubs ask for bytes; PySide itself refuses them and takes the str.
    QDesktopServices.setUrlHandler("file", handler, "open")  # type: ignore[arg-type]
    yield handler
    QDesktopServices.unsetUrlHandler("file")


def test_linux_selects_the_file_over_d_bus(
    qtbot: QtBot, bus: Bus, image: Path, opened: OpenedUrls
) -> None:
    service = bus.with_file_manager()
    manager = FileManager(bus=bus.connect())
    manager.show_in_folder(image)
    qtbot.waitUntil(lambda: service.shown == [[image.as_uri()]], timeout=TIMEOUT_MS)
    qtbot.wait(200)  # an error answer would arrive now
    assert opened.urls == []


def test_with_no_file_manager_on_the_bus_the_folder_opens(
    qtbot: QtBot, bus: Bus, image: Path, opened: OpenedUrls
) -> None:
    manager = FileManager(bus=bus.connect())
    manager.show_in_folder(image)
    qtbot.waitUntil(lambda: opened.folders() == [image.parent], timeout=TIMEOUT_MS)


def test_with_no_session_bus_at_all_the_folder_opens(image: Path, opened: OpenedUrls) -> None:
    nowhere = QDBusConnection.connectToBus("unix:path=/nonexistent/bus", "easel-no-bus")
    assert not nowhere.isConnected()
    FileManager(bus=nowhere).show_in_folder(image)
    assert opened.folders() == [image.parent]  # at once: no bus to wait for
    QDBusConnection.disconnectFromBus("easel-no-bus")


# --- from the viewer and the job menu ----------------------------------------------------------


def test_the_viewer_shows_its_image_in_the_folder(
    qtbot: QtBot, bus: Bus, image: Path, opened: OpenedUrls
) -> None:
    other = image.with_name("000011.png")
    Image.new("RGB", (64, 48), "blue").save(other)
    service = bus.with_file_manager()
    viewer = ImageViewer([str(image), str(other)], 0)
    qtbot.addWidget(viewer)
    viewer.file_manager.bus = bus.connect()
    viewer.show()
    qtbot.mouseClick(viewer.buttons["Next ›"], Qt.MouseButton.LeftButton)
    qtbot.mouseClick(viewer.buttons["Show in folder"], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: service.shown == [[other.as_uri()]], timeout=TIMEOUT_MS)


def test_the_job_menu_shows_a_finished_image_in_the_folder(
    qtbot: QtBot, window: MainWindow, queue: JobQueue, bus: Bus, image: Path, opened: OpenedUrls
) -> None:
    service = bus.with_file_manager()
    window.file_manager.bus = bus.connect()
    done = finished_job(queue, image)
    list_with(qtbot, window, done)
    qtbot.keyClick(window.jobs.table, Qt.Key.Key_F10, Qt.KeyboardModifier.ShiftModifier)
    menu = window.jobs.menu
    assert isinstance(menu, QMenu)
    qtbot.waitUntil(menu.isVisible, timeout=TIMEOUT_MS)
    while menu.activeAction().text() != "Show in folder":
        qtbot.keyClick(menu, Qt.Key.Key_Down)
    qtbot.keyClick(menu, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: service.shown == [[image.as_uri()]], timeout=TIMEOUT_MS)


def test_the_shown_image_goes_to_its_folder_from_the_image_panel(
    qtbot: QtBot, window: MainWindow, queue: JobQueue, bus: Bus, image: Path, opened: OpenedUrls
) -> None:
    service = bus.with_file_manager()
    window.image.file_manager.bus = bus.connect()
    list_with(qtbot, window, finished_job(queue, image))
    button = window.image.show_in_folder
    qtbot.waitUntil(button.isEnabled, timeout=TIMEOUT_MS)
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: service.shown == [[image.as_uri()]], timeout=TIMEOUT_MS)

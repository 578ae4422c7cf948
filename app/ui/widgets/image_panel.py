"""The large image area: the selected job's live preview while it runs, then its image,
or its clip playing (`clip_player`)."""

from __future__ import annotations

from enum import Enum

from PySide6.QtCore import QPoint, QRect, QSize, Qt, Signal
from PySide6.QtGui import (
    QAction,
    QColor,
    QDragEnterEvent,
    QDropEvent,
    QGuiApplication,
    QImage,
    QMouseEvent,
    QPainter,
    QPaintEvent,
    QPixmap,
    QResizeEvent,
)
from PySide6.QtWidgets import (
    QLabel,
    QMenu,
    QPushButton,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.ui.presenters.actions import IMAGE_ACTIONS, Action
from app.ui.qt.file_manager import FileManager
from app.ui.qt.theme import CANVAS, MUTED
from app.ui.widgets.clip_player import ClipPlayer
from app.ui.widgets.flow_layout import FlowLayout
from app.ui.widgets.prompt_panel import has_image


class Scaling(Enum):
    # Compared on the tiny model's 64 px images at 6x (see the report of issue 5): bilinear
    # reads as a soft painting; nearest shows stair-stepped edges, and "nearest to a whole
    # multiple, then bilinear" looked the same as nearest at that size, so it was dropped.
    SMOOTH = "Smooth"  # the default: soft, no blocks
    PIXELS = "Pixels"  # nearest: every model pixel as a square, for inspecting detail


def scale_for_display(image: QImage, size: QSize, mode: Scaling) -> QImage:
    fitted = image.size().scaled(size, Qt.AspectRatioMode.KeepAspectRatio)
    if mode is Scaling.PIXELS:
        return image.scaled(
            fitted, Qt.AspectRatioMode.IgnoreAspectRatio, Qt.TransformationMode.FastTransformation
        )
    return image.scaled(
        fitted, Qt.AspectRatioMode.IgnoreAspectRatio, Qt.TransformationMode.SmoothTransformation
    )


class ImageCanvas(QWidget):
    clicked = Signal()  # a left click (released on the picture): play or pause a clip
    double_clicked = Signal()  # open the larger viewer
    image_dropped = Signal(object)  # the QMimeData of an image dropped here: the form takes it

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setToolTip(self.tr("Double-click to open the viewer (zoom, previous/next)"))
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.setMinimumSize(240, 240)
        self.setAcceptDrops(True)
        self.image: QImage | None = None
        self.placeholder = self.tr("Your images will appear here")
        self.mode = Scaling.SMOOTH
        self._scaled: QPixmap | None = None

    def set_image(self, image: QImage | None, placeholder: str = "") -> None:
        self.image = None if image is None or image.isNull() else image
        if placeholder:
            self.placeholder = placeholder
        self._scaled = None
        self.update()

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if has_image(event.mimeData()):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        if has_image(event.mimeData()):
            event.acceptProposedAction()
            self.image_dropped.emit(event.mimeData())

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        inside = self.rect().contains(event.position().toPoint())
        if event.button() == Qt.MouseButton.LeftButton and inside and self.image is not None:
            self.clicked.emit()
        super().mouseReleaseEvent(event)

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:
        if self.image is not None:
            self.double_clicked.emit()
        event.accept()

    def set_mode(self, mode: Scaling) -> None:
        self.mode = mode
        self._scaled = None
        self.update()

    def resizeEvent(self, event: QResizeEvent) -> None:
        self._scaled = None
        super().resizeEvent(event)

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.fillRect(self.rect(), QColor(CANVAS))
        if self.image is None:
            painter.setPen(QColor(MUTED))
            flags = Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap
            painter.drawText(self.rect().adjusted(40, 0, -40, 0), flags, self.placeholder)
            return
        area = self.rect().adjusted(16, 16, -16, -16)
        if self._scaled is None:  # scaling a big image is costly: once per size, not per paint
            self._scaled = QPixmap.fromImage(scale_for_display(self.image, area.size(), self.mode))
        target = QRect(0, 0, self._scaled.width(), self._scaled.height())
        target.moveCenter(area.center())
        painter.drawPixmap(target, self._scaled)


class ElidedLabel(QLabel):
    """One line that ends in "…" rather than pushing the buttons beside it away."""

    def __init__(self) -> None:
        super().__init__()
        self._full = ""
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)

    def setText(self, text: str) -> None:
        self._full = text
        self.setToolTip(text)
        self._elide()

    def text(self) -> str:
        return self._full

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        elided = self.fontMetrics().elidedText(
            self._full, Qt.TextElideMode.ElideRight, self.width()
        )
        super().setText(elided)


class ImagePanel(QWidget):
    """Canvas plus caption and the image's actions."""

    message = Signal(str)  # a note for the status bar
    problem = Signal(str)  # something went wrong: the red banner
    follow_up = Signal(object)  # an Action of IMAGE_ACTIONS on the shown job

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.canvas = ImageCanvas()
        self.caption = ElidedLabel()
        self.caption.setObjectName("caption")
        self.path: str | None = None
        self.show_in_folder = QPushButton(Action.SHOW_IN_FOLDER.label)
        self.show_in_folder.setToolTip(Action.SHOW_IN_FOLDER.tip)
        self.file_manager = FileManager(self)
        self.file_manager.problem.connect(self.problem)
        # Less used: in the "More" menu, so the bar stays one or two lines on a laptop.
        self.copy = QAction(self.tr("Copy image"), self)
        self.reuse = QPushButton(self.tr("Reuse settings"))
        self.reuse.setToolTip(self.tr("Put this job's prompt and settings into the form"))
        self.reuse.setEnabled(False)  # until a job is selected
        self.reuse_seed = QAction(self.tr("Reuse seed"), self)
        self.reuse_seed.setToolTip(self.tr("Put only this image's seed into the form, fixed"))
        self.reuse_seed.setEnabled(False)  # with Reuse settings (DetailController)
        # Follow-up jobs on the shown job (the window carries them out)
        self.follow_ups = {action: QPushButton(action.label) for action in IMAGE_ACTIONS}
        self.follow_ups[Action.STAR].setCheckable(True)  # checked: the shown job is starred
        for action, button in self.follow_ups.items():
            button.setToolTip(action.tip)
            button.setEnabled(False)
            button.clicked.connect(lambda _=False, a=action: self.follow_up.emit(a))
        self.scaling = QAction(self.tr("Pixels"), self)
        self.scaling.setCheckable(True)
        self.scaling.setToolTip(self.tr("Enlarge small images pixel by pixel instead of smoothly"))
        self.player = ClipPlayer()  # under the picture while a finished clip is shown
        self.player.hide()
        self.player.frame_shown.connect(self.canvas.set_image)
        self.player.problem.connect(self.problem)
        self.canvas.clicked.connect(self._clicked)
        self.canvas.installEventFilter(self.player)  # its keys, while the picture has focus
        self.canvas.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.canvas.customContextMenuRequested.connect(self._clip_menu)
        # A clip's own actions (the window carries them out): in "More", the picture's
        # right-click menu and the window's Image menu, shown while a clip is.
        self.save_gif = QAction(self.tr("Save as GIF…"), self)
        self.save_gif.setToolTip(self.tr("The clip as an animated GIF, looping, at its speed"))
        self.save_webp = QAction(self.tr("Save as WebP…"), self)
        self.save_webp.setToolTip(
            self.tr("The clip as an animated WebP: smaller than a GIF, every colour")
        )
        self.use_frame = QAction(self.tr("Use frame as init image"), self)
        self.use_frame.setToolTip(
            self.tr("Start a new picture from the frame shown (image to image)")
        )
        self.clip_actions = (self.save_gif, self.save_webp, self.use_frame)
        self.show_in_folder.clicked.connect(self._show_in_folder)
        self.copy.triggered.connect(self._copy)
        self.scaling.toggled.connect(self.set_pixels)
        # The buttons wrap onto a second line in a narrow window rather than widening it.
        self.bar = QWidget()
        bar = FlowLayout(self.bar)
        self.more_menu = QMenu(self)
        for item in (self.reuse_seed, self.copy, self.scaling):
            self.more_menu.addAction(item)
        self.more_menu.addSeparator()
        self.more_menu.addActions(list(self.clip_actions))
        self.more_menu.setToolTipsVisible(True)
        self.more = QToolButton()
        self.more.setText(self.tr("More"))
        self.more.setToolTip(self.tr("Reuse the seed, copy the image, show it pixel by pixel"))
        self.more.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.more.setMenu(self.more_menu)
        shown: list[QWidget] = [*self.follow_ups.values(), self.reuse, self.show_in_folder]
        for widget in (*shown, self.more):
            bar.addWidget(widget)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        layout.addWidget(self.canvas, 1)
        layout.addWidget(self.player)
        layout.addWidget(self.caption)
        layout.addWidget(self.bar)
        self._enable()

    def show_image(self, image: QImage | None, caption: str, path: str | None = None) -> None:
        self._close_clip()
        self.path = path
        self.canvas.set_image(image)
        self.caption.setText(caption)
        self._enable()

    def show_nothing(self, text: str) -> None:
        self._close_clip()
        self.path = None
        self.canvas.set_image(None, text)
        self.caption.setText("")
        self._enable()

    def play_clip(self, path: str) -> None:
        """Play the clip at `path` in the picture's place, from its first frame (the picture
        shown until then is its first-frame still)."""
        self.player.open(path)
        # Clicked, the picture takes the keys (Space); never by Tab, nor while it is a still.
        self.canvas.setFocusPolicy(Qt.FocusPolicy.ClickFocus)
        self._enable()

    def _close_clip(self) -> None:
        self.player.close_clip()
        self.canvas.setFocusPolicy(Qt.FocusPolicy.NoFocus)

    def _clicked(self) -> None:
        if self.player.loaded:
            self.player.toggle()

    def _clip_menu(self, at: QPoint) -> None:
        """A clip's right-click menu: what a player offers, and the clip's actions."""
        if not self.player.loaded:
            return
        menu = QMenu(self)
        toggle = self.tr("Pause") if self.player.playing else self.tr("Play")
        menu.addAction(toggle, self.player.toggle)
        menu.addAction(self.tr("Copy frame"), self._copy)
        menu.addSeparator()
        menu.addActions(list(self.clip_actions))
        menu.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        menu.popup(self.canvas.mapToGlobal(at))

    def _enable(self) -> None:
        self.copy.setEnabled(self.canvas.image is not None)
        self.show_in_folder.setEnabled(self.path is not None)
        for action in self.clip_actions:
            action.setVisible(self.player.loaded)

    def _show_in_folder(self) -> None:
        if self.path:
            self.file_manager.show_in_folder(self.path)

    def _copy(self) -> None:
        if self.canvas.image is not None:
            QGuiApplication.clipboard().setImage(self.canvas.image)
            self.message.emit(self.tr("Image copied"))

    def set_pixels(self, pixels: bool) -> None:
        self.canvas.set_mode(Scaling.PIXELS if pixels else Scaling.SMOOTH)
        if self.scaling.isChecked() != pixels:
            self.scaling.setChecked(pixels)

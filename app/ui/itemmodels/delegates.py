"""Painted cells: colour-coded status badges, progress bars with ETA, thumbnails."""

from __future__ import annotations

import time

from PySide6.QtCore import QModelIndex, QObject, QPersistentModelIndex, QRect, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QImage, QPainter, QPixmap
from PySide6.QtWidgets import QStyle, QStyledItemDelegate, QStyleOptionViewItem

from app.engine.jobs.states import JobStatus
from app.ui.itemmodels.job_list_model import BADGE_ROLE, DETAIL_ROLE, PROGRESS_ROLE, ROW_ROLE
from app.ui.presenters.i18n import translate
from app.ui.presenters.rows import JobRow, format_duration, status_label
from app.ui.qt.theme import ACCENT, MUTED, TEXT, status_colour

Index = QModelIndex | QPersistentModelIndex


def _background(painter: QPainter, option: QStyleOptionViewItem) -> None:
    # Let the style paint selection and hover so painted cells match the plain ones.
    style = option.widget.style() if option.widget else None
    if style is not None:
        style.drawPrimitive(
            QStyle.PrimitiveElement.PE_PanelItemViewItem, option, painter, option.widget
        )


_BADGES: dict[tuple[JobStatus, str, int, int, float], QPixmap] = {}


def paint_badge(
    painter: QPainter, rect: QRect, status: JobStatus, text: str = "", ratio: float = 1.0
) -> None:
    """A rounded, colour-coded status label; `ratio`: the device pixel ratio of the view."""
    label = text or status_label(status)
    metrics = painter.fontMetrics()
    width = min(rect.width() - 4, metrics.horizontalAdvance(label) + 16)
    height = min(rect.height() - 6, metrics.height() + 6)
    if width <= 0 or height <= 0:
        return
    key = (status, label, width, height, ratio)
    if key not in _BADGES:  # antialiased rounded shapes are costly: draw each badge once
        _BADGES[key] = _draw_badge(status, label, width, height, ratio, painter.font())
    painter.drawPixmap(rect.x() + 2, rect.center().y() - height // 2 + 1, _BADGES[key])


def _draw_badge(
    status: JobStatus, label: str, width: int, height: int, ratio: float, font: QFont
) -> QPixmap:
    pixmap = QPixmap(int(width * ratio), int(height * ratio))
    pixmap.setDevicePixelRatio(ratio)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setFont(font)
    badge = QRectF(0.5, 0.5, width - 1, height - 1)
    colour = status_colour(status)
    fill = QColor(colour)
    fill.setAlpha(56)
    painter.setPen(colour)
    painter.setBrush(fill)
    painter.drawRoundedRect(badge, height / 2, height / 2)
    painter.setPen(colour.lighter(135))
    painter.drawText(badge, Qt.AlignmentFlag.AlignCenter, label)
    painter.end()
    return pixmap


class PromptDelegate(QStyledItemDelegate):
    """The prompt on up to two lines, the job's model, size and seed (and trouble) muted below."""

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: Index) -> None:
        painter.save()
        _background(painter, option)
        rect = option.rect.adjusted(6, 3, -6, -3)
        font = painter.font()
        small = QFont(font)
        small.setPointSizeF(font.pointSizeF() * 0.85)
        detail_height = QFontMetrics(small).height()
        top = QRect(rect.x(), rect.y(), rect.width(), rect.height() - detail_height)
        bottom = QRect(rect.x(), top.bottom() + 1, rect.width(), detail_height)
        prompt = (index.data() or "").replace("\n", " ")
        painter.setPen(QColor(TEXT))
        painter.drawText(top, PROMPT_FLAGS, wrapped(prompt, painter.fontMetrics(), top))
        painter.setFont(small)
        painter.setPen(QColor(MUTED))
        detail = index.data(DETAIL_ROLE) or ""
        elided = painter.fontMetrics().elidedText(
            detail, Qt.TextElideMode.ElideRight, bottom.width()
        )
        flags = Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter
        painter.drawText(bottom, flags, elided)
        painter.restore()

    def sizeHint(self, option: QStyleOptionViewItem, index: Index) -> QSize:
        return QSize(220, 54)


PROMPT_FLAGS = Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter | Qt.TextFlag.TextWordWrap


def wrapped(text: str, metrics: QFontMetrics, rect: QRect) -> str:
    """`text` cut to the lines that fit in `rect` (wrapped at words), the last ending in "…"."""
    lines = max(1, rect.height() // max(1, metrics.lineSpacing()))
    if metrics.boundingRect(rect, PROMPT_FLAGS, text).height() <= rect.height():
        return text
    # Fill the lines but the last, then elide the rest into the last one.
    shown, rest = [], text
    for _ in range(lines - 1):
        width, cut = 0, 0
        for i, word in enumerate(rest.split(" ")):
            width += metrics.horizontalAdvance(word + " ")
            if width > rect.width() and i:
                break
            cut += len(word) + 1
        shown.append(rest[:cut].rstrip())
        rest = rest[cut:]
    shown.append(metrics.elidedText(rest, Qt.TextElideMode.ElideRight, rect.width()))
    return "\n".join(shown)


class StatusDelegate(QStyledItemDelegate):
    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: Index) -> None:
        row: JobRow | None = index.data(ROW_ROLE)
        painter.save()
        _background(painter, option)
        if row is not None:
            # A failure that will not be retried automatically says so in its badge.
            text = row.status_text
            ratio = option.widget.devicePixelRatioF() if option.widget else 1.0
            paint_badge(painter, option.rect.adjusted(4, 0, -4, 0), row.status, text, ratio)
        painter.restore()

    def sizeHint(self, option: QStyleOptionViewItem, index: Index) -> QSize:
        return QSize(118, 36)


class ProgressDelegate(QStyledItemDelegate):
    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: Index) -> None:
        row: JobRow | None = index.data(ROW_ROLE)
        progress = index.data(PROGRESS_ROLE)
        painter.save()
        _background(painter, option)
        if row is not None and progress is not None:
            self._paint(painter, option.rect.adjusted(6, 0, -6, 0), row, *progress)
        painter.restore()

    def _paint(
        self, painter: QPainter, rect: QRect, row: JobRow, step: int, total: int, eta: float | None
    ) -> None:
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        fraction = 1.0 if row.status is JobStatus.SUCCESS else (step / total if total else 0.0)
        bar = QRectF(rect.x(), rect.bottom() - 9, rect.width(), 4)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(255, 255, 255, 28))
        painter.drawRoundedRect(bar, 2, 2)
        colour = QColor(ACCENT) if row.status.is_running else status_colour(row.status)
        painter.setBrush(colour)
        painter.drawRoundedRect(QRectF(bar.x(), bar.y(), bar.width() * fraction, 4), 2, 2)
        painter.setPen(QColor(MUTED))
        text = progress_text(row, step, total, eta)
        # Two lines above the bar: "queued · 40 steps · about 1:20" wraps instead of "ab…".
        label = QRect(rect.x(), rect.y() + 3, rect.width(), int(bar.y()) - rect.y() - 5)
        painter.drawText(label, PROMPT_FLAGS, wrapped(text, painter.fontMetrics(), label))

    def sizeHint(self, option: QStyleOptionViewItem, index: Index) -> QSize:
        return QSize(170, 36)


def progress_text(row: JobRow, step: int, total: int, eta: float | None) -> str:
    """Where the job is, in words: a bare "step 0/20" says little about a queued job."""
    status = row.status
    if row.cancel_pending:
        return translate("Progress", "being cancelled at {step}/{total} · Undo keeps it").format(
            step=step, total=total
        )
    if status is JobStatus.PENDING:
        place = queue_place(row)
        if step == 0 and row.expected_s is not None:
            return translate("Progress", "{place} · {total} steps · about {eta}").format(
                place=place, total=total, eta=format_duration(row.expected_s)
            )
        if step == 0:
            return translate("Progress", "{place} · {total} steps").format(place=place, total=total)
        return translate("Progress", "{place} · will continue from step {step}/{total}").format(
            place=place, step=step, total=total
        )
    if status is JobStatus.PROCESSING:
        if step == 0 and row.running_since is not None:  # the model loads before step 1
            waited = format_duration(max(0.0, time.time() - row.running_since))
            if row.params.compile:  # its first job compiles the model in its first step
                return translate("Progress", "loading the model, compiling it… (once) {s}").format(
                    s=waited
                )
            return translate("Progress", "loading the model… {s}").format(s=waited)
        if eta:
            return translate("Progress", "step {step}/{total} · ~{eta} left").format(
                step=step, total=total, eta=format_duration(eta)
            )
        return translate("Progress", "step {step}/{total}").format(step=step, total=total)
    if status is JobStatus.SUCCESS:
        return translate("Progress", "done · {total} steps").format(total=total)
    if status is JobStatus.BLOCKED and row.after is not None:
        return translate("Progress", "waits for #{id}").format(id=row.after)
    if status is JobStatus.BLOCKED:
        return translate("Progress", "waits for its parent jobs")
    words = {
        JobStatus.CANCELLING: translate("Progress", "cancelling at {step}/{total}"),
        JobStatus.PAUSING: translate("Progress", "pausing at {step}/{total}"),
        JobStatus.PAUSED: translate("Progress", "paused at {step}/{total}"),
        JobStatus.CANCELLED: translate("Progress", "cancelled at {step}/{total}"),
    }
    return words.get(status, translate("Progress", "stopped at {step}/{total}")).format(
        step=step, total=total
    )


def queue_place(row: JobRow) -> str:
    """Where a queued job is in the queue's order: "first in the queue", "#3 in the queue"
    (or just "queued"). Not "runs next": a worker holding another job's model loaded takes
    that one first (model-aware claims), so the place promises no run order."""
    if row.queue_position == 1:
        return translate("Progress", "first in the queue")
    if row.queue_position > 1:
        return translate("Progress", "#{n} in the queue").format(n=row.queue_position)
    return translate("Progress", "queued")


STAR_COLOUR = QColor("#facc15")

_GLYPHS = {
    JobStatus.PENDING: "…",
    JobStatus.PROCESSING: "…",
    JobStatus.PAUSING: "‖",
    JobStatus.PAUSED: "‖",
    JobStatus.CANCELLING: "×",
    JobStatus.CANCELLED: "×",
    JobStatus.FAILED: "!",
    JobStatus.TIMEOUT: "!",
}


class ThumbnailDelegate(QStyledItemDelegate):
    """Draws the decoration scaled smoothly into a rounded square."""

    def __init__(self, side: int = 36, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.side = side

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: Index) -> None:
        painter.save()
        _background(painter, option)
        image = index.data(Qt.ItemDataRole.DecorationRole)
        box = QRect(0, 0, self.side, self.side)
        box.moveCenter(option.rect.center())
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(255, 255, 255, 14))
        painter.drawRoundedRect(box, 4, 4)
        if isinstance(image, QPixmap) and not image.isNull():
            painter.drawPixmap(box, image)
        elif isinstance(image, QImage) and not image.isNull():
            painter.drawImage(box, image)
        elif (row := index.data(ROW_ROLE)) is not None:
            # No picture yet (or never): a status mark, so the column still says something.
            painter.setPen(status_colour(row.status))
            glyph = _GLYPHS.get(row.status, "")
            painter.drawText(box, Qt.AlignmentFlag.AlignCenter, glyph)
        row = index.data(ROW_ROLE)
        if row is not None and row.starred:  # a favourite: a star in the corner
            painter.setPen(STAR_COLOUR)
            corner = Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignRight
            painter.drawText(box.adjusted(0, -2, -2, 0), corner, "★")
        badge = index.data(BADGE_ROLE)
        if badge:  # the output kind's mark (a video's), bottom left, off the star's corner
            painter.setPen(QColor(255, 255, 255))
            corner = Qt.AlignmentFlag.AlignBottom | Qt.AlignmentFlag.AlignLeft
            painter.drawText(box.adjusted(3, 0, 0, -2), corner, badge)
        painter.restore()

    def sizeHint(self, option: QStyleOptionViewItem, index: Index) -> QSize:
        return QSize(self.side + 8, self.side + 6)

"""The main window's way into the mask editor: one menu ("Image") with "Fix part of the
picture…" (the selected job's image, else a file) and "Fix a pasted picture"; what the
editor asks for is submitted as a job, and its finished image comes back to the editor.

Kept out of the window's own files: the window calls `install_mask_editor` once.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, Qt
from PySide6.QtGui import QAction, QGuiApplication, QImage, QKeySequence
from PySide6.QtWidgets import QFileDialog, QMenu

from app.errors import UserError
from app.ui.presenters.i18n import translate
from app.ui.presenters.inpaint_requests import EditedImage, inpaint_job, outpaint_job
from app.ui.presenters.rows import JobRow

if TYPE_CHECKING:
    from app.engine.jobs.follow_ups import NewJob
    from app.ui.widgets.mask_editor import MaskEditor
    from app.ui.widgets.window_parts import WindowParts

IMAGE_FILTER = "Images (*.png *.jpg *.jpeg *.webp *.bmp)"


class MaskEditing:
    """The editor windows of one main window, and the jobs they are waiting for."""

    def __init__(self, window: WindowParts, guide: Callable[[NewJob], NewJob]) -> None:
        self.window = window
        self.guide = guide  # the Control section's layers and references, as Generate's
        self.editors: list[tuple[MaskEditor, EditedImage]] = []
        self.waiting: dict[int, MaskEditor] = {}  # submitted job -> the editor to show it in
        self.menu: QMenu | None = None  # the window's Image menu, once installed
        window.vm.settled.connect(self._settled)

    def open_selected(self) -> None:
        row = self.window.jobs.current_row()
        if row is not None and row.has_picture:
            self.open_row(row)
            return
        name, _ = QFileDialog.getOpenFileName(
            self.window.window, translate("MaskEditor", "Fix part of a picture"), "", IMAGE_FILTER
        )
        if name:
            self.open_file(Path(name))

    def open_row(self, row: JobRow) -> None:
        image = QImage(row.output_path or "")
        if image.isNull():
            self.window.show_error(
                translate("MaskEditor", "Cannot open {path}").format(path=row.output_path)
            )
            return
        self.open(image, row.id, row.params)

    def open_file(self, path: Path) -> None:
        image = QImage(str(path))
        if image.isNull():
            self.window.show_error(
                translate("MaskEditor", "{path} is not an image that can be read").format(path=path)
            )
            return
        self.open(image)

    def open_pasted(self) -> None:
        image = QGuiApplication.clipboard().image()
        if image.isNull():
            self.window.show_note(translate("MaskEditor", "The clipboard holds no picture"))
            return
        self.open(image)

    def open(self, image: QImage, job_id: int | None = None, params: Any = None) -> MaskEditor:
        """An editor on `image`; an image from outside Easel is fitted first (sides that are
        multiples of 8, at most 2048), as an init image is."""
        png = png_of(image)
        if job_id is None:
            from app.engine.jobs.init_image import prepare_init_image

            try:
                png = prepare_init_image(png).png
            except UserError as error:
                self.window.show_error(str(error))
                raise
            image = QImage.fromData(png)
        if params is None:
            params = self._form_params()
        edited = EditedImage(png, image.width(), image.height(), job_id, params)
        prompt = params.prompt if params is not None else ""
        # The editor (and numpy, its mask's test for emptiness) loads when first opened.
        from app.ui.widgets.mask_editor import MaskEditor

        editor = MaskEditor(image, prompt, self.window.window)
        editor.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        editor.inpaint_requested.connect(lambda asked: self._inpaint(editor, edited, asked))
        editor.extend_requested.connect(lambda asked: self._extend(editor, edited, asked))
        editor.file_dropped.connect(self.open_file)
        editor.destroyed.connect(lambda: self._forget(editor))
        self.editors.append((editor, edited))
        editor.show()
        return editor

    def _form_params(self) -> Any:
        try:
            return self.window.prompt.params()
        except UserError:
            return None  # the form has a problem: the editor's own prompt is used

    def _inpaint(self, editor: MaskEditor, edited: EditedImage, asked: Any) -> None:
        settings, mask_png = asked
        # Guided by the Control section's layers and references, as Generate is.
        self._submit(editor, lambda: self.guide(inpaint_job(edited, settings, mask_png)))

    def _extend(self, editor: MaskEditor, edited: EditedImage, asked: Any) -> None:
        prompt, extension, fill = asked
        self._submit(editor, lambda: outpaint_job(edited, prompt, extension, fill))

    def _submit(self, editor: MaskEditor, make: Any) -> None:
        try:
            job = make()  # checks the mask and the canvas: refused here, nothing stored
        except UserError as error:
            editor.status_line.setText(str(error))
            self.window.show_error(str(error))
            return

        def submitted(ids: tuple[int, ...]) -> None:
            for job_id in ids:
                self.waiting[job_id] = editor

        self.window.vm.submitted.connect(submitted, Qt.ConnectionType.SingleShotConnection)
        self.window.vm.submit_job(job)

    def _settled(self, row: JobRow) -> None:
        editor = self.waiting.pop(row.id, None)
        if editor is not None and row.output_path:
            editor.set_result(QImage(row.output_path))

    def _forget(self, editor: MaskEditor) -> None:
        self.editors = [(e, i) for e, i in self.editors if e is not editor]
        self.waiting = {k: e for k, e in self.waiting.items() if e is not editor}


def install_mask_editor(window: WindowParts, guide: Callable[[NewJob], NewJob]) -> MaskEditing:
    """The "Image" menu of `window`, opening mask editors; `guide` adds the Control
    section's layers to an inpaint job."""
    editing = MaskEditing(window, guide)
    menu = window.window.menuBar().addMenu(translate("MaskEditor", "&Image"))
    editing.menu = menu  # "Edit with words…" joins it (edit_hook)
    for text, slot, keys in (
        (translate("MaskEditor", "&Fix part of the picture…"), editing.open_selected, "Ctrl+E"),
        (translate("MaskEditor", "Fix a &pasted picture"), editing.open_pasted, "Ctrl+Shift+E"),
    ):
        action = QAction(text, window.window)
        action.setShortcut(QKeySequence(keys))
        action.triggered.connect(slot)
        menu.addAction(action)
    return editing


def png_of(image: QImage) -> bytes:
    """`image` as RGB PNG bytes (a pasted or opened picture, as a job stores it)."""
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.convertToFormat(QImage.Format.Format_RGB32).save(buffer, "PNG")  # type: ignore[call-overload]  # the stubs want bytes; Qt a str
    return bytes(data.data())

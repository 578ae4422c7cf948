"""What the window does with the clip shown: save it as an animated GIF or WebP, or start a
new picture from the frame shown. The work (decoding, encoding) runs off the GUI thread.

Words keep the "MainWindow" translation context, as the window's others.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QMenu, QWidget

from app.engine.outputs.animation import frame_png, write_animation
from app.ui.presenters.i18n import translate
from app.ui.qt.dbthread import Runner
from app.ui.widgets.image_panel import ImagePanel

# Asks where to save: (parent, title, suggested path, file filter) -> the path chosen, "" none.
AskPath = Callable[[QWidget, str, str, str], str]


def ask_save_path(parent: QWidget, title: str, suggested: str, file_filter: str) -> str:
    return QFileDialog.getSaveFileName(parent, title, suggested, file_filter)[0]


class ClipActions:
    def __init__(
        self,
        parent: QWidget,
        image: ImagePanel,
        runner: Runner,  # the window's image thread
        shown_job: Callable[[], int | None],  # the job whose clip is shown
        use_as_init: Callable[[bytes, str], None],  # PNG bytes and where they came from
        show_note: Callable[[str], None],
        show_error: Callable[[str], None],
    ) -> None:
        self.parent = parent
        self.image = image
        self.runner = runner
        self.shown_job = shown_job
        self.use_as_init = use_as_init
        self.show_note = show_note
        self.show_error = show_error
        self.ask_path: AskPath = ask_save_path  # tests answer for the dialog
        image.save_gif.triggered.connect(lambda: self.save_animation(".gif"))
        image.save_webp.triggered.connect(lambda: self.save_animation(".webp"))
        image.use_frame.triggered.connect(self.use_frame)

    def add_to(self, menu: QMenu) -> None:
        """Into the window's Image menu (shown there while a clip is)."""
        menu.addSeparator()
        menu.addActions(list(self.image.clip_actions))

    @property
    def clip(self) -> str | None:
        return self.image.player.path

    def save_animation(self, suffix: str) -> None:
        """Ask where (beside the clip, under its name, by default), then write it there."""
        if (clip := self.clip) is None:
            return
        kind = suffix[1:].upper()
        title = translate("MainWindow", "Save the clip as {kind}").format(kind=kind)
        file_filter = translate("MainWindow", "{kind} animation (*{suffix})").format(
            kind=kind, suffix=suffix
        )
        chosen = self.ask_path(self.parent, title, str(Path(clip).with_suffix(suffix)), file_filter)
        if not chosen:
            return
        target = Path(chosen)
        if target.suffix.lower() != suffix:  # typed without it: the format asked for
            target = target.with_name(target.name + suffix)
        self.show_note(translate("MainWindow", "Saving {name}…").format(name=target.name))
        problem = translate("MainWindow", "Could not save {name}: {error}")
        self.runner.run(
            lambda: write_animation(Path(clip), target),
            lambda path: self.show_note(translate("MainWindow", "Saved {path}").format(path=path)),
            lambda error: self.show_error(problem.format(name=target.name, error=error)),
        )

    def use_frame(self) -> None:
        """The frame shown, full size from the clip, as the form's init image."""
        if (clip := self.clip) is None:
            return
        index = self.image.player.index
        where = translate("MainWindow", "frame {k}").format(k=index + 1)
        if (job_id := self.shown_job()) is not None:
            where = translate("MainWindow", "#{id}, frame {k}").format(id=job_id, k=index + 1)
        self.runner.run(
            lambda: frame_png(Path(clip), index),
            lambda png: self.use_as_init(png, where),
            self.show_error,
        )

"""Engine settings (saved through app.engine.settings) and the window's own QSettings."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from PySide6.QtCore import QSettings, Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.engine import paths
from app.engine.settings import InvalidSettings, Settings
from app.engine.store.shared_queue import save_password as keep_password
from app.errors import DatabaseError
from app.ui.presenters.model_choices import ModelChoice
from app.ui.qt import window_state
from app.ui.qt.language import LANGUAGE_KEY, LANGUAGE_NAMES, Language, chosen_language
from app.ui.widgets.api_access_fields import ApiAccessFields
from app.ui.widgets.new_jobs_section import NewJobsSection
from app.ui.widgets.shared_queue_section import SharedQueueSection

COLUMN_GAP_PX = 16
SCREEN_SHARE = 0.85  # the most of the screen's height the dialog takes when it opens
SCROLL_ALLOWANCE_PX = 160  # the note, the error line, the buttons, margins, a status line


class SettingsDialog(QDialog):
    """Engine settings, and with `store` the window's own preferences (QSettings).

    `models`: the installed models, offered as the default model of new jobs.
    `shared_queue`: the Shared queue section (default: one trying real connections).
    `save_password`: keeps a typed database password (default: in libpq's password file).
    """

    def __init__(
        self,
        settings: Settings,
        save: Callable[[Settings], None],
        parent: QWidget | None = None,
        *,
        store: QSettings | None = None,
        models: Sequence[ModelChoice] = (),
        shared_queue: SharedQueueSection | None = None,
        save_password: Callable[[str, str], object] | None = None,
    ) -> None:
        super().__init__(parent)
        self._store = store
        self.shared_queue = shared_queue or SharedQueueSection(settings.database_url)
        self._save_password = save_password or keep_password
        self.new_jobs = NewJobsSection(
            settings.new_jobs_start_with, settings.new_job_defaults, models
        )
        self.resume = QCheckBox(self.tr("Resume paused jobs when Easel starts"))
        self.resume.setToolTip(
            self.tr("Jobs paused by quitting continue by themselves at the next launch")
        )
        self.resume.setChecked(store is not None and window_state.resume_on_launch(store))
        self.resume.setVisible(store is not None)
        self.language = self._language_box(store)
        self.setWindowTitle(self.tr("Settings"))
        self.setMinimumWidth(520)
        self._save = save
        self.saved: Settings | None = None
        self.models = _folder_field(settings.models_dir, str(paths.models_dir()))
        self.outputs = _folder_field(settings.outputs_dir, str(paths.outputs_dir()))
        self.workers = _spin(1, 16, settings.workers)
        self.max_attempts = _spin(1, 20, settings.max_attempts)
        self.heartbeat = QDoubleSpinBox()
        self.heartbeat.setRange(2, 3600)
        self.heartbeat.setSuffix(self.tr(" s"))
        self.heartbeat.setDecimals(1)
        self.heartbeat.setValue(settings.heartbeat_timeout_s)
        self.checkpoint = _spin(0, 3600, round(settings.checkpoint_interval_s))
        self.checkpoint.setSuffix(self.tr(" s"))
        self.checkpoint.setSpecialValueText(self.tr("off"))
        self.checkpoint.setToolTip(
            self.tr("A running job saves its progress this often, so a crash costs at most this")
        )
        self.low_vram = QCheckBox(self.tr("Low graphics memory (slower: model offload, tiling)"))
        self.low_vram.setChecked(settings.low_vram)
        self.keep_days = _spin(0, 36500, settings.keep_finished_days)
        self.keep_days.setSuffix(self.tr(" days"))
        self.keep_days.setSpecialValueText(self.tr("forever"))
        self.keep_jobs = _spin(0, 10_000_000, settings.keep_finished_jobs)
        self.keep_jobs.setSpecialValueText(self.tr("no limit"))
        self.prune_images = QCheckBox(self.tr("Also delete their images"))
        self.prune_images.setChecked(settings.prune_images)
        for box in (self.keep_days, self.keep_jobs, self.prune_images):
            box.setToolTip(
                self.tr(
                    "Easel removes older finished jobs by itself, at launch and every hour; "
                    "starred, paused and unfinished jobs are always kept"
                )
            )
        self.api_port = _spin(0, 65535, settings.api_port)
        self.api_port.setSpecialValueText(self.tr("off"))
        self.api_port.setToolTip(
            self.tr("While the window is open, other programs (A1111 clients too) can queue "
                    "jobs at http://127.0.0.1:<port>; from the next start of Easel")
        )  # fmt: skip
        self.api_access = ApiAccessFields(settings)
        self._settings = settings
        self.error = QLabel()
        self.error.setObjectName("error")
        self.error.setWordWrap(True)
        self._lay_out()

    def _lay_out(self) -> None:
        form = QFormLayout()
        form.addRow(self.tr("Models folder"), self.models)
        form.addRow(self.tr("Output folder"), self.outputs)
        form.addRow(self.tr("Workers"), self.workers)
        form.addRow("", self.low_vram)
        form.addRow(self.tr("Keep finished jobs for"), self.keep_days)
        form.addRow(self.tr("Keep at most"), self.keep_jobs)
        form.addRow("", self.prune_images)
        form.addRow(self.tr("HTTP API port"), self.api_port)
        form.addRow(self.tr("API token"), self.api_access.token)
        form.addRow(self.tr("API host names"), self.api_access.hosts)
        form.addRow("", self.api_access.a1111_open)
        form.addRow("", self.resume)
        if self._store is not None:
            form.addRow(self.tr("Language"), self.language)
        # What only a queue-keeper needs: out of the first sight of a one-computer user.
        self.advanced = QWidget()
        advanced = QFormLayout(self.advanced)
        advanced.setContentsMargins(0, 0, 0, 0)
        advanced.addRow(self.tr("Max attempts"), self.max_attempts)
        advanced.addRow(self.tr("Heartbeat timeout"), self.heartbeat)
        advanced.addRow(self.tr("Save progress every"), self.checkpoint)
        self.advanced.hide()
        self.show_advanced = QToolButton()
        self.show_advanced.setObjectName("disclosure")
        self.show_advanced.setText(self.tr("Advanced ▸"))
        self.show_advanced.setCheckable(True)
        self.show_advanced.toggled.connect(self._toggle_advanced)
        note = QLabel(
            self.tr(
                "Workers, timeouts, the shared queue and the language take effect the next "
                "time Easel starts."
            )
        )
        note.setObjectName("hint")
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        # Two columns: one above the other, the sections were taller than a laptop's screen.
        general = QVBoxLayout()
        general.addLayout(form)
        general.addWidget(self.show_advanced, 0, Qt.AlignmentFlag.AlignLeft)
        general.addWidget(self.advanced)
        general.addStretch(1)  # spare height below the rows, not between them
        grouped = QVBoxLayout()
        grouped.addWidget(self.new_jobs)
        grouped.addWidget(self.shared_queue)
        grouped.addStretch(1)
        sections = QWidget()
        columns = QHBoxLayout(sections)
        columns.setContentsMargins(0, 0, 0, 0)
        columns.addLayout(general, 1)
        columns.addSpacing(COLUMN_GAP_PX)
        columns.addLayout(grouped, 1)
        layout = QVBoxLayout(self)
        self._area = _scrolling(sections)
        layout.addWidget(self._area, 1)
        layout.addWidget(note)
        layout.addWidget(self.error)
        layout.addWidget(buttons)
        self._fit_screen(sections)

    def _fit_screen(self, sections: QWidget) -> None:
        """All of it where the screen allows; on a laptop's 768 pixels, scroll the sections
        (the note, the error and the buttons always stay in view)."""
        wanted = sections.sizeHint().height() + SCROLL_ALLOWANCE_PX
        room = int(self.screen().availableGeometry().height() * SCREEN_SHARE)
        self.resize(max(self.minimumWidth(), sections.sizeHint().width() + 40), min(wanted, room))

    def chosen(self) -> Settings:
        return self._settings.with_changes(
            models_dir=self.models.text().strip(), outputs_dir=self.outputs.text().strip(),
            workers=self.workers.value(), max_attempts=self.max_attempts.value(),
            heartbeat_timeout_s=self.heartbeat.value(),
            checkpoint_interval_s=float(self.checkpoint.value()),
            low_vram=self.low_vram.isChecked(),
            keep_finished_days=self.keep_days.value(),
            keep_finished_jobs=self.keep_jobs.value(),
            new_jobs_start_with=self.new_jobs.chosen_start(),
            new_job_defaults=self.new_jobs.defaults(),
            prune_images=self.prune_images.isChecked(),
            database_url=self.shared_queue.chosen_url(),
            api_port=self.api_port.value(), **self.api_access.chosen(),
        )  # fmt: skip

    def accept(self) -> None:
        try:
            chosen = self.chosen()
            # The password first: settings naming a server Easel cannot log in to are useless.
            if chosen.database_url and (password := self.shared_queue.typed_password()):
                self._save_password(chosen.database_url, password)
            self._save(chosen)
        except (InvalidSettings, DatabaseError, OSError) as error:
            self.error.setText(self.tr("Not saved: {error}").format(error=error))
            self.new_jobs.focus_first_problem()
            if (focused := self.focusWidget()) is not None:
                self._area.ensureWidgetVisible(focused)  # on a small screen it may be below
            return
        self.saved = chosen
        if self._store is not None:
            window_state.save_resume_on_launch(self._store, self.resume.isChecked())
            self._store.setValue(LANGUAGE_KEY, self.language.currentData())
            self._store.sync()
        super().accept()

    def done(self, result: int) -> None:
        self.shared_queue.close_thread()
        super().done(result)

    def _toggle_advanced(self, on: bool) -> None:
        self.advanced.setVisible(on)
        self.show_advanced.setText(self.tr("Advanced ▾") if on else self.tr("Advanced ▸"))

    def _language_box(self, store: QSettings | None) -> QComboBox:
        """System / English / 简体中文: each language in its own words, the system's in ours."""
        box = QComboBox()
        box.addItem(self.tr("System"), Language.SYSTEM.value)
        for language, name in LANGUAGE_NAMES.items():
            box.addItem(name, language.value)
        if store is not None:
            box.setCurrentIndex(max(0, box.findData(chosen_language(store).value)))
        return box


class _FolderField(QWidget):
    def __init__(self, value: str, default: str) -> None:
        super().__init__()
        self.edit = QLineEdit(value)
        self.edit.setPlaceholderText(default)
        browse = QPushButton(self.tr("Browse…"))
        browse.clicked.connect(self._browse)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.edit, 1)
        layout.addWidget(browse)

    def text(self) -> str:
        return self.edit.text()

    def setText(self, text: str) -> None:
        self.edit.setText(text)

    def _browse(self) -> None:
        start = self.edit.text() or self.edit.placeholderText()
        chosen = QFileDialog.getExistingDirectory(self, self.tr("Choose a folder"), start)
        if chosen:
            self.edit.setText(str(Path(chosen)))


def _scrolling(content: QWidget) -> QScrollArea:
    area = QScrollArea()
    area.setWidget(content)
    area.setWidgetResizable(True)
    area.setFrameShape(QFrame.Shape.NoFrame)
    area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    return area


def _folder_field(value: str, default: str) -> _FolderField:
    return _FolderField(value, default)


def _spin(low: int, high: int, value: int) -> QSpinBox:
    box = QSpinBox()
    box.setRange(low, high)
    box.setValue(value)
    return box

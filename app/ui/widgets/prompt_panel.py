"""The prompt form: what to draw and how, plus dropping an Easel/A1111 PNG to reuse its settings."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from PySide6.QtCore import QBuffer, QIODevice, QMimeData, Qt, QUrl, Signal
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QIcon, QImage, QPaintEvent, QPixmap
from PySide6.QtWidgets import (
    QComboBox,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QStyle,
    QStyleOptionComboBox,
    QStylePainter,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.engine.jobs.params import (
    DEFAULT_FPS,
    DEFAULT_FRAMES,
    DEFAULT_MODEL,
    KIND_VIDEO,
    LAST_FRAME,
    MAX_SEED,
    RANDOM_SEED,
    SCHEDULERS,
    GenerationParams,
    InvalidParameters,
)
from app.engine.settings import JobDefaults
from app.ui.presenters import number_rules as rules
from app.ui.presenters.i18n import QT_TRANSLATE_NOOP, translate
from app.ui.presenters.model_choices import LoraChoice, ModelChoice, unknown_model
from app.ui.presenters.number_rules import format_number
from app.ui.presenters.png_params import (
    NoParameters,
    ParametersTooLong,
    ParsedParams,
    read_png_params,
)
from app.ui.presenters.queue_service import InitImage
from app.ui.qt.dbthread import InlineRunner, Runner
from app.ui.qt.icons import dice_icon
from app.ui.widgets.last_frame import LastFrameRow, named_fields
from app.ui.widgets.number_field import (
    FieldNote,
    NumberEdit,
    add_field_rows,
    field_row,
    number_in,
)
from app.ui.widgets.speed_section import SpeedSection

CUSTOM = QT_TRANSLATE_NOOP("PromptPanel", "Custom")


# Where img2img starts when an image is given here (AUTOMATIC1111's img2img default, as the CLI)
DEFAULT_STRENGTH = 0.75
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp")
INIT_THUMB = 56  # px


class PromptEdit(QPlainTextEdit):
    """The prompt box; an image pasted or dropped on it goes to the panel, not into the text."""

    image_given = Signal(object)  # the QMimeData holding it

    def canInsertFromMimeData(self, source: QMimeData) -> bool:
        return has_image(source) or super().canInsertFromMimeData(source)

    def insertFromMimeData(self, source: QMimeData) -> None:
        if has_image(source):
            self.image_given.emit(source)
        else:
            super().insertFromMimeData(source)


class ElidingComboBox(QComboBox):
    """A picker whose shown text ends in "…" when narrow, never cut mid-character
    ("64 像" of "64 像素"); the whole text is its tooltip."""

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QStylePainter(self)
        option = QStyleOptionComboBox()
        self.initStyleOption(option)
        painter.drawComplexControl(QStyle.ComplexControl.CC_ComboBox, option)
        field = self.style().subControlRect(
            QStyle.ComplexControl.CC_ComboBox, option, QStyle.SubControl.SC_ComboBoxEditField,
            self,
        )  # fmt: skip
        option.currentText = self.fontMetrics().elidedText(
            option.currentText, Qt.TextElideMode.ElideRight, field.width() - 4
        )
        painter.drawControl(QStyle.ControlElement.CE_ComboBoxLabel, option)
        if self.toolTip() != self.currentText():
            self.setToolTip(self.currentText())


class PromptPanel(QWidget):
    generate_requested = Signal()
    generate_upscale_requested = Signal()  # Generate, each image followed by its upscale
    native_then_upscale = Signal()  # the size was set to the model's own: generate + upscale
    init_requested = Signal(object, str)  # (a file Path or PNG bytes, where it came from)
    message = Signal(str)  # a note for the status bar
    problem = Signal(str)  # something went wrong: the red banner, like every error
    settings_read = Signal(object)  # the ParsedParams of a dropped PNG (its control layers)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("promptPanel")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground)  # paint the QSS panel colour
        self.setAcceptDrops(True)
        self._choosing_preset = False
        self._choices: dict[str, ModelChoice] = {}
        self._video_shown_before = False
        # Where dropped PNGs are read: the window gives its image thread; alone, inline.
        self.png_runner: Runner = InlineRunner()
        self._build()
        self.set_params(GenerationParams(prompt=""))

    # --- building -----------------------------------------------------------------------------

    def _build(self) -> None:
        self.prompt = PromptEdit()
        self.prompt.image_given.connect(self.take_image)
        self.prompt.setPlaceholderText(self.tr("Describe the picture… (Ctrl+Enter to generate)"))
        self.prompt.setTabChangesFocus(True)
        # An image dropped here goes to the panel too: never its file:/// address as text.
        self.negative = PromptEdit()
        self.negative.image_given.connect(self.take_image)
        self.negative.setPlaceholderText(self.tr("What to keep out of it"))
        self.negative.setTabChangesFocus(True)
        self.negative.setMaximumHeight(64)
        self.model = ElidingComboBox()
        self.model.setEditable(False)
        self.model.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.model.currentIndexChanged.connect(self._model_changed)
        self.model.activated.connect(self._model_picked)
        self.lora = QComboBox()
        self.lora.setToolTip(self.tr("Insert a LoRA from the models folder's lora/ subfolder "
                                     "at the cursor"))  # fmt: skip
        self.lora.activated.connect(self._lora_picked)
        self.set_loras([])
        # What a few-step LoRA (Lightning, Hyper, Turbo) set in the form when it was picked,
        # and its schedule, sent with the job while its tag stays in the prompt and its
        # sampler stays picked (prompts/few_step.py).
        self.few_step_note = QLabel()
        self.few_step_note.setObjectName("fieldNote")
        self.few_step_note.setWordWrap(True)
        self.few_step_note.hide()
        self._few_step = _NO_FEW_STEP
        self._model_note = False  # the note is a few-step model's (it goes with the model)
        self.prompt.textChanged.connect(self._few_step_tag_edited)
        self.scheduler = QComboBox()
        self.scheduler.addItems(SCHEDULERS)
        self.scheduler.activated.connect(self._sampler_picked)
        self._wanted_sampler = self.scheduler.currentText()  # kept across models that lack it
        self.steps = NumberEdit(rules.STEPS)
        self.cfg = NumberEdit(rules.CFG, step=0.5)
        self.seed = NumberEdit(rules.SEED)
        # Room for the longest seed: "1006" once showed as "006" beside the Random toggle.
        digits = self.seed.fontMetrics().horizontalAdvance(str(MAX_SEED))
        self.seed.setMinimumWidth(digits + 14)
        # Random or fixed, in sight (A1111's -1 works too: typed, it reads as random).
        self.random_seed = QToolButton()
        self.random_seed.setObjectName("randomSeed")
        self.random_seed.setText(self.tr("Random"))
        self.random_seed.setIcon(dice_icon())
        self.random_seed.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.random_seed.setCheckable(True)
        self.random_seed.setToolTip(
            self.tr("On: a new seed for every image (like -1 in A1111). Off: the seed typed here")
        )
        self.random_seed.toggled.connect(self._random_toggled)
        self.seed.textChanged.connect(self._seed_typed)
        self._fixed_seed = ""
        self.size_preset = QComboBox()
        self.size_preset.currentIndexChanged.connect(self._preset_chosen)
        self.width_box = NumberEdit(rules.WIDTH)
        self.height_box = NumberEdit(rules.HEIGHT)
        for box in (self.width_box, self.height_box):
            box.textChanged.connect(self._size_edited)
        # Beside the size: one the model refuses (red), or beyond what it was trained for,
        # with the way out A1111 users know from hires fix.
        self.size_note = QLabel()
        self.size_note.setObjectName("fieldNote")
        self.size_note.setWordWrap(True)
        self.native_upscale = QPushButton()
        self.native_upscale.setToolTip(
            self.tr("Set the model's own size, queue the image(s) and an upscale ×2 of each")
        )
        self.native_upscale.clicked.connect(self._native_then_upscale)
        self.size_box = QWidget()
        size_column = QVBoxLayout(self.size_box)
        size_column.setContentsMargins(0, 0, 0, 0)
        size_column.addWidget(self.size_note)
        size_column.addWidget(self.native_upscale, 0, Qt.AlignmentFlag.AlignLeft)
        self.size_box.hide()
        self.generate = QPushButton(self.tr("Generate"))
        self.generate.setObjectName("primary")
        self.generate.setToolTip(self.tr("Queue the image(s) — Ctrl+Enter"))
        self.generate.clicked.connect(self.generate_requested)
        self.generate_upscale = QPushButton(self.tr("Generate + upscale ×2"))
        self.generate_upscale.setToolTip(
            self.tr("Queue the image(s) and, waiting for each, its upscale ×2")
        )
        self.generate_upscale.clicked.connect(self.generate_upscale_requested)
        self._build_init()
        self._build_video()
        self.last_frame = LastFrameRow()  # a first-and-last-frame model's only
        self.last_frame.problem.connect(self.problem)
        self.count = NumberEdit(rules.IMAGES)
        self.count.textChanged.connect(self._label_generate)
        self.count.setValue(1)
        self.defaults = JobDefaults()
        self.reset = QToolButton()
        self.reset.setText(self.tr("Reset to defaults"))
        self.reset.setToolTip(
            self.tr("Model, sampler, steps, CFG, size and images as set in Settings > New jobs")
        )
        self.reset.clicked.connect(self.reset_to_defaults)
        self.speed = SpeedSection()  # speed, and under Advanced: threshold, compile, attention
        self._lay_out()
        self._seed_typed()

    def _lay_out(self) -> None:
        # Label | field | its range, or what is wrong with it (in red)
        rows: list[tuple[str, QWidget, QWidget | None]] = [
            (self.tr("Model"), self.model, None),
            # A clip's own fields first: on a laptop's screen they were below the fold.
            (self.tr("Frames"), self._frames_field, FieldNote(self.frames)),
            (self.tr("FPS"), self.fps, FieldNote(self.fps)),
            (self.tr("LoRA"), self.lora, None),
            ("", self.few_step_note, None),
            (self.tr("Sampler"), self.scheduler, None),
            (self.tr("Steps"), self.steps, FieldNote(self.steps)),
            ("CFG", self.cfg, FieldNote(self.cfg)),
            (self.tr("Seed"), field_row(self.seed, self.random_seed),
             FieldNote(self.seed, quiet=True)),
            (self.tr("Size"), self.size_preset, None),
            ("", field_row(self.width_box, QLabel("×"), self.height_box),
             FieldNote(self.width_box, self.height_box)),
            ("", self.size_box, None),
            (self.tr("Images"), self.count, FieldNote(self.count)),
            (self.tr("Strength"), self.strength, FieldNote(self.strength)),
        ]  # fmt: skip
        form = QGridLayout()
        form.setHorizontalSpacing(10)
        form.setVerticalSpacing(8)
        captions = add_field_rows(form, rows)
        self._cfg_caption = captions[next(i for i, row in enumerate(rows) if row[1] is self.cfg)]
        strength = next(i for i, row in enumerate(rows) if row[1] is self.strength)
        # shown only with an init image (the one or the other: `_show_init`)
        self._strength_row = (captions[strength], self.strength, rows[strength][2])
        # shown only for a video model (its clip's frames and rate)
        self._video_rows = [
            (captions[i], field, note) for i, (_label, field, note) in enumerate(rows)
            if field in (self._frames_field, self.fps)
        ]  # fmt: skip
        self._show_video(self.model_choice())
        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 14, 14, 14)
        layout.setSpacing(8)
        layout.addWidget(_title(self.tr("Prompt")))
        layout.addWidget(self.prompt, 3)
        layout.addWidget(_title(self.tr("Negative prompt")))
        layout.addWidget(self.negative)
        layout.addWidget(self.init_box)
        layout.addWidget(self.last_frame)
        layout.addSpacing(6)
        layout.addLayout(form)
        layout.addWidget(self.speed)
        layout.addWidget(self.reset, 0, Qt.AlignmentFlag.AlignRight)
        layout.addStretch(1)
        hint = QLabel(
            self.tr("Drop an Easel or A1111 PNG here to reuse its settings; drop or paste "
                    "any other image to start from it")
        )  # fmt: skip
        hint.setObjectName("hint")
        hint.setWordWrap(True)
        layout.addWidget(hint)
        layout.addWidget(self.generate)
        layout.addWidget(self.generate_upscale)
        self._show_init()

    def _build_init(self) -> None:
        """The init image row (img2img): its thumbnail, where it came from, a way to drop it."""
        self.init: InitImage | None = None
        self.strength = NumberEdit(rules.STRENGTH, step=0.05)
        self.strength.setValue(DEFAULT_STRENGTH)
        # A clip's hold on its first frame, on a model that weighs it (in img2img's place).
        self.image_strength = NumberEdit(rules.IMAGE_STRENGTH, step=0.05)
        self.image_strength.setValue(1.0)
        self.image_strength.setToolTip(
            self.tr("How firmly the clip holds the init image as its first frame: 1 exactly, "
                    "lower lets it move away")
        )  # fmt: skip
        self.init_box = QWidget()
        self.init_thumb = QLabel()
        self.init_thumb.setFixedSize(INIT_THUMB, INIT_THUMB)
        self.init_thumb.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.init_caption = QLabel()
        self.init_caption.setWordWrap(True)
        self.init_clear = QToolButton()
        self.init_clear.setText(self.tr("Remove"))
        self.init_clear.setToolTip(self.tr("Generate from noise again, without this image"))
        self.init_clear.clicked.connect(self.clear_init)
        row = QHBoxLayout()
        row.addWidget(self.init_thumb)
        row.addWidget(self.init_caption, 1)
        row.addWidget(self.init_clear)
        # Under its image, as the last frame's strength is under the last frame.
        self.image_strength_line = named_fields((self.tr("Image strength"), self.image_strength))
        column = QVBoxLayout(self.init_box)
        column.setContentsMargins(0, 0, 0, 0)
        column.addLayout(row)
        column.addWidget(self.image_strength_line)

    def _build_video(self) -> None:
        """A video model's fields: the clip's frames (with its length in seconds beside
        them) and its frames a second; hidden for image models."""
        self.frames = NumberEdit(rules.FRAMES)
        self.frames.setValue(DEFAULT_FRAMES)
        self.fps = NumberEdit(rules.FPS)
        self.fps.setValue(DEFAULT_FPS)
        self.clip_length = QLabel()
        self.clip_length.setObjectName("fieldNote")
        self._frames_field = field_row(self.frames, self.clip_length)
        for edit in (self.frames, self.fps):
            edit.textChanged.connect(self._show_clip_length)
        self._show_clip_length()

    def _show_clip_length(self) -> None:
        frames, fps = self.frames.reading().value, self.fps.reading().value
        seconds = "" if not frames or not fps else f"{float(frames) / float(fps):.1f}"
        self.clip_length.setText(self.tr("{seconds} s").format(seconds=seconds) if seconds else "")

    def draws_video(self) -> bool:
        return self.model_choice().draws_video

    def _show_video(self, choice: ModelChoice) -> None:
        """The frame fields for a video model only; a model's own count and rate the first
        time one is chosen (the fields keep what the artist typed after that)."""
        shown = choice.draws_video
        if shown and not self._video_shown_before:
            self.frames.setValue(choice.default_frames)
            self.fps.setValue(choice.default_fps)
            self._video_shown_before = True
        for row in getattr(self, "_video_rows", ()):
            for widget in row:
                if widget is not None:
                    widget.setVisible(shown)
        if hasattr(self, "last_frame"):
            self.last_frame.setVisible(choice.takes_last_image)
            self.last_frame.set_weighing(choice.weighs_images)
        if hasattr(self, "_strength_row"):
            self._show_init()

    def set_init(self, init: InitImage) -> None:
        """Start from this image: the image, its size and the strength; nothing else of the
        form changes (a job's prompt or fixed seed, kept silently, would follow later jobs)."""
        self.init = init
        width, height = self.model_choice().fitted(init.width, init.height)
        self.width_box.setValue(width)
        self.height_box.setValue(height)
        thumb = QImage.fromData(init.png)
        self.init_thumb.setPixmap(
            QPixmap.fromImage(thumb).scaled(
                INIT_THUMB, INIT_THUMB, Qt.AspectRatioMode.KeepAspectRatio,
                Qt.TransformationMode.SmoothTransformation,
            )
        )  # fmt: skip
        self.init_caption.setText(
            self.tr("Starts from {source} ({w} × {h})").format(
                source=init.source, w=init.width, h=init.height
            )
        )
        self._show_init()
        note = self.tr("Init image from {source}").format(source=init.source)
        notes = [note, *init.notes]
        if (width, height) != (init.width, init.height):  # the model takes no larger
            notes.append(
                self.tr("size {w}×{h}, the largest {model} takes in that shape").format(
                    w=width, h=height, model=self.model_name()
                )
            )
        self.message.emit("; ".join(notes))

    def clear_init(self) -> None:
        self.init = None
        self._show_init()

    def init_png(self) -> bytes | None:
        return None if self.init is None else self.init.png

    def last_png(self) -> bytes | None:
        """The clip's last frame, for a model that takes one (else None: kept for the next)."""
        return self.last_frame.png() if self.model_choice().takes_last_image else None

    def _weighs_init(self) -> bool:
        """Whether the init image is a clip's first frame held at a strength of the form's
        (a model that weighs its images) rather than img2img's start."""
        return self.init is not None and self.model_choice().weighs_images

    def _show_init(self) -> None:
        shown = self.init is not None
        self.init_box.setVisible(shown)
        weighed = self._weighs_init()
        self.image_strength_line.setVisible(weighed)
        for widget in getattr(self, "_strength_row", ()):
            if widget is not None:
                widget.setVisible(shown and not weighed)

    def take_image(self, mime: QMimeData) -> None:
        """An image dropped or pasted: a file goes by path, clipboard pixels as PNG bytes."""
        path = _dropped_image(mime.urls())
        if path is not None:
            self._image_file(path)
        elif mime.hasImage():
            self.init_requested.emit(_png_bytes(QImage(mime.imageData())),
                                     self.tr("the clipboard"))  # fmt: skip

    def _image_file(self, path: Path) -> None:
        """An Easel or A1111 PNG gives its settings; any other image becomes the init image.

        The PNG is read on `png_runner`'s thread: it may come from anyone, and even read
        within its limits a file on a slow drive must not freeze the window."""
        if path.suffix.lower() != ".png":
            self.init_requested.emit(path, path.name)
            return
        self.png_runner.run(
            lambda: _params_or_reason(path), lambda found: self._png_read(path, found)
        )

    def _png_read(self, path: Path, found: ParsedParams | NoParameters) -> None:
        if isinstance(found, ParsedParams):
            self._use_parsed(path, found)
            return
        if isinstance(found, ParametersTooLong):
            self.message.emit(str(found))  # the picture is still fine: it starts the image
        # no settings in it (or not an image: preparing it will say so)
        self.init_requested.emit(path, path.name)

    # --- reading and filling the form ---------------------------------------------------------

    def set_models(self, choices: list[ModelChoice]) -> None:
        """Fill the picker: each model with its architecture and native size; unsupported
        ones are listed but cannot be chosen, their reason in the tooltip."""
        current = self.model_name() or DEFAULT_MODEL
        self._choices = {choice.name: choice for choice in choices}
        self.model.blockSignals(True)
        self.model.clear()
        for choice in choices:
            add_model_item(self.model, choice)
        self.model.blockSignals(False)
        self._select_model(current)
        self._model_changed()
        if self.model_choice().too_large(*self._size()):  # e.g. a size remembered for SDXL
            self.size_preset.setCurrentIndex(0)

    def model_choices(self) -> list[ModelChoice]:
        """The models the picker was last given (the model scan's answer)."""
        return list(self._choices.values())

    def model_name(self) -> str:
        return str(self.model.currentData() or "")

    def model_choice(self) -> ModelChoice:
        name = self.model_name()
        return self._choices.get(name) or unknown_model(name)

    def _select_model(self, name: str) -> None:
        index = self.model.findData(name)
        if index < 0:  # keep a dropped image's model even if it's not installed
            add_model_item(self.model, unknown_model(name))
            index = self.model.count() - 1
        self.model.setCurrentIndex(index)

    def _model_changed(self) -> None:
        """The size presets follow the model: its native square first, then its buckets."""
        choice = self.model_choice()
        self._choosing_preset = True  # listing presets must not change the size
        self.size_preset.blockSignals(True)
        self.size_preset.clear()
        count = len(choice.presets)
        self.size_preset.addItems([choice.preset_label(i) for i in range(count)])
        self.size_preset.addItem(translate("PromptPanel", CUSTOM))
        self.size_preset.blockSignals(False)
        self._choosing_preset = False
        self._size_edited()
        self._fit_fields_to(choice)
        if self._model_note and choice.few_step is None:  # it went with its model
            self._model_note = False
            self.few_step_note.hide()

    def _fit_fields_to(self, choice: ModelChoice) -> None:
        """Offer only what the model takes: its samplers, a negative prompt if it uses one,
        and "Guidance" for a guidance-distilled model's CFG, so a job is never refused at
        submit for a field the artist could not see was wrong."""
        items = self.scheduler.model()
        for row in range(self.scheduler.count()):
            item = items.item(row)  # type: ignore[attr-defined]  # a QStandardItemModel
            item.setEnabled(choice.allows_sampler(item.text()))
        self._set_sampler(self._wanted_sampler)
        self._show_video(choice)
        self.negative.setEnabled(choice.takes_negative_prompt)
        self.negative.setToolTip(
            ""
            if choice.takes_negative_prompt
            else self.tr("{kind} takes no negative prompt: it is not used").format(kind=choice.kind)
        )
        distilled = choice.distilled_guidance
        self._cfg_caption.setText(self.tr("Guidance") if distilled else "CFG")
        self._cfg_caption.setToolTip(
            self.tr(
                "The model's distilled guidance (Flux: about 3.5), not classifier-free guidance"
            )
            if distilled
            else ""
        )

    def _sampler_picked(self) -> None:
        self._wanted_sampler = self.scheduler.currentText()

    def _set_sampler(self, name: str) -> None:
        """Show `name`, or the model's own sampler if it cannot take it; `name` is still
        what the next model that takes it gets."""
        self._wanted_sampler = name
        choice = self.model_choice()
        self.scheduler.setCurrentText(name if choice.allows_sampler(name) else choice.samplers[0])

    def _model_picked(self) -> None:
        """Chosen by the user: a size the model offers stays; any other becomes its native one."""
        if self.model_choice().presets and self._size() not in self.model_choice().presets:
            self.size_preset.setCurrentIndex(0)
        self._use_few_step_model()

    def _use_few_step_model(self) -> None:
        """A few-step model's steps, CFG and sampler into the form (a distilled LTX-Video's),
        and a note saying so; its timesteps go with the job while its steps and sampler
        stay (`_few_step_schedule`). The artist may change any of them afterwards."""
        few_step = self.model_choice().few_step
        if few_step is None:
            return
        self.steps.setValue(few_step.steps)
        self.cfg.setValue(few_step.cfg)
        self._set_sampler(few_step.sampler)
        note = self.tr("{label} {n}-step model: {steps} steps, CFG {cfg}, {sampler} with its "
                       "own timesteps")  # fmt: skip
        self.few_step_note.setText(note.format(
            label=few_step.label, n=few_step.steps, steps=few_step.steps,
            cfg=format_number(few_step.cfg), sampler=few_step.sampler,
        ))  # fmt: skip
        self.few_step_note.show()
        self._model_note = True

    def _size(self) -> tuple[int | None, int | None]:
        width, height = self.width_box.reading().value, self.height_box.reading().value
        return (None if width is None else int(width), None if height is None else int(height))

    def set_loras(self, loras: Sequence[LoraChoice | str]) -> None:
        """The LoRA list: each file by name; its size and preview picture (A1111's
        name.preview.png beside the file) in its tooltip, the picture also as its icon."""
        self.lora.clear()
        if loras:
            self.lora.addItem(self.tr("Add a LoRA…"), "")
            for lora in loras:
                choice = LoraChoice(lora) if isinstance(lora, str) else lora
                icon = QIcon(choice.preview) if choice.preview else QIcon()
                self.lora.addItem(icon, choice.name, choice.name)
                self.lora.setItemData(
                    self.lora.count() - 1, choice.tooltip(), Qt.ItemDataRole.ToolTipRole
                )
        else:
            self.lora.addItem(self.tr("No LoRA files in the models folder"), "")
        self.lora.setEnabled(bool(loras))

    def _lora_picked(self, index: int) -> None:
        name = self.lora.itemData(index)
        self.lora.setCurrentIndex(0)
        if name:
            self.prompt.textCursor().insertText(lora_tag(name))
            self.prompt.setFocus()
            self._use_few_step(name)

    def _use_few_step(self, name: str) -> None:
        """A few-step LoRA's steps, CFG and sampler into the form, and a note saying so;
        the artist may change any of them afterwards (what the form shows is submitted)."""
        from app.engine.generation.prompts.few_step import recognise  # torch-free

        found = recognise(name)
        if found is None:
            return
        row = found.row
        self.steps.setValue(found.steps)
        self.cfg.setValue(row.cfg)
        self._set_sampler(row.sampler)
        self._few_step = _FewStepInForm(name, row.sampler, found.settings()["scheduler_config"])
        values = {"label": row.label, "n": found.steps, "steps": found.steps,
                  "cfg": format_number(row.cfg), "sampler": row.sampler}  # fmt: skip
        if self._few_step.schedule:
            note = self.tr("{label} {n}-step LoRA: {steps} steps, CFG {cfg}, {sampler} with "
                           "its own schedule").format(**values)  # fmt: skip
        else:
            note = self.tr("{label} {n}-step LoRA: {steps} steps, CFG {cfg}, {sampler}").format(
                **values
            )
        if row.weight_note:
            weight = self.tr("Its authors use it at weight {weight}.")
            note += ". " + weight.format(weight=row.weight_note)
        self.few_step_note.setText(note)
        self.few_step_note.show()
        self._model_note = False

    def _few_step_schedule(self) -> str:
        """The picked few-step LoRA's schedule while its tag is in the prompt and its sampler
        is picked; "" otherwise (the model's own schedule)."""
        few_step = self._few_step
        if not few_step.schedule or self.scheduler.currentText() != few_step.sampler:
            return ""
        in_prompt = f"<lora:{few_step.lora}".lower() in self.prompt.toPlainText().lower()
        return few_step.schedule if in_prompt else ""

    def _model_schedule(self) -> str:
        """A few-step model's schedule while its steps and sampler are shown; "" otherwise
        (the family's own schedule of the steps shown)."""
        model = self.model_choice().few_step
        if model is None or self.scheduler.currentText() != model.sampler:
            return ""
        return model.schedule if int(number_in(self.steps)) == model.steps else ""

    def _few_step_tag_edited(self) -> None:
        """The note goes with the LoRA's tag (the fields keep what they show)."""
        lora = self._few_step.lora
        if lora and f"<lora:{lora}".lower() not in self.prompt.toPlainText().lower():
            self._few_step = _NO_FEW_STEP
            self.few_step_note.hide()

    def number_fields(self) -> tuple[NumberEdit, ...]:
        fields: tuple[NumberEdit, ...] = (
            self.steps, self.cfg, self.seed, self.width_box, self.height_box, self.count,
        )  # fmt: skip
        if self.draws_video():
            fields = (*fields, self.frames, self.fps)
        if self.last_frame.strength_in_use() and self.model_choice().takes_last_image:
            fields = (*fields, self.last_frame.strength, self.last_frame.frame)
        if self._weighs_init():
            return (*fields, self.image_strength)
        return fields if self.init is None else (*fields, self.strength)

    def problems(self) -> list[tuple[NumberEdit, str]]:
        """Each number field whose text cannot be used, with the sentence saying why."""
        readings = ((edit, edit.reading()) for edit in self.number_fields())
        return [(edit, r.problem) for edit, r in readings if r.problem is not None]

    def params(self) -> GenerationParams:
        """Exactly the form on screen, or InvalidParameters naming every unusable number.

        The engine checks prompt and model again at submit; numbers are read here from the
        text shown, so nothing older or clamped is ever submitted.
        """
        problems = self.problems()
        if problems:
            raise InvalidParameters("; ".join(problem for _edit, problem in problems))
        seed = self.seed.reading().value
        strength = 1.0 if self.init is None else float(number_in(self.strength))
        return self._as_clip(self.speed.applied(GenerationParams(
            prompt=self.prompt.toPlainText(), negative_prompt=self._negative_prompt(),
            model=self.model_name() or DEFAULT_MODEL,
            scheduler=self.scheduler.currentText(), steps=int(number_in(self.steps)),
            cfg=float(number_in(self.cfg)), width=int(number_in(self.width_box)),
            height=int(number_in(self.height_box)),
            seed=RANDOM_SEED if seed is None else int(seed), strength=strength,
            scheduler_config=self._few_step_schedule() or self._model_schedule(),
        )))  # fmt: skip

    def _as_clip(self, params: GenerationParams) -> GenerationParams:
        """A video model's job: a clip of the frames and rate on screen; else `params`."""
        if not self.draws_video():
            return params
        frames, fps = int(number_in(self.frames)), int(number_in(self.fps))
        return replace(params, kind=KIND_VIDEO, frames=frames, fps=fps, **self._strengths())

    def _strengths(self) -> dict[str, Any]:
        """How firmly the clip holds its images, on a model that weighs them (else stock's)."""
        strengths: dict[str, Any] = {}
        if self._weighs_init():
            strengths["image_strength"] = float(number_in(self.image_strength))
        if self.last_png() is not None and self.last_frame.strength_in_use():
            strengths["last_image_strength"] = float(number_in(self.last_frame.strength))
            frame = self.last_frame.frame.reading().value  # None: the clip's last
            strengths["last_image_frame"] = LAST_FRAME if frame is None else int(frame)
        return strengths

    def _negative_prompt(self) -> str:
        """The negative prompt, or "" for a model that takes none (the field is greyed out;
        its text stays there for the next model that does)."""
        return self.negative.toPlainText() if self.negative.isEnabled() else ""

    def image_count(self) -> int:
        """How many images Generate queues (call `params()` first: it checks this field too)."""
        return int(number_in(self.count))

    def focus_first_problem(self) -> bool:
        """Put the cursor in the first unusable number field; False if there is none."""
        problems = self.problems()
        if problems:
            edit = problems[0][0]
            edit.setFocus()
            edit.selectAll()
        return bool(problems)

    def set_params(self, p: GenerationParams) -> None:
        # A job's schedule comes back with it (reused, or from a dropped PNG), as its own.
        self._few_step = _FewStepInForm(_first_lora(p.prompt), p.scheduler, p.scheduler_config)
        self.few_step_note.setVisible(bool(p.scheduler_config))
        self._model_note = False
        if p.scheduler_config:
            self.few_step_note.setText(
                self.tr("The job's own schedule (a few-step LoRA's or model's)")
            )
        self.prompt.setPlainText(p.prompt)
        self.negative.setPlainText(p.negative_prompt)
        self._select_model(p.model)
        if p.scheduler in SCHEDULERS:
            self._set_sampler(p.scheduler)
        self.steps.setValue(p.steps)
        self.cfg.setValue(p.cfg)
        self.seed.setText("" if p.seed == RANDOM_SEED else str(p.seed))
        self.width_box.setValue(p.width)
        self.height_box.setValue(p.height)
        self.speed.show_params(p)
        if p.kind == KIND_VIDEO:
            self.frames.setValue(p.frames)
            self.fps.setValue(p.fps)
            self.image_strength.setValue(p.image_strength)
            self.last_frame.strength.setValue(p.last_image_strength)
            at = p.last_image_frame
            self.last_frame.frame.setText("" if at == LAST_FRAME else str(at))

    # --- remembered between runs ----------------------------------------------------------

    def remembered(self) -> dict[str, str]:
        """The settings to offer again next time (not the prompt or the seed), as shown."""
        fields = {name: edit.text() for name, edit in self._remembered_numbers().items()}
        return {"model": self.model_name(), "sampler": self.scheduler.currentText(),
                **fields, **self.speed.remembered()}  # fmt: skip

    def recall(self, saved: dict[str, str]) -> None:
        """Fill in what `remembered()` gave last time; unknown or missing entries are skipped."""
        if saved.get("model"):
            self._select_model(saved["model"])
        if saved.get("sampler") in SCHEDULERS:
            self._set_sampler(saved["sampler"])
        for name, edit in self._remembered_numbers().items():
            if name in saved:
                edit.setText(saved[name])  # shown as saved; a bad value is flagged, not fixed
        self.speed.recall(saved)

    def reset_to_defaults(self) -> None:
        self.recall(defaults_form(self.defaults))
        self.message.emit(self.tr("The defaults of Settings > New jobs are in the form"))

    def _remembered_numbers(self) -> dict[str, NumberEdit]:
        return {"steps": self.steps, "cfg": self.cfg, "width": self.width_box,
                "height": self.height_box, "images": self.count}  # fmt: skip

    def _label_generate(self) -> None:
        count = self.count.reading().value
        many = count is not None and count > 1
        self.generate.setText(
            self.tr("Generate {n} images").format(n=count) if many else self.tr("Generate")
        )

    def use_seed(self, seed: int) -> None:
        """ "Reuse this image's seed": the seed only, fixed; the rest of the form stays."""
        self.seed.setText(str(seed))
        self.message.emit(self.tr("Seed {seed} in the form").format(seed=seed))

    def _random_toggled(self, on: bool) -> None:
        if on:
            if self.seed.reading().value is not None:
                self._fixed_seed = self.seed.text()
            self.seed.setText("")
        elif self.seed.reading().value is None:  # the fixed seed it had, or a new one
            self.seed.setText(self._fixed_seed or str(random.randint(0, MAX_SEED)))

    def _seed_typed(self) -> None:
        random_now = self.seed.reading().ok and self.seed.reading().value is None
        if self.random_seed.isChecked() != random_now:
            self.random_seed.blockSignals(True)
            self.random_seed.setChecked(random_now)
            self.random_seed.blockSignals(False)

    def _note_size(self) -> None:
        """Say beside the size what the model will make of it, before Generate."""
        choice = self.model_choice()
        width, height = self._size()
        note = choice.size_note(width, height)
        self.size_box.setVisible(bool(note))
        self.size_note.setText(note)
        refused = choice.too_large(width, height)
        self.size_note.setProperty("invalid", refused)
        self.size_note.style().unpolish(self.size_note)
        self.size_note.style().polish(self.size_note)
        offer = bool(note) and bool(choice.presets) and choice.native_size > 0
        self.native_upscale.setVisible(offer)
        if offer:
            w, h = choice.presets[0]
            self.native_upscale.setText(
                self.tr("Generate at {w}×{h}, then upscale").format(w=w, h=h)
            )

    def _native_then_upscale(self) -> None:
        self.size_preset.setCurrentIndex(0)  # the model's own size
        self.native_then_upscale.emit()

    def _preset_chosen(self, index: int) -> None:
        presets = self.model_choice().presets
        if 0 <= index < len(presets):
            width, height = presets[index]
            self._choosing_preset = True  # not blockSignals: the notes must follow
            self.width_box.setValue(width)
            self.height_box.setValue(height)
            self._choosing_preset = False

    def _size_edited(self) -> None:
        self._note_size()
        if self._choosing_preset:
            return
        presets, size = self.model_choice().presets, self._size()
        self.size_preset.blockSignals(True)
        self.size_preset.setCurrentIndex(presets.index(size) if size in presets else len(presets))
        self.size_preset.blockSignals(False)

    # --- dropping a PNG -----------------------------------------------------------------------

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if has_image(event.mimeData()):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        if has_image(event.mimeData()):
            event.acceptProposedAction()
            self.take_image(event.mimeData())

    def load_png(self, path: Path) -> bool:
        """Fill the form from `path` now, on the calling thread (scripts and tests; a drop
        reads on `png_runner`); False, with the problem shown, if it has no settings."""
        found = _params_or_reason(path)
        if isinstance(found, NoParameters):
            self.problem.emit(str(found))
            return False
        self._use_parsed(path, found)
        return True

    def _use_parsed(self, path: Path, parsed: ParsedParams) -> None:
        self.set_params(parsed.params)
        self.settings_read.emit(parsed)
        note = self.tr("Settings from {name}").format(name=path.name)
        self.message.emit("; ".join([note, *parsed.warnings]))


def _params_or_reason(path: Path) -> ParsedParams | NoParameters:
    """The settings in a PNG, or why there are none (returned, not raised: an expected
    answer, not a failure for the runner to log)."""
    try:
        return read_png_params(path)
    except NoParameters as error:
        return error


def defaults_form(defaults: JobDefaults) -> dict[str, str]:
    """The defaults as `PromptPanel.recall` takes them: the texts of the fields."""
    numbers = {"steps": defaults.steps, "cfg": defaults.cfg, "width": defaults.width,
               "height": defaults.height, "images": defaults.images}  # fmt: skip
    return {"model": defaults.model, "sampler": defaults.sampler,
            **{name: format_number(value) for name, value in numbers.items()}}  # fmt: skip


def add_model_item(box: QComboBox, choice: ModelChoice) -> None:
    """A model in a picker; an unsupported one is listed but disabled, its reason the tooltip."""
    box.addItem(choice.label(), choice.name)
    index = box.count() - 1
    if not choice.supported:
        item = box.model().item(index)  # type: ignore[attr-defined]
        item.setEnabled(False)
        box.setItemData(index, choice.unsupported_reason, Qt.ItemDataRole.ToolTipRole)


@dataclass(frozen=True)
class _FewStepInForm:
    lora: str  # its name in the prompt's tag
    sampler: str
    schedule: str  # the job's scheduler_config while the tag and sampler stay


_NO_FEW_STEP = _FewStepInForm("", "", "")


def _first_lora(prompt: str) -> str:
    """The name of the prompt's first `<lora:...>` tag ("" for none)."""
    start = prompt.lower().find("<lora:")
    return prompt[start + 6 :].split(":")[0].split(">")[0] if start >= 0 else ""


def lora_tag(name: str) -> str:
    """A1111's syntax for a LoRA at full weight; the user edits the weight in the prompt."""
    return f"<lora:{name}:1>"


def _dropped_image(urls: Sequence[QUrl]) -> Path | None:
    for url in urls:
        if url.isLocalFile() and url.toLocalFile().lower().endswith(IMAGE_SUFFIXES):
            return Path(url.toLocalFile())
    return None


def has_image(mime: QMimeData) -> bool:
    """Is there an image in `mime` (pixels, or a local image file)?"""
    return mime.hasImage() or _dropped_image(mime.urls()) is not None


def _png_bytes(image: QImage) -> bytes:
    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    # The stubs ask for bytes; PySide itself refuses them and takes the str.
    image.save(buffer, "PNG")  # type: ignore[call-overload]
    return bytes(buffer.data().data())


def _title(text: str) -> QLabel:
    label = QLabel(text)
    label.setObjectName("sectionTitle")
    return label

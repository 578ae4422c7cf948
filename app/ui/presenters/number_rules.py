"""What each numeric field of the prompt form accepts, and what to say when it does not.

The form reads the text on screen through these rules, so a job is submitted with exactly
what the artist sees or refused with the reason; nothing is clamped or reverted quietly.
The bounds are the engine's (`app.engine.jobs.params`), which the queue checks again at submit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from app.engine.jobs.params import (
    LAST_FRAME,
    MAX_CFG,
    MAX_FPS,
    MAX_FRAMES,
    MAX_IMAGES,
    MAX_SEED,
    MAX_SIZE,
    MAX_STEPS,
    MIN_CFG,
    MIN_SIZE,
    MIN_STEPS,
    SIZE_MULTIPLE,
)
from app.ui.presenters.i18n import QT_TRANSLATE_NOOP, translate

_WHOLE = re.compile(r"[-+]?[0-9]+")
_DECIMAL = re.compile(r"[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)")


@dataclass(frozen=True)
class Reading:
    """A field's text, read: its value, or why it cannot be used (`problem`, a sentence).

    `value` is None when the field is blank and blank is allowed (the seed: random).
    `short` says the same as `problem` in a few words, for the note next to the field.
    """

    value: int | float | None = None
    problem: str | None = None
    short: str = ""

    @property
    def ok(self) -> bool:
        return self.problem is None


@dataclass(frozen=True)
class NumberRule:
    name: str
    low: int | float
    high: int | float
    decimals: int = 0  # 0: whole numbers only
    multiple: int = 1
    blank: str | None = None  # what an empty field means, if it may be empty
    # A number that means the same as an empty field (the seed's -1: random, as in A1111).
    means_blank: int | None = None

    @property
    def label(self) -> str:
        """The field's name in the window's language (`name` stays the English key)."""
        return translate("NumberRule", self.name)

    @property
    def blank_text(self) -> str:
        return translate("NumberRule", self.blank) if self.blank else ""

    def range_text(self) -> str:
        text = f"{format_number(self.low)}–{format_number(self.high)}"
        if self.multiple > 1:
            text += f", ×{self.multiple}"
        return text  # a field that may be blank says so in its placeholder

    def read(self, text: str) -> Reading:
        text = text.strip()
        if not text:
            if self.blank is not None:
                return Reading()
            return self._refuse(
                translate("NumberRule", "{name} is empty: type a number from {low} to {high}"),
                translate("NumberRule", "empty"),
            )
        value = self.parse(text)
        if value is not None and value == self.means_blank and self.blank is not None:
            return Reading()
        if value is None:
            if self.decimals == 0:
                problem = translate("NumberRule", "{name} must be a whole number, not {text}")
            else:
                problem = translate("NumberRule", "{name} must be a number, not {text}")
            return self._refuse(problem, translate("NumberRule", "not a number"), text=repr(text))
        if not self.low <= value <= self.high:
            return self._refuse(
                translate("NumberRule", "{name} must be between {low} and {high}, not {value}"),
                translate("NumberRule", "max {high}")
                if value > self.high
                else translate("NumberRule", "min {low}"),
                value=format_number(value),
            )
        if round(value, self.decimals) != value:
            return self._refuse(
                translate("NumberRule", "{name} takes at most {decimals} decimals, not {text}"),
                translate("NumberRule", "{decimals} decimals max"),
                text=text,
            )
        if self.multiple > 1 and value % self.multiple:
            return self._refuse(
                translate("NumberRule", "{name} must be a multiple of {multiple}, not {value}"),
                translate("NumberRule", "×{multiple} only"),
                value=format_number(value),
            )
        return Reading(value=value)

    def parse(self, text: str) -> int | float | None:
        """The number written in `text` (in range or not), or None if it is not one."""
        pattern = _WHOLE if self.decimals == 0 else _DECIMAL
        if not pattern.fullmatch(text.strip()):  # int() would also take "1_000" or "٣"
            return None
        return int(text) if self.decimals == 0 else float(text)

    def clamp(self, value: int | float) -> int | float:
        """The nearest accepted value (for stepping with arrow keys or the wheel)."""
        value = min(max(value, self.low), self.high)
        if self.multiple > 1:
            value = max(self.low, value - value % self.multiple)
        return round(value, self.decimals) if self.decimals else int(value)

    def _refuse(self, problem: str, short: str, **values: str) -> Reading:
        """`problem` and `short` are templates filled with the rule's figures and `values`."""
        figures = {"name": self.label, "low": format_number(self.low),
                   "high": format_number(self.high), "decimals": str(self.decimals),
                   "multiple": str(self.multiple), **values}  # fmt: skip
        return Reading(problem=problem.format(**figures), short=short.format(**figures))


def format_number(value: int | float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


STEPS = NumberRule(QT_TRANSLATE_NOOP("NumberRule", "Steps"), MIN_STEPS, MAX_STEPS)
CFG = NumberRule("CFG", MIN_CFG, MAX_CFG, decimals=2)
WIDTH = NumberRule(
    QT_TRANSLATE_NOOP("NumberRule", "Width"), MIN_SIZE, MAX_SIZE, multiple=SIZE_MULTIPLE
)
HEIGHT = NumberRule(
    QT_TRANSLATE_NOOP("NumberRule", "Height"), MIN_SIZE, MAX_SIZE, multiple=SIZE_MULTIPLE
)
IMAGES = NumberRule(QT_TRANSLATE_NOOP("NumberRule", "Images"), 1, MAX_IMAGES)
SEED = NumberRule(
    QT_TRANSLATE_NOOP("NumberRule", "Seed"), 0, MAX_SEED,
    blank=QT_TRANSLATE_NOOP("NumberRule", "random"), means_blank=-1,
)  # fmt: skip
STRENGTH = NumberRule(QT_TRANSLATE_NOOP("NumberRule", "Strength"), 0.01, 1.0, decimals=2)
FRAMES = NumberRule(QT_TRANSLATE_NOOP("NumberRule", "Frames"), 1, MAX_FRAMES)
# How firmly a clip holds an image (LTX-Video 0.9.5+'s conditioning strength; 1: exactly).
IMAGE_STRENGTH = NumberRule(QT_TRANSLATE_NOOP("NumberRule", "Image strength"), 0, 1.0, decimals=2)
LAST_FRAME_STRENGTH = NumberRule(
    QT_TRANSLATE_NOOP("NumberRule", "Last frame strength"), 0, 1.0, decimals=2
)
# Where the last image goes in the clip (blank: its last frame, as `LAST_FRAME` says).
LAST_FRAME_AT = NumberRule(
    QT_TRANSLATE_NOOP("NumberRule", "Last frame at"), 1, MAX_FRAMES - 1,
    blank=QT_TRANSLATE_NOOP("NumberRule", "the end"), means_blank=LAST_FRAME,
)  # fmt: skip
FPS = NumberRule(QT_TRANSLATE_NOOP("NumberRule", "FPS"), 1, MAX_FPS)

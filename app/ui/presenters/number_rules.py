"""What each numeric field of the prompt form accepts, and what to say when it does not.

The form reads the text on screen through these rules, so a job is submitted with exactly
what the artist sees or refused with the reason; nothing is clamped or reverted quietly.
The bounds are the engine's (`app.engine.params`), which the queue checks again at submit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from app.engine.params import (
    MAX_CFG,
    MAX_SEED,
    MAX_SIZE,
    MAX_STEPS,
    MIN_CFG,
    MIN_SIZE,
    MIN_STEPS,
    SIZE_MULTIPLE,
)

MAX_IMAGES = 16  # one click queues at most this many jobs
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
            return self._refuse(f"{self.name} is empty: type a number from {self._span()}", "empty")
        value = self.parse(text)
        if value is None:
            kind = "a whole number" if self.decimals == 0 else "a number"
            return self._refuse(f"{self.name} must be {kind}, not {text!r}", "not a number")
        if not self.low <= value <= self.high:
            return self._refuse(
                f"{self.name} must be between {self._span(' and ')}, not {format_number(value)}",
                f"max {format_number(self.high)}"
                if value > self.high
                else f"min {format_number(self.low)}",
            )
        if round(value, self.decimals) != value:
            return self._refuse(
                f"{self.name} takes at most {self.decimals} decimals, not {text}",
                f"{self.decimals} decimals max",
            )
        if self.multiple > 1 and value % self.multiple:
            return self._refuse(
                f"{self.name} must be a multiple of {self.multiple}, not {format_number(value)}",
                f"×{self.multiple} only",
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

    def _span(self, joiner: str = " to ") -> str:
        return f"{format_number(self.low)}{joiner}{format_number(self.high)}"

    def _refuse(self, problem: str, short: str) -> Reading:
        return Reading(problem=problem, short=short)


def format_number(value: int | float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


STEPS = NumberRule("Steps", MIN_STEPS, MAX_STEPS)
CFG = NumberRule("CFG", MIN_CFG, MAX_CFG, decimals=2)
WIDTH = NumberRule("Width", MIN_SIZE, MAX_SIZE, multiple=SIZE_MULTIPLE)
HEIGHT = NumberRule("Height", MIN_SIZE, MAX_SIZE, multiple=SIZE_MULTIPLE)
IMAGES = NumberRule("Images", 1, MAX_IMAGES)
SEED = NumberRule("Seed", 0, MAX_SEED, blank="random")

"""AUTOMATIC1111's prompt syntax, parsed: which text gets which attention weight, and BREAK.

- `(word)` multiplies the attention on `word` by 1.1, `((word))` by 1.21, `[word]` divides
  by 1.1, `(word:1.3)` (or `(word: 1.3 )`) sets 1.3 (nested brackets multiply); `\\(` is a
  literal bracket, and a backslash before anything else is dropped, as in A1111.
- `BREAK` (a whole word) starts a new chunk; `prompts.weights` does the chunking.

`parse_attention` gives what A1111's `parse_prompt_attention` gives, quirks included (tested
against a model of it on generated prompts): a BREAK inside brackets is multiplied like any
text, so there it is no BREAK but the word "BREAK" at a negative weight, as in A1111.

No torch here: the submit-time checks (`request_checks`) parse prompts in the window's
process, which never imports torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from app.errors import BadInput

ROUND, SQUARE = 1.1, 1 / 1.1
BREAK = "BREAK"
BREAK_WEIGHT = -1.0  # how the parser marks a BREAK (A1111's marker)

_PIECES = re.compile(
    r"\\[()\[\]\\]"  # an escaped bracket or backslash: literal text
    r"|\\"  # a backslash that escapes nothing: dropped
    r"|:\s*([+-]?[.\d]+)\s*\)"  # ":1.3)" or ": 1.3 )" closes a weighted group
    r"|[()\[\]]"  # a bracket
    r"|[^\\()\[\]:]+|:"  # plain text (a lone ':' is text too)
)
_BREAK = re.compile(r"\s*\bBREAK\b\s*")


class UnreadableWeight(BadInput):
    """`(word:1.2.3)`: a weight that is no number (A1111 fails the generation on it)."""


@dataclass
class _Fragment:
    text: str
    weight: float


def parse_attention(prompt: str) -> list[tuple[str, float]]:
    """[(text, weight), ...] with neighbours of equal weight merged; ("BREAK", -1) marks
    a BREAK. Unclosed brackets apply to the end of the prompt, as in A1111. Raises
    `UnreadableWeight` for a weight that is no number."""
    fragments: list[_Fragment] = []
    open_round: list[int] = []
    open_square: list[int] = []

    def scale_from(start: int, factor: float) -> None:
        for fragment in fragments[start:]:  # BREAK marks too, as A1111 does
            fragment.weight *= factor

    for match in _PIECES.finditer(prompt):
        piece, weight = match.group(0), match.group(1)
        if piece.startswith("\\"):
            fragments.append(_Fragment(piece[1:], 1.0))
        elif piece == "(":
            open_round.append(len(fragments))
        elif piece == "[":
            open_square.append(len(fragments))
        elif weight is not None and open_round:
            scale_from(open_round.pop(), _number(weight))
        elif piece == ")" and open_round:
            scale_from(open_round.pop(), ROUND)
        elif piece == "]" and open_square:
            scale_from(open_square.pop(), SQUARE)
        else:
            fragments.extend(_split_breaks(piece))
    for start in open_round:
        scale_from(start, ROUND)
    for start in open_square:
        scale_from(start, SQUARE)
    return _merged(fragments)


def _number(weight: str) -> float:
    try:
        return float(weight)
    except ValueError:
        raise UnreadableWeight(
            f"the prompt weight {weight!r} is not a number (write it like (word:1.2))"
        ) from None


def check_prompt_syntax(prompt: str) -> None:
    """Raise `UnreadableWeight` now for what would fail the job when it is encoded."""
    parse_attention(prompt)


def is_break(text: str, weight: float) -> bool:
    """A parsed piece that starts a new chunk (not a multiplied "BREAK" inside brackets)."""
    return text == BREAK and weight == BREAK_WEIGHT


def _split_breaks(text: str) -> list[_Fragment]:
    parts = _BREAK.split(text)
    out = [_Fragment(parts[0], 1.0)]
    for part in parts[1:]:
        out += [_Fragment(BREAK, BREAK_WEIGHT), _Fragment(part, 1.0)]
    return out


def _merged(fragments: list[_Fragment]) -> list[tuple[str, float]]:
    """Neighbours of equal weight as one piece, whatever they are (as A1111 merges)."""
    merged: list[_Fragment] = []
    for fragment in fragments:
        if merged and merged[-1].weight == fragment.weight:
            merged[-1].text += fragment.text
        else:
            merged.append(_Fragment(fragment.text, fragment.weight))
    if not merged:
        return [("", 1.0)]
    return [(f.text, f.weight) for f in merged]

"""AUTOMATIC1111's prompt attention parser, as the oracle the app's parser is tested against.

It models `parse_prompt_attention` and its pattern `re_attention` in modules/prompt_parser.py
of AUTOMATIC1111/stable-diffusion-webui at commit 28bd8e142d5f77b71ae8d7d7140b5da1b3a49906,
behaviour for behaviour. It is written afresh as a scanner over characters, not copied: that
project's code cannot be committed here (its licence, and this project's rules for code read
from other repositories), and a second way of reading the same grammar is the better oracle
for the app's regular expression anyway. Before it was committed it was checked to give the
same answer as the upstream function itself on 200,000 generated prompts.

What upstream does, in the order its pattern tries things at each position:

- a backslash before `(`, `)`, `[`, `]` or another backslash is that character, literally;
  a backslash before anything else escapes nothing and is dropped (it becomes empty text);
- `(` and `[` open a group;
- `:` + optional whitespace + a number (`[+-]?[.\\d]+`, any Unicode digits) + optional
  whitespace + `)` closes the innermost round group with that weight; the number is read by
  `float`, which raises ValueError for `1.2.3` or `.`; with no round group open, that whole
  text is plain text;
- `)` and `]` close their innermost group (x 1.1, / 1.1), or are plain text if none is open;
- a run of anything else (no backslash, bracket or colon) is plain text, and a lone `:` too;
- plain text is split at `BREAK` (a whole word, with the whitespace around it), each BREAK
  becoming ["BREAK", -1].

Closing a group multiplies the weight of every entry since it opened, BREAK entries
included (a BREAK inside brackets is then no longer one: -1.1 is not -1). Groups left open
at the end multiply too, round ones first. Last, neighbours of equal weight are merged.
"""

from __future__ import annotations

import re

ROUND_MULTIPLIER = 1.1
SQUARE_MULTIPLIER = 1 / 1.1
ESCAPABLE = "()[]\\"
SPECIAL = "\\()[]:"  # what plain text never holds
BREAK_WORD = re.compile(r"\s*\bBREAK\b\s*", re.S)


def parse_prompt_attention(text: str) -> list[list[str | float]]:
    """[[text, weight], ...] exactly as AUTOMATIC1111 returns it (lists, as upstream)."""
    entries: list[list[str | float]] = []
    round_opened: list[int] = []
    square_opened: list[int] = []

    def multiply_from(start: int, factor: float) -> None:
        for entry in entries[start:]:
            entry[1] = float(entry[1]) * factor

    def add_text(plain: str) -> None:
        for index, part in enumerate(BREAK_WORD.split(plain)):
            if index > 0:
                entries.append(["BREAK", -1])
            entries.append([part, 1.0])

    position = 0
    while position < len(text):
        char = text[position]
        if char == "\\":
            escaped = text[position + 1 : position + 2]
            literal = escaped if escaped and escaped in ESCAPABLE else ""
            entries.append([literal, 1.0])
            position += 1 + len(literal)
        elif char in "([":
            (round_opened if char == "(" else square_opened).append(len(entries))
            position += 1
        elif char == ":":
            weight, end = _weight_at(text, position)
            if weight is not None and round_opened:
                multiply_from(round_opened.pop(), float(weight))
            else:
                add_text(text[position:end])
            position = end
        elif char == ")" and round_opened:
            multiply_from(round_opened.pop(), ROUND_MULTIPLIER)
            position += 1
        elif char == "]" and square_opened:
            multiply_from(square_opened.pop(), SQUARE_MULTIPLIER)
            position += 1
        elif char in ")]":
            add_text(char)
            position += 1
        else:
            end = position
            while end < len(text) and text[end] not in SPECIAL:
                end += 1
            add_text(text[position:end])
            position = end
    for start in round_opened:
        multiply_from(start, ROUND_MULTIPLIER)
    for start in square_opened:
        multiply_from(start, SQUARE_MULTIPLIER)
    return _merged(entries) if entries else [["", 1.0]]


def _weight_at(text: str, colon: int) -> tuple[str | None, int]:
    """(the number, where the weight's `)` ends) if a weight starts at `colon`; else
    (None, just past the colon): then the colon is plain text on its own."""
    position = _skip_space(text, colon + 1)
    start = position
    if position < len(text) and text[position] in "+-":
        position += 1
    digits = position
    while position < len(text) and (text[position] == "." or text[position].isdecimal()):
        position += 1
    if position == digits:
        return None, colon + 1
    number = text[start:position]
    position = _skip_space(text, position)
    if position < len(text) and text[position] == ")":
        return number, position + 1
    return None, colon + 1


def _skip_space(text: str, position: int) -> int:
    while position < len(text) and text[position].isspace():  # what `\s` matches in `re`
        position += 1
    return position


def _merged(entries: list[list[str | float]]) -> list[list[str | float]]:
    merged = [entries[0]]
    for text, weight in entries[1:]:
        if merged[-1][1] == weight:
            merged[-1][0] = str(merged[-1][0]) + str(text)
        else:
            merged.append([text, weight])
    return merged

"""Wildcards and dynamic prompts, expanded at submit (pure: no torch, no Qt, no database).

The syntax of the Dynamic Prompts extension that AUTOMATIC1111's users know:

- `{red|green|blue}`: one of the choices; `{2$$red|green|blue}`: two different ones,
  joined by ", " (`{2$$ and $$red|green|blue}`: joined by " and ");
- `__colors__`: one line of `colors.txt` in the wildcards folder; `__colors/warm__`: of
  `colors/warm.txt` (folders nest). Empty lines and lines starting with `#` are skipped;
  a line may itself hold choices and wildcards.

Random expansion draws with `random.Random(seed)`, the job's own seed, so a job always
expands the same way (and a re-run or a resumed job keeps its prompt, which is stored
expanded beside its template). Combinatorial expansion lists every combination, in order,
for a batch of one job each. A missing file, or a file that includes itself (directly or
through others), is refused before anything is stored, naming the file. A wildcard is a
name inside the wildcards folder, never a path: an absolute name, `..` and a file a link
takes outside the folder are refused, naming the wildcard.
"""

from __future__ import annotations

import itertools
import math
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from app.engine.jobs.params import InvalidParameters
from app.engine.paths import is_inside, looks_like_path

DEFAULT_JOINER = ", "
MAX_COMBINATIONS = 100_000  # counted, never listed, beyond this; a batch is far smaller
_WILDCARD = re.compile(r"__([\w.\- /]+?)__")
_COUNT = re.compile(r"\s*(\d+)\s*\$\$(?:([^|{}$]*)\$\$)?")


class WildcardError(InvalidParameters):
    """A prompt whose wildcards cannot be expanded; the message names the file or place."""


# --- parsing ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Wildcard:
    name: str  # "colors/warm"


@dataclass(frozen=True)
class Choice:
    options: tuple[Seq, ...]
    count: int = 1
    joiner: str = DEFAULT_JOINER


@dataclass(frozen=True)
class Seq:
    parts: tuple[str | Wildcard | Choice, ...] = field(default=())


def has_dynamic_syntax(prompt: str) -> bool:
    return "{" in prompt or bool(_WILDCARD.search(prompt))


def parse(text: str) -> Seq:
    """The template as a tree; `WildcardError` for an unclosed or stray brace."""
    seq, end = _parse_seq(text, 0, top=True)
    assert end == len(text)
    return seq


def _parse_seq(text: str, i: int, *, top: bool) -> tuple[Seq, int]:
    parts: list[str | Wildcard | Choice] = []
    literal: list[str] = []
    while i < len(text):
        char = text[i]
        if char == "{":
            _flush(literal, parts)
            choice, i = _parse_choice(text, i + 1)
            parts.append(choice)
            continue
        if char in "|}":
            if top:
                if char == "}":
                    raise WildcardError(f"a '}}' at character {i + 1} closes no '{{'")
                literal.append(char)  # a bar outside braces is just text
                i += 1
                continue
            break
        literal.append(char)
        i += 1
    _flush(literal, parts)
    return Seq(tuple(parts)), i


def _parse_choice(text: str, i: int) -> tuple[Choice, int]:
    start = i
    count, joiner = 1, DEFAULT_JOINER
    if match := _COUNT.match(text, i):
        count = int(match.group(1))
        joiner = match.group(2) if match.group(2) is not None else DEFAULT_JOINER
        i = match.end()
    options: list[Seq] = []
    while True:
        option, i = _parse_seq(text, i, top=False)
        options.append(option)
        if i >= len(text):
            raise WildcardError(f"the '{{' at character {start} is never closed")
        if text[i] == "}":
            break
        i += 1  # past "|"
    if count < 1:
        raise WildcardError(f"the choice at character {start} asks for {count} options")
    return Choice(tuple(options), count, joiner), i + 1


def _flush(literal: list[str], parts: list[str | Wildcard | Choice]) -> None:
    if not literal:
        return
    text = "".join(literal)
    literal.clear()
    last = 0
    for match in _WILDCARD.finditer(text):
        if match.start() > last:
            parts.append(text[last : match.start()])
        parts.append(Wildcard(match.group(1).strip()))
        last = match.end()
    if last < len(text):
        parts.append(text[last:])


# --- the wildcards folder --------------------------------------------------------------------


class WildcardFiles:
    """The files of a wildcards folder, read once each, checked for missing files and loops."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self._lines: dict[str, tuple[Seq, ...]] = {}

    def path(self, name: str) -> Path:
        """The file of wildcard `name`, inside the folder; a path or `..` is refused."""
        if self.folder is None:
            raise WildcardError(f"__{name}__ needs a wildcards folder, and none is set")
        if looks_like_path(name) or name.startswith(("/", "\\")):
            raise WildcardError(
                f"wildcard __{name}__ is not a name in the wildcards folder (no absolute "
                "path or '..')"
            )
        return self.folder / f"{name}.txt"

    def lines(self, name: str) -> tuple[Seq, ...]:
        if name not in self._lines:
            path = self.path(name)
            if not path.is_file():
                raise WildcardError(f"wildcard __{name}__: there is no file {path}")
            if not is_inside(path, [self.folder or path.parent]):
                raise WildcardError(
                    f"wildcard __{name}__ links outside the wildcards folder; only files in "
                    "it are read"
                )
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as error:
                raise WildcardError(f"wildcard file {path} cannot be read: {error}") from error
            entries = [line.strip() for line in text.splitlines()]
            kept = [line for line in entries if line and not line.startswith("#")]
            if not kept:
                raise WildcardError(f"wildcard file {path} has no lines to choose from")
            try:
                self._lines[name] = tuple(parse(line) for line in kept)
            except WildcardError as error:
                raise WildcardError(f"wildcard file {path}: {error}") from error
        return self._lines[name]

    def check(self, seq: Seq, stack: tuple[str, ...] = ()) -> None:
        """Every file `seq` can reach exists and none includes itself."""
        for name in _wildcards_in(seq):
            if name in stack:
                loop = " -> ".join(f"{n}.txt" for n in (*stack[stack.index(name) :], name))
                raise WildcardError(f"wildcard file {self.path(name)} includes itself ({loop})")
            for line in self.lines(name):
                self.check(line, (*stack, name))


def _wildcards_in(seq: Seq) -> Iterator[str]:
    for part in seq.parts:
        if isinstance(part, Wildcard):
            yield part.name
        elif isinstance(part, Choice):
            for option in part.options:
                yield from _wildcards_in(option)


# --- expanding -------------------------------------------------------------------------------


def expand_random(template: str, seed: int, folder: Path | None = None) -> str:
    """The template with every choice and wildcard drawn with `seed` (deterministic)."""
    files = WildcardFiles(folder)
    tree = parse(template)
    files.check(tree)
    return _draw(tree, random.Random(seed), files)


def _draw(seq: Seq, rng: random.Random, files: WildcardFiles) -> str:
    out = []
    for part in seq.parts:
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, Wildcard):
            out.append(_draw(rng.choice(files.lines(part.name)), rng, files))
        else:
            picked = rng.sample(part.options, min(part.count, len(part.options)))
            out.append(part.joiner.join(_draw(option, rng, files) for option in picked))
    return "".join(out)


def count_combinations(template: str, folder: Path | None = None) -> int:
    files = WildcardFiles(folder)
    tree = parse(template)
    files.check(tree)
    return _count(tree, files)


def _count(seq: Seq, files: WildcardFiles) -> int:
    total = 1
    for part in seq.parts:
        if isinstance(part, Wildcard):
            total *= sum(_count(line, files) for line in files.lines(part.name))
        elif isinstance(part, Choice):
            k = min(part.count, len(part.options))
            counts = [_count(option, files) for option in part.options]
            total *= sum(math.prod(c) for c in itertools.combinations(counts, k))
        total = min(total, MAX_COMBINATIONS + 1)
    return total


def expand_all(template: str, folder: Path | None = None, *, limit: int) -> list[str]:
    """Every expansion, in order (combinatorial); refused beyond `limit` of them."""
    files = WildcardFiles(folder)
    tree = parse(template)
    files.check(tree)
    count = _count(tree, files)
    if count > limit:
        shown = f"more than {MAX_COMBINATIONS}" if count > MAX_COMBINATIONS else str(count)
        raise WildcardError(f"the prompt has {shown} combinations; at most {limit} can be queued")
    return list(_every(tree, files))


def _every(seq: Seq, files: WildcardFiles) -> Iterator[str]:
    choices = [list(_every_part(part, files)) for part in seq.parts]
    for combination in itertools.product(*choices):
        yield "".join(combination)


def _every_part(part: str | Wildcard | Choice, files: WildcardFiles) -> Iterator[str]:
    if isinstance(part, str):
        yield part
    elif isinstance(part, Wildcard):
        for line in files.lines(part.name):
            yield from _every(line, files)
    else:
        k = min(part.count, len(part.options))
        for picked in itertools.combinations(part.options, k):
            for texts in itertools.product(*(list(_every(option, files)) for option in picked)):
                yield part.joiner.join(texts)


def check_template(template: str, folder: Path | None) -> None:
    """Refuse a template that cannot be expanded (syntax, missing files, loops)."""
    files = WildcardFiles(folder)
    files.check(parse(template))

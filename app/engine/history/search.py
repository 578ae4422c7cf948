"""Search and filter the jobs: prompt words, status, model, size, dates, favourites.

The words go through the store's full-text index (`app.models.search_index`), which is
SQLite FTS5 or PostgreSQL's tsvector; this module only parses what the user typed.
Search syntax: words must all appear (`red circle`), `"a phrase"` keeps words together,
`-word` leaves out jobs that have it, `word*` matches words that start with it and
`neg:word` looks in the negative prompt.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, replace

from sqlalchemy import ColumnElement, Select, select

from app.engine.jobs.queue import DEFAULT_PAGE_SIZE, JobQueue
from app.engine.jobs.states import JobStatus
from app.errors import UserError
from app.models.search_index import Term, prompt_matches
from app.models.tables import JOB, Job

# Words as the full-text index sees them (FTS5 unicode61): runs of letters and digits.
WORD = re.compile(r"[^\W_]+")
NEGATIVE_PREFIX = "neg:"
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$", re.IGNORECASE)
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class BadSearch(UserError):
    """What the user typed cannot be understood as a search (one sentence why)."""


def words_of(text: str) -> list[str]:
    return WORD.findall(text.casefold())


def parse_search(text: str) -> list[Term]:
    """The terms of a search box's text; `BadSearch` for an unclosed quote or an empty term."""
    try:
        parts = shlex.split(text, posix=True)
    except ValueError:
        raise BadSearch(f"The search {text!r} has a quote that is never closed") from None
    return [_term(part, text) for part in parts]


def _term(part: str, text: str) -> Term:
    excluded = part.startswith("-")
    part = part[1:] if excluded else part
    negative = part.casefold().startswith(NEGATIVE_PREFIX)
    part = part[len(NEGATIVE_PREFIX) :] if negative else part
    prefix = part.endswith("*")
    words = words_of(part.rstrip("*"))
    if not words:
        raise BadSearch(f"The search {text!r} has a term with no letters or digits: {part!r}")
    return Term(tuple(words), prefix=prefix, excluded=excluded, negative_prompt=negative)


def parse_duration(text: str) -> float:
    """Seconds in `30d`, `12h`, `90m`, `2w`, `45s`; `BadSearch` for anything else."""
    match = _DURATION.match(text)
    if match is None:
        raise BadSearch(
            f"{text!r} is not a duration; write a number and a unit, like 30d, 12h, 90m or 2w"
        )
    return float(match.group(1)) * _SECONDS[match.group(2).lower()]


@dataclass(frozen=True)
class JobFilter:
    """Which jobs to show. Every field left at its default lets every job through."""

    text: str = ""
    statuses: frozenset[JobStatus] = frozenset()
    model: str | None = None
    size: tuple[int, int] | None = None
    since: float | None = None  # created at or after (Unix seconds)
    until: float | None = None  # created before
    starred: bool | None = None

    @property
    def is_everything(self) -> bool:
        return not self.text.strip() and replace(self, text="") == JobFilter()

    def where(self, dialect: str) -> list[ColumnElement[bool]]:
        clauses = [prompt_matches(dialect, parse_search(self.text))] if self.text.strip() else []
        if self.statuses:
            clauses.append(JOB.c.status.in_(sorted(s.value for s in self.statuses)))
        if self.model is not None:
            clauses.append(JOB.c.model == self.model)
        if self.size is not None:
            clauses += [JOB.c.width == self.size[0], JOB.c.height == self.size[1]]
        if self.since is not None:
            clauses.append(JOB.c.created_at >= self.since)
        if self.until is not None:
            clauses.append(JOB.c.created_at < self.until)
        if self.starred is not None:
            clauses.append(JOB.c.starred.is_(self.starred))
        return clauses


def search_query(job_filter: JobFilter, dialect: str, limit: int | None) -> Select[tuple[Job]]:
    query = select(JOB).where(*job_filter.where(dialect)).order_by(JOB.c.id.desc())
    return query.limit(limit)


def search(
    queue: JobQueue, job_filter: JobFilter, *, limit: int | None = DEFAULT_PAGE_SIZE
) -> list[Job]:
    """The jobs that pass `job_filter`, newest first (`BadSearch` for malformed text)."""
    query = search_query(job_filter, queue.db.engine.dialect.name, limit)
    with queue.db.read() as conn:
        return [Job.model_validate(row._mapping) for row in conn.execute(query)]

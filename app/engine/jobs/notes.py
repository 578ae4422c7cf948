"""Job notes: facts about a job that are not a change of its status, shown in its timeline.

A transition row is a status change and nothing else (`JobQueue.fire`). What happens to a
job after its last transition, such as each try of an HTTP callback told of its final
status and how it went, is a note: a `job_note` row (schema 14), written in a small
transaction of its own after the fact (never inside a transition's, so it can never hold
one up), and read beside the transitions wherever a timeline is shown: the window,
`python -m app show`, `/api/v1/jobs/<id>`.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, select

from app.models.db import Database
from app.models.tables import JOB_NOTE, JobNote, JobTransition

CALLBACK_SOURCE = "callback"  # the notes of the server's callback tries (server/callbacks.py)


def notes_of(db: Database, job_id: int) -> list[JobNote]:
    with db.read() as conn:
        return notes_in(conn, job_id)


def notes_in(conn: Connection, job_id: int) -> list[JobNote]:
    """The job's notes, oldest first, read in the caller's transaction."""
    query = select(JOB_NOTE).where(JOB_NOTE.c.job_id == job_id).order_by(JOB_NOTE.c.id)
    return [JobNote.model_validate(row._mapping) for row in conn.execute(query)]


def merged(
    transitions: Sequence[JobTransition], notes: Sequence[JobNote]
) -> list[JobTransition | JobNote]:
    """One timeline: transitions and notes in the order they happened (a note of the same
    moment as a transition comes after it: it tells what followed from it)."""
    rows: list[JobTransition | JobNote] = [*transitions, *notes]
    return sorted(rows, key=lambda row: (row.at, isinstance(row, JobNote)))

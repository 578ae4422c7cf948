"""Retention: remove old finished jobs, their history and checkpoints (images if asked).

Never removed: starred jobs, and every job that may still run or be resumed (pending,
running, paused, blocked, or failed and not given up). A job is looked at again inside
the transaction that removes it, so one that moved meanwhile (a retry by hand) is kept.
The database gives the freed space back to the disk afterwards (`models.db.compact`).
Two prunes at once (several machines on PostgreSQL) take turns batch by batch, so each job
is removed, and reported, once.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Select,
    and_,
    delete,
    func,
    or_,
    select,
    update,
)

from app.engine import paths
from app.engine.generation.loop.checkpoint_files import Claim, earlier_files
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.engine.paths import is_inside
from app.engine.settings import Settings, load_settings
from app.models.db import compact
from app.models.tables import JOB, JOB_FILE, JOB_INPUT, JOB_NOTE, JOB_PARENT, TRANSITION

log = logging.getLogger(__name__)

PRUNES_KEY = 0x45A5E2  # prunes on every machine take it, one batch at a time; any fixed number
BATCH = 500  # jobs removed per transaction: short write locks, so workers keep claiming
DONE = (JobStatus.SUCCESS.value, JobStatus.CANCELLED.value)
GIVEN_UP_POSSIBLE = (JobStatus.FAILED.value, JobStatus.TIMEOUT.value)


@dataclass(frozen=True)
class RetentionRule:
    """Remove finished jobs older than `older_than_s`, and beyond the newest `keep` ones."""

    older_than_s: float | None = None
    keep: int | None = None

    @property
    def keeps_everything(self) -> bool:
        return self.older_than_s is None and self.keep is None


@dataclass
class PruneReport:
    removed: list[int] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # one sentence per job kept, and why
    history_rows: int = 0
    file_bytes: int = 0  # images and checkpoints removed (or that would be)
    db_bytes_before: int = 0
    db_bytes_after: int = 0  # estimated on a dry run
    dry_run: bool = False

    @property
    def freed_bytes(self) -> int:
        return self.file_bytes + max(0, self.db_bytes_before - self.db_bytes_after)

    def lines(self) -> list[str]:
        verb = "would remove" if self.dry_run else "removed"
        about = "about " if self.dry_run else ""
        return [
            *self.skipped,
            f"{verb} {len(self.removed)} jobs and {self.history_rows} history rows; "
            f"{about}{_megabytes(self.freed_bytes)} freed "
            f"(database {_megabytes(self.db_bytes_before)} -> {about}"
            f"{_megabytes(self.db_bytes_after)}, files {_megabytes(self.file_bytes)})",
        ]


def prunable() -> ColumnElement[bool]:
    """Jobs that will never run again and are not favourites."""
    finished = or_(
        JOB.c.status.in_(DONE), and_(JOB.c.status.in_(GIVEN_UP_POSSIBLE), JOB.c.given_up)
    )
    return and_(finished, JOB.c.starred.is_(False))


def prune(
    queue: JobQueue,
    rule: RetentionRule,
    *,
    checkpoints_dir: Path | None = None,
    images: bool = False,
    dry_run: bool = False,
    now: float | None = None,
) -> PruneReport:
    now = queue.clock() if now is None else now
    report = PruneReport(dry_run=dry_run, db_bytes_before=database_bytes(queue))
    with queue.db.read() as conn:
        candidates = _candidates(conn, rule, now)
        report.skipped = _protected(conn, rule, now)
    recorded: dict[int, tuple[str | None, str | None]] = {}  # job -> (image, checkpoint)
    for start in range(0, len(candidates), BATCH):
        recorded.update(_remove_batch(queue, candidates[start : start + BATCH], report, dry_run))
    confine = _confined_to(queue, checkpoints_dir)
    for job_id, files in _files(recorded, checkpoints_dir, images, confine):
        report.file_bytes += sum(_size(path) for path in files)
        if not dry_run:
            _unlink(job_id, files)
    if dry_run:
        report.db_bytes_after = _estimated_after(queue, report)
    else:
        if report.removed:  # the hourly pass mostly finds nothing: then nothing to give back
            compact(queue.db)
        report.db_bytes_after = database_bytes(queue)
    return report


def delete_jobs(
    queue: JobQueue, ids: Sequence[int], *, checkpoints_dir: Path | None = None
) -> PruneReport:
    """Remove the finished jobs `ids` the user chose (the gallery's Delete), with their
    history, checkpoints and images: the prune's path, under its rules (a starred job, one
    that may still run, or the parent of a job that stays is kept, and `skipped` says
    why). No compaction: the next prune gives the space back."""
    report = PruneReport()
    recorded = _remove_batch(queue, sorted(set(ids)), report, dry_run=False)
    confine = _confined_to(queue, checkpoints_dir)
    for job_id, files in _files(recorded, checkpoints_dir, True, confine):
        report.file_bytes += sum(_size(path) for path in files)
        _unlink(job_id, files)
    return report


def _candidates(conn: Connection, rule: RetentionRule, now: float) -> list[int]:
    found: set[int] = set()
    if rule.older_than_s is not None:
        old = select(JOB.c.id).where(prunable(), JOB.c.finished_at < now - rule.older_than_s)
        found.update(conn.execute(old).scalars())
    if rule.keep is not None:
        newest_first = JOB.c.finished_at.desc(), JOB.c.id.desc()
        beyond = select(JOB.c.id).where(prunable()).order_by(*newest_first).offset(rule.keep)
        found.update(conn.execute(beyond).scalars())
    return sorted(found)


def _protected(conn: Connection, rule: RetentionRule, now: float) -> list[str]:
    """Old jobs that stay, and why (nobody should wonder where a job went, or why not)."""
    if rule.older_than_s is None:
        return []
    age = func.coalesce(JOB.c.finished_at, JOB.c.created_at)
    query = (
        select(JOB.c.id, JOB.c.status, JOB.c.worker_id, JOB.c.starred)
        .where(age < now - rule.older_than_s, ~prunable())
        .order_by(JOB.c.id)
    )
    return [_why_kept(*row) for row in conn.execute(query)]


def _why_kept(job_id: int, status: str, worker_id: str | None, starred: bool) -> str:
    if starred:
        return f"job {job_id} is starred; kept"
    if JobStatus(status).is_running:
        held_by = f"worker {worker_id}" if worker_id else "a worker"
        return f"job {job_id} is held by {held_by} ({status}); skipped"
    if status in GIVEN_UP_POSSIBLE:
        return f"job {job_id} is {status} and may still be retried; kept"
    return f"job {job_id} is {status}; kept"


def _remove_batch(
    queue: JobQueue, ids: Sequence[int], report: PruneReport, dry_run: bool
) -> dict[int, tuple[str | None, str | None]]:
    """Remove the jobs of `ids` that are still prunable; returns their files' paths."""
    # Two prunes that interleave their batches would each delete, and report, the same
    # jobs, and waiting on each other's row locks in different orders could deadlock: one
    # batch at a time on every machine (a few hundred rows: the wait is short).
    with queue.db.read() if dry_run else queue.db.serialised_write(PRUNES_KEY) as conn:
        # Locked (PostgreSQL): a star or a retry by hand that commits meanwhile is read
        # before the delete, not overwritten by it.
        rows = conn.execute(_still_there(ids, locked=not dry_run)).all()
        still = {job_id: (image, checkpoint) for job_id, image, checkpoint, ok, *_ in rows if ok}
        # Jobs no longer there went with another prune (another machine): its report has them.
        report.skipped += [
            _why_kept(job_id, status, None, starred)
            for job_id, _, _, ok, starred, status in rows
            if not ok
        ]
        for parent, child in conn.execute(_children_staying(list(still))):
            if still.pop(parent, None) is not None:  # its child still needs its image
                report.skipped.append(f"job {parent} is a parent of job {child}; kept")
        gone = sorted(still)
        if not gone:
            return still
        history = delete(TRANSITION).where(TRANSITION.c.job_id.in_(gone))
        if dry_run:
            counted = select(func.count()).where(TRANSITION.c.job_id.in_(gone))
            report.history_rows += int(conn.execute(counted).scalar_one())
        else:
            report.history_rows += conn.execute(history).rowcount
            # A re-run keeps its parameters; only its pointer to the removed original goes.
            conn.execute(update(JOB).where(JOB.c.rerun_of.in_(gone)).values(rerun_of=None))
            conn.execute(delete(JOB_PARENT).where(JOB_PARENT.c.job_id.in_(gone)))
            conn.execute(delete(JOB_INPUT).where(JOB_INPUT.c.job_id.in_(gone)))
            conn.execute(delete(JOB_FILE).where(JOB_FILE.c.job_id.in_(gone)))
            conn.execute(delete(JOB_NOTE).where(JOB_NOTE.c.job_id.in_(gone)))
            conn.execute(delete(JOB).where(JOB.c.id.in_(gone)))
        report.removed += gone
    return still


def _still_there(ids: Sequence[int], *, locked: bool) -> Select[Any]:
    """Each job of `ids` that still exists: its files, and whether it may still go."""
    query = select(
        JOB.c.id,
        JOB.c.output_path,
        JOB.c.checkpoint_path,
        prunable(),
        JOB.c.starred,
        JOB.c.status,
    ).where(JOB.c.id.in_(ids))
    return query.with_for_update(of=JOB) if locked else query


def _children_staying(ids: list[int]) -> Select[Any]:
    """(parent, child) edges from `ids` to jobs outside them: those parents stay."""
    return select(JOB_PARENT.c.parent_id, JOB_PARENT.c.job_id).where(
        JOB_PARENT.c.parent_id.in_(ids), JOB_PARENT.c.job_id.not_in(ids)
    )


def _confined_to(queue: JobQueue, checkpoints_dir: Path | None) -> list[Path] | None:
    """On a shared store (any peer writes rows), the only folders whose files a row may
    have removed here: this machine's checkpoints and outputs. None: its own store."""
    if not queue.db.shares_files:
        return None
    outputs = load_settings().outputs_path()
    return [checkpoints_dir or paths.checkpoints_dir(), outputs]


def _files(
    recorded: dict[int, tuple[str | None, str | None]],
    checkpoints_dir: Path | None,
    images: bool,
    confine: list[Path] | None,
) -> Iterable[tuple[int, list[Path]]]:
    """Each removed job's files: checkpoints always, the image only if asked; on a shared
    store only those inside `confine` (a row naming another file is a peer's, or wrong)."""
    for job_id, (image, checkpoint) in recorded.items():
        files = [Path(checkpoint)] if checkpoint else []
        if checkpoints_dir is not None:
            files += earlier_files(Claim(checkpoints_dir, job_id, 0, sys.maxsize))
        if images and image:
            files.append(Path(image))
        if confine is not None:
            files = [path for path in files if is_inside(path, confine)]
        yield job_id, [path for path in dict.fromkeys(files) if path.exists()]


def _unlink(job_id: int, files: list[Path]) -> None:
    for path in files:
        try:
            path.unlink(missing_ok=True)
        except OSError as error:  # the job is gone already; a stray file is only untidy
            log.warning("job %s: could not remove %s: %s", job_id, path, error)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def database_bytes(queue: JobQueue) -> int:
    path = queue.db.path
    if path is None:
        return 0
    return sum(_size(Path(f"{path}{suffix}")) for suffix in ("", "-wal"))


def _estimated_after(queue: JobQueue, report: PruneReport) -> int:
    """The database's size after removing the report's rows, in proportion to the rows."""
    with queue.db.read() as conn:
        jobs = int(conn.execute(select(func.count()).select_from(JOB)).scalar_one())
        rows = int(conn.execute(select(func.count()).select_from(TRANSITION)).scalar_one())
    total = jobs + rows
    removed = len(report.removed) + report.history_rows
    share = removed / total if total else 0.0
    return int(report.db_bytes_before * (1 - share))


def _megabytes(size: int) -> str:
    return f"{size / 1e6:.2f} MB"


def rule_from_settings(settings: Settings) -> RetentionRule:
    """Settings' "keep finished jobs for N days / at most N jobs" (0: no limit)."""
    days, jobs = settings.keep_finished_days, settings.keep_finished_jobs
    return RetentionRule(older_than_s=days * 86400 if days else None, keep=jobs or None)

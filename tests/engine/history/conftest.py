"""Random job histories written straight into a real SQLite file, for the history tools."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobEvent, JobStatus
from app.models.db import Database

VOCABULARY = ("red", "circle", "blue", "square", "cat", "car", "cart", "night")
MODELS = ("easel-tiny", "sd15")
SIZES = ((512, 512), (768, 512))


@dataclass(frozen=True)
class JobSpec:
    prompt: str
    negative: str
    status: JobStatus
    model: str
    size: tuple[int, int]
    created_at: float
    starred: bool
    given_up: bool = False
    finished_at: float | None = None  # set for the statuses a job leaves a worker in
    history_rows: int = 1


def phrases(max_words: int = 4) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=max_words).map(" ".join)


JOB_SPECS = st.builds(
    JobSpec,
    prompt=phrases(),
    negative=st.one_of(st.just(""), phrases(2)),
    status=st.sampled_from(list(JobStatus)),
    model=st.sampled_from(MODELS),
    size=st.sampled_from(SIZES),
    created_at=st.floats(1_000.0, 100_000.0),
    starred=st.booleans(),
    given_up=st.booleans(),
    finished_at=st.one_of(st.none(), st.floats(1_000.0, 100_000.0)),
    history_rows=st.integers(1, 4),
)


def insert_jobs(db: Database, specs: list[JobSpec]) -> list[int]:
    """Rows as a history would leave them (fixture data, so written directly, not fired)."""
    ids = []
    with db.write() as conn:
        for spec in specs:
            cursor = conn.exec_driver_sql(
                "INSERT INTO job (prompt, negative_prompt, model, scheduler, steps, cfg, width,"
                " height, seed, status, version, attempt, max_attempts, given_up, priority,"
                " progress_step, progress_total, created_at, updated_at, starred, finished_at,"
                " worker_id, init_image, strength) VALUES (?, ?, ?, 'Euler', 20, 5.0, ?, ?, 1,"
                " ?, 0, 1, 3, ?, 0, 0, 20, ?, ?, ?, ?, ?, '', 1.0)",
                (spec.prompt, spec.negative, spec.model, *spec.size, spec.status.value,
                 spec.given_up, spec.created_at, spec.created_at, spec.starred,
                 spec.finished_at, "host:1:t" if spec.status.is_running else None),
            )  # fmt: skip
            job_id = int(cursor.lastrowid or 0)
            for n in range(spec.history_rows):
                conn.exec_driver_sql(
                    "INSERT INTO job_transition (job_id, attempt, from_status, to_status, event,"
                    " source, message, at) VALUES (?, 1, NULL, ?, 'SUBMIT', 'test', '', ?)",
                    (job_id, spec.status.value, spec.created_at + n),
                )
            ids.append(job_id)
    return ids


def old_and_kept_jobs(queue: JobQueue, count: int) -> tuple[list[int], dict[str, int]]:
    """`count` cancelled jobs, and one of each kind a prune must keep (starred, paused,
    failed and not given up: the retry policy requeues it), all at `queue`'s clock time."""
    ids = queue.submit_many([GenerationParams(f"old {n}") for n in range(count)])
    for job_id in ids:
        queue.cancel(job_id)
    starred, paused, failed = queue.submit_many([GenerationParams(p) for p in "spf"])
    for job_id in (starred, failed):
        queue.claim("host:1:t", job_id=job_id)
    queue.fire(starred, JobEvent.COMPLETE, source="worker")
    queue.fire(failed, JobEvent.FAIL, source="worker", message="may be retried")
    queue.pause(paused)
    with queue.db.write() as conn:  # fixture: a favourite, and a failure worth retrying
        conn.exec_driver_sql(f"UPDATE job SET starred = true WHERE id = {starred}")
        conn.exec_driver_sql(f"UPDATE job SET error_transient = true WHERE id = {failed}")
    return ids, {"starred": starred, "paused": paused, "failed": failed}


KEPT = {"starred": "SUCCESS", "paused": "PAUSED", "failed": "FAILED"}  # their statuses

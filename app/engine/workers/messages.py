"""The one message type workers send to the app (progress, previews, results).

Status changes are not messages: they go through the queue's transition table and
the database. Messages carry what the database should not (preview images) or
what the app wants sooner than its next poll.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class MessageKind(StrEnum):
    READY = "READY"  # the worker finished warming up and is claiming jobs
    STARTED = "STARTED"  # claimed a job
    PROGRESS = "PROGRESS"  # step k of n, maybe with a preview
    FINISHED = "FINISHED"  # settled a job (COMPLETE, FAIL or STOPPED went through the table)
    EXITING = "EXITING"  # leaving cleanly


@dataclass(frozen=True)
class WorkerMessage:
    kind: MessageKind
    worker_id: str
    job_id: int | None = None
    step: int = 0
    total: int = 0
    elapsed_s: float = 0.0
    preview_png: bytes | None = None
    image_path: str | None = None
    error: str | None = None
    device: str | None = None  # READY: where this worker generates, e.g. "cuda/float16"

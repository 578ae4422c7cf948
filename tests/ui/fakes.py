"""A scriptable stand-in for the worker supervisor: claims, steps and settles jobs in-process.

Driven by `poll()` (the window's timer, or the test itself), so tests control time exactly.
It moves jobs only through the queue, like a real worker.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image

from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobEvent, JobStatus
from app.engine.workers.messages import MessageKind, WorkerMessage

WORKER = "fake-worker"


@dataclass
class FakeWorkers:
    queue: JobQueue
    outputs: Path
    slots: int = 1
    # 0 holds claimed jobs where they are, so a test can act on them mid-run.
    steps_per_poll: int = 5
    claiming: bool = True  # False: take no new jobs
    started: bool = False
    shutdown_timeout: float | None = None
    steps: dict[int, int] = field(default_factory=dict)

    def start(self) -> None:
        self.started = True

    def own_running_ids(self) -> list[int]:
        return [i for i in self.steps if JobStatus(self.queue.get(i).status).is_running]

    def shutdown(self, timeout: float) -> list[int]:
        # Like the real supervisor: its own running jobs are paused, keeping their progress.
        self.shutdown_timeout = timeout
        paused = []
        for job_id in list(self.steps):
            if self.queue.get(job_id).status == JobStatus.PROCESSING:
                self.queue.pause(job_id, source="shutdown")
                paused.append(job_id)
            self._settle_stop(job_id)
        return paused

    def poll(self) -> Sequence[WorkerMessage]:
        messages: list[WorkerMessage] = []
        for job_id in list(self.steps):
            messages.extend(self._advance(job_id))
        if self.claiming:
            while len(self.steps) < self.slots and (job := self.queue.claim(WORKER)):
                assert job.id is not None
                self.steps[job.id] = job.progress_step
                messages.append(WorkerMessage(MessageKind.STARTED, WORKER, job.id))
        return messages

    def _advance(self, job_id: int) -> list[WorkerMessage]:
        status = JobStatus(self.queue.get(job_id).status)
        if status in (JobStatus.CANCELLING, JobStatus.PAUSING):
            self._settle_stop(job_id)
            return [WorkerMessage(MessageKind.FINISHED, WORKER, job_id)]
        if status is not JobStatus.PROCESSING:
            self.steps.pop(job_id)
            return []
        return self._step(job_id)

    def _step(self, job_id: int) -> list[WorkerMessage]:
        job = self.queue.get(job_id)
        step = min(job.progress_total, self.steps[job_id] + self.steps_per_poll)
        self.steps[job_id] = step
        self.queue.report_progress(job_id, WORKER, step, job.progress_total)
        progress = WorkerMessage(
            MessageKind.PROGRESS, WORKER, job_id, step=step, total=job.progress_total,
            elapsed_s=0.1 * step, preview_png=png_bytes(job_id),
        )  # fmt: skip
        if step < job.progress_total:
            return [progress]
        path = self.outputs / f"job-{job_id}.png"
        write_png(path, job_id)
        self.queue.fire(
            job_id, JobEvent.COMPLETE, source="worker", worker_id=WORKER,
            changes={"output_path": str(path)},
        )  # fmt: skip
        self.steps.pop(job_id)
        return [progress, WorkerMessage(MessageKind.FINISHED, WORKER, job_id, image_path=str(path))]

    def _settle_stop(self, job_id: int) -> None:
        status = JobStatus(self.queue.get(job_id).status)
        if status in (JobStatus.CANCELLING, JobStatus.PAUSING):
            self.queue.fire(job_id, JobEvent.STOPPED, source="worker", worker_id=WORKER)
        self.steps.pop(job_id, None)

    def fail(self, job_id: int, message: str = "out of memory") -> None:
        self.queue.fire(job_id, JobEvent.FAIL, source="worker", worker_id=WORKER,
                        message=message, changes={"error": message})  # fmt: skip
        self.steps.pop(job_id, None)


def _colour(job_id: int) -> tuple[int, int, int]:
    return (40 + job_id * 50 % 200, 90, 200 - job_id * 30 % 150)


def write_png(path: Path, job_id: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (64, 64), _colour(job_id)).save(path)


def png_bytes(job_id: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (32, 32), _colour(job_id)).save(buffer, format="PNG")
    return buffer.getvalue()

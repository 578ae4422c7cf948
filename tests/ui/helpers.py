"""Jobs in any status, made through the queue like the real thing."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QMainWindow, QPushButton
from pytestqt.qtbot import QtBot

from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobEvent, JobStatus
from app.ui.widgets.banner import Banner

WORKER = "test-worker"


def job_in(
    queue: JobQueue, status: JobStatus, prompt: str = "a quiet harbour", worker: str = WORKER
) -> int:
    """A new job moved to `status` (call with no other PENDING job, so the claim takes it)."""
    if status is JobStatus.BLOCKED:
        parent = queue.submit(GenerationParams(prompt=f"{prompt}, first", steps=10))
        queue.pause(parent)  # held, so the child stays BLOCKED and no claim takes the parent
        return queue.submit(GenerationParams(prompt=prompt, steps=10), parents=[parent])
    job_id = queue.submit(GenerationParams(prompt=prompt, steps=10))
    if status is JobStatus.PENDING:
        return job_id
    if status in (JobStatus.PAUSED, JobStatus.CANCELLED):
        (queue.pause if status is JobStatus.PAUSED else queue.cancel)(job_id)
        return job_id
    claimed = queue.claim(worker)
    assert claimed is not None and claimed.id == job_id
    steps = {
        JobStatus.PROCESSING: [],
        JobStatus.CANCELLING: [JobEvent.CANCEL],
        JobStatus.PAUSING: [JobEvent.PAUSE],
        JobStatus.SUCCESS: [JobEvent.COMPLETE],
        JobStatus.FAILED: [JobEvent.FAIL],
        JobStatus.TIMEOUT: [JobEvent.TIMEOUT],
    }[status]
    for event in steps:
        holder = worker if event in (JobEvent.COMPLETE, JobEvent.FAIL) else None
        queue.fire(job_id, event, source="test", worker_id=holder)
    assert queue.get(job_id).status == status
    return job_id


def banner_button(qtbot: QtBot, banner: Banner, text: str) -> QPushButton:
    """The banner's button named `text`, once laid out: the floating banners place their
    buttons in the next turns of the event loop, before any person could click one."""
    button = next(b for b in banner._buttons if b.text() == text)
    qtbot.waitUntil(lambda: not button.rect().isEmpty(), timeout=5000)
    return button


def noting(window: QMainWindow, start: str) -> Callable[[], bool]:
    """For `qtbot.waitUntil`: the status bar shows a note that begins with `start`."""
    return lambda: window.statusBar().currentMessage().startswith(start)

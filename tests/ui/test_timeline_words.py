"""The timeline in plain words (issue 16.4), with the technical row kept exact."""

from __future__ import annotations

import pytest

from app.engine.jobs.states import JobEvent, JobStatus
from app.engine.jobs.undo import HOLD_MESSAGE, HOLD_SOURCE
from app.engine.workers.liveness import WorkerIdentity
from app.engine.workers.worker_states import WINDOW_GONE_REASON
from app.ui.presenters.rows import TransitionRow
from app.ui.presenters.timeline_words import plain_words, technical

E, S = JobEvent, JobStatus
HERE = "studio"
HERE_WORKER = str(WorkerIdentity(HERE, 4242, "abc123"))
OTHER_WORKER = str(WorkerIdentity("render-box", 17, "def456"))


def row(
    before: JobStatus | None, after: JobStatus, event: JobEvent, source: str, message: str = ""
) -> TransitionRow:
    return TransitionRow(1, 1, before, after, event, source, message, 0.0)


@pytest.mark.parametrize(
    ("transition", "words"),
    [
        (row(None, S.PENDING, E.SUBMIT, "user"), "Queued"),
        (row(None, S.PENDING, E.SUBMIT, "cli"), "Queued from the command line"),
        (row(S.PENDING, S.PROCESSING, E.START, "worker", f"claimed by {HERE_WORKER}"),
         "Started on this computer"),
        (row(S.PENDING, S.PROCESSING, E.START, "worker", f"claimed by {OTHER_WORKER}"),
         "Started on render-box"),
        (row(S.PROCESSING, S.PAUSING, E.PAUSE, "user"),
         "Pause asked by you; the worker stops after its current step"),
        (row(S.PAUSING, S.PAUSED, E.STOPPED, "worker"), "Paused; it continues from here"),
        (row(S.PENDING, S.PAUSED, E.PAUSE, "user"), "Paused by you"),
        (row(S.PENDING, S.PAUSED, E.PAUSE, HOLD_SOURCE, HOLD_MESSAGE),
         "Cancelled by you; held a few seconds in case you undo"),
        # Told by who fired it, not by its words: a pause quoting them is a pause.
        (row(S.PENDING, S.PAUSED, E.PAUSE, "user", HOLD_MESSAGE), "Paused by you"),
        (row(S.PROCESSING, S.PAUSING, E.PAUSE, "supervisor", "the app is closing"),
         "Pause asked by Easel; the worker stops after its current step"),
        (row(S.PAUSED, S.PENDING, E.RESUME, "user"), "Resumed by you"),
        (row(S.PROCESSING, S.PAUSING, E.PAUSE, "worker", WINDOW_GONE_REASON),
         "Easel's window was gone: its worker pauses after the current step"),
        # Issue 41.4: a headless worker's supervisor was gone: its worker hands the job back.
        (row(S.PROCESSING, S.PAUSING, E.PAUSE, "worker",
             "handing its job back to the queue: the worker supervisor (pid 4242) was gone"),
         "Easel's worker supervisor was gone: its worker puts the job back in the queue"),
        (row(S.PROCESSING, S.PAUSING, E.PAUSE, "worker",
             "handing its job back to the queue: the server (pid 4242) was gone"),
         "Easel's server was gone: its worker puts the job back in the queue"),
        (row(S.PAUSED, S.PENDING, E.RESUME, "worker",
             "requeued with saved step 7: the server (pid 4242) was gone"),
         "Back in the queue with its progress: any worker continues from step 7"),
        (row(S.PAUSED, S.PENDING, E.RESUME, "worker",
             "requeued to start over from step 0: the worker supervisor was gone"),
         "Back in the queue: any worker continues it"),
        (row(S.PAUSED, S.PENDING, E.RESUME, HOLD_SOURCE, "cancel undone: queued again"),
         "Cancel undone by you; queued again"),
        (row(S.PROCESSING, S.TIMEOUT, E.TIMEOUT, "watchdog"), "The worker stopped answering"),
        (row(S.PROCESSING, S.TIMEOUT, E.TIMEOUT, "recovery"),
         "The worker was gone when Easel started"),
        (row(S.PAUSING, S.PAUSED, E.TIMEOUT, "watchdog"),
         "The worker stopped answering; kept paused"),
        (row(S.TIMEOUT, S.PENDING, E.RETRY, "retry-policy"), "Trying again automatically"),
        (row(S.TIMEOUT, S.PENDING, E.RETRY, "retry-policy",
             "automatic retry 2 of 3 after 2s; continues from saved step 34"),
         "Trying again automatically; will continue from step 34"),
        (row(S.FAILED, S.PENDING, E.RETRY, "user"), "Tried again by you"),
        (row(S.PROCESSING, S.FAILED, E.FAIL, "worker", "out of memory"),
         "Failed: out of memory"),
        (row(S.PROCESSING, S.SUCCESS, E.COMPLETE, "worker", "wrote /x.png"),
         "Finished: the image is saved"),
        # Issue 28.3: the step a recovered job continued from was only in a tooltip.
        (row(S.PROCESSING, S.SUCCESS, E.COMPLETE, "worker",
             "resumed from step 34 (saved 2 s before the crash)"),
         "Finished: the image is saved (continued from step 34)"),
        (row(S.PROCESSING, S.SUCCESS, E.COMPLETE, "worker", "wrote /My Clips/000003-7.mp4"),
         "Finished: the clip is saved"),
        (row(S.PROCESSING, S.SUCCESS, E.COMPLETE, "worker",
             "resumed from step 12 (saved 2 s before the crash); wrote /out/000003-7.mp4"),
         "Finished: the clip is saved (continued from step 12)"),
        (row(S.PENDING, S.CANCELLED, E.CANCEL, "user"), "Cancelled by you"),
    ],
)  # fmt: skip
def test_each_change_reads_as_a_sentence(transition: TransitionRow, words: str) -> None:
    assert plain_words(transition, host=HERE) == words


def test_latin_and_chinese_get_a_space_between() -> None:
    from app.ui.presenters.timeline_words import spaced

    assert spaced("由 Easel请求暂停") == "由 Easel 请求暂停"  # issue 28.9
    assert spaced("已在render-box上开始") == "已在 render-box 上开始"
    assert spaced("Paused by you") == "Paused by you"


def test_the_technical_row_is_exact() -> None:
    start = row(S.PENDING, S.PROCESSING, E.START, "worker", f"claimed by {HERE_WORKER}")
    assert technical(start) == f"PENDING → PROCESSING · START · worker · claimed by {HERE_WORKER}"
    assert technical(row(None, S.PENDING, E.SUBMIT, "user")) == "new → PENDING · SUBMIT · user"

"""A window killed inside its undo time (issue 20.6): the next launch cancels the held job,
and its history says why.

The first run is a real process with the window's real `QueueService`, killed with SIGKILL
right after the hold; the next launch is the window's real launch recovery.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobEvent, JobStatus
from app.engine.jobs.undo import WINDOW_GONE
from app.engine.settings import Settings
from app.models.opening import open_database
from app.ui.presenters.interfaces import RestoreSummary
from app.ui.wiring import recover_at_launch

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX"),
]

ROOT = Path(__file__).resolve().parents[2]
STORED_DEADLINE_S = 1.0  # instead of half a minute: the next launch need not wait for it

# The window's side of a Delete on a queued job, then nothing: it is killed in its undo time.
HOLD_THEN_WAIT = textwrap.dedent("""
    import sys, time
    import app.engine.jobs.undo as undo
    from app.engine.jobs.queue import JobQueue
    from app.models.opening import open_database
    from app.ui.presenters.queue_service import QueueService

    undo.UNDO_DEADLINE_S = float(sys.argv[3])
    service = QueueService(JobQueue(open_database(sys.argv[1])))
    outcome = service.cancel_undoably([int(sys.argv[2])])
    print("held", *outcome.held, flush=True)
    time.sleep(600)
""")


def hold_in_a_process_then_kill_it(db_path: Path, job_id: int) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD_THEN_WAIT, str(db_path), str(job_id), str(STORED_DEADLINE_S)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.split() == ["held", str(job_id)], child.stderr.read() if child.stderr else ""
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
    assert child.returncode == -signal.SIGKILL


def test_a_window_killed_in_its_undo_time_has_the_cancel_finished_at_the_next_launch(
    tmp_path: Path,
) -> None:
    db_path = tmp_path / "easel.db"
    db = open_database(db_path)
    queue = JobQueue(db)
    job_id = queue.submit(GenerationParams("a cat", steps=4, seed=1))
    db.dispose()

    hold_in_a_process_then_kill_it(db_path, job_id)

    db = open_database(db_path)
    try:
        queue = JobQueue(db)
        held = queue.get(job_id)
        assert held.status == JobStatus.PAUSED.value  # killed before its cancel was finished
        assert held.cancel_after is not None
        time.sleep(max(0.0, held.cancel_after - time.time()) + 0.05)

        restored = recover_at_launch(queue, Settings())

        assert queue.get(job_id).status == JobStatus.CANCELLED.value
        last = queue.timeline(job_id)[-1]
        assert (last.event, last.source, last.message) == (
            JobEvent.CANCEL.value, "recovery", WINDOW_GONE
        )  # fmt: skip
        assert isinstance(restored, RestoreSummary) and restored.cancelled == (job_id,)
    finally:
        db.dispose()

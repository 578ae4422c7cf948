"""Cancel and pause while the model loads or the VAE decodes (issue 11 item 3).

No step checkpoint is reached in those phases, so the request cannot be honoured by the
worker itself: the supervisor kills it once the cancel grace period is over and settles
the job through the table (CANCELLING -> CANCELLED, PAUSING -> PAUSED). The phases here
are made to last ten minutes; the job must settle long before that.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.engine.workers.worker import RunnerFactory
from app.testing.slow_phases import slow_decoding_runner, slow_loading_runner
from tests.engine.conftest import TINY_MODEL
from tests.engine.workers.worker_fixtures import (
    FAST_SETTINGS,
    Harness,
    harness,
    link_model,
    statuses,
    worker_config,
)

S = JobStatus
pytestmark = pytest.mark.slow
STEPS = 4
PARAMS = GenerationParams("a red circle", model=TINY_MODEL, steps=STEPS, width=32, height=32)


@pytest.fixture
def h(queue: JobQueue, tmp_path: Path, tiny_model_dir: Path, easel_home: Path) -> Iterator[Harness]:
    link_model(tiny_model_dir, easel_home)
    with harness(queue, tmp_path / "home") as h:
        yield h


PHASES: dict[str, tuple[RunnerFactory, int]] = {
    # runner, and the progress step at which the job is inside that phase
    "loading": (slow_loading_runner, 0),
    "decoding": (slow_decoding_runner, STEPS),
}
REQUESTS = {"cancel": (JobQueue.cancel, S.CANCELLED), "pause": (JobQueue.pause, S.PAUSED)}


@pytest.mark.parametrize("request_kind", sorted(REQUESTS))
@pytest.mark.parametrize("phase", sorted(PHASES))
def test_a_request_during_a_long_phase_is_honoured_within_the_grace_period(
    h: Harness, queue: JobQueue, phase: str, request_kind: str
) -> None:
    runner, at_step = PHASES[phase]
    ask, wanted = REQUESTS[request_kind]
    config = replace(
        worker_config(queue, h.home, runner_factory=runner), warm_model=None, torch_threads=1
    )
    supervisor = h.supervisor(config=config)
    supervisor.start()
    job_id = queue.submit(PARAMS)
    h.wait_for(
        lambda: (
            queue.get(job_id).status == S.PROCESSING and queue.get(job_id).progress_step >= at_step
        ),
        what=f"job {job_id} to be {phase}",
    )
    [pid] = supervisor.worker_pids()
    ask(queue, job_id)
    job = h.wait_status(job_id, wanted)  # the phase itself would last ten minutes

    assert pid not in supervisor.worker_pids()  # killed (a new worker replaces it)
    stopping = "CANCELLING" if request_kind == "cancel" else "PAUSING"
    assert statuses(queue, job_id)[-2:] == [stopping, wanted.value]
    last = queue.timeline(job_id)[-1]
    assert (last.event, last.source) == ("TIMEOUT", "supervisor")
    assert f"did not stop within {FAST_SETTINGS.cancel_grace_s:g}s of {stopping}" in last.message
    assert job.output_path is None and not any((h.home / "outputs").glob("*.png"))

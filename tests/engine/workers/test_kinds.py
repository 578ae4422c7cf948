"""The one table from a job's kind to its work, and the `RunInputs` a run is handed."""

from __future__ import annotations

import io
from dataclasses import FrozenInstanceError, replace
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from app.engine.generation.errors import CheckpointCorrupt
from app.engine.generation.outcome import GenerationOutcome
from app.engine.jobs.graph_sql import digest
from app.engine.jobs.params import KINDS, GenerationParams, InvalidParameters
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.run_inputs import NO_INPUTS, RunInputs
from app.engine.jobs.states import JobStatus
from app.engine.workers.kinds import WORK_OF_KIND, composed_grid, on_the_runner, work_of
from app.testing.scripted_runner import ScriptedRunner
from tests.engine.workers.test_job_run import Sent, context, run_job
from tests.engine.workers.worker_fixtures import fake_params


def test_every_kind_has_its_work_and_nothing_else_does() -> None:
    assert sorted(WORK_OF_KIND) == sorted(KINDS)
    assert {kind: work_of(kind) for kind in KINDS} == dict(WORK_OF_KIND)


def test_a_kind_without_work_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(InvalidParameters, match=r"unknown job kind 'hologram' \(known: generate"):
        work_of("hologram")


def test_only_a_grid_is_composed_by_the_worker_itself() -> None:
    by_worker = [kind for kind, work in WORK_OF_KIND.items() if work is composed_grid]
    assert by_worker == ["grid"]
    assert all(work in (on_the_runner, composed_grid) for work in WORK_OF_KIND.values())


def test_run_inputs_are_frozen_and_keep_tuples_whatever_they_were_given() -> None:
    inputs = RunInputs(control_images=[b"a", b"b"], reference_images=[b"c"])
    assert inputs.control_images == (b"a", b"b") and inputs.reference_images == (b"c",)
    assert replace(inputs, control_images=[b"d"]).control_images == (b"d",)
    with pytest.raises(FrozenInstanceError):
        inputs.mask = b"m"  # type: ignore[misc]
    assert RunInputs() == NO_INPUTS and NO_INPUTS.init_image is None


class Recording(ScriptedRunner):
    """The scripted runner, noting the inputs of each run; its first run finds its
    checkpoint damaged (the job run then runs it again from step 0)."""

    def __init__(self) -> None:
        super().__init__()
        self.handed: list[RunInputs] = []

    def run(self, params: GenerationParams, inputs: RunInputs = NO_INPUTS, **kw: Any) -> Any:
        self.handed.append(inputs)
        if len(self.handed) == 1:
            raise CheckpointCorrupt("scripted: a damaged checkpoint")
        outcome: GenerationOutcome = super().run(params, inputs, **kw)
        return outcome


def _png(colour: str) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), colour).save(buffer, format="PNG")
    return buffer.getvalue()


def test_a_job_run_hands_its_runner_the_stored_inputs_read_once(
    queue: JobQueue, tmp_path: Path
) -> None:
    init, mask = _png("red"), _png("white")
    params = replace(fake_params(steps=2), init_image=digest(init), mask=digest(mask))
    queue.submit(params, inputs=RunInputs(init_image=init, mask=mask))
    runner = Recording()
    job = run_job(context(queue, tmp_path, Sent(), runner=runner))
    assert job.status == JobStatus.SUCCESS
    first, again = runner.handed
    assert first == RunInputs(init_image=init, mask=mask)
    assert again is first  # built once from the claimed job, not read again for the retry


def test_a_text_to_image_job_is_handed_no_inputs(queue: JobQueue, tmp_path: Path) -> None:
    seen: list[RunInputs] = []

    class Noting(ScriptedRunner):
        def run(self, params: GenerationParams, inputs: RunInputs = NO_INPUTS, **kw: Any) -> Any:
            seen.append(inputs)
            return super().run(params, inputs, **kw)

    queue.submit(fake_params(steps=1))
    assert run_job(context(queue, tmp_path, Sent(), runner=Noting())).status == JobStatus.SUCCESS
    assert seen == [NO_INPUTS]

"""X/Y/Z plots end to end: real worker processes on the bundled model.

A 3x3 grid is 9 ordinary cell jobs and one grid job; a worker killed mid-grid is replaced
and the grid finishes with every cell equal to its uninterrupted image; a cancelled cell is
a placeholder, and re-running it recomposes the grid."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from app.engine.generation.post.grid import PLACEHOLDER, Cell, compose
from app.engine.jobs.grid_spec import GridSpec, spec_from_axes
from app.engine.jobs.groups import group_info, newest_members, retry_member, submit_grid
from app.engine.jobs.params import DEFAULT_MODEL, KIND_GRID, GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.engine.workers.grid_run import GRID_CHUNK
from app.engine.workers.worker import WorkerConfig
from tests.engine.workers.worker_fixtures import Harness, harness, slow_tiny_runner, worker_config

S = JobStatus
pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning"),
]
BASE = GenerationParams("a red circle on a blue background", model=DEFAULT_MODEL, seed=5)
SPEC = spec_from_axes([("x", "steps=2,3,4"), ("y", "cfg=3,5,7")])


@pytest.fixture
def h(queue: JobQueue, tmp_path: Path) -> Iterator[Harness]:
    with harness(queue, tmp_path / "home") as h:
        yield h


def config(h: Harness) -> WorkerConfig:
    made = worker_config(h.queue, h.home, runner_factory=slow_tiny_runner, warm_model=DEFAULT_MODEL)
    # A rolling checkpoint at every step: the killed cell resumes where it was.
    return replace(made, torch_threads=1, checkpoint_every_steps=1)


def pixels(png: bytes | str | Path) -> np.ndarray:
    with Image.open(png if not isinstance(png, bytes) else __import__("io").BytesIO(png)) as im:
        return np.asarray(im.convert("RGB"))


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> list[np.ndarray]:
    """Each cell's image from an in-process runner, never stopped."""
    from app.engine.generation.device import CPU
    from app.engine.generation.outcome import StepDecision
    from app.engine.generation.runner import Runner
    from app.engine.jobs.grid_spec import grid_cells

    runner = Runner(device=CPU, threads=1)
    folder = tmp_path_factory.mktemp("reference")
    images = []
    for i, params in enumerate(grid_cells(BASE, SPEC)):
        out = folder / f"{i}.png"
        runner.run(params, output_path=out, checkpoint_path=folder / f"{i}.ckpt",
                   on_step=lambda _p: StepDecision.CONTINUE)  # fmt: skip
        images.append(pixels(out))
    return images


def test_a_3x3_grid_survives_a_killed_worker_with_every_cell_exact(
    h: Harness, queue: JobQueue, uninterrupted: list[np.ndarray]
) -> None:
    made = submit_grid(queue, BASE, SPEC)
    assert len(made.jobs) == 9 and made.composer is not None
    info = group_info(queue, made.group_id)
    assert [j.kind for j in info.members] == ["generate"] * 9 + [KIND_GRID]
    assert queue.get(made.composer).status == S.BLOCKED
    supervisor = h.supervisor(config=config(h))
    supervisor.start()
    h.wait_progress(made.jobs[4], 1)  # the middle cell: 3 steps at CFG 5
    [pid] = supervisor.worker_pids()
    victim = freeze_holding_a_job(queue, pid)
    os.kill(pid, signal.SIGKILL)  # mid-grid, mid-cell
    grid = h.wait_settled(made.composer, timeout=240)
    assert grid.status == S.SUCCESS, grid.error
    assert "TIMEOUT" in [t.to_status for t in queue.timeline(victim)]  # it was lost, then run
    cells = [queue.get(j) for j in made.jobs]
    assert all(c.status == S.SUCCESS for c in cells)
    for cell, expected in zip(cells, uninterrupted, strict=True):
        assert np.array_equal(pixels(cell.output_path or ""), expected), cell.id
    with Image.open(grid.output_path or "") as image:
        record = json.loads(image.info[GRID_CHUNK])
        assert 'X Type: Steps, X Values: "2, 3, 4"' in image.info["parameters"]
        assert 'Y Type: CFG Scale, Y Values: "3, 5, 7"' in image.info["parameters"]
    assert record["cells"] == list(made.jobs) and record["shape"] == [3, 3, 1]
    expected_grid = compose(SPEC, [Cell(Path(c.output_path or "").read_bytes()) for c in cells])
    assert np.array_equal(pixels(grid.output_path or ""), np.asarray(expected_grid))
    # The same workers (one start of the model saved): a cancelled cell, then retried.
    a_cancelled_cell_is_a_placeholder_and_retrying_it_recomposes(h, queue)


def a_cancelled_cell_is_a_placeholder_and_retrying_it_recomposes(
    h: Harness, queue: JobQueue
) -> None:
    spec = spec_from_axes([("x", "steps=2,3,2")])
    made = submit_grid(queue, BASE, spec)
    cancelled = made.jobs[1]
    queue.cancel(cancelled)  # queued behind cell 0 (or stopped at its next step)
    first = h.wait_settled(made.composer or 0, timeout=240)
    assert first.status == S.SUCCESS, first.error
    a, c = (queue.get(j) for j in (made.jobs[0], made.jobs[2]))
    placeholder = Cell(None, f"#{cancelled} cancelled")
    cells = [Cell(Path(a.output_path or "").read_bytes()), placeholder,
             Cell(Path(c.output_path or "").read_bytes())]  # fmt: skip
    shown = pixels(first.output_path or "")
    assert np.array_equal(shown, np.asarray(compose(spec, cells)))
    middle = shown[-32, shown.shape[1] // 2]  # inside the middle cell, below its label
    assert tuple(middle) == PLACEHOLDER

    again = retry_member(queue, cancelled)  # a cancelled cell is re-run into its place
    assert again != cancelled
    h.wait_for(lambda: len(_composers(queue, made.group_id)) == 2, what="the grid queued again")
    second = h.wait_settled(_composers(queue, made.group_id)[-1], timeout=240)
    assert second.status == S.SUCCESS and second.rerun_of == first.id
    redone = queue.get(again)
    cells[1] = Cell(Path(redone.output_path or "").read_bytes())
    assert np.array_equal(pixels(second.output_path or ""), np.asarray(compose(spec, cells)))
    now = newest_members(group_info(queue, made.group_id))
    assert [m.id for m in now] == [made.jobs[0], again, made.jobs[2], second.id]


def freeze_holding_a_job(queue: JobQueue, pid: int) -> int:
    """Stop the worker (SIGSTOP) at a moment it holds a cell, so that the kill that follows
    surely lands mid-cell; the id of that cell."""
    while True:
        os.kill(pid, signal.SIGSTOP)
        running = queue.running_jobs()
        if running:
            return running[0].id or 0
        os.kill(pid, signal.SIGCONT)  # between two cells: try again a moment later
        time.sleep(0.01)


def _composers(queue: JobQueue, group_id: int) -> list[int]:
    return [m.id or 0 for m in group_info(queue, group_id).members if m.kind == KIND_GRID]


def test_the_grid_spec_round_trips() -> None:
    assert GridSpec.from_dict(SPEC.to_dict()) == SPEC

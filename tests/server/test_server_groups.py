"""Groups over plain HTTP (`GET /api/v1/groups/{id}`, `POST .../pause|resume|cancel|retry`)
on the real server over a real SQLite store, no worker: the moves the command line's
`group ACTION` makes on the same group, and an Idempotency-Key on every action."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine.jobs.groups import SeedMode, group_info, newest_members, submit_batch
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import Job, JobQueue, params_of
from app.engine.jobs.states import JobEvent
from app.engine.store.opening import open_queue
from tests.cli.test_cli_jobs import run_cli
from tests.server.test_server_api import Running, running

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def home_queue(easel_home: Path) -> Iterator[JobQueue]:
    queue = open_queue()  # the user's queue, which the command line opens too
    yield queue
    queue.db.dispose()


@pytest.fixture
def api(home_queue: JobQueue) -> Iterator[Running]:
    with running(home_queue) as served:
        served.client.headers.update({"X-Easel-Client": "grouptest"})
        yield served


def batch(queue: JobQueue) -> tuple[int, tuple[int, ...]]:
    params = GenerationParams(prompt="a red circle", seed=1)
    made = submit_batch(queue, params, 3, SeedMode.INCREMENT)  # both doors' batches alike
    return made.group_id, made.jobs


def statuses(queue: JobQueue, ids: tuple[int, ...]) -> list[str]:
    return [queue.get(job_id).status for job_id in ids]


def test_group_actions_move_what_the_command_line_moves_and_show_lists_the_cells(
    api: Running, home_queue: JobQueue, capsys: pytest.CaptureFixture[str]
) -> None:
    by_api, api_jobs = batch(home_queue)
    by_cli, cli_jobs = batch(home_queue)
    for action in ("pause", "resume", "cancel", "retry"):
        answer = api.client.post(f"/api/v1/groups/{by_api}/{action}")
        code, _, _ = run_cli(capsys, "group", action, str(by_cli))
        assert answer.status_code == 200 and code == 0, answer.text
        assert statuses(home_queue, api_jobs) == statuses(home_queue, cli_jobs), action
        body = answer.json()
        moved = set(api_jobs) if action != "retry" else set()  # a cancelled job is left be
        assert body["changed"] == bool(moved) and {m["job_id"] for m in body["moved"]} == moved
    shown = api.client.get(f"/api/v1/groups/{by_api}").json()
    assert [row["cell"] for row in shown["jobs"]] == [0, 1, 2] and shown["kind"] == "batch"
    assert shown["counts"] == {"CANCELLED": 3}
    assert [row["job"]["id"] for row in shown["jobs"]] == list(api_jobs)
    sources = {t.source for t in home_queue.timeline(api_jobs[0]) if t.from_status}
    assert sources == {"api:grouptest"}  # the door and its client name every move
    missing = api.client.get("/api/v1/groups/999")
    assert (missing.status_code, missing.json()) == (404, {"error": "There is no group 999."})


def test_an_action_sent_again_with_its_key_answers_the_first_answer_and_moves_nothing(
    api: Running, home_queue: JobQueue
) -> None:
    group_id, jobs = batch(home_queue)
    key = {"Idempotency-Key": "pause-once"}
    first = api.client.post(f"/api/v1/groups/{group_id}/pause", headers=key)
    moves = len(home_queue.timeline(jobs[0]))
    api.client.post(f"/api/v1/groups/{group_id}/resume")  # meanwhile, by someone else
    again = api.client.post(f"/api/v1/groups/{group_id}/pause", headers=key)
    assert again.status_code == 200 and again.json()["replayed"]
    assert {**again.json(), "replayed": False} == first.json()
    assert statuses(home_queue, jobs) == ["PENDING"] * 3  # not paused a second time
    assert len(home_queue.timeline(jobs[0])) == moves + 1  # the resume only
    reused = api.client.post(f"/api/v1/groups/{group_id}/cancel", headers=key)
    assert reused.status_code == 409
    assert reused.json()["error"].startswith("the Idempotency-Key 'pause-once' was already used")
    # A job's own actions and its star take a key too.
    cancel = [
        api.client.post(f"/api/v1/jobs/{jobs[0]}/cancel", headers={"Idempotency-Key": "c"})
        for _ in range(2)
    ]
    assert cancel[0].json() == cancel[1].json() and cancel[0].json()["changed"]
    starred = api.client.post(f"/api/v1/jobs/{jobs[1]}/star", headers={"Idempotency-Key": "s"})
    unstar = api.client.post(
        f"/api/v1/jobs/{jobs[1]}/star", json={"starred": False}, headers={"Idempotency-Key": "s"}
    )
    assert starred.status_code == 200 and unstar.status_code == 409
    assert home_queue.get(jobs[1]).starred
    # A refused action forgets its key: the same request later is decided afresh.
    done = api.client.post(f"/api/v1/jobs/{jobs[2]}/retry", headers={"Idempotency-Key": "r"})
    assert done.status_code == 409
    assert home_queue.claim("w", job_id=jobs[2]) is not None  # then it fails on its worker
    home_queue.fire(jobs[2], JobEvent.FAIL, source="worker", worker_id="w",
                    changes={"error": "boom", "error_transient": False})  # fmt: skip
    retried = api.client.post(f"/api/v1/jobs/{jobs[2]}/retry", headers={"Idempotency-Key": "r"})
    assert retried.status_code == 200, retried.text


def test_retrying_a_cancelled_cell_re_runs_it_into_its_cell_as_the_command_line_does(
    api: Running, home_queue: JobQueue, capsys: pytest.CaptureFixture[str]
) -> None:
    by_api, api_jobs = batch(home_queue)
    by_cli, cli_jobs = batch(home_queue)
    for jobs in (api_jobs, cli_jobs):
        home_queue.cancel(jobs[1], source="test")
    answer = api.client.post(f"/api/v1/jobs/{api_jobs[1]}/retry")
    code, _, _ = run_cli(capsys, "retry", str(cli_jobs[1]))
    assert answer.status_code == 200 and code == 0, answer.text
    api_cell, cli_cell = newest_cell(home_queue, by_api, 1), newest_cell(home_queue, by_cli, 1)
    assert answer.json()["job"]["id"] == api_cell.id != api_jobs[1]  # the job that will run
    assert (api_cell.rerun_of, cli_cell.rerun_of) == (api_jobs[1], cli_jobs[1])
    assert stored(api_cell) == stored(cli_cell)
    assert params_of(api_cell) == params_of(home_queue.get(api_jobs[1]))  # the cell's own seed
    assert [t.source for t in home_queue.timeline(api_cell.id or 0)] == ["api:grouptest"]
    assert statuses(home_queue, api_jobs) == statuses(home_queue, cli_jobs)  # the old cell stays


def newest_cell(queue: JobQueue, group_id: int, cell: int) -> Job:
    return next(j for j in newest_members(group_info(queue, group_id)) if j.group_cell == cell)


def stored(job: Job) -> tuple[object, ...]:
    return (params_of(job), job.status, job.group_cell, job.attempt, job.priority)

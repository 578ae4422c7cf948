"""The history commands as a user types them: jobs --search, star, prune, move."""

from __future__ import annotations

import json

import pytest

from app.engine.jobs.queue import JobQueue
from app.engine.store.opening import open_queue
from tests.cli.test_cli_jobs import run_cli


def ids_of(out: str) -> list[str]:
    return [line.split()[0].rstrip("*") for line in out.splitlines()]


def test_jobs_search_finds_prompts_by_words_and_status(capsys: pytest.CaptureFixture[str]) -> None:
    for prompt in ("a red circle", "a blue circle", "a red square"):
        run_cli(capsys, "submit", prompt)
    run_cli(capsys, "cancel", "3")
    code, out, _ = run_cli(capsys, "jobs", "--search", "red", "--since", "7d")
    assert (code, ids_of(out)) == (0, ["3", "1"])
    _, out, _ = run_cli(capsys, "jobs", "--search", "red", "--status", "PENDING")
    assert ids_of(out) == ["1"]
    _, out, _ = run_cli(capsys, "jobs", "--search", "circle -blue")
    assert ids_of(out) == ["1"]


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (("jobs", "--search", '"red'), "quote that is never closed"),
        (("jobs", "--since", "7x"), "'7x' is not a duration"),
        (("prune", "--older-than", "soon"), "'soon' is not a duration"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], complaint: str
) -> None:
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and complaint in err


def test_star_protects_a_job_from_prune(capsys: pytest.CaptureFixture[str]) -> None:
    for job_id, prompt in (("1", "keep me"), ("2", "let me go")):
        run_cli(capsys, "submit", prompt)
        run_cli(capsys, "cancel", job_id)
    code, out, _ = run_cli(capsys, "star", "1")
    assert code == 0 and out.split()[0] == "1*"
    _, out, _ = run_cli(capsys, "prune", "--keep", "0", "--dry-run")
    assert "would remove 1 jobs" in out
    assert ids_of(run_cli(capsys, "jobs")[1]) == ["2", "1"]  # a dry run removes nothing
    _, out, _ = run_cli(capsys, "prune", "--keep", "0")
    assert out.startswith("removed 1 jobs and 2 history rows")
    assert ids_of(run_cli(capsys, "jobs")[1]) == ["1"]


def test_move_changes_the_queue_order(capsys: pytest.CaptureFixture[str]) -> None:
    for prompt in ("one", "two", "three"):
        run_cli(capsys, "submit", prompt)
    assert run_cli(capsys, "move", "3", "--top")[0] == 0
    assert run_cli(capsys, "move", "1", "--before", "2")[0] == 0
    code, _, err = run_cli(capsys, "move", "9", "--top")
    assert code == 2 and "There is no job 9" in err
    queue = open_queue()
    assert [claimed_id(queue) for _ in range(3)] == [3, 1, 2]
    queue.db.dispose()


def claimed_id(queue: JobQueue) -> int | None:
    job = queue.claim("host:1:t")
    return job.id if job else None


def test_stats_and_eta_print_for_people_and_scripts(capsys: pytest.CaptureFixture[str]) -> None:
    for prompt in ("one", "two"):
        run_cli(capsys, "submit", prompt)
    run_cli(capsys, "cancel", "1")
    code, out, _ = run_cli(capsys, "stats", "--since", "1d", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["per_status"] == {"CANCELLED": 1, "PENDING": 1}
    assert (data["working_s"], data["images_per_working_hour"]) == (0, None)  # nothing ran
    code, out, _ = run_cli(capsys, "stats", "--since", "1d")
    assert out.splitlines()[-1] == (
        "throughput - images an hour of work (0.0 s with at least one job running)"
    )
    code, out, _ = run_cli(capsys, "eta")
    assert code == 0 and out.splitlines()[-1] == "1 queued (no finished job yet to estimate from)"

"""A1111's prompt syntax from the command line, on the bundled model (issue 21 item 13)."""

from __future__ import annotations

import json

import pytest

from app.cli import main
from app.engine.jobs.states import JobStatus
from app.engine.store.opening import OpenFor, open_queue

from .test_cli_jobs import run_cli

# Weights, BREAK and a prompt longer than the bundled text encoder's 16 positions.
A1111_PROMPTS = ["(red)", "[red]", "a red circle BREAK a blue sky", "(red:1.3), " * 12]


@pytest.mark.slow
def test_weights_and_break_run_on_the_bundled_model(capsys: pytest.CaptureFixture[str]) -> None:
    # They failed in the worker with "Sequence length must be less than
    # max_position_embeddings": chunks were 77 tokens, the bundled encoder has 16 positions.
    ids = []
    for prompt in A1111_PROMPTS:
        code, out, err = run_cli(capsys, "submit", prompt, "--steps", "2", "--seed", "5")
        assert code == 0, err
        ids.append(int(out))
    assert main(["worker", "--until-idle"]) == 0
    capsys.readouterr()
    queue = open_queue(purpose=OpenFor.READING)
    try:
        jobs = [queue.get(job_id) for job_id in ids]
    finally:
        queue.db.dispose()
    assert [(job.status, job.error) for job in jobs] == [(JobStatus.SUCCESS, None)] * len(ids)


@pytest.mark.parametrize("command", ["submit", "generate"])
@pytest.mark.parametrize(
    "argv", [["(red:1.2.3)"], ["a cat", "--negative", "(blur:.)"]], ids=["prompt", "negative"]
)
def test_a_weight_that_is_no_number_is_refused_at_submit(
    capsys: pytest.CaptureFixture[str], command: str, argv: list[str]
) -> None:
    # A1111 fails the generation on it (float("1.2.3")); here it is one sentence at submit.
    code, out, err = run_cli(capsys, command, *argv)
    assert (code, out) == (2, "")
    assert err.strip().splitlines() == [
        f"error: the prompt weight {argv[-1][argv[-1].index(':') + 1 : -1]!r} is not a number "
        "(write it like (word:1.2))"
    ]
    assert main(["jobs", "--all", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []  # nothing stored

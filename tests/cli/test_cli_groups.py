"""Batches, wildcards, grids and group actions, as a user types them."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.store.opening import open_queue

from .test_cli_jobs import run_cli


def ids(out: str) -> list[int]:
    return [int(line) for line in out.split()]


def test_a_batch_with_incrementing_seeds_is_one_group(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "submit", "a cat", "--batch-count", "3", "--seed", "40",
                             "--variation-strength", "0.25", "--variation-seed", "9")  # fmt: skip
    assert code == 0, err
    queue = open_queue()
    jobs = [queue.get(i) for i in ids(out)]
    assert [(j.seed, j.variation_seed, j.variation_strength) for j in jobs] == [
        (40, 9, 0.25), (41, 10, 0.25), (42, 11, 0.25),
    ]  # fmt: skip
    assert len({j.group_id for j in jobs}) == 1 and f"group {jobs[0].group_id}: 3 jobs" in err
    code, out, _ = run_cli(capsys, "group", "pause", str(jobs[0].group_id))
    assert code == 0 and out.count("PENDING -> PAUSED") == 3
    code, out, _ = run_cli(capsys, "group", "show", str(jobs[0].group_id))
    assert out.count("PAUSED") == 3
    queue.db.dispose()


def test_fixed_seeds_and_wildcards(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "animals.txt").write_text("cat\ndog\n")
    code, out, err = run_cli(capsys, "submit", "a {red|blue} __animals__", "--wildcards",
                             str(tmp_path), "--combinatorial", "--seed", "3",
                             "--seed-mode", "fixed")  # fmt: skip
    assert code == 0, err
    queue = open_queue()
    jobs = [queue.get(i) for i in ids(out)]
    assert sorted(j.prompt for j in jobs) == ["a blue cat", "a blue dog", "a red cat", "a red dog"]
    assert {j.seed for j in jobs} == {3} and {j.prompt_template for j in jobs} == {
        "a {red|blue} __animals__"
    }
    code, out, _ = run_cli(capsys, "show", str(jobs[0].id))
    assert "template    a {red|blue} __animals__" in out
    queue.db.dispose()


def test_a_missing_wildcard_or_a_loop_is_refused_storing_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run_cli(capsys, "submit", "a __hats__", "--wildcards", str(tmp_path))
    assert code == 2 and f"there is no file {tmp_path / 'hats.txt'}" in err
    (tmp_path / "hats.txt").write_text("big __hats__\n")
    code, _, err = run_cli(capsys, "submit", "a __hats__", "--wildcards", str(tmp_path))
    assert code == 2 and "hats.txt includes itself" in err
    queue = open_queue()
    assert queue.jobs() == []
    queue.db.dispose()


def test_a_wildcard_that_names_a_path_is_refused_naming_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`submit "a __/tmp/notes__ cat"` read /tmp/notes.txt into the stored prompt."""
    (tmp_path / "notes.txt").write_text("the secret\n")
    name = f"{tmp_path}/notes"
    code, _, err = run_cli(capsys, "submit", f"a __{name}__ cat")
    assert code == 2, err
    assert f"wildcard __{name}__ is not a name in the wildcards folder" in err
    assert "secret" not in err
    queue = open_queue()
    assert queue.jobs() == []
    queue.db.dispose()


def test_grid_queues_cells_and_the_grid_job(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "grid", "a cat", "--x", "steps=4,8,12", "--y", "cfg=3,7")
    assert code == 0, err
    *cells, grid = ids(out)
    queue = open_queue()
    assert len(cells) == 6 and queue.get(grid).status == "BLOCKED"
    assert [queue.get(c).steps for c in cells] == [4, 8, 12, 4, 8, 12]
    assert "6 cells (steps (3) x cfg (2))" in err
    code, out, _ = run_cli(capsys, "group", "cancel", str(queue.get(grid).group_id))
    assert out.count("-> CANCELLED") == 7
    code, _, err = run_cli(capsys, "retry", str(cells[0]))  # cancelled: re-run in its cell
    assert code == 0 and "re-ran it in its cell" in err
    queue.db.dispose()


@pytest.mark.parametrize(
    ("axis", "message"),
    [
        ("steps=4,500", "the X axis steps=500: steps must be between 1 and 150"),
        ("model=easel-tiny,nope", "the X axis model=nope: model 'nope' was not found"),
        ("size=64x64,1024x1024", "the X axis size=1024x1024:"),
    ],
)
def test_a_value_the_model_refuses_is_refused_naming_the_axis(
    capsys: pytest.CaptureFixture[str], axis: str, message: str
) -> None:
    code, _, err = run_cli(capsys, "grid", "a cat", "--x", axis)
    assert code == 2 and message in err
    queue = open_queue()
    assert queue.jobs() == []
    queue.db.dispose()

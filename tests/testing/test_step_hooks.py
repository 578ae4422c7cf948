"""The runner wrappers, in process around the scripted runner: what each hook adds."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from app.engine.generation.errors import CheckpointCorrupt
from app.engine.generation.outcome import OutcomeKind, StepDecision, StepProgress
from app.engine.jobs.params import GenerationParams
from app.testing.ledger import LedgerRunner, Mark, read_ledger
from app.testing.scripted_runner import ScriptedRunner, fake_image
from app.testing.step_hooks import PngRunner, StepHookRunner

PARAMS = GenerationParams("a cat step=0", model="fake", steps=4, seed=3, width=8, height=8)


def run(runner: StepHookRunner, home: Path, *, pause_at_step: int = 0) -> OutcomeKind:
    def decide(progress: StepProgress) -> StepDecision:
        return StepDecision.PAUSE if progress.step == pause_at_step else StepDecision.CONTINUE

    outcome = runner.run(
        PARAMS,
        output_path=home / "000042-3.png",
        checkpoint_path=home / "job-42.ckpt",
        on_step=decide,
    )
    return outcome.kind


def test_the_ledger_records_each_run_its_steps_and_how_it_ended(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.jsonl"
    runner = LedgerRunner(ScriptedRunner(), ledger)

    assert run(runner, tmp_path, pause_at_step=2) is OutcomeKind.PAUSED
    assert run(runner, tmp_path) is OutcomeKind.COMPLETED  # resumes from step 2

    entries = read_ledger(ledger)
    first, second = entries[0].run, entries[-1].run
    assert first != second
    assert {entry.job for entry in entries} == {42}
    assert [(e.run, e.what) for e in entries] == [
        (first, Mark.START), (first, Mark.STEP), (first, Mark.STEP), (first, Mark.PAUSED),
        (second, Mark.START), (second, Mark.STEP), (second, Mark.STEP), (second, Mark.COMPLETED),
    ]  # fmt: skip
    assert [e.at for e in entries] == sorted(e.at for e in entries)
    assert [e.step for e in entries if e.what is Mark.STEP] == [1, 2, 3, 4]


def test_no_ledger_file_reads_as_no_entries(tmp_path: Path) -> None:
    assert read_ledger(tmp_path / "never-written.jsonl") == []


def test_the_hooks_leave_the_inner_runner_s_result_alone(tmp_path: Path) -> None:
    assert run(StepHookRunner(ScriptedRunner()), tmp_path) is OutcomeKind.COMPLETED
    assert (tmp_path / "000042-3.png").read_bytes() == fake_image(PARAMS)


def test_the_png_runner_replaces_the_image_with_a_real_png(tmp_path: Path) -> None:
    assert run(PngRunner(ScriptedRunner()), tmp_path) is OutcomeKind.COMPLETED
    with Image.open(tmp_path / "000042-3.png") as image:
        assert image.size == (8, 8)
        assert image.getextrema() == ((111, 111), (120, 120), (200, 200))  # one colour


def test_a_damaged_checkpoint_raises_like_the_real_runner_s(tmp_path: Path) -> None:
    runner = ScriptedRunner()
    assert run(StepHookRunner(runner), tmp_path, pause_at_step=2) is OutcomeKind.PAUSED
    (tmp_path / "job-42.ckpt").write_bytes(b'{"st\xff\x00p": 2')
    with pytest.raises(CheckpointCorrupt, match=r"job-42\.ckpt is unreadable"):
        run(StepHookRunner(runner), tmp_path)

"""The rolling saver: the loop hands a copy over and goes on; one save at a time, the next
asked meanwhile skipped; a save's length counted from the loop's ask to the rename (what
the pacing bounds); nothing written after the run leaves it; a failed save costs only that
save, and the saver's thread goes on serving."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from app.engine.generation.loop import rolling_saver
from app.engine.generation.loop.checkpoint import Checkpoint, load_checkpoint
from app.engine.generation.loop.rolling_saver import LoopLoss, RollingSaver
from app.engine.jobs.params import GenerationParams


def _checkpoint(step: int) -> Checkpoint:
    return Checkpoint(
        params=GenerationParams(prompt="p").to_dict(), steps_done=step, index=step,
        elapsed_s=float(step), latents=torch.full((1, 4, 2, 2), float(step)),
        generator_state=torch.Generator().manual_seed(1).get_state(), family="sd",
        conditioning={"prompt_embeds": torch.zeros(1, 2, 3)},
        scheduler_class="EulerDiscreteScheduler", scheduler_state={"step_index": step},
    )  # fmt: skip


class _HeldSaves:
    """`save_checkpoint` that waits to be let go: a save kept in flight on purpose."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.go = threading.Event()
        self.written: list[int] = []
        real = rolling_saver.save_checkpoint

        def held(path: Path, checkpoint: Checkpoint) -> None:
            assert self.go.wait(10)
            real(path, checkpoint)
            self.written.append(checkpoint.steps_done)

        monkeypatch.setattr(rolling_saver, "save_checkpoint", held)


def test_the_loop_goes_on_while_a_save_is_in_flight_and_one_asked_meanwhile_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    saves = _HeldSaves(monkeypatch)
    path = tmp_path / "job.ckpt"
    state = _checkpoint(1)
    with RollingSaver(path) as saver:
        saver.save_soon(state)  # returns at once: the save waits to be let go
        state.latents.add_(100.0)  # the loop goes on with its own tensors: not in the file
        assert saver.busy
        saver.save_soon(_checkpoint(2))  # skipped, never queued
        saves.go.set()
        saver.wait()
        assert not saver.busy and saves.written == [1]
        assert torch.equal(load_checkpoint(path).checkpoint.latents, _checkpoint(1).latents)
        saver.save_soon(_checkpoint(3))  # the same thread, woken again
    assert saves.written == [1, 3]  # leaving waited for the save in flight
    assert load_checkpoint(path).checkpoint.steps_done == 3


def test_a_save_counts_from_the_loops_ask_to_the_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pacing bounds a save's whole length: the loop's snapshot before the hand-over
    (`asked_at`) is in it, and so is every moment the save was in flight."""
    saves = _HeldSaves(monkeypatch)
    with RollingSaver(tmp_path / "job.ckpt") as saver:
        asked = time.monotonic() - 0.5  # the loop began its snapshot half a second ago
        saver.save_soon(_checkpoint(1), asked)
        time.sleep(0.1)
        saves.go.set()
    assert saver.last_save_s >= 0.6


def test_a_failed_save_is_said_and_the_next_one_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real = rolling_saver.save_checkpoint
    failures = [OSError(28, "No space left on device"), TypeError("a bug")]

    def failing(path: Path, checkpoint: Any) -> None:
        if failures:
            raise failures.pop(0)
        real(path, checkpoint)

    monkeypatch.setattr(rolling_saver, "save_checkpoint", failing)
    path = tmp_path / "job.ckpt"
    with RollingSaver(path) as saver:
        for step in (1, 2, 3):
            saver.save_soon(_checkpoint(step))
            saver.wait()
    assert "No space left" in caplog.text and "a bug" in caplog.text
    assert load_checkpoint(path).checkpoint.steps_done == 3
    assert saver.last_save_s > 0


def test_a_run_that_saves_nothing_starts_no_thread(tmp_path: Path) -> None:
    before = threading.active_count()
    with RollingSaver(tmp_path / "job.ckpt") as saver:
        assert threading.active_count() == before
    assert saver.last_save_s == 0.0 and not (tmp_path / "job.ckpt").exists()


def test_the_loops_loss_counts_the_steps_a_save_slowed_and_the_one_after() -> None:
    loss = LoopLoss()
    for _ in range(5):
        loss.add(0.010, saving=False)  # typical: 10 ms
    loss.add(0.016, saving=True)  # in flight: 6 ms lost
    loss.add(0.009, saving=True)  # faster (noise): nothing, never less
    assert loss.last_s == 0.0  # not until the step after it
    loss.add(0.012, saving=False)  # after it: 2 ms
    assert loss.last_s == pytest.approx(0.008)
    loss.add(0.011, saving=False)
    assert loss.last_s == pytest.approx(0.008)  # kept until the next save is counted


def test_a_save_before_the_typical_step_is_known_is_not_judged() -> None:
    loss = LoopLoss()
    loss.add(0.010, saving=False)
    loss.add(0.500, saving=True)
    loss.add(0.010, saving=False)
    assert loss.last_s == 0.0


def test_the_cost_paced_by_is_the_loops_loss_when_larger_than_the_save(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step slowed by half a second while a save of a few ms was in flight: the save
    cost half a second."""
    saves = _HeldSaves(monkeypatch)
    saves.go.set()
    clock = [100.0]
    with RollingSaver(tmp_path / "job.ckpt") as saver:
        for _ in range(5):
            clock[0] += 0.010
            saver.step_ended(clock[0])
        saver.save_soon(_checkpoint(1))
        saver.wait()
        clock[0] += 0.510  # the step the save was asked at the start of
        saver.step_ended(clock[0])
        clock[0] += 0.010
        saver.step_ended(clock[0])
    assert 0 < saver.last_save_s < 0.5
    assert saver.cost_s == pytest.approx(0.500)

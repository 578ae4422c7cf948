"""Compiled models on request (a job's `compile`, load/compiled.py) on the tiny Flux.1 model:
a compile that fails falls back to eager with one sentence, never a failed job; a compiled
job points inductor's cache at the data folder and says once in its timeline how long the
compile took; a job that does not ask runs the same model eagerly, bit for bit.

The compiles here use dynamo's "eager" backend (traced, not built: seconds, not the two
minutes inductor takes on the tiny model on two busy cores). Inductor itself, its cache
and its speed, are benchmarks/speed.py's (`compile_speedup_ratio`)."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from app.engine.generation.files.sources import ModelInfo
from app.engine.generation.load import compiled
from app.engine.generation.outcome import OutcomeKind
from app.engine.generation.runner import Runner
from app.engine.history.eta import load_seconds
from app.engine.jobs.params import GenerationParams
from app.testing.tiny.flux import write_tiny_flux
from tests.engine.generation.tiny_architectures import (
    generate,
    go_on,
    max_diff,
    model_info,
    pause_at,
    pixels,
    runner_for,
)

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")


def params(**changes: Any) -> GenerationParams:
    base: dict[str, Any] = {
        "prompt": "the cat", "model": "m", "steps": 2, "cfg": 3.5, "width": 32, "height": 32,
        "seed": 3,
    }  # fmt: skip
    return GenerationParams(**{**base, **changes})


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> ModelInfo:
    return model_info(write_tiny_flux(tmp_path_factory.mktemp("compiled-flux") / "flux-dev"))


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EASEL_HOME", str(tmp_path / "home"))
    monkeypatch.delenv(compiled.CACHE_ENV, raising=False)  # so the data folder's is used
    return tmp_path / "home"


def _failing_backend(_graph: Any, _inputs: Any) -> Any:
    raise RuntimeError("no C compiler here")


def test_a_compile_that_fails_runs_the_job_eagerly_with_one_sentence(
    model: ModelInfo, tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(compiled, "BACKEND", _failing_backend)
    runner = runner_for(model)
    eager = generate(runner, params(), tmp_path, "eager")
    out = runner.run(params(compile=True), output_path=tmp_path / "c.png",
                     checkpoint_path=tmp_path / "c.ckpt", on_step=go_on)  # fmt: skip
    assert out.kind is OutcomeKind.COMPLETED and out.image_path is not None
    assert "could not be compiled (" in out.note and "no C compiler here" in out.note
    assert out.note.count(";") == 0  # one sentence
    assert max_diff(pixels(out.image_path), eager) == 0
    # Not tried again on this loaded model: the next job that asks runs eagerly at once.
    again = runner.run(params(compile=True), output_path=tmp_path / "d.png",
                       checkpoint_path=tmp_path / "d.ckpt", on_step=go_on)  # fmt: skip
    assert again.note == "" and not compiled.is_compiled(runner.load("m").pipe)


def test_a_compiled_job_uses_the_data_folders_cache_and_says_so_once(
    model: ModelInfo, tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(compiled, "BACKEND", "eager")
    runner: Runner = runner_for(model)
    eager = generate(runner, params(), tmp_path, "eager")
    first = runner.run(params(compile=True), output_path=tmp_path / "c.png",
                       checkpoint_path=tmp_path / "c.ckpt", on_step=go_on)  # fmt: skip
    assert first.kind is OutcomeKind.COMPLETED and first.image_path is not None
    assert compiled.COMPILING in first.load_note and load_seconds(first.load_note) > 0
    assert compiled.is_compiled(runner.load("m").pipe)
    assert os.environ[compiled.CACHE_ENV] == str(home / compiled.CACHE_FOLDER)
    assert max_diff(pixels(first.image_path), eager) == 0  # traced only: the same kernels
    second = runner.run(params(compile=True, seed=4), output_path=tmp_path / "s.png",
                        checkpoint_path=tmp_path / "s.ckpt", on_step=go_on)  # fmt: skip
    assert compiled.COMPILING not in second.load_note  # once
    # A job that does not ask runs the same loaded model eagerly: stock-exact as before.
    assert max_diff(generate(runner, params(), tmp_path, "eager-again"), eager) == 0
    assert not compiled.is_compiled(runner.load("m").pipe)


def test_a_compiled_cached_job_paused_and_resumed_draws_the_uninterrupted_image(
    model: ModelInfo, tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dynamo traces the blocks through First Block Cache's hooks: the cache still decides
    per step, and its state still travels in the checkpoint."""
    monkeypatch.setattr(compiled, "BACKEND", "eager")
    job = params(compile=True, steps=4, speed="fast", speed_threshold=0.5)
    runner = runner_for(model)
    whole = generate(runner, job, tmp_path, "whole")
    assert max_diff(whole, generate(runner, replace(job, compile=False), tmp_path, "e")) == 0
    out, ckpt = tmp_path / "p.png", tmp_path / "p.ckpt"
    paused = runner.run(job, output_path=out, checkpoint_path=ckpt, on_step=pause_at(2))
    assert paused.kind is OutcomeKind.PAUSED
    resumed = runner_for(model).run(job, output_path=out, checkpoint_path=ckpt, on_step=go_on)
    assert resumed.resumed_from is not None and max_diff(pixels(out), whole) == 0

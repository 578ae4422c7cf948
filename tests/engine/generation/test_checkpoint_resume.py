"""Checkpoints across processes and formats: one written by one process resumes in a fresh
one (spawn) to exactly the image of an uninterrupted run, on the bundled model (SD family)
and on a tiny SDXL, with every scheduler; a file of the format before model families
(version 2, the scheduler as its attribute values) resumes exactly too, or is refused as
a mismatch (the job then starts over from step 0) when it lacks what its scheduler needs."""

from __future__ import annotations

import hashlib
import io
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from app.engine.generation import denoise
from app.engine.generation.errors import CheckpointMismatch
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.files.sources import ModelInfo, resolve_model
from app.engine.generation.loop.checkpoint import MAGIC, VERSION, load_checkpoint
from app.engine.generation.outcome import OutcomeKind
from app.engine.generation.runner import Runner
from app.engine.jobs.params import SCHEDULERS, GenerationParams
from tests.engine.generation.tiny_architectures import (
    generate,
    go_on,
    max_diff,
    model_info,
    params_for,
    pause_at,
    pixels,
    runner_for,
    tiny_folders,
)

__all__ = ["tiny_folders"]  # the fixture, imported for pytest

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

STEPS, PAUSE_AT = 6, 3
MODELS = ["bundled", "sdxl"]


@pytest.fixture(scope="module")
def models(tiny_folders: dict[Architecture, Path]) -> dict[str, ModelInfo]:
    bundled = resolve_model("easel-tiny")
    assert bundled.architecture is Architecture.SD1  # the SD family, v-prediction
    return {"bundled": bundled, "sdxl": model_info(tiny_folders[Architecture.SDXL])}


@pytest.fixture(scope="module")
def runners(models: dict[str, ModelInfo]) -> dict[str, Runner]:
    return {name: runner_for(model) for name, model in models.items()}


def job_params(scheduler: str) -> GenerationParams:
    return params_for("m", scheduler, steps=STEPS)


def _resume_all(jobs: list[tuple[ModelInfo, GenerationParams, Path, Path]]) -> None:
    for model, params, out, ckpt in jobs:
        outcome = runner_for(model).run(
            params, output_path=out, checkpoint_path=ckpt, on_step=go_on
        )
        assert outcome.resumed_from is not None and outcome.resumed_from.step == PAUSE_AT


def test_a_checkpoint_resumes_in_a_fresh_process_to_the_same_image(
    models: dict[str, ModelInfo], runners: dict[str, Runner], tmp_path: Path,
    fresh_process: Callable[..., Any],
) -> None:  # fmt: skip
    jobs = []
    for name in MODELS:
        for index, scheduler in enumerate(SCHEDULERS):
            params = job_params(scheduler)
            out, ckpt = tmp_path / f"{name}-{index}.png", tmp_path / f"{name}-{index}.ckpt"
            paused = runners[name].run(
                params, output_path=out, checkpoint_path=ckpt, on_step=pause_at(PAUSE_AT)
            )
            assert paused.kind is OutcomeKind.PAUSED
            assert _header(ckpt)["version"] == VERSION
            jobs.append((models[name], params, out, ckpt))
    fresh_process(_resume_all, jobs)
    for index, (model, params, out, ckpt) in enumerate(jobs):
        name = MODELS[index // len(SCHEDULERS)]
        reference = generate(runners[name], params, tmp_path, f"reference-{index}")
        assert not ckpt.exists()
        assert max_diff(reference, pixels(out)) == 0, (model.name, params.scheduler)


@pytest.mark.parametrize("scheduler", SCHEDULERS)
@pytest.mark.parametrize("name", MODELS)
def test_a_version_2_checkpoint_still_resumes_exactly(
    runners: dict[str, Runner], tmp_path: Path, name: str, scheduler: str
) -> None:
    runner, params = runners[name], job_params(scheduler)
    reference = generate(runner, params, tmp_path, "reference")
    ckpt, out = tmp_path / "job.ckpt", tmp_path / "job.png"
    write_version_2(ckpt, paused_state(runner, params), params)
    outcome = runner.run(params, output_path=out, checkpoint_path=ckpt, on_step=go_on)
    assert outcome.resumed_from is not None and outcome.resumed_from.step == PAUSE_AT
    assert max_diff(reference, pixels(out)) == 0


def test_a_version_2_checkpoint_lacking_its_scheduler_history_is_a_mismatch(
    runners: dict[str, Runner], tmp_path: Path
) -> None:
    runner, params = runners["sdxl"], job_params("DPM++ 2M")
    ckpt, out = tmp_path / "job.ckpt", tmp_path / "job.png"
    write_version_2(ckpt, paused_state(runner, params), params, drop="model_outputs")
    assert load_checkpoint(ckpt, params).checkpoint.family == "sdxl"  # readable as such
    # A mismatch, so the worker sets the file aside and starts over from step 0.
    with pytest.raises(CheckpointMismatch, match="lacks the DPMSolverMultistepScheduler state"):
        runner.run(params, output_path=out, checkpoint_path=ckpt, on_step=go_on)
    assert not out.exists()


def paused_state(runner: Runner, params: GenerationParams) -> denoise.DenoiseState:
    """The loop's state where the runner would pause at step PAUSE_AT."""
    pipe = runner.load(params.model).pipe
    state = denoise.start(pipe, params)
    while state.steps_done < PAUSE_AT:
        denoise.advance(pipe, state)
    return state


def write_version_2(
    path: Path, state: denoise.DenoiseState, params: GenerationParams, drop: str = ""
) -> None:
    """A checkpoint file exactly as Easel wrote them before model families (version 2)."""
    conditioning = state.conditioning
    scheduler = {
        k: v for k, v in vars(state.scheduler).items() if k not in ("_internal_dict", drop)
    }
    payload_state: dict[str, Any] = {
        "params": params.to_dict(),
        "steps_done": state.steps_done,
        "index": state.index,
        "elapsed_s": 1.5,
        "latents": state.latents,
        "prompt_embeds": conditioning["prompt_embeds"],
        "timestep_cond": conditioning.get("timestep_cond"),
        "generator_state": state.generator.get_state(),
        "scheduler_class": type(state.scheduler).__name__,
        "scheduler_state": scheduler,
        "pooled_embeds": conditioning.get("pooled_embeds"),
        "add_time_ids": conditioning.get("add_time_ids"),
    }
    buffer = io.BytesIO()
    torch.save(payload_state, buffer)
    payload = buffer.getvalue()
    header = {
        "version": 2,
        "sha256": hashlib.sha256(payload).hexdigest(),
        "payload_bytes": len(payload),
        "params": params.to_dict(),
        "steps_done": state.steps_done,
        "saved_at": time.time(),
    }
    path.write_bytes(MAGIC + json.dumps(header, sort_keys=True).encode() + b"\n" + payload)


def _header(path: Path) -> dict[str, Any]:
    header: dict[str, Any] = json.loads(path.read_bytes()[len(MAGIC) :].split(b"\n", 1)[0])
    return header

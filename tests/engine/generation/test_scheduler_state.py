"""The scheduler state a checkpoint keeps is enough: a scheduler rebuilt from it, after any
step, goes on exactly as the one that never stopped (no model needed: a fixed function of
the sample stands in for the UNet). A diffusers release that keeps more state between steps
than `schedulers.KINDS` declares fails here, before any image differs."""

from __future__ import annotations

import inspect
import io
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from diffusers import HeunDiscreteScheduler

from app.engine.generation.errors import CheckpointMismatch
from app.engine.generation.loop import schedulers
from app.engine.jobs.params import SCHEDULERS

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

STEPS = 6
BUNDLED_SCHEDULER = (
    Path(__file__).resolve().parents[3]
    / "resources"
    / "models"
    / "easel-tiny"
    / "scheduler"
    / "scheduler_config.json"
)
# The bundled model's (v-prediction, trailing spacing, zero terminal SNR) and SD's stock one.
CONFIGS = {
    "bundled": json.loads(BUNDLED_SCHEDULER.read_text()),
    "stock-sd": {"beta_schedule": "scaled_linear", "beta_start": 0.00085, "beta_end": 0.012},
}


class _Pipe:
    """What `make_scheduler` reads of a pipeline: its scheduler's config."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.scheduler = HeunDiscreteScheduler.from_config(config)


def fresh(name: str, config: str, begin_at_zero: bool) -> Any:
    scheduler = schedulers.make_scheduler(_Pipe(CONFIGS[config]), name)
    scheduler.set_timesteps(STEPS, device="cpu")
    if begin_at_zero and hasattr(scheduler, "set_begin_index"):
        scheduler.set_begin_index(0)  # as the SDXL family does
    return scheduler


def model_output(sample: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    return torch.tanh(sample) * 0.7 + torch.sin(sample * float(t) / 1000)


def run(scheduler: Any, sample: torch.Tensor, generator: torch.Generator, steps: range) -> Any:
    for index in steps:
        t = scheduler.timesteps[index]
        scaled = scheduler.scale_model_input(sample, t)
        accepted = inspect.signature(scheduler.step).parameters  # as the loop calls it
        kwargs = {"generator": generator} if "generator" in accepted else {}
        sample = scheduler.step(model_output(scaled, t), t, sample, **kwargs).prev_sample
    return sample


def through_a_file(state: dict[str, Any]) -> dict[str, Any]:
    """As a checkpoint carries it: saved and loaded with `weights_only`."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    loaded: dict[str, Any] = torch.load(buffer, weights_only=True)
    return loaded


@pytest.mark.parametrize("begin_at_zero", [False, True], ids=["sd", "sdxl"])
@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("name", [*SCHEDULERS, "Heun"])
def test_a_restored_scheduler_goes_on_exactly_after_any_step(
    monkeypatch: pytest.MonkeyPatch, name: str, config: str, begin_at_zero: bool
) -> None:
    monkeypatch.setitem(schedulers.SCHEDULER_CLASSES, "Heun", HeunDiscreteScheduler)
    start = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(7))
    reference = fresh(name, config, begin_at_zero)
    total = len(reference.timesteps)
    expected = run(reference, start, torch.Generator().manual_seed(1), range(total))
    order = reference.order
    for stop in range(order, total, order):  # every step boundary, as the runner pauses
        first = fresh(name, config, begin_at_zero)
        generator = torch.Generator().manual_seed(1)
        sample = run(first, start, generator, range(stop))
        saved = through_a_file(schedulers.scheduler_state(first))
        second = fresh(name, config, begin_at_zero)
        schedulers.load_scheduler_state(second, saved, torch.device("cpu"))
        finished = run(second, sample, generator, range(stop, total))
        assert torch.equal(finished, expected), f"{name} resumed after timestep {stop}"


@pytest.mark.parametrize("name", SCHEDULERS)
def test_the_saved_state_uses_our_names_only(name: str) -> None:
    scheduler = fresh(name, "bundled", begin_at_zero=False)
    run(scheduler, torch.zeros(1, 4, 8, 8), torch.Generator().manual_seed(0), range(2))
    state = schedulers.scheduler_state(scheduler)
    kind = schedulers.kind_of(scheduler)
    assert set(state) == {*kind.history, *(["step_index"] if kind.indexed else [])}
    assert not any(key.startswith("_") for key in state)


def test_every_a1111_kind_declares_its_state() -> None:
    assert set(schedulers.SCHEDULER_CLASSES) == set(SCHEDULERS)
    for cls in schedulers.SCHEDULER_CLASSES.values():
        assert cls in schedulers.KINDS, cls.__name__


def test_a_state_lacking_what_the_kind_needs_is_a_mismatch() -> None:
    scheduler = fresh("DPM++ 2M", "bundled", begin_at_zero=False)
    with pytest.raises(CheckpointMismatch, match="DPMSolverMultistepScheduler state model_outputs"):
        schedulers.load_scheduler_state(
            scheduler, {"step_index": 2, "lower_order_nums": 1}, torch.device("cpu")
        )

"""Wan 2.2 A14B's pair of experts within the device's budget (`load.experts`): the budget
counts both, and where the pair does not fit, only the expert in use stays on the device,
the two changing places at the boundary switch, and the UMT5 text encoder comes onto the
device only to encode the prompt (no expert beside it). On the CPU, with a device budget
given as the memory tests give theirs: the plan chosen from the budget, where each module
is at each phase (every `.to()` of the pipeline's modules recorded, the waiting room told
from the device by its name), and the clip, a pause before the switch and one after it,
each equal to the uninterrupted clip with everything on the device."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.engine.generation import experts
from app.engine.generation.experts import (
    BOTH_ON_DEVICE,
    ONE_AT_A_TIME,
    expert_plan,
    plan_of,
    swap_of,
)
from app.engine.generation.files.sources import ModelInfo
from app.engine.generation.load.pipelines import PipelineCache
from app.engine.generation.memory import MemoryBudget, module_bytes, pipeline_bytes
from app.engine.generation.outcome import OutcomeKind, StepDecision, StepProgress
from app.engine.generation.runner import Runner, on_device_bytes
from tests.engine.generation.test_wan import Written, clip, max_frame_diff, wan_params
from tests.engine.generation.tiny_architectures import model_info, pause_at, runner_for

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

# Timesteps 1000, 858, 602, 9: the high-noise expert at step 1, the low-noise from step 2.
PARAMS = wan_params(steps=4, frames=5)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> ModelInfo:
    from app.testing.tiny.wan import write_tiny_wan

    return model_info(write_tiny_wan(tmp_path_factory.mktemp("wan22") / "wan22", experts=True))


@pytest.fixture(scope="module")
def sizes(model: ModelInfo) -> tuple[int, int, int]:
    """The whole pipeline's weights (both experts), one expert's and the text encoder's."""
    pipe = runner_for(model).load("wan").pipe
    return (
        pipeline_bytes(pipe),
        module_bytes([pipe.transformer_2]),
        module_bytes([pipe.text_encoder]),
    )


def within(model: ModelInfo, device_bytes: int) -> Runner:
    return runner_for(model, cache=PipelineCache(budget=MemoryBudget(device_bytes)))


@pytest.fixture
def written(monkeypatch: pytest.MonkeyPatch) -> Written:
    return Written(monkeypatch)


def test_the_plan_is_chosen_from_the_budget(model: ModelInfo, sizes: tuple[int, int, int]) -> None:
    whole, expert, encoder = sizes
    assert expert_plan(whole, whole) == BOTH_ON_DEVICE
    assert expert_plan(whole, whole - 1) == ONE_AT_A_TIME
    both = within(model, whole).load("wan")
    assert plan_of(both.pipe) == BOTH_ON_DEVICE and swap_of(both.pipe) is None
    assert on_device_bytes(both.pipe) == whole
    one = within(model, whole - 1).load("wan")
    assert plan_of(one.pipe) == ONE_AT_A_TIME
    # The budget counts both experts; the device holds at most the pipeline less the two
    # experts and the text encoder, and the largest of those three (they take turns).
    assert on_device_bytes(one.pipe) == whole - 2 * expert - encoder + max(expert, encoder)
    swap = swap_of(one.pipe)
    assert swap is not None and swap.on_device == "" and swap.moves == []


def test_one_expert_at_a_time_gives_the_same_clip_across_a_pause_before_and_after_the_switch(
    model: ModelInfo, sizes: tuple[int, int, int], tmp_path: Path, written: Written
) -> None:
    whole_bytes = sizes[0]
    uninterrupted = clip(within(model, whole_bytes), PARAMS, tmp_path, "both")
    assert uninterrupted.image_path is not None
    reference = written.frames[uninterrupted.image_path]
    one = within(model, whole_bytes - 1)
    done = clip(one, PARAMS, tmp_path, "one")
    assert (
        "one expert at a time, the text encoder off the device once the prompt is encoded "
        "(the pair does not fit" in done.load_note
    )
    assert "expert" not in uninterrupted.load_note
    swap = swap_of(one.load("wan").pipe)
    # UMT5 for the prompt, then the high-noise expert, the low-noise one once at the switch.
    assert swap is not None and swap.moves == ["text_encoder", "transformer", "transformer_2"]
    assert done.image_path is not None
    assert max_frame_diff(written.frames[done.image_path], reference) == 0
    for name, step in (("before", 1), ("after", 2)):  # paused before / after the switch
        paused = clip(within(model, whole_bytes - 1), PARAMS, tmp_path, name,
                      on_step=pause_at(step))  # fmt: skip
        assert paused.kind is OutcomeKind.PAUSED
        fresh = within(model, whole_bytes - 1)  # another process: loaded anew
        resumed = clip(fresh, PARAMS, tmp_path, name)
        assert resumed.resumed_from is not None and resumed.resumed_from.step == step
        # The resumed clip's first step after the switch moved the low-noise expert in.
        swap = swap_of(fresh.load("wan").pipe)
        assert swap is not None and swap.moves == ["transformer_2"], name
        assert swap.on_device == "transformer_2"
        assert resumed.image_path is not None
        assert max_frame_diff(written.frames[resumed.image_path], reference) == 0, name


WAITING = "cpu:0"  # the waiting room under another name than the device's "cpu": moves seen
PARTS = ("text_encoder", "transformer", "transformer_2", "vae")


class Placements:
    """Where each of the pipeline's modules was last sent by a `.to()` ("device" or
    "waiting"), and every such move in order: the real modules move (CPU to CPU)."""

    def __init__(self, pipe: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        self.where: dict[str, str] = {}
        self.log: list[tuple[str, str]] = []
        for name in PARTS:
            module = getattr(pipe, name)
            monkeypatch.setattr(module, "to", self._recording(name, module.to))

    def _recording(self, name: str, to: Callable[..., Any]) -> Callable[..., Any]:
        def recorded(*args: Any, **kwargs: Any) -> Any:
            place = "waiting" if str(args[0]) == WAITING else "device"
            self.where[name] = place
            self.log.append((name, place))
            return to(*args, **kwargs)

        return recorded

    def on_device(self) -> set[str]:
        return {name for name, place in self.where.items() if place == "device"}


def test_each_module_is_where_the_plan_says_at_each_phase_and_umt5_only_while_encoding(
    model: ModelInfo, sizes: tuple[int, int, int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Placed: only the VAE on the device. Encoding: UMT5 alone comes on, and goes back
    once the prompt is encoded, before any expert. Step 1 (t=1000): the high-noise expert;
    from step 2 (t=858, past the switch at 875): the low-noise one, the other waiting. A
    clip resumed after a pause needs no prompt encoded: UMT5 never comes onto the device."""
    monkeypatch.setattr(experts, "WAITING_ROOM", WAITING)
    whole_bytes = sizes[0]
    runner = within(model, whole_bytes - 1)
    pipe = runner.load("wan").pipe
    placements = Placements(pipe, monkeypatch)
    experts.place(pipe, "cpu", whole_bytes - 1)  # placed again, with the moves recorded
    assert placements.on_device() == {"vae"}
    at_step: dict[int, set[str]] = {}

    def record(progress: StepProgress) -> StepDecision:
        at_step[progress.step] = placements.on_device()
        return StepDecision.PAUSE if progress.step == 2 else StepDecision.CONTINUE

    placements.log.clear()
    paused = clip(runner, PARAMS, tmp_path, "phases", on_step=record)
    assert paused.kind is OutcomeKind.PAUSED
    assert placements.log[:3] == [
        ("text_encoder", "device"), ("text_encoder", "waiting"), ("transformer", "device"),
    ]  # fmt: skip
    assert at_step == {1: {"vae", "transformer"}, 2: {"vae", "transformer_2"}}
    placements.log.clear()
    fresh = within(model, whole_bytes - 1)
    fresh_pipe = fresh.load("wan").pipe
    fresh_placements = Placements(fresh_pipe, monkeypatch)
    resumed = clip(fresh, PARAMS, tmp_path, "phases")
    assert resumed.resumed_from is not None and resumed.resumed_from.step == 2
    assert fresh_placements.log == [("transformer_2", "device")]  # no prompt to encode
    assert "text_encoder" not in fresh_placements.on_device()

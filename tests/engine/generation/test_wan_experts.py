"""Wan 2.2 A14B's pair of experts within the device's budget (`load.experts`): the budget
counts both, and where the pair does not fit, only the expert in use stays on the device,
the two changing places at the boundary switch. On the CPU, with a device budget given as
the memory tests give theirs: the plan chosen from the budget, and the clip, a pause before
the switch and one after it, each equal to the uninterrupted clip with both on the device."""

from __future__ import annotations

from pathlib import Path

import pytest

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
from app.engine.generation.outcome import OutcomeKind
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
def sizes(model: ModelInfo) -> tuple[int, int]:
    """The whole pipeline's weights (both experts) and one expert's."""
    pipe = runner_for(model).load("wan").pipe
    return pipeline_bytes(pipe), module_bytes([pipe.transformer_2])


def within(model: ModelInfo, device_bytes: int) -> Runner:
    return runner_for(model, cache=PipelineCache(budget=MemoryBudget(device_bytes)))


@pytest.fixture
def written(monkeypatch: pytest.MonkeyPatch) -> Written:
    return Written(monkeypatch)


def test_the_plan_is_chosen_from_the_budget(model: ModelInfo, sizes: tuple[int, int]) -> None:
    whole, expert = sizes
    assert expert_plan(whole, whole) == BOTH_ON_DEVICE
    assert expert_plan(whole, whole - 1) == ONE_AT_A_TIME
    both = within(model, whole).load("wan")
    assert plan_of(both.pipe) == BOTH_ON_DEVICE and swap_of(both.pipe) is None
    assert on_device_bytes(both.pipe) == whole
    one = within(model, whole - 1).load("wan")
    assert plan_of(one.pipe) == ONE_AT_A_TIME
    # The budget counts both experts; the device holds the pipeline less the waiting one.
    assert on_device_bytes(one.pipe) == whole - expert
    swap = swap_of(one.pipe)
    assert swap is not None and swap.on_device == "transformer" and swap.moves == []


def test_one_expert_at_a_time_gives_the_same_clip_across_a_pause_before_and_after_the_switch(
    model: ModelInfo, sizes: tuple[int, int], tmp_path: Path, written: Written
) -> None:
    whole_bytes, _expert = sizes
    uninterrupted = clip(within(model, whole_bytes), PARAMS, tmp_path, "both")
    assert uninterrupted.image_path is not None
    reference = written.frames[uninterrupted.image_path]
    one = within(model, whole_bytes - 1)
    done = clip(one, PARAMS, tmp_path, "one")
    assert "one expert at a time (the pair does not fit" in done.load_note
    assert "expert" not in uninterrupted.load_note
    swap = swap_of(one.load("wan").pipe)
    assert swap is not None and swap.moves == ["transformer_2"]  # once, at the switch
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

"""The loaded-model cache within a memory budget: as many models as fit, the least recently
used evicted first, and a model evicted then used again makes the same image."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.generation.device import CPU
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.files.sources import ModelInfo, ModelNotFound
from app.engine.generation.load.pipelines import PipelineCache
from app.engine.generation.memory import MemoryBudget, default_budget, pipeline_bytes
from app.engine.generation.runner import Runner
from tests.engine.generation.tiny_architectures import generate, model_info, params_for

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")


@pytest.fixture(scope="module")
def three_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ModelInfo]:
    from app.testing.tiny.unet import write_tiny_pipeline

    root = tmp_path_factory.mktemp("budget-models")
    return {
        name: model_info(write_tiny_pipeline(root / name, seed=seed, architecture=arch), name)
        for name, seed, arch in [
            ("a", 1, Architecture.SD1),
            ("b", 2, Architecture.SD1),
            ("x", 3, Architecture.SDXL),
        ]
    }


def runner_with(models: dict[str, ModelInfo], budget_bytes: int) -> Runner:
    cache = PipelineCache(budget=MemoryBudget(budget_bytes))

    def resolve(name: str) -> ModelInfo:
        if name not in models:
            raise ModelNotFound(name, [])
        return models[name]

    return Runner(device=CPU, resolve=resolve, cache=cache, threads=1)


def size_of(models: dict[str, ModelInfo], name: str) -> int:
    probe = runner_with(models, 2**40)
    return pipeline_bytes(probe.load(name).pipe)


def test_models_that_fit_stay_loaded_and_the_least_recently_used_goes_first(
    three_models: dict[str, ModelInfo],
) -> None:
    a, b = size_of(three_models, "a"), size_of(three_models, "b")
    runner = runner_with(three_models, a + b + a // 2)  # room for two of them
    for name in ["a", "b", "a"]:
        runner.load(name)
    assert runner.cache.loads == 2 and runner.cache.last_fetch.note == "model already loaded"
    assert runner.held_models() == ["a", "b"]
    runner.load("x")  # b is the least recently used: it goes
    assert runner.held_models()[0] == "x" and "b" not in runner.held_models()
    assert runner.cache.last_fetch.note.startswith("model loaded in ")


def test_a_model_evicted_then_used_again_makes_the_same_image(
    three_models: dict[str, ModelInfo], tmp_path: Path
) -> None:
    runner = runner_with(three_models, size_of(three_models, "a") * 3 // 2)  # one at a time
    first = generate(runner, params_for("a"), tmp_path, "first")
    other = generate(runner, params_for("x"), tmp_path, "other")
    assert runner.held_models() == ["x"]
    again = generate(runner, params_for("a"), tmp_path, "again")
    assert runner.cache.loads == 3
    assert (first == again).all() and first.shape == again.shape
    assert other.shape == first.shape and (other != first).any()


def test_a_budget_too_small_for_any_model_still_holds_the_one_in_use(
    three_models: dict[str, ModelInfo],
) -> None:
    runner = runner_with(three_models, 1)
    runner.load("a")
    runner.load("b")
    assert runner.held_models() == ["b"]


def test_the_default_budget_is_half_the_ram_on_a_cpu() -> None:
    import psutil

    budget = default_budget("cpu")
    assert budget.device_bytes == int(0.5 * psutil.virtual_memory().total)
    assert budget.standby_bytes == 0
    assert MemoryBudget.total(8 * 2**30, "cpu") == MemoryBudget(8 * 2**30)


def test_read_ahead_reads_the_files_of_a_model_not_held_and_skips_one_held(
    three_models: dict[str, ModelInfo], monkeypatch: pytest.MonkeyPatch
) -> None:
    import app.engine.generation.runner as runner_module

    read: list[Path] = []
    real = runner_module.prefetch

    def spy(path: Path, **options: object) -> int:
        read.append(path)
        return real(path, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(runner_module, "prefetch", spy)
    runner = runner_with(three_models, 2**40)
    runner.load("a")
    assert runner.read_ahead("a") is None  # held: nothing to read
    assert runner.read_ahead("no such model") is None
    thread = runner.read_ahead("b")
    assert thread is not None
    thread.join(30)
    folder = three_models["b"].path
    assert read and all(folder in path.parents for path in read)
    assert {path.suffix for path in read} == {".safetensors"}
    assert runner.cache.loads == 1  # read into memory, not loaded


def test_a_model_pushed_off_the_device_stands_by_in_ram_and_comes_back_as_a_copy(
    three_models: dict[str, ModelInfo], tmp_path: Path
) -> None:
    """The tiers' bookkeeping, on a CPU standing in for the device (the copy is a no-op
    there; on a GPU it is `.to("cuda")`): no second load, the same image."""
    size = size_of(three_models, "a")
    cache = PipelineCache(budget=MemoryBudget(size * 3 // 2, standby_bytes=size * 5 // 2))
    runner = Runner(device=CPU, resolve=three_models.__getitem__, cache=cache, threads=1)
    first = generate(runner, params_for("a"), tmp_path, "first")
    runner.load("b")  # a goes to the standby, not away
    assert [(m.name, tier.value) for m, tier in cache.held()] == [
        ("b", "device"), ("a", "standby")
    ]  # fmt: skip
    again = generate(runner, params_for("a"), tmp_path, "again")
    assert cache.loads == 2 and cache.last_fetch.how == "copied"
    assert cache.last_fetch.note.startswith("model copied back from RAM in ")
    assert (first == again).all()
    runner.load("x")  # x is bigger: a and b both leave the device; the standby keeps what fits
    assert [m.name for m, tier in cache.held() if tier.value == "device"] == ["x"]

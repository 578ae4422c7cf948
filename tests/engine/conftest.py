"""Fixtures for the generation tests: a tiny random Stable Diffusion pipeline on disk.

torch is imported lazily, inside the fixtures, so the other engine tests stay fast.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from app.engine.generation.files.sources import ModelInfo
    from app.engine.generation.runner import Runner

TINY_MODEL = "tiny-test"


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from app.testing.tiny.unet import write_tiny_pipeline

    return write_tiny_pipeline(tmp_path_factory.mktemp("models") / TINY_MODEL)


@pytest.fixture(scope="session")
def tiny_model(tiny_model_dir: Path) -> ModelInfo:
    from app.engine.generation.files.sources import ModelInfo, ModelSource

    return ModelInfo(TINY_MODEL, tiny_model_dir, ModelSource.USER, "StableDiffusionPipeline")


@pytest.fixture(scope="session")
def tiny_runner(tiny_model: ModelInfo) -> Runner:
    """One runner for the session: the pipeline is loaded once, as in a real worker."""
    from app.engine.generation.device import CPU
    from app.engine.generation.runner import Runner

    # One thread: a tiny model gains nothing from more, and with the cores busy (training,
    # other test runs) two spinning OpenMP threads made runs up to 50x slower.
    return Runner(device=CPU, resolve=lambda name: _only(tiny_model, name), threads=1)


def _only(model: ModelInfo, name: str) -> ModelInfo:
    from app.engine.generation.files.sources import ModelNotFound

    if name != model.name:
        raise ModelNotFound(name, [model.path.parent])
    return model


@pytest.fixture(scope="session")
def fresh_process() -> Iterator[Callable[..., Any]]:
    """`run(target, *args)`: `target(*args)` in another process (spawned, as workers are),
    its exception raised here. A resume there has nothing of the process that wrote the
    checkpoint but the files, as a new worker after a crash. One process serves the
    session: each test spawning its own paid torch's import again (5-8 s a test)."""
    pool = multiprocessing.get_context("spawn").Pool(1)

    def run(target: Callable[..., Any], *args: Any, timeout: float = 300) -> Any:
        return pool.apply_async(target, args).get(timeout)

    yield run
    pool.terminate()  # at once: a clean exit waited seconds for torch to let go of memory
    pool.join()

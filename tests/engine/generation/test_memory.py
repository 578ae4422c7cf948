"""Low-VRAM mode and the one retry after running out of GPU memory."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pytest
import torch

from app.engine.generation import denoise
from app.engine.generation.architecture import Architecture
from app.engine.generation.device import CPU, DeviceChoice
from app.engine.generation.errors import is_out_of_memory
from app.engine.generation.outcome import OutcomeKind, StepDecision, StepProgress
from app.engine.generation.runner import LOW_VRAM_NOTE, Runner
from app.errors import DatabaseLocked, DatabaseUnreachable, DiskFull, is_transient
from tests.engine.generation.tiny_architectures import (
    generate,
    go_on,
    max_diff,
    model_info,
    params_for,
    pixels,
    tiny_folders,
)

__all__ = ["tiny_folders"]

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")


def test_low_vram_mode_gives_the_same_image_at_native_size(
    tiny_folders: dict[Architecture, Path], tmp_path: Path
) -> None:
    model = model_info(tiny_folders[Architecture.SDXL], "m")
    normal = Runner(device=CPU, resolve=lambda _n: model, threads=1)
    low = Runner(device=DeviceChoice("cpu", "float32", low_vram=True), resolve=lambda _n: model)
    params = params_for("m")
    assert low.load("m").pipe.vae.use_tiling
    assert (
        max_diff(generate(normal, params, tmp_path, "a"), generate(low, params, tmp_path, "b")) == 0
    )


def test_out_of_memory_is_retried_once_in_low_vram_mode(
    tiny_folders: dict[Architecture, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = model_info(tiny_folders[Architecture.SD1], "m")
    runner = Runner(device=CPU, resolve=lambda _n: model, threads=1)
    params = params_for("m")
    reference = generate(runner, params, tmp_path, "reference")
    real_advance = denoise.advance
    failures: list[Any] = []

    def out_of_memory_once(pipe: Any, state: Any) -> bool:
        if not failures:
            failures.append(pipe)
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real_advance(pipe, state)

    monkeypatch.setattr(denoise, "advance", out_of_memory_once)
    out = runner.run(
        params, output_path=tmp_path / "x.png", checkpoint_path=tmp_path / "x.ckpt", on_step=go_on
    )
    assert out.kind is OutcomeKind.COMPLETED and out.note == LOW_VRAM_NOTE
    assert runner.device.low_vram and len(failures) == 1
    assert max_diff(reference, pixels(tmp_path / "x.png")) == 0


def test_out_of_memory_in_low_vram_mode_is_not_retried_again(
    tiny_folders: dict[Architecture, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = model_info(tiny_folders[Architecture.SD1], "m")
    runner = Runner(device=DeviceChoice("cpu", "float32", low_vram=True), resolve=lambda _n: model)
    calls = []

    def always_out_of_memory(pipe: Any, state: Any) -> bool:
        calls.append(1)
        raise torch.cuda.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(denoise, "advance", always_out_of_memory)
    with pytest.raises(torch.cuda.OutOfMemoryError):
        runner.run(
            params_for("m"),
            output_path=tmp_path / "x.png",
            checkpoint_path=tmp_path / "x.ckpt",
            on_step=go_on,
        )
    assert len(calls) == 1


NOT_MEMORY = [
    pytest.param(DatabaseUnreachable("the database server cannot be reached"), id="db-away"),
    pytest.param(DatabaseLocked("another program holds the write lock"), id="db-locked"),
    pytest.param(DiskFull("the disk holding the outputs is full"), id="disk-full"),
    pytest.param(OSError(errno.ENOSPC, "No space left on device"), id="enospc"),
    pytest.param(MemoryError(), id="host-memory"),
]


@pytest.mark.parametrize("error", NOT_MEMORY)
def test_other_transient_errors_go_up_unchanged_without_low_vram_mode(
    tiny_folders: dict[Architecture, Path], tmp_path: Path, error: Exception
) -> None:
    """A database away or a full disk is the retry policy's to decide: the pipeline stays
    loaded, low-VRAM mode stays off, and nothing is run a second time."""
    model = model_info(tiny_folders[Architecture.SD1], "m")
    runner = Runner(device=CPU, resolve=lambda _n: model, threads=1)
    loaded = runner.load("m")
    steps: list[int] = []

    def step_checkpoint(progress: StepProgress) -> StepDecision:
        steps.append(progress.step)  # where a worker reads the job's row: the database
        raise error

    assert is_transient(error) or isinstance(error, MemoryError)
    with pytest.raises(type(error)) as raised:
        runner.run(
            params_for("m"),
            output_path=tmp_path / "x.png",
            checkpoint_path=tmp_path / "x.ckpt",
            on_step=step_checkpoint,
        )
    assert raised.value is error and steps == [1]
    assert not runner.device.low_vram and runner.load("m") is loaded


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate"), id="torch"),
        pytest.param(RuntimeError("MPS backend out of memory (MPS allocated: 8 GB)"), id="mps"),
        pytest.param(RuntimeError("CUDA error: out of memory"), id="cuda-runtime"),
    ],
)
def test_only_gpu_out_of_memory_counts_as_out_of_memory(error: Exception) -> None:
    assert is_out_of_memory(error)


@pytest.mark.parametrize("error", NOT_MEMORY)
def test_other_errors_are_not_out_of_memory(error: Exception) -> None:
    assert not is_out_of_memory(error)


def test_out_of_memory_while_loading_is_still_retried_in_low_vram_mode(
    tiny_folders: dict[Architecture, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loader words its failures in one sentence, but never memory: that stays the
    runner's to retry."""
    from app.engine.generation import loader

    model = model_info(tiny_folders[Architecture.SD1], "m")
    runner = Runner(device=CPU, resolve=lambda _n: model, threads=1)
    real_place = loader._place
    placed: list[DeviceChoice] = []

    def out_of_memory_at_first(pipe: Any, device: DeviceChoice) -> None:
        placed.append(device)
        if len(placed) == 1:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 6.00 GiB")
        real_place(pipe, device)

    monkeypatch.setattr(loader, "_place", out_of_memory_at_first)
    out = runner.run(
        params_for("m"),
        output_path=tmp_path / "x.png",
        checkpoint_path=tmp_path / "x.ckpt",
        on_step=go_on,
    )
    assert out.kind is OutcomeKind.COMPLETED and out.note == LOW_VRAM_NOTE
    assert [device.low_vram for device in placed] == [False, True]

"""Low-VRAM mode and the one retry after running out of GPU memory."""

from __future__ import annotations

import errno
import weakref
from pathlib import Path
from typing import Any

import pytest
import torch

from app.engine.generation import denoise
from app.engine.generation import runner as runner_module
from app.engine.generation.device import CPU, DeviceChoice
from app.engine.generation.errors import NotEnoughGraphicsMemory, is_out_of_memory
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.memory import largest_part_bytes, module_bytes
from app.engine.generation.outcome import (
    GenerationOutcome,
    OutcomeKind,
    StepDecision,
    StepProgress,
)
from app.engine.generation.runner import LOW_VRAM_NOTE, Runner
from app.errors import DatabaseLocked, DatabaseUnreachable, DiskFull, is_transient, is_user_error
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


def run_m(runner: Runner, folder: Path) -> GenerationOutcome:
    """Model "m" at its test parameters, every step let through; the outcome (its note)."""
    return runner.run(
        params_for("m"),
        output_path=folder / "x.png",
        checkpoint_path=folder / "x.ckpt",
        on_step=go_on,
    )


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


def test_out_of_memory_in_low_vram_mode_is_not_retried_again_and_says_what_is_needed(
    tiny_folders: dict[Architecture, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One sentence naming the model, what its largest part takes (offloading puts one part
    at a time on the GPU) and what the GPU has; not transient: no retry cures it."""
    model = model_info(tiny_folders[Architecture.SD1], "m")
    runner = Runner(device=DeviceChoice("cpu", "float32", low_vram=True), resolve=lambda _n: model)
    calls = []

    def always_out_of_memory(pipe: Any, state: Any) -> bool:
        calls.append(1)
        raise torch.cuda.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(denoise, "advance", always_out_of_memory)
    monkeypatch.setattr(runner_module, "largest_part_bytes", lambda pipe: 23_800_000_000)
    monkeypatch.setattr(runner_module, "device_memory_free", lambda device: 8 * 10**9)
    with pytest.raises(NotEnoughGraphicsMemory) as raised:
        run_m(runner, tmp_path)
    assert str(raised.value) == (
        "m needs about 23.8 GB of graphics memory even with low-VRAM mode; this GPU has 8.0 GB free"
    )
    assert len(calls) == 1 and is_user_error(raised.value) and not is_transient(raised.value)


def test_a_job_that_fits_neither_way_fails_after_its_one_low_vram_retry(
    tiny_folders: dict[Architecture, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The measured need: the UNet, the tiny pipeline's largest part, in the job's dtype."""
    model = model_info(tiny_folders[Architecture.SD1], "m")
    runner = Runner(device=CPU, resolve=lambda _n: model, threads=1)
    unet_bytes = module_bytes([runner.load("m").pipe.unet])
    calls = []

    def always_out_of_memory(pipe: Any, state: Any) -> bool:
        calls.append(1)
        raise torch.cuda.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(denoise, "advance", always_out_of_memory)
    with pytest.raises(NotEnoughGraphicsMemory) as raised:
        run_m(runner, tmp_path)
    assert len(calls) == 2 and runner.device.low_vram
    assert largest_part_bytes(runner.load("m").pipe) == unet_bytes > 0
    assert str(raised.value) == (
        f"m needs about {unet_bytes / 1e9:.1f} GB of graphics memory even with low-VRAM mode"
    )  # on a CPU: no GPU free memory to tell


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
    from app.engine.generation.load import pipelines as loader

    model = model_info(tiny_folders[Architecture.SD1], "m")
    runner = Runner(device=CPU, resolve=lambda _n: model, threads=1)
    real_place = loader._place
    placed: list[DeviceChoice] = []

    def out_of_memory_at_first(pipe: Any, device: DeviceChoice, *budget: int | None) -> None:
        placed.append(device)
        if len(placed) == 1:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 6.00 GiB")
        real_place(pipe, device, *budget)

    monkeypatch.setattr(loader, "_place", out_of_memory_at_first)
    out = run_m(runner, tmp_path)
    assert out.kind is OutcomeKind.COMPLETED and out.note == LOW_VRAM_NOTE
    assert [device.low_vram for device in placed] == [False, True]


def test_the_failed_attempts_memory_is_collected_before_the_low_vram_retry_frees_and_loads(
    tiny_folders: dict[Architecture, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the failed attempt held (a tensor in a frame of its traceback, and the weights
    of the pipeline that ran out of memory) is gone, by weak reference, when the retry empties
    the GPU's cache and when it loads its low-VRAM pipeline: emptying the cache while the
    traceback still holds them (inside the `except`) gives nothing back to the GPU."""
    from app.engine.generation.load import pipelines as loader

    model = model_info(tiny_folders[Architecture.SD1], "m")
    runner = Runner(device=CPU, resolve=lambda _n: model, threads=1)
    held: dict[str, weakref.ref[torch.Tensor]] = {}
    alive: list[tuple[str, list[str]]] = []  # (where, what of the failed attempt still lives)
    real_advance, real_load = denoise.advance, loader.load_pipeline

    def out_of_memory_holding_activations(pipe: Any, state: Any) -> bool:
        if not held:
            activations = torch.ones(4, 1024, 1024)  # 16 MiB, as a forward pass holds them
            held["activations"] = weakref.ref(activations)
            held["weights"] = weakref.ref(next(pipe.unet.parameters()))
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real_advance(pipe, state)

    def noting(where: str, then: Any) -> Any:
        def hook(*args: Any, **kwargs: Any) -> Any:
            alive.append((where, [name for name, ref in held.items() if ref() is not None]))
            return then(*args, **kwargs)

        return hook

    runner.load("m")
    monkeypatch.setattr(denoise, "advance", out_of_memory_holding_activations)
    monkeypatch.setattr(runner_module, "_empty_gpu_cache", noting("empty cache", lambda: None))
    monkeypatch.setattr(loader, "load_pipeline", noting("load", real_load))
    out = run_m(runner, tmp_path)
    assert out.kind is OutcomeKind.COMPLETED and out.note == LOW_VRAM_NOTE
    assert alive == [("empty cache", []), ("load", [])]

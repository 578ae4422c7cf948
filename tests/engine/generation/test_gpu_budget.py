"""The GPU's memory budget, from what is free (plus what this worker holds already) and split
between the workers that share the device. torch.cuda is stood in for: no GPU here."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from app.engine.generation.device import DeviceChoice
from app.engine.generation.load.pipelines import PipelineCache
from app.engine.generation.memory import (
    DEVICE_HEADROOM_BYTES,
    DEVICE_SHARE,
    DEVICE_WORKERS_ENV,
    GIB,
    default_budget,
    device_memory_free,
    device_workers,
)

CUDA = DeviceChoice("cuda", "float16")


@dataclass
class FakeGpu:
    """One CUDA device as torch.cuda reports it: total, free, and what this process's
    allocator holds (its loaded models and cached blocks), in bytes."""

    total: int
    free: int
    reserved: int = 0

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
        monkeypatch.setattr(torch.cuda, "mem_get_info", self.mem_get_info)
        monkeypatch.setattr(torch.cuda, "memory_reserved", self.memory_reserved)

    def mem_get_info(self, index: int = 0) -> tuple[int, int]:
        assert index == 0
        return self.free, self.total

    def memory_reserved(self, index: int = 0) -> int:
        assert index == 0
        return self.reserved


def planned(vram: int) -> int:
    return int(DEVICE_SHARE * (vram - DEVICE_HEADROOM_BYTES))


@pytest.fixture(autouse=True)
def one_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DEVICE_WORKERS_ENV, raising=False)


def test_the_budget_is_what_is_free_plus_what_this_worker_holds_not_the_total(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another program holds 40 of 80 GiB; this worker holds 10 (its models): it plans for
    the 40 free and its own 10, not for the card's 80."""
    FakeGpu(total=80 * GIB, free=30 * GIB, reserved=10 * GIB).install(monkeypatch)
    assert device_memory_free("cuda") == 40 * GIB
    assert default_budget("cuda").device_bytes == planned(40 * GIB)


def test_workers_sharing_a_gpu_each_plan_for_their_share(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two workers start together on an empty 24 GiB card: 12 GiB each, not 24 each."""
    FakeGpu(total=24 * GIB, free=24 * GIB).install(monkeypatch)
    monkeypatch.setenv(DEVICE_WORKERS_ENV, "2")
    assert device_workers() == 2
    assert default_budget("cuda").device_bytes == planned(12 * GIB)


def test_a_share_is_never_more_than_is_free(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeGpu(total=24 * GIB, free=6 * GIB, reserved=2 * GIB).install(monkeypatch)
    monkeypatch.setenv(DEVICE_WORKERS_ENV, "2")
    assert default_budget("cuda:0").device_bytes == planned(8 * GIB)


@pytest.mark.parametrize("value", ["", "0", "-2", "two", "1.5"])
def test_an_unset_or_odd_worker_count_means_one(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DEVICE_WORKERS_ENV, value)
    assert device_workers() == 1


def test_the_cache_measures_the_budget_again_at_each_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """Free memory changes (another worker loads or unloads): the cache's budget follows."""
    gpu = FakeGpu(total=24 * GIB, free=20 * GIB)
    gpu.install(monkeypatch)
    cache = PipelineCache()
    assert cache.budget_for(CUDA).device_bytes == planned(20 * GIB)
    gpu.free = 10 * GIB
    assert cache.budget_for(CUDA).device_bytes == planned(10 * GIB)


def test_no_gpu_memory_is_known_off_cuda() -> None:
    assert device_memory_free("cpu") is None
    assert device_memory_free("mps") is None

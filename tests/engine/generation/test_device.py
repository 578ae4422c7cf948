"""The EASEL_DTYPE diagnostic: the compute dtype forced on any device, the CPU included."""

from __future__ import annotations

import pytest
import torch

from app.engine.generation.device import DTYPE_ENV, device_choice, pick_device, transformer_dtype
from app.errors import BadInput


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32"])
def test_the_forced_dtype_applies_to_every_device(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setenv(DTYPE_ENV, name)
    monkeypatch.delenv("EASEL_DEVICE", raising=False)
    assert pick_device().torch_dtype == getattr(torch, name)
    for device in ("cpu", "cuda", "cuda:1", "mps"):
        assert device_choice(device).dtype_name == name


def test_without_it_the_cpu_keeps_float32_and_accelerators_float16(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(DTYPE_ENV, raising=False)
    assert device_choice("cpu").dtype_name == "float32"
    assert device_choice("cuda:0").dtype_name == "float16"


def test_a_forced_half_dtype_is_not_promoted_for_transformers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On an Ampere GPU float16 would become bfloat16 for Flux; forced, it stays float16."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda _index: (8, 6))
    assert transformer_dtype(device_choice("cuda")) == torch.bfloat16
    monkeypatch.setenv(DTYPE_ENV, "float16")
    assert transformer_dtype(device_choice("cuda")) == torch.float16


def test_an_unknown_dtype_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DTYPE_ENV, "half")
    with pytest.raises(BadInput, match="EASEL_DTYPE must be one of float16, bfloat16, float32"):
        device_choice("cpu")

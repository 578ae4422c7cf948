"""The attention kernel a loaded model runs (load/attention.py): PyTorch SDPA wherever no
better kernel is installed (this CPU), a faster backend only for the families that declare
their attention maskless, and a backend whose requirements are unmet never fails the job."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from app.engine.generation.load import attention
from app.testing.tiny.flux import build_tiny_flux


@pytest.fixture
def pipe() -> Any:
    return build_tiny_flux(guidance_embeds=False)


def test_sdpa_runs_where_no_faster_kernel_is_installed(pipe: Any) -> None:
    for dtype in (torch.float32, torch.bfloat16):
        assert attention.best_backend(torch.device("cpu"), dtype) == attention.NATIVE
    assert attention.use_best(pipe, "flux") == ""  # nothing to say in the timeline
    assert attention.attention_of(pipe) == attention.NATIVE


def test_a_backend_is_tried_only_where_the_family_allows_and_falls_back_to_sdpa(
    pipe: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(attention, "best_backend", lambda _device, _dtype: "flash")
    assert attention.use_best(pipe, "zimage") == ""  # masked attention: never tried
    assert attention.attention_of(pipe) == attention.NATIVE
    fresh = build_tiny_flux(guidance_embeds=False)
    # flash-attn is not installed here: diffusers refuses the backend, the model stays on
    # SDPA and the job goes on.
    assert attention.use_best(fresh, "flux") == ""
    assert attention.attention_of(fresh) == attention.NATIVE

"""A1111's variation seed: the start noise is A1111's slerp of the two seeds' noises."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from app.engine.generation.loop.variation import varied_noise
from app.engine.generation.outcome import StepDecision
from app.engine.generation.runner import Runner
from app.engine.jobs.params import GenerationParams
from tests.engine.conftest import TINY_MODEL

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")
BASE = GenerationParams("the cat", model=TINY_MODEL, steps=3, seed=11, cfg=7.0)


def a1111_slerp(val, low, high):  # type: ignore[no-untyped-def]
    """modules/processing.py of AUTOMATIC1111's webui, verbatim."""
    low_norm = low / torch.norm(low, dim=1, keepdim=True)
    high_norm = high / torch.norm(high, dim=1, keepdim=True)
    dot = (low_norm * high_norm).sum(1)

    if dot.mean() > 0.9995:
        return low * val + high * (1 - val)

    omega = torch.acos(dot)
    so = torch.sin(omega)
    res = (torch.sin((1.0 - val) * omega) / so).unsqueeze(1) * low + (
        torch.sin(val * omega) / so
    ).unsqueeze(1) * high
    return res


def a1111_noise(seed: int, subseed: int, strength: float, shape: tuple[int, ...]) -> torch.Tensor:
    """A1111's create_random_tensors for one image on the CPU RNG: randn per seed, then slerp."""
    noise = torch.randn(shape, generator=torch.Generator().manual_seed(seed))
    subnoise = torch.randn(shape, generator=torch.Generator().manual_seed(subseed))
    return a1111_slerp(strength, noise, subnoise)


def test_the_noise_is_a1111s() -> None:
    shape = (4, 8, 8)
    params = replace(BASE, variation_seed=99, variation_strength=0.3)
    noise = torch.randn((1, *shape), generator=torch.Generator().manual_seed(11))
    ours = varied_noise(noise, params)
    assert torch.equal(ours[0], a1111_noise(11, 99, 0.3, shape))
    assert torch.equal(varied_noise(noise, replace(params, variation_strength=0.0)), noise)


def image(runner: Runner, params: GenerationParams, path: Path) -> np.ndarray:
    runner.run(params, output_path=path, checkpoint_path=path.with_suffix(".ckpt"),
               on_step=lambda _p: StepDecision.CONTINUE)  # fmt: skip
    with Image.open(path) as img:
        return np.asarray(img.convert("RGB"), dtype=np.int16)


def test_full_strength_draws_the_variation_seeds_image(tiny_runner: Runner, tmp_path: Path) -> None:
    full = image(tiny_runner, replace(BASE, variation_seed=77, variation_strength=1.0),
                 tmp_path / "full.png")  # fmt: skip
    own = image(tiny_runner, replace(BASE, seed=77), tmp_path / "own.png")
    none = image(tiny_runner, BASE, tmp_path / "none.png")
    some = image(tiny_runner, replace(BASE, variation_seed=77, variation_strength=0.5),
                 tmp_path / "some.png")  # fmt: skip
    assert np.abs(full - own).max() <= 1  # slerp at 1 is the variation noise up to rounding
    assert np.abs(none - own).max() > 10
    assert np.abs(some - none).max() > 0 and np.abs(some - own).max() > 0

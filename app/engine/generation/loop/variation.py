"""A1111's variation seed: the start noise is the slerp of the seed's noise and another's.

AUTOMATIC1111 (`modules/processing.py`, `create_random_tensors`) draws the noise of the seed
and of the variation seed ("subseed") per image, shape (C, H, W), and mixes them with its
`slerp(subseed_strength, noise, subnoise)`: 0 keeps the seed's noise, 1 is the variation
seed's own. The same function here, with its quirks (the norm over dim 1, and the nearly
parallel case that falls back to a linear mix), so Easel's variations match A1111's.
"""

from __future__ import annotations

import torch
from diffusers.utils.torch_utils import randn_tensor

from app.engine.jobs.params import GenerationParams

PARALLEL = 0.9995  # A1111's threshold: above it, a linear mix


def slerp(val: float, low: torch.Tensor, high: torch.Tensor) -> torch.Tensor:
    """A1111's slerp, as written there (for per-image tensors of shape (C, H, W))."""
    low_norm = low / torch.norm(low, dim=1, keepdim=True)
    high_norm = high / torch.norm(high, dim=1, keepdim=True)
    dot = (low_norm * high_norm).sum(1)
    if dot.mean() > PARALLEL:
        return low * val + high * (1 - val)
    omega = torch.acos(dot)
    so = torch.sin(omega)
    return (torch.sin((1.0 - val) * omega) / so).unsqueeze(1) * low + (
        torch.sin(val * omega) / so
    ).unsqueeze(1) * high


def varied_noise(noise: torch.Tensor, params: GenerationParams) -> torch.Tensor:
    """`noise` (batch of one, drawn from the seed) mixed with the variation seed's noise
    by `params.variation_strength`; `noise` itself when there is no variation."""
    if params.variation_strength <= 0:
        return noise
    generator = torch.Generator(device="cpu").manual_seed(params.variation_seed)
    subnoise = randn_tensor(
        noise.shape, generator=generator, device=noise.device, dtype=noise.dtype
    )
    mixed = slerp(params.variation_strength, noise[0].float(), subnoise[0].float())
    return mixed.unsqueeze(0).to(noise.dtype)

"""A tiny Toy pipeline (a dry run: Z-Image's tiny one)."""

from __future__ import annotations

from typing import Any

from app.testing.tiny.zimage import build_tiny_zimage


def build_tiny_toy(*, seed: int = 0) -> Any:
    return build_tiny_zimage(seed=seed)

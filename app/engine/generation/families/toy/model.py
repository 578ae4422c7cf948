"""Toy's runtime: Z-Image's, under its own name (a dry run)."""

from __future__ import annotations

from app.engine.generation.families.toy import TOY
from app.engine.generation.families.zimage.model import ZImageFamily


class ToyFamily(ZImageFamily):
    name = TOY.checkpoint_family
    label = TOY.checkpoint_label

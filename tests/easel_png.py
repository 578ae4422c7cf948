"""Reading back the parameters an Easel PNG was written with, for tests.

The product never needs this (the window reads PNG text through its own parser, with the
A1111 fields); tests check that the `easel` chunk holds the job's parameters exactly. Read
through the product's capped text reader, as any PNG from outside would be.
"""

from __future__ import annotations

import json
from pathlib import Path

from app.engine.jobs.image_text import read_image_text
from app.engine.jobs.params import GenerationParams


def read_png_params(path: Path) -> GenerationParams:
    """The parameters an Easel PNG was generated with (its `easel` chunk)."""
    return GenerationParams(**json.loads(read_image_text(path).texts["easel"]))

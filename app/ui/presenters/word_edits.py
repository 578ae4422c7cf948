"""What "Edit with words…" knows of each model that edits, and what it asks for (no Qt):
how many input images the model reads and the steps and cfg it runs an edit with unless
told (its stock pipeline's defaults, from the engine's family declarations), and the
artist's edit itself."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# FluxKontextPipeline's defaults: what a model the scan did not describe is shown with.
KONTEXT_STEPS, KONTEXT_CFG = 28, 3.5


@dataclass(frozen=True)
class EditModel:
    """A model that edits, as the dialog offers it."""

    name: str
    images: int = 1  # the most input images an edit on it reads (Qwen-Image-Edit Plus: 3)
    steps: int = KONTEXT_STEPS  # its own steps for an edit (Qwen-Image-Edit: 50)
    cfg: float = KONTEXT_CFG  # its own cfg for an edit (Qwen-Image-Edit: 4)

    @property
    def reads_several(self) -> bool:
        return self.images > 1


@dataclass(frozen=True)
class WordEdit:
    """An edit the artist asked for: the instruction on `model` with these settings, and
    the further input images after the picture edited (PNG bytes, in order)."""

    instruction: str
    model: str
    steps: int | None = None  # None: the model's own
    cfg: float | None = None
    more_images: Sequence[bytes] = ()

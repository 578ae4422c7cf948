"""What the runner tells its caller: per-step progress, the step decision, the outcome.

No torch imports: the worker forwards the values to the app (a step's preview is made on
request, in the worker, as PNG bytes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property
from pathlib import Path


class StepDecision(Enum):
    CONTINUE = "continue"
    CANCEL = "cancel"
    PAUSE = "pause"
    CHECKPOINT = "checkpoint"  # continue, and save a rolling checkpoint (runners may ignore it)


class OutcomeKind(Enum):
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    PAUSED = "paused"


@dataclass(frozen=True)
class StepProgress:
    step: int  # 1..total, counted in scheduler steps (not UNet calls)
    total: int
    elapsed_s: float  # denoising time so far, including runs before a pause
    # Makes this step's preview (None: no preview at this step). Called at most once, only
    # if someone reads `preview_png` during the step callback: a worker nobody watches
    # never pays for the decode and the PNG.
    render_preview: Callable[[], bytes] | None = field(default=None, repr=False, compare=False)
    # Rolling checkpoints: what the last save cost (its length from the ask to the rename,
    # or the loop's own slowdown around it if larger: `loop.rolling_saver`), and whether
    # one is being written now (a checkpoint asked for meanwhile would be skipped).
    last_save_s: float = 0.0
    saving: bool = False

    @cached_property
    def preview_png(self) -> bytes | None:
        return self.render_preview() if self.render_preview is not None else None


@dataclass(frozen=True)
class ResumedFrom:
    """The checkpoint a run continued from."""

    step: int
    saved_at: float  # wall clock, when it was written


@dataclass(frozen=True)
class GenerationOutcome:
    kind: OutcomeKind
    image_path: Path | None = None
    checkpoint_path: Path | None = None  # PAUSED: where the progress is (None: not saved)
    resumed_from: ResumedFrom | None = None
    unsaved_reason: str | None = None  # PAUSED without (new) progress: why it was not saved
    note: str = ""  # something the timeline should say, e.g. that low-VRAM mode was turned on
    # How the model was found: "model loaded in 6.2 s", "model already loaded" (timeline).
    load_note: str = ""

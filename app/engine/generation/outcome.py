"""What the runner tells its caller: per-step progress, the step decision, the outcome.

Pure data (no torch) so the worker can forward it to the app as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
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
    preview_png: bytes | None


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

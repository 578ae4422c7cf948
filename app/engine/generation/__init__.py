"""Image generation: model discovery (pure filesystem) and the step-wise runner.

Importing this package never imports torch; the GUI may list models with it. Worker
processes import `app.engine.generation.runner` for `Runner`.
"""

from app.engine.generation.errors import (
    CheckpointCorrupt,
    CheckpointError,
    CheckpointMismatch,
    GenerationError,
    UnsupportedModel,
    is_transient,
)
from app.engine.generation.outcome import (
    GenerationOutcome,
    OutcomeKind,
    StepDecision,
    StepProgress,
)
from app.engine.generation.sources import (
    ModelInfo,
    ModelNotFound,
    ModelSearchPath,
    ModelSource,
    list_models,
    resolve_model,
)

__all__ = [
    "CheckpointCorrupt",
    "CheckpointError",
    "CheckpointMismatch",
    "GenerationError",
    "GenerationOutcome",
    "ModelInfo",
    "ModelNotFound",
    "ModelSearchPath",
    "ModelSource",
    "OutcomeKind",
    "StepDecision",
    "StepProgress",
    "UnsupportedModel",
    "is_transient",
    "list_models",
    "resolve_model",
]

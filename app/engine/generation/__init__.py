"""Image generation: model discovery (pure filesystem) and the step-wise runner.

Importing this package never imports torch; the GUI may list models with it. Worker
processes import `app.engine.generation.runner` for `Runner`.
"""

from app.engine.generation.errors import (
    CheckpointCorrupt,
    CheckpointError,
    CheckpointMismatch,
    GenerationError,
    ModelLoadFailed,
    UnsupportedModel,
    is_transient,
)
from app.engine.generation.files.architecture import Architecture, Prediction, size_presets
from app.engine.generation.files.sources import (
    ModelInfo,
    ModelNotFound,
    ModelSearchPath,
    ModelSource,
    list_models,
    resolve_model,
)
from app.engine.generation.outcome import (
    GenerationOutcome,
    OutcomeKind,
    StepDecision,
    StepProgress,
)
from app.engine.generation.prompts.loras import LoraError, check_loras, parse_loras

__all__ = [
    "Architecture",
    "CheckpointCorrupt",
    "CheckpointError",
    "CheckpointMismatch",
    "GenerationError",
    "GenerationOutcome",
    "LoraError",
    "ModelInfo",
    "ModelLoadFailed",
    "ModelNotFound",
    "ModelSearchPath",
    "ModelSource",
    "OutcomeKind",
    "Prediction",
    "StepDecision",
    "StepProgress",
    "UnsupportedModel",
    "check_loras",
    "is_transient",
    "list_models",
    "parse_loras",
    "resolve_model",
    "size_presets",
]

"""Real runners whose model load or VAE decode never ends: no step checkpoint is reached in
those phases, so a cancel or pause there is honoured only by the supervisor's grace kill.

Each factory patches its own worker process only (they run as `WorkerConfig.runner_factory`
in a spawned worker), so the phase lasts as long as a big model's would, and longer.
"""

from __future__ import annotations

import time
from typing import Any

from app.engine.workers.job_run import RunnerLike
from app.engine.workers.worker import default_runner

STUCK_S = 600.0  # far longer than anyone waits: only the supervisor's kill ends it


def slow_loading_runner() -> RunnerLike:
    """The real runner, whose model load (inside the job) takes "forever"."""
    from app.engine.generation.load.pipelines import PipelineCache

    original = PipelineCache.get

    def stuck_get(self: PipelineCache, *args: Any, **kwargs: Any) -> Any:
        time.sleep(STUCK_S)
        return original(self, *args, **kwargs)

    PipelineCache.get = stuck_get  # type: ignore[method-assign]  # this worker process only
    return default_runner()


def slow_decoding_runner() -> RunnerLike:
    """The real runner, whose VAE decode (after the last step) takes "forever"."""
    from app.engine.generation import denoise

    original = denoise.decode

    def stuck_decode(pipe: Any, state: Any) -> Any:
        time.sleep(STUCK_S)
        return original(pipe, state)

    denoise.decode = stuck_decode  # this worker process only
    return default_runner()

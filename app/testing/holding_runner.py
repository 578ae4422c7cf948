"""The scripted runner, holding models the way the real runner's memory budget does.

For tests and benchmarks of model-aware claims with real worker processes, without torch:
it holds up to `capacity` models (least recently used out first), a model it does not hold
takes `load_s` seconds to "load", and every load is appended to a ledger file, so a test
counts loads across processes. Spawned workers build it with no arguments
(`WorkerConfig.runner_factory` is pickled by name), so the settings come from the
environment, which spawned children inherit:

    EASEL_HOLD_CAPACITY  models held at once (default 1)
    EASEL_HOLD_LOAD_S    seconds one load takes (default 0)
    EASEL_HOLD_LEDGER    a file that gets one line per load: pid, model, start, end (unset: none)
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.engine.generation.outcome import GenerationOutcome, StepProgress
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.run_inputs import NO_INPUTS, RunInputs
from app.testing.scripted_runner import ScriptedRunner

CAPACITY_ENV, LOAD_S_ENV, LEDGER_ENV = (
    "EASEL_HOLD_CAPACITY",
    "EASEL_HOLD_LOAD_S",
    "EASEL_HOLD_LEDGER",
)


class HoldingRunner(ScriptedRunner):
    def __init__(self, capacity: int | None = None, load_s: float | None = None) -> None:
        super().__init__()
        env = os.environ
        self.capacity = capacity if capacity is not None else int(env.get(CAPACITY_ENV, "1"))
        self.load_s = load_s if load_s is not None else float(env.get(LOAD_S_ENV, "0"))
        self._held: list[str] = []  # most recently used first
        self._ledger = env.get(LEDGER_ENV)
        self.last_note = ""

    def held_models(self) -> list[str]:
        return list(self._held)

    def read_ahead(self, model_name: str) -> None:
        """Recorded in the ledger as a load of 0 seconds under the name `ahead:<model>`."""
        if self._ledger:
            line = json.dumps([os.getpid(), f"ahead:{model_name}", time.time(), time.time()])
            with Path(self._ledger).open("a", encoding="utf-8") as ledger:
                ledger.write(line + "\n")

    def load(self, model_name: str) -> object:
        if model_name in self._held:
            self._held.remove(model_name)
            self.last_note = "model already loaded"
        else:
            started = time.time()
            time.sleep(self.load_s)
            self.loaded.append(model_name)
            self.last_note = f"model loaded in {time.time() - started:.1f} s"
            if self._ledger:
                line = json.dumps([os.getpid(), model_name, started, time.time()])
                with Path(self._ledger).open("a", encoding="utf-8") as ledger:
                    ledger.write(line + "\n")
        self._held = [model_name, *self._held][: self.capacity]
        return model_name

    def run(
        self,
        params: GenerationParams,
        inputs: RunInputs = NO_INPUTS,
        *,
        output_path: Path,
        checkpoint_path: Path,
        on_step: Callable[[StepProgress], Any],
    ) -> GenerationOutcome:
        from dataclasses import replace

        self.load(params.model)
        note = self.last_note
        outcome = super().run(
            params, inputs, output_path=output_path, checkpoint_path=checkpoint_path,
            on_step=on_step,
        )  # fmt: skip
        return replace(outcome, load_note=note)


def read_ledger(path: Path) -> list[tuple[int, str, float, float]]:
    """The loads recorded: (pid, model, start, end), in the order they were written."""
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    return [(int(p), str(m), float(s), float(e)) for p, m, s, e in map(json.loads, lines)]

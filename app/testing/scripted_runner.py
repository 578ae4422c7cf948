"""A scripted stand-in for the generation runner: no torch, behaviour read from the prompt.

Like Krita's mock client, it lets engine tests and the chaos benchmark drive real worker
processes through every path in milliseconds. Words in the prompt script it:

    step=0.05       seconds per step (default 0.01), asleep
    work=0.2        and this many seconds of CPU time per step, computing (a busy loop)
    crash@3         SIGKILL its own process on reaching step 3, on every attempt
    crash-once@3    the same, on the first attempt only (a marker file remembers)
    hang            sleep for an hour before the first step (outside the step loop)
    hang@3          sleep for an hour in step 3 (a step stuck inside the loop)
    fail / oom      raise a plain error / an out-of-memory error at the first step

Pause and resume work like the real runner's: the checkpoint holds the step reached, and
the "image" (text bytes) depends only on the parameters, so an interrupted run writes
the same file as an uninterrupted one.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.engine.generation.errors import CheckpointCorrupt
from app.engine.generation.outcome import (
    GenerationOutcome,
    OutcomeKind,
    StepDecision,
    StepProgress,
)
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.run_inputs import NO_INPUTS, RunInputs

DEFAULT_STEP_S = 0.01
HANG_S = 3600.0


class ScriptedRunner:
    def __init__(self) -> None:
        self.loaded: list[str] = []

    def load(self, model_name: str) -> object:
        self.loaded.append(model_name)
        return model_name

    # Intentional copy: the signature of `RunnerLike.run` (app.engine.workers.kinds), which every
    # runner repeats so type checkers can match it to the protocol.
    def run(
        self,
        params: GenerationParams,
        inputs: RunInputs = NO_INPUTS,
        *,
        output_path: Path,
        checkpoint_path: Path,
        on_step: Callable[[StepProgress], Any],
    ) -> GenerationOutcome:
        # The inputs are ignored: the fake "image" depends on the parameters alone.
        script = _script(params.prompt)
        if script.get("hang") == "":
            time.sleep(HANG_S)
        if "fail" in script:
            raise RuntimeError("scripted failure")
        if "oom" in script:
            raise MemoryError("scripted: CUDA out of memory")
        step_s = float(script.get("step", DEFAULT_STEP_S))
        start = _read_checkpoint(checkpoint_path)
        work_s = float(script.get("work", 0.0))
        for step in range(start + 1, params.steps + 1):
            time.sleep(step_s)
            _compute(work_s)
            if script.get("hang") == str(step):
                time.sleep(HANG_S)
            _maybe_crash(script, step, checkpoint_path)
            decision = on_step(StepProgress(step, params.steps, step * step_s, None))
            if decision is StepDecision.CANCEL:
                checkpoint_path.unlink(missing_ok=True)
                return GenerationOutcome(OutcomeKind.CANCELLED)
            if decision is StepDecision.PAUSE:
                _write(checkpoint_path, json.dumps({"step": step}).encode())
                return GenerationOutcome(OutcomeKind.PAUSED, checkpoint_path=checkpoint_path)
        _write(output_path, fake_image(params))
        checkpoint_path.unlink(missing_ok=True)
        return GenerationOutcome(OutcomeKind.COMPLETED, image_path=output_path)


def fake_image(params: GenerationParams) -> bytes:
    return json.dumps(params.to_dict(), sort_keys=True).encode()


def _compute(cpu_s: float) -> None:
    """Spin until this thread used `cpu_s` of CPU time: a step that takes longer the less
    CPU the process gets, as a real one does on a busy machine."""
    until = time.thread_time() + cpu_s
    while time.thread_time() < until:
        pass


def _script(prompt: str) -> dict[str, str]:
    """`"a cat step=0.1 crash@3"` -> {"a": "", "cat": "", "step": "0.1", "crash": "3"}."""
    words = {}
    for word in prompt.split():
        key, _, value = word.replace("@", "=").partition("=")
        words[key] = value
    return words


def _maybe_crash(script: dict[str, str], step: int, checkpoint_path: Path) -> None:
    if script.get("crash") == str(step):
        os.kill(os.getpid(), signal.SIGKILL)
    if script.get("crash-once") == str(step):
        marker = checkpoint_path.with_suffix(".crashed")
        if not marker.exists():
            _write(marker, b"")
            os.kill(os.getpid(), signal.SIGKILL)


def _read_checkpoint(path: Path) -> int:
    """The step saved at the last pause; a damaged file raises like the real runner's."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return 0
    try:
        return int(json.loads(data)["step"])
    except (ValueError, KeyError, TypeError) as error:
        raise CheckpointCorrupt(f"checkpoint {path} is unreadable: {error}") from error


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_suffix(path.suffix + ".tmp")
    temp.write_bytes(data)
    os.replace(temp, path)

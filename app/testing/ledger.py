"""The chaos ledger: every run's start, steps and end, appended by the workers themselves.

The job table says what the queue believes; the ledger says what the workers actually
did, so the chaos benchmark can catch two workers running one job at the same time even
when the table looks right. Each line is one JSON object written with a single append
(O_APPEND), so lines from concurrent workers never interleave.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path

from app.engine import paths
from app.engine.generation.outcome import GenerationOutcome, OutcomeKind, StepProgress
from app.engine.jobs.params import GenerationParams
from app.engine.workers.worker import RunnerLike, default_runner
from app.testing.scripted_runner import ScriptedRunner
from app.testing.step_hooks import StepHookRunner

LEDGER_FILE = "ledger.jsonl"  # in the data folder, next to the database, unless:
LEDGER_ENV = "EASEL_CHAOS_LEDGER"  # a path off the data folder's disk (the disk-full fault)


class Mark(StrEnum):
    START = "start"
    STEP = "step"
    COMPLETED = "end-completed"
    CANCELLED = "end-cancelled"
    PAUSED = "end-paused"

    @classmethod
    def end(cls, kind: OutcomeKind) -> Mark:
        return cls(f"end-{kind.value}")


@dataclass(frozen=True)
class LedgerEntry:
    job: int
    run: str  # one id per call of the runner's `run`: a resumed job is a new run
    what: Mark
    at: float  # time.time(): comparable across processes
    step: int = 0  # STEP: the step just done (1..n; a resumed run starts after its checkpoint)

    def line(self) -> str:
        return json.dumps(asdict(self)) + "\n"

    @classmethod
    def parse(cls, line: str) -> LedgerEntry:
        fields = json.loads(line)
        job, run, what = int(fields["job"]), str(fields["run"]), Mark(fields["what"])
        return cls(job, run, what, float(fields["at"]), int(fields.get("step", 0)))


def read_ledger(path: Path) -> list[LedgerEntry]:
    """Every entry, in the order written; none when no worker ever wrote the file."""
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    return [LedgerEntry.parse(line) for line in lines if line.strip()]


def ledger_path() -> Path:
    """Where workers append: `$EASEL_CHAOS_LEDGER`, else the data folder's ledger file."""
    return Path(os.environ.get(LEDGER_ENV) or paths.data_dir() / LEDGER_FILE)


def job_of_output(output_path: Path) -> int:
    """The job id, from the worker's output file name (`000042-<seed>.png`)."""
    return int(output_path.name.split("-")[0])


class LedgerRunner(StepHookRunner):
    """Appends a ledger line at every start, step and (normal) end of a run."""

    def __init__(self, inner: RunnerLike, ledger: Path | None = None) -> None:
        super().__init__(inner)
        self.ledger = ledger or ledger_path()
        self._job = 0
        self._run = ""

    def started(self, params: GenerationParams, output_path: Path) -> None:
        self._job, self._run = job_of_output(output_path), uuid.uuid4().hex
        self._write(Mark.START)

    def before_step(self, progress: StepProgress) -> None:
        self._write(Mark.STEP, progress.step)

    def finished(self, params: GenerationParams, outcome: GenerationOutcome) -> None:
        self._write(Mark.end(outcome.kind))

    def _write(self, what: Mark, step: int = 0) -> None:
        entry = LedgerEntry(self._job, self._run, what, time.time(), step)
        with open(self.ledger, "a", encoding="utf-8") as ledger:
            ledger.write(entry.line())


def scripted_ledger_runner() -> LedgerRunner:
    """Runner factory for spawned workers: the scripted runner (no torch), with a ledger."""
    return LedgerRunner(ScriptedRunner())


def real_ledger_runner() -> LedgerRunner:
    """Runner factory for spawned workers: the real runner, with a ledger."""
    return LedgerRunner(default_runner())

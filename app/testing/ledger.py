"""The chaos ledger: every run's start, steps and end, appended by the workers themselves.

The job table says what the queue believes; the ledger says what the workers actually
did, so the chaos benchmark can catch two workers running one job at the same time even
when the table looks right. Each line is one JSON object written with a single append
(O_APPEND), so lines from concurrent workers never interleave.

The ledger is the measuring instrument, so the faults it measures must not bend it:
its times are the true clock even in a worker whose clock the chaos benchmark skewed (the
benchmark tells that worker its skew, `SKEW_ENV`), and a run that raised says so, so that
a worker that found its job taken (alive) is told from one that was killed (silent).

It also carries the chaos benchmark's `stall` fault: while a stall file names the job
(`stall_file`), the run's step is frozen (the heartbeat thread goes on beating).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from app.engine import paths
from app.engine.generation.outcome import GenerationOutcome, OutcomeKind, StepProgress
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.run_inputs import NO_INPUTS, RunInputs
from app.engine.workers.job_run import LostJob
from app.engine.workers.worker import RunnerLike, default_runner
from app.testing.scripted_runner import ScriptedRunner
from app.testing.step_hooks import StepHookRunner

LEDGER_FILE = "ledger.jsonl"  # in the data folder, next to the database, unless:
LEDGER_ENV = "EASEL_CHAOS_LEDGER"  # a path off the data folder's disk (the disk-full fault)
SKEW_ENV = "EASEL_CHAOS_CLOCK_SKEW_S"  # seconds this process's clock is ahead of the true one
STALLS_FOLDER = "stalls"  # beside the ledger: one file per job whose step is to freeze
STALL_POLL_S = 0.05
STALL_MAX_S = 3600.0  # a stall nobody lifts ends by itself, as `hang` does


class Mark(StrEnum):
    START = "start"
    STEP = "step"
    COMPLETED = "end-completed"
    CANCELLED = "end-cancelled"
    PAUSED = "end-paused"
    LOST = "end-lost"  # the worker found at a step that the job was no longer its own
    RAISED = "end-raised"  # the runner raised anything else
    STALLED = "stalled"  # the stall fault froze the step after this one (`stall_file`)

    @classmethod
    def end(cls, kind: OutcomeKind) -> Mark:
        return cls(f"end-{kind.value}")


@dataclass(frozen=True)
class LedgerEntry:
    job: int
    run: str  # one id per call of the runner's `run`: a resumed job is a new run
    what: Mark
    at: float  # `true_time()`: comparable across processes, skewed ones included
    step: int = 0  # STEP: the step just done (1..n; a resumed run starts after its checkpoint)
    # START only: the output file's name, and which job (of which database) the run is for:
    # after a database was replaced, another job may carry the same id.
    image: str = ""
    key: str = ""
    attempt: int = 0  # START only: the attempt the run is for (0: not known)

    def line(self) -> str:
        fields = {name: value for name, value in asdict(self).items() if value not in ("", 0)}
        return json.dumps(fields) + "\n"

    @classmethod
    def parse(cls, line: str) -> LedgerEntry:
        fields = json.loads(line)
        job, run, what = int(fields["job"]), str(fields["run"]), Mark(fields["what"])
        return cls(
            job, run, what, float(fields["at"]), int(fields.get("step", 0)),
            str(fields.get("image", "")), str(fields.get("key", "")),
            int(fields.get("attempt", 0)),
        )  # fmt: skip


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


def job_key(params: GenerationParams) -> str:
    """A short fingerprint of the job's parameters: two jobs that share an id (a replaced
    database) differ in it, while every run of one job has the same."""
    text = json.dumps(params.to_dict(), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def attempt_of_checkpoint(checkpoint_path: Path) -> int:
    """The attempt, from the claim's checkpoint file name (`job-42-a2-c7.ckpt`); 0 if the
    name does not say."""
    match = re.search(r"-a(\d+)-c\d+", checkpoint_path.name)
    return int(match.group(1)) if match else 0


def true_time() -> float:
    """time.time(), less the skew the chaos benchmark gave this process (`SKEW_ENV`)."""
    return time.time() - float(os.environ.get(SKEW_ENV) or 0.0)


def stall_file(ledger: Path, job: int) -> Path:
    """While this file exists, the next run of `job` to reach a step freezes there."""
    return ledger.parent / STALLS_FOLDER / str(job)


def taken_stall_file(asked: Path, run: str) -> Path:
    """The stall file once a run took it; that run stays frozen while it exists."""
    return asked.with_name(f"{asked.name}.{run}")


class LedgerRunner(StepHookRunner):
    """Appends a ledger line at every start, step and (normal) end of a run."""

    def __init__(self, inner: RunnerLike, ledger: Path | None = None) -> None:
        super().__init__(inner)
        self.ledger = ledger or ledger_path()
        self._job = 0
        self._run = ""
        self._attempt = 0

    # Intentional copy: the signature of `RunnerLike.run` (app.engine.workers.kinds).
    def run(
        self,
        params: GenerationParams,
        inputs: RunInputs = NO_INPUTS,
        *,
        output_path: Path,
        checkpoint_path: Path,
        on_step: Callable[[StepProgress], Any],
    ) -> GenerationOutcome:
        self._attempt = attempt_of_checkpoint(checkpoint_path)
        try:
            return super().run(
                params, inputs, output_path=output_path, checkpoint_path=checkpoint_path,
                on_step=on_step,
            )  # fmt: skip
        except LostJob:
            self._write(Mark.LOST)
            raise
        except Exception:
            self._write(Mark.RAISED)
            raise

    def started(self, params: GenerationParams, output_path: Path) -> None:
        self._job, self._run = job_of_output(output_path), uuid.uuid4().hex
        self._write(Mark.START, image=output_path.name, key=job_key(params), attempt=self._attempt)

    def before_step(self, progress: StepProgress) -> None:
        self._write(Mark.STEP, progress.step)
        self._stall_while_asked()

    def finished(self, params: GenerationParams, outcome: GenerationOutcome) -> None:
        self._write(Mark.end(outcome.kind))

    def _stall_while_asked(self) -> None:
        """The stall fault: freeze here (in the step loop, before the worker hears of the
        step) until the stall is lifted; the heartbeat thread is left alone.

        The first run to find the job's stall file takes it (renamed after the run), so
        the stall freezes that run only, not the retry that follows once it is noticed."""
        asked = stall_file(self.ledger, self._job)
        taken = taken_stall_file(asked, self._run)
        try:
            os.rename(asked, taken)
        except FileNotFoundError:
            return  # nothing asked (the usual case), or another run took it
        self._write(Mark.STALLED)
        deadline = time.monotonic() + STALL_MAX_S
        while taken.exists() and time.monotonic() < deadline:
            time.sleep(STALL_POLL_S)

    def _write(
        self, what: Mark, step: int = 0, *, image: str = "", key: str = "", attempt: int = 0
    ) -> None:
        entry = LedgerEntry(self._job, self._run, what, true_time(), step, image, key, attempt)
        with open(self.ledger, "a", encoding="utf-8") as ledger:
            ledger.write(entry.line())


def scripted_ledger_runner() -> LedgerRunner:
    """Runner factory for spawned workers: the scripted runner (no torch), with a ledger."""
    return LedgerRunner(ScriptedRunner())


def real_ledger_runner() -> LedgerRunner:
    """Runner factory for spawned workers: the real runner, with a ledger."""
    return LedgerRunner(default_runner())

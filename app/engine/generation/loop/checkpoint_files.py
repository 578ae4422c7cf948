"""Where a job's checkpoint files live, and which attempt owns which (no torch).

Each claim of a job writes only its own file, `job-<id>-a<attempt>-c<claim>.ckpt` (the claim
is the job row's version right after the claim: unique and increasing, even when a paused
job is resumed under the same attempt number), so a worker that hung and woke up after its
job moved on can never overwrite or delete the progress of the claim that holds the job
now. A new claim adopts the newest earlier file (renames it to its own name) and removes
the older ones: nobody holds an earlier claim any more.
A file that cannot be used is set aside (renamed), never deleted: it may be evidence.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

from app.durable import durable_replace

SUFFIX = ".ckpt"
MAGIC = b"EASEL-CHECKPOINT\n"  # a checkpoint file's first line (see checkpoint.py)
_HEADER_LIMIT = 1 << 20  # a header line longer than this is damage, not parameters
_CLAIM_FILE = re.compile(r"job-(\d+)(?:-a\d+-c(\d+))?\.ckpt")


@dataclass(frozen=True)
class Claim:
    """One claim of one job: whose files are whose."""

    folder: Path
    job_id: int
    attempt: int
    version: int  # the job row's version right after the claim

    @property
    def file(self) -> Path:
        return self.folder / f"job-{self.job_id}-a{self.attempt}-c{self.version}{SUFFIX}"


def earlier_files(claim: Claim) -> list[Path]:
    """This job's checkpoint files of claims before `claim`, newest first.

    `job-<id>.ckpt` (the name before files carried their claim) counts as the oldest.
    """
    found: list[tuple[int, Path]] = []
    folder = claim.folder
    for path in folder.glob(f"job-{claim.job_id}*{SUFFIX}") if folder.is_dir() else []:
        match = _CLAIM_FILE.fullmatch(path.name)
        if match and int(match.group(1)) == claim.job_id:
            version = claim_of(path)
            if version < claim.version:
                found.append((version, path))
    return [path for _, path in sorted(found, reverse=True)]


def claim_of(path: Path) -> int:
    """The claim (job version) a checkpoint file belongs to; -1 for the old unnamed kind."""
    match = _CLAIM_FILE.fullmatch(path.name)
    return int(match.group(2)) if match and match.group(2) else -1


def adopt_earlier(claim: Claim, also: Path | None = None) -> bool:
    """Make the newest earlier checkpoint this claim's own file; remove the older ones.

    `also`: the file the job row names (a pause's checkpoint). Call only while holding the
    job. True if there is progress to resume from.
    """
    mine = claim.file
    candidates = earlier_files(claim)
    if also is not None and also != mine and also.is_file() and also not in candidates:
        candidates.insert(0, also)
    adopted = mine.is_file()
    for path in candidates:
        with contextlib.suppress(FileNotFoundError):
            if adopted:
                path.unlink()
            else:
                durable_replace(path, mine)
                adopted = True
    return adopted


def remove_earlier(claim: Claim) -> None:
    """Remove earlier claims' files (left by a worker that woke up late). Only while holding."""
    for path in earlier_files(claim):
        path.unlink(missing_ok=True)


def set_aside(path: Path) -> Path | None:
    """Rename a damaged or mismatched checkpoint out of the way; None if it is already gone."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    target = path.with_name(f"{path.name}.damaged-{stamp}")
    try:
        durable_replace(path, target)
    except FileNotFoundError:
        return None
    return target


def saved_step(data: bytes) -> int | None:
    """The denoising step a checkpoint's header says it reached, from the file's first bytes
    (no torch, no payload read); None if they are not a readable checkpoint header (an
    upscale's tile progress, damage). The payload's checksum is checked on resume, not here."""
    if not data.startswith(MAGIC):
        return None
    end = data.find(b"\n", len(MAGIC))
    try:
        header = json.loads(data[len(MAGIC) : end]) if end > 0 else None
    except ValueError:
        return None
    step = header.get("steps_done") if isinstance(header, dict) else None
    return step if isinstance(step, int) and step > 0 else None


def header_bytes(path: Path) -> bytes:
    """A checkpoint file's first line or so: enough for `saved_step`. b"" if it is gone."""
    try:
        with path.open("rb") as file:
            return file.read(_HEADER_LIMIT)
    except OSError:
        return b""


def saved_step_in(folder: Path, job_id: int) -> int | None:
    """The step the newest readable checkpoint file of the job in `folder` reached."""
    for path in earlier_files(Claim(folder, job_id, 0, 1 << 62)):
        if (step := saved_step(header_bytes(path))) is not None:
            return step
    return None

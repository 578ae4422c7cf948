"""Where a finished output goes: a name no other job's output has.

Names are the job id and the seed with the kind's suffix, `000042-7.png`, so they read well
and sort by job. Ids are only unique within one database: a database deleted and made anew,
or restored from a backup, gives out the same ids again, and several data folders may write
to one outputs folder. A name whose file is already there is therefore never written over:
the output gets the next free `000042-7-2.png`, `-3`, ... instead.
"""

from __future__ import annotations

from pathlib import Path


def stem(job_id: int, seed: int) -> str:
    """A job's output's name without its suffix (`000042-7`)."""
    return f"{job_id:06d}-{seed}"


def free_path(folder: Path, job_id: int, seed: int, suffix: str) -> Path:
    """The first name for this job's output in `folder` that no file has yet.

    Even a file this job wrote itself on an earlier attempt (killed between writing its
    output and recording it) is kept: nothing in it proves whose it is, and an extra copy
    costs far less than another job's output overwritten."""
    first = stem(job_id, seed)
    candidate, copy = folder / f"{first}{suffix}", 1
    while candidate.exists():
        copy += 1
        candidate = folder / f"{first}-{copy}{suffix}"
    return candidate

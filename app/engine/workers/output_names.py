"""Where a finished image goes: a name no other job's image has.

Names are the job id and the seed, `000042-7.png`, so they read well and sort by job. Ids
are only unique within one database: a database deleted and made anew, or restored from a
backup, gives out the same ids again, and several data folders may write to one outputs
folder. A name whose file is already there is therefore never written over: the image
gets the next free `000042-7-2.png`, `-3`, ... instead.
"""

from __future__ import annotations

from pathlib import Path


def image_path(folder: Path, job_id: int, seed: int) -> Path:
    """The first name for this job's image in `folder` that no file has yet.

    Even a file this job wrote itself on an earlier attempt (killed between writing its
    image and recording it) is kept: nothing in it proves whose it is, and an extra copy
    costs far less than another job's image overwritten."""
    stem = f"{job_id:06d}-{seed}"
    candidate, copy = folder / f"{stem}.png", 1
    while candidate.exists():
        copy += 1
        candidate = folder / f"{stem}-{copy}.png"
    return candidate

"""Favourites: a starred job is never pruned, and its image says so in its PNG metadata.

The star goes in a `tEXt` chunk of its own (`easel:starred`), written by rewriting the
file's chunks, not the image: the pixels and the other metadata stay byte for byte, and
the new file replaces the old one atomically.
"""

from __future__ import annotations

import logging
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import update

from app.durable import atomic_write
from app.engine.jobs.queue import JobNotFound, JobQueue
from app.engine.paths import recorded_file
from app.engine.settings import load_settings
from app.models.tables import JOB

log = logging.getLogger(__name__)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
STAR_KEY = b"easel:starred"


class NotAPng(ValueError):
    pass


def star(queue: JobQueue, job_id: int, *, on: bool = True) -> Path | None:
    """Star (or unstar) a job; returns its image if the star was recorded in it too.

    Starring is not a status change: it never moves the job nor writes a history row.
    The image is updated after the commit, and a missing or unreadable image only logs."""
    with queue.db.write() as conn:
        if conn.execute(update(JOB).where(JOB.c.id == job_id).values(starred=on)).rowcount == 0:
            raise JobNotFound(job_id)
    image = _own_image(queue, job_id)
    if image is None:
        return None
    try:
        set_png_star(image, on)
    except (OSError, NotAPng) as error:
        log.warning("job %s: the star is stored, but not in its image %s: %s", job_id, image, error)
        return None
    return image


def _own_image(queue: JobQueue, job_id: int) -> Path | None:
    """The job's image file to write the star into; on a shared store only one inside this
    machine's outputs folder (a row there may be a peer's, naming any file)."""
    shared = queue.db.shares_files
    folders = [load_settings().outputs_path()] if shared else []
    return recorded_file(queue.get(job_id).output_path, shared=shared, folders=folders)


def set_png_star(path: Path, on: bool) -> None:
    """Add or remove the `easel:starred` text chunk, keeping every other byte."""
    data = path.read_bytes()
    kept = [chunk for chunk in _chunks(data) if not _is_star(chunk)]
    if on:
        kept.insert(len(kept) - 1, _chunk(b"tEXt", STAR_KEY + b"\x001"))  # before IEND
    atomic_write(path, lambda handle: handle.write(PNG_SIGNATURE + b"".join(kept)))


def png_is_starred(path: Path) -> bool:
    return any(_is_star(chunk) for chunk in _chunks(path.read_bytes()))


def _chunks(data: bytes) -> Iterator[bytes]:
    """Each chunk of a PNG, whole (length, type, data, CRC); `NotAPng` if it is not one."""
    if not data.startswith(PNG_SIGNATURE):
        raise NotAPng("not a PNG file")
    at = len(PNG_SIGNATURE)
    while at < len(data):
        if at + 8 > len(data):
            raise NotAPng("the PNG file is cut short")
        (length,) = struct.unpack(">I", data[at : at + 4])
        end = at + 12 + length
        if end > len(data):
            raise NotAPng("the PNG file is cut short")
        yield data[at:end]
        at = end


def _is_star(chunk: bytes) -> bool:
    return chunk[4:8] == b"tEXt" and chunk[8:].startswith(STAR_KEY + b"\x00")


def _chunk(kind: bytes, body: bytes) -> bytes:
    crc = zlib.crc32(kind + body) & 0xFFFFFFFF
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

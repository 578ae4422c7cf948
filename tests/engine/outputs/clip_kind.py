"""A second output kind that exists only in the tests, to show the door is open: a "clip",
with its own suffix, media type, stored kind, writer, thumbnail source and gallery badge."""

from __future__ import annotations

import io
from pathlib import Path
from types import MappingProxyType

import pytest
from PIL import Image
from sqlalchemy import update

from app.durable import atomic_write
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.outputs import registry
from app.engine.outputs.kinds import FileKind, GalleryLook, OutputKind
from app.engine.workers import kinds
from app.models.tables import JOB

CLIP_JOB_KIND = "clip"
CLIP_FRAME_COLOUR = (200, 30, 30)


def clip_frame() -> bytes:
    """The clip's first frame, as a PNG: what its thumbnail is made from."""
    buffer = io.BytesIO()
    Image.new("RGB", (16, 16), CLIP_FRAME_COLOUR).save(buffer, format="PNG")
    return buffer.getvalue()


def _write_clip(result: object, path: Path, params: GenerationParams) -> None:
    atomic_write(path, lambda handle: handle.write(b"CLIP" + repr(result).encode()))


def _first_frame(path: Path) -> bytes:
    assert path.read_bytes().startswith(b"CLIP"), "the thumbnail came from another file"
    return clip_frame()


CLIP = OutputKind(
    name="clip",
    suffix=".clip",
    media_type="video/x-easel-clip",
    file_kind=FileKind("clip"),
    job_kinds=(CLIP_JOB_KIND,),
    write=_write_clip,
    still=_first_frame,
    gallery=GalleryLook(badge="▶", in_viewer=False),
    is_picture=False,
)


def register_clip(monkeypatch: pytest.MonkeyPatch) -> OutputKind:
    """CLIP registered for one test (the registries are restored after it): its output kind,
    and its job kind's work (drawn by the runner, as a video job's would be)."""
    monkeypatch.setattr(registry, "OUTPUT_KINDS", dict(registry.OUTPUT_KINDS))
    works = {**kinds.WORK_OF_KIND, CLIP_JOB_KIND: kinds.on_the_runner}
    monkeypatch.setattr(kinds, "WORK_OF_KIND", MappingProxyType(works))
    return registry.register(CLIP)


def make_clip_job(queue: JobQueue, job_id: int) -> None:
    """Turn a submitted job into one of the clip's job kind (the params' checks know only
    the kinds Easel ships, so the row is changed as a newer Easel would have written it)."""
    with queue.db.write() as conn:
        conn.execute(update(JOB).where(JOB.c.id == job_id).values(kind=CLIP_JOB_KIND))

"""What kind of output a job leaves, and everything about it that the rest of Easel asks.

A kind answers, in one declaration: its files' names (the suffix), its rows in the database
(`FileKind`), its media type on the server, what its thumbnail is made from, how the gallery
marks it, whether it is one still picture, how the runner's result is written, and whether
its file records a star. No torch, no Qt: the window, the server and the workers all read
the same declaration. The kinds are collected in `registry`; each lives in its own module
(`image.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from app.engine.jobs.params import GenerationParams
from app.engine.outputs.names import free_path, stem

FILE_KIND_CHARS = 16  # the job_file.kind column's width (app/models/tables.py)


@dataclass(frozen=True)
class FileKind:
    """What a `job_file` row holds, as its `kind` column says it: a paused job's checkpoint,
    or one output kind's file ("image"). Open rather than an enum: each output kind brings
    its own, so a new kind adds no member here."""

    value: str
    CHECKPOINT: ClassVar[FileKind]

    def __post_init__(self) -> None:
        if not 0 < len(self.value) <= FILE_KIND_CHARS:
            raise ValueError(f"a stored file's kind takes 1 to {FILE_KIND_CHARS} characters")


FileKind.CHECKPOINT = FileKind("checkpoint")

# Writes a runner's result (a PIL image for the image kind) to the path, atomically, with
# the job's parameters in the file.
Writer = Callable[[Any, Path, GenerationParams], None]
# What a thumbnail is made from: a file the window reads as a picture (an image's own
# path), or an encoded picture's bytes (a video's first frame).
StillSource = Callable[[Path], Path | bytes]
# Adds (True) or removes a star in the file itself, so a copy says so anywhere; raises
# OSError, or ValueError for a file that is not of its kind.
StarRecorder = Callable[[Path, bool], None]


@dataclass(frozen=True)
class GalleryLook:
    """How the gallery and the job list show an output beyond its thumbnail."""

    badge: str = ""  # a mark drawn in the thumbnail's corner ("" none)
    in_viewer: bool = True  # the image viewer steps through it (a still picture)


@dataclass(frozen=True)
class OutputKind:
    name: str  # "image": how the registry and messages call it
    suffix: str  # ".png": its files' names end so
    media_type: str  # "image/png": as the server sends it
    file_kind: FileKind  # its rows in job_file
    job_kinds: tuple[str, ...]  # the job kinds (`GenerationParams.kind`) that make it
    write: Writer
    still: StillSource  # what its thumbnail (and the detail area's picture) is made from
    gallery: GalleryLook
    # One still picture: what A1111's `images` carry (base64), and what a later job can
    # start from (img2img, inpaint, a ControlNet image, a grid's cell).
    is_picture: bool
    record_star: StarRecorder | None = None  # None: the star is in the job row only

    def __post_init__(self) -> None:
        if not (self.suffix.startswith(".") and len(self.suffix) > 1):
            raise ValueError(f"output kind {self.name!r}: a suffix starts with a dot")
        if self.media_type.count("/") != 1:
            raise ValueError(f"output kind {self.name!r}: a media type reads type/subtype")

    def path_in(self, folder: Path, job_id: int, seed: int) -> Path:
        """A name in `folder` for this job's output that no file has yet (`names`)."""
        return free_path(folder, job_id, seed, self.suffix)

    def default_name(self, job_id: int, seed: int) -> str:
        """The name an output gets when its recorded one cannot be used (an export)."""
        return stem(job_id, seed) + self.suffix

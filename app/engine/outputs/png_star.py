"""A starred image says so in its PNG metadata (the image kind's `record_star`).

The star goes in a `tEXt` chunk of its own (`easel:starred`), written by rewriting the
file's chunks, not the image: the pixels and the other metadata stay byte for byte, and
the new file replaces the old one atomically.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

from app.durable import atomic_write

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
STAR_KEY = b"easel:starred"


class NotAPng(ValueError):
    pass


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

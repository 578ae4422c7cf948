"""The text an image file carries (A1111's `parameters`, Easel's `easel`), read as untrusted input.

Artists drop PNGs downloaded from strangers on the window, and clients send any bytes to
`/sdapi/v1/png-info`. PIL reads every text chunk of a PNG whole (up to 1 MB each, 64 MB
together) and raises on a larger compressed one, so the chunks of a PNG are read here
instead, one at a time, each checked against `MAX_TEXT_BYTES` before it is read or while it
is decompressed: a larger chunk is refused in one sentence and costs no more than reading
that much. The pixels are not decoded; `check_image` opens the image (its size checked
before any pixel is, so a decompression bomb stays unread) where a caller needs to know it
is one. Errors are sentences, never PIL's messages (which quote Python object reprs).
"""

from __future__ import annotations

import io
import struct
import warnings
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from app.errors import BadInput

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MAX_TEXT_BYTES = 256 * 1024  # per chunk: A1111's parameters are a few KB, prompts included
MAX_TEXT_CHUNKS = 64  # text chunks read per image; more are ignored
MAX_IMAGE_PIXELS = 64_000_000  # init images, masks, dropped PNGs: larger ones are refused unread
_TEXT_CHUNKS = (b"tEXt", b"zTXt", b"iTXt")
_CHUNK_HEAD = struct.Struct(">I4s")
_CRC_BYTES = 4
_MAX_KEYWORD_BYTES = 79  # the PNG specification's limit


class UnreadableImage(BadInput):
    """Not an image that can be read (or not one of the formats read); the message says so."""


class ImageTooLarge(BadInput):
    """An image or one of its text chunks over the limits; the message names which."""


@dataclass(frozen=True)
class ImageText:
    """Text chunks read (keyword -> text), and those refused (keyword -> why, one sentence)."""

    texts: dict[str, str] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)


def read_image_text(source: bytes | Path) -> ImageText:
    """The text chunks of a PNG (`bytes` or a file), each within `MAX_TEXT_BYTES`; other
    formats: the text PIL finds in them, within the same limit. `UnreadableImage` if it is
    no image at all."""
    try:
        with _opened(source) as handle:
            if handle.read(len(PNG_SIGNATURE)) == PNG_SIGNATURE:
                return _png_text(handle)
    except OSError as error:
        raise UnreadableImage(f"the image could not be read: {_os_reason(error)}") from None
    return _other_text(source)


def check_image(source: bytes | Path) -> tuple[int, int]:
    """(width, height) of the image in `source`, refused unread beyond `MAX_IMAGE_PIXELS`:
    `UnreadableImage` when it is not a PNG, JPEG or WebP (or another format PIL reads),
    `ImageTooLarge` when it is too large to open."""
    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(_pil_source(source)) as image:
                width, height = image.size
    except (Image.DecompressionBombWarning, Image.DecompressionBombError):
        raise ImageTooLarge(
            f"the image is too large to open (more than {MAX_IMAGE_PIXELS // 1_000_000} megapixels)"
        ) from None
    except Exception as error:  # PIL fails on damage in many ways; each is one sentence
        raise UnreadableImage(unreadable_sentence(error)) from None
    if width * height > MAX_IMAGE_PIXELS:
        raise ImageTooLarge(
            f"the image is {width}x{height}, too large to open "
            f"(at most {MAX_IMAGE_PIXELS // 1_000_000} megapixels)"
        )
    return width, height


def unreadable_reason(error: BaseException) -> str:
    """Why PIL could not open an image, in words (PIL's own messages quote the file object:
    "cannot identify image file <_io.BytesIO object at 0x7f...>")."""
    from PIL import UnidentifiedImageError

    if isinstance(error, UnidentifiedImageError):
        return "it is not a PNG, JPEG or WebP file"
    if isinstance(error, OSError) and error.strerror:
        return error.strerror.lower()
    return "the file is damaged or cut short"


def unreadable_sentence(error: BaseException) -> str:
    return f"the image could not be read: {unreadable_reason(error)}"


def _png_text(handle: BinaryIO) -> ImageText:
    texts: dict[str, str] = {}
    refused: dict[str, str] = {}
    for kind, length in _chunks(handle):
        if kind not in _TEXT_CHUNKS:
            handle.seek(length + _CRC_BYTES, io.SEEK_CUR)
            continue
        if len(texts) + len(refused) >= MAX_TEXT_CHUNKS:
            break
        keyword, text, problem = _text_chunk(handle, kind, length)
        handle.seek(_CRC_BYTES, io.SEEK_CUR)
        if problem:
            refused[keyword] = problem
            texts.pop(keyword, None)
        elif text is not None:
            texts[keyword] = text
            refused.pop(keyword, None)
    return ImageText(texts, refused)


def _chunks(handle: BinaryIO) -> Iterator[tuple[bytes, int]]:
    """(type, data length) of each chunk, the handle at its data; ends at IEND or the end."""
    while True:
        head = handle.read(_CHUNK_HEAD.size)
        if len(head) < _CHUNK_HEAD.size:
            return
        length, kind = _CHUNK_HEAD.unpack(head)
        if kind == b"IEND":
            return
        yield kind, length


def _text_chunk(handle: BinaryIO, kind: bytes, length: int) -> tuple[str, str | None, str]:
    """(keyword, text or None if unreadable, why it was refused or "")."""
    start = handle.tell()
    head = handle.read(min(length, _MAX_KEYWORD_BYTES + 1))
    keyword_bytes, separator, _ = head.partition(b"\0")
    keyword = keyword_bytes.decode("latin-1")
    if not separator or not keyword:
        handle.seek(start + length)
        return keyword or "?", None, ""  # damaged: skipped, as PIL skips it
    if length > MAX_TEXT_BYTES + _MAX_KEYWORD_BYTES + 4:
        handle.seek(start + length)
        return keyword, None, too_long_sentence(keyword, length)
    handle.seek(start)
    data = handle.read(length)[len(keyword_bytes) + 1 :]
    try:
        text = _decoded(kind, data)
    except _TooLong:
        return keyword, None, too_long_sentence(keyword, None)
    except (ValueError, zlib.error):
        return keyword, None, ""  # damaged or an unknown compression: skipped, as PIL does
    return keyword, text, ""


class _TooLong(Exception):
    pass


def _decoded(kind: bytes, data: bytes) -> str | None:
    if kind == b"tEXt":
        return _limited(data).decode("latin-1")
    if kind == b"zTXt":
        if data[:1] != b"\0":
            raise ValueError("unknown compression")
        return _inflated(data[1:]).decode("latin-1")
    compressed, method = data[:1], data[1:2]  # iTXt: flag, method, language, keyword, text
    parts = data[2:].split(b"\0", 2)
    if len(parts) < 3:
        raise ValueError("damaged iTXt chunk")
    body = parts[2]
    if compressed == b"\1":
        if method != b"\0":
            raise ValueError("unknown compression")
        body = _inflated(body)
    return _limited(body).decode("utf-8")  # UnicodeDecodeError is a ValueError: skipped


def _limited(data: bytes) -> bytes:
    if len(data) > MAX_TEXT_BYTES:
        raise _TooLong
    return data


def _inflated(data: bytes) -> bytes:
    """`data` decompressed, stopping (refused) past `MAX_TEXT_BYTES`: never more in memory."""
    inflater = zlib.decompressobj()
    plain = inflater.decompress(data, MAX_TEXT_BYTES + 1)
    if len(plain) > MAX_TEXT_BYTES or inflater.unconsumed_tail:
        raise _TooLong
    return plain


def too_long_sentence(keyword: str, size: int | None) -> str:
    shown = keyword if keyword.isprintable() else "a text chunk"
    limit = MAX_TEXT_BYTES // 1024
    if size is None:
        return f"its '{shown}' text is over {limit} KB, more than Easel reads; it was not read"
    return (
        f"its '{shown}' text is {max(size // 1024, limit + 1)} KB, more than the {limit} KB "
        "Easel reads; it was not read"
    )


def _other_text(source: bytes | Path) -> ImageText:
    """A JPEG, WebP or other image: PIL's text (its chunk sizes are the format's own)."""
    from PIL import Image

    check_image(source)
    try:
        with Image.open(_pil_source(source)) as image:
            found = {str(k): v for k, v in image.info.items() if isinstance(v, str)}
    except Exception as error:  # check_image opened it; a second failure is damage too
        raise UnreadableImage(unreadable_sentence(error)) from None
    texts = {k: v for k, v in found.items() if len(v) <= MAX_TEXT_BYTES}
    refused = {k: too_long_sentence(k, len(v)) for k, v in found.items() if k not in texts}
    return ImageText(texts, refused)


def _opened(source: bytes | Path) -> BinaryIO:
    return io.BytesIO(source) if isinstance(source, bytes) else source.open("rb")


def _pil_source(source: bytes | Path) -> BinaryIO | Path:
    return io.BytesIO(source) if isinstance(source, bytes) else source


def _os_reason(error: OSError) -> str:
    return (error.strerror or "read error").lower()

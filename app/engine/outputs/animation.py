"""A finished clip (an MP4) as an animated GIF or WebP, or one of its frames as a PNG.

PyAV decodes the clip (as it wrote it, `video.py`); Pillow writes both animations, each
frame shown for 1/fps of a second. No torch, no Qt: the window and the CLI share these.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

from app.durable import atomic_write
from app.errors import BadInput

if TYPE_CHECKING:
    from av.container import InputContainer
    from PIL import Image

# What each animation's file name ends in, and Pillow's name for its format.
ANIMATION_FORMATS = {".gif": "GIF", ".webp": "WEBP"}
# WebP's lossy quality: 90 keeps a clip's fine detail at a fraction of lossless's size.
WEBP_QUALITY = 90
PALETTE_SAMPLES = 8  # frames a GIF's one palette is made from
FALLBACK_FPS = 16  # a clip whose stream names no rate (none of Easel's)

ClipSource = Path | bytes  # a clip's file, or its bytes (read from the job database)


@dataclass(frozen=True)
class Clip:
    frames: list[Image.Image]
    fps: float


def read_clip(source: ClipSource) -> Clip:
    """Every frame of the clip, and its frame rate."""
    with _opened(source) as container:
        stream = container.streams.video[0]
        rate = stream.average_rate or stream.guessed_rate
        frames = [frame.to_image() for frame in container.decode(stream)]
    if not frames:
        raise BadInput("The clip holds no frames")
    return Clip(frames, float(rate) if rate else FALLBACK_FPS)


def frame_png(source: ClipSource, index: int) -> bytes:
    """Frame `index` (from 0) of the clip, full size, as PNG bytes: decoded from the start,
    so it is exactly the frame a player shows, whatever the clip's keyframes."""
    with _opened(source) as container:
        for at, frame in enumerate(container.decode(video=0)):
            if at == index:
                buffer = io.BytesIO()
                frame.to_image().save(buffer, format="PNG")
                return buffer.getvalue()
    raise BadInput(f"The clip has no frame {index + 1}")


def animation_format(target: Path) -> str:
    """Pillow's format for `target` by its suffix, or one sentence saying which are taken."""
    found = ANIMATION_FORMATS.get(target.suffix.lower())
    if found is None:
        raise BadInput(
            f"{target.name} is neither a .gif nor a .webp file: name it so to choose the format"
        )
    return found


def write_animation(source: ClipSource, target: Path) -> Path:
    """The clip as an animated GIF or WebP at `target` (by its suffix), looping forever, at
    the clip's speed; written atomically. Its path."""
    file_format = animation_format(target)
    clip = read_clip(source)
    atomic_write(target, lambda handle: _save(clip, handle, file_format))
    return target


def frame_ms(fps: float) -> int:
    """How long each frame shows, in milliseconds (what both formats store)."""
    return max(1, round(1000 / fps))


def _save(clip: Clip, handle: IO[bytes], file_format: str) -> None:
    frames = _gif_frames(clip.frames) if file_format == "GIF" else clip.frames
    first, *rest = frames
    options: dict[str, object] = {"quality": WEBP_QUALITY} if file_format == "WEBP" else {}
    first.save(
        handle, format=file_format, save_all=True, append_images=rest,
        duration=frame_ms(clip.fps), loop=0, **options,
    )  # fmt: skip


def _gif_frames(frames: list[Image.Image]) -> list[Image.Image]:
    """The frames in 256 colours, one palette for all (from a sheet of a few of them),
    dithered: no palette flicker from frame to frame, smooth skies rather than bands, and
    3-4x faster than Pillow's palette per frame (81 frames at 832x480: 1.9 s, not 7.1)."""
    from PIL import Image

    picks = frames[:: max(1, len(frames) // PALETTE_SAMPLES)][:PALETTE_SAMPLES]
    width, height = (max(1, side // 2) for side in picks[0].size)
    sheet = Image.new("RGB", (width, height * len(picks)))
    for n, frame in enumerate(picks):
        sheet.paste(frame.convert("RGB").resize((width, height)), (0, n * height))
    palette = sheet.quantize(255, method=Image.Quantize.MEDIANCUT)
    dither = Image.Dither.FLOYDSTEINBERG
    return [frame.convert("RGB").quantize(palette=palette, dither=dither) for frame in frames]


@contextmanager
def _opened(source: ClipSource) -> Iterator[InputContainer]:
    import av

    opened = io.BytesIO(source) if isinstance(source, bytes) else os.fspath(source)
    try:
        container = av.open(opened, mode="r")
    except av.error.FFmpegError as error:  # not a clip, or no such file
        raise BadInput(f"The clip cannot be read: {error}") from error
    with container:
        yield container

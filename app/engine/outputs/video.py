"""The video kind: a finished clip as an MP4 (H.264 through PyAV, which bundles FFmpeg),
and beside it a PNG of its first frame carrying the job's parameters (as an image's PNG
does), which is also its thumbnail. No torch; PyAV only when a clip is written or read.
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, cast

from app.durable import atomic_write
from app.engine.jobs.params import KIND_VIDEO, LAST_FRAME, GenerationParams
from app.engine.outputs.image import write_png
from app.engine.outputs.kinds import FileKind, GalleryLook, OutputKind

if TYPE_CHECKING:
    from av.video.stream import VideoStream
    from PIL import Image

log = logging.getLogger(__name__)

CODEC = "libx264"  # H.264: what every player, browser and editor opens
PIXEL_FORMAT = "yuv420p"  # the one H.264 flavour every player takes
# x264's constant quality: 17 looks lossless to the eye; the default 23 smears fine detail.
QUALITY = "17"
# x264's AVX-512 code reads memory it never wrote (with its macroblock tree on, as crf runs
# it): on a CPU with AVX-512 the same frames encoded to different bytes depending on what
# the process had freed before, so a clip resumed in a fresh worker differed from the
# uninterrupted run (up to 21 levels in frames after the first) though every decoded
# frame was equal (issue 38). Held to its AVX2 code, the bytes are the frames' alone, for
# about 40 ms more an 81-frame 480p clip (`video_encode_ms`, benchmarks/video.py).
X264_WITHOUT_AVX512 = "asm=AVX2"
# What x264 calls AVX-512 (its `X264_CPU_AVX512`): all five of these.
_X264_AVX512_PARTS = ("AVX512F", "AVX512CD", "AVX512BW", "AVX512DQ", "AVX512VL")


def first_frame_path(clip: Path) -> Path:
    """Where a clip's first-frame PNG goes: beside it, under its name (`000042-7.png`)."""
    return clip.with_suffix(".png")


def video_parameters(params: GenerationParams) -> str:
    """What a clip adds to A1111's settings line in its first frame's PNG."""
    return f"Frames: {params.frames}, FPS: {params.fps}" + _condition_parameters(params)


def _condition_parameters(params: GenerationParams) -> str:
    """How firmly a clip's images held and where its last image was, where not stock's
    (full strength, at the clip's last frame); the `easel` chunk has them always."""
    parts = []
    if params.image_strength != 1:
        parts.append(f"Image strength: {params.image_strength:g}")
    if params.last_image_strength != 1:
        parts.append(f"Last image strength: {params.last_image_strength:g}")
    if params.last_image_frame != LAST_FRAME:
        parts.append(f"Last image frame: {params.last_image_frame}")
    return "".join(f", {part}" for part in parts)


def write_video(frames: Sequence[Image.Image], path: Path, params: GenerationParams) -> None:
    """The clip as an MP4 at `path` (atomically), then its first frame as a PNG beside it,
    with the parameters in its text chunks. The PNG is written only where no file is: an
    existing one (another database's job of the same number) is never replaced."""
    atomic_write(path, lambda handle: encode_mp4(frames, handle, params.fps))
    still = first_frame_path(path)
    if still.exists():
        log.warning("first frame of %s not written: %s is there already", path, still)
        return
    write_png(frames[0], still, params, extra_parameters=video_parameters(params))


def encode_mp4(frames: Sequence[Image.Image], handle: object, fps: int) -> None:
    """H.264 frames at `fps` into the open binary file `handle`. Sides are even (4:2:0
    halves them); every size a video model draws is."""
    import av

    width, height = frames[0].size
    with av.open(handle, mode="w", format="mp4") as container:
        stream = cast("VideoStream", container.add_stream(CODEC, rate=Fraction(fps)))
        stream.width, stream.height = width, height
        stream.pix_fmt = PIXEL_FORMAT
        stream.options = encoder_options()
        for frame in frames:
            picture = av.VideoFrame.from_image(frame.convert("RGB"))
            container.mux(stream.encode(picture))
        container.mux(stream.encode(None))  # flush the encoder's delayed frames


def encoder_options() -> dict[str, object]:
    """x264's options: constant quality, and on a CPU with AVX-512 its AVX2 code (see
    `X264_WITHOUT_AVX512`). Elsewhere x264 picks its own code, which is then no wider."""
    options: dict[str, object] = {"crf": QUALITY}
    if cpu_has_avx512():
        options["x264-params"] = X264_WITHOUT_AVX512
    return options


@functools.cache
def cpu_has_avx512() -> bool:
    """Whether x264 would run its AVX-512 code here, as NumPy's run-time CPU detection sees
    it (which asks the OS too). Unknown (a NumPy without that table): False, and x264 picks
    for itself: naming a level the CPU lacks would stop the encoder on an illegal instruction."""
    features = _numpy_cpu_features()
    if features is None:
        log.warning("CPU features unknown: x264 picks its own code, AVX-512 included")
        return False
    return all(features.get(part, False) for part in _X264_AVX512_PARTS)


def _numpy_cpu_features() -> dict[str, bool] | None:
    """NumPy's table of what this CPU runs (`numpy._core` from NumPy 2, `numpy.core` before)."""
    for module in ("numpy._core._multiarray_umath", "numpy.core._multiarray_umath"):
        try:
            features = importlib.import_module(module).__cpu_features__
        except (ImportError, AttributeError):
            continue
        return dict(features)
    return None


def decode_frames(path: Path) -> list[Image.Image]:
    """Every frame of a clip, as pictures (tests, the gallery's player, frame exports)."""
    import av

    with av.open(os.fspath(path)) as container:
        return [frame.to_image() for frame in container.decode(video=0)]


def _first_frame(path: Path) -> Path | bytes:
    """The clip's thumbnail: its first-frame PNG if it is beside it, else decoded."""
    still = first_frame_path(path)
    if still.is_file():
        return still
    import io

    import av

    with av.open(os.fspath(path)) as container:
        frame = next(container.decode(video=0)).to_image()
    buffer = io.BytesIO()
    frame.save(buffer, format="PNG")
    return buffer.getvalue()


VIDEO = OutputKind(
    name="video",
    suffix=".mp4",
    media_type="video/mp4",
    file_kind=FileKind("video"),
    job_kinds=(KIND_VIDEO,),
    write=write_video,
    still=_first_frame,
    gallery=GalleryLook(badge="▶", in_viewer=False),
    is_picture=False,
)

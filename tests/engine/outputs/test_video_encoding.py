"""A clip's MP4 is its frames' alone: the same frames encode to the same bytes whatever the
process did before (what a resumed clip is compared by, and what an artist gets twice).

On a CPU with AVX-512, x264's AVX-512 code read memory it never wrote, so the bytes
depended on what the process had freed before the encode: a clip resumed in a fresh
worker differed from its uninterrupted run in every frame after the first though the
decoded frames were equal (issue 38). The heap is dirtied here as a long-running worker's
is: large blocks freed (which raises glibc's threshold for handing out fresh, zeroed
pages) after being filled with a byte. On a CPU without AVX-512 this holds either way.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import io
import sys

import numpy as np
import pytest
from PIL import Image

from app.engine.outputs import video
from app.engine.outputs.video import X264_WITHOUT_AVX512, encode_mp4, encoder_options

SIDE, FRAMES = 64, 9
# Sizes a worker frees between clips: a decoded clip, a layer's activations, small tensors.
FREED_BLOCKS = ((20 << 20,), (300_000, 500_000, 1 << 20, 2 << 20, 4 << 20), (4096,) * 50)


def moving_square() -> list[Image.Image]:
    """A textured square crossing a gradient: motion for x264's macroblock tree to follow."""
    rng = np.random.default_rng(7)
    ramp = np.linspace(0, 200, SIDE, dtype=np.float64)
    frames = []
    for index in range(FRAMES):
        picture = np.stack([np.add.outer(ramp, ramp / 2)] * 3, axis=-1)
        left = 4 + 5 * index
        picture[20:40, left : left + 20] = rng.integers(0, 255, (20, 20, 3))
        frames.append(Image.fromarray(picture.clip(0, 255).astype(np.uint8)))
    return frames


def mp4_bytes(frames: list[Image.Image]) -> bytes:
    buffer = io.BytesIO()
    encode_mp4(frames, buffer, fps=16)
    return buffer.getvalue()


def dirty_the_heap(libc: ctypes.CDLL, fill: int, sizes: tuple[int, ...]) -> None:
    blocks = [libc.malloc(size) for size in sizes]
    for block, size in zip(blocks, sizes, strict=True):
        ctypes.memset(block, fill, size)
    for block in blocks:
        libc.free(ctypes.c_void_p(block))


@pytest.mark.skipif(sys.platform != "linux", reason="dirties the heap through glibc's malloc")
def test_the_same_frames_encode_to_the_same_bytes_after_the_heap_is_dirtied() -> None:
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype = ctypes.c_void_p
    frames = moving_square()
    first = mp4_bytes(frames)

    differing = []
    for fill in (255, 254, 200, 1):
        for sizes in FREED_BLOCKS:
            dirty_the_heap(libc, fill, sizes)
            if mp4_bytes(frames) != first:
                differing.append((fill, len(sizes)))

    assert differing == []


def test_x264_is_held_to_avx2_exactly_where_the_cpu_has_avx512(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(video, "cpu_has_avx512", lambda: True)
    assert encoder_options()["x264-params"] == X264_WITHOUT_AVX512
    monkeypatch.setattr(video, "cpu_has_avx512", lambda: False)
    assert "x264-params" not in encoder_options()

"""Parsing untrusted PNG metadata (issue 34): how long a hostile A1111 settings line takes.

    .venv/bin/python benchmarks/security_png.py

Prints:
- png_params_ms_64kb: the median time (ms) of `parse_a1111` on a parameters text whose
  settings line is `Steps: 20, ` followed by 64 KB without a colon, the shapes that were
  quadratic before (letters: 33 s; `word ` repeated: 50 s), and the worst of them is
  reported. Goal: <= 5.
- png_params_ms_1mb_refused: the median time (ms) of `read_png_params` on a PNG whose
  `parameters` chunk is 1 MB (refused by the size cap, in one sentence). Goal: <= 50.

`benchmarks/security.py` calls `png_params_ms_64kb()` for its own report.
"""

from __future__ import annotations

import functools
import statistics
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path

from app.ui.presenters.png_params import ParametersTooLong, parse_a1111, read_png_params

SETTINGS_BYTES = 64 * 1024
REPEATS = 9
# The settings lines that cost the square of their length before issue 34.
ADVERSARIAL_BODIES = {
    "letters": "a" * SETTINGS_BYTES,
    "words": "word " * (SETTINGS_BYTES // 5),
    "commas": "a," * (SETTINGS_BYTES // 2),
}


def _median_ms(call: Callable[[], object], repeats: int = REPEATS) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def png_params_ms_64kb() -> float:
    """The worst shape's median parse time (ms) of a 64 KB adversarial settings line."""
    return max(
        _median_ms(functools.partial(parse_a1111, f"a cat\nSteps: 20, {body}"))
        for body in ADVERSARIAL_BODIES.values()
    )


def png_params_ms_1mb_refused() -> float:
    """The median time (ms) to read, and refuse, a PNG with a 1 MB `parameters` chunk."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data).to_bytes(4, "big")
        return len(data).to_bytes(4, "big") + kind + data + crc

    ihdr = (8).to_bytes(4, "big") * 2 + bytes([8, 0, 0, 0, 0])
    text = b"parameters\0a cat\nSteps: 20, " + b"a" * 2**20
    data = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"tEXt", text)
            + chunk(b"IDAT", zlib.compress(bytes(9 * 8))) + chunk(b"IEND", b""))  # fmt: skip
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "big.png"
        path.write_bytes(data)

        def read() -> None:
            try:
                read_png_params(path, controlnets=[])
            except ParametersTooLong:
                return
            raise AssertionError("a 1 MB parameters chunk was read")

        return _median_ms(read)


def main() -> None:
    print(f"png_params_ms_64kb: {png_params_ms_64kb():.2f}")
    print(f"png_params_ms_1mb_refused: {png_params_ms_1mb_refused():.2f}")


if __name__ == "__main__":
    main()

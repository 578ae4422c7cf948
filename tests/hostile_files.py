"""Files as a stranger could make them: broken `.safetensors` headers, a lying GGUF, a symbolic
link loop, and PNGs with oversized text or a decompression-bomb size. Written byte by byte
(no torch, no PIL for the broken parts), so each file is exactly the damage it names."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

# File name -> a phrase its "unsupported" reason must contain (the right reason, not a
# family guess such as "no text encoder").
HOSTILE_MODELS = {
    "claims_2_40.safetensors": "no valid header",
    "short_offsets.safetensors": "data_offsets",
    "null_offsets.safetensors": "data_offsets",
    "huge_number.safetensors": "data_offsets",
    "shape_five.safetensors": "shape",
    "deep.safetensors": "nests too deeply",
    "overlapping.safetensors": "overlap",
    "out_of_range.safetensors": "truncated",
    "dtype_mismatch.safetensors": "data_offsets span 8 bytes",
    "lying_count.gguf": "claims 4611686018427387904 tensors",
    "loop.safetensors": "loop",
}
UNET_KEY = "model.diffusion_model.input_blocks.0.0.weight"


def _safetensors(path: Path, header_text: str, data: bytes = b"") -> None:
    raw = header_text.encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)


def _entry(dtype: str, shape: object, offsets: object) -> dict[str, object]:
    return {"dtype": dtype, "shape": shape, "data_offsets": offsets}


def write_hostile_models(folder: Path) -> dict[str, str]:
    """Every file of `HOSTILE_MODELS` in `folder` (made if missing); returns that table."""
    folder.mkdir(parents=True, exist_ok=True)
    header = json.dumps
    (folder / "claims_2_40.safetensors").write_bytes(struct.pack("<Q", 2**40) + b"{}")
    _safetensors(folder / "short_offsets.safetensors",
                 header({UNET_KEY: _entry("F32", [1], [0])}), bytes(4))  # fmt: skip
    _safetensors(folder / "null_offsets.safetensors",
                 header({UNET_KEY: _entry("F32", [1], [0, None])}), bytes(4))  # fmt: skip
    _safetensors(
        folder / "huge_number.safetensors",
        f'{{"{UNET_KEY}": {{"dtype": "F32", "shape": [1], "data_offsets": [0, 1e400]}}}}',
        bytes(4),
    )
    _safetensors(folder / "shape_five.safetensors",
                 header({UNET_KEY: _entry("F32", 5, [0, 20])}), bytes(20))  # fmt: skip
    depth = 200_000
    _safetensors(folder / "deep.safetensors", '{"a":' + "[" * depth + "]" * depth + "}")
    _safetensors(
        folder / "overlapping.safetensors",
        header({"a": _entry("F32", [2], [0, 8]), "b": _entry("F32", [2], [4, 12])}),
        bytes(12),
    )
    _safetensors(folder / "out_of_range.safetensors",
                 header({"a": _entry("F32", [2], [0, 8])}), bytes(4))  # fmt: skip
    # A UNet weight of 16 half floats (32 bytes) stored in 8: the file is damaged, which is
    # what the listing must say (its key names alone read as "a UNet but no text encoder").
    _safetensors(folder / "dtype_mismatch.safetensors",
                 header({UNET_KEY: _entry("F16", [4, 4], [0, 8])}), bytes(8))  # fmt: skip
    gguf = b"GGUF" + struct.pack("<IQQ", 3, 2**62, 0)  # 2^62 tensors in 24 bytes
    (folder / "lying_count.gguf").write_bytes(gguf)
    loop = folder / "loop.safetensors"
    loop.unlink(missing_ok=True)
    loop.symlink_to(loop.name)
    return HOSTILE_MODELS


# ------------------------------------------------------------------------------------ PNGs


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_bytes(width: int, height: int, *chunks: bytes) -> bytes:
    """A greyscale PNG of `width` x `height` whose IDAT holds one row of zeros (enough for
    a reader of its size and text; a decoder of its pixels finds it short), with `chunks`
    (made by `text_chunk` or `ztxt_chunk`) before the pixels."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    pixels = zlib.compress(b"\0" * (width + 1))
    return (
        b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + b"".join(chunks)
        + _chunk(b"IDAT", pixels) + _chunk(b"IEND", b"")
    )  # fmt: skip


def text_chunk(keyword: str, text: str) -> bytes:
    return _chunk(b"tEXt", keyword.encode("latin-1") + b"\0" + text.encode("latin-1"))


def ztxt_chunk(keyword: str, text: str) -> bytes:
    compressed = zlib.compress(text.encode("latin-1"), 9)
    return _chunk(b"zTXt", keyword.encode("latin-1") + b"\0\0" + compressed)


def itxt_chunk(keyword: str, text: str) -> bytes:
    compressed = zlib.compress(text.encode("utf-8"), 9)
    return _chunk(b"iTXt", keyword.encode("latin-1") + b"\0\1\0\0\0" + compressed)

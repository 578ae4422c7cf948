"""The header of a `.safetensors` file, read as untrusted input.

The models folder holds files downloaded from strangers, and the model listing (the window's
picker, `/api/v1/models`, every A1111 request) reads each one's header. A header is JSON
that anyone can write, so everything in it is checked before use: its claimed length
against the file, its nesting (the JSON parser's recursion limit, not a crash), each
tensor's dtype, shape and byte range (integers, in the file, not overlapping, as many bytes
as dtype x shape needs). What is wrong becomes `ValueError` with a sentence the listing
shows after the file's name ("x.safetensors cannot be used: <sentence>"); the rules are the
`safetensors` library's own, so a file listed as usable is one the loader can open.
"""

from __future__ import annotations

import itertools
import json
import math
import struct
from pathlib import Path
from typing import Any

MAX_HEADER_BYTES = 100 * 1024 * 1024  # the safetensors format's own limit
METADATA_KEY = "__metadata__"
_SHOWN_NAME_CHARS = 60  # a tensor name quoted in a refusal (names come from the file)
_MAX_COUNT = 2**63 - 1  # sizes and offsets are 64-bit in the format (and in the loader)
_MAX_RANK = 64  # dimensions per tensor; real ones have at most 5

# Bits per element of the dtypes the safetensors format defines. A dtype not listed here is
# refused by the loader anyway; the listing lets it through unchecked (newer formats).
DTYPE_BITS = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32,
    "I64": 64, "U64": 64, "F64": 64, "C64": 64,
    "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
}  # fmt: skip


def read_safetensors_header(path: Path) -> dict[str, Any]:
    """The JSON header of a safetensors file (tensor name -> dtype, shape, offsets), checked.

    Raises ValueError with a sentence naming what is wrong (truncated, not safetensors,
    a tensor whose offsets or shape make no sense)."""
    try:
        with path.open("rb") as handle:
            size = path.stat().st_size
            prefix = handle.read(8)
            if len(prefix) < 8:
                raise ValueError("the file is empty or truncated")
            (length,) = struct.unpack("<Q", prefix)
            if not 2 <= length <= MAX_HEADER_BYTES:
                raise ValueError("it is not a safetensors file (no valid header)")
            if length > size - 8:
                raise ValueError(
                    f"the file is truncated (its header claims {length} bytes, "
                    f"the file has {max(size - 8, 0)} after the length)"
                )
            raw = handle.read(length)
    except OSError as error:
        raise ValueError(f"it cannot be read ({error.strerror or 'read error'})") from error
    if len(raw) < length:
        raise ValueError("the file is truncated (its header is cut off)")
    header = parse_header(raw)
    check_tensors(header, size - 8 - length)
    return header


def parse_header(raw: bytes) -> dict[str, Any]:
    """The header's JSON as a table, or ValueError; never RecursionError or OverflowError."""
    try:
        header = json.loads(raw)
    except RecursionError:
        # The C parser stops at the interpreter's recursion limit (no stack overflow);
        # a real header nests three levels deep.
        raise ValueError("it is not a safetensors file (its header nests too deeply)") from None
    except ValueError:  # also UnicodeDecodeError and integers of more than 4300 digits
        raise ValueError("it is not a safetensors file (the header is not JSON)") from None
    if not isinstance(header, dict):
        raise ValueError("it is not a safetensors file (the header is not a table)")
    metadata = header.get(METADATA_KEY, {})
    if not isinstance(metadata, dict):
        raise ValueError("it is not a safetensors file (its __metadata__ is not a table)")
    return header


def check_tensors(header: dict[str, Any], data_bytes: int) -> None:
    """Every tensor entry well formed, inside the `data_bytes` after the header, without
    overlaps, and as long as its dtype and shape say; ValueError naming the first that is not."""
    ranges: list[tuple[int, int, str]] = []
    for name, entry in header.items():
        if name == METADATA_KEY:
            continue
        begin, end = _checked_entry(name, entry)
        if end > data_bytes:
            raise ValueError(
                f"the file is truncated ({data_bytes} bytes of tensor data, {end} needed)"
            )
        ranges.append((begin, end, name))
    ranges.sort()
    for (_, previous_end, previous), (begin, _, name) in itertools.pairwise(ranges):
        if begin < previous_end:
            raise ValueError(
                f"tensors {shown(previous)} and {shown(name)} overlap in the file (damaged?)"
            )


def _checked_entry(name: str, entry: Any) -> tuple[int, int]:
    """(begin, end) of one tensor's bytes, after checking its entry's types and size."""
    if not isinstance(entry, dict):
        raise ValueError(f"tensor {shown(name)} has no dtype, shape and offsets")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if not isinstance(dtype, str):
        raise ValueError(f"tensor {shown(name)} has no dtype")
    if not isinstance(shape, list) or len(shape) > _MAX_RANK or not all(map(_is_count, shape)):
        raise ValueError(f"tensor {shown(name)} has a shape that is not a list of sizes")
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(map(_is_count, offsets)):
        raise ValueError(f"tensor {shown(name)} has data_offsets that are not two byte offsets")
    begin, end = offsets
    if end < begin:
        raise ValueError(f"tensor {shown(name)} ends before it begins")
    bits = DTYPE_BITS.get(dtype)
    if bits is not None:
        needed = (math.prod(shape) * bits + 7) // 8  # integers: shapes may be huge
        if end - begin != needed:
            raise ValueError(
                f"tensor {shown(name)} is {dtype} of shape {shape}, {needed} bytes, "
                f"but its data_offsets span {end - begin} bytes"
            )
    return begin, end


def _is_count(value: Any) -> bool:
    """A JSON integer from 0 to 2^63 - 1 (not a float, not true/false, not null)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _MAX_COUNT


def shown(name: str) -> str:
    """A tensor name from a file as a refusal quotes it: printable and short."""
    printable = "".join(char if char.isprintable() else "?" for char in name[:_SHOWN_NAME_CHARS])
    return f"'{printable}…'" if len(name) > _SHOWN_NAME_CHARS else f"'{printable}'"

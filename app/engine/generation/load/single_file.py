"""Loading a single `.safetensors` checkpoint fast and in one copy (`fast_single_file`).

diffusers' `from_single_file` maps the file (safetensors' mmap) and builds the pipeline on
the meta device around tensors that are read lazily: the pages come in one fault at a time
when the first step, or `.to("cuda")`, touches them. Here the file is read in meanwhile from
a few threads in large pieces (`prefetch`: a deeper I/O queue reads a cold file faster), so
the load returns with the whole model in memory. Where the pipeline runs wider than the file
(a float16 file in float32 on a CPU), the mapped pages would stay beside the widened copy:
each tensor is then read and widened as it is read (`read_checkpoint`) and handed to the
same diffusers code (`reading_checkpoints_with`). Either way everything after the read is
diffusers' own (conversion, meta-device construction, components), so the pipeline is the
stock one, weight for weight, and images stay bit-identical.
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from app.engine.generation.files.safetensors_header import parse_header

READ_THREADS = 4
CHUNK_BYTES = 16 * 2**20  # one read at a time per thread, at most this much
HEADER_LIMIT = 100 * 2**20
# Weights no pipeline reads: EMA copies that "full" checkpoints carry beside the model.
SKIPPED_PREFIXES = ("model_ema.",)
_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
    "U8": torch.uint8, "BOOL": torch.bool,
}  # fmt: skip

_WILLNEED = getattr(os, "posix_fadvise", None)
Reader = Callable[[str], dict[str, torch.Tensor]]
_PATCH_LOCK = threading.Lock()


class UnreadableCheckpoint(ValueError):
    """Not a safetensors file this reader understands (the stock loader is used instead)."""


def read_checkpoint(
    path: Path, dtype: torch.dtype | None = None, *, threads: int = READ_THREADS
) -> dict[str, torch.Tensor]:
    """Every tensor of the safetensors file at `path`, read now. Floating tensors narrower
    than `dtype` are widened to it as they are read (exactly: float16 and bfloat16 fit in
    float32); none is narrowed, so what a loader keeps at full precision stays exact."""
    with path.open("rb") as file:
        entries, data_start = _header(file, path)
    tensors: dict[str, torch.Tensor] = {}
    tasks: list[tuple[int, int, torch.Tensor, torch.dtype]] = []
    for key, info in entries.items():
        stored = _DTYPES.get(info.get("dtype", ""))
        if stored is None:
            raise UnreadableCheckpoint(f"{path.name}: tensor {key} has dtype {info.get('dtype')}")
        begin, end = (int(x) for x in info["data_offsets"])
        shape = [int(n) for n in info["shape"]]
        target = stored
        if dtype is not None and _widens(stored, dtype):
            target = dtype
        tensor = torch.empty(shape, dtype=target)
        if tensor.numel() * stored.itemsize != end - begin:
            raise UnreadableCheckpoint(f"{path.name}: tensor {key} does not match its size")
        tensors[key] = tensor
        tasks.append((data_start + begin, end - begin, tensor, stored))
    _read_all(path, tasks, threads)
    return tensors


def _widens(stored: torch.dtype, wanted: torch.dtype) -> bool:
    return (
        stored.is_floating_point
        and wanted.is_floating_point
        and stored.itemsize < wanted.itemsize
        and stored in (torch.float16, torch.bfloat16)
    )


def _header(file: Any, path: Path) -> tuple[dict[str, dict[str, Any]], int]:
    raw = file.read(8)
    if len(raw) != 8:
        raise UnreadableCheckpoint(f"{path.name} is too short to be a safetensors file")
    (length,) = struct.unpack("<Q", raw)
    if length > HEADER_LIMIT:
        raise UnreadableCheckpoint(f"{path.name} has no readable safetensors header")
    try:
        header = parse_header(file.read(length))  # never RecursionError (a swapped file)
    except ValueError as error:
        raise UnreadableCheckpoint(f"{path.name} cannot be loaded: {error}") from error
    entries = {
        key: info
        for key, info in header.items()
        if key != "__metadata__" and not key.startswith(SKIPPED_PREFIXES)
    }
    return entries, 8 + length


def _read_all(
    path: Path, tasks: list[tuple[int, int, torch.Tensor, torch.dtype]], threads: int
) -> None:
    """Fill every tensor from its byte range; large ranges in chunks, across threads."""
    local = threading.local()
    handles: list[Any] = []
    handles_lock = threading.Lock()

    def handle() -> Any:
        file = getattr(local, "file", None)
        if file is None:
            file = local.file = path.open("rb", buffering=0)
            with handles_lock:
                handles.append(file)
        return file

    def read(offset: int, view: memoryview) -> None:
        file = handle()
        file.seek(offset)
        while view:
            got = file.readinto(view)
            if not got:
                raise UnreadableCheckpoint(f"{path.name} ended before its last tensor")
            view = view[got:]

    def chunks() -> Iterator[Callable[[], None]]:
        for offset, length, tensor, stored in tasks:
            if not length:
                continue
            if tensor.dtype != stored:  # read, then widen: a staging tensor per thread's job
                yield _then_widen(read, offset, tensor, stored)
                continue
            whole = _bytes_of(tensor)
            for start in range(0, length, CHUNK_BYTES):
                piece = whole[start : start + CHUNK_BYTES]
                yield lambda o=offset + start, p=piece: read(o, p)  # type: ignore[misc]

    try:
        with ThreadPoolExecutor(max(1, threads), thread_name_prefix="read-weights") as pool:
            for future in [pool.submit(job) for job in chunks()]:
                future.result()
    finally:
        for file in handles:
            file.close()


def _bytes_of(tensor: torch.Tensor) -> memoryview:
    """A contiguous tensor's memory, writable, as bytes (any dtype, bfloat16 too)."""
    array: Any = tensor.reshape(-1).view(torch.uint8).numpy()
    return memoryview(array)


def _then_widen(
    read: Callable[[int, memoryview], None], offset: int, tensor: torch.Tensor, stored: torch.dtype
) -> Callable[[], None]:
    def job() -> None:
        staging = torch.empty(tensor.shape, dtype=stored)
        read(offset, _bytes_of(staging))
        tensor.copy_(staging)

    return job


@contextmanager
def reading_checkpoints_with(reader: Reader) -> Iterator[None]:
    """While inside, diffusers' `from_single_file` gets its checkpoint from `reader(path)`
    instead of mapping the file; everything else it does is unchanged. One load at a time
    (the seam is diffusers' module-level function; diffusers is pinned to 0.42.x, and a test
    fails if the seam is not used)."""
    import diffusers.loaders.single_file as single_file

    with _PATCH_LOCK:
        stock = single_file.load_single_file_checkpoint

        def load(pretrained_model_link_or_path: Any, **_options: Any) -> dict[str, torch.Tensor]:
            return reader(str(pretrained_model_link_or_path))

        single_file.load_single_file_checkpoint = load  # type: ignore[assignment]
        try:
            yield
        finally:
            single_file.load_single_file_checkpoint = stock


def prefetch(
    path: Path, *, threads: int = READ_THREADS, stop: Callable[[], bool] | None = None
) -> int:
    """Read the file through once, from a few threads in large pieces, into the OS's page
    cache (nothing is kept here): a mapped load of it then finds every page in memory, and
    a cold file is read with a deeper I/O queue than page faults give. Bytes read; stops
    early once `stop()` says so (a read-ahead that is no longer wanted)."""
    size = path.stat().st_size
    offsets = list(range(0, size, CHUNK_BYTES))
    local = threading.local()
    files: list[Any] = []
    lock = threading.Lock()

    def read(offset: int) -> int:
        if stop is not None and stop():
            return 0
        state = getattr(local, "state", None)
        if state is None:
            file = path.open("rb", buffering=0)
            with lock:
                files.append(file)
            state = local.state = (file, memoryview(bytearray(CHUNK_BYTES)))
        file, scratch = state
        length = min(CHUNK_BYTES, size - offset)
        if _WILLNEED is not None:  # the kernel reads it in: no copy here, cached pages skipped
            _WILLNEED(file.fileno(), offset, length, os.POSIX_FADV_WILLNEED)
            return length
        file.seek(offset)
        return int(file.readinto(scratch[:length]) or 0)

    try:
        with ThreadPoolExecutor(max(1, threads), thread_name_prefix="prefetch") as pool:
            return sum(pool.map(read, offsets))
    finally:
        for file in files:
            file.close()


def fast_single_file(
    pipeline_class: Any, path: Path, options: dict[str, Any], *, threads: int = READ_THREADS
) -> Any:
    """`pipeline_class.from_single_file(path, **options)`, loaded fast and in one copy.

    Where the file's weights are already in the precision the pipeline runs in, diffusers
    maps the file and the pipeline's tensors are its pages: the file is read in meanwhile
    (`prefetch`), from several threads, so the load returns with the whole model in memory.
    Where they must be widened (a float16 file run in float32 on a CPU), mapping would hold
    the file's pages beside the widened copy: each tensor is read and widened instead
    (`read_checkpoint`), and handed to the same diffusers code."""
    dtype = options.get("dtype") or options.get("torch_dtype")
    try:
        widen = path.suffix == ".safetensors" and dtype is not None and _needs_widening(path, dtype)
    except (OSError, UnreadableCheckpoint):
        widen = False  # the stock loader says what is wrong with it
    if not widen:
        with ThreadPoolExecutor(1, thread_name_prefix="prefetch") as pool:
            reading = pool.submit(prefetch, path, threads=threads)
            pipe = pipeline_class.from_single_file(str(path), **options)
            reading.result()
        return pipe
    handed = [read_checkpoint(path, dtype, threads=threads)]

    def reader(_path: str) -> dict[str, torch.Tensor]:
        return handed.pop()  # once, and not kept here: the pipeline's tensors are these

    with reading_checkpoints_with(reader):
        return pipeline_class.from_single_file(str(path), **options)


def _needs_widening(path: Path, dtype: torch.dtype) -> bool:
    with path.open("rb") as file:
        entries, _start = _header(file, path)
    stored = {_DTYPES.get(info.get("dtype", "")) for info in entries.values()}
    return any(kind is not None and _widens(kind, dtype) for kind in stored)

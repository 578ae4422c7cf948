"""Atomic writes and PNG metadata text (no torch needed)."""

from __future__ import annotations

from pathlib import Path
from typing import IO

import pytest

from app.durable import atomic_write
from app.engine.generation.errors import is_transient
from app.engine.jobs.params import GenerationParams
from app.engine.outputs.image import a1111_parameters, write_png
from tests.easel_png import read_png_params


def test_atomic_write_replaces_the_file_whole(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "out.bin"
    atomic_write(target, lambda handle: handle.write(b"first"))
    atomic_write(target, lambda handle: handle.write(b"second"))
    assert target.read_bytes() == b"second"
    assert [p.name for p in target.parent.iterdir()] == ["out.bin"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")

    def fail_halfway(handle: IO[bytes]) -> None:
        handle.write(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, fail_halfway)
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]


def test_a1111_parameters_omit_an_empty_negative_prompt() -> None:
    params = GenerationParams("a cat", scheduler="DDIM", steps=20, cfg=7.5, seed=3)
    assert a1111_parameters(params) == (
        "a cat\nSteps: 20, Sampler: DDIM, CFG scale: 7.5, Seed: 3, Size: 64x64, Model: easel-tiny"
    )


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (MemoryError(), True),
        (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"), True),
        (RuntimeError("MPS backend out of memory (MPS allocated: 1 GB)"), True),
        (RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried 1 GB"), True),
        (ValueError("height must be divisible by 8"), False),
    ],
)
def test_only_out_of_memory_is_transient(error: BaseException, transient: bool) -> None:
    assert is_transient(error) is transient


def test_png_metadata_round_trips_non_latin_prompts(tmp_path: Path) -> None:
    from PIL import Image

    params = GenerationParams("一只猫 🐈", negative_prompt="«dog»", seed=9)
    path = tmp_path / "cat.png"
    write_png(Image.new("RGB", (8, 8)), path, params)
    assert read_png_params(path) == params
    with Image.open(path) as image:
        assert image.info["parameters"].startswith("一只猫 🐈\nNegative prompt: «dog»\n")

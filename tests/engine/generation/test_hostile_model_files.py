"""Model files from strangers: each broken one is listed as unsupported, in one sentence that
names it and says what is wrong, and the listing goes on (no torch: headers only)."""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path

import pytest

from app.engine.generation.files.safetensors_header import read_safetensors_header
from app.engine.generation.files.sources import ModelSearchPath, list_models, resolve_model
from app.engine.paths import bundled_models_dir
from tests.hostile_files import UNET_KEY, write_hostile_models


def test_each_broken_model_file_is_one_sentence_naming_it_and_the_others_still_work(
    tmp_path: Path,
) -> None:
    expected = write_hostile_models(tmp_path / "models")
    search = ModelSearchPath(bundled=(bundled_models_dir(),), user=(tmp_path / "models",))
    started = time.monotonic()
    found = {model.path.name: model for model in list_models(search)}
    assert time.monotonic() - started < 5  # no file makes the listing wait (200,000 levels)
    for name, phrase in expected.items():
        model = found[name]  # listed (the symlink loop too), not left out
        reason = model.unsupported_reason
        assert not model.supported and model.label == "unsupported"
        assert reason.startswith(f"{name} cannot be used: ") and phrase in reason, reason
        assert "\n" not in reason and "Error" not in reason and "<" not in reason
    bundled = [m for m in found.values() if m.path.parent == bundled_models_dir()]
    assert bundled and all(model.supported for model in bundled)
    # The default model is still found by name, past the broken files (submit's path).
    assert resolve_model(bundled[0].name, search).supported


def test_a_dtype_shape_mismatch_gives_its_own_reason_not_a_missing_part(tmp_path: Path) -> None:
    write_hostile_models(tmp_path / "models")
    search = ModelSearchPath(user=(tmp_path / "models",))
    [model] = [m for m in list_models(search) if m.name == "dtype_mismatch"]
    assert model.unsupported_reason == (
        f"dtype_mismatch.safetensors cannot be used: tensor '{UNET_KEY}' is F16 of shape "
        "[4, 4], 32 bytes, but its data_offsets span 8 bytes"
    )


def _header_file(path: Path, header: object, data: bytes = b"") -> Path:
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)
    return path


@pytest.mark.parametrize(
    ("entry", "phrase"),
    [
        ({"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 8]}, "not two byte offsets"),
        ({"dtype": "F32", "shape": [1], "data_offsets": ["0", "4"]}, "not two byte offsets"),
        ({"dtype": "F32", "shape": [1], "data_offsets": [True, 4]}, "not two byte offsets"),
        ({"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}, "ends before it begins"),
        ({"dtype": "F32", "shape": [2**64], "data_offsets": [0, 4]}, "not a list of sizes"),
        ({"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}, "not a list of sizes"),
        ({"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}, "not a list of sizes"),
        ({"dtype": 7, "shape": [1], "data_offsets": [0, 4]}, "no dtype"),
        ("not a table", "no dtype, shape and offsets"),
    ],
)
def test_malformed_tensor_entries_are_refused_with_what_is_wrong(
    tmp_path: Path, entry: object, phrase: str
) -> None:
    path = _header_file(tmp_path / "x.safetensors", {"t": entry}, bytes(8))
    with pytest.raises(ValueError, match=phrase):
        read_safetensors_header(path)


def test_a_well_formed_header_reads_as_before(tmp_path: Path) -> None:
    header = {
        "__metadata__": {"format": "pt"},
        "a": {"dtype": "F16", "shape": [2, 2], "data_offsets": [0, 8]},
        "b": {"dtype": "F4", "shape": [3], "data_offsets": [8, 10]},  # 12 bits: 2 bytes
        "empty": {"dtype": "F32", "shape": [0], "data_offsets": [10, 10]},
    }
    path = _header_file(tmp_path / "ok.safetensors", header, bytes(10))
    assert read_safetensors_header(path) == header
    with pytest.raises(ValueError, match="__metadata__ is not a table"):
        read_safetensors_header(_header_file(tmp_path / "meta.safetensors", {"__metadata__": 1}))

"""The fast single-file load gives exactly the pipeline stock `from_single_file` gives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file, save_file

from app.engine.generation.files.architecture import Architecture
from app.engine.generation.load.pipelines import SingleFileConfigs, _pipeline_class
from app.engine.generation.load.single_file import (
    fast_single_file,
    prefetch,
    read_checkpoint,
    reading_checkpoints_with,
)
from tests.engine.generation.tiny_architectures import (
    CONFIG_NAMES,
    single_files,
    tiny_configs,
    tiny_folders,
)

__all__ = ["single_files", "tiny_configs", "tiny_folders"]

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")


def stock_options(configs: SingleFileConfigs, arch: Architecture, dtype: torch.dtype) -> Any:
    options: dict[str, Any] = {
        "config": str(configs.root / CONFIG_NAMES[arch]), "torch_dtype": dtype,
        "local_files_only": True,
    }  # fmt: skip
    if arch is not Architecture.SDXL:
        options.update(safety_checker=None, requires_safety_checker=False)
    return options


def weights(pipe: Any) -> dict[str, torch.Tensor]:
    return {
        f"{name}.{key}": value
        for name, part in pipe.components.items()
        if isinstance(part, torch.nn.Module)
        for key, value in part.state_dict().items()
    }


def assert_same_pipeline(ours: Any, stock: Any) -> None:
    mine, theirs = weights(ours), weights(stock)
    assert mine.keys() == theirs.keys()
    for key, value in theirs.items():
        assert mine[key].dtype == value.dtype, key
        assert torch.equal(mine[key], value), key
    assert dict(ours.scheduler.config) == dict(stock.scheduler.config)
    assert type(ours) is type(stock)


@pytest.mark.parametrize("arch", [Architecture.SD1, Architecture.SDXL])
@pytest.mark.parametrize("stored", [torch.float32, torch.float16], ids=["f32-file", "f16-file"])
def test_the_fast_load_is_the_stock_pipeline_weight_for_weight(
    single_files: dict[Architecture, Path],
    tiny_configs: SingleFileConfigs,
    tmp_path: Path,
    arch: Architecture,
    stored: torch.dtype,
) -> None:
    path = single_files[arch]
    if stored is torch.float16:  # run in float32: the widening path
        path = tmp_path / "half.safetensors"
        save_file({k: v.half() for k, v in load_file(single_files[arch]).items()}, str(path))
    cls = _pipeline_class(arch)
    options = stock_options(tiny_configs, arch, torch.float32)
    ours = fast_single_file(cls, path, dict(options))
    assert_same_pipeline(ours, cls.from_single_file(str(path), **options))


def test_the_checkpoint_reaches_diffusers_through_the_seam(
    single_files: dict[Architecture, Path], tiny_configs: SingleFileConfigs
) -> None:
    """If diffusers stopped asking `load_single_file_checkpoint`, the reader would be
    bypassed silently: this fails instead."""
    path = single_files[Architecture.SD1]
    asked: list[str] = []

    def spy(where: str) -> dict[str, torch.Tensor]:
        asked.append(where)
        return read_checkpoint(Path(where), torch.float32)

    options = stock_options(tiny_configs, Architecture.SD1, torch.float32)
    with reading_checkpoints_with(spy):
        _pipeline_class(Architecture.SD1).from_single_file(str(path), **options)
    assert asked == [str(path)]


def test_read_checkpoint_widens_exactly_and_never_narrows(tmp_path: Path) -> None:
    tensors = {
        "half": torch.randn(3, 5).half(), "brain": torch.randn(7).bfloat16(),
        "full": torch.randn(2, 2), "ids": torch.arange(6), "empty": torch.zeros(0, 4),
        "model_ema.decay": torch.tensor(0.9999),
    }  # fmt: skip
    path = tmp_path / "mixed.safetensors"
    save_file(tensors, str(path))
    read = read_checkpoint(path, torch.float32, threads=3)
    assert "model_ema.decay" not in read  # EMA copies are not part of any pipeline
    for key in ["half", "brain", "full"]:
        assert read[key].dtype == torch.float32 and torch.equal(read[key], tensors[key].float())
    assert read["ids"].dtype == torch.int64 and torch.equal(read["ids"], tensors["ids"])
    assert read["empty"].shape == (0, 4)
    narrow = read_checkpoint(path, torch.float16)
    assert narrow["full"].dtype == torch.float32  # the loader narrows, exactly as stock does
    assert prefetch(path) == path.stat().st_size

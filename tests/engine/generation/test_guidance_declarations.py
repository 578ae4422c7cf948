"""Which family a ControlNet, an IP-Adapter or a partial checkpoint belongs to is read
against what each family declares (`FamilySpec.guidance`, `CheckpointFile.refused`), not a
table of families in guidance/ or files/: real widths in header-only files, no weights."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from app.engine.generation.files.architecture import detect_state_dict
from app.engine.generation.files.registry import Architecture, families
from app.engine.generation.guidance.controlnets import list_controlnets
from app.engine.generation.guidance.ip_adapters import IPAdapterInfo

_ATTN2 = "down_blocks.1.attentions.0.transformer_blocks.0.attn2.to_k.weight"


def _controlnet(path: Path, width: int, *, added: bool = False, union: bool = False) -> None:
    """A ControlNet file with diffusers' keys whose text width is `width` (u8: shapes only)."""
    tensors = {
        "controlnet_cond_embedding.conv_in.weight": np.zeros((1, 1), np.uint8),
        _ATTN2: np.zeros((1, width), np.uint8),
    }
    if added:
        tensors["add_embedding.linear_1.weight"] = np.zeros((1, 1), np.uint8)
    if union:
        tensors["task_embedding"] = np.zeros((8, 1), np.uint8)
    save_file(tensors, str(path))


@pytest.mark.parametrize(
    ("width", "added", "family"),
    [(768, False, "sd1"), (1024, False, "sd2"), (2048, True, "sdxl"), (32, False, "sd1")],
    ids=["sd1-width", "sd2-width", "sdxl-text-time", "unknown-width-is-the-oldest"],
)
def test_a_controlnet_file_is_the_family_its_width_or_embedding_declares(
    tmp_path: Path, width: int, added: bool, family: str
) -> None:
    _controlnet(tmp_path / "net.safetensors", width, added=added)
    [info] = list_controlnets([tmp_path])
    assert info.architecture is Architecture(family) and info.layout == "diffusers"


def test_a_union_is_the_family_that_declares_unions_and_is_refused_without_its_embedding(
    tmp_path: Path,
) -> None:
    _controlnet(tmp_path / "union.safetensors", 2048, added=True, union=True)
    _controlnet(tmp_path / "odd-union.safetensors", 768, union=True)
    found = {info.name: info for info in list_controlnets([tmp_path])}
    assert found["union"].architecture is Architecture.SDXL and found["union"].union
    assert not found["odd-union"].supported
    unions = [spec.label for spec in families() if spec.guidance.controlnet_union]
    assert found["odd-union"].unsupported_reason.startswith(
        f"a ControlNet Union not made for {' or '.join(unions)}"
    )


def test_an_ip_adapter_is_labelled_by_the_family_of_its_width(tmp_path: Path) -> None:
    labels = {width: IPAdapterInfo("a", tmp_path / "a", width).label for width in (768, 2048, 5)}
    assert labels == {768: "SD 1.x", 2048: "SDXL", 5: "IP-Adapter"}


def test_a_partial_checkpoint_is_refused_with_its_family_sentence() -> None:
    refiner = {"conditioner.embedders.0.model.text_projection": [1280, 1280]}
    assert detect_state_dict(refiner).unsupported_reason.startswith("an SDXL refiner")

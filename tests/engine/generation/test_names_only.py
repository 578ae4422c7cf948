"""`names_only` (requests from the network, jobs on a shared queue): a name resolves only to
files inside the model folders, links followed, on real folders and links."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app.engine import paths
from app.engine.generation.files.sources import (
    ModelNotInstalled,
    ModelSearchPath,
    resolve_model,
    resolve_model_name,
)
from app.engine.generation.guidance.controlnets import ControlNetNotFound, find_controlnet
from app.engine.generation.post.upscalers import UpscalerNotFound, resolve_upscaler

TINY = paths.bundled_models_dir() / "easel-tiny"


def test_a_pipeline_folder_holding_a_link_to_weights_outside_is_refused(tmp_path: Path) -> None:
    models, outside = tmp_path / "models", tmp_path / "outside"
    shutil.copytree(TINY, models / "tiny")
    weights = models / "tiny" / "unet" / "diffusion_pytorch_model.safetensors"
    outside.mkdir()
    shutil.move(weights, outside / "unet.safetensors")
    weights.symlink_to(outside / "unet.safetensors")
    search = ModelSearchPath(user=(models,))
    assert resolve_model("tiny", search).supported  # this machine's user: their link
    with pytest.raises(ModelNotInstalled):
        resolve_model_name("tiny", search)


def test_links_that_stay_inside_the_folders_are_fine(tmp_path: Path) -> None:
    """The Hugging Face cache links each snapshot's files to its blobs, inside the cache;
    a models folder that is itself a link is followed as a whole."""
    hub = tmp_path / "hub" / "models--org--tiny"
    snapshot = hub / "snapshots" / "abc"
    shutil.copytree(TINY, snapshot)
    (hub / "blobs").mkdir()
    index = snapshot / "model_index.json"
    shutil.move(index, hub / "blobs" / "1234")
    index.symlink_to(Path("../../blobs/1234"))
    (tmp_path / "real-models").mkdir()
    shutil.copytree(TINY, tmp_path / "real-models" / "mine")
    (tmp_path / "models").symlink_to(tmp_path / "real-models", target_is_directory=True)
    search = ModelSearchPath(user=(tmp_path / "models",), hf_caches=(tmp_path / "hub",))
    assert resolve_model_name("org/tiny", search).path == snapshot
    assert resolve_model_name("mine", search).name == "mine"


def test_an_upscaler_name_is_a_file_name_never_a_path(tmp_path: Path) -> None:
    folder = tmp_path / "upscale_models"
    folder.mkdir()
    (folder / "x.pth").write_bytes(b"weights")
    assert resolve_upscaler("x", [folder]) == folder / "x.pth"
    for name in ("../x", "sub/x.pth", "../upscale_models/x.pth", str(folder / "x.pth")):
        with pytest.raises(UpscalerNotFound):
            resolve_upscaler(name, [folder])
    (folder / "linked.pth").symlink_to(tmp_path / "x.pth")
    (tmp_path / "x.pth").write_bytes(b"weights")
    assert resolve_upscaler("linked", [folder]) == folder / "linked.pth"
    with pytest.raises(UpscalerNotFound, match="'linked' is not one of the installed upscalers"):
        resolve_upscaler("linked", [folder], names_only=True)


def test_a_controlnet_linked_from_outside_is_not_installed_for_the_network(tmp_path: Path) -> None:
    folder = tmp_path / "controlnet"
    folder.mkdir()
    (tmp_path / "net.safetensors").write_bytes(b"junk")
    (folder / "net.safetensors").symlink_to(tmp_path / "net.safetensors")
    with pytest.raises(ControlNetNotFound, match="'net' cannot be used"):
        find_controlnet("net", [folder])  # the local user's link: its own reason
    with pytest.raises(ControlNetNotFound) as refused:
        find_controlnet("net", [folder], names_only=True)
    assert str(refused.value) == "ControlNet 'net' is not one of the installed ControlNets"
    assert str(tmp_path) not in str(refused.value)

"""Flux.1 Redux as ComfyUI's files: `style_models/flux1-redux-dev.safetensors` (the Redux
projection, diffusers' `redux_up`/`redux_down` names) beside its SigLIP vision encoder in
`clip_vision/sigclip_vision_patch14_384.safetensors` (transformers' `vision_model.` keys),
written from the tiny FLUX.1-Redux-dev-shaped folder's weights: a reference through the
files is the folder's reference exactly (max pixel difference 0; test_flux_redux.py holds
the folder to stock `FluxPriorReduxPipeline` + `FluxPipeline`), and a Redux file without a
SigLIP that fits is refused at submit in one sentence."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app.engine.generation.device import CPU
from app.engine.generation.files.sources import ModelSearchPath
from app.engine.generation.guidance.redux_models import (
    ReduxNotFound,
    find_redux_model,
    list_redux_models,
)
from app.engine.generation.request_checks import check_runnable
from app.engine.generation.runner import Runner
from app.testing.tiny.flux import write_tiny_flux
from app.testing.tiny.redux import REDUX_FILE as FILE
from app.testing.tiny.redux import SIGLIP_FILE as SIGLIP
from app.testing.tiny.redux import write_tiny_redux, write_tiny_redux_files
from tests.engine.generation.test_flux_redux import REDUX, image_of, ours, redux_params
from tests.engine.generation.tiny_architectures import max_diff, model_info

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A models folder: the tiny Flux.1 dev, the Redux folder in redux/, the same Redux as
    ComfyUI's files in style_models/ and clip_vision/, and the config folder a file loads
    with in configs/ (app/testing/tiny/redux.write_tiny_redux_files)."""
    root = tmp_path_factory.mktemp("redux-files")
    write_tiny_flux(root / "flux-dev", guidance_embeds=True)
    write_tiny_redux(root / "redux" / REDUX)
    write_tiny_redux_files(root)
    return root


def folders(models: Path) -> list[Path]:
    return [models / "redux", models / "style_models"]


def test_the_file_is_found_with_its_siglip(models: Path) -> None:
    found = {info.name: info for info in list_redux_models(folders(models), models / "configs")}
    assert sorted(found) == sorted([REDUX, FILE])
    assert found[FILE].image_encoder == models / "clip_vision" / SIGLIP


def test_a_reference_through_the_files_is_the_folders(models: Path, tmp_path: Path) -> None:
    model = model_info(models / "flux-dev", "m")
    runner = Runner(
        device=CPU, resolve=lambda _name: model, threads=1,
        resolve_redux=lambda name: find_redux_model(
            name, folders(models), config=models / "configs"
        ),
    )  # fmt: skip
    from_files = image_of(ours(runner, redux_params(redux=FILE), tmp_path, "files"))
    from_folder = image_of(ours(runner, redux_params(), tmp_path, "folder"))
    assert max_diff(from_files, from_folder) == 0


def test_a_redux_file_without_its_siglip_is_refused_at_submit(models: Path, tmp_path: Path) -> None:
    shutil.copytree(models / "flux-dev", tmp_path / "flux-dev")
    shutil.copytree(models / "style_models", tmp_path / "style_models")
    search = ModelSearchPath(user=(tmp_path,))
    sentence = (
        f"Redux model '{FILE}' needs its SigLIP vision encoder beside it: put "
        "sigclip_vision_patch14_384.safetensors (a SigLIP 8 wide) in the models folder's "
        "clip_vision/"
    )
    with pytest.raises(ReduxNotFound) as refused:
        check_runnable(redux_params(model="flux-dev", redux=FILE), search)
    assert str(refused.value) == sentence

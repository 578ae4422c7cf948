"""Model discovery: bundled, user folder, offline Hugging Face cache; no torch at import."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.engine.generation.files.sources import (
    ModelNotFound,
    ModelSearchPath,
    ModelSource,
    default_search_path,
    hf_cache_dirs,
    list_models,
    resolve_model,
)
from app.engine.paths import models_dir

ROOT = Path(__file__).resolve().parents[3]


def make_pipeline_folder(path: Path, class_name: str = "StableDiffusionPipeline") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "model_index.json").write_text(json.dumps({"_class_name": class_name}))
    return path


def make_hf_repo(cache: Path, repo_id: str, revisions: dict[str, bool], main: str | None) -> None:
    """`revisions` maps a snapshot hash to whether it holds a pipeline (model_index.json)."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    for revision, is_pipeline in revisions.items():
        snapshot = repo / "snapshots" / revision
        snapshot.mkdir(parents=True)
        if is_pipeline:
            make_pipeline_folder(snapshot)
        else:
            (snapshot / "config.json").write_text("{}")
    if main:
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text(main + "\n")


@pytest.fixture
def search(tmp_path: Path) -> ModelSearchPath:
    bundled, user, cache = tmp_path / "bundled", tmp_path / "user", tmp_path / "hub"
    make_pipeline_folder(bundled / "easel-tiny")
    make_pipeline_folder(user / "my-model", "StableDiffusionPipeline")
    make_pipeline_folder(user / "easel-tiny")  # clashes with the bundled one
    (user / "notes").mkdir()  # not a pipeline
    (user / "stray-file.txt").write_text("x")
    make_hf_repo(cache, "org/sd-model", {"aaa": True, "bbb": True}, main="bbb")
    make_hf_repo(cache, "org/text-only", {"ccc": False}, main="ccc")
    make_hf_repo(cache, "solo", {"ddd": True}, main=None)
    (cache / ".locks").mkdir()
    return ModelSearchPath(bundled=(bundled,), user=(user,), hf_caches=(cache, tmp_path / "nope"))


def test_lists_bundled_user_and_cached_pipelines(search: ModelSearchPath, tmp_path: Path) -> None:
    models = {m.name: m for m in list_models(search)}
    assert list(models) == ["easel-tiny", "my-model", "org/sd-model", "solo"]
    assert models["easel-tiny"].source is ModelSource.BUNDLED  # bundled wins a name clash
    assert models["easel-tiny"].path == tmp_path / "bundled" / "easel-tiny"
    assert models["my-model"].source is ModelSource.USER
    assert models["my-model"].pipeline_class == "StableDiffusionPipeline"
    assert models["org/sd-model"].source is ModelSource.HF_CACHE
    assert models["org/sd-model"].path == tmp_path / "hub/models--org--sd-model/snapshots/bbb"
    assert models["solo"].path.name == "ddd"


def test_resolve_finds_each_kind(search: ModelSearchPath) -> None:
    assert resolve_model("my-model", search).source is ModelSource.USER
    assert resolve_model("org/sd-model", search).path.name == "bbb"
    assert resolve_model("easel-tiny", search).source is ModelSource.BUNDLED


def test_resolve_accepts_a_pipeline_folder_path(search: ModelSearchPath, tmp_path: Path) -> None:
    folder = make_pipeline_folder(tmp_path / "elsewhere" / "custom")
    assert resolve_model(str(folder), search).path == folder


def test_unknown_model_names_the_model_and_the_places_searched(
    search: ModelSearchPath, tmp_path: Path
) -> None:
    with pytest.raises(ModelNotFound) as caught:
        resolve_model("org/missing", search)
    message = str(caught.value)
    assert "'org/missing'" in message
    assert str(tmp_path / "user") in message and str(tmp_path / "hub") in message
    assert caught.value.name == "org/missing"


def test_no_folders_at_all_is_an_empty_list(tmp_path: Path) -> None:
    assert list_models(ModelSearchPath(user=(tmp_path / "missing",))) == []


def test_hf_cache_dirs_follow_the_hub_environment_variables(tmp_path: Path) -> None:
    env = {"HF_HUB_CACHE": str(tmp_path / "a"), "HF_HOME": str(tmp_path / "b")}
    dirs = hf_cache_dirs(env)
    assert dirs[:2] == (tmp_path / "a", tmp_path / "b" / "hub")
    assert dirs[-1] == Path.home() / ".cache" / "huggingface" / "hub"
    assert hf_cache_dirs({})[0] == Path.home() / ".cache" / "huggingface" / "hub"


def test_default_search_uses_the_app_folders_and_the_hub_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    make_hf_repo(tmp_path / "hub", "org/cached", {"eee": True}, main="eee")
    make_pipeline_folder(models_dir() / "mine")  # models_dir() is under the test's EASEL_HOME
    search = default_search_path()
    assert search.user == (models_dir(),)
    assert search.hf_caches[0] == tmp_path / "hub"
    names = {m.name: m.source for m in list_models()}
    assert names["mine"] is ModelSource.USER
    assert names["org/cached"] is ModelSource.HF_CACHE


def test_importing_the_package_does_not_import_torch() -> None:
    code = (
        "import sys, app.engine.generation, app.engine.generation.files.sources, "
        "app.engine.outputs.image, app.engine.generation.device, app.engine.generation.outcome; "
        "app.engine.generation.list_models(); "
        "sys.exit('torch' in sys.modules)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, timeout=60)
    assert result.returncode == 0, "importing app.engine.generation pulled in torch"

"""Every family the registry finds is whole: each piece declared, each name it gives real.

A family is its package under app/engine/generation/families/ (files/registry.py); these
checks are what stands between a half-written declaration and a FAILED job, so each is
shown to fail on a declaration with the piece taken out.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import pickle
import subprocess
import sys
from pathlib import Path

import diffusers
import pytest

from app.engine.generation.families import family_label
from app.engine.generation.files.registry import (
    Architecture,
    FamilySpec,
    families,
    families_easel_runs,
)
from app.engine.generation.load.pipelines import bundled_configs
from app.engine.generation.loop.schedulers import SCHEDULER_CLASSES
from app.testing.tiny.unet import UNET_ARCHITECTURES

ROOT = Path(__file__).resolve().parents[3]


def problems(spec: FamilySpec) -> list[str]:
    """What is missing or wrong in `spec` ([] for a whole family)."""
    found = []
    for name in ("label", "pipeline", "driven_pipelines", "driver", "checkpoint_family"):
        if not getattr(spec, name):
            found.append(f"no {name}")
    if spec.native_size <= 0:
        found.append("no native size")
    if not spec.folder.pipelines or not spec.folder.parts:
        found.append("no folder recognition (pipelines, parts)")
    for name in (spec.pipeline, *spec.driven_pipelines):
        if not hasattr(diffusers, name):
            found.append(f"diffusers has no {name}")
    if spec.pipeline not in spec.driven_pipelines:
        found.append(f"its driver does not drive its own {spec.pipeline}")
    found += _driver_problems(spec)
    if not _tiny_builder(spec).is_file():
        found.append(f"no tiny builder {_tiny_builder(spec).relative_to(ROOT)} for its tests")
    elif not spec.transformer and spec.architecture not in UNET_ARCHITECTURES:
        found.append("app/testing/tiny/unet.py builds no tiny pipeline of it")
    found += _file_problems(spec)
    if spec.preview and not _resolves(spec.preview):
        found.append(f"its previewer {spec.preview!r} cannot be imported")
    unknown = [s for s in spec.requests.samplers if s not in SCHEDULER_CLASSES]
    if unknown:
        found.append(f"samplers Easel does not have: {unknown}")
    if not spec.requests.img2img and not spec.requests.img2img_refusal:
        found.append("no img2img, and no sentence saying so")
    return found


def _resolves(dotted: str) -> bool:
    module, _, name = dotted.partition(":")
    try:
        return hasattr(importlib.import_module(module), name)
    except ImportError:
        return False


def _tiny_builder(spec: FamilySpec) -> Path:
    """The family's tiny random pipeline for the tests: app/testing/tiny/<package>.py (the
    UNet families share unet.py)."""
    package = spec.driver.split(":")[0].split(".")[-2]
    return ROOT / "app" / "testing" / "tiny" / f"{'unet' if not spec.transformer else package}.py"


def _driver_problems(spec: FamilySpec) -> list[str]:
    try:
        driver = spec.driver_class()
    except (ImportError, AttributeError, ValueError) as error:
        return [f"driver {spec.driver!r} cannot be imported ({error})"]
    found = []
    if driver.name != spec.checkpoint_family:
        found.append(f"its checkpoints say {driver.name!r}, it declares {spec.checkpoint_family!r}")
    if driver.label != spec.checkpoint_label:
        found.append(f"its driver is called {driver.label!r}, not {spec.checkpoint_label!r}")
    if not driver.checkpoint_tensors:
        found.append("its checkpoints carry no tensors")
    return found


def _file_problems(spec: FamilySpec) -> list[str]:
    """A UNet family loads one-file checkpoints with a shipped config; a transformer family's
    files (if it has them) are read, paired and assembled by what it declares."""
    configs = bundled_configs().root
    if not spec.transformer:
        file = spec.checkpoint_file
        if file is None or not file.markers or not file.parts:
            return ["a UNet family without its one-file checkpoint (markers, parts)"]
        folders = [name for name in (file.config_folder, file.config_folder_v) if name]
        return [f"no shipped config {name}" for name in folders if not (configs / name).is_dir()]
    tfile = spec.transformer_file
    if tfile is None:
        return []  # folders only (Z-Image, Flux.2 Klein)
    found = []
    if not tfile.markers or not tfile.split_parts or not tfile.components:
        found.append("a transformer file without markers, split parts or components")
    if not hasattr(diffusers, tfile.transformer_class):
        found.append(f"diffusers has no {tfile.transformer_class}")
    if tfile.to_diffusers_keys and not _resolves(tfile.to_diffusers_keys):
        found.append(f"its key converter {tfile.to_diffusers_keys!r} cannot be imported")
    return found


def unmatched(ids: list[Architecture], specs: tuple[FamilySpec, ...]) -> list[str]:
    """Each id a package declares without exactly one `FamilySpec` of it."""
    counts = {a: sum(spec.architecture is a for spec in specs) for a in ids}
    return [f"{a.value}: {n} declarations" for a, n in counts.items() if n != 1]


def test_every_architecture_has_exactly_one_declaration() -> None:
    assert unmatched(list(Architecture), families()) == []
    assert [spec.architecture for spec in families()] == list(Architecture)
    # An id whose package holds no FamilySpec for it, or two, is found.
    assert unmatched(list(Architecture), families()[1:]) == [f"{families()[0].id}: 0 declarations"]
    assert unmatched(list(Architecture), (*families(), families()[0]))


def test_an_architecture_is_asked_as_an_enum_member_would_be() -> None:
    """Declared by its package, it is looked up by id or name, one instance each (so `is`
    holds after a pickle: a worker's message), and written as its id (what is stored)."""
    sdxl = Architecture("sdxl")
    assert sdxl is Architecture.SDXL and sdxl in Architecture
    assert (sdxl.value, sdxl.name, str(sdxl), repr(sdxl)) == (
        "sdxl",
        "SDXL",
        "sdxl",
        "Architecture.SDXL",
    )
    assert pickle.loads(pickle.dumps(sdxl)) is sdxl and copy.deepcopy(sdxl) is sdxl
    assert sdxl.spec.label == sdxl.label == "SDXL" and not sdxl.is_transformer
    with pytest.raises(ValueError, match="'sdxl' is taken"):
        Architecture.declare("sdxl", released="2023-07")
    with pytest.raises(ValueError, match="'nope' is not a model family Easel runs"):
        Architecture("nope")
    with pytest.raises(AttributeError, match=r"no family package declares Architecture\.NOPE"):
        _ = Architecture.NOPE
    # Listed in the order the families came out, as messages name them.
    releases = [a.released for a in Architecture]
    assert releases == sorted(releases) and all(releases)


def test_a_folder_class_two_families_claim_is_told_apart_by_each() -> None:
    """SD 1.x and 2.x share StableDiffusionPipeline: each says which folders are its own."""
    claimed: dict[str, list[FamilySpec]] = {}
    for spec in families():
        for pipeline in spec.folder.pipelines:
            claimed.setdefault(pipeline, []).append(spec)
    shared = {name: specs for name, specs in claimed.items() if len(specs) > 1}
    assert shared, "no shared class: this test checks nothing"
    for name, specs in shared.items():
        assert all(spec.folder.claims is not None for spec in specs), name


@pytest.mark.parametrize("spec", families(), ids=lambda spec: spec.id)
def test_every_family_is_whole(spec: FamilySpec) -> None:
    assert problems(spec) == []


def test_the_checks_find_each_missing_piece() -> None:
    whole = next(spec for spec in families() if spec.transformer_file is not None)
    assert problems(whole) == []
    broken = {
        "label": dataclasses.replace(whole, label=""),
        "driver": dataclasses.replace(whole, driver="app.engine.generation.families:Nothing"),
        "pipeline": dataclasses.replace(whole, pipeline="NoSuchPipeline"),
        "folder": dataclasses.replace(whole, folder=dataclasses.replace(whole.folder, parts=())),
        "checkpoint": dataclasses.replace(whole, checkpoint_family="another"),
        "previewer": dataclasses.replace(whole, preview="app.engine.generation.preview:Nothing"),
        "samplers": dataclasses.replace(
            whole, requests=dataclasses.replace(whole.requests, samplers=("Nope",))
        ),
    }
    for piece, spec in broken.items():
        assert problems(spec), f"a family without its {piece} passed"
    elsewhere = dataclasses.replace(whole, driver="app.engine.generation.families.nothing.model:X")
    assert not _tiny_builder(elsewhere).is_file()
    unet = families()[0]
    assert problems(dataclasses.replace(unet, checkpoint_file=None))
    assert problems(dataclasses.replace(unet, architecture=whole.architecture))


def test_labels_and_checkpoint_names_come_from_the_declarations() -> None:
    assert families_easel_runs().endswith(f" or {families()[-1].label}")
    assert all(spec.label in families_easel_runs() for spec in families())
    assert family_label("sd") == "SD 1.x/2.x"
    assert family_label("nope") == "unknown ('nope')"


def test_the_registry_finds_the_packages_and_loads_no_torch() -> None:
    """Detection and the window ask the registry: it must not pull in a family's runtime."""
    script = (
        "import sys\n"
        "from app.engine.generation.files.registry import families\n"
        "from app.engine.generation.files.sources import list_models\n"
        "from app.engine.generation import request_checks\n"
        "print(len(families()), 'torch' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60,
        env={"PYTHONPATH": str(ROOT), "PATH": ""},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(len(list(Architecture))), "False"]

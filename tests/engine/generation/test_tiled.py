"""Tiled upscale (Ultimate SD Upscale) on the bundled model: regions of the model's size,
paused at region k and resumed equals uninterrupted, and no visible seam.

The seam bound: across every tile border, the mean step between neighbouring pixel
columns (rows) is at most 6 grey levels of 255 and no larger than the sharpest column
(row) step inside the tiles; without the fade and the seam fix the same image shows steps
of 11-18 levels at its borders, so the bound does tell a seam."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from app.engine.generation.outcome import OutcomeKind, StepDecision, StepProgress
from app.engine.generation.post import tiled
from app.engine.generation.runner import Runner
from app.engine.jobs.params import KIND_TILED, GenerationParams
from app.engine.jobs.run_inputs import RunInputs

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")
PROMPT = "a red circle on a blue background"
SEAM_BOUND = 6.0
NATIVE = 64  # the bundled model's side


@pytest.fixture(scope="module")
def runner() -> Runner:
    from app.engine.generation.device import CPU

    return Runner(device=CPU, threads=1)


@pytest.fixture(scope="module")
def small(runner: Runner, tmp_path_factory: pytest.TempPathFactory) -> bytes:
    out = tmp_path_factory.mktemp("tiled") / "small.png"
    params = GenerationParams(PROMPT, seed=5, steps=8)
    runner.run(params, output_path=out, checkpoint_path=out.with_suffix(".ckpt"),
               on_step=lambda _p: StepDecision.CONTINUE)  # fmt: skip
    return out.read_bytes()


JOB = GenerationParams(PROMPT, seed=5, steps=8, width=192, height=192, kind=KIND_TILED,
                       init_image="job:1", strength=0.35)  # fmt: skip


def run(
    runner: Runner, out: Path, small: bytes, decide: Callable[[StepProgress], StepDecision]
) -> OutcomeKind:
    outcome = runner.run(
        JOB, RunInputs(init_image=small), output_path=out, checkpoint_path=out.with_suffix(".ckpt"),
        on_step=decide,
    )  # fmt: skip
    return outcome.kind


def test_the_plan_covers_the_image_with_native_regions() -> None:
    plan = tiled.regions(192, 160, NATIVE)
    tiles = [r for r in plan if r.mask == "tile"]
    assert all(r.box[2] - r.box[0] == r.box[3] - r.box[1] == NATIVE for r in plan)
    covered = np.zeros((160, 192), bool)
    for r in tiles:
        covered[r.box[1] : r.box[3], r.box[0] : r.box[2]] = True
    assert covered.all()
    xs = sorted({r.box[0] for r in tiles})
    assert all(b - a <= NATIVE - NATIVE // 8 for a, b in itertools.pairwise(xs))
    seams = [r.mask for r in plan if r.mask != "tile"]
    assert seams.count("vseam") == (len(xs) - 1) * len({r.box[1] for r in tiles})


def borders(plan: list[tiled.Region], axis: int, length: int) -> set[int]:
    starts = {r.box[axis] for r in plan if r.mask == "tile"}
    return {b - 1 for s in starts for b in (s, s + NATIVE) if 0 < b < length}


def border_steps(path: Path) -> tuple[float, float]:
    """(largest mean step across a tile border, largest inside the tiles), both axes."""
    image = np.asarray(Image.open(path), dtype=np.float32)
    plan = tiled.regions(192, 192, NATIVE)
    worst_border = worst_inside = 0.0
    for axis in (0, 1):  # 0: columns (x), 1: rows (y)
        steps = np.abs(np.diff(image, axis=1 - axis)).mean(axis=(axis, 2))
        edge = borders(plan, axis, 192)
        worst_border = max(worst_border, max(float(steps[i]) for i in edge))
        worst_inside = max(
            worst_inside, max(float(s) for i, s in enumerate(steps) if i not in edge)
        )
    return worst_border, worst_inside


def test_paused_at_region_k_and_resumed_equals_uninterrupted(
    runner: Runner, small: bytes, tmp_path: Path
) -> None:
    whole = tmp_path / "whole.png"
    seen: list[int] = []

    def go(progress: StepProgress) -> StepDecision:
        seen.append(progress.step)
        return StepDecision.CONTINUE

    assert run(runner, whole, small, go) is OutcomeKind.COMPLETED
    total = len(tiled.regions(192, 192, NATIVE))
    assert seen == list(range(1, total + 1))  # each region one step
    paused = tmp_path / "paused.png"
    at = 7  # a tile in the middle row
    stop = lambda p: StepDecision.PAUSE if p.step == at else StepDecision.CONTINUE  # noqa: E731
    assert run(runner, paused, small, stop) is OutcomeKind.PAUSED and not paused.exists()
    seen.clear()
    assert run(runner, paused, small, go) is OutcomeKind.COMPLETED
    assert seen[0] == at + 1  # it went on at the region after the one it paused at
    assert np.array_equal(np.asarray(Image.open(paused)), np.asarray(Image.open(whole)))
    border, inside = border_steps(whole)
    assert border <= SEAM_BOUND and border <= inside, (border, inside)
    assert Image.open(whole).size == (192, 192)


def test_without_the_fade_and_seam_fix_the_bound_shows_the_seams(
    runner: Runner, small: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = tiled.regions
    monkeypatch.setattr(
        tiled, "region_mask", lambda r, size, *_a: np.ones((size, size), np.float32)
    )
    monkeypatch.setattr(
        tiled, "regions", lambda w, h, s: [r for r in plain(w, h, s) if r.mask == "tile"]
    )
    hard = tmp_path / "hard.png"
    assert run(runner, hard, small, lambda _p: StepDecision.CONTINUE) is OutcomeKind.COMPLETED
    border, inside = border_steps(hard)
    assert border > SEAM_BOUND, (border, inside)  # the bound fails: it tells a seam

"""The step-wise runner on a tiny random SD pipeline: exactness, pause/resume, cancel."""

from __future__ import annotations

import io
import itertools
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from app.engine.generation import denoise
from app.engine.generation.device import CPU
from app.engine.generation.errors import CheckpointCorrupt, CheckpointMismatch, is_transient
from app.engine.generation.files.registry import Architecture
from app.engine.generation.files.sources import ModelInfo, ModelNotFound, ModelSource, resolve_model
from app.engine.generation.loop.checkpoint import load_checkpoint
from app.engine.generation.outcome import OutcomeKind, StepDecision, StepProgress
from app.engine.generation.preview import (
    TINY_VAE_MAX_PARAMS,
    LinearPreviewer,
    VaePreviewer,
    previewer_for,
)
from app.engine.generation.runner import Runner
from app.engine.jobs.params import SCHEDULERS, GenerationParams, InvalidParameters
from app.engine.workers.kinds import WORK_OF_KIND, on_the_runner
from tests.easel_png import read_png_params
from tests.engine.conftest import TINY_MODEL

# diffusers' schedulers call np.array on tensors, which numpy 2 flags; not our code to fix.
pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

STEPS = 5
PAUSE_AT = 2


def params_for(scheduler: str = "Euler a", **changes: object) -> GenerationParams:
    base = GenerationParams(
        prompt="the cat",
        negative_prompt="a dog",
        model=TINY_MODEL,
        scheduler=scheduler,
        steps=STEPS,
        cfg=7.0,
        width=64,
        height=64,
        seed=1234,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def go_on(_: StepProgress) -> StepDecision:
    return StepDecision.CONTINUE


def decide_at(step: int, decision: StepDecision) -> Callable[[StepProgress], StepDecision]:
    return lambda p: decision if p.step == step else StepDecision.CONTINUE


def recording(seen: list[StepProgress]) -> Callable[[StepProgress], StepDecision]:
    def record(progress: StepProgress) -> StepDecision:
        seen.append(progress)
        return StepDecision.CONTINUE

    return record


def pixels(path: Path) -> np.ndarray:
    with Image.open(path) as image:
        return np.asarray(image.convert("RGB")).astype(np.int16)


def max_diff(a: Path, b: Path) -> int:
    return int(np.abs(pixels(a) - pixels(b)).max())


def generate_with(
    runner: Runner,
    params: GenerationParams,
    folder: Path,
    on_step: Callable[[StepProgress], StepDecision],
) -> Path:
    out = runner.run(
        params,
        output_path=folder / "image.png",
        checkpoint_path=folder / "image.ckpt",
        on_step=on_step,
    )
    assert out.kind is OutcomeKind.COMPLETED and out.image_path is not None
    return out.image_path


def generate(runner: Runner, params: GenerationParams, folder: Path, name: str) -> Path:
    out = runner.run(
        params,
        output_path=folder / f"{name}.png",
        checkpoint_path=folder / f"{name}.ckpt",
        on_step=go_on,
    )
    assert out.kind is OutcomeKind.COMPLETED and out.image_path is not None
    return out.image_path


def test_same_seed_same_image_and_other_seed_differs(tiny_runner: Runner, tmp_path: Path) -> None:
    first = generate(tiny_runner, params_for(), tmp_path, "a")
    again = generate(tiny_runner, params_for(), tmp_path, "b")
    other = generate(tiny_runner, params_for(seed=99), tmp_path, "c")
    assert max_diff(first, again) == 0
    assert max_diff(first, other) > 0


def stock_scheduler(name: str, config: Any) -> Any:
    """The scheduler a diffusers user picks for A1111's `name`, spelled as they spell it
    (not through Easel's table)."""
    from diffusers import (
        DDIMScheduler,
        DPMSolverMultistepScheduler,
        EulerAncestralDiscreteScheduler,
        EulerDiscreteScheduler,
        UniPCMultistepScheduler,
    )

    return {
        "Euler": lambda: EulerDiscreteScheduler.from_config(config),
        "Euler a": lambda: EulerAncestralDiscreteScheduler.from_config(config),
        "DDIM": lambda: DDIMScheduler.from_config(config),
        "DPM++ 2M": lambda: DPMSolverMultistepScheduler.from_config(config),
        "DPM++ 2M Karras": lambda: DPMSolverMultistepScheduler.from_config(
            config, use_karras_sigmas=True
        ),
        "Euler Karras": lambda: EulerDiscreteScheduler.from_config(config, use_karras_sigmas=True),
        "UniPC": lambda: UniPCMultistepScheduler.from_config(config),
    }[name]()


@pytest.mark.parametrize("scheduler", SCHEDULERS)
@pytest.mark.parametrize("cfg", [7.0, 1.0])
def test_our_loop_matches_the_stock_pipeline(
    tiny_runner: Runner, tmp_path: Path, scheduler: str, cfg: float
) -> None:
    params = params_for(scheduler, cfg=cfg)
    ours = pixels(generate(tiny_runner, params, tmp_path, "ours"))
    pipe = tiny_runner.load(TINY_MODEL).pipe
    original = pipe.scheduler
    pipe.scheduler = stock_scheduler(scheduler, pipe.scheduler.config)
    try:
        stock = pipe(
            params.prompt,
            negative_prompt=params.negative_prompt,
            num_inference_steps=STEPS,
            guidance_scale=cfg,
            width=64,
            height=64,
            generator=torch.Generator().manual_seed(params.seed),
        ).images[0]
    finally:
        pipe.scheduler = original
    assert int(np.abs(ours - np.asarray(stock).astype(np.int16)).max()) == 0


def test_a_karras_kind_is_its_own_noise_schedule(tiny_runner: Runner, tmp_path: Path) -> None:
    """A Karras kind is not its plain kind renamed: its sigmas, and so its image, differ."""
    for karras, plain in (("DPM++ 2M Karras", "DPM++ 2M"), ("Euler Karras", "Euler")):
        made = generate(tiny_runner, params_for(karras), tmp_path, karras)
        assert max_diff(made, generate(tiny_runner, params_for(plain), tmp_path, plain)) > 0


def test_on_step_sees_every_step_with_previews_throttled_across_runs(
    tiny_model: ModelInfo, tmp_path: Path
) -> None:
    runner = Runner(device=CPU, resolve=lambda _name: tiny_model, threads=1, preview_interval_s=60)
    seen: list[StepProgress] = []
    (tmp_path / "a").mkdir()
    generate_with(runner, params_for(), tmp_path / "a", recording(seen))
    assert [p.step for p in seen] == list(range(1, STEPS + 1))
    assert {p.total for p in seen} == {STEPS}
    assert all(a.elapsed_s <= b.elapsed_s for a, b in itertools.pairwise(seen))
    # The first step offers one; then none for a minute, not even in the next run.
    assert [p.preview_png is not None for p in seen] == [True] + [False] * (STEPS - 1)
    again: list[StepProgress] = []
    (tmp_path / "b").mkdir()
    generate_with(runner, params_for(), tmp_path / "b", recording(again))
    assert all(p.preview_png is None for p in again)


def test_a_preview_is_made_only_when_the_step_callback_reads_it(
    tiny_model: ModelInfo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = Runner(device=CPU, resolve=lambda _name: tiny_model, threads=1, preview_interval_s=0)
    params = params_for()
    previewer = runner.load(params.model).previewer
    made: list[int] = []
    real_png = previewer.png

    def counting_png(latents: torch.Tensor, size: tuple[int, int]) -> bytes:
        made.append(1)
        return real_png(latents, size)

    monkeypatch.setattr(previewer, "png", counting_png)
    (tmp_path / "unwatched").mkdir()
    generate_with(runner, params, tmp_path / "unwatched", go_on)
    assert made == []  # every step offered one; nobody looked: no decode, no PNG

    def reading(progress: StepProgress) -> StepDecision:
        assert progress.preview_png is not None and progress.preview_png.startswith(b"\x89PNG")
        return StepDecision.CONTINUE

    (tmp_path / "watched").mkdir()
    generate_with(runner, params, tmp_path / "watched", reading)
    assert len(made) == STEPS


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_previews_show_the_image_to_come(
    tiny_model: ModelInfo, tmp_path: Path, scheduler: str
) -> None:
    runner = Runner(device=CPU, resolve=lambda _name: tiny_model, threads=1, preview_interval_s=0)
    seen: list[StepProgress] = []
    image = generate_with(runner, params_for(scheduler), tmp_path, recording(seen))
    assert all(p.preview_png is not None for p in seen)
    last = seen[-1].preview_png
    assert last is not None
    with Image.open(io.BytesIO(last)) as preview:
        assert preview.size == (64, 64)
        # The last x0 estimate is the final latents: the preview is the image itself.
        assert np.abs(np.asarray(preview.convert("RGB"), np.int16) - pixels(image)).mean() < 2


def test_vae_previews_of_big_images_decode_only_preview_sized_latents(
    tiny_runner: Runner,
) -> None:
    pipe = tiny_runner.load(TINY_MODEL).pipe
    previewer = VaePreviewer(pipe.vae, pipe.vae_scale_factor)
    decoded_shapes: list[tuple[int, ...]] = []
    hook = pipe.vae.decoder.register_forward_hook(
        lambda _module, args, _out: decoded_shapes.append(tuple(args[0].shape))
    )
    try:
        png = previewer.png(torch.randn(1, 4, 128, 64), (512, 1024))
    finally:
        hook.remove()
    assert decoded_shapes == [(1, 4, 16, 8)]  # 128x64 preview / VAE factor 8
    with Image.open(io.BytesIO(png)) as preview:
        assert preview.size == (64, 128)


def test_big_vae_models_get_a_linear_preview() -> None:
    previewer = LinearPreviewer(torch.eye(4, 3))
    png = previewer.png(torch.randn(1, 4, 64, 96), (512, 768))
    with Image.open(io.BytesIO(png)) as preview:
        assert preview.size == (85, 128)


def _big_vae_pipe(channels: int) -> Any:
    """Enough of a pipeline for `previewer_for`: a VAE too big to decode each step."""
    vae = SimpleNamespace(
        parameters=lambda: [torch.empty(TINY_VAE_MAX_PARAMS + 1)],
        config=SimpleNamespace(latent_channels=channels),
    )
    return SimpleNamespace(vae=vae)


def test_a_big_vae_is_previewed_with_the_factors_its_family_declares() -> None:
    for family in (Architecture.SD1, Architecture.SDXL):
        factors = family.spec.preview_factors
        previewer = previewer_for(_big_vae_pipe(4), family.spec.preview, factors)
        assert isinstance(previewer, LinearPreviewer)
        assert torch.equal(previewer._factors, torch.tensor(factors))
    assert Architecture.SD1.spec.preview_factors != Architecture.SDXL.spec.preview_factors
    # A family that declares none (Flux.1's 16 channels) is previewed in grey.
    grey = previewer_for(_big_vae_pipe(16), "", Architecture.FLUX1.spec.preview_factors)
    assert isinstance(grey, LinearPreviewer)
    assert torch.equal(grey._factors, torch.full((16, 3), 1 / 16))


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_pause_then_resume_equals_an_uninterrupted_run(
    tiny_runner: Runner, tmp_path: Path, scheduler: str
) -> None:
    params = params_for(scheduler)
    reference = generate(tiny_runner, params, tmp_path, "reference")
    ckpt, out = tmp_path / "job.ckpt", tmp_path / "job.png"

    paused = tiny_runner.run(
        params,
        output_path=out,
        checkpoint_path=ckpt,
        on_step=decide_at(PAUSE_AT, StepDecision.PAUSE),
    )
    assert paused.kind is OutcomeKind.PAUSED and paused.checkpoint_path == ckpt
    assert ckpt.exists() and not out.exists()

    paused_after = load_checkpoint(ckpt).checkpoint.elapsed_s
    resumed: list[StepProgress] = []
    done = tiny_runner.run(
        params,
        output_path=out,
        checkpoint_path=ckpt,
        on_step=recording(resumed),
    )
    assert done.kind is OutcomeKind.COMPLETED
    assert [p.step for p in resumed] == list(range(PAUSE_AT + 1, STEPS + 1))
    assert resumed[0].elapsed_s >= paused_after > 0  # the ETA counts the time before the pause
    assert not ckpt.exists()
    assert max_diff(reference, out) <= 1


def test_pause_twice_and_at_the_last_step(tiny_runner: Runner, tmp_path: Path) -> None:
    params = params_for("DPM++ 2M")
    reference = generate(tiny_runner, params, tmp_path, "reference")
    ckpt, out = tmp_path / "job.ckpt", tmp_path / "job.png"
    for step in (1, 3, STEPS):
        outcome = tiny_runner.run(
            params,
            output_path=out,
            checkpoint_path=ckpt,
            on_step=decide_at(step, StepDecision.PAUSE),
        )
        assert outcome.kind is OutcomeKind.PAUSED
    assert load_checkpoint(ckpt).checkpoint.steps_done == STEPS
    tiny_runner.run(params, output_path=out, checkpoint_path=ckpt, on_step=go_on)
    assert max_diff(reference, out) <= 1


def _resume_in_child(model: ModelInfo, jobs: list[tuple[GenerationParams, Path, Path]]) -> None:
    runner = Runner(device=CPU, resolve=lambda _name: model, threads=1)
    for params, out, ckpt in jobs:
        runner.run(params, output_path=out, checkpoint_path=ckpt, on_step=go_on)


def test_resume_in_a_fresh_process_equals_an_uninterrupted_run(
    tiny_runner: Runner, tiny_model: ModelInfo, tmp_path: Path, fresh_process: Callable[..., Any]
) -> None:
    jobs = []
    for index, scheduler in enumerate(SCHEDULERS):
        params = params_for(scheduler)
        out, ckpt = tmp_path / f"{index}.png", tmp_path / f"{index}.ckpt"
        tiny_runner.run(
            params,
            output_path=out,
            checkpoint_path=ckpt,
            on_step=decide_at(PAUSE_AT, StepDecision.PAUSE),
        )
        jobs.append((params, out, ckpt))
    fresh_process(_resume_in_child, tiny_model, jobs)
    for index, (params, out, ckpt) in enumerate(jobs):
        reference = generate(tiny_runner, params, tmp_path, f"reference-{index}")
        assert not ckpt.exists()
        assert max_diff(reference, out) <= 1, params.scheduler


def test_cancel_writes_no_image_and_removes_the_checkpoint(
    tiny_runner: Runner, tmp_path: Path
) -> None:
    params, ckpt, out = params_for(), tmp_path / "job.ckpt", tmp_path / "job.png"
    tiny_runner.run(
        params, output_path=out, checkpoint_path=ckpt, on_step=decide_at(1, StepDecision.PAUSE)
    )
    assert ckpt.exists()
    seen: list[int] = []

    def cancel_at_next(p: StepProgress) -> StepDecision:
        seen.append(p.step)
        return StepDecision.CANCEL

    outcome = tiny_runner.run(params, output_path=out, checkpoint_path=ckpt, on_step=cancel_at_next)
    assert outcome.kind is OutcomeKind.CANCELLED
    assert outcome.image_path is None and outcome.checkpoint_path is None
    assert seen == [2]
    assert not out.exists() and not ckpt.exists()
    assert list(tmp_path.iterdir()) == []  # no temp files left behind either


def test_a_checkpoint_for_other_params_is_refused_and_kept(
    tiny_runner: Runner, tmp_path: Path
) -> None:
    ckpt, out = tmp_path / "job.ckpt", tmp_path / "job.png"
    tiny_runner.run(
        params_for(),
        output_path=out,
        checkpoint_path=ckpt,
        on_step=decide_at(1, StepDecision.PAUSE),
    )
    with pytest.raises(CheckpointMismatch, match="seed: 1234 in the checkpoint, 7 requested"):
        tiny_runner.run(params_for(seed=7), output_path=out, checkpoint_path=ckpt, on_step=go_on)
    assert ckpt.exists() and not out.exists()


@pytest.mark.parametrize("damage", ["garbage", "truncated", "not-ours"])
def test_a_corrupt_checkpoint_is_a_clear_error(
    tiny_runner: Runner, tmp_path: Path, damage: str
) -> None:
    ckpt, out = tmp_path / "job.ckpt", tmp_path / "job.png"
    tiny_runner.run(
        params_for(),
        output_path=out,
        checkpoint_path=ckpt,
        on_step=decide_at(1, StepDecision.PAUSE),
    )
    data = ckpt.read_bytes()
    if damage == "garbage":
        ckpt.write_bytes(b"\x00not a checkpoint" * 10)
    elif damage == "truncated":
        ckpt.write_bytes(data[: len(data) // 2])
    else:
        torch.save({"latents": torch.zeros(1)}, ckpt)
    with pytest.raises(CheckpointCorrupt, match=str(ckpt)):
        tiny_runner.run(params_for(), output_path=out, checkpoint_path=ckpt, on_step=go_on)
    assert not out.exists()


def test_png_carries_its_parameters(tiny_runner: Runner, tmp_path: Path) -> None:
    params = params_for("Euler a", cfg=7.0, seed=1, steps=3)
    path = generate(tiny_runner, params, tmp_path, "a")
    with Image.open(path) as image:
        text = image.info
    assert text["parameters"] == (
        "the cat\nNegative prompt: a dog\n"
        f"Steps: 3, Sampler: Euler a, CFG scale: 7, Seed: 1, Size: 64x64, Model: {TINY_MODEL}"
    )
    assert json.loads(text["easel"]) == params.to_dict()
    assert read_png_params(path) == params


def test_second_order_scheduler_counts_scheduler_steps_and_resumes(
    tiny_runner: Runner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Heun calls the UNet twice per step; progress and pauses must follow scheduler steps.
    from diffusers import HeunDiscreteScheduler

    monkeypatch.setitem(denoise.SCHEDULER_CLASSES, "Euler", HeunDiscreteScheduler)
    params = params_for("Euler", steps=4)
    seen: list[StepProgress] = []
    reference = tiny_runner.run(
        params,
        output_path=tmp_path / "ref.png",
        checkpoint_path=tmp_path / "ref.ckpt",
        on_step=recording(seen),
    )
    assert [p.step for p in seen] == [1, 2, 3, 4]
    ckpt, out = tmp_path / "job.ckpt", tmp_path / "job.png"
    tiny_runner.run(
        params, output_path=out, checkpoint_path=ckpt, on_step=decide_at(2, StepDecision.PAUSE)
    )
    tiny_runner.run(params, output_path=out, checkpoint_path=ckpt, on_step=go_on)
    assert reference.image_path is not None
    assert max_diff(reference.image_path, out) <= 1


def test_the_loaded_pipeline_is_reused(tiny_runner: Runner) -> None:
    assert tiny_runner.load(TINY_MODEL) is tiny_runner.load(TINY_MODEL)


def test_bad_requests_fail_before_any_work(tiny_runner: Runner, tmp_path: Path) -> None:
    with pytest.raises(InvalidParameters, match="seed"):
        tiny_runner.run(
            params_for(seed=-1),
            output_path=tmp_path / "a.png",
            checkpoint_path=tmp_path / "a.ckpt",
            on_step=go_on,
        )
    with pytest.raises(ModelNotFound, match="no-such-model"):
        tiny_runner.run(
            params_for(model="no-such-model"),
            output_path=tmp_path / "a.png",
            checkpoint_path=tmp_path / "a.ckpt",
            on_step=go_on,
        )


def test_cuda_out_of_memory_is_transient() -> None:
    assert is_transient(torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate"))


BUNDLED = Path(__file__).resolve().parents[3] / "resources" / "models" / "easel-tiny"


@pytest.mark.slow
@pytest.mark.skipif(
    not (BUNDLED / "model_index.json").exists(), reason="bundled model not trained yet"
)
def test_bundled_model_end_to_end(tmp_path: Path) -> None:
    model = resolve_model("easel-tiny")
    assert model.path == BUNDLED and model.source is ModelSource.BUNDLED
    runner = Runner(device=CPU, threads=1)
    for scheduler in SCHEDULERS:
        params = GenerationParams(
            prompt="a red circle on a blue background", scheduler=scheduler, steps=6, seed=5
        )
        reference = generate(runner, params, tmp_path, "reference")
        assert max_diff(reference, generate(runner, params, tmp_path, "again")) == 0
        ckpt, out = tmp_path / "job.ckpt", tmp_path / "job.png"
        runner.run(
            params, output_path=out, checkpoint_path=ckpt, on_step=decide_at(3, StepDecision.PAUSE)
        )
        runner.run(params, output_path=out, checkpoint_path=ckpt, on_step=go_on)
        assert max_diff(reference, out) <= 1, scheduler
        assert pixels(out).std() > 1, scheduler  # not a blank image


def test_the_runner_does_the_work_the_kinds_table_hands_it_and_no_other(
    tiny_runner: Runner, tmp_path: Path
) -> None:
    """`workers.kinds.WORK_OF_KIND` sends some kinds to the runner: it has work for each of
    them, and refuses the others (a grid is composed by its worker)."""
    for kind, work in WORK_OF_KIND.items():
        if work is on_the_runner:
            assert callable(tiny_runner._work_of(kind))
            continue
        with pytest.raises(InvalidParameters, match=f"a '{kind}' job is its worker's to run"):
            tiny_runner.run(
                replace(params_for(), kind=kind), output_path=tmp_path / "x.png",
                checkpoint_path=tmp_path / "x.ckpt", on_step=go_on,
            )  # fmt: skip
    assert not (tmp_path / "x.png").exists()

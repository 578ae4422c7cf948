"""A clip's needs, estimated before it starts: the checkpoint's size from the latent shape
(bounding what a real checkpoint of the tiny Wan takes), and a data folder too small for
two of them refused at submit by every door in one sentence, nothing stored."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from app.engine.generation import denoise, video_budget
from app.engine.generation import runner as runner_module
from app.engine.generation.errors import ClipDoesNotFit
from app.engine.generation.outcome import OutcomeKind, StepDecision, StepProgress
from app.engine.generation.runner import LOW_VRAM_NOTE
from app.engine.generation.video_budget import (
    CHECKPOINT_OVERHEAD_BYTES,
    DISK_MARGIN_BYTES,
    WAN21_RELEASED,
    ClipMemory,
    check_checkpoint_room,
    checkpoint_bytes,
    clip_memory,
    clip_shape,
    video_config,
)
from app.engine.jobs.params import KIND_VIDEO, GenerationParams
from app.errors import BadInput
from tests.engine.generation.test_wan import Written, max_frame_diff
from tests.engine.generation.tiny_architectures import go_on, model_info, runner_for

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

CLIP = {"prompt": "a cat", "model": "wan", "width": 32, "height": 32, "frames": 9}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from app.testing.tiny.wan import write_tiny_wan

    return write_tiny_wan(tmp_path_factory.mktemp("wan-models") / "wan")


def clip(**changes: object) -> GenerationParams:
    return GenerationParams(**{**CLIP, "kind": KIND_VIDEO, "seed": 1234, **changes})  # type: ignore[arg-type]


def test_a_480p_wan_clip_is_shaped_and_sized_from_its_latent_shape() -> None:
    shape = clip_shape(WAN21_RELEASED, frames=81, width=832, height=480)
    assert shape.latents == (1, 16, 21, 60, 104) and shape.text_states == (1, 512, 4096)
    # Four float32 latent copies (UniPC) and two float32 UMT5-XXL states.
    tensors = (16 * 21 * 60 * 104 * 4 + 512 * 4096 * 2) * 4
    assert checkpoint_bytes(shape) == tensors + CHECKPOINT_OVERHEAD_BYTES


def test_the_estimate_reads_the_folder_s_configs_and_bounds_a_real_checkpoint(
    folder: Path, tmp_path: Path
) -> None:
    """A real UniPC checkpoint of the tiny model after two steps (its history full)."""
    from app.engine.generation.loop.checkpoint import save_checkpoint

    config = video_config(folder)
    encoder = json.loads((folder / "text_encoder" / "config.json").read_text())
    assert (config.latent_channels, config.frames_per_latent, config.text_width) == (
        16, 4, encoder["d_model"],
    )  # fmt: skip
    params = clip(steps=3, scheduler="UniPC", negative_prompt="blurry", cfg=5.0)
    pipe = runner_for(model_info(folder, "wan")).load("wan").pipe
    state = denoise.start(pipe, params)
    for _ in range(2):
        denoise.advance(pipe, state)
    path = tmp_path / "clip.ckpt"
    save_checkpoint(path, denoise.snapshot(state, params, elapsed_s=1.0))
    estimate = checkpoint_bytes(clip_shape(config, params.frames, params.width, params.height))
    assert 0.5 * estimate < path.stat().st_size <= estimate


def test_a_disk_too_small_for_two_checkpoints_is_one_sentence(folder: Path) -> None:
    size = checkpoint_bytes(clip_shape(WAN21_RELEASED, 81, 832, 480))
    needed = 2 * size + DISK_MARGIN_BYTES
    released = clip(frames=81, width=832, height=480)
    check_checkpoint_room(released, folder / "missing", free_bytes=lambda: needed)
    with pytest.raises(BadInput) as refused:
        check_checkpoint_room(released, folder / "missing", free_bytes=lambda: needed - 1)
    assert str(refused.value) == (
        "this clip's progress needs about 357 MB free on disk (two checkpoints of 50 MB and "
        "256 MB to spare) and the data folder has 357 MB; free some space, or ask for fewer "
        "frames or a smaller size"
    )


@pytest.fixture
def full_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(video_budget, "checkpoints_free_bytes", lambda: 100 * video_budget.MB)


def test_the_command_line_and_the_native_api_refuse_a_clip_the_disk_cannot_hold(
    folder: Path, easel_home: Path, full_disk: None, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.cli import main
    from app.engine.jobs.queue import JobQueue
    from app.engine.store.opening import open_queue
    from tests.server.test_server_api import running

    shutil.copytree(folder, easel_home / "models" / "wan")
    sentence = (
        "this clip's progress needs about 256 MB free on disk (two checkpoints of 0.2 MB and "
        "256 MB to spare) and the data folder has 100 MB; free some space, or ask for fewer "
        "frames or a smaller size"
    )
    for command in ("submit", "generate"):
        argv = [command, "a cat", "--size", "32x32", "--model", "wan", "--video", "--frames", "9"]
        assert main(argv) == 2
        assert capsys.readouterr() == ("", f"error: {sentence}\n")
    queue: JobQueue = open_queue(easel_home / "easel.db")
    with running(queue) as api:
        refused = api.client.post("/api/v1/jobs", json=CLIP)
    assert refused.status_code == 422, refused.text
    assert refused.json() == {"error": f"{sentence}."}
    assert queue.jobs() == []


# --- memory ------------------------------------------------------------------------------

BIG, BIG_FRAMES, BIG_STEPS = 288, 1, 2  # past diffusers' 256-pixel VAE tiles, where they pay


def big_clip(**changes: object) -> GenerationParams:
    return clip(width=BIG, height=BIG, frames=BIG_FRAMES, steps=BIG_STEPS, cfg=5.0, **changes)


def needs_of(folder: Path, params: GenerationParams) -> ClipMemory:
    return clip_memory(folder, params, transformer_bytes=4, vae_bytes=4)  # float32 on a CPU


def test_a_480p_clip_s_memory_is_estimated_and_tiles_bound_its_decode(tmp_path: Path) -> None:
    """The released 14B's configs (a folder without them counts as released)."""
    needs = clip_memory(
        tmp_path, clip(frames=81, width=832, height=480), transformer_bytes=2, vae_bytes=2
    )
    tokens = 21 * 30 * 52  # latent frames x (1, 2, 2) patches
    assert needs.denoise_bytes == tokens * (13824 + 4 * 5120) * 2  # 2.2 GB
    assert needs.tiled_decode_bytes < needs.decode_bytes
    assert needs.needed(tiled=False) == max(needs.denoise_bytes, needs.decode_bytes)
    longer = clip_memory(
        tmp_path, clip(frames=161, width=1280, height=720), transformer_bytes=2, vae_bytes=2
    )
    assert longer.decode_bytes > needs.decode_bytes and longer.denoise_bytes > needs.denoise_bytes


@pytest.fixture
def written(monkeypatch: pytest.MonkeyPatch) -> Written:
    return Written(monkeypatch)


@pytest.fixture(scope="module")
def stock_tiled_frames(folder: Path, tmp_path_factory: pytest.TempPathFactory) -> list[np.ndarray]:
    """The stock pipeline with `pipe.vae.enable_tiling()`, called with its defaults."""
    from diffusers import WanPipeline

    pipe = WanPipeline.from_pretrained(folder, local_files_only=True)
    pipe.set_progress_bar_config(disable=True)
    pipe.vae.enable_tiling()
    torch.set_num_threads(1)  # as the runner runs (its `threads`): the same sums' order
    params = big_clip()
    frames = pipe(
        prompt=params.prompt, height=params.height, width=params.width,
        num_frames=params.frames, num_inference_steps=params.steps,
        guidance_scale=params.cfg, generator=torch.Generator().manual_seed(params.seed),
        output_type="pil",
    ).frames[0]  # fmt: skip
    return [np.asarray(frame, dtype=np.int16) for frame in frames]


def test_a_clip_whose_whole_decode_would_not_fit_decodes_in_tiles_as_stock_does(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    stock_tiled_frames: list[np.ndarray], written: Written,
) -> None:  # fmt: skip
    params = big_clip()
    needs = needs_of(folder, params)
    between = (needs.needed(tiled=True) + needs.needed(tiled=False)) // 2
    assert needs.needed(tiled=True) < between < needs.needed(tiled=False)
    monkeypatch.setattr(runner_module, "available_memory", lambda: between)
    runner = runner_for(model_info(folder, "wan"))
    out = runner.run(
        params, output_path=tmp_path / "c.mp4", checkpoint_path=tmp_path / "c.ckpt", on_step=go_on
    )
    assert out.kind is OutcomeKind.COMPLETED and runner.load("wan").pipe.vae.use_tiling
    assert max_frame_diff(written.frames[tmp_path / "c.mp4"], stock_tiled_frames) == 0


def test_a_clip_that_does_not_fit_even_in_tiles_is_refused_before_its_first_step(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner_module, "available_memory", lambda: 10**6)
    steps: list[int] = []

    def counted(progress: StepProgress) -> StepDecision:
        steps.append(progress.step)
        return StepDecision.CONTINUE

    runner = runner_for(model_info(folder, "wan"))
    with pytest.raises(ClipDoesNotFit) as refused:
        runner.run(
            big_clip(), output_path=tmp_path / "c.mp4", checkpoint_path=tmp_path / "c.ckpt",
            on_step=counted,
        )  # fmt: skip
    needs = needs_of(folder, big_clip())
    needed = min(needs.needed(tiled=True), needs.needed(tiled=False))
    assert str(refused.value) == (
        f"this clip needs about {needed / 1e9:.1f} GB of memory beside its model and this "
        "machine has 0.0 GB free; ask for fewer frames or a smaller size"
    )
    assert steps == [] and not (tmp_path / "c.mp4").exists()


def test_a_clip_that_runs_out_of_memory_is_retried_once_in_low_vram_mode(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, written: Written
) -> None:
    """As an image is (test_memory): the same frames, and the note says so."""
    params = clip(steps=2, cfg=5.0)
    runner = runner_for(model_info(folder, "wan"))
    reference = tmp_path / "reference.mp4"
    runner.run(params, output_path=reference, checkpoint_path=tmp_path / "r.ckpt", on_step=go_on)
    real_advance = denoise.advance
    failures: list[object] = []

    def out_of_memory_once(pipe: Any, state: Any) -> bool:
        if not failures:
            failures.append(pipe)
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 9.00 GiB")
        return real_advance(pipe, state)

    monkeypatch.setattr(denoise, "advance", out_of_memory_once)
    out = runner.run(
        params, output_path=tmp_path / "c.mp4", checkpoint_path=tmp_path / "c.ckpt", on_step=go_on
    )
    assert out.kind is OutcomeKind.COMPLETED and out.note == LOW_VRAM_NOTE
    assert runner.device.low_vram and len(failures) == 1
    assert max_frame_diff(written.frames[tmp_path / "c.mp4"], written.frames[reference]) == 0

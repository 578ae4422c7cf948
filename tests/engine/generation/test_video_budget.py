"""A clip's needs, estimated before it starts: the checkpoint's size from the latent shape
(bounding what a real checkpoint of the tiny Wan takes), and a data folder too small for
two of them refused at submit by every door in one sentence, nothing stored."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from app.engine.generation import video_budget
from app.engine.generation.video_budget import (
    CHECKPOINT_OVERHEAD_BYTES,
    DISK_MARGIN_BYTES,
    WAN21_RELEASED,
    check_checkpoint_room,
    checkpoint_bytes,
    clip_shape,
    video_config,
)
from app.engine.jobs.params import KIND_VIDEO, GenerationParams
from app.errors import BadInput

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

CLIP = {"prompt": "a cat", "model": "wan", "width": 32, "height": 32, "frames": 9}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from app.testing.tiny.wan import write_tiny_wan

    return write_tiny_wan(tmp_path_factory.mktemp("wan-models") / "wan")


def clip(**changes: object) -> GenerationParams:
    return GenerationParams(**{**CLIP, "kind": KIND_VIDEO, **changes})  # type: ignore[arg-type]


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
    from app.engine.generation import denoise
    from app.engine.generation.loop.checkpoint import save_checkpoint
    from tests.engine.generation.tiny_architectures import model_info, runner_for

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

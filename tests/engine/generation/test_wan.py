"""Wan 2.1 text to video through Easel's own loop: the stock WanPipeline's clip, exactly.

On a tiny random Wan 2.1 (tiny.wan: a one-block 3D DiT, the Wan VAE, a UMT5 encoder with
an offline tokenizer) saved as a diffusers folder: every frame equal to `WanPipeline`
called with its defaults (size, frames and steps aside), a pause and a crash after a
rolling checkpoint resumed by a fresh runner to the same frames, the MP4 and its
first-frame PNG, and what it cannot run refused at submit in one sentence.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from app.engine.generation import runner as runner_module
from app.engine.generation.files.architecture import Architecture, Prediction
from app.engine.generation.files.sources import ModelInfo, ModelSearchPath
from app.engine.generation.outcome import OutcomeKind
from app.engine.generation.request_checks import check_runnable
from app.engine.generation.runner import Runner
from app.engine.jobs.params import KIND_VIDEO, GenerationParams, InvalidParameters
from app.engine.outputs.registry import output_of_job
from app.engine.outputs.video import VIDEO, decode_frames, first_frame_path
from app.errors import BadInput
from tests.engine.generation.tiny_architectures import (
    Crash,
    checkpoint_then_crash,
    go_on,
    model_info,
    pause_at,
    runner_for,
)

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

STEPS, PAUSE_AT, FRAMES, SIDE = 3, 2, 9, 32
# Every video family, as refusals list them.
VIDEO_MODELS = (
    "LTX-Video, Wan 2.1, Wan 2.1 I2V, LTX-Video 0.9.5+, Wan 2.1 FLF2V, Wan 2.2 I2V or Wan 2.2 TI2V"
)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from app.testing.tiny.wan import write_tiny_wan

    return write_tiny_wan(tmp_path_factory.mktemp("wan-models") / "wan")


@pytest.fixture(scope="module")
def model(folder: Path) -> ModelInfo:
    return model_info(folder, "wan")


@pytest.fixture(scope="module")
def runner(model: ModelInfo) -> Runner:
    return runner_for(model)


@pytest.fixture(scope="module")
def stock_pipe(folder: Path) -> Any:
    from diffusers import WanPipeline

    pipe = WanPipeline.from_pretrained(folder, local_files_only=True)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def wan_params(**changes: Any) -> GenerationParams:
    base: dict[str, Any] = {
        "prompt": "a cat walking", "model": "wan", "steps": STEPS, "cfg": 5.0,
        "width": SIDE, "height": SIDE, "seed": 1234, "kind": KIND_VIDEO, "frames": FRAMES,
    }  # fmt: skip
    return GenerationParams(**{**base, **changes})


def stock(pipe: Any, params: GenerationParams) -> list[np.ndarray]:
    """As its model card calls it (its defaults otherwise: the negative prompt None, the
    512-token prompt), as pictures (`output_type="pil"`: the default's floats, rounded)."""
    frames = pipe(
        prompt=params.prompt,
        negative_prompt=params.negative_prompt or None,
        height=params.height,
        width=params.width,
        num_frames=params.frames,
        num_inference_steps=params.steps,
        guidance_scale=params.cfg,
        generator=torch.Generator().manual_seed(params.seed),
        output_type="pil",
    ).frames[0]
    return [np.asarray(frame, dtype=np.int16) for frame in frames]


class Written:
    """The frames the runner hands the video kind's writer (which still writes the MP4)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.frames: dict[Path, list[np.ndarray]] = {}

        def write(frames: list[Image.Image], path: Path, params: GenerationParams) -> None:
            self.frames[path] = [np.asarray(frame, dtype=np.int16) for frame in frames]
            VIDEO.write(frames, path, params)

        kind = replace(VIDEO, write=write)
        monkeypatch.setattr(runner_module, "output_of_job", lambda _kind: kind)


@pytest.fixture
def written(monkeypatch: pytest.MonkeyPatch) -> Written:
    return Written(monkeypatch)


def clip(runner: Runner, params: GenerationParams, folder: Path, name: str, **kwargs: Any) -> Any:
    on_step = kwargs.pop("on_step", go_on)
    return runner.run(
        params,
        output_path=folder / f"{name}.mp4",
        checkpoint_path=folder / f"{name}.ckpt",
        on_step=on_step,
    )


def max_frame_diff(ours: list[np.ndarray], theirs: list[np.ndarray]) -> int:
    assert len(ours) == len(theirs)
    return max(int(np.abs(a - b).max()) for a, b in zip(ours, theirs, strict=True))


def test_a_tiny_wan_folder_is_detected_as_wan_with_flow_prediction(
    model: ModelInfo, folder: Path
) -> None:
    from app.engine.settings import Settings
    from app.ui.wiring import model_choices

    assert model.architecture is Architecture.WAN2_1 and model.prediction is Prediction.FLOW
    assert output_of_job(KIND_VIDEO) is VIDEO and VIDEO.media_type == "video/mp4"
    choices = model_choices(Settings(models_dir=str(folder.parent)))  # the window's scan
    choice = next(choice for choice in choices if choice.name == folder.name)
    assert (choice.kind, choice.samplers, choice.draws_video) == (
        "Wan 2.1",
        ("UniPC", "Euler"),
        True,
    )
    assert (choice.frame_step, choice.default_frames, choice.default_fps) == (4, 81, 16)


def test_every_frame_equals_the_stock_pipeline_and_the_mp4_holds_them(
    runner: Runner, stock_pipe: Any, written: Written, tmp_path: Path
) -> None:
    """With the stock negative prompt (None: "" encoded), with one, and without CFG."""
    cases: list[dict[str, Any]] = [{}, {"negative_prompt": "blurry"}, {"cfg": 1.0, "frames": 5}]
    for index, changes in enumerate(cases):
        params = wan_params(**changes)
        done = clip(runner, params, tmp_path, f"ours-{index}")
        assert done.kind is OutcomeKind.COMPLETED and done.image_path is not None
        ours = written.frames[done.image_path]
        assert max_frame_diff(ours, stock(stock_pipe, params)) == 0, changes
    first = tmp_path / "ours-0.mp4"
    decoded = decode_frames(first)
    assert len(decoded) == FRAMES and decoded[0].size == (SIDE, SIDE)
    with Image.open(first_frame_path(first)) as still:
        assert np.array_equal(np.asarray(still, dtype=np.int16), written.frames[first][0])
        assert "Frames: 9, FPS: 16" in still.info["parameters"]
    assert len(decode_frames(tmp_path / "ours-2.mp4")) == 5


def test_a_pause_and_a_crash_resume_in_a_fresh_runner_to_the_same_frames(
    runner: Runner, model: ModelInfo, written: Written, tmp_path: Path
) -> None:
    """Paused at step 2 of 3, and killed after a rolling checkpoint at step 1: a new runner
    (its own pipeline, loaded anew) finishes each to the uninterrupted clip."""
    params = wan_params(steps=STEPS, negative_prompt="blurry")
    whole = clip(runner, params, tmp_path, "whole")
    paused = clip(runner, params, tmp_path, "paused", on_step=pause_at(PAUSE_AT))
    assert paused.kind is OutcomeKind.PAUSED and (tmp_path / "paused.ckpt").exists()
    with pytest.raises(Crash):
        clip(runner, params, tmp_path, "crashed", on_step=checkpoint_then_crash(1))
    assert (tmp_path / "crashed.ckpt").exists()
    fresh = runner_for(model)
    for name, steps_done in (("paused", PAUSE_AT), ("crashed", 1)):
        resumed = clip(fresh, params, tmp_path, name)
        assert resumed.kind is OutcomeKind.COMPLETED
        assert resumed.resumed_from is not None and resumed.resumed_from.step == steps_done
        assert max_frame_diff(written.frames[tmp_path / f"{name}.mp4"], written.frames[
            tmp_path / "whole.mp4"]) == 0  # fmt: skip
        assert not (tmp_path / f"{name}.ckpt").exists()
    assert whole.kind is OutcomeKind.COMPLETED


def test_what_wan_cannot_draw_is_refused_at_submit_in_one_sentence(folder: Path) -> None:
    search = ModelSearchPath(user=(folder.parent,))
    assert check_runnable(wan_params(), search).architecture is Architecture.WAN2_1
    with pytest.raises(BadInput) as refused:
        check_runnable(wan_params(frames=8), search)
    assert str(refused.value) == "Wan 2.1 draws 4k+1 frames, not 8; the nearest are 5 or 9"
    with pytest.raises(BadInput, match=r"Wan 2\.1 draws sizes in multiples of 16 pixels"):
        check_runnable(wan_params(width=40), search)
    with pytest.raises(BadInput) as refused:
        check_runnable(wan_params(kind="generate", frames=1), search)
    assert str(refused.value) == (
        "Wan 2.1 models draw videos, not images; ask for a video and its frames"
    )


def test_a_video_on_an_image_model_and_bad_frame_settings_are_one_sentence() -> None:
    from app.engine.generation.families.video_params import nearest_frame_counts, video_problems

    assert video_problems(Architecture.SDXL, wan_params()) == [
        f"SDXL models draw images, not videos; choose a video model ({VIDEO_MODELS})"
    ]
    assert nearest_frame_counts(80, 4) == (77, 81) and nearest_frame_counts(1, 4) == (1, 5)
    with pytest.raises(InvalidParameters, match="a video plays at 1 to 60 frames a second"):
        wan_params(fps=0).validated()
    with pytest.raises(InvalidParameters, match="9 frames need a video job"):
        wan_params(kind="generate").validated()


def test_the_command_line_refuses_a_bad_clip_in_one_line_and_stores_nothing(
    folder: Path, easel_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.cli import main

    (easel_home / "models").mkdir(parents=True)
    (easel_home / "models" / "wan").symlink_to(folder)
    asks = {
        ("--model", "wan", "--video", "--frames", "8"):
            "error: Wan 2.1 draws 4k+1 frames, not 8; the nearest are 5 or 9\n",
        ("--video", "--frames", "9"):  # the bundled model draws images
            "error: SD 1.x models draw images, not videos; "
            f"choose a video model ({VIDEO_MODELS})\n",
        ("--model", "wan", "--frames", "9"): "error: --frames and --fps need --video\n",
    }  # fmt: skip
    for argv, sentence in asks.items():
        assert main(["submit", "a cat", "--size", "32x32", *argv]) == 2
        assert capsys.readouterr() == ("", sentence)
    assert (
        main(["submit", "a cat", "--size", "32x32", "--model", "wan", "--video", "--frames", "9"])
        == 0
    )
    job_id = int(capsys.readouterr().out)
    assert main(["jobs", "--all", "--json"]) == 0
    stored = json.loads(capsys.readouterr().out)
    assert [job["id"] for job in stored] == [job_id]
    assert (stored[0]["kind"], stored[0]["frames"], stored[0]["fps"]) == (KIND_VIDEO, 9, 16)


def test_the_native_api_takes_a_clip_and_refuses_a_bad_one_in_one_sentence(
    folder: Path, easel_home: Path
) -> None:
    from app.engine.jobs.queue import JobQueue
    from app.engine.store.opening import open_queue
    from tests.server.test_server_api import running

    shutil.copytree(folder, easel_home / "models" / "wan")  # a name inside the models folder
    queue: JobQueue = open_queue(easel_home / "easel.db")
    body = {"prompt": "a cat", "model": "wan", "width": 32, "height": 32, "frames": 8}
    with running(queue) as api:
        refused = api.client.post("/api/v1/jobs", json=body)
        taken = api.client.post("/api/v1/jobs", json={**body, "frames": 9, "fps": 12})
    assert refused.status_code == 422, refused.text
    assert refused.json() == {"error": "Wan 2.1 draws 4k+1 frames, not 8; the nearest are 5 or 9."}
    assert taken.status_code == 201, taken.text
    [job] = taken.json()["jobs"]
    assert job["video"] == {"frames": 9, "fps": 12} and len(queue.jobs()) == 1


def test_two_experts_switch_at_the_boundary_as_stock_and_across_a_resume(
    tmp_path: Path, written: Written
) -> None:
    """Wan 2.2 A14B's shape (a high- and a low-noise transformer, `boundary_ratio`): the
    clip equals the stock pipeline's, and a pause before the switch resumes on a fresh
    runner to the same frames (the switch is the step's timestep's: nothing to carry)."""
    from diffusers import WanPipeline

    from app.testing.tiny.wan import write_tiny_wan

    folder = write_tiny_wan(tmp_path / "wan22", experts=True)
    model = model_info(folder, "wan")
    params = wan_params(steps=4, frames=5)  # timesteps 1000, 858, 602, 9: the switch at 875
    whole = clip(runner_for(model), params, tmp_path, "whole")
    stock_pipe = WanPipeline.from_pretrained(folder, local_files_only=True)
    stock_pipe.set_progress_bar_config(disable=True)
    assert whole.image_path is not None
    assert max_frame_diff(written.frames[whole.image_path], stock(stock_pipe, params)) == 0
    paused = clip(runner_for(model), params, tmp_path, "paused", on_step=pause_at(1))
    assert paused.kind is OutcomeKind.PAUSED
    resumed = clip(runner_for(model), params, tmp_path, "paused")
    assert resumed.resumed_from is not None and resumed.image_path is not None
    assert max_frame_diff(written.frames[resumed.image_path], written.frames[whole.image_path]) == 0


def test_a_released_folder_s_unipc_equals_stock_with_its_defaults_and_resumes_mid_multistep(
    tmp_path: Path, written: Written
) -> None:
    """The released folders ship UniPC (predictor-corrector, two steps of history): with
    the "UniPC" sampler the clip equals stock `WanPipeline` with its own scheduler, and a
    pause at step 2 (history and the sample to correct in the checkpoint) resumes on a fresh
    runner to the same frames; "Euler" there runs with the folder's shift."""
    from diffusers import WanPipeline

    from app.testing.tiny.wan import write_tiny_wan

    folder = write_tiny_wan(tmp_path / "released", released=True)
    model = model_info(folder, "wan")
    params = wan_params(scheduler="UniPC", steps=4, frames=5)
    whole = clip(runner_for(model), params, tmp_path, "whole")
    stock_pipe = WanPipeline.from_pretrained(folder, local_files_only=True)
    stock_pipe.set_progress_bar_config(disable=True)
    assert type(stock_pipe.scheduler).__name__ == "UniPCMultistepScheduler"
    assert whole.image_path is not None
    assert max_frame_diff(written.frames[whole.image_path], stock(stock_pipe, params)) == 0
    paused = clip(runner_for(model), params, tmp_path, "paused", on_step=pause_at(2))
    assert paused.kind is OutcomeKind.PAUSED
    resumed = clip(runner_for(model), params, tmp_path, "paused")
    assert resumed.resumed_from is not None and resumed.image_path is not None
    assert max_frame_diff(written.frames[resumed.image_path], written.frames[whole.image_path]) == 0
    euler = clip(runner_for(model), replace(params, scheduler="Euler"), tmp_path, "euler")
    assert euler.image_path is not None
    assert max_frame_diff(written.frames[euler.image_path], written.frames[whole.image_path]) > 0


def test_a_preview_is_the_middle_frame_drawn_cheaply(runner: Runner) -> None:
    """The latent preview (no VAE: a linear map of the middle latent frame) at the
    preview's size, a PNG, for a clip of any length."""
    import io

    from app.engine.generation import denoise

    loaded = runner.load("wan")
    state = denoise.start(loaded.pipe, wan_params(frames=17, width=64, height=32))
    with Image.open(io.BytesIO(loaded.previewer.png(state.latents, (64, 32)))) as preview:
        assert preview.format == "PNG" and preview.size == (64, 32)


@pytest.fixture(scope="module")
def released_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from app.testing.tiny.wan import write_tiny_wan

    return write_tiny_wan(tmp_path_factory.mktemp("wan-released") / "wan", released=True)


@pytest.mark.parametrize("sampler", ["Euler", "UniPC"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_in_half_precision_every_frame_equals_stock_and_a_pause_resumes_exactly(
    folder: Path,
    released_folder: Path,
    written: Written,
    tmp_path: Path,
    dtype: str,
    sampler: str,
) -> None:
    """Computed in `dtype` on the CPU as a GPU would: against the stock pipeline loaded in
    it, in float16 with UMT5 in float32 as a float16-only GPU's users load it (T5 v1.1
    overflows float16; Easel runs it so too: `device.precision`). Euler on a folder that
    ships it (the latents take the transformer's dtype after a step), UniPC on a released
    one's (they stay float32): a checkpoint restores either exactly."""
    from diffusers import WanPipeline

    from app.engine.generation.device import CPU

    folder = released_folder if sampler == "UniPC" else folder
    model = model_info(folder, "wan")
    half = getattr(torch, dtype)
    runner = Runner(device=replace(CPU, dtype_name=dtype), resolve=lambda _n: model, threads=1)
    params = wan_params(steps=3, frames=5, negative_prompt="blurry", scheduler=sampler)
    whole = clip(runner, params, tmp_path, "whole")
    wide = {"default": half, "text_encoder": torch.float32} if dtype == "float16" else half
    stock_pipe = WanPipeline.from_pretrained(folder, local_files_only=True, dtype=wide)
    stock_pipe.set_progress_bar_config(disable=True)
    assert whole.image_path is not None
    assert max_frame_diff(written.frames[whole.image_path], stock(stock_pipe, params)) == 0
    assert clip(runner, params, tmp_path, "paused", on_step=pause_at(2)).kind is OutcomeKind.PAUSED
    resumed = clip(
        Runner(device=runner.device, resolve=lambda _n: model, threads=1),
        params,
        tmp_path,
        "paused",
    )
    assert resumed.image_path is not None
    assert max_frame_diff(written.frames[resumed.image_path], written.frames[whole.image_path]) == 0

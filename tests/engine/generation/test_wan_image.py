"""Wan image to video through Easel's own loop: the stock pipelines' clips, exactly.

On a tiny random Wan 2.2 TI2V 5B (tiny.wan: a `WanPipeline` folder with
`expand_timesteps`, a 48-channel DiT, Wan 2.2's VAE) and a tiny Wan 2.1 I2V (its DiT
reading the mask and image latents beside the noise, a tiny CLIP image encoder), saved as
diffusers folders: every frame equal to stock `WanPipeline` (TI2V, text only) and
`WanImageToVideoPipeline` (with an image) called with their defaults, in float32 and
bfloat16, and a pause resumed by a fresh runner to the same frames.
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from app.engine.generation.files.architecture import Architecture
from app.engine.generation.files.sources import ModelInfo
from app.engine.generation.outcome import OutcomeKind
from app.engine.generation.runner import Runner
from app.engine.jobs.params import INIT_UPLOADED, GenerationParams
from app.engine.jobs.run_inputs import RunInputs
from tests.engine.generation.test_wan import Written, max_frame_diff, wan_params
from tests.engine.generation.tiny_architectures import go_on, model_info, pause_at

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

STEPS, FRAMES, SIDE = 3, 5, 32


def input_png() -> bytes:
    """A 32x32 picture with structure (a gradient and a square), as a job stores it."""
    ramp = np.linspace(0, 255, SIDE, dtype=np.uint8)
    pixels = np.stack([np.tile(ramp, (SIDE, 1)), np.tile(ramp[:, None], (1, SIDE)),
                       np.full((SIDE, SIDE), 90, np.uint8)], axis=-1)  # fmt: skip
    pixels[8:20, 10:22] = (240, 30, 60)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


PNG = input_png()
WITH_IMAGE = {"init_image": f"{INIT_UPLOADED}{hashlib.sha256(PNG).hexdigest()}"}


@pytest.fixture(scope="module")
def ti2v_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from app.testing.tiny.wan import write_tiny_wan_ti2v

    return write_tiny_wan_ti2v(tmp_path_factory.mktemp("wan-ti2v") / "ti2v")


@pytest.fixture(scope="module")
def i2v_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from app.testing.tiny.wan import write_tiny_wan_i2v

    return write_tiny_wan_i2v(tmp_path_factory.mktemp("wan-i2v") / "i2v")


@pytest.fixture
def written(monkeypatch: pytest.MonkeyPatch) -> Written:
    return Written(monkeypatch)


def runner_in(model: ModelInfo, dtype: str) -> Runner:
    from dataclasses import replace

    from app.engine.generation.device import CPU

    return Runner(device=replace(CPU, dtype_name=dtype), resolve=lambda _n: model, threads=1)


def stock_frames(folder: Path, params: GenerationParams, dtype: str) -> list[np.ndarray]:
    """The stock pipeline called as its model card does, its defaults otherwise: with an
    image `WanImageToVideoPipeline` (the TI2V folder loaded as it, as its card does), else
    the folder's own `WanPipeline`."""
    from diffusers import WanImageToVideoPipeline, WanPipeline

    image = Image.open(io.BytesIO(PNG)).convert("RGB") if params.init_image else None
    pipeline = WanImageToVideoPipeline if image is not None else WanPipeline
    pipe = pipeline.from_pretrained(folder, local_files_only=True, dtype=getattr(torch, dtype))
    pipe.set_progress_bar_config(disable=True)
    extra = {"image": image} if image is not None else {}
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
        **extra,
    ).frames[0]
    return [np.asarray(frame, dtype=np.int16) for frame in frames]


def clip_of(runner: Runner, params: GenerationParams, folder: Path, name: str, **kw: Any) -> Any:
    inputs = RunInputs(init_image=PNG) if params.init_image else RunInputs()
    return runner.run(
        params,
        inputs,
        output_path=folder / f"{name}.mp4",
        checkpoint_path=folder / f"{name}.ckpt",
        on_step=kw.get("on_step", go_on),
    )


def equal_to_stock_and_across_a_pause(
    folder: Path, params: GenerationParams, dtype: str, written: Written, tmp_path: Path
) -> None:
    """The clip equals stock's; paused at step 2, a fresh runner (its own pipeline)
    finishes it to the same frames."""
    model = model_info(folder, "wan")
    whole = clip_of(runner_in(model, dtype), params, tmp_path, "whole")
    assert whole.kind is OutcomeKind.COMPLETED and whole.image_path is not None
    ours = written.frames[whole.image_path]
    assert len(ours) == params.frames
    assert max_frame_diff(ours, stock_frames(folder, params, dtype)) == 0
    paused = clip_of(runner_in(model, dtype), params, tmp_path, "paused", on_step=pause_at(2))
    assert paused.kind is OutcomeKind.PAUSED and (tmp_path / "paused.ckpt").exists()
    resumed = clip_of(runner_in(model, dtype), params, tmp_path, "paused")
    assert resumed.resumed_from is not None and resumed.resumed_from.step == 2
    assert resumed.image_path is not None
    assert max_frame_diff(written.frames[resumed.image_path], ours) == 0


def test_the_folders_are_told_apart_by_their_configs(ti2v_folder: Path, i2v_folder: Path) -> None:
    """Wan 2.2 TI2V's folder says `WanPipeline`, as Wan 2.1's: its `expand_timesteps`
    makes it TI2V; Wan 2.1 I2V's says `WanImageToVideoPipeline`."""
    assert model_info(ti2v_folder).architecture is Architecture.WAN2_2_TI2V
    assert model_info(i2v_folder).architecture is Architecture.WAN2_1_I2V
    spec = Architecture.WAN2_2_TI2V.spec
    assert spec.video is not None and spec.requests.size_multiple == 32
    assert (spec.video.default_frames, spec.video.default_fps) == (121, 24)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("image", [False, True], ids=["text", "text+image"])
def test_ti2v_equals_stock_with_and_without_an_image_and_resumes_exactly(
    ti2v_folder: Path, written: Written, tmp_path: Path, dtype: str, image: bool
) -> None:
    params = wan_params(steps=STEPS, frames=FRAMES, negative_prompt="blurry",
                        **(WITH_IMAGE if image else {}))  # fmt: skip
    equal_to_stock_and_across_a_pause(ti2v_folder, params, dtype, written, tmp_path)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_wan21_i2v_equals_stock_and_resumes_exactly(
    i2v_folder: Path, written: Written, tmp_path: Path, dtype: str
) -> None:
    params = wan_params(steps=STEPS, frames=FRAMES, negative_prompt="blurry", **WITH_IMAGE)
    equal_to_stock_and_across_a_pause(i2v_folder, params, dtype, written, tmp_path)


I2V_REFUSAL = "Wan 2.1 I2V animates an input image: give it one (the init image)"
T2V_REFUSAL = (
    "Wan 2.1 text to video takes no input image; choose an image-to-video model "
    "(Wan 2.1 I2V or Wan 2.2 TI2V)"
)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory, ti2v_folder: Path, i2v_folder: Path) -> Path:
    """A models folder holding the three Wan families: "t2v", "ti2v" and "i2v"."""
    from app.testing.tiny.wan import write_tiny_wan

    models = tmp_path_factory.mktemp("wan-models")
    write_tiny_wan(models / "t2v")
    for folder in (ti2v_folder, i2v_folder):
        (models / folder.name).symlink_to(folder)
    return models


def test_an_input_image_is_refused_where_the_model_takes_none_and_needed_where_it_must(
    models: Path,
) -> None:
    from app.engine.generation.files.sources import ModelSearchPath
    from app.engine.generation.request_checks import check_runnable
    from app.errors import BadInput

    search = ModelSearchPath(user=(models,))
    for name in ("ti2v", "i2v"):
        assert check_runnable(wan_params(model=name, **WITH_IMAGE), search).name == name
    assert check_runnable(wan_params(model="ti2v"), search).name == "ti2v"  # text alone
    for name, sentence, changes in (
        ("i2v", I2V_REFUSAL, {}), ("t2v", T2V_REFUSAL, WITH_IMAGE),
    ):  # fmt: skip
        with pytest.raises(BadInput) as refused:
            check_runnable(wan_params(model=name, **changes), search)
        assert str(refused.value) == sentence


def test_the_command_line_stores_a_clip_of_an_image_and_refuses_one_in_a_sentence(
    models: Path, easel_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from app.cli import main

    (easel_home / "models").mkdir(parents=True)
    for name in ("i2v", "t2v"):
        (easel_home / "models" / name).symlink_to(models / name)
    image = tmp_path / "first.png"
    image.write_bytes(PNG)
    clip = ["submit", "a cat", "--video", "--frames", "5", "--size", "32x32"]
    refusals = {
        ("--model", "i2v"): f"error: {I2V_REFUSAL}\n",
        ("--model", "t2v", "--init-image", str(image)): f"error: {T2V_REFUSAL}\n",
    }
    for argv, sentence in refusals.items():
        assert main([*clip, *argv]) == 2
        assert capsys.readouterr() == ("", sentence)
    assert main([*clip, "--model", "i2v", "--init-image", str(image)]) == 0
    job_id = int(capsys.readouterr().out)
    assert main(["jobs", "--all", "--json"]) == 0
    [stored] = json.loads(capsys.readouterr().out)
    assert (stored["id"], stored["kind"], stored["frames"]) == (job_id, "video", 5)
    assert stored["init_image"] == WITH_IMAGE["init_image"]


def test_the_native_api_takes_an_input_image_for_a_clip_and_refuses_a_missing_one(
    models: Path, easel_home: Path
) -> None:
    import base64
    import shutil

    from app.engine.store.opening import open_queue
    from tests.server.test_server_api import running

    for name in ("i2v", "t2v"):  # names inside the models folder
        shutil.copytree(models / name, easel_home / "models" / name)
    queue = open_queue(easel_home / "easel.db")
    body = {"prompt": "a cat", "model": "i2v", "width": 32, "height": 32, "frames": 5}
    image = base64.b64encode(PNG).decode()
    with running(queue) as api:
        missing = api.client.post("/api/v1/jobs", json=body)
        unwanted = api.client.post("/api/v1/jobs", json={**body, "model": "t2v",
                                                         "init_image": image})  # fmt: skip
        taken = api.client.post("/api/v1/jobs", json={**body, "init_image": image})
    assert missing.status_code == 422 and missing.json() == {"error": f"{I2V_REFUSAL}."}
    assert unwanted.status_code == 422 and unwanted.json() == {"error": f"{T2V_REFUSAL}."}
    assert taken.status_code == 201, taken.text
    [job] = taken.json()["jobs"]
    assert job["video"] == {"frames": 5, "fps": 16} and len(queue.jobs()) == 1
    assert queue.jobs()[0].init_image == WITH_IMAGE["init_image"]


def test_two_i2v_experts_without_clip_equal_stock_and_resume_across_the_switch(
    tmp_path: Path, written: Written
) -> None:
    """Wan 2.2 I2V A14B's shape (a high- and a low-noise DiT, no CLIP image encoder): the
    clip equals stock `WanImageToVideoPipeline`'s, and a pause before the switch (timesteps
    1000, 858, 602, 9: the switch at 875) resumes on a fresh runner to the same frames."""
    from app.testing.tiny.wan import write_tiny_wan_i2v

    folder = write_tiny_wan_i2v(tmp_path / "a14b", experts=True)
    assert model_info(folder).architecture is Architecture.WAN2_2_I2V
    model = model_info(folder, "wan")
    params = wan_params(steps=4, frames=FRAMES, **WITH_IMAGE)
    whole = clip_of(runner_in(model, "float32"), params, tmp_path, "whole")
    assert whole.image_path is not None
    ours = written.frames[whole.image_path]
    assert max_frame_diff(ours, stock_frames(folder, params, "float32")) == 0
    paused = clip_of(runner_in(model, "float32"), params, tmp_path, "paused", on_step=pause_at(1))
    assert paused.kind is OutcomeKind.PAUSED
    resumed = clip_of(runner_in(model, "float32"), params, tmp_path, "paused")
    assert resumed.resumed_from is not None and resumed.image_path is not None
    assert max_frame_diff(written.frames[resumed.image_path], ours) == 0


def test_a_released_ti2v_folder_s_unipc_in_bfloat16_equals_stock_and_resumes_mid_multistep(
    tmp_path: Path, written: Written
) -> None:
    """As artists run it: the released folder's UniPC (shift 5), bfloat16, an input image;
    paused at step 2 (UniPC's history in the checkpoint), resumed to the same frames."""
    from app.testing.tiny.wan import write_tiny_wan_ti2v

    folder = write_tiny_wan_ti2v(tmp_path / "released", released=True)
    params = wan_params(steps=4, frames=FRAMES, scheduler="UniPC", **WITH_IMAGE)
    equal_to_stock_and_across_a_pause(folder, params, "bfloat16", written, tmp_path)

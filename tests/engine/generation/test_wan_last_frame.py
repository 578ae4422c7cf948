"""Wan 2.1 first-and-last-frame (FLF2V) through Easel's own loop: stock's clip, exactly.

On a tiny random FLF2V (tiny.wan: Wan 2.1 I2V's shape whose transformer has CLIP positions
for two images, `pos_embed_seq_len`), saved as a diffusers folder: every frame equal to
stock `WanImageToVideoPipeline(image=..., last_image=...)` with its defaults, in float32 and
bfloat16, and a pause at step 2 resumed by a fresh runner to the same frames. The last
image travels as a durable job input; a model that cannot take one, or a last image
without a first, is refused at submit in one sentence with nothing stored.
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
from app.engine.generation.outcome import OutcomeKind
from app.engine.generation.runner import Runner
from app.engine.jobs.params import INIT_UPLOADED, GenerationParams
from app.engine.jobs.run_inputs import RunInputs
from tests.engine.generation.test_wan import Written, max_frame_diff, wan_params
from tests.engine.generation.test_wan_image import PNG, WITH_IMAGE, runner_in
from tests.engine.generation.tiny_architectures import go_on, model_info, pause_at

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

STEPS, FRAMES = 3, 5


def last_png() -> bytes:
    """Another 32x32 picture: the first one mirrored, with a blue square of its own."""
    pixels = np.asarray(Image.open(io.BytesIO(PNG)).convert("RGB"))[:, ::-1].copy()
    pixels[4:12, 4:12] = (20, 40, 230)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


LAST = last_png()
WITH_BOTH = {**WITH_IMAGE, "last_image": f"{INIT_UPLOADED}{hashlib.sha256(LAST).hexdigest()}"}


@pytest.fixture(scope="module")
def flf_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from app.testing.tiny.wan import write_tiny_wan_i2v

    return write_tiny_wan_i2v(tmp_path_factory.mktemp("wan-flf2v") / "flf2v", last_frame=True)


@pytest.fixture
def written(monkeypatch: pytest.MonkeyPatch) -> Written:
    return Written(monkeypatch)


def stock_frames(folder: Path, params: GenerationParams, dtype: str) -> list[np.ndarray]:
    """Stock `WanImageToVideoPipeline` with a first and a last image, its defaults else."""
    from diffusers import WanImageToVideoPipeline

    pipe = WanImageToVideoPipeline.from_pretrained(
        folder, local_files_only=True, dtype=getattr(torch, dtype)
    )
    pipe.set_progress_bar_config(disable=True)
    frames = pipe(
        image=Image.open(io.BytesIO(PNG)).convert("RGB"),
        last_image=Image.open(io.BytesIO(LAST)).convert("RGB"),
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


def clip_of(runner: Runner, params: GenerationParams, folder: Path, name: str, **kw: Any) -> Any:
    return runner.run(
        params,
        RunInputs(init_image=PNG, last_image=LAST),
        output_path=folder / f"{name}.mp4",
        checkpoint_path=folder / f"{name}.ckpt",
        on_step=kw.get("on_step", go_on),
    )


def test_an_flf2v_folder_is_told_from_i2v_by_its_transformer(flf_folder: Path) -> None:
    assert model_info(flf_folder).architecture is Architecture.WAN2_1_FLF2V
    video = Architecture.WAN2_1_FLF2V.spec.video
    assert video is not None and video.takes_last_image and video.needs_last_image


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_flf2v_equals_stock_and_resumes_exactly(
    flf_folder: Path, written: Written, tmp_path: Path, dtype: str
) -> None:
    model = model_info(flf_folder, "flf")
    params = wan_params(steps=STEPS, frames=FRAMES, negative_prompt="blurry", **WITH_BOTH)
    whole = clip_of(runner_in(model, dtype), params, tmp_path, "whole")
    assert whole.kind is OutcomeKind.COMPLETED and whole.image_path is not None
    ours = written.frames[whole.image_path]
    assert len(ours) == FRAMES
    assert max_frame_diff(ours, stock_frames(flf_folder, params, dtype)) == 0
    paused = clip_of(runner_in(model, dtype), params, tmp_path, "paused", on_step=pause_at(2))
    assert paused.kind is OutcomeKind.PAUSED and (tmp_path / "paused.ckpt").exists()
    resumed = clip_of(runner_in(model, dtype), params, tmp_path, "paused")
    assert resumed.resumed_from is not None and resumed.resumed_from.step == 2
    assert resumed.image_path is not None
    assert max_frame_diff(written.frames[resumed.image_path], ours) == 0


LAST_MODELS = "choose a first-and-last-frame model (LTX-Video 0.9.5+, Wan 2.1 FLF2V or Wan 2.2 I2V)"
NO_LAST = f"Wan 2.1 I2V takes no last image; {LAST_MODELS}"
NO_LAST_T2V = f"Wan 2.1 takes no last image; {LAST_MODELS}"
NO_LAST_LTX = f"LTX-Video takes no last image; {LAST_MODELS}"
BOTH_NEEDED = "Wan 2.1 FLF2V draws between a first and a last frame: give it both images"
FIRST_NEEDED = "Wan 2.1 FLF2V animates an input image: give it one (the init image)"
NO_FIRST = "a last image needs a first image too (the init image)"


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory, flf_folder: Path) -> Path:
    """A models folder: "flf" (FLF2V), "i2v" (Wan 2.1 I2V), "t2v" (Wan 2.1) and "ltx"."""
    from app.testing.tiny.ltx import write_tiny_ltx
    from app.testing.tiny.wan import write_tiny_wan, write_tiny_wan_i2v

    models = tmp_path_factory.mktemp("wan-flf-models")
    write_tiny_wan(models / "t2v")
    write_tiny_ltx(models / "ltx")
    write_tiny_wan_i2v(models / "i2v")
    (models / "flf").symlink_to(flf_folder)
    return models


def test_a_last_image_is_refused_where_the_model_takes_none_or_no_first_is_given(
    models: Path,
) -> None:
    from app.engine.generation.files.sources import ModelSearchPath
    from app.engine.generation.request_checks import check_runnable
    from app.errors import BadInput

    search = ModelSearchPath(user=(models,))
    assert check_runnable(wan_params(model="flf", **WITH_BOTH), search).name == "flf"
    last_only = {"last_image": WITH_BOTH["last_image"]}
    for name, sentence, changes in (
        ("i2v", NO_LAST, WITH_BOTH), ("flf", BOTH_NEEDED, WITH_IMAGE),
        ("t2v", NO_LAST_T2V, last_only), ("flf", FIRST_NEEDED, last_only),
        ("ltx", NO_LAST_LTX, WITH_BOTH),
    ):  # fmt: skip
        with pytest.raises(BadInput) as refused:
            check_runnable(wan_params(model=name, **changes), search)
        assert str(refused.value) == sentence


def test_the_command_line_stores_the_last_image_and_refuses_one_in_a_sentence(
    models: Path, easel_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from app.cli import main
    from app.engine.jobs.graph import run_inputs_of
    from app.engine.jobs.graph_sql import InputKind, stored_input, stored_links
    from app.engine.store.opening import open_queue

    (easel_home / "models").mkdir(parents=True)
    for name in ("flf", "i2v"):
        (easel_home / "models" / name).symlink_to(models / name)
    first, last = tmp_path / "first.png", tmp_path / "last.png"
    first.write_bytes(PNG)
    last.write_bytes(LAST)
    clip = ["submit", "a cat", "--video", "--frames", "5", "--size", "32x32"]
    refusals = {
        ("--model", "i2v", "--init-image", str(first), "--last-image", str(last)): NO_LAST,
        ("--model", "flf", "--last-image", str(last)):
            "--last-image needs --init-image (the clip's first frame)",
    }  # fmt: skip
    for argv, sentence in refusals.items():
        assert main([*clip, *argv]) == 2
        assert capsys.readouterr() == ("", f"error: {sentence}\n")
    assert main(["jobs", "--all", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []  # nothing stored
    both = [*clip, "--model", "flf", "--init-image", str(first), "--last-image", str(last)]
    assert main(both) == 0
    job_id = int(capsys.readouterr().out)
    queue = open_queue(easel_home / "easel.db")
    [stored] = queue.jobs()
    assert (stored.id, stored.last_image) == (job_id, WITH_BOTH["last_image"])
    assert stored_input(queue.db, job_id, InputKind.LAST) == LAST
    # What a worker reads for its run, and what a re-run submits again.
    assert run_inputs_of(queue, stored).last_image == LAST
    assert stored_links(queue.db, job_id).inputs.last_image == LAST


def test_the_native_api_takes_a_last_image_and_refuses_it_on_i2v(
    models: Path, easel_home: Path
) -> None:
    import base64
    import shutil

    from app.engine.store.opening import open_queue
    from tests.server.test_server_api import running

    for name in ("flf", "i2v"):  # names inside the models folder
        shutil.copytree(models / name, easel_home / "models" / name)
    queue = open_queue(easel_home / "easel.db")
    first, last = (base64.b64encode(png).decode() for png in (PNG, LAST))
    body = {"prompt": "a cat", "model": "flf", "width": 32, "height": 32, "frames": 5,
            "init_image": first, "last_image": last}  # fmt: skip
    with running(queue) as api:
        unwanted = api.client.post("/api/v1/jobs", json={**body, "model": "i2v"})
        alone = api.client.post("/api/v1/jobs", json={**body, "init_image": None})
        taken = api.client.post("/api/v1/jobs", json=body)
    assert unwanted.status_code == 422 and unwanted.json() == {"error": f"{NO_LAST}."}
    assert alone.status_code == 422 and alone.json() == {"error": f"{NO_FIRST}."}
    assert taken.status_code == 201, taken.text
    [job] = taken.json()["jobs"]
    assert job["last_image"] == WITH_BOTH["last_image"] and len(queue.jobs()) == 1

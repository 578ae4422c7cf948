"""A clip's hold on its images (LTX-Video 0.9.5+'s conditioning strengths) and its last
image's frame through every door: the command line and the native API store them with the
job (what a resume and another machine read), its first frame's PNG names them, and a bad
value, a value without its image or on a model that takes its images at full strength
only is refused at submit in one sentence with nothing stored. (Their clips against stock:
test_ltx_condition.)"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from app.engine.jobs.params import INIT_UPLOADED, GenerationParams
from tests.engine.generation.test_ltx import PNG, WITH_IMAGE, ltx_params
from tests.engine.generation.test_ltx_condition import last_png

LAST = last_png()
WITH_BOTH = {**WITH_IMAGE, "last_image": f"{INIT_UPLOADED}{hashlib.sha256(LAST).hexdigest()}"}
FULL_ONLY = (
    "LTX-Video takes its images at full strength only; an image strength or a last image's "
    "frame is for LTX-Video 0.9.5+ models"
)
TOO_STRONG = "the image strength must be between 0 and 1, not 1.5"


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A models folder: "ltx" (LTX-Video 0.9.5+, which weighs its images) and "old"
    (LTX-Video 0.9.1, which takes an image at full strength only)."""
    from app.testing.tiny.ltx import write_tiny_ltx, write_tiny_ltx_condition

    models = tmp_path_factory.mktemp("ltx-strength-models")
    write_tiny_ltx_condition(models / "ltx")
    write_tiny_ltx(models / "old")
    return models


def clip_params(**changes: Any) -> GenerationParams:
    return replace(ltx_params(frames=17, **WITH_BOTH), **changes)


def test_a_bad_strength_or_frame_is_one_sentence_at_submit(models: Path) -> None:
    from app.engine.generation.files.sources import ModelSearchPath
    from app.engine.generation.request_checks import check_runnable
    from app.errors import BadInput

    search = ModelSearchPath(user=(models,))
    weak = clip_params(image_strength=0.8, last_image_strength=0.7, last_image_frame=12)
    assert check_runnable(weak.validated(), search).name == "ltx"
    refusals = {
        "image_strength=1.5": (clip_params(image_strength=1.5), TOO_STRONG),
        "nan": (clip_params(last_image_strength=float("nan")),
                "the last image strength must be between 0 and 1, not nan"),
        "no first": (replace(ltx_params(), image_strength=0.5),
                     "the image strength needs an input image (the init image)"),
        "no last": (replace(ltx_params(**WITH_IMAGE), last_image_strength=0.5),
                    "the last image strength needs a last image"),
        "frame 0": (clip_params(last_image_frame=0), "the last image's frame must be "
                    "between 1 and 16 (the clip's last), not 0"),
        "an image": (replace(ltx_params(), kind="generate", frames=1, image_strength=0.5),
                     "an image strength or a last image's frame needs a video job (--video)"),
        "0.9.1": (replace(ltx_params(model="old", **WITH_IMAGE), image_strength=0.8),
                  FULL_ONLY),
    }  # fmt: skip
    for name, (params, sentence) in refusals.items():
        with pytest.raises(BadInput) as refused:
            check_runnable(params.validated(), search)
        assert str(refused.value) == sentence, name


def test_the_command_line_stores_the_strengths_and_the_first_frame_names_them(
    models: Path, easel_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.cli import main
    from app.engine.jobs.queue import params_of
    from app.engine.outputs.video import video_parameters
    from app.engine.store.opening import open_queue

    (easel_home / "models").mkdir(parents=True)
    for name in ("ltx", "old"):
        (easel_home / "models" / name).symlink_to(models / name)
    first, last = tmp_path / "first.png", tmp_path / "last.png"
    first.write_bytes(PNG)
    last.write_bytes(LAST)
    clip = ["submit", "a cat", "--video", "--frames", "17", "--size", "64x32"]
    firsts = ["--init-image", str(first)]
    refusals = {
        ("--model", "ltx", *firsts, "--image-strength", "1.5"): TOO_STRONG,
        ("--model", "old", *firsts, "--image-strength", "0.8"): FULL_ONLY,
        ("--model", "ltx", "--image-strength", "0.8"):
            "--image-strength needs --init-image (the clip's first frame)",
        ("--model", "ltx", *firsts, "--last-image-frame", "3"):
            "--last-image-strength and --last-image-frame need --last-image",
    }  # fmt: skip
    for argv, sentence in refusals.items():
        assert main([*clip, *argv]) == 2
        assert capsys.readouterr() == ("", f"error: {sentence}\n")
    assert main(["jobs", "--all", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []  # nothing stored
    weak = ["--image-strength", "0.8", "--last-image", str(last),
            "--last-image-strength", "0.7", "--last-image-frame", "12"]  # fmt: skip
    assert main([*clip, "--model", "ltx", *firsts, *weak]) == 0
    job_id = int(capsys.readouterr().out)
    [stored] = open_queue(easel_home / "easel.db").jobs()
    params = params_of(stored)  # what a worker, here or on another machine, runs
    assert stored.id == job_id and params.last_image_index == 12
    assert (params.image_strength, params.last_image_strength) == (0.8, 0.7)
    line = video_parameters(params)
    assert line.endswith("Image strength: 0.8, Last image strength: 0.7, Last image frame: 12")
    assert video_parameters(replace(params, image_strength=1.0, last_image_strength=1.0,
                                    last_image_frame=-1)) == "Frames: 17, FPS: 16"  # fmt: skip


def test_the_native_api_takes_the_strengths_and_refuses_a_bad_one(
    models: Path, easel_home: Path
) -> None:
    from app.engine.store.opening import open_queue
    from tests.server.test_server_api import running

    for name in ("ltx", "old"):
        shutil.copytree(models / name, easel_home / "models" / name)
    queue = open_queue(easel_home / "easel.db")
    first, last = (base64.b64encode(png).decode() for png in (PNG, LAST))
    body = {"prompt": "a cat", "model": "ltx", "width": 64, "height": 32, "frames": 17,
            "init_image": first, "last_image": last, "image_strength": 0.8,
            "last_image_strength": 0.6, "last_image_frame": 9}  # fmt: skip
    with running(queue) as api:
        too_strong = api.client.post("/api/v1/jobs", json={**body, "image_strength": 1.5})
        full_only = api.client.post(
            "/api/v1/jobs", json={**body, "model": "old", "last_image": None,
                                  "last_image_strength": 1.0, "last_image_frame": -1},
        )  # fmt: skip
        taken = api.client.post("/api/v1/jobs", json=body)
        plain = api.client.post("/api/v1/jobs", json={**body, "image_strength": 1.0,
                                "last_image_strength": 1.0, "last_image_frame": -1})  # fmt: skip
    assert too_strong.status_code == 422 and too_strong.json() == {"error": f"{TOO_STRONG}."}
    assert full_only.status_code == 422 and full_only.json() == {"error": f"{FULL_ONLY}."}
    assert taken.status_code == 201, taken.text
    [job] = taken.json()["jobs"]
    assert job["video"] == {"frames": 17, "fps": 16, "image_strength": 0.8,
                            "last_image_strength": 0.6, "last_image_frame": 9}  # fmt: skip
    assert plain.json()["jobs"][0]["video"] == {"frames": 17, "fps": 16}
    assert len(queue.jobs()) == 2

"""The A1111 API refuses video in one sentence saying where clips are asked for: a Wan
model picked through override_settings or the options, or a frames-like field; nothing is
stored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.engine.jobs.queue import JobQueue
from app.engine.store.opening import open_queue
from tests.server.test_server_api import running

pytestmark = pytest.mark.timeout(60)

WAN_REFUSAL = (
    "Easel's A1111 API draws images only, and 'wan' is a Wan 2.1 model, which draws videos; "
    "ask for a clip through POST /api/v1/jobs with frames and fps."
)


# A Wan 2.1 folder as the model scan reads it, without weights: what the A1111 door checks
# (files only); writing the tiny random Wan takes seconds of torch this test does not need.
WAN_PARTS = {
    "scheduler": ["diffusers", "FlowMatchEulerDiscreteScheduler"],
    "text_encoder": ["transformers", "UMT5EncoderModel"],
    "tokenizer": ["transformers", "T5Tokenizer"],
    "transformer": ["diffusers", "WanTransformer3DModel"],
    "vae": ["diffusers", "AutoencoderKLWan"],
}
WAN_WEIGHTS = {
    "transformer": "diffusion_pytorch_model.safetensors",
    "vae": "diffusion_pytorch_model.safetensors",
    "text_encoder": "model.safetensors",
}


def write_wan_index(folder: Path) -> None:
    folder.mkdir(parents=True)
    index = {"_class_name": "WanPipeline", **WAN_PARTS}
    (folder / "model_index.json").write_text(json.dumps(index))
    for part in WAN_PARTS:
        (folder / part).mkdir()
    for part, name in WAN_WEIGHTS.items():
        (folder / part / name).touch()


def test_a_wan_model_or_a_frames_field_is_refused_in_one_sentence_storing_nothing(
    easel_home: Path,
) -> None:
    write_wan_index(easel_home / "models" / "wan")
    queue: JobQueue = open_queue(easel_home / "easel.db")
    wan = {"sd_model_checkpoint": "wan"}
    with running(queue) as api:
        by_override = api.client.post(
            "/sdapi/v1/txt2img", json={"prompt": "a cat", "override_settings": wan}
        )
        by_img2img = api.client.post(
            "/sdapi/v1/img2img",
            json={"prompt": "a cat", "init_images": ["x"], "override_settings": wan},
        )
        assert api.client.post("/sdapi/v1/options", json=wan).status_code == 200
        by_options = api.client.post("/sdapi/v1/txt2img", json={"prompt": "a cat"})
        by_frames = api.client.post("/sdapi/v1/txt2img", json={"prompt": "a cat", "frames": 9})
    for answer in (by_override, by_img2img, by_options):
        assert answer.status_code == 422, answer.text
        assert answer.json() == {"error": WAN_REFUSAL}
    assert by_frames.status_code == 422, by_frames.text
    assert by_frames.json() == {
        "error": "Easel's A1111 API draws images only ('frames' asks for a video); ask for a "
        "clip through POST /api/v1/jobs with frames and fps."
    }
    assert queue.jobs() == []

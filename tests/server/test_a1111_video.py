"""The A1111 API refuses video in one sentence saying where clips are asked for: a Wan
model picked through override_settings or the options, or a frames-like field; nothing is
stored."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app.engine.jobs.queue import JobQueue
from app.engine.store.opening import open_queue
from tests.server.test_server_api import running

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning"),
]

WAN_REFUSAL = (
    "Easel's A1111 API draws images only, and 'wan' is a Wan 2.1 model, which draws videos; "
    "ask for a clip through POST /api/v1/jobs with frames and fps."
)


@pytest.fixture(scope="module")
def wan_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from app.testing.tiny.wan import write_tiny_wan

    return write_tiny_wan(tmp_path_factory.mktemp("wan-models") / "wan")


def test_a_wan_model_or_a_frames_field_is_refused_in_one_sentence_storing_nothing(
    wan_folder: Path, easel_home: Path
) -> None:
    shutil.copytree(wan_folder, easel_home / "models" / "wan")
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

"""The server sends a finished job's output as its kind says: the image kind's PNG as
image/png, a second kind (registered in the test) as its own media type; A1111's `images`
carry only pictures."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from PIL import Image

from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobEvent
from app.engine.outputs.image import IMAGE
from app.engine.outputs.kinds import OutputKind
from app.engine.outputs.registry import output_of_job
from app.server import a1111
from tests.engine.outputs.clip_kind import make_clip_job, register_clip
from tests.server.test_server_api import running

pytestmark = pytest.mark.timeout(60)
WORKER = "worker-a"


def finished(queue: JobQueue, folder: Path, *, clip: bool = False) -> int:
    """A job finished by hand with an output file written as its kind names it."""
    job_id = queue.submit(GenerationParams("a fox", seed=3, model="fake"))
    if clip:
        make_clip_job(queue, job_id)
    job = queue.claim(WORKER)
    assert job is not None and job.id == job_id
    kind = output_of_job(job.kind)
    path = kind.path_in(folder, job_id, job.seed)
    kind.write(Image.new("RGB", (8, 8), "blue"), path, GenerationParams("a fox"))
    queue.fire(job_id, JobEvent.COMPLETE, source="worker", worker_id=WORKER,
               changes={"output_path": str(path)})  # fmt: skip
    return job_id


@pytest.fixture
def clip(monkeypatch: pytest.MonkeyPatch) -> OutputKind:
    return register_clip(monkeypatch)


def test_the_image_route_sends_each_kind_as_its_media_type(
    queue: JobQueue, tmp_path: Path, clip: OutputKind
) -> None:
    image_job = finished(queue, tmp_path)
    clip_job = finished(queue, tmp_path, clip=True)
    with running(queue) as api:
        image = api.client.get(f"/api/v1/jobs/{image_job}/image")
        video = api.client.get(f"/api/v1/jobs/{clip_job}/image")
        assert api.state is not None
        body = a1111.Txt2Img.model_validate({"prompt": "a fox"})
        answer = a1111._response(body, [queue.get(image_job), queue.get(clip_job)], api.state)
    assert image.headers["content-type"] == IMAGE.media_type == "image/png"
    assert image.content.startswith(b"\x89PNG")
    assert video.headers["content-type"] == clip.media_type
    assert video.content == Path(queue.get(clip_job).output_path or "").read_bytes()
    # Only the picture goes into A1111's images.
    assert [base64.b64decode(data) for data in answer["images"]] == [image.content]


def test_a_video_job_s_mp4_is_sent_as_video_mp4_and_kept_out_of_a1111_images(
    queue: JobQueue, tmp_path: Path
) -> None:
    from app.engine.outputs.video import VIDEO, first_frame_path

    params = GenerationParams("a fox", seed=3, model="fake", kind="video", frames=5, fps=8)
    job_id = queue.submit(params)
    job = queue.claim(WORKER)
    assert job is not None and output_of_job(job.kind) is VIDEO
    path = VIDEO.path_in(tmp_path, job_id, job.seed)
    VIDEO.write([Image.new("RGB", (16, 16), (40 * i, 0, 0)) for i in range(5)], path, params)
    queue.fire(job_id, JobEvent.COMPLETE, source="worker", worker_id=WORKER,
               changes={"output_path": str(path)})  # fmt: skip
    with running(queue) as api:
        sent = api.client.get(f"/api/v1/jobs/{job_id}/image")
        assert api.state is not None
        body = a1111.Txt2Img.model_validate({"prompt": "a fox"})
        answer = a1111._response(body, [queue.get(job_id)], api.state)
    assert sent.headers["content-type"] == "video/mp4" and path.suffix == ".mp4"
    assert sent.content == path.read_bytes() and sent.content[4:8] == b"ftyp"
    assert first_frame_path(path).is_file() and answer["images"] == []

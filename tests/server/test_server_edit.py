"""Edits through the native API: `edit_image` as a job (its child, at its size) or as base64
(the picture stored with the job) on a model that edits (Flux.1 Kontext); an edit on a
model that cannot edit, or one that names two pictures, is refused in one sentence with
nothing stored."""

from __future__ import annotations

import base64
import io
from pathlib import Path

from PIL import Image

from app.engine.jobs.graph import edit_images_of, init_image_of, parents_of
from app.engine.jobs.graph_sql import digest
from app.engine.jobs.init_image import open_rgb
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.settings import Settings
from tests.edit_models import write_kontext_index, write_qwen_edit_index
from tests.server.test_server_api import running


def picture_b64() -> str:
    buffer = io.BytesIO()
    Image.new("RGB", (64, 48), (200, 30, 30)).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def test_an_edit_is_queued_through_the_api_and_a_bad_one_refused(
    queue: JobQueue, tmp_path: Path
) -> None:
    write_kontext_index(tmp_path / "kontext")  # submit reads no weights
    parent = queue.submit(GenerationParams("a cat", width=64, height=48))
    with running(queue, settings=Settings(models_dir=str(tmp_path))) as api:
        edit = {"prompt": "make it night", "model": "kontext", "steps": 2, "cfg": 3.5}
        answer = api.client.post("/api/v1/jobs", json={**edit, "edit_image": {"job": parent}})
        assert answer.status_code == 201, answer.text
        [child] = answer.json()["ids"]
        job = queue.get(child)
        assert (job.kind, job.init_image, job.width, job.height) == (
            "edit",
            f"job:{parent}",
            64,
            48,
        )
        assert parents_of(queue, child) == [parent]
        answer = api.client.post("/api/v1/jobs", json={**edit, "edit_image": picture_b64()})
        assert answer.status_code == 201, answer.text
        uploaded = queue.get(answer.json()["ids"][0])
        assert uploaded.kind == "edit" and uploaded.init_image.startswith("upload:")
        assert init_image_of(queue, uploaded) is not None
        before = len(queue.jobs())
        for body, sentence in (
            (
                {**edit, "model": "easel-tiny", "edit_image": {"job": parent}},
                "cannot follow an instruction",
            ),
            ({**edit, "edit_image": {"job": parent}, "init_image": picture_b64()}, "no init_image"),
        ):
            refused = api.client.post("/api/v1/jobs", json=body)
            assert refused.status_code in (400, 422), refused.text
            assert sentence in refused.json()["error"]
        assert len(queue.jobs()) == before


def other_picture_b64(size: tuple[int, int]) -> str:
    buffer = io.BytesIO()
    Image.new("RGB", size, (30, 30, 200)).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def test_edit_plus_takes_its_input_images_as_a_list_and_the_model_s_own_defaults(
    queue: JobQueue, tmp_path: Path
) -> None:
    """`edit_image` as a list (the edited picture first) and `/jobs/{id}/edit`'s `images`;
    Qwen-Image-Edit's 50 steps and cfg 4 where the follow-up gives none; too many pictures
    refused in one sentence with nothing stored."""
    write_qwen_edit_index(tmp_path / "plus", plus=True)
    parent = queue.submit(GenerationParams("a cat", width=64, height=48))
    with running(queue, settings=Settings(models_dir=str(tmp_path))) as api:
        edit = {"prompt": "the cat of picture 2 on the sofa", "model": "plus", "steps": 2}
        second, third = other_picture_b64((48, 64)), other_picture_b64((64, 64))
        listed = {**edit, "edit_image": [{"job": parent}, second, third]}
        answer = api.client.post("/api/v1/jobs", json=listed)
        assert answer.status_code == 201, answer.text
        job = queue.get(answer.json()["ids"][0])
        assert job.steps == 2  # as given
        untold = {"prompt": "night", "model": "plus", "edit_image": {"job": parent}}
        answer = api.client.post("/api/v1/jobs", json=untold)
        assert answer.status_code == 201, answer.text
        untold_job = queue.get(answer.json()["ids"][0])
        assert (untold_job.steps, untold_job.cfg) == (50, 4.0)  # the model's own for an edit
        sizes = [open_rgb(png).size for png in edit_images_of(queue, job)]
        assert (job.init_image, sizes) == (f"job:{parent}", [(48, 64), (64, 64)])
        answer = api.client.post(
            f"/api/v1/jobs/{parent}/edit",
            json={"prompt": "night", "model": "plus", "images": [third]},
        )
        assert answer.status_code == 201, answer.text
        follow_up = queue.get(answer.json()["ids"][0])
        assert (follow_up.steps, follow_up.cfg) == (50, 4.0)
        assert [open_rgb(png).size for png in edit_images_of(queue, follow_up)] == [(64, 64)]
        before = len(queue.jobs())
        four = {**edit, "edit_image": [picture_b64(), second, third, second]}
        refused = api.client.post("/api/v1/jobs", json=four)
        assert refused.status_code in (400, 422), refused.text
        assert refused.json()["error"].startswith("an edit reads 1 to 3 input images, not 4")
        assert len(queue.jobs()) == before


def test_a_job_answer_lists_an_edits_further_input_images_as_stored(
    queue: JobQueue, tmp_path: Path
) -> None:
    """`edit_images` in `/jobs/{id}` and `/jobs` (and the schema's example): each further
    picture as the job stores it, "upload:<sha256>" of its stored PNG; none for a drawing."""
    write_qwen_edit_index(tmp_path / "plus", plus=True)
    parent = queue.submit(GenerationParams("a cat", width=64, height=48))
    with running(queue, settings=Settings(models_dir=str(tmp_path))) as api:
        pictures = [other_picture_b64((48, 64)), other_picture_b64((64, 64))]
        body = {
            "prompt": "the two cats",
            "model": "plus",
            "edit_image": [{"job": parent}, *pictures],
        }
        answer = api.client.post("/api/v1/jobs", json=body)
        assert answer.status_code == 201, answer.text
        edit_id = answer.json()["ids"][0]
        stored = [digest(png) for png in edit_images_of(queue, queue.get(edit_id))]
        assert len(stored) == 2 and all(name.startswith("upload:") for name in stored)
        shown = api.client.get(f"/api/v1/jobs/{edit_id}").json()
        assert (shown["kind"], shown["init_image"], shown["edit_images"]) == (
            "edit", f"job:{parent}", stored
        )  # fmt: skip
        listed = {
            job["id"]: job["edit_images"] for job in api.client.get("/api/v1/jobs").json()["jobs"]
        }
        assert listed == {edit_id: stored, parent: []}
        example = api.client.get("/openapi.json").json()["paths"]["/api/v1/jobs"]["get"]
        jobs = example["responses"]["200"]["content"]["application/json"]["example"]["jobs"]
        assert jobs[0]["kind"] == "edit" and jobs[0]["edit_images"][0].startswith("upload:")

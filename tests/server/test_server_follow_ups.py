"""Follow-ups of a stored job over plain HTTP (`POST /api/v1/jobs/{id}/hires|upscale|tiled|
vary|inpaint|outpaint|edit`) on the real server over a real SQLite store, no worker: the jobs
the command line makes for the same request, their parent recorded, the command line's
refusal sentences, and an Idempotency-Key on each."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from sqlalchemy import update

from app.engine import paths
from app.engine.jobs.graph import mask_of, parents_of
from app.engine.jobs.mask import open_mask
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.settings import Settings
from app.engine.store.opening import open_queue
from app.models.tables import JOB
from app.server.app import create_app
from app.server.openapi_examples import has_example
from app.server.state import ServerState
from tests.cli.test_cli_jobs import run_cli
from tests.edit_models import write_kontext_index
from tests.server.test_server_api import Running, running

pytestmark = pytest.mark.timeout(120)
HEADERS = {"X-Easel-Client": "followtest"}


@pytest.fixture
def home_queue(easel_home: Path) -> Iterator[JobQueue]:
    """The user's queue, which the command line opens too."""
    queue = open_queue()
    yield queue
    queue.db.dispose()


@pytest.fixture
def api(home_queue: JobQueue) -> Iterator[Running]:
    with running(home_queue) as served:
        served.client.headers.update(HEADERS)
        yield served


def mask_b64(size: tuple[int, int], box: tuple[int, int, int, int] | None) -> str:
    mask = Image.new("L", size, 0)
    if box is not None:
        mask.paste(255, box)
    buffer = io.BytesIO()
    mask.save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def parent(queue: JobQueue, seed: int = 3) -> int:
    return queue.submit(GenerationParams(prompt="a cat", seed=seed, width=64, height=64))


def finish(queue: JobQueue, job_id: int, folder: Path) -> None:
    """As a worker's SUCCESS leaves the job: its image on disk, named by the row."""
    image = folder / f"{job_id}.png"
    Image.new("RGB", (64, 64), (200, 30, 30)).save(image)
    with queue.db.write() as conn:
        conn.execute(update(JOB).where(JOB.c.id == job_id).values(output_path=str(image)))


def test_hires_upscale_tiled_and_vary_queue_children_that_wait_for_the_job(
    api: Running, home_queue: JobQueue
) -> None:
    job_id = parent(home_queue)
    hires = api.client.post(f"/api/v1/jobs/{job_id}/hires", json={"scale": 1.5, "steps": 3})
    assert hires.status_code == 201, hires.text
    [child] = hires.json()["jobs"]
    assert hires.headers["Location"] == f"/api/v1/jobs/{child['id']}"
    assert (child["width"], child["status"], child["steps"]) == (96, "BLOCKED", 3)
    assert child["init_image"] == f"job:{job_id}" and child["parents"] == [job_id]
    tiled = api.client.post(f"/api/v1/jobs/{job_id}/tiled", json={"scale": 2}).json()
    assert home_queue.get(tiled["ids"][0]).kind == "tiled"
    varied = api.client.post(f"/api/v1/jobs/{job_id}/vary", json={"count": 3}).json()
    assert len(varied["ids"]) == 3 and {j["strength"] for j in varied["jobs"]} == {0.3}
    for new_id in [*tiled["ids"], *varied["ids"]]:
        assert parents_of(home_queue, new_id) == [job_id]
    [made] = [t for t in home_queue.timeline(child["id"]) if t.from_status is None]
    assert made.source == "api:followtest"  # the door and the client, as every API job
    # An upscaler that is not there: the command line's sentence, nothing stored.
    before = home_queue.count_by_status()
    missing = api.client.post(f"/api/v1/jobs/{job_id}/upscale", json={"upscaler": "nope"})
    assert missing.status_code == 422 and "nope" in missing.json()["error"]
    no_job = api.client.post("/api/v1/jobs/999/vary", json={})
    assert (no_job.status_code, no_job.json()) == (404, {"error": "There is no job 999."})
    assert home_queue.count_by_status() == before


def test_inpaint_and_outpaint_make_the_command_lines_jobs_and_refuse_in_its_words(
    api: Running, home_queue: JobQueue, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = parent(home_queue)
    body = {"mask": mask_b64((64, 64), (0, 0, 32, 32)), "prompt": "a hat", "seed": 5}
    answer = api.client.post(f"/api/v1/jobs/{job_id}/inpaint", json=body)
    assert answer.status_code == 201, answer.text
    child = home_queue.get(answer.json()["ids"][0])
    assert (child.init_image, child.prompt, child.status) == (f"job:{job_id}", "a hat", "BLOCKED")
    stored = mask_of(home_queue, child)
    assert stored is not None and np.asarray(open_mask(stored))[10, 10] == 255
    # The same bad input through both doors: one sentence, the same one.
    empty = api.client.post(
        f"/api/v1/jobs/{job_id}/inpaint", json={"mask": mask_b64((64, 64), None)}
    )
    mask_file = tmp_path / "empty.png"
    mask_file.write_bytes(base64.b64decode(mask_b64((64, 64), None)))
    code, _, err = run_cli(capsys, "inpaint", str(job_id), "--mask", str(mask_file))
    assert empty.status_code == 422 and code == 2
    assert err.strip() == f"error: {empty.json()['error'].removesuffix('.')}"
    unfinished = api.client.post(f"/api/v1/jobs/{job_id}/outpaint", json={"left": 32})
    assert unfinished.json() == {"error": f"job {job_id} has no finished image to extend yet."}
    finish(home_queue, job_id, tmp_path)
    out = api.client.post(f"/api/v1/jobs/{job_id}/outpaint", json={"left": 32, "bottom": 16})
    assert out.status_code == 201, out.text
    extended = home_queue.get(out.json()["ids"][0])
    assert (extended.width, extended.height, extended.strength) == (96, 80, 1.0)
    assert parents_of(home_queue, extended.id or 0) == [job_id]


def test_another_model_may_paint_an_inpaint_or_outpaint_as_on_the_command_line(
    api: Running, home_queue: JobQueue, tmp_path: Path
) -> None:
    """A Flux.1 Fill model (guidance 30) repainting a job of another model's."""
    write_kontext_index(paths.models_dir() / "fill", "FluxFillPipeline")
    job_id = parent(home_queue)
    fill = {"model": "fill", "cfg": 30}
    body = {"mask": mask_b64((64, 64), (0, 0, 32, 32)), **fill}
    answer = api.client.post(f"/api/v1/jobs/{job_id}/inpaint", json=body)
    assert answer.status_code == 201, answer.text
    child = home_queue.get(answer.json()["ids"][0])
    assert (child.model, child.cfg) == ("fill", 30.0)
    finish(home_queue, job_id, tmp_path)
    out = api.client.post(f"/api/v1/jobs/{job_id}/outpaint", json={"right": 16, **fill})
    assert out.status_code == 201, out.text
    extended = home_queue.get(out.json()["ids"][0])
    assert (extended.model, extended.cfg, extended.width) == ("fill", 30.0, 80)


def test_a_follow_up_sent_again_with_its_key_stores_nothing_new(
    api: Running, home_queue: JobQueue
) -> None:
    job_id = parent(home_queue)
    key = {"Idempotency-Key": "vary-once"}
    first = api.client.post(f"/api/v1/jobs/{job_id}/vary", json={"count": 2}, headers=key)
    again = api.client.post(f"/api/v1/jobs/{job_id}/vary", json={"count": 2}, headers=key)
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["ids"] == first.json()["ids"] and again.json()["replayed"]
    assert len(home_queue.jobs(None)) == 3
    other = api.client.post(f"/api/v1/jobs/{job_id}/vary", json={"count": 3}, headers=key)
    assert other.status_code == 409
    assert other.json() == {
        "error": "the Idempotency-Key 'vary-once' was already used for a different request."
    }
    mask = {"mask": mask_b64((64, 64), (0, 0, 8, 8))}
    inpaint = [
        api.client.post(
            f"/api/v1/jobs/{job_id}/inpaint", json=mask, headers={"Idempotency-Key": "p"}
        )
        for _ in range(2)
    ]
    assert [a.status_code for a in inpaint] == [201, 200]
    assert inpaint[0].json()["ids"] == inpaint[1].json()["ids"]
    assert len(home_queue.jobs(None)) == 4


def test_every_operation_has_an_example_and_every_post_of_api_v1_a_key(
    home_queue: JobQueue,
) -> None:
    """What a client's author reads first, and where schemathesis starts from: Easel's own
    API and the A1111 routes (/sdapi/v1, /controlnet), every operation."""
    schema = create_app(ServerState(home_queue, Settings())).openapi()
    components = schema["components"]["schemas"]
    assert any(path.startswith("/sdapi/v1") for path in schema["paths"])
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            if not path.startswith(("/api/v1", "/sdapi/v1", "/controlnet")):
                continue
            where = f"{method.upper()} {path}"
            answers = [
                content for code, answer in operation["responses"].items()
                if code.startswith("2") for content in answer.get("content", {}).values()
            ]  # fmt: skip
            assert any(has_example(content) for content in answers), where
            for content in operation.get("requestBody", {}).get("content", {}).values():
                ref = content["schema"].get("$ref", "").rsplit("/", 1)[-1]
                assert has_example(content) or has_example(components.get(ref, {})), where
            if method == "post" and path.startswith("/api/v1"):
                headers = {p["name"].lower() for p in operation.get("parameters", [])}
                assert "idempotency-key" in headers, where


def test_an_edit_is_a_child_of_the_job_refused_as_the_command_line_refuses_it(
    api: Running, home_queue: JobQueue, capsys: pytest.CaptureFixture[str]
) -> None:
    write_kontext_index(paths.models_dir() / "kontext")
    job_id = parent(home_queue)
    body = {"prompt": "make it night", "model": "kontext", "steps": 4, "seed": 7}
    key = {"Idempotency-Key": "night"}
    answers = [
        api.client.post(f"/api/v1/jobs/{job_id}/edit", json=body, headers=key) for _ in range(2)
    ]
    assert [a.status_code for a in answers] == [201, 200], answers[0].text
    [edit_id] = answers[0].json()["ids"]
    assert answers[1].json()["ids"] == [edit_id]  # the same key again: nothing new
    edit = home_queue.get(edit_id)
    assert (edit.kind, edit.prompt, edit.init_image) == ("edit", "make it night", f"job:{job_id}")
    assert (edit.model, edit.steps, edit.cfg, edit.seed) == ("kontext", 4, 3.5, 7)
    assert (edit.width, edit.height, edit.status) == (64, 64, "BLOCKED")
    assert parents_of(home_queue, edit_id) == [job_id]
    # The job's own model draws from a prompt: the command line's sentence, nothing stored.
    refused = api.client.post(f"/api/v1/jobs/{job_id}/edit", json={"prompt": "make it night"})
    code, _, err = run_cli(capsys, "edit", str(job_id), "make it night")
    assert refused.status_code == 422 and code == 2
    assert "cannot follow an instruction to edit an image" in refused.json()["error"]
    assert err.strip() == f"error: {refused.json()['error'].removesuffix('.')}"
    assert len(home_queue.jobs(None)) == 2

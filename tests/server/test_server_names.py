"""Names, not paths, from the network, on the real server over a real store: a model named by
path, missing or reached through a link out of the model folders gets one answer that
says nothing about the server's disk; LoRAs likewise; no refusal shows a server folder."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.engine import paths
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobEvent
from app.engine.settings import Settings
from tests.server.test_server_api import running

pytestmark = [pytest.mark.timeout(120)]

NOT_INSTALLED = "model 'X' is not one of the installed models; GET /api/v1/models lists them."


def write_lora_file(path: Path) -> Path:
    """A .safetensors whose header names LoRA weights (what a LoRA check reads)."""
    header = json.dumps(
        {"unet.lora_down.weight": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}
    ).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 4)
    return path


@pytest.fixture
def folders(tmp_path: Path) -> dict[str, Path]:
    models = tmp_path / "models"
    outside = tmp_path / "outside"
    models.mkdir()
    # A usable pipeline outside the model folders, and a link to it inside them.
    shutil.copytree(paths.bundled_models_dir() / "easel-tiny", outside / "tiny")
    (models / "linked").symlink_to(outside / "tiny", target_is_directory=True)
    # A real checkpoint-looking file outside, that a path could name.
    write_lora_file(outside / "real.safetensors")
    write_lora_file(models / "climbed.safetensors")  # what `<lora:../climbed>` would reach
    write_lora_file(models / "lora" / "style.safetensors")
    (models / "lora" / "linked-style.safetensors").symlink_to(outside / "real.safetensors")
    return {"models": models, "outside": outside, "root": tmp_path}


def _answer(response: httpx.Response, name: str) -> tuple[int, str]:
    """Status and body with the name the client sent taken out (it is echoed back)."""
    return response.status_code, response.text.replace(repr(name), "'X'")


def _body(error: str) -> str:
    return json.dumps({"error": error}, separators=(",", ":"))


def _submit(client: httpx.Client, model: str, prompt: str = "a cat") -> httpx.Response:
    return client.post("/api/v1/jobs", json={"prompt": prompt, "model": model})


def _txt2img(client: httpx.Client, model: str) -> httpx.Response:
    body: dict[str, Any] = {"prompt": "a cat", "steps": 2, "width": 64, "height": 64,
                            "override_settings": {"sd_model_checkpoint": model}}  # fmt: skip
    return client.post("/sdapi/v1/txt2img", json=body)


def test_a_server_file_and_a_missing_path_get_the_same_answer(
    queue: JobQueue, folders: dict[str, Path]
) -> None:
    """`/etc/passwd`, a missing `/nope/x.safetensors` and a real `.safetensors` outside the
    model folders: one status, one sentence, on /api/v1 and on A1111's txt2img."""
    names = ["/etc/passwd", "/nope/x.safetensors", str(folders["outside"] / "real.safetensors"),
             str(folders["outside"] / "tiny"), "../outside/tiny", "~/x", "linked/../linked",
             "no-such-model"]  # fmt: skip
    settings = Settings(models_dir=str(folders["models"]))
    with running(queue, settings=settings) as api:
        for send in (_submit, _txt2img):
            answers = {name: _answer(send(api.client, name), name) for name in names}
            assert set(answers.values()) == {(422, _body(NOT_INSTALLED))}, answers
    assert queue.jobs(None, limit=10) == []  # nothing stored


def test_a_link_in_the_models_folder_to_a_model_outside_is_refused(
    queue: JobQueue, folders: dict[str, Path]
) -> None:
    """`models/linked` is a link to a usable pipeline outside: the network cannot use it
    (the same sentence as an unknown name), while the bundled model still runs."""
    settings = Settings(models_dir=str(folders["models"]))
    with running(queue, settings=settings) as api:
        refused = _submit(api.client, "linked")
        assert _answer(refused, "linked") == (422, _body(NOT_INSTALLED))
        assert _submit(api.client, "easel-tiny").status_code == 201
        # Nor is it listed: the lists say what a request may name.
        listed = [m["name"] for m in api.client.get("/api/v1/models").json()]
        assert "easel-tiny" in listed and "linked" not in listed
        a1111 = [m["model_name"] for m in api.client.get("/sdapi/v1/sd-models").json()]
        assert "easel-tiny" in a1111 and "linked" not in a1111
        chosen = api.client.post("/sdapi/v1/options", json={"sd_model_checkpoint": "linked"})
        assert chosen.status_code == 422


def test_a_lora_name_that_climbs_out_or_links_out_of_the_lora_folder_is_refused(
    queue: JobQueue, folders: dict[str, Path]
) -> None:
    settings = Settings(models_dir=str(folders["models"]))
    with running(queue, settings=settings) as api:
        for name in ("../climbed", str(folders["outside"] / "real"), "nope"):
            response = _submit(api.client, "easel-tiny", f"a cat <lora:{name}:0.5>")
            assert response.status_code == 422, response.text
            assert response.json()["error"] == (
                f"LoRA {name!r} is not one of the installed LoRAs; GET /api/v1/loras lists them."
            )
        assert _submit(api.client, "easel-tiny", "a cat <lora:style:0.5>").status_code == 201
        linked = _submit(api.client, "easel-tiny", "a cat <lora:linked-style:0.5>")
        assert linked.json()["error"] == (
            "LoRA 'linked-style' is not one of the installed LoRAs; GET /api/v1/loras lists them."
        )
        assert [lora["name"] for lora in api.client.get("/api/v1/loras").json()] == ["style"]
        assert [lora["name"] for lora in api.client.get("/sdapi/v1/loras").json()] == ["style"]


def test_no_refusal_on_the_model_routes_shows_a_server_folder(
    queue: JobQueue, folders: dict[str, Path]
) -> None:
    """Every refusal of a bad name, and an unusable model, on both APIs."""
    (folders["models"] / "broken.safetensors").write_bytes(b"not a checkpoint")
    settings = Settings(models_dir=str(folders["models"]))
    with running(queue, settings=settings) as api:
        answers = [
            _submit(api.client, "broken"),
            _submit(api.client, "nope"),
            _submit(api.client, "easel-tiny", "a cat <lora:nope>"),
            _txt2img(api.client, "broken"),
            api.client.post("/sdapi/v1/options", json={"sd_model_checkpoint": "nope"}),
        ]
    for answer in answers:
        assert answer.status_code == 422, answer.text
        assert str(folders["root"]) not in answer.text
        assert str(paths.data_dir()) not in answer.text


def test_a_failed_jobs_error_reaches_a_client_without_the_server_folders_it_named(
    queue: JobQueue, folders: dict[str, Path]
) -> None:
    """A worker's failure may name a file on the server: the job, its timeline and the
    event stream show the folder by its name in the README (`<models>`), not its path."""
    settings = Settings(models_dir=str(folders["models"]))
    error = f"{folders['models']}/broken.safetensors cannot be read; see {paths.data_dir()}/logs"
    job_id = queue.submit(GenerationParams("a cat"))
    assert queue.claim("worker-1") is not None
    queue.fire(job_id, JobEvent.FAIL, source="worker", worker_id="worker-1", message=error,
               changes={"error": error, "error_transient": False})  # fmt: skip
    shown = "<models>/broken.safetensors cannot be read; see <data>/logs"
    with running(queue, settings=settings) as api:
        job = api.client.get(f"/api/v1/jobs/{job_id}").json()
        with api.client.stream("GET", "/api/v1/events", params={"after": "0"}) as stream:
            events = []
            for line in stream.iter_lines():
                if line.startswith("data:"):
                    events.append(json.loads(line.removeprefix("data:")))
                if len(events) == 3:  # submit, start, fail
                    break
    assert job["error"] == shown
    assert job["timeline"][-1]["message"] == shown
    assert events[-1]["message"] == shown

"""The API's rules on the real uvicorn server (in a thread, on a free loopback port) over a
real store, with no worker: refusals, limits, errors as one sentence, and an
Idempotency-Key raced by many clients, on SQLite and PostgreSQL."""

from __future__ import annotations

import base64
import io
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from PIL import Image

from app.engine.generation.files.registry import Architecture
from app.engine.jobs.graph_sql import stored_input
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.engine.settings import Settings
from app.engine.workers.messages import MessageKind, WorkerMessage
from app.models.opening import open_database
from app.server import a1111
from app.server.a1111 import UnsupportedRequest, easel_scheduler, parse_parameters
from app.server.run import ServeOptions, make_server
from app.server.state import Limits, ServerState
from tests.faults import fill_disk, small_disk
from tests.server.serving import free_port

pytestmark = [pytest.mark.both_backends, pytest.mark.timeout(120)]


@dataclass
class Running:
    client: httpx.Client
    queue: JobQueue
    url: str
    app: Any = None  # the FastAPI app served
    state: ServerState | None = None


@contextmanager
def running(
    queue: JobQueue,
    limits: Limits | None = None,
    cors: tuple[str, ...] = (),
    settings: Settings | None = None,
) -> Iterator[Running]:
    options = ServeOptions(port=free_port(), limits=limits or Limits(), cors_origins=cors)
    server, state = make_server(queue, settings or Settings(), options)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        assert thread.is_alive(), "the server did not start"
        time.sleep(0.01)
    url = f"http://127.0.0.1:{options.port}"
    try:
        with httpx.Client(base_url=url, timeout=30) as client:
            yield Running(client, queue, url, server.config.app, state)
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture
def api(queue: JobQueue) -> Iterator[Running]:
    with running(queue) as served:
        yield served


def test_the_server_says_it_listens_only_once_its_port_takes_connections(
    queue: JobQueue,
) -> None:
    """What `serve` prints "serving on" after (the window shows the address then)."""
    options = ServeOptions(port=free_port())
    server, _state = make_server(queue, Settings(), options)
    connected: list[bool] = []

    def listening() -> None:
        with socket.create_connection(("127.0.0.1", options.port), timeout=5):
            connected.append(True)
        server.should_exit = True

    server.on_listening = listening
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    thread.join(timeout=60)
    assert connected == [True]


def test_an_idempotency_key_is_kept_for_the_hours_the_settings_say(queue: JobQueue) -> None:
    now = [queue.clock()]
    timed = JobQueue(queue.db, clock=lambda: now[0])
    with running(timed, settings=Settings(idempotency_key_hours=0.01)) as served:  # 36 s

        def post() -> httpx.Response:
            return served.client.post("/api/v1/jobs", json={"prompt": "a cat"},
                                      headers={"Idempotency-Key": "kept-1"})  # fmt: skip

        first = post()
        now[0] += 35
        again = post()
        now[0] += 2
        later = post()
    assert (first.status_code, again.status_code, later.status_code) == (201, 200, 201)
    assert again.json()["ids"] == first.json()["ids"] != later.json()["ids"]


def test_racing_posts_with_one_idempotency_key_make_one_job(api: Running) -> None:
    start = threading.Barrier(8)
    answers: list[httpx.Response] = []

    def post() -> None:
        with httpx.Client(base_url=api.url, timeout=30) as client:
            start.wait()
            answers.append(client.post("/api/v1/jobs", json={"prompt": "one cat"},
                                       headers={"Idempotency-Key": "race-1"}))  # fmt: skip

    threads = [threading.Thread(target=post) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(a.status_code for a in answers) == [200] * 7 + [201]
    assert len({tuple(a.json()["ids"]) for a in answers}) == 1
    assert len(api.queue.jobs()) == 1


def test_refused_transitions_are_409_and_repeats_are_harmless(api: Running) -> None:
    [job_id] = api.client.post("/api/v1/jobs", json={"prompt": "a cat"}).json()["ids"]
    refused = api.client.post(f"/api/v1/jobs/{job_id}/resume")
    assert refused.status_code == 409
    assert refused.json() == {"error": f"Can't RESUME job {job_id} in PENDING."}
    first = api.client.post(f"/api/v1/jobs/{job_id}/pause", headers={"X-Easel-Client": "krita"})
    again = api.client.post(f"/api/v1/jobs/{job_id}/pause")
    assert (first.status_code, first.json()["changed"]) == (200, True)
    assert (again.status_code, again.json()["changed"]) == (200, False)
    assert api.client.post(f"/api/v1/jobs/{job_id}/cancel").json()["changed"]
    assert not api.client.post(f"/api/v1/jobs/{job_id}/cancel").json()["changed"]
    timeline = api.client.get(f"/api/v1/jobs/{job_id}").json()["timeline"]
    assert [t["event"] for t in timeline] == ["SUBMIT", "PAUSE", "CANCEL"]
    sources = [t["source"] for t in timeline]
    assert sources[0].startswith("api:python-httpx/") and sources[1] == "api:krita"
    assert api.client.post("/api/v1/jobs/999/cancel").json() == {"error": "There is no job 999."}


def test_bad_requests_are_one_sentence_and_store_nothing(queue: JobQueue) -> None:
    limits = Limits(max_body_bytes=4096)
    with running(queue, limits) as api:
        cases = [
            ({"prompt": "x" * 5000}, 413, "larger than the limit"),
            ({"prompt": "y" * 2001}, 422, "longer than 2000 characters"),
            ({"prompt": "a cat", "width": 4096, "height": 4096}, 422, "width must be between"),
            ({"prompt": "a cat", "steps": "many"}, 422, "steps:"),
            ({"prompt": "a cat", "model": "nope"}, 422, "nope"),
            ({"prompt": "a cat", "callback_url": "file:///etc/passwd"}, 422, "not an http"),
            ({"prompt": "a cat", "init_image": "%%%"}, 422, "not valid base64"),
            ({"prompt": "a cat", "parents": [12345]}, 422, "12345"),
        ]
        for body, status, words in cases:
            answer = api.client.post("/api/v1/jobs", json=body)
            assert answer.status_code == status, (body, answer.text)
            [sentence] = answer.json().values()
            assert words in sentence and sentence.endswith(".") and "\n" not in sentence
            assert "Traceback" not in answer.text
        chunked = api.client.post(
            "/api/v1/jobs", content=iter([b'{"prompt": "', b"z" * 5000, b'"}']),
            headers={"Content-Type": "application/json"},
        )  # fmt: skip
        assert chunked.status_code == 413
        assert api.client.get("/nowhere").json() == {"error": "Not Found."}
    assert queue.jobs() == []


def test_too_many_requests_in_flight_are_refused_until_one_ends(queue: JobQueue) -> None:
    with running(queue, Limits(max_in_flight=1)) as api:
        # A body that comes slowly holds its slot while the Guard reads it.
        go_on, first_sent = threading.Event(), threading.Event()

        def slow_body() -> Iterator[bytes]:
            yield b'{"prompt": "a slow'
            first_sent.set()  # asked for more: the headers and the first part are sent
            go_on.wait(30)
            yield b' cat"}'

        posted: list[httpx.Response] = []
        thread = threading.Thread(target=lambda: posted.append(httpx.post(
            f"{api.url}/api/v1/jobs", content=slow_body(),
            headers={"Content-Type": "application/json"}, timeout=60)))  # fmt: skip
        thread.start()
        assert first_sent.wait(30)  # polling before would take the one slot first
        deadline = time.monotonic() + 30
        while (busy := api.client.get("/api/v1/queue")).status_code != 503:
            assert time.monotonic() < deadline, "the slow request never held its slot"
            time.sleep(0.01)
        assert "in flight" in busy.json()["error"] and busy.headers["Retry-After"] == "1"
        go_on.set()
        thread.join(timeout=30)
        assert posted[0].status_code == 201, posted[0].text
        assert api.client.get("/api/v1/queue").status_code == 200


def test_a_waiting_a1111_request_is_woken_by_the_servers_own_worker_settling_its_job(
    queue: JobQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(a1111, "WOKEN_POLL_S", 120.0)  # its next read of the store: too late
    with running(queue) as api:
        assert api.state is not None
        api.state.own_workers = True
        answers: list[httpx.Response] = []
        body = {"prompt": "a cat", "width": 64, "height": 64, "steps": 2}
        thread = threading.Thread(target=lambda: answers.append(
            httpx.post(f"{api.url}/sdapi/v1/txt2img", json=body, timeout=60)))  # fmt: skip
        thread.start()
        while not api.state.settled._waiting:  # read the store once, and now waits
            time.sleep(0.01)
        [job] = queue.jobs()
        queue.cancel(job.id or 0, source="test")  # as the worker settles it
        api.state.on_worker_message(WorkerMessage(MessageKind.FINISHED, "worker-0", job.id))
        thread.join(timeout=20)
        assert not thread.is_alive(), "the request slept on after its job settled"
        assert answers[0].status_code == 200 and answers[0].json()["images"] == []


def noise_png(side: int) -> str:
    """A base64 PNG that does not compress: its bytes need fresh pages in the store."""
    pixels = np.random.default_rng(1).integers(0, 255, (side, side, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def test_a_full_disk_is_a_503_sentence_that_stores_nothing_and_then_it_works(
    tmp_path: Path,
) -> None:
    """Issue 22 item 6, "the database full": the client is told to come back, in one
    sentence, and the job it asked for is not half stored."""
    body = {"init_image": noise_png(400), "strength": 0.5, "width": 256, "height": 256}
    with small_disk(tmp_path / "disk", "4m") as disk:
        queue = JobQueue(open_database(str(disk / "easel.db")))
        try:
            with running(queue) as api:
                assert api.client.post("/api/v1/jobs", json={"prompt": "before"}).is_success
                filler = fill_disk(disk)
                try:
                    full = api.client.post("/api/v1/jobs", json={"prompt": "full", **body})
                finally:
                    filler.unlink()
                assert full.status_code == 503 and full.headers["Retry-After"] == "1"
                [sentence] = full.json().values()
                assert "is full" in sentence and "free some space" in sentence
                assert [job.prompt for job in queue.jobs()] == ["before"]
                later = api.client.post("/api/v1/jobs", json={"prompt": "later", **body})
                assert later.status_code == 201, later.text
                assert sorted(job.prompt for job in queue.jobs()) == ["before", "later"]
        finally:
            queue.db.dispose()


def test_an_init_image_is_stored_with_its_job(api: Running) -> None:
    buffer = io.BytesIO()
    Image.new("RGB", (96, 80), (200, 10, 10)).save(buffer, format="PNG")
    body = {"prompt": "a cat", "init_image": base64.b64encode(buffer.getvalue()).decode(),
            "strength": 0.5, "count": 2}  # fmt: skip
    answer = api.client.post("/api/v1/jobs", json=body)
    assert answer.status_code == 201, answer.text
    jobs = answer.json()["jobs"]
    assert len(jobs) == 2 and all(j["init_image"].startswith("upload:") for j in jobs)
    assert [j["strength"] for j in jobs] == [0.5, 0.5]
    assert (jobs[0]["width"], jobs[0]["height"]) == (96, 80)  # no size asked: the image's
    body["width"] = body["height"] = 64
    resized = api.client.post("/api/v1/jobs", json=body).json()["jobs"][0]
    assert (resized["width"], resized["height"]) == (64, 64)


def test_listing_searching_starring_and_stats(api: Running) -> None:
    for prompt in ("a red fox", "a blue whale", "a red barn"):
        api.client.post("/api/v1/jobs", json={"prompt": prompt})
    found = api.client.get("/api/v1/jobs", params={"q": "red"}).json()["jobs"]
    assert [j["prompt"] for j in found] == ["a red barn", "a red fox"]
    page = api.client.get("/api/v1/jobs", params={"limit": 2}).json()
    rest = api.client.get("/api/v1/jobs", params={"before": page["next_before"]}).json()
    assert len(page["jobs"]) == 2 and len(rest["jobs"]) == 1
    fox = found[1]["id"]
    assert api.client.post(f"/api/v1/jobs/{fox}/star").json()["starred"]
    starred = api.client.get("/api/v1/jobs", params={"starred": "true"}).json()["jobs"]
    assert [j["id"] for j in starred] == [fox]
    stats = api.client.get("/api/v1/queue").json()
    assert stats["counts"][JobStatus.PENDING.value] == 3
    no_image = api.client.get(f"/api/v1/jobs/{fox}/image")
    assert no_image.status_code == 404 and "has no image" in no_image.json()["error"]
    schema = api.client.get("/openapi.json").json()
    assert {"/api/v1/jobs", "/api/v1/events", "/sdapi/v1/txt2img"} <= set(schema["paths"])


def test_models_name_each_family_by_its_stored_id(api: Running) -> None:
    """`architecture` is the family id a client can compare and send back ("sd1"), never
    Python's name for it ("Architecture.SD1")."""
    listed = {m["name"]: m for m in api.client.get("/api/v1/models").json()}
    assert listed["easel-tiny"]["architecture"] == "sd1"
    ids = {architecture.value for architecture in Architecture}
    assert all(m["architecture"] in ids or not m["supported"] for m in listed.values())


def test_a1111_names_and_png_info(api: Running) -> None:
    assert easel_scheduler("Euler a", "Automatic") == "Euler a"
    assert easel_scheduler("k_dpmpp_2m", None) == "DPM++ 2M"
    # Karras, by its old name and as A1111 1.9+ sends it (the schedule apart)
    assert easel_scheduler("DPM++ 2M Karras", None) == "DPM++ 2M Karras"
    assert easel_scheduler("DPM++ 2M", "Karras") == "DPM++ 2M Karras"
    assert easel_scheduler("Euler", "karras") == "Euler Karras"
    with pytest.raises(UnsupportedRequest, match="not supported with Euler a"):
        easel_scheduler("Euler a", "Karras")
    samplers = {s["name"] for s in api.client.get("/sdapi/v1/samplers").json()}
    assert {"DPM++ 2M Karras", "Euler Karras"} <= samplers
    refused = api.client.post("/sdapi/v1/txt2img", json={"prompt": "a", "sampler_name": "LMS"})
    assert refused.status_code == 422 and "unknown sampler 'LMS'" in refused.json()["error"]
    refusals: list[tuple[dict[str, Any], str]] = [
        ({"enable_hr": True, "hr_upscaler": "Latent"}, "Easel resizes the image, not its latents"),
        ({"restore_faces": True}, "Easel does not restore faces"),
        ({"sampler_nmae": "Euler"}, "'sampler_nmae' is not in A1111's txt2img request"),
        ({"mask": "x"}, "'mask' is not in A1111's txt2img request"),
        ({"eta": 0.5, "sampler_name": "Euler a"}, "A1111's default eta only"),
        ({"override_settings": {"CLIP_stop_at_last_layers": 2}}, "CLIP_stop_at_last_layers"),
        ({"alwayson_scripts": {"ADetailer": {"args": []}}}, "extension script 'ADetailer'"),
        ({"enable_hr": True, "hr_resize_x": 96, "hr_resize_y": 64}, "aspect ratio"),
    ]
    for body, sentence in refusals:
        refused = api.client.post("/sdapi/v1/txt2img", json={"prompt": "a", **body})
        assert refused.status_code == 422 and sentence in refused.json()["error"], body
    assert api.queue.jobs() == []
    assert api.client.post("/sdapi/v1/options", json={"sd_model_checkpoint": "nope"}
                           ).status_code == 422  # fmt: skip
    assert api.client.post("/sdapi/v1/options", json={"sd_model_checkpoint": "easel-tiny"}
                           ).status_code == 200  # fmt: skip
    assert api.client.get("/sdapi/v1/options").json()["sd_model_checkpoint"] == "easel-tiny"
    text = "a cat\nNegative prompt: dogs\nSteps: 3, Sampler: Euler, CFG scale: 4, Seed: 7"
    assert parse_parameters(text) == {
        "Prompt": "a cat", "Negative prompt": "dogs", "Steps": "3", "Sampler": "Euler",
        "CFG scale": "4", "Seed": "7",
    }  # fmt: skip
    from PIL.PngImagePlugin import PngInfo

    info = PngInfo()
    info.add_text("parameters", text)
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8)).save(buffer, format="PNG", pnginfo=info)
    answer = api.client.post(
        "/sdapi/v1/png-info", json={"image": base64.b64encode(buffer.getvalue()).decode()}
    )
    assert answer.json()["info"] == text and answer.json()["parameters"]["Seed"] == "7"


def test_browsers_are_let_in_only_from_the_origins_configured(queue: JobQueue) -> None:
    preflight = {"Origin": "https://app.example", "Access-Control-Request-Method": "POST"}
    with running(queue) as closed:
        answer = closed.client.options("/api/v1/jobs", headers=preflight)
        assert "access-control-allow-origin" not in answer.headers
        plain = closed.client.get("/api/v1/queue", headers={"Origin": "https://app.example"})
        assert "access-control-allow-origin" not in plain.headers
    with running(queue, cors=("https://app.example",)) as opened:
        answer = opened.client.options("/api/v1/jobs", headers=preflight)
        assert answer.headers["access-control-allow-origin"] == "https://app.example"
        other = opened.client.options(
            "/api/v1/jobs", headers={**preflight, "Origin": "https://evil.example"}
        )  # fmt: skip
        assert "access-control-allow-origin" not in other.headers


def test_a1111_requests_without_a_sampler_get_the_models_own(
    queue: JobQueue, tmp_path: Path
) -> None:
    from app.server.a1111 import _default_sampler
    from app.testing.tiny.flux import write_tiny_flux

    write_tiny_flux(tmp_path / "flux-tiny")
    options = ServeOptions(port=free_port())
    _server, state = make_server(queue, Settings(models_dir=str(tmp_path)), options)
    assert _default_sampler(state, "flux-tiny") == "Euler"  # Flux takes only its own
    assert _default_sampler(state, "easel-tiny") == "Euler a"  # A1111's default
    assert _default_sampler(state, "not-installed") == "Euler a"  # refused later, by name


def stored_by(api: Running, path: str, body: dict[str, Any]) -> list[Any]:
    """The jobs an A1111 request stores (read while it waits; then cancelled, so it answers)."""
    answers: list[httpx.Response] = []
    before = {job.id for job in api.queue.jobs()}
    thread = threading.Thread(target=lambda: answers.append(
        httpx.post(f"{api.url}{path}", json=body, timeout=60)))  # fmt: skip
    thread.start()
    deadline = time.monotonic() + 30
    while not (jobs := [j for j in api.queue.jobs() if j.id not in before]) and thread.is_alive():
        assert time.monotonic() < deadline, "nothing was stored"
        time.sleep(0.01)
    for job in jobs:
        api.queue.cancel(job.id or 0, source="test")
    thread.join(timeout=30)
    assert answers and answers[0].status_code == 200, answers and answers[0].text
    return sorted(jobs, key=lambda job: job.id or 0)


def png_b64(image: Image.Image) -> str:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def test_a1111_hires_variation_seeds_and_masks_are_stored_as_easels_jobs(api: Running) -> None:
    body = {
        "prompt": "a cat",
        "width": 64,
        "height": 48,
        "steps": 3,
        "seed": 4,
        "subseed": 9,
        "subseed_strength": 0.25,
        "enable_hr": True,
        "hr_resize_x": 128,
        "hr_upscaler": "None",
        "hr_second_pass_steps": 6,
        "denoising_strength": 0.4,
    }
    first, hires = stored_by(api, "/sdapi/v1/txt2img", body)
    assert (first.variation_seed, first.variation_strength, first.width) == (9, 0.25, 64)
    assert (hires.width, hires.height, hires.steps, hires.strength, hires.upscaler) == (
        128, 96, 6, 0.4, "")  # fmt: skip
    assert hires.init_image == f"job:{first.id}"
    picture = Image.new("RGB", (80, 64), (200, 40, 40))
    mask = Image.new("L", (80, 64), 255)
    mask.paste(0, (0, 0, 40, 64))  # repaints the right half; inverted: the left
    body = {
        "prompt": "a boat",
        "init_images": [png_b64(picture)],
        "mask": png_b64(mask),
        "inpainting_fill": 1,
        "inpaint_full_res": False,
        "inpainting_mask_invert": 1,
        "mask_blur": 3,
        "width": 64,
        "height": 48,
        "steps": 4,
    }
    [inpaint] = [j for j in stored_by(api, "/sdapi/v1/img2img", body) if j.mask]
    assert (inpaint.width, inpaint.height, inpaint.mask_blur, inpaint.only_masked) == (
        64, 48, 3, False)  # fmt: skip
    stored_mask = stored_input(api.queue.db, inpaint.id or 0, "mask")
    with Image.open(io.BytesIO(stored_mask or b"")) as shown:
        assert shown.size == (64, 48) and shown.getpixel((2, 24)) == 255
        assert shown.getpixel((60, 24)) == 0


def test_a1111_img2img_controlnet_and_extras_refuse_what_easel_cannot_do(api: Running) -> None:
    picture, mask = png_b64(Image.new("RGB", (64, 64))), png_b64(Image.new("L", (64, 64), 255))
    img2img = {"prompt": "a", "init_images": [picture], "width": 64, "height": 64}
    unit = {"image": picture, "model": "tiny-edges", "module": "none"}
    refusals: list[tuple[str, dict[str, Any], str]] = [
        ("img2img", {**img2img, "resize_mode": 1}, "Easel only resizes"),
        ("img2img", {**img2img, "mask": mask}, "inpainting_fill 0 is not supported"),
        ("img2img", {**img2img, "mask": mask, "inpainting_fill": 1, "mask_blur_x": 2},
         "mask_blur_x = mask_blur_y"),
        ("img2img", {**img2img, "enable_hr": True}, "'enable_hr' is not in A1111's img2img"),
        ("img2img", {**img2img, "subseed_strength": 0.5}, "txt2img only"),
        ("txt2img", {"alwayson_scripts": {"controlnet": {"args": [{**unit, "mask": mask}]}}},
         "take none"),
        ("txt2img", {"alwayson_scripts": {"ControlNet": {"args": [{**unit, "control_mode": 2}]}}},
         "Balanced"),
        ("txt2img", {"alwayson_scripts": {"ControlNet": {"args": [{**unit, "gain": 2}]}}},
         "does not know: gain"),
        ("txt2img", {"alwayson_scripts": {"ControlNet": {"args": [{**unit, "model": "None"}]}}},
         "names no ControlNet model"),
        ("txt2img", {"width": 64, "height": 48, "alwayson_scripts": {"ControlNet": {
            "args": [{**unit, "resize_mode": "Crop and Resize"}]}}}, "Just Resize"),
        ("extra-single-image", {"image": picture, "gfpgan_visibility": 0.5}, "restore faces"),
        ("extra-single-image", {"image": picture, "resize_mode": 1, "upscaling_resize_w": 100,
                                "upscaling_resize_h": 50}, "aspect ratio"),
    ]  # fmt: skip
    for path, body, sentence in refusals:
        sent = body if path == "extra-single-image" else {"prompt": "a", **body}
        refused = api.client.post(f"/sdapi/v1/{path}", json=sent)
        assert refused.status_code == 422, (path, body, refused.text)
        assert sentence in refused.json()["error"], (sentence, refused.json())
    assert api.queue.jobs() == []
    assert api.client.get("/controlnet/version").json() == {"version": 2}
    assert "canny" in api.client.get("/controlnet/module_list").json()["module_list"]
    assert api.client.get("/controlnet/model_list").json() == {"model_list": []}
    assert [u["name"] for u in api.client.get("/sdapi/v1/upscalers").json()] == [
        "None", "Lanczos"]  # fmt: skip
    assert api.client.get("/sdapi/v1/sd-vae").json() == []
    assert api.client.post("/sdapi/v1/refresh-checkpoints").status_code == 200
    memory = api.client.get("/sdapi/v1/memory").json()
    assert memory["ram"]["total"] > 0 and "error" in memory["cuda"]
    lanczos = api.client.post("/sdapi/v1/extra-single-image", json={
        "image": picture, "upscaler_1": "Lanczos", "upscaling_resize": 1.5}).json()  # fmt: skip
    with Image.open(io.BytesIO(base64.b64decode(lanczos["image"]))) as upscaled:
        assert upscaled.size == (96, 96)


def test_a_compiled_model_is_asked_in_easels_field_and_sdnexts_setting(api: Running) -> None:
    answer = api.client.post("/api/v1/jobs", json={"prompt": "a cat", "compile": True})
    assert answer.status_code == 201, answer.text
    assert answer.json()["jobs"][0]["compile"] is True
    body: dict[str, Any] = {"prompt": "a dog", "width": 64, "height": 64, "steps": 2}
    body["override_settings"] = {"cuda_compile": ["Model"]}
    [compiled] = stored_by(api, "/sdapi/v1/txt2img", body)
    [eager] = stored_by(api, "/sdapi/v1/txt2img", {**body, "override_settings": {}})
    assert compiled.compile and not eager.compile
    body["override_settings"] = {"cuda_compile": ["Model", "VAE"]}
    refused = api.client.post("/sdapi/v1/txt2img", json=body)
    assert refused.status_code == 422 and "compiles the model only, not VAE" in refused.text

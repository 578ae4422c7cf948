"""The real server (`python -m app serve` on a loopback port, its spawned worker running the
bundled model), spoken to as its users speak to it: the `webuiapi` client, plain HTTP, an
event stream, a callback receiver."""

from __future__ import annotations

import base64
import hmac
import http.server
import io
import json
import math
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import webuiapi
from PIL import Image
from safetensors.torch import save_file

from app.engine.history.search import JobFilter, search
from app.engine.jobs.control_image import preprocess
from app.engine.jobs.follow_ups import (
    FollowUps,
    NewJob,
    Upscale,
    submit_upscale,
    submit_with_follow_ups,
)
from app.engine.jobs.graph_sql import digest
from app.engine.jobs.params import ControlLayer, GenerationParams, encode_control
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.run_inputs import RunInputs
from app.engine.store.stored_files import output_bytes
from app.engine.workers.headless import POLL_S
from app.models.opening import open_database
from app.server.signing import signature
from tests.engine.generation.test_upscale import tiny_esrgan
from tests.engine.jobs.test_control_e2e import edges_png, install_bundled_controlnet
from tests.server.serving import REPO, Served, serving, shown_callback_secret, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

PROMPT = "a red circle on a blue square"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    # Private networks allowed: the callback receiver here is on loopback.
    with serving(tmp_path_factory.mktemp("served"), "--allow-private-callbacks") as server:
        yield server


@pytest.fixture(scope="module")
def store(served: Served) -> Iterator[JobQueue]:
    """The served database, read as the window reads it."""
    db = open_database(str(served.home / "easel.db"))
    yield JobQueue(db)
    db.dispose()


def a1111(served: Served) -> webuiapi.WebUIApi:
    port = int(served.url.rsplit(":", 1)[1])
    return webuiapi.WebUIApi(host="127.0.0.1", port=port, sampler="Euler", steps=3)


def test_webuiapi_txt2img_is_pixel_equal_to_generate_and_a_job_with_a_timeline(
    served: Served, store: JobQueue, tmp_path: Path
) -> None:
    reference = subprocess.Popen(
        [sys.executable, "-m", "app", "--home", str(tmp_path / "cli-home"), "generate", PROMPT,
         "--steps", "3", "--seed", "7", "--size", "64x64", "--cfg", "4", "--scheduler", "Euler",
         "--out", str(tmp_path / "out")],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    result = a1111(served).txt2img(
        prompt=PROMPT, seed=7, width=64, height=64, cfg_scale=4, steps=3, sampler_name="Euler"
    )  # fmt: skip
    out, err = reference.communicate(timeout=180)
    assert reference.returncode == 0, err
    [image] = result.images
    with Image.open(out.strip().splitlines()[-1]) as expected:
        assert image.size == expected.size == (64, 64)
        assert image.convert("RGB").tobytes() == expected.convert("RGB").tobytes()
    assert result.info["seed"] == 7 and result.info["all_seeds"] == [7]
    assert "Steps: 3, Sampler: Euler, CFG scale: 4, Seed: 7" in result.info["infotexts"][0]
    [job_id] = result.info["easel_job_ids"]
    # In the history, as the window finds it, with its whole timeline.
    assert job_id in [job.id for job in search(store, JobFilter(text="red circle"))]
    timeline = store.timeline(job_id)
    assert [t.event for t in timeline] == ["SUBMIT", "START", "COMPLETE"]
    assert timeline[0].source.startswith("sdapi:python-requests")  # the door, the client


def test_webuiapi_img2img_is_a_job_with_its_init_image_and_png_info_reads_it_back(
    served: Served, store: JobQueue
) -> None:
    api = a1111(served)
    start = Image.new("RGB", (64, 64), (30, 160, 220))
    result = api.img2img(images=[start], prompt="a boat", seed=11, width=64, height=64,
                         denoising_strength=0.5, cfg_scale=4, steps=4)  # fmt: skip
    [image] = result.images
    assert image.size == (64, 64)
    [job_id] = result.info["easel_job_ids"]
    job = store.get(job_id)
    assert job.status == "SUCCESS" and job.strength == 0.5 and job.progress_step == 2
    assert job.init_image.startswith("upload:")
    info = api.png_info(image)
    assert info.info.startswith("a boat\n") and "Denoising strength: 0.5" in info.info
    assert info.parameters["Seed"] == "11"


def test_interrupt_cancels_the_running_job_at_its_next_step(served: Served) -> None:
    api = a1111(served)
    answer: list[Any] = []
    request = threading.Thread(
        target=lambda: answer.append(api.txt2img(prompt="a long one", seed=1, width=128,
                                                 height=128, steps=150)),
    )  # fmt: skip
    request.start()
    with served.client() as client:
        deadline = time.monotonic() + 60
        while api.get_progress()["state"]["sampling_step"] < 2:
            assert time.monotonic() < deadline, "the job never got going"
            time.sleep(0.05)
        interrupted = client.post("/sdapi/v1/interrupt").json()
        [job_id] = interrupted["cancelled"]
        request.join(timeout=60)
        job: dict[str, Any] = wait_for(client, job_id, ["CANCELLED"])
    step_at_cancel = interrupted["at_step"][str(job_id)]
    # The server hears of steps through the worker's supervisor, which forwards them every
    # POLL_S: its `at_step` can be behind the worker by the steps of that interval (and as
    # long again for the thread that hands them on), so those are allowed on top of one.
    stopped = job["progress"]["live_step"]
    started = next(t["at"] for t in reversed(job["timeline"]) if t.get("event") == "START")
    run_s = job["timeline"][-1]["at"] - started
    unseen = math.ceil(2 * POLL_S / (run_s / stopped))
    assert stopped <= step_at_cancel + 1 + unseen, (stopped, step_at_cancel, unseen)
    assert stopped < 150 // 2  # and far from running on: it stopped, not finished
    events = [(t["event"], t["to"], t["source"]) for t in job["timeline"]]
    assert events[-2][:2] == ("CANCEL", "CANCELLING") and events[-2][2].startswith("sdapi:")
    assert events[-1][:3] == ("STOPPED", "CANCELLED", "worker")  # the worker stopped itself
    [result] = answer
    assert result.images == [] and result.info["easel_statuses"] == {str(job_id): "CANCELLED"}


def test_a_post_retried_with_its_idempotency_key_makes_one_job(served: Served) -> None:
    body = {"prompt": "once only", "steps": 1}
    with served.client() as client:
        before = client.get("/api/v1/jobs", params={"q": "once only"}).json()["jobs"]
        headers = {"Idempotency-Key": "retry-me"}
        first = client.post("/api/v1/jobs", json=body, headers=headers)
        again = client.post("/api/v1/jobs", json=body, headers=headers)
        assert (first.status_code, again.status_code) == (201, 200)
        assert first.json()["ids"] == again.json()["ids"] and again.json()["replayed"]
        other = client.post("/api/v1/jobs", json={**body, "steps": 2}, headers=headers)
        assert other.status_code == 409 and "different request" in other.json()["error"]
        after = client.get("/api/v1/jobs", params={"q": "once only"}).json()["jobs"]
    assert len(after) == len(before) + 1


def test_an_event_stream_resumed_with_last_event_id_gets_every_transition_once(
    served: Served, store: JobQueue
) -> None:
    # The stream from after the newest stored transition (0 when this test runs alone).
    stored_before = [t.id or 0 for job in store.jobs(limit=1) for t in store.timeline(job.id or 0)]
    start = max(stored_before, default=0)
    with served.client() as client:
        ids = [client.post("/api/v1/jobs", json={"prompt": f"streamed {n}", "steps": 2}).json()
               ["ids"][0] for n in range(2)]  # fmt: skip
        first = read_events(client, {"after": str(start)}, {}, stop_after=3)
        resumed = read_events(
            client, {}, {"Last-Event-ID": str(first[-1]["id"])}, until_success_of=set(ids)
        )  # fmt: skip
    received = [e["id"] for e in first + resumed]
    assert len(received) == len(set(received))  # nothing twice
    stored = [t.id or 0 for job_id in ids for t in store.timeline(job_id)]
    mine = [i for i in received if i in set(stored)]
    assert sorted(mine) == sorted(stored)  # nothing missed
    assert received == sorted(received)  # in commit order


def read_events(
    client: httpx.Client,
    params: dict[str, str],
    headers: dict[str, str],
    *,
    stop_after: int | None = None,
    until_success_of: set[int] | None = None,
) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []
    succeeded: set[int] = set()
    kind = ""
    with client.stream("GET", "/api/v1/events", params=params, headers=headers) as stream:
        for line in stream.iter_lines():
            if line.startswith("event: "):
                kind = line.removeprefix("event: ")
            elif line.startswith("data: ") and kind == "transition":
                event = json.loads(line.removeprefix("data: "))
                got.append(event)
                if event["to"] == "SUCCESS":
                    succeeded.add(event["job_id"])
                if stop_after is not None and len(got) >= stop_after:
                    break
                if until_success_of is not None and until_success_of <= succeeded:
                    break
    return got


def test_a_callback_url_receives_the_final_status_once(served: Served) -> None:
    received: list[dict[str, Any]] = []

    class Receiver(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers["Content-Length"])
            body = self.rfile.read(length)
            signed = hmac.compare_digest(self.headers["X-Easel-Signature"], signature(secret, body))
            received.append({**json.loads(body), "delivery": self.headers["X-Easel-Delivery"],
                             "signed": signed})  # fmt: skip
            self.send_response(204)
            self.end_headers()

        def log_message(self, *_args: object) -> None:
            pass

    secret = shown_callback_secret(served.home)
    receiver = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{receiver.server_address[1]}/done"
    try:
        with served.client() as client:
            body = {"prompt": "call me back", "steps": 2, "callback_url": url}
            [job_id] = client.post("/api/v1/jobs", json=body).json()["ids"]
            wait_for(client, job_id, ["SUCCESS"])
            deadline = time.monotonic() + 20
            while not received and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(1.0)  # several more passes of the sender: no second delivery
            job = client.get(f"/api/v1/jobs/{job_id}").json()
    finally:
        receiver.shutdown()
    assert [(r["job_id"], r["status"], r["delivery"], r["signed"]) for r in received] == [
        (job_id, "SUCCESS", f"job-{job_id}", True)
    ]
    assert job["callback"]["attempts"] == 1 and job["callback"]["result"].startswith("delivered")
    last, note = job["timeline"][-2:]  # the try is a note after the final transition
    assert (last["kind"], last["to"]) == ("transition", "SUCCESS")
    assert (note["kind"], note["source"]) == ("note", "callback") and note["at"] >= last["at"]
    assert note["message"] == f"callback 1 of 8 to {url}: delivered (HTTP 204), status SUCCESS"


def test_the_serving_process_never_loads_torch_while_its_worker_does(served: Served) -> None:
    """Last in the module: its worker has generated by now. A loaded torch maps its C
    libraries into the process; the worker's process shows that the check can see it."""
    pid = served.process.pid
    assert "torch" not in Path(f"/proc/{pid}/maps").read_text()
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    assert any("torch" in Path(f"/proc/{child}/maps").read_text() for child in children)


# --- what A1111's clients send: hires fix, inpaint, ControlNet, extras ------------------------
# Each image is compared with the same job submitted as the command line submits it
# (`submit_with_follow_ups`, source "cli") to the same served queue, run by the same worker.


def cli_job(store: JobQueue, job: NewJob, follow_ups: FollowUps | None = None) -> int:
    submitted = submit_with_follow_ups(store, job, follow_ups or FollowUps(), source="cli")
    return (submitted.follow_ups or submitted.jobs)[0]


def rgb_of(store: JobQueue, served: Served, job_id: int) -> bytes:
    with served.client() as client:
        wait_for(client, job_id, ["SUCCESS"], timeout_s=120)
    data = output_bytes(store.db, store.get(job_id))
    assert data is not None
    with Image.open(io.BytesIO(data)) as image:
        return image.convert("RGB").tobytes()


def png_of(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def test_webuiapi_hires_fix_is_the_engines_upscale_chain(served: Served, store: JobQueue) -> None:
    result = a1111(served).txt2img(
        prompt=PROMPT, seed=21, width=64, height=64, cfg_scale=4, steps=3, sampler_name="Euler",
        enable_hr=True, hr_scale=1.5, hr_upscaler="Lanczos", denoising_strength=0.5,
        hr_second_pass_steps=4,
    )  # fmt: skip
    [image] = result.images
    assert image.size == (96, 96) and result.info["all_seeds"] == [21]
    [hires_id] = result.info["easel_job_ids"]
    hires = store.get(hires_id)
    assert (hires.strength, hires.steps, hires.init_image.startswith("job:")) == (0.5, 4, True)
    params = GenerationParams(PROMPT, steps=3, cfg=4, width=64, height=64, seed=21)
    same = cli_job(store, NewJob(params), FollowUps(upscale=Upscale(1.5, 0.5, steps=4)))
    assert image.convert("RGB").tobytes() == rgb_of(store, served, same)


def test_webuiapi_inpaint_only_masked_is_the_engines_inpaint(
    served: Served, store: JobQueue
) -> None:
    start = Image.new("RGB", (64, 64), (30, 160, 220))
    mask = Image.new("L", (64, 64), 0)
    mask.paste(255, (16, 16, 40, 40))
    result = a1111(served).img2img(
        images=[start], mask_image=mask, inpaint_full_res=True, inpaint_full_res_padding=8,
        inpainting_fill=1, mask_blur=2, prompt="a boat", seed=5, width=64, height=64,
        denoising_strength=0.8, cfg_scale=4, steps=4, sampler_name="Euler",
    )  # fmt: skip
    [image] = result.images
    [job_id] = result.info["easel_job_ids"]
    job = store.get(job_id)
    assert (job.only_masked, job.mask_padding, job.mask_blur) == (True, 8, 2)
    init_png, mask_png = png_of(start), png_of(mask)
    params = GenerationParams(
        "a boat", steps=4, cfg=4, width=64, height=64, seed=5, strength=0.8, mask_blur=2,
        only_masked=True, mask_padding=8,
    )  # fmt: skip
    same = cli_job(store, NewJob(params, inputs=RunInputs(init_image=init_png, mask=mask_png)))
    assert image.convert("RGB").tobytes() == rgb_of(store, served, same)


def test_webuiapi_controlnet_unit_is_the_engines_control_layer(
    served: Served, store: JobQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EASEL_HOME", str(served.home))
    install_bundled_controlnet("tiny-edges")
    api = a1111(served)
    assert api.controlnet_model_list() == ["tiny-edges"]
    edges = Image.open(io.BytesIO(edges_png()))
    unit = webuiapi.ControlNetUnit(image=edges, module="none", model="tiny-edges [abc123]",
                                   weight=0.9, guidance_end=0.8)  # fmt: skip
    # A dict of our own: webuiapi adds the units to its default `alwayson_scripts`, which
    # would then guide every later request of the process.
    result = api.txt2img(prompt=PROMPT, seed=8, width=64, height=64, cfg_scale=4, steps=4,
                         sampler_name="Euler", controlnet_units=[unit],
                         alwayson_scripts={})  # fmt: skip
    [image] = result.images
    png = preprocess("none", edges_png())
    layer = ControlLayer(digest(png), "tiny-edges", "none", 0.9, 0.0, 0.8)
    params = GenerationParams(PROMPT, steps=4, cfg=4, width=64, height=64, seed=8,
                              control=encode_control([layer]))  # fmt: skip
    same = cli_job(store, NewJob(params, inputs=RunInputs(control_images=[png])))
    assert image.convert("RGB").tobytes() == rgb_of(store, served, same)
    [job_id] = result.info["easel_job_ids"]
    assert store.get(job_id).control == params.control  # guided, as the engine's job is


def test_webuiapi_extra_single_image_is_the_engines_model_upscale(
    served: Served, store: JobQueue
) -> None:
    folder = served.home / "models" / "upscale_models"
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tiny_esrgan(), str(folder / "tiny.safetensors"))
    api = a1111(served)
    assert [u["name"] for u in api.get_upscalers()] == ["None", "Lanczos", "tiny"]
    parent = cli_job(store, NewJob(GenerationParams("a cat", steps=2, seed=3, width=40, height=32)))
    source = rgb_of(store, served, parent)
    picture = Image.frombytes("RGB", (40, 32), source)
    result = api.extra_single_image(picture, upscaler_1="tiny", upscaling_resize=2)
    assert result.image.size == (80, 64)
    same = submit_upscale(store, parent, scale=2, upscaler="tiny", img2img=False, source="cli")
    assert result.image.convert("RGB").tobytes() == rgb_of(store, served, same)
    lanczos = api.extra_single_image(picture, upscaler_1="Lanczos", upscaling_resize=2)
    assert lanczos.image.size == (80, 64)


def test_a_native_api_inpaint_is_pixel_equal_to_the_command_lines(
    served: Served, store: JobQueue, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """`POST /api/v1/jobs` with an init image and a mask (only masked), in plain HTTP, and
    `python -m app submit` with the same files: one image (tests/server/test_server_job_kinds.py
    checks every other kind's stored job against the CLI's)."""
    from app.cli import main

    start = Image.new("RGB", (64, 64), (30, 160, 220))
    mask = Image.new("L", (64, 64), 0)
    mask.paste(255, (16, 16, 40, 40))
    (tmp_path / "in.png").write_bytes(png_of(start))
    (tmp_path / "mask.png").write_bytes(png_of(mask))
    body = {"prompt": "a boat", "seed": 5, "steps": 3, "cfg": 4, "strength": 0.9,
            "init_image": base64.b64encode(png_of(start)).decode(),
            "mask": {"image": base64.b64encode(png_of(mask)).decode(), "blur": 2,
                     "only_masked": True, "padding": 8}}  # fmt: skip
    with served.client() as client:
        [api_id] = client.post("/api/v1/jobs", json=body).json()["ids"]
    monkeypatch.setenv("EASEL_HOME", str(served.home))  # the served queue, as a user's CLI
    assert main(["submit", "a boat", "--seed", "5", "--steps", "3", "--cfg", "4",
                 "--strength", "0.9", "--init-image", str(tmp_path / "in.png"),
                 "--mask", str(tmp_path / "mask.png"), "--mask-blur", "2", "--only-masked",
                 "--padding", "8"]) == 0  # fmt: skip
    cli_id = int(capsys.readouterr().out.split()[-1])
    assert rgb_of(store, served, api_id) == rgb_of(store, served, cli_id) != start.tobytes()
    assert store.timeline(api_id)[0].source.startswith("api")
    assert store.timeline(cli_id)[0].source == "cli"

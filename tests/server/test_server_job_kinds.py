"""Every kind of job through `POST /api/v1/jobs`, in plain HTTP against the real server (in a
thread, on the user's store, no worker): each is the job the command line makes of the same
request (same settings, same stored images), each bad input the CLI's refusal where the CLI
checks the same thing, nothing stored. The same job's image through both, pixel for pixel:
`test_server_e2e.py` (its served worker has the bundled model loaded already)."""

from __future__ import annotations

import base64
import io
import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from app.engine import paths
from app.engine.jobs.graph import parents_of, run_inputs_of
from app.engine.jobs.queue import JobQueue, params_of
from app.engine.jobs.states import JobEvent
from app.engine.store.opening import open_queue
from tests.cli.test_cli_control import drawing, install_controlnet
from tests.cli.test_cli_jobs import run_cli
from tests.server.test_server_api import Running, running
from tests.server.test_server_names import write_lora_file

pytestmark = [pytest.mark.timeout(120)]


@pytest.fixture
def store() -> Iterator[JobQueue]:
    """The user's store, the one the command line in this process opens too."""
    queue = open_queue()
    yield queue
    queue.db.dispose()


@pytest.fixture
def api(store: JobQueue) -> Iterator[Running]:
    with running(store) as served:
        yield served


def png_of(image: Image.Image, kind: str = "PNG") -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=kind)
    return buffer.getvalue()


def b64(data: bytes, media: str = "") -> str:
    text = base64.b64encode(data).decode("ascii")
    return f"data:{media};base64,{text}" if media else text


def picture() -> Image.Image:
    image = Image.new("RGB", (64, 64), (30, 160, 220))
    image.paste((240, 200, 20), (8, 8, 40, 40))
    return image


def mask_image(size: tuple[int, int] = (64, 64)) -> Image.Image:
    mask = Image.new("L", size, 0)
    mask.paste(255, (16, 16, 40, 40))
    return mask


def post(api: Running, body: dict[str, Any], **headers: str) -> httpx.Response:
    return api.client.post("/api/v1/jobs", json=body, headers=headers)


def made(response: httpx.Response) -> list[int]:
    assert response.status_code in (200, 201), response.text
    return list(response.json()["ids"])


def cli_job(capsys: pytest.CaptureFixture[str], *argv: str) -> int:
    code, out, err = run_cli(capsys, *argv)
    assert code == 0, err
    return int(out.strip().splitlines()[-1])


def same_refusal(
    capsys: pytest.CaptureFixture[str], api: Running, answer: httpx.Response, *argv: str
) -> str:
    """The API's refusal is the command line's sentence for the same request (with the
    server's folders named as the server names them); neither stored anything."""
    store, state = api.queue, api.state
    assert state is not None
    before = len(store.jobs(None, limit=500))
    code, out, err = run_cli(capsys, *argv)
    assert (code, out) == (2, "") and len(err.strip().splitlines()) == 1
    sentence = state.redact(err.strip().removeprefix("error: "))
    assert answer.status_code in (400, 404, 422)
    assert answer.json() == {"error": sentence if sentence.endswith(".") else f"{sentence}."}
    assert len(store.jobs(None, limit=500)) == before
    return sentence


def same_job(store: JobQueue, api_id: int, cli_id: int) -> None:
    """The same settings and the same images stored with it."""
    api_job, cli_job_ = store.get(api_id), store.get(cli_id)
    assert params_of(api_job) == params_of(cli_job_)
    assert run_inputs_of(store, api_job) == run_inputs_of(store, cli_job_)


def finish(store: JobQueue, job_id: int, image: Image.Image, folder: Path) -> None:
    """Job `job_id` done, its picture written as a worker writes it."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{job_id}.png"
    image.save(path)
    assert store.claim("w", job_id=job_id) is not None
    store.fire(job_id, JobEvent.COMPLETE, source="worker", worker_id="w",
               changes={"output_path": str(path)})  # fmt: skip


# --- masks, outpaint, images from earlier jobs --------------------------------------------------


def test_an_inpaint_is_the_clis_and_a_mask_it_cannot_use_is_refused_in_the_clis_words(
    api: Running, store: JobQueue, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    init = png_of(picture(), "WEBP")  # WebP in, as a browser may send it
    (tmp_path / "in.webp").write_bytes(init)
    (tmp_path / "mask.png").write_bytes(png_of(mask_image()))
    body = {"prompt": "a boat", "seed": 5, "steps": 3, "strength": 0.8,
            "init_image": b64(init, "image/webp"),
            "mask": {"image": b64(png_of(mask_image())), "blur": 2, "only_masked": True,
                     "padding": 8}}  # fmt: skip
    [job_id] = made(post(api, body))
    same = cli_job(
        capsys, "submit", "a boat", "--seed", "5", "--steps", "3", "--strength", "0.8",
        "--init-image", str(tmp_path / "in.webp"), "--mask", str(tmp_path / "mask.png"),
        "--mask-blur", "2", "--only-masked", "--padding", "8",
    )  # fmt: skip
    same_job(store, job_id, same)
    job = store.get(job_id)
    assert (job.only_masked, job.mask_padding, job.mask_blur, job.width) == (True, 8, 2, 64)
    small, empty = tmp_path / "small.png", tmp_path / "empty.png"
    small.write_bytes(png_of(mask_image((32, 32))))
    empty.write_bytes(png_of(Image.new("L", (64, 64), 0)))
    for mask in (small, empty):
        answer = post(api, {**body, "mask": {"image": b64(mask.read_bytes())}})
        same_refusal(capsys, api, answer, "submit", "a boat", "--init-image",
                     str(tmp_path / "in.webp"), "--mask", str(mask))  # fmt: skip


def test_an_earlier_jobs_picture_is_an_init_image_a_control_image_or_an_outpaints_canvas(
    api: Running, store: JobQueue, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    parent = cli_job(capsys, "submit", "a cat", "--seed", "3", "--size", "64x64")
    mask = b64(png_of(mask_image()))
    [child] = made(post(api, {"prompt": "a dog", "init_image": {"job": parent},
                              "mask": {"image": mask}}))  # fmt: skip
    job = store.get(child)
    assert (job.init_image, job.status, job.width, job.strength) == (
        f"job:{parent}", "BLOCKED", 64, 0.75,
    )  # fmt: skip
    assert parents_of(store, child) == [parent]  # it waits for the picture
    (tmp_path / "mask.png").write_bytes(png_of(mask_image()))
    unknown = post(api, {"prompt": "a dog", "init_image": {"job": 99}, "mask": {"image": mask}})
    assert unknown.status_code == 404
    same_refusal(capsys, api, unknown, "inpaint", "99", "--mask", str(tmp_path / "mask.png"))
    control = {"image": {"job": parent}, "model": "edges-sd15"}
    not_yet = post(api, {"prompt": "a dog", "control": [control]})
    assert not_yet.json() == {"error": f"job {parent} has no finished image to use yet."}
    early = post(api, {"prompt": "a dog", "init_image": {"job": parent}, "outpaint": {"top": 8}})
    same_refusal(capsys, api, early, "outpaint", str(parent), "--top", "8")
    finish(store, parent, picture(), tmp_path / "outputs")
    body = {"prompt": "a cat", "seed": 3, "init_image": {"job": parent},
            "outpaint": {"right": 64, "fill": "noise", "blur": 6}}  # fmt: skip
    [extended] = made(post(api, body))
    same = cli_job(capsys, "outpaint", str(parent), "--right", "64", "--fill", "noise",
                   "--mask-blur", "6", "--seed", "3")  # fmt: skip
    same_job(store, extended, same)
    assert (store.get(extended).width, store.get(extended).strength) == (128, 1.0)


# --- control layers, references, LoRAs ----------------------------------------------------------


def install_ip_adapter(name: str) -> None:
    """An IP-Adapter as the listing reads it (its header only; no torch in this test)."""
    folder = paths.models_dir() / "ipadapter" / "models"
    (folder / "image_encoder").mkdir(parents=True)
    size = 4 * 768 * 4
    weight = {"dtype": "F32", "shape": [4 * 768, 1], "data_offsets": [0, size]}
    header = json.dumps({"image_proj.proj.weight": weight}).encode()
    data = struct.pack("<Q", len(header)) + header + bytes(size)
    (folder / f"{name}.safetensors").write_bytes(data)


def test_control_layers_and_references_are_the_clis(
    api: Running, store: JobQueue, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    install_controlnet("edges-sd15")
    install_controlnet("xl-canny", sdxl=True)
    install_ip_adapter("ip-adapter_sd15")
    drawn = drawing(tmp_path / "in.png")
    image = b64(drawn.read_bytes())
    layer = {"image": image, "module": "canny", "model": "edges-sd15", "weight": 0.7,
             "start": 0.1, "end": 0.9, "type": "canny"}  # fmt: skip
    reference = {"image": image, "model": "ip-adapter_sd15", "weight": 0.6}
    body = {"prompt": "a cat", "seed": 4, "control": [layer], "references": [reference]}
    [job_id] = made(post(api, body))
    same = cli_job(
        capsys, "submit", "a cat", "--seed", "4", "--control", f"canny:{drawn}:0.7:0.1:0.9",
        "--control-model", "edges-sd15", "--control-type", "canny",
        "--reference", f"{drawn}:0.6", "--reference-model", "ip-adapter_sd15",
    )  # fmt: skip
    same_job(store, job_id, same)
    shown = api.client.get(f"/api/v1/jobs/{job_id}").json()
    [control], [ref] = shown["control"], shown["references"]
    assert (control["module"], control["weight"], control["end"], ref["weight"]) == (
        "canny", 0.7, 0.9, 0.6,
    )  # fmt: skip
    other = post(api, {"prompt": "a cat", "control": [{**layer, "model": "xl-canny"}]})
    same_refusal(capsys, api, other, "submit", "a cat", "--control", f"canny:{drawn}",
                 "--control-model", "xl-canny")  # fmt: skip
    module = post(api, {"prompt": "a cat", "control": [{**layer, "module": "depth"}]})
    same_refusal(capsys, api, module, "submit", "a cat", "--control", f"depth:{drawn}",
                 "--control-model", "edges-sd15")  # fmt: skip


def test_loras_by_name_are_the_prompt_tags_the_cli_reads(
    api: Running, store: JobQueue, capsys: pytest.CaptureFixture[str]
) -> None:
    write_lora_file(paths.models_dir() / "lora" / "ink.safetensors")
    body = {"prompt": "a cat", "seed": 2, "loras": [{"name": "ink", "weight": 0.7}]}
    [job_id] = made(post(api, body))
    same_job(store, job_id, cli_job(capsys, "submit", "a cat <lora:ink:0.7>", "--seed", "2"))
    unknown = post(api, {"prompt": "a cat", "loras": [{"name": "nowhere"}]})
    assert unknown.json() == {
        "error": "LoRA 'nowhere' is not one of the installed LoRAs; GET /api/v1/loras lists them."
    }  # a server names no folder: the check by name only (the CLI's lists its folders)


def test_a_few_step_loras_settings_are_stored_with_the_job_as_the_clis_and_given_ones_win(
    api: Running, store: JobQueue, capsys: pytest.CaptureFixture[str]
) -> None:
    write_lora_file(paths.models_dir() / "lora" / "Hyper-SDXL-8steps-lora.safetensors")
    body = {"prompt": "a cat", "seed": 2, "loras": [{"name": "Hyper-SDXL-8steps-lora"}]}
    [job_id] = made(post(api, body))
    cli = cli_job(capsys, "submit", "a cat <lora:Hyper-SDXL-8steps-lora:1>", "--seed", "2")
    same_job(store, job_id, cli)
    shown = api.client.get(f"/api/v1/jobs/{job_id}").json()
    assert (shown["steps"], shown["cfg"], shown["scheduler"]) == (8, 0.0, "DDIM")
    assert shown["scheduler_config"] == {"timestep_spacing": "trailing"}
    [given] = made(post(api, {**body, "steps": 6, "cfg": 2}))
    assert (store.get(given).steps, store.get(given).cfg, store.get(given).scheduler) == (
        6, 2.0, "DDIM",
    )  # fmt: skip


def test_step_caching_on_a_model_without_it_is_the_clis_refusal(
    api: Running, capsys: pytest.CaptureFixture[str]
) -> None:
    answer = post(api, {"prompt": "a cat", "speed": "fast"})
    same_refusal(capsys, api, answer, "submit", "a cat", "--cache", "fast")


# --- groups: batches, wildcards, grids ----------------------------------------------------------


def test_a_batch_with_seed_modes_and_variation_seeds_is_one_group_stored_once_per_key(
    api: Running, store: JobQueue
) -> None:
    body = {"prompt": "a cat", "seed": 7, "batch_count": 3, "seed_mode": "increment",
            "variation_seed": 100, "variation_strength": 0.2}  # fmt: skip
    first = post(api, body, **{"Idempotency-Key": "batch-1"})
    again = post(api, body, **{"Idempotency-Key": "batch-1"})
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["ids"] == first.json()["ids"] and again.json()["replayed"]
    group = first.json()["group"]
    assert group == {**group, "kind": "batch", "cells": first.json()["ids"], "composer": None}
    jobs = [store.get(i) for i in group["cells"]]
    assert [(j.seed, j.variation_seed, j.group_id) for j in jobs] == [
        (7, 100, group["id"]), (8, 101, group["id"]), (9, 102, group["id"]),
    ]  # fmt: skip
    shown = api.client.get(f"/api/v1/jobs/{jobs[0].id}").json()
    assert shown["client"]["api"] == "easel"  # recorded in the group's transaction
    assert (shown["group_id"], shown["group_cell"], shown["variation_seed"]) == (
        group["id"], 0, 100,
    )  # fmt: skip
    fixed = made(post(api, {**body, "seed_mode": "fixed"}))
    assert {store.get(i).seed for i in fixed} == {7}


def test_a_wildcard_prompt_is_expanded_as_the_clis_and_keeps_its_template(
    api: Running, store: JobQueue, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = paths.wildcards_dir()
    folder.mkdir(parents=True)
    (folder / "animal.txt").write_text("cat\ndog\nfox\nowl\n")
    body = {"prompt": "a {red|blue} __animal__", "seed": 11, "batch_count": 4}
    answer = post(api, body)
    ids = made(answer)
    assert answer.json()["group"]["kind"] == "wildcards"
    code, out, err = run_cli(capsys, "submit", "a {red|blue} __animal__", "--seed", "11",
                             "--batch-count", "4")  # fmt: skip
    assert code == 0, err
    for api_id, cli_id in zip(ids, map(int, out.split()), strict=True):
        same_job(store, api_id, cli_id)
    assert store.get(ids[0]).prompt_template == "a {red|blue} __animal__"
    missing = post(api, {"prompt": "a __plant__"})
    same_refusal(capsys, api, missing, "submit", "a __plant__")


def test_a_grid_answers_with_its_group_and_a_bad_axis_is_the_clis_refusal(
    api: Running, store: JobQueue, capsys: pytest.CaptureFixture[str]
) -> None:
    answer = post(api, {"prompt": "a cat", "seed": 5, "grid": {"x": "steps=2,3", "y": "cfg=3,4"}})
    group = answer.json()["group"]
    assert group["kind"] == "grid" and len(group["cells"]) == 4
    assert answer.json()["ids"] == [*group["cells"], group["composer"]]
    assert [store.get(i).steps for i in group["cells"]] == [2, 3, 2, 3]
    assert store.get(group["composer"]).status == "BLOCKED"  # until every cell is settled
    for axis in ("bogus=1,2", "steps=2,many"):
        bad = post(api, {"prompt": "a cat", "grid": {"x": axis}})
        same_refusal(capsys, api, bad, "grid", "a cat", "--x", axis)


# --- refusals -----------------------------------------------------------------------------------


BAD_BODIES: list[tuple[dict[str, Any], str]] = [
    ({"prompt": "a cat", "sede": 5},
     "sede: not a field of this request (GET /openapi.json lists them)."),
    ({"prompt": "a cat", "mask": {"image": "", "feather": 2}},
     "mask.feather: not a field of this request (GET /openapi.json lists them)."),
    ({"prompt": "a cat", "init_image": "not base64!"}, "the init image is not valid base64."),
    ({"prompt": "a cat", "init_image": b64(b"GIF89a, not really")},
     "the init image is not an image that can be read: it is not a PNG, JPEG or WebP file."),
    ({"prompt": "a cat", "mask": {"image": b64(png_of(mask_image()))}},
     "mask needs init_image (the image to repaint)."),
    ({"prompt": "a cat", "outpaint": {"left": 8}},
     "outpaint needs init_image (the image to extend)."),
    ({"prompt": "a cat", "batch_count": 2,
      "control": [{"image": b64(png_of(picture())), "model": "x"}]},
     "mask, outpaint, control, references and edit_image make one job: they cannot be "
     "combined with batch_count, combinatorial, grid or a wildcard prompt."),
    ({"prompt": "a cat", "grid": {"x": "steps=2,3"}, "batch_count": 2},
     "a grid is a group of its own: give no batch_count or combinatorial."),
    ({"prompt": "a cat", "count": 2, "batch_count": 2},
     "count makes a seed batch of one job's settings: for a group, give batch_count instead."),
]  # fmt: skip


def test_a_bad_body_is_one_sentence_and_stores_nothing(api: Running, store: JobQueue) -> None:
    for body, sentence in BAD_BODIES:  # one server for all: each refusal is a request
        answer = post(api, body)
        assert (answer.status_code, answer.json()) == (422, {"error": sentence}), body
    assert store.jobs(None, limit=5) == []


def test_the_schema_documents_every_part_of_a_job_with_an_example(api: Running) -> None:
    schemas = api.client.get("/openapi.json").json()["components"]["schemas"]
    for name in ("JobBody", "MaskBody", "OutpaintBody", "ControlBody", "ReferenceBody",
                 "LoraBody", "GridBody", "JobImage"):  # fmt: skip
        assert schemas[name]["examples"], name
        assert schemas[name]["additionalProperties"] is False, name
    examples = schemas["JobBody"]["examples"]
    for part in ("mask", "outpaint", "control", "references", "loras", "batch_count", "grid"):
        assert any(part in example for example in examples), part


def test_flux_control_layers_are_the_clis(
    api: Running, store: JobQueue, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`control` on a Flux.1 model names a Flux ControlNet, a Union's type from Flux's
    table; an SD ControlNet there is the CLI's one-sentence refusal."""
    from tests.cli.test_cli_control import FLUX_PARTS, install_flux_controlnet, install_folder

    install_folder(paths.models_dir() / "flux-dev", FLUX_PARTS)
    install_flux_controlnet("flux-union", union=True)
    install_controlnet("edges-sd15")
    drawn = drawing(tmp_path / "in.png")
    layer = {"image": b64(drawn.read_bytes()), "model": "flux-union", "type": "low-quality"}
    flux = {"prompt": "a cat", "seed": 4, "model": "flux-dev", "width": 64, "height": 64}
    [job_id] = made(post(api, {**flux, "control": [layer]}))
    submit = ("submit", "a cat", "--seed", "4", "--model", "flux-dev", "--size", "64x64")
    same = cli_job(
        capsys, *submit, "--control", f"none:{drawn}", "--control-model", "flux-union",
        "--control-type", "low-quality",
    )  # fmt: skip
    same_job(store, job_id, same)
    other = post(api, {**flux, "control": [{**layer, "model": "edges-sd15"}]})
    same_refusal(capsys, api, other, *submit, "--control", f"none:{drawn}",
                 "--control-model", "edges-sd15", "--control-type", "low-quality")  # fmt: skip

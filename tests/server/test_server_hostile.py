"""The real server (`python -m app serve` on a loopback port, its worker running the bundled
model) with broken model files in its models folder and hostile requests: every broken file
is one "unsupported" entry, every other model keeps working, and nothing is a 500."""

from __future__ import annotations

import base64
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hostile_files import (
    itxt_chunk,
    png_bytes,
    text_chunk,
    write_hostile_models,
    ztxt_chunk,
)
from tests.server.serving import REPO, Served, serving

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

HUGE_ID = 2**66


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    home = tmp_path_factory.mktemp("hostile")
    write_hostile_models(home / "models")
    with serving(home) as server:
        yield server


def test_broken_model_files_are_listed_and_every_other_model_and_txt2img_work(
    served: Served,
) -> None:
    expected = write_hostile_models(served.home / "models")  # the same files, rewritten
    with served.client() as client:
        listed = client.get("/api/v1/models")
        assert listed.status_code == 200, listed.text
        by_name = {m["name"]: m for m in listed.json()}
        for file_name, phrase in expected.items():
            model = by_name[Path(file_name).stem]
            assert not model["supported"], model
            reason = model["why_not"]
            assert reason.startswith(f"{file_name} cannot be used: ") and phrase in reason
            assert str(served.home) not in reason  # no server path to a remote client
        usable = [m["name"] for m in listed.json() if m["supported"]]
        assert usable, by_name
        a1111_models = client.get("/sdapi/v1/sd-models")
        assert a1111_models.status_code == 200, a1111_models.text
        assert [m["model_name"] for m in a1111_models.json()] == usable
        made = client.post("/sdapi/v1/txt2img", json={
            "prompt": "a red circle", "steps": 2, "width": 64, "height": 64, "seed": 5,
        }, timeout=180)  # fmt: skip
        assert made.status_code == 200, made.text
        assert len(made.json()["images"]) == 1


def test_the_command_line_submits_with_broken_model_files_beside(served: Served) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "app", "--home", str(served.home), "submit", "a red circle",
         "--steps", "2", "--size", "64x64"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "internal error" not in done.stderr.lower()


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", f"/api/v1/jobs/{HUGE_ID}"),
        ("GET", f"/api/v1/jobs/{HUGE_ID}/image"),
        ("GET", f"/api/v1/jobs/{HUGE_ID}/preview"),
        ("POST", f"/api/v1/jobs/{HUGE_ID}/cancel"),
        ("POST", f"/api/v1/jobs/{HUGE_ID}/pause"),
        ("POST", f"/api/v1/jobs/{HUGE_ID}/resume"),
        ("POST", f"/api/v1/jobs/{HUGE_ID}/retry"),
        ("POST", f"/api/v1/jobs/{HUGE_ID}/star"),
        ("GET", f"/api/v1/jobs/{-HUGE_ID}"),
        ("GET", f"/api/v1/jobs?before={HUGE_ID}"),
        ("GET", f"/api/v1/events?job={HUGE_ID}"),
        ("GET", f"/api/v1/events?after={HUGE_ID}"),
    ],
)
def test_ids_out_of_range_are_404_or_422_never_500(served: Served, method: str, path: str) -> None:
    with served.client() as client:
        answer = client.request(method, path, headers={"Content-Type": "application/json"})
    assert answer.status_code in (404, 422), answer.text
    assert "internal error" not in answer.text.lower()


def test_a_job_whose_parent_id_is_out_of_range_is_422(served: Served) -> None:
    with served.client() as client:
        answer = client.post("/api/v1/jobs", json={"prompt": "a cat", "parents": [HUGE_ID]})
        header = client.get("/api/v1/events", headers={"Last-Event-ID": str(HUGE_ID)})
    assert answer.status_code == 422, answer.text
    assert header.status_code == 400, header.text


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@pytest.mark.parametrize(
    ("image", "status", "phrase"),
    [
        (png_bytes(20_000, 20_000), 413, "too large to open"),
        (b"GIF89a but not really", 422, "not a PNG, JPEG or WebP file"),
        (png_bytes(8, 8, ztxt_chunk("parameters", "x" * 2 * 2**20)), 413, "'parameters' text"),
        (png_bytes(8, 8, itxt_chunk("comment", "y" * 2 * 2**20)), 413, "'comment' text"),
        (png_bytes(8, 8, text_chunk("parameters", "z" * 2**20)), 413, "1024 KB"),
    ],
    ids=["bomb", "not-an-image", "zTXt-2MB", "iTXt-2MB", "tEXt-1MB"],
)
def test_png_info_refuses_bombs_non_images_and_oversized_chunks_in_a_sentence(
    served: Served, image: bytes, status: int, phrase: str
) -> None:
    with served.client() as client:
        started = time.monotonic()
        answer = client.post("/sdapi/v1/png-info", json={"image": _b64(image)})
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert phrase in error and "<" not in error and "object at 0x" not in error
    assert time.monotonic() - started < 10


def test_png_info_still_reads_a_normal_png(served: Served) -> None:
    image = png_bytes(8, 8, text_chunk("parameters", "a fox\nSteps: 9, Seed: 3, Size: 8x8"))
    with served.client() as client:
        answer = client.post("/sdapi/v1/png-info", json={"image": _b64(image)})
    assert answer.status_code == 200, answer.text
    assert answer.json()["parameters"]["Steps"] == "9"


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/v1/jobs", {"prompt": "a cat", "init_image": _b64(b"not an image")}),
        ("/sdapi/v1/img2img", {"prompt": "a cat", "init_images": [_b64(b"not an image")]}),
    ],
)
def test_an_unreadable_upload_is_a_sentence_without_python_reprs(
    served: Served, path: str, body: dict[str, object]
) -> None:
    with served.client() as client:
        answer = client.post(path, json=body)
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert "not a PNG, JPEG or WebP file" in error, error
    assert "<_io" not in error and "object at 0x" not in error

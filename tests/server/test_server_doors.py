"""Equal results through every door: the same job submitted by the command line, Easel's
own API and the A1111 API to one real server (`python -m app serve`, its spawned worker
running the bundled model) makes the same image, pixel for pixel; each job's timeline
names the door it came through; the same bad input is refused in the same sentence."""

from __future__ import annotations

import base64
import io
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from app.cli import main
from tests.server.serving import Served, serving, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

PROMPT = "a red circle on a blue square"
STEPS, SEED, CFG, SIDE = 2, 7, 4.0, 64
CLIENT = {"X-Easel-Client": "doors"}
IMPOSSIBLE_WIDTH = 65  # not a multiple of 8


@pytest.fixture
def served(easel_home: Path) -> Iterator[Served]:
    """The server on the same data folder the command line in this process uses."""
    with serving(easel_home) as server:
        yield server


def cli(*argv: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def cli_submit(capsys: pytest.CaptureFixture[str], width: int = SIDE) -> tuple[int, str, str]:
    return cli(
        "submit", PROMPT, "--steps", str(STEPS), "--seed", str(SEED), "--cfg", str(CFG),
        "--size", f"{width}x{SIDE}", "--scheduler", "Euler", capsys=capsys,
    )  # fmt: skip


def easel_body(width: int = SIDE) -> dict[str, object]:
    return {"prompt": PROMPT, "steps": STEPS, "seed": SEED, "cfg": CFG, "width": width,
            "height": SIDE, "scheduler": "Euler"}  # fmt: skip


def a1111_body(width: int = SIDE) -> dict[str, object]:
    return {"prompt": PROMPT, "steps": STEPS, "seed": SEED, "cfg_scale": CFG, "width": width,
            "height": SIDE, "sampler_name": "Euler"}  # fmt: skip


def pixels(png: bytes) -> bytes:
    with Image.open(io.BytesIO(png)) as image:
        assert image.size == (SIDE, SIDE)
        return image.convert("RGB").tobytes()


def test_one_job_through_every_door_is_one_image_and_one_refusal(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    started = time.monotonic()
    code, out, err = cli_submit(capsys)
    assert code == 0, err
    by_cli = int(out.strip())
    with served.client(headers=CLIENT) as client:
        by_api = client.post("/api/v1/jobs", json=easel_body()).json()["ids"][0]
        # The A1111 request answers once its job is done: the other two run meanwhile.
        answer = client.post("/sdapi/v1/txt2img", json=a1111_body(), timeout=120)
        assert answer.status_code == 200, answer.text
        [by_a1111] = json.loads(answer.json()["info"])["easel_job_ids"]  # a string, as A1111's
        images = {}
        for door, job_id in (("cli", by_cli), ("api", by_api)):
            wait_for(client, job_id, ["SUCCESS"], timeout_s=120)
            images[door] = pixels(client.get(f"/api/v1/jobs/{job_id}/image").content)
        images["sdapi"] = pixels(base64.b64decode(answer.json()["images"][0]))
        assert images["cli"] == images["api"] == images["sdapi"]
        sources = {
            door: client.get(f"/api/v1/jobs/{job_id}").json()["timeline"][0]["source"]
            for door, job_id in (("cli", by_cli), ("api", by_api), ("sdapi", by_a1111))
        }
        assert sources == {"cli": "cli", "api": "api:doors", "sdapi": "sdapi:doors"}
        # The same impossible size through each door: one sentence, the same one.
        api_refusal = client.post("/api/v1/jobs", json=easel_body(IMPOSSIBLE_WIDTH))
        a1111_refusal = client.post("/sdapi/v1/txt2img", json=a1111_body(IMPOSSIBLE_WIDTH))
    code, _, err = cli_submit(capsys, IMPOSSIBLE_WIDTH)
    sentence = f"width {IMPOSSIBLE_WIDTH} is not a multiple of 8"
    assert (code, err.strip()) == (2, f"error: {sentence}")
    assert (api_refusal.status_code, api_refusal.json()) == (422, {"error": f"{sentence}."})
    assert (a1111_refusal.status_code, a1111_refusal.json()) == (422, {"error": f"{sentence}."})
    assert time.monotonic() - started < 60

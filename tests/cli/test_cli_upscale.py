"""`upscale --upscaler`: a model upscale or hires fix with a model; what is no upscaler is
refused at submit, in one sentence naming the file."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from app.engine.jobs.params import GenerationParams
from app.engine.store.opening import open_queue
from tests.engine.generation.test_upscale import tiny_esrgan

from .test_cli_jobs import run_cli


@pytest.fixture
def upscalers(easel_home: Path) -> Path:
    folder = easel_home / "models" / "upscale_models"
    folder.mkdir(parents=True)
    save_file(tiny_esrgan(), str(folder / "tiny.safetensors"))
    save_file({"lora_te_text_model.weight": torch.zeros(2)}, str(folder / "style.safetensors"))
    torch.save({"body.0.weight": torch.zeros(3)}, folder / "fake.pth")  # passes the quick look
    return folder


def test_upscale_with_a_model(capsys: pytest.CaptureFixture[str], upscalers: Path) -> None:
    queue = open_queue()
    parent = queue.submit(GenerationParams("a cat", seed=3))
    code, out, err = run_cli(capsys, "upscale", str(parent), "--upscaler", "tiny", "--model-only")
    assert code == 0, err
    job = queue.get(int(out))
    assert (job.kind, job.upscaler, job.init_image, job.width) == (
        "upscale",
        "tiny",
        f"job:{parent}",
        128,
    )
    code, out, err = run_cli(capsys, "upscale", str(parent), "--upscaler", "tiny.safetensors")
    hires = queue.get(int(out))
    assert (hires.kind, hires.upscaler, hires.strength) == ("generate", "tiny.safetensors", 0.35)
    queue.db.dispose()


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("style", "error: style.safetensors is not an upscaler model"),
        ("fake", "error: fake.pth is not a model spandrel knows"),
        ("gone", "error: upscaler 'gone' was not found"),
    ],
)
def test_what_is_not_an_upscaler_is_refused(
    capsys: pytest.CaptureFixture[str], upscalers: Path, name: str, message: str
) -> None:
    queue = open_queue()
    parent = queue.submit(GenerationParams("a cat", seed=3))
    code, _, err = run_cli(capsys, "upscale", str(parent), "--upscaler", name)
    assert code == 2 and err.startswith(message) and err.count("\n") == 1
    assert [j.id for j in queue.jobs()] == [parent]
    queue.db.dispose()

"""A few-step LoRA named in `submit`'s prompt: its steps, CFG and schedule are the job's
where the command line gave none, said on stderr, stored with the job; given values win."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main


def write_lora(path: Path) -> None:
    """A file `check_loras` takes for a LoRA (the CLI reads no weights): one LoRA key."""
    import numpy as np
    from safetensors.numpy import save_file

    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({"lora_unet_x.lora_down.weight": np.zeros((1, 1), np.float32)}, str(path))


def stored(capsys: pytest.CaptureFixture[str], job_id: int) -> dict[str, object]:
    assert main(["show", str(job_id), "--json"]) == 0
    return dict(json.loads(capsys.readouterr().out))


def test_submit_applies_a_lightning_loras_settings_and_says_so(
    capsys: pytest.CaptureFixture[str], easel_home: Path
) -> None:
    write_lora(easel_home / "models" / "lora" / "sdxl_lightning_4step_lora.safetensors")
    assert main(["submit", "a red circle <lora:sdxl_lightning_4step_lora>"]) == 0
    out, err = capsys.readouterr()
    assert err == "note: SDXL-Lightning 4-step LoRA: 4 steps, CFG 0, schedule trailing timesteps\n"
    job = stored(capsys, int(out))
    assert (job["steps"], job["cfg"], job["scheduler"]) == (4, 0.0, "Euler")
    assert json.loads(str(job["scheduler_config"])) == {"timestep_spacing": "trailing"}
    assert main(["show", out.strip()]) == 0
    assert "schedule    trailing timesteps" in capsys.readouterr().out

    given = ["submit", "x <lora:sdxl_lightning_4step_lora>", "--steps", "6", "--scheduler", "DDIM"]
    assert main(given) == 0
    out, err = capsys.readouterr()
    assert err == "note: SDXL-Lightning 4-step LoRA: CFG 0\n"
    job = stored(capsys, int(out))
    assert (job["steps"], job["cfg"], job["scheduler"], job["scheduler_config"]) == (
        6, 0.0, "DDIM", "",
    )  # fmt: skip


def test_an_edit_takes_a_turbo_loras_steps_unless_given(
    capsys: pytest.CaptureFixture[str], easel_home: Path
) -> None:
    from tests.edit_models import write_kontext_index

    write_kontext_index(easel_home / "models" / "kontext")  # submit reads no weights
    write_lora(easel_home / "models" / "lora" / "FLUX.1-Turbo-Alpha.safetensors")
    assert main(["submit", "a cat", "--seed", "3"]) == 0
    capsys.readouterr()
    instruction = "make it night <lora:FLUX.1-Turbo-Alpha:1>"
    assert main(["edit", "1", instruction, "--model", "kontext"]) == 0
    out, err = capsys.readouterr()
    assert err == "note: FLUX.1-Turbo-Alpha 8-step LoRA: 8 steps\n"  # guidance 3.5 already
    job = stored(capsys, int(out))
    assert (job["kind"], job["steps"], job["cfg"]) == ("edit", 8, 3.5)
    assert main(["edit", "1", instruction, "--model", "kontext", "--steps", "12"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and stored(capsys, int(out))["steps"] == 12

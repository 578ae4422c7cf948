"""LTX-Video's distilled releases (0.9.7 and 0.9.8 distilled) run as they are meant to: told
by their name, their jobs take the list of timesteps and guidance 1 diffusers' docs give
them (prompts/few_step.py) where the artist set none, stored with the job; the clip is
stock `LTXConditionPipeline`'s called with `timesteps=` that list and `guidance_scale=1`,
exactly, and across a pause resumed by a fresh runner.

On the tiny LTX-Video 0.9.5+ folder (tiny.ltx) saved under a distilled release's name.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from app.engine.generation.files.architecture import Architecture
from app.engine.generation.files.sources import ModelInfo, ModelSearchPath, ModelSource
from app.engine.generation.outcome import OutcomeKind
from app.engine.generation.prompts.few_step import (
    LTX_DISTILLED_TIMESTEPS,
    job_defaults,
    recognise_model,
)
from app.engine.jobs.params import InvalidParameters
from tests.engine.generation.test_ltx import Written, clip, ltx_params, max_frame_diff
from tests.engine.generation.test_ltx import written as written
from tests.engine.generation.tiny_architectures import model_info, pause_at, runner_for

pytestmark = [
    pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning"),
]

NAME = "LTX-Video-0.9.8-13B-distilled"  # Lightricks' diffusers folder
NOTE = (
    "LTX-Video distilled 8-step model: 8 steps, CFG 1, "
    "schedule timesteps 1000 993 987 981 975 909 725 0.03"
)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from app.testing.tiny.ltx import write_tiny_ltx_condition

    models = tmp_path_factory.mktemp("ltx-distilled")
    write_tiny_ltx_condition(models / NAME)
    return models


@pytest.fixture(scope="module")
def model(models: Path) -> ModelInfo:
    return model_info(models / NAME, NAME)


def test_the_distilled_releases_are_told_by_name_within_ltx_video_0_9_5_plus() -> None:
    def recognised(name: str, architecture: Architecture = Architecture.LTX_CONDITION) -> bool:
        info = ModelInfo(name, Path("/models") / name, ModelSource.USER, architecture=architecture)
        return recognise_model(info) is not None

    released = [
        "ltxv-13b-0.9.7-distilled.safetensors", "ltxv-13b-0.9.7-distilled-fp8.safetensors",
        "ltxv-13b-0.9.8-distilled.safetensors", "ltxv-2b-0.9.8-distilled.safetensors",
        "ltxv-2b-0.9.8-distilled-fp8.safetensors", "ltxv-13b-0.9.8-distilled-Q8_0.gguf",
        "Lightricks/LTX-Video-0.9.7-distilled", NAME,
    ]  # fmt: skip
    assert all(recognised(name) for name in released)
    others = ["ltxv-13b-0.9.8-dev.safetensors", "ltxv-2b-0.9.6-distilled-04-25.safetensors",
              "ltx-video-2b-v0.9.5.safetensors", "Lightricks/LTX-Video-0.9.7-dev"]  # fmt: skip
    assert not any(recognised(name) for name in others)
    assert not recognised(NAME, Architecture.LTX_VIDEO)  # a distilled name, another family


def test_a_distilled_model_defaults_to_its_timesteps_without_cfg_and_equals_stock(
    models: Path, model: ModelInfo, written: Written, tmp_path: Path
) -> None:
    """Its defaults as a job stores them; the clip equals stock called with `timesteps=`
    and `guidance_scale=1` (unlike the family's own 8-step schedule), and a pause at step 3
    resumes in a fresh runner to the same frames."""
    from diffusers import LTXConditionPipeline

    search = ModelSearchPath(user=(models,))
    asked = ltx_params(model=NAME, negative_prompt="blurry")
    applied = job_defaults(asked, explicit=(), search=search)
    params = applied.params.validated()
    assert (params.steps, params.cfg) == (8, 1.0) and applied.note() == NOTE
    assert json.loads(params.scheduler_config) == {"timesteps": LTX_DISTILLED_TIMESTEPS}
    told = job_defaults(asked, explicit=("steps", "cfg"), search=search).params
    assert (told.steps, told.cfg, told.scheduler_config) == (asked.steps, asked.cfg, "")

    runner = runner_for(model)
    whole = written.of(clip(runner, params, tmp_path, "whole"))
    pipe = LTXConditionPipeline.from_pretrained(models / NAME, local_files_only=True)
    pipe.set_progress_bar_config(disable=True)
    torch.manual_seed(params.seed)
    theirs = pipe(
        prompt=params.prompt, negative_prompt=params.negative_prompt, height=params.height,
        width=params.width, num_frames=params.frames, frame_rate=params.fps,
        timesteps=LTX_DISTILLED_TIMESTEPS, guidance_scale=1.0,
        generator=torch.Generator().manual_seed(params.seed), output_type="pil",
    ).frames[0]  # fmt: skip
    assert max_frame_diff(whole, [np.asarray(f, dtype=np.int16) for f in theirs]) == 0
    own_schedule = written.of(clip(runner, replace(params, scheduler_config=""), tmp_path, "own"))
    assert max_frame_diff(whole, own_schedule) > 0  # the list is what ran

    assert clip(runner, params, tmp_path, "paused", on_step=pause_at(3)).kind is OutcomeKind.PAUSED
    resumed = clip(runner_for(model), params, tmp_path, "paused")
    assert resumed.resumed_from is not None and resumed.resumed_from.step == 3
    assert max_frame_diff(written.of(resumed), whole) == 0


def test_a_list_of_timesteps_is_checked_and_refused_where_no_sampler_runs_one(
    models: Path,
) -> None:
    from app.engine.generation.request_checks import check_runnable
    from app.testing.tiny.ltx import write_tiny_ltx

    write_tiny_ltx(models / "old")  # LTX-Video 0.9.1: its sampler makes its own timesteps
    search = ModelSearchPath(user=(models,))
    listed = ltx_params(model=NAME, steps=3, scheduler_config='{"timesteps": [1000, 500, 1]}')
    assert check_runnable(listed.validated(), search).name == NAME
    refusals = {
        replace(listed, steps=4): "the scheduler config's 3 timesteps are 3 steps, not 4",
        replace(listed, scheduler_config='{"timesteps": [500, 1000, 1]}'):
            "the scheduler config's timesteps must fall from at most 1000 to above 0, "
            "not [500, 1000, 1]",
    }  # fmt: skip
    for params, sentence in refusals.items():
        with pytest.raises(InvalidParameters) as refused:
            params.validated()
        assert str(refused.value) == sentence
    with pytest.raises(InvalidParameters) as refused:
        check_runnable(replace(listed, model="old").validated(), search)
    assert str(refused.value) == (
        "LTX-Video models make their own timesteps and run no list of them (a distilled "
        "LTX-Video's); clear the scheduler config's timesteps"
    )


def test_the_command_line_says_and_stores_the_distilled_defaults_and_show_prints_them(
    models: Path, easel_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What a worker here or on another machine runs is the stored job: its 8 steps, CFG 1
    and timesteps; steps given on the command line keep the family's own schedule."""
    from app.cli import main
    from app.engine.jobs.queue import params_of
    from app.engine.store.opening import open_queue

    (easel_home / "models").mkdir(parents=True)
    (easel_home / "models" / NAME).symlink_to(models / NAME)
    submit = ["submit", "a cat", "--video", "--frames", "17", "--size", "64x32", "--model", NAME]
    assert main(submit) == 0
    job_id, note = capsys.readouterr()
    assert note == f"note: {NOTE}\n"
    assert main([*submit, "--steps", "20"]) == 0
    assert capsys.readouterr().err == "note: LTX-Video distilled 8-step model: CFG 1\n"
    jobs = sorted(open_queue(easel_home / "easel.db").jobs(), key=lambda job: job.id or 0)
    distilled, told = (params_of(job) for job in jobs)
    assert (distilled.steps, distilled.cfg) == (8, 1.0)
    assert json.loads(distilled.scheduler_config) == {"timesteps": LTX_DISTILLED_TIMESTEPS}
    assert (told.steps, told.cfg, told.scheduler_config) == (20, 1.0, "")
    assert main(["show", job_id.strip()]) == 0
    assert "timesteps 1000 993 987 981 975 909 725 0.03" in capsys.readouterr().out


def test_the_native_api_stores_the_distilled_defaults_where_the_body_set_none(
    models: Path, easel_home: Path
) -> None:
    from app.engine.store.opening import open_queue
    from tests.server.test_server_api import running

    shutil.copytree(models / NAME, easel_home / "models" / NAME)  # a server's: inside its folders
    queue = open_queue(easel_home / "easel.db")
    body = {"prompt": "a cat", "model": NAME, "width": 64, "height": 32, "frames": 17}
    with running(queue) as api:
        taken = api.client.post("/api/v1/jobs", json=body)
        told = api.client.post("/api/v1/jobs", json={**body, "steps": 6, "cfg": 3.0})
    assert taken.status_code == 201 and told.status_code == 201, (taken.text, told.text)
    [job], [own] = taken.json()["jobs"], told.json()["jobs"]
    assert (job["steps"], job["cfg"]) == (8, 1.0)
    assert job["scheduler_config"] == {"timesteps": LTX_DISTILLED_TIMESTEPS}
    assert (own["steps"], own["cfg"], "scheduler_config" in own) == (6, 3.0, False)


def test_the_window_s_model_list_gives_a_distilled_folder_its_few_step_settings(
    models: Path,
) -> None:
    """What the form takes when the artist picks it (tests/ui/test_few_step_form.py)."""
    from app.engine.settings import Settings
    from app.ui.wiring import model_choices

    choices = model_choices(Settings(models_dir=str(models)))
    few_step = next(choice for choice in choices if choice.name == NAME).few_step
    assert few_step is not None
    assert (few_step.steps, few_step.cfg, few_step.sampler) == (8, 1.0, "Euler")
    assert json.loads(few_step.schedule) == {"timesteps": LTX_DISTILLED_TIMESTEPS}

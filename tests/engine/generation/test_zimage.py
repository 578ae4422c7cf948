"""Z-Image through Easel's own loop: the stock ZImagePipeline's image, exactly.

On a tiny random Z-Image (tiny_zimage: a Qwen3 text encoder with a chat-template tokenizer,
the single-stream DiT, Flux's VAE) saved as a diffusers folder: the same image as
`ZImagePipeline` called as its users call it (with a negative prompt, without, and at
Turbo's guidance 0), img2img equal to `ZImageImg2ImgPipeline`, a pause (or a crash after a
rolling checkpoint) resumed in a fresh process to the uninterrupted image, and what it
cannot run refused at submit in one sentence.
"""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from app.engine.generation.architecture import Architecture, Prediction, detect_folder
from app.engine.generation.checkpoint import load_checkpoint
from app.engine.generation.families import family_of
from app.engine.generation.outcome import OutcomeKind
from app.engine.generation.request_checks import check_runnable
from app.engine.generation.runner import Runner
from app.engine.generation.sources import ModelInfo, ModelSearchPath
from app.engine.jobs.params import GenerationParams
from app.errors import BadInput
from tests.engine.generation.test_img2img import init_png
from tests.engine.generation.test_inpaint import MASK_DIGEST
from tests.engine.generation.tiny_architectures import (
    Crash,
    checkpoint_then_crash,
    generate,
    go_on,
    max_diff,
    model_info,
    params_for,
    pause_at,
    pixels,
    runner_for,
)

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

STEPS, PAUSE_AT = 4, 2


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from app.engine.generation.tiny_zimage import write_tiny_zimage

    return write_tiny_zimage(tmp_path_factory.mktemp("zimage-models") / "zimage")


@pytest.fixture(scope="module")
def model(folder: Path) -> ModelInfo:
    return model_info(folder, "m")


@pytest.fixture(scope="module")
def runner(model: ModelInfo) -> Runner:
    return runner_for(model)


@pytest.fixture(scope="module")
def stock_pipe(folder: Path) -> Any:
    from diffusers import ZImagePipeline

    pipe = ZImagePipeline.from_pretrained(folder, local_files_only=True)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def zimage_params(**changes: Any) -> GenerationParams:
    return params_for("m", **{"steps": STEPS, "cfg": 5.0, **changes})


def stock(pipe: Any, params: GenerationParams) -> np.ndarray:
    """As its model card calls it (the pipeline's own scheduler, its defaults otherwise)."""
    image = pipe(
        prompt=params.prompt,
        negative_prompt=params.negative_prompt or None,
        height=params.height,
        width=params.width,
        num_inference_steps=params.steps,
        guidance_scale=params.cfg,
        generator=torch.Generator().manual_seed(params.seed),
    ).images[0]
    return pixels(image)


def test_a_tiny_zimage_folder_is_detected_as_zimage_with_flow_prediction(
    model: ModelInfo,
) -> None:
    assert model.architecture is Architecture.ZIMAGE and model.prediction is Prediction.FLOW
    assert model.label.startswith("Z-Image")


def test_a_zimage_folder_without_its_text_encoder_names_the_missing_part(
    folder: Path, tmp_path: Path
) -> None:
    """Detection from model_index.json alone: a folder saved without the Qwen3 encoder."""
    broken = tmp_path / "no-encoder"
    shutil.copytree(folder, broken, ignore=shutil.ignore_patterns("text_encoder"))
    index = json.loads((broken / "model_index.json").read_text())
    (broken / "model_index.json").write_text(json.dumps({**index, "text_encoder": [None, None]}))
    detected = detect_folder(broken)
    assert not detected.supported
    assert detected.unsupported_reason == "the Z-Image pipeline has no text_encoder"


def test_easels_image_equals_the_stock_pipeline(
    runner: Runner, stock_pipe: Any, tmp_path: Path
) -> None:
    """With a negative prompt, with none (the stock pipeline encodes ""), at Turbo's
    guidance 0 (no CFG: one transformer call per step) and at a non-square size."""
    cases: list[dict[str, Any]] = [
        {}, {"negative_prompt": ""}, {"cfg": 0.0, "steps": 3}, {"width": 96, "height": 64},
    ]  # fmt: skip
    images = []
    for index, changes in enumerate(cases):
        params = zimage_params(**changes)
        ours = generate(runner, params, tmp_path, f"ours-{index}")
        assert max_diff(ours, stock(stock_pipe, params)) == 0, changes
        images.append(ours)
    assert max_diff(images[0], images[1]) > 0  # the negative prompt does reach the model


def test_img2img_equals_the_stock_img2img_pipeline(
    runner: Runner, stock_pipe: Any, tmp_path: Path
) -> None:
    """ZImageImg2ImgPipeline skips int(steps - steps * strength) steps, as the other flow
    img2img pipelines: 4 steps at 0.6 run 3."""
    from diffusers import ZImageImg2ImgPipeline

    pipe: Any = ZImageImg2ImgPipeline(**stock_pipe.components)
    pipe.set_progress_bar_config(disable=True)
    for strength, steps in ((0.6, 4), (1.0, 2)):
        params = zimage_params(init_image="job:1", strength=strength, steps=steps)
        out = tmp_path / f"ours-{steps}-{strength}.png"
        runner.run(
            params, output_path=out, checkpoint_path=tmp_path / "x.ckpt", on_step=go_on,
            init_image=init_png(),
        )  # fmt: skip
        reference = pipe(
            prompt=params.prompt, image=Image.open(io.BytesIO(init_png())), strength=strength,
            negative_prompt=params.negative_prompt, height=params.height, width=params.width,
            num_inference_steps=steps, guidance_scale=params.cfg,
            generator=torch.Generator().manual_seed(params.seed),
        ).images[0]  # fmt: skip
        assert max_diff(pixels(out), pixels(reference)) == 0, (strength, steps)


def test_a_checkpoint_carries_both_prompts_hidden_states_and_the_step_index(
    runner: Runner, tmp_path: Path
) -> None:
    ckpt = tmp_path / "job.ckpt"
    paused = runner.run(
        zimage_params(), output_path=tmp_path / "job.png", checkpoint_path=ckpt,
        on_step=pause_at(PAUSE_AT),
    )  # fmt: skip
    assert paused.kind is OutcomeKind.PAUSED
    saved = load_checkpoint(ckpt).checkpoint
    assert saved.family == "zimage" == family_of(runner.load("m").pipe).name
    assert set(saved.conditioning) == {"prompt_embeds", "negative_embeds"}
    assert saved.latents.dtype == torch.float32
    assert saved.scheduler_class == "FlowMatchEulerDiscreteScheduler"
    assert saved.scheduler_state["step_index"] == PAUSE_AT


Job = tuple[ModelInfo, GenerationParams, Path, Path, bytes | None]


def _resume_in_child(jobs: list[Job]) -> None:
    for model, params, out, ckpt, image in jobs:
        outcome = runner_for(model).run(
            params, output_path=out, checkpoint_path=ckpt, on_step=go_on, init_image=image
        )
        assert outcome.kind is OutcomeKind.COMPLETED and outcome.resumed_from is not None


def test_a_pause_and_a_crash_resume_in_a_fresh_process_to_the_same_image(
    model: ModelInfo, runner: Runner, tmp_path: Path, fresh_process: Callable[..., Any]
) -> None:
    """Paused at step 2 (CFG, Turbo's guidance 0, img2img), and a crash after a rolling
    checkpoint: a new process (a worker after a restart) finishes each to the image of an
    uninterrupted run."""
    cases = [
        (zimage_params(), None),
        (zimage_params(cfg=0.0), None),
        (zimage_params(init_image="job:1", strength=0.8, steps=5), init_png()),
    ]
    jobs: list[Job] = []
    for index, (params, image) in enumerate(cases):
        out, ckpt = tmp_path / f"job-{index}.png", tmp_path / f"job-{index}.ckpt"
        paused = runner.run(
            params, output_path=out, checkpoint_path=ckpt, on_step=pause_at(PAUSE_AT),
            init_image=image,
        )  # fmt: skip
        assert paused.kind is OutcomeKind.PAUSED
        jobs.append((model, params, out, ckpt, image))
    crashed = tmp_path / "crashed.png", tmp_path / "crashed.ckpt"
    with pytest.raises(Crash):
        runner.run(
            zimage_params(seed=99), output_path=crashed[0], checkpoint_path=crashed[1],
            on_step=checkpoint_then_crash(PAUSE_AT),
        )  # fmt: skip
    assert crashed[1].exists()
    jobs.append((model, zimage_params(seed=99), *crashed, None))
    fresh_process(_resume_in_child, jobs)  # spawned, as a worker after a crash
    for index, (_, params, out, ckpt, image) in enumerate(jobs):
        done = runner.run(
            params, output_path=tmp_path / f"reference-{index}.png",
            checkpoint_path=tmp_path / f"reference-{index}.ckpt", on_step=go_on,
            init_image=image,
        )  # fmt: skip
        assert done.image_path is not None and not ckpt.exists()
        assert max_diff(pixels(done.image_path), pixels(out)) == 0, params


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"scheduler": "DPM++ 2M"}, r"Z-Image models run with the Euler sampler \(flow matching\)"),
        ({"width": 72}, "Z-Image draws sizes in multiples of 16 pixels, not 72x64"),
        (
            {"init_image": "job:1", "mask": MASK_DIGEST},
            "Z-Image models cannot inpaint in Easel yet; clear the mask",
        ),
    ],
)
def test_what_zimage_cannot_run_is_refused_at_submit_in_one_sentence(
    folder: Path, changes: dict[str, Any], message: str
) -> None:
    search = ModelSearchPath(user=(folder.parent,))
    base = params_for("zimage", steps=STEPS)
    assert check_runnable(base, search).architecture is Architecture.ZIMAGE
    with pytest.raises(BadInput, match=message):
        check_runnable(params_for("zimage", steps=STEPS, **changes), search)

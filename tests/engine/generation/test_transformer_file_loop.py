"""Flux.1 and SD 3.5 from the files artists have, through Easel's own loop.

test_transformer_files.py proves that the pipeline Easel assembles from an all-in-one file,
a ComfyUI split layout or a GGUF Q8_0 diffusion model holds its twin's weights; here the
loop runs on those pipelines: its image is the stock pipeline's on the same components
(max pixel difference 0), and a job paused at step k on a GGUF file resumes in a fresh
process to the image of an uninterrupted run.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from app.engine.generation.device import CPU
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.files.sources import ModelInfo
from app.engine.generation.load.pipelines import SingleFileConfigs, load_pipeline
from app.engine.generation.outcome import OutcomeKind, StepDecision
from app.engine.jobs.params import GenerationParams
from tests.engine.generation.file_jobs import paused_jobs_resume_in_a_fresh_process, runner_on
from tests.engine.generation.tiny_architectures import max_diff, model_info, pixels
from tests.engine.generation.tiny_transformer_files import (
    FILE_NAMES,
    write_gguf,
    write_tiny_layouts,
)

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

FAMILIES = (Architecture.FLUX1, Architecture.SD3)
LAYOUTS = ("file", "split", "gguf")
STEPS, PAUSE_AT = 4, 2


@pytest.fixture(scope="module")
def layouts(tmp_path_factory: pytest.TempPathFactory) -> dict[Architecture, dict[str, Any]]:
    found: dict[Architecture, dict[str, Any]] = {}
    for arch in FAMILIES:
        layout = write_tiny_layouts(arch, tmp_path_factory.mktemp(arch.value))
        gguf = layout.split_model.with_name(f"{FILE_NAMES[arch]}-Q8_0.gguf")
        write_gguf(load_file(str(layout.split_model)), gguf, arch)
        files = {"file": layout.all_in_one, "split": layout.split_model, "gguf": gguf}
        found[arch] = {"configs": layout.configs, **files}
    return found


def params_for(arch: Architecture, **changes: Any) -> GenerationParams:
    # The tiny SD3 transformer's native side is 16 px: beyond twice that the runner tiles the
    # VAE (as for every family's big images), which the stock pipeline never does.
    sd3 = {"negative_prompt": "a dog", "width": 32, "height": 32}
    base: dict[str, Any] = {
        "prompt": "the cat", "model": "m", "steps": STEPS, "cfg": 3.5, "width": 64,
        "height": 48, "seed": 1234, **(sd3 if arch is Architecture.SD3 else {}),
    }  # fmt: skip
    return GenerationParams(**{**base, **changes})


def stock_image(model: ModelInfo, configs: Path, params: GenerationParams) -> Any:
    """The stock pipeline of the family, built from the components Easel assembled from
    the files, called as its users call it."""
    pipe = load_pipeline(model, CPU, SingleFileConfigs(configs)).pipe
    stock = type(pipe)(**pipe.components)
    stock.set_progress_bar_config(disable=True)
    negative = {"negative_prompt": params.negative_prompt} if params.negative_prompt else {}
    image = stock(
        params.prompt, num_inference_steps=params.steps, guidance_scale=params.cfg,
        height=params.height, width=params.width,
        generator=torch.Generator("cpu").manual_seed(params.seed), **negative,
    ).images[0]  # fmt: skip
    return pixels(image)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("arch", FAMILIES, ids=lambda a: a.value)
def test_the_loop_on_each_file_layout_draws_the_stock_pipelines_image(
    layouts: dict[Architecture, dict[str, Any]], arch: Architecture, layout: str, tmp_path: Path
) -> None:
    model, configs = model_info(layouts[arch][layout]), layouts[arch]["configs"]
    assert model.supported, model.unsupported_reason
    params = params_for(arch)
    outcome = runner_on(model, configs).run(
        params, output_path=tmp_path / "ours.png", checkpoint_path=tmp_path / "ours.ckpt",
        on_step=lambda _p: StepDecision.CONTINUE,
    )  # fmt: skip
    assert outcome.kind is OutcomeKind.COMPLETED and outcome.image_path is not None
    assert max_diff(pixels(outcome.image_path), stock_image(model, configs, params)) == 0


def test_a_job_paused_on_a_gguf_file_resumes_in_a_fresh_process_to_the_same_image(
    layouts: dict[Architecture, dict[str, Any]], tmp_path: Path, fresh_process: Callable[..., Any]
) -> None:
    jobs = [
        (model_info(layouts[arch]["gguf"]), layouts[arch]["configs"], params_for(arch, seed=7))
        for arch in FAMILIES
    ]
    paused_jobs_resume_in_a_fresh_process(jobs, PAUSE_AT, tmp_path, fresh_process)

"""Few-step LoRAs (prompts/few_step.py): told by name or metadata, their settings a job's
defaults where the artist set none, and the job equal to the stock pipeline run as the
LoRA's authors run it (Qwen-Image-Lightning: `load_lora_weights` and the scheduler built
`FlowMatchEulerDiscreteScheduler.from_config(published_config)`), exact across a pause."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from PIL import Image

from app.engine.generation.device import CPU
from app.engine.generation.files.sources import ModelSearchPath
from app.engine.generation.load.pipelines import PipelineCache
from app.engine.generation.outcome import OutcomeKind
from app.engine.generation.prompts.few_step import (
    QWEN_LIGHTNING_SCHEDULER,
    lora_defaults,
    recognise,
)
from app.engine.generation.runner import Runner
from app.engine.jobs.params import GenerationParams, InvalidParameters
from tests.engine.generation.tiny_architectures import go_on, max_diff, model_info, pause_at, pixels

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

LIGHTNING = "Qwen-Image-Lightning-4steps-V1.0"


@pytest.mark.parametrize(
    ("name", "label", "steps", "cfg"),
    [
        ("Qwen-Image-Lightning-8steps-V1.1", "Qwen-Image-Lightning", 8, 1.0),
        ("Qwen-Image-Edit-2509-Lightning-4steps-V1.0-bf16", "Qwen-Image-Lightning", 4, 1.0),
        ("Hyper-FLUX.1-dev-16steps-lora", "Hyper-FLUX", 16, 3.5),
        ("FLUX.1-Turbo-Alpha", "FLUX.1-Turbo-Alpha", 8, 3.5),
        ("sdxl_lightning_2step_lora", "SDXL-Lightning", 2, 0.0),
        ("Hyper-SDXL-12steps-CFG-lora", "Hyper-SDXL CFG", 12, 5.0),
        ("Hyper-SDXL-8steps-lora", "Hyper-SDXL", 8, 0.0),
    ],
)
def test_few_step_loras_are_told_by_their_published_file_names(
    name: str, label: str, steps: int, cfg: float
) -> None:
    found = recognise(name)
    assert found is not None and (found.row.label, found.steps, found.row.cfg) == (
        label,
        steps,
        cfg,
    )


@pytest.mark.parametrize("name", ["my-style", "lcm-lora-sdxl", "Hyper-SDXL-1step-lora", "qwen-x"])
def test_other_loras_set_nothing(name: str) -> None:
    assert recognise(name) is None


def test_a_renamed_file_is_told_by_its_kohya_output_name(tmp_path: Path) -> None:
    from safetensors.torch import save_file

    path = tmp_path / "lora" / "fast.safetensors"
    path.parent.mkdir()
    tensors = {"lora_unet_x.lora_down.weight": torch.zeros(1, 1)}
    save_file(tensors, path, metadata={"ss_output_name": "sdxl_lightning_8step_lora"})
    found = recognise("fast", path)
    assert found is not None and (found.row.label, found.steps) == ("SDXL-Lightning", 8)


def lightning_params(**changes: Any) -> GenerationParams:
    base = {"prompt": f"the cat <lora:{LIGHTNING}>", "model": "m", "width": 64, "height": 48}
    return GenerationParams(**{**base, "seed": 7, **changes})


def test_its_settings_fill_what_the_artist_left_and_explicit_values_win(
    lora_folder: Path,
) -> None:
    search = ModelSearchPath(user=(lora_folder.parent,))
    applied = lora_defaults(lightning_params(), explicit=(), search=search)
    assert (applied.params.steps, applied.params.cfg) == (4, 1.0)
    assert json.loads(applied.params.scheduler_config) == QWEN_LIGHTNING_SCHEDULER
    assert applied.note() == "Qwen-Image-Lightning 4-step LoRA: 4 steps, CFG 1, schedule shift 3"
    mine = lora_defaults(lightning_params(steps=6, cfg=2.0), {"steps", "cfg"}, search)
    assert (mine.params.steps, mine.params.cfg, mine.fields) == (6, 2.0, ("scheduler_config",))
    own_sampler = lora_defaults(lightning_params(), {"scheduler"}, search)
    assert own_sampler.params.scheduler_config == "" and own_sampler.fields == ("steps", "cfg")


def test_a_prompt_the_submit_checks_refuse_is_left_for_them_to_refuse(lora_folder: Path) -> None:
    search = ModelSearchPath(user=(lora_folder.parent,))
    twice = lightning_params(prompt=f"<lora:{LIGHTNING}:1> <lora:{LIGHTNING}:0.5>")
    assert lora_defaults(twice, (), search).params == twice


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ('{"shift": "big"}', "the scheduler config's shift cannot be 'big'"),
        ('{"prediction_type": "epsilon"}', "the scheduler config cannot set 'prediction_type'"),
        ('{"timestep_spacing": "odd"}', "timestep_spacing must be one of leading, linspace"),
        ('{"max_shift": NaN}', "the scheduler config's max_shift is out of range"),
        ("[1]", "the scheduler config must be a JSON object"),
    ],
)
def test_a_bad_scheduler_config_is_refused_in_one_sentence(config: str, message: str) -> None:
    with pytest.raises(InvalidParameters, match=message):
        lightning_params(scheduler_config=config).validated()


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from app.testing.tiny.qwen import write_tiny_qwen

    return write_tiny_qwen(tmp_path_factory.mktemp("qwen-models") / "qwen")


@pytest.fixture(scope="module")
def lora_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from app.testing.tiny.qwen import write_tiny_qwen_lora

    folder = tmp_path_factory.mktemp("user-models") / "lora"
    write_tiny_qwen_lora(folder / f"{LIGHTNING}.safetensors")
    return folder


def lightning_runner(folder: Path, lora_folder: Path) -> Runner:
    model = model_info(folder, "m")
    cache = PipelineCache(lora_folders=[lora_folder])
    return Runner(device=CPU, resolve=lambda _n: model, cache=cache, threads=1)


def stock_lightning(folder: Path, lora: Path, params: GenerationParams, config: Any) -> Any:
    """As the Qwen-Image-Lightning card: the scheduler from `config`, the LoRA loaded,
    `true_cfg_scale` 1 and its steps."""
    from diffusers import FlowMatchEulerDiscreteScheduler, QwenImagePipeline

    scheduler = FlowMatchEulerDiscreteScheduler.from_config(config)
    pipe: Any = QwenImagePipeline.from_pretrained(
        folder, scheduler=scheduler, local_files_only=True
    )
    pipe.load_lora_weights(str(lora))
    pipe.set_progress_bar_config(disable=True)
    image = pipe(
        prompt="the cat", negative_prompt=" ", width=params.width, height=params.height,
        num_inference_steps=params.steps, true_cfg_scale=1.0,
        generator=torch.Generator().manual_seed(params.seed),
    ).images[0]  # fmt: skip
    return pixels(image)


def test_a_lightning_job_equals_stock_with_the_published_scheduler_and_resumes_exactly(
    folder: Path, lora_folder: Path, tmp_path: Path
) -> None:
    search = ModelSearchPath(user=(lora_folder.parent,))
    params = lora_defaults(lightning_params(), explicit=(), search=search).params
    runner = lightning_runner(folder, lora_folder)
    out = runner.run(
        params, output_path=tmp_path / "ours.png", checkpoint_path=tmp_path / "ours.ckpt",
        on_step=go_on,
    )  # fmt: skip
    assert out.kind is OutcomeKind.COMPLETED and out.image_path is not None
    ours = pixels(out.image_path)
    with Image.open(out.image_path) as png:  # the PNG records what ran: a drop restores it
        assert json.loads(png.info["easel"])["scheduler_config"] == params.scheduler_config
        settings = png.info["parameters"].splitlines()[-1]
    assert settings.startswith("Steps: 4, Sampler: Euler, CFG scale: 1,")
    assert settings.endswith(f", Scheduler config: {json.dumps(params.scheduler_config)}")
    lora = lora_folder / f"{LIGHTNING}.safetensors"
    assert max_diff(ours, stock_lightning(folder, lora, params, QWEN_LIGHTNING_SCHEDULER)) == 0
    # The schedule mattered: the model's own scheduler draws another image.
    shipped = json.loads((folder / "scheduler" / "scheduler_config.json").read_text())
    assert max_diff(ours, stock_lightning(folder, lora, params, shipped)) > 0
    paused = runner.run(
        params, output_path=tmp_path / "job.png", checkpoint_path=tmp_path / "job.ckpt",
        on_step=pause_at(2),
    )  # fmt: skip
    assert paused.kind is OutcomeKind.PAUSED
    fresh = lightning_runner(folder, lora_folder)
    resumed = fresh.run(
        params, output_path=tmp_path / "job.png", checkpoint_path=tmp_path / "job.ckpt",
        on_step=go_on,
    )  # fmt: skip
    assert resumed.resumed_from is not None
    assert max_diff(pixels(tmp_path / "job.png"), ours) == 0


def test_an_sdxl_lightning_job_equals_stock_with_trailing_euler_and_resumes_exactly(
    tmp_path: Path,
) -> None:
    """SDXL-Lightning's card: `EulerDiscreteScheduler.from_config(config,
    timestep_spacing="trailing")`, the LoRA loaded, `guidance_scale=0`."""
    from diffusers import EulerDiscreteScheduler, StableDiffusionXLPipeline

    from app.engine.generation.files.architecture import Architecture
    from app.testing.tiny.unet import write_tiny_lora, write_tiny_pipeline

    folder = write_tiny_pipeline(tmp_path / "sdxl", architecture=Architecture.SDXL)
    name = "sdxl_lightning_4step_lora"
    lora = write_tiny_lora(tmp_path / "lora" / f"{name}.safetensors", seed=3,
                           architecture=Architecture.SDXL)  # fmt: skip
    asked = GenerationParams(prompt=f"a girl smiling <lora:{name}:1>", model="m", seed=5)
    search = ModelSearchPath(user=(tmp_path,))
    params = lora_defaults(asked, explicit=(), search=search).params
    assert (params.steps, params.cfg, params.scheduler) == (4, 0.0, "Euler")
    runner = lightning_runner(folder, lora.parent)
    outcomes = [
        runner.run(params, output_path=tmp_path / f"{name}.png",
                   checkpoint_path=tmp_path / f"{name}.ckpt", on_step=on_step)
        for name, on_step in (("ours", go_on), ("job", pause_at(2)), ("job", go_on))
    ]  # fmt: skip
    assert [o.kind for o in outcomes][1] is OutcomeKind.PAUSED and outcomes[2].resumed_from
    pipe: Any = StableDiffusionXLPipeline.from_pretrained(folder, local_files_only=True)
    pipe.load_lora_weights(str(lora))
    pipe.set_progress_bar_config(disable=True)
    shipped = pipe.scheduler.config
    images = []
    for spacing in ("trailing", shipped.timestep_spacing):
        pipe.scheduler = EulerDiscreteScheduler.from_config(shipped, timestep_spacing=spacing)
        images.append(pixels(pipe(
            "a girl smiling", num_inference_steps=4, guidance_scale=0, width=64, height=64,
            generator=torch.Generator().manual_seed(5),
        ).images[0]))  # fmt: skip
    ours = pixels(tmp_path / "ours.png")
    assert max_diff(ours, images[0]) == 0
    assert max_diff(ours, images[1]) > 0  # the schedule mattered
    assert max_diff(ours, pixels(tmp_path / "job.png")) == 0

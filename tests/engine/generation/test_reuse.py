"""What repeats between jobs is not done again: the same prompt on the same model and LoRAs
reuses the text encoders' very tensors, and a LoRA switch keeps the base model."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.generation import denoise
from app.engine.generation.device import CPU
from app.engine.generation.families.unet import PROMPT_EMBEDS
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.load.pipelines import PipelineCache
from app.engine.generation.prompts.loras import parse_loras
from app.engine.generation.runner import Runner
from tests.engine.generation.tiny_architectures import (
    generate,
    model_info,
    params_for,
    tiny_folders,
)

__all__ = ["tiny_folders"]

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")


@pytest.fixture(scope="module")
def lora_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from app.testing.tiny.unet import write_tiny_lora

    folder = tmp_path_factory.mktemp("loras")
    write_tiny_lora(folder / "style.safetensors", seed=1)
    return folder


@pytest.mark.parametrize("arch", [Architecture.SD1, Architecture.SDXL])
def test_the_same_prompt_reuses_the_text_encoder_outputs_exactly(
    tiny_folders: dict[Architecture, Path], arch: Architecture, tmp_path: Path
) -> None:
    model = model_info(tiny_folders[arch], "m")
    runner = Runner(device=CPU, resolve=lambda _n: model, threads=1)
    pipe = runner.load("m").pipe
    first = denoise.start(pipe, params_for("m"))
    again = denoise.start(pipe, params_for("m", seed=99, steps=3))  # other seed and steps
    assert again.conditioning[PROMPT_EMBEDS] is first.conditioning[PROMPT_EMBEDS]
    assert again.conditioning is not first.conditioning  # each job's dict is its own
    other = denoise.start(pipe, params_for("m", prompt="a dog"))
    assert other.conditioning[PROMPT_EMBEDS] is not first.conditioning[PROMPT_EMBEDS]
    # And what is reused is what encoding gives: a fresh runner makes the same image.
    reused = generate(runner, params_for("m"), tmp_path, "reused")
    fresh = Runner(device=CPU, resolve=lambda _n: model, threads=1)
    assert (generate(fresh, params_for("m"), tmp_path, "fresh") == reused).all()


def test_a_lora_switch_keeps_the_base_model_and_encodes_the_prompt_again(
    tiny_folders: dict[Architecture, Path], lora_folder: Path
) -> None:
    model = model_info(tiny_folders[Architecture.SD1], "m")
    cache = PipelineCache(lora_folders=[lora_folder])
    runner = Runner(device=CPU, resolve=lambda _n: model, cache=cache, threads=1)
    plain = runner.load("m")
    before = denoise.start(plain.pipe, params_for("m")).conditioning[PROMPT_EMBEDS]
    styled = runner.load("m", parse_loras("<lora:style:0.8>")[1])
    assert styled.pipe is plain.pipe and cache.loads == 1  # the base was not loaded again
    after = denoise.start(styled.pipe, params_for("m")).conditioning[PROMPT_EMBEDS]
    assert after is not before  # the LoRA changed the text encoder: encoded again
    assert runner.load("m").loras == () and cache.loads == 1

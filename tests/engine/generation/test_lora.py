"""LoRA: `<lora:name:weight>` in the prompt, exact against diffusers, never leaking."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.engine.generation.device import CPU
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.files.sources import ModelSearchPath, list_models
from app.engine.generation.load.pipelines import PipelineCache
from app.engine.generation.prompts.loras import LoraError, LoraRef, check_loras, parse_loras
from app.engine.generation.runner import Runner
from tests.engine.generation.tiny_architectures import (
    generate,
    max_diff,
    model_info,
    params_for,
    stock_image,
    tiny_folders,
)

__all__ = ["tiny_folders"]

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")


@pytest.fixture(scope="module")
def models_root(
    tmp_path_factory: pytest.TempPathFactory, tiny_folders: dict[Architecture, Path]
) -> Path:
    """A user models folder: lora/style.safetensors and lora/ink.safetensors (SD 1.x),
    lora/xl-style.safetensors (SDXL) and a checkpoint wrongly put in lora/."""
    from app.testing.tiny.unet import write_tiny_lora, write_tiny_single_file

    root = tmp_path_factory.mktemp("user-models")
    write_tiny_lora(root / "lora" / "style.safetensors", seed=1)
    write_tiny_lora(root / "lora" / "ink.safetensors", seed=2)
    write_tiny_lora(root / "lora" / "xl-style.safetensors", seed=3, architecture=Architecture.SDXL)
    write_tiny_single_file(root / "lora" / "not-a-lora.safetensors")
    return root


def runner_with_loras(folder: Path, models_root: Path) -> Runner:
    model = model_info(folder, "m")
    cache = PipelineCache(lora_folders=[models_root / "lora"])
    return Runner(device=CPU, resolve=lambda _n: model, cache=cache, threads=1)


def stock_with_loras(folder: Path, loras: dict[Path, float], params: Any) -> Any:
    """diffusers' own way: a fresh pipeline, load_lora_weights, set_adapters."""
    from diffusers import DiffusionPipeline

    pipe = DiffusionPipeline.from_pretrained(folder, local_files_only=True)
    names = []
    for index, path in enumerate(loras):
        pipe.load_lora_weights(str(path), adapter_name=f"a{index}")
        names.append(f"a{index}")
    pipe.set_adapters(names, adapter_weights=list(loras.values()))
    return stock_image(pipe, params)


def test_the_prompt_loses_its_tags_and_keeps_the_weights() -> None:
    text, refs = parse_loras("a cat <lora:style:0.8>, in the rain <LORA:ink> <lora:x:.5:1>")
    assert text == "a cat, in the rain"
    assert refs == [LoraRef("style", 0.8), LoraRef("ink", 1.0), LoraRef("x", 0.5)]
    with pytest.raises(LoraError, match="'style': weight 'strong' is not a number"):
        parse_loras("<lora:style:strong>")
    with pytest.raises(LoraError, match="more than once"):
        parse_loras("<lora:style:1> <lora:style:0.5>")


def test_unknown_and_broken_loras_are_refused_at_submit_time(models_root: Path) -> None:
    search = ModelSearchPath(user=(models_root,))
    assert [r.name for r in check_loras("x <lora:style:0.5> <lora:ink>", search)] == [
        "style",
        "ink",
    ]
    with pytest.raises(LoraError, match=r"'nope' was not found .*available: ink, not-a-lora"):
        check_loras("a cat <lora:nope:1>", search)
    with pytest.raises(LoraError, match="not a LoRA"):
        check_loras("a cat <lora:not-a-lora:1>", search)
    assert check_loras("no tags here", search) == []
    assert list_models(search) == []  # LoRA files are never listed as models


def test_weight_zero_equals_no_lora_and_weight_one_equals_diffusers(
    tiny_folders: dict[Architecture, Path], models_root: Path, tmp_path: Path
) -> None:
    folder = tiny_folders[Architecture.SD1]
    runner = runner_with_loras(folder, models_root)
    plain = generate(runner, params_for("m"), tmp_path, "plain")
    at_zero = generate(runner, params_for("m", prompt="the cat <lora:style:0>"), tmp_path, "zero")
    assert max_diff(plain, at_zero) == 0
    with_lora = params_for("m", prompt="the cat <lora:style:1>")
    ours = generate(runner, with_lora, tmp_path, "one")
    assert max_diff(ours, plain) > 0  # the LoRA does change the picture
    reference = stock_with_loras(
        folder, {models_root / "lora/style.safetensors": 1.0}, params_for("m")
    )
    assert max_diff(ours, reference) == 0


def test_several_loras_at_once_equal_diffusers_and_never_leak(
    tiny_folders: dict[Architecture, Path], models_root: Path, tmp_path: Path
) -> None:
    folder = tiny_folders[Architecture.SD1]
    runner = runner_with_loras(folder, models_root)
    plain = generate(runner, params_for("m", "DPM++ 2M"), tmp_path, "plain")
    both = params_for("m", "DPM++ 2M", prompt="<lora:style:0.5> the cat <lora:ink:0.8>")
    ours = generate(runner, both, tmp_path, "both")
    loras = {models_root / "lora/style.safetensors": 0.5, models_root / "lora/ink.safetensors": 0.8}
    assert max_diff(ours, stock_with_loras(folder, loras, params_for("m", "DPM++ 2M"))) == 0
    after = generate(runner, params_for("m", "DPM++ 2M"), tmp_path, "after")
    assert max_diff(plain, after) == 0  # the next job without LoRAs gets the plain model


def test_sdxl_lora_equals_diffusers_and_an_sd1_lora_does_not_fit_sdxl(
    tiny_folders: dict[Architecture, Path], models_root: Path, tmp_path: Path
) -> None:
    folder = tiny_folders[Architecture.SDXL]
    runner = runner_with_loras(folder, models_root)
    ours = generate(runner, params_for("m", prompt="the cat <lora:xl-style:0.7>"), tmp_path, "xl")
    lora = {models_root / "lora/xl-style.safetensors": 0.7}
    assert max_diff(ours, stock_with_loras(folder, lora, params_for("m"))) == 0
    with pytest.raises(LoraError, match=r"'style' .* does not fit model 'm' \(SDXL"):
        generate(runner, params_for("m", prompt="the cat <lora:style:1>"), tmp_path, "bad")
    plain = generate(runner, params_for("m"), tmp_path, "plain")  # the worker carries on
    assert max_diff(plain, stock_image(runner.load("m").pipe, params_for("m"))) == 0


def test_png_records_the_prompt_with_its_loras_as_typed(
    tiny_folders: dict[Architecture, Path], models_root: Path, tmp_path: Path
) -> None:
    from PIL import Image

    runner = runner_with_loras(tiny_folders[Architecture.SD1], models_root)
    prompt = "the cat <lora:style:0.8>"
    generate(runner, params_for("m", prompt=prompt), tmp_path, "a")
    with Image.open(tmp_path / "a.png") as image:
        assert image.info["parameters"].startswith(prompt + "\n")

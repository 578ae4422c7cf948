"""Wan 2.2 A14B's two experts as two files (ComfyUI's `wan2.2_t2v_high_noise_14B_fp16` and
`..._low_noise_...`, city96's `...-HighNoise-Q8_0.gguf` and `...-LowNoise-...`), paired into
one model by their names: listed once, loaded as `transformer` and `transformer_2` with the
pair's config folder, and drawing the clip of stock `WanPipeline` with diffusers' own
single-file loads of the two experts (the diffusers folder with `transformer` and
`transformer_2` within 1: the same weights mapped at other alignments, as tiny_wan_files
says), exactly across a pause before the switch; the GGUF pair the stock clip of the same
files (diffusers' GGUF loads).

On a tiny Wan of A14B's shape (tiny_wan_expert_files).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from app.engine.generation.device import CPU
from app.engine.generation.files.expert_files import PAIR_CONFIG, TRANSFORMER_2
from app.engine.generation.files.sources import ModelInfo, ModelSearchPath, list_models
from app.engine.generation.load.pipelines import PipelineCache, SingleFileConfigs
from app.engine.generation.outcome import OutcomeKind
from app.engine.generation.runner import Runner
from tests.engine.generation.test_wan import Written, clip, max_frame_diff, stock, wan_params
from tests.engine.generation.test_wan import written as written
from tests.engine.generation.tiny_architectures import model_info, pause_at
from tests.engine.generation.tiny_wan_expert_files import (
    GGUF_HIGH,
    GGUF_LOW,
    HIGH,
    LOW,
    ExpertFiles,
    stock_from_expert_files,
    write_tiny_expert_files,
)

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

# Timesteps 1000, 858, 602, 9 with the switch at 875: high noise at step 1, low from step 2.
PARAMS = wan_params(model="m", scheduler="UniPC", negative_prompt="blurry", steps=4, frames=5)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> ExpertFiles:
    return write_tiny_expert_files(tmp_path_factory.mktemp("wan-experts"))


def files_runner(files: ExpertFiles, model: ModelInfo) -> Runner:
    cache = PipelineCache(configs=SingleFileConfigs(files.configs))
    return Runner(device=CPU, resolve=lambda _name: model, threads=1, cache=cache)


def test_the_two_experts_are_listed_as_one_model_with_both_parts(files: ExpertFiles) -> None:
    listed = {info.name: info for info in list_models(ModelSearchPath(user=(files.models,)))}
    assert set(listed) == {Path(HIGH).stem, Path(GGUF_HIGH).stem}  # the low-noise ones inside
    for name, twin in ((HIGH, LOW), (GGUF_HIGH, GGUF_LOW)):
        info = listed[Path(name).stem]
        assert info.supported, info.unsupported_reason
        assert info.config_name == PAIR_CONFIG
        parts = {part.kind: part.path.name for part in info.parts}
        assert (parts["transformer"], parts[TRANSFORMER_2]) == (name, twin)


def test_a_high_noise_expert_without_its_twin_is_refused_in_one_sentence(
    files: ExpertFiles, tmp_path: Path
) -> None:
    lonely = tmp_path / "diffusion_models" / HIGH
    lonely.parent.mkdir()
    lonely.symlink_to(files.models / "diffusion_models" / HIGH)
    for folder in ("text_encoders", "vae"):
        (tmp_path / folder).symlink_to(files.models / folder)
    assert model_info(lonely).unsupported_reason == (
        "wan2.2_t2v_high_noise_14B_fp16: the high-noise expert of a Wan 2.2 A14B pair runs "
        f"with its low-noise expert beside it, {LOW}, which is not in diffusion_models/"
    )


def test_the_pair_draws_the_stock_clip_and_resumes_across_the_switch_exactly(
    files: ExpertFiles, written: Written, tmp_path: Path
) -> None:
    model = model_info(files.expert(HIGH), "m")
    done = clip(files_runner(files, model), PARAMS, tmp_path, "pair")
    assert done.kind is OutcomeKind.COMPLETED and done.image_path is not None
    ours = written.frames[done.image_path]
    assert max_frame_diff(ours, stock(stock_from_expert_files(files), PARAMS)) == 0
    from diffusers import WanPipeline

    folder = WanPipeline.from_pretrained(files.folder, local_files_only=True)
    folder.set_progress_bar_config(disable=True)
    assert max_frame_diff(ours, stock(folder, PARAMS)) <= 1
    paused = clip(files_runner(files, model), PARAMS, tmp_path, "paused", on_step=pause_at(1))
    assert paused.kind is OutcomeKind.PAUSED
    resumed = clip(files_runner(files, model), PARAMS, tmp_path, "paused")  # a fresh runner
    assert resumed.resumed_from is not None and resumed.image_path is not None
    assert max_frame_diff(written.frames[resumed.image_path], ours) == 0
    loaded = files_runner(files, model).load("m").pipe
    assert loaded.transformer_2 is not None and loaded.config.boundary_ratio == 0.875
    assert not torch.equal(loaded.transformer.proj_out.weight, loaded.transformer_2.proj_out.weight)


def test_city96_s_gguf_pair_draws_the_stock_clip_of_the_same_files(
    files: ExpertFiles, written: Written, tmp_path: Path
) -> None:
    model = model_info(files.expert(GGUF_HIGH), "m")
    assert model.quantisation == "Q8_0"
    done = clip(files_runner(files, model), PARAMS, tmp_path, "gguf")
    assert done.image_path is not None
    theirs = stock(stock_from_expert_files(files, "gguf-q8_0"), PARAMS)
    assert max_frame_diff(written.frames[done.image_path], theirs) == 0


def test_fp8_experts_pair_and_load_in_fp8_and_a_mixed_pair_is_refused(
    files: ExpertFiles, tmp_path: Path
) -> None:
    from safetensors.torch import load_file, save_file

    folder = tmp_path / "diffusion_models"
    folder.mkdir()
    for folder_name in ("text_encoders", "vae"):
        (tmp_path / folder_name).symlink_to(files.models / folder_name)
    for name in (HIGH, LOW):
        weights = load_file(str(files.expert(name)))
        fp8 = {k: v.to(torch.float8_e4m3fn) if v.ndim == 2 else v for k, v in weights.items()}
        save_file(fp8, str(folder / name.replace("fp16", "fp8_e4m3fn")))
    model = model_info(folder / HIGH.replace("fp16", "fp8_e4m3fn"), "m")
    assert model.supported and model.quantisation == "fp8", model.unsupported_reason
    pipe = files_runner(files, model).load("m").pipe
    for expert in (pipe.transformer, pipe.transformer_2):
        assert expert.blocks[0].ffn.net[0].proj.weight.dtype == torch.float8_e4m3fn
    mixed = tmp_path / "mixed" / "diffusion_models"
    mixed.mkdir(parents=True)
    (mixed / HIGH).symlink_to(files.expert(HIGH))  # fp16, its twin in fp8
    (mixed / LOW).symlink_to(folder / LOW.replace("fp16", "fp8_e4m3fn"))
    for folder_name in ("text_encoders", "vae"):
        (mixed.parent / folder_name).symlink_to(files.models / folder_name)
    assert model_info(mixed / HIGH).unsupported_reason == (
        f"{Path(HIGH).stem}: its low-noise expert {LOW} is stored fp8, the high-noise one "
        "unquantised: give both experts in one precision"
    )

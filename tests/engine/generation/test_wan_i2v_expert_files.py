"""Wan 2.2 I2V A14B's two experts as two files (ComfyUI's `wan2.2_i2v_high_noise_14B_fp16`
and `..._low_noise_...`, city96's `...-HighNoise-Q8_0.gguf` and `...-LowNoise-...`), paired
by their names as T2V A14B's are: listed once as Wan 2.2 I2V with the shipped
`wan2.2-i2v-a14b` folder (no CLIP vision file wanted), loaded as `transformer` and
`transformer_2`, and animating an input image as stock `WanImageToVideoPipeline` does with
diffusers' own single-file loads of the same files, exactly, and across a pause before the
switch; the GGUF pair the stock clip of the same GGUFs. A last image beside the first (stock
takes `last_image` on the experts): the stock clip from the files and from a folder, and
across a pause.

On a tiny Wan 2.2 I2V A14B (tiny_wan_i2v_expert_files; tiny.wan's folder of its shape).
"""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from app.engine.generation.device import CPU
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.files.expert_files import I2V_PAIR_CONFIG, TRANSFORMER_2
from app.engine.generation.files.sources import ModelInfo, ModelSearchPath, list_models
from app.engine.generation.load.pipelines import PipelineCache, SingleFileConfigs
from app.engine.generation.outcome import OutcomeKind
from app.engine.generation.runner import Runner
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.run_inputs import RunInputs
from tests.engine.generation.test_wan import Written, max_frame_diff, wan_params
from tests.engine.generation.test_wan import written as written
from tests.engine.generation.test_wan_image import PNG, WITH_IMAGE, clip_of, runner_in
from tests.engine.generation.test_wan_last_frame import LAST, WITH_BOTH
from tests.engine.generation.tiny_architectures import go_on, model_info, pause_at
from tests.engine.generation.tiny_wan_i2v_expert_files import (
    GGUF_HIGH,
    GGUF_LOW,
    HIGH,
    LOW,
    I2vExpertFiles,
    stock_from_i2v_expert_files,
    write_tiny_i2v_expert_files,
)

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

# The shipped UniPC's timesteps 1000, 858, 602, 9, the switch at 900: high noise at step 1.
PARAMS = wan_params(model="m", scheduler="UniPC", negative_prompt="blurry", steps=4, frames=5,
                    **WITH_IMAGE)  # fmt: skip


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> I2vExpertFiles:
    return write_tiny_i2v_expert_files(tmp_path_factory.mktemp("wan-i2v-experts"))


def files_runner(files: I2vExpertFiles, model: ModelInfo) -> Runner:
    cache = PipelineCache(configs=SingleFileConfigs(files.configs))
    return Runner(device=CPU, resolve=lambda _name: model, threads=1, cache=cache)


def stock_clip(pipe: Any, params: GenerationParams, **extra: Any) -> list[np.ndarray]:
    """Stock `WanImageToVideoPipeline` called with its defaults but for the job's values."""
    frames = pipe(
        image=Image.open(io.BytesIO(PNG)).convert("RGB"),
        prompt=params.prompt,
        negative_prompt=params.negative_prompt or None,
        height=params.height,
        width=params.width,
        num_frames=params.frames,
        num_inference_steps=params.steps,
        guidance_scale=params.cfg,
        generator=torch.Generator().manual_seed(params.seed),
        output_type="pil",
        **extra,
    ).frames[0]
    return [np.asarray(frame, dtype=np.int16) for frame in frames]


def _linked_models(files: I2vExpertFiles, root: Path, experts: tuple[str, ...]) -> Path:
    """A models folder of links to `files`' UMT5 and VAE and to the `experts` named."""
    (root / "diffusion_models").mkdir(parents=True)
    for name in experts:
        (root / "diffusion_models" / name).symlink_to(files.expert(name))
    for folder in ("text_encoders", "vae"):
        (root / folder).symlink_to(files.models / folder)
    return root / "diffusion_models"


def test_the_two_experts_are_listed_as_one_i2v_model_with_both_parts(
    files: I2vExpertFiles,
) -> None:
    listed = {info.name: info for info in list_models(ModelSearchPath(user=(files.models,)))}
    assert set(listed) == {Path(HIGH).stem, Path(GGUF_HIGH).stem}  # the low-noise ones inside
    for name, twin in ((HIGH, LOW), (GGUF_HIGH, GGUF_LOW)):
        info = listed[Path(name).stem]
        assert info.supported, info.unsupported_reason
        assert info.architecture is Architecture.WAN2_2_I2V
        assert info.config_name == I2V_PAIR_CONFIG
        parts = {part.kind: part.path.name for part in info.parts}
        assert (parts["transformer"], parts[TRANSFORMER_2]) == (name, twin)
        assert set(parts) == {"transformer", TRANSFORMER_2, "umt5", "wan_vae"}


def test_an_expert_without_its_twin_is_refused_in_one_sentence(
    files: I2vExpertFiles, tmp_path: Path
) -> None:
    lonely = _linked_models(files, tmp_path / "lonely", (HIGH,))
    assert model_info(lonely / HIGH).unsupported_reason == (
        "wan2.2_i2v_high_noise_14B_fp16: the high-noise expert of a Wan 2.2 A14B pair runs "
        f"with its low-noise expert beside it, {LOW}, which is not in diffusion_models/"
    )
    low = _linked_models(files, tmp_path / "low", (LOW,))
    assert model_info(low / LOW).unsupported_reason == (
        "wan2.2_i2v_low_noise_14B_fp16: an expert of Wan 2.2 I2V A14B runs only with its "
        "twin; Easel pairs them by their names, one with high_noise in it and one with "
        "low_noise (as ComfyUI's wan2.2_i2v_high_noise_14B_fp16.safetensors), and lists "
        "the high-noise one"
    )


def test_the_pair_animates_the_image_as_stock_and_resumes_across_the_switch_exactly(
    files: I2vExpertFiles, written: Written, tmp_path: Path
) -> None:
    model = model_info(files.expert(HIGH), "m")
    done = clip_of(files_runner(files, model), PARAMS, tmp_path, "pair")
    assert done.kind is OutcomeKind.COMPLETED and done.image_path is not None
    ours = written.frames[done.image_path]
    assert len(ours) == PARAMS.frames
    assert max_frame_diff(ours, stock_clip(stock_from_i2v_expert_files(files), PARAMS)) == 0
    paused = clip_of(files_runner(files, model), PARAMS, tmp_path, "paused", on_step=pause_at(1))
    assert paused.kind is OutcomeKind.PAUSED
    resumed = clip_of(files_runner(files, model), PARAMS, tmp_path, "paused")  # a fresh runner
    assert resumed.resumed_from is not None and resumed.resumed_from.step == 1
    assert resumed.image_path is not None
    assert max_frame_diff(written.frames[resumed.image_path], ours) == 0
    loaded = files_runner(files, model).load("m").pipe
    assert loaded.transformer_2 is not None and loaded.config.boundary_ratio == 0.9
    assert loaded.image_encoder is None and loaded.transformer.config.image_dim is None


def test_city96_s_gguf_pair_animates_the_image_as_stock_does_with_the_same_files(
    files: I2vExpertFiles, written: Written, tmp_path: Path
) -> None:
    model = model_info(files.expert(GGUF_HIGH), "m")
    assert model.quantisation == "Q8_0"
    done = clip_of(files_runner(files, model), PARAMS, tmp_path, "gguf")
    assert done.image_path is not None
    theirs = stock_clip(stock_from_i2v_expert_files(files, "gguf-q8_0"), PARAMS)
    assert max_frame_diff(written.frames[done.image_path], theirs) == 0


BOTH = wan_params(model="m", scheduler="UniPC", steps=4, frames=5, **WITH_BOTH)


def between(runner: Runner, folder: Path, name: str, **kw: Any) -> Any:
    """A clip from the first image to the last (`BOTH`, or `kw`'s params)."""
    return runner.run(
        kw.get("params", BOTH),
        RunInputs(init_image=PNG, last_image=LAST),
        output_path=folder / f"{name}.mp4",
        checkpoint_path=folder / f"{name}.ckpt",
        on_step=kw.get("on_step", go_on),
    )


def last_image() -> dict[str, Image.Image]:
    return {"last_image": Image.open(io.BytesIO(LAST)).convert("RGB")}


def test_a_last_image_on_the_pair_of_files_draws_stock_s_clip_and_resumes_exactly(
    files: I2vExpertFiles, written: Written, tmp_path: Path
) -> None:
    from app.engine.generation.request_checks import check_runnable

    model = model_info(files.expert(HIGH), "m")
    video = Architecture.WAN2_2_I2V.spec.video
    assert video is not None and video.takes_last_image and not video.needs_last_image
    listed = replace(BOTH, model=Path(HIGH).stem)
    assert check_runnable(listed, ModelSearchPath(user=(files.models,))).path == files.expert(HIGH)
    done = between(files_runner(files, model), tmp_path, "whole")
    assert done.image_path is not None
    ours = written.frames[done.image_path]
    pipe = stock_from_i2v_expert_files(files)
    assert max_frame_diff(ours, stock_clip(pipe, BOTH, **last_image())) == 0
    assert max_frame_diff(ours, stock_clip(pipe, BOTH)) > 0  # the last image counts
    paused = between(files_runner(files, model), tmp_path, "paused", on_step=pause_at(2))
    assert paused.kind is OutcomeKind.PAUSED
    resumed = between(files_runner(files, model), tmp_path, "paused")
    assert resumed.resumed_from is not None and resumed.image_path is not None
    assert max_frame_diff(written.frames[resumed.image_path], ours) == 0


def test_a_last_image_on_a_folder_draws_stock_s_clip(written: Written, tmp_path: Path) -> None:
    from diffusers import WanImageToVideoPipeline

    from app.testing.tiny.wan import write_tiny_wan_i2v

    folder = write_tiny_wan_i2v(tmp_path / "a14b", experts=True)
    model = model_info(folder, "m")
    assert model.architecture is Architecture.WAN2_2_I2V
    params = replace(BOTH, scheduler="Euler")  # the tiny folder's own scheduler
    done = between(runner_in(model, "float32"), tmp_path, "folder", params=params)
    assert done.image_path is not None
    pipe = WanImageToVideoPipeline.from_pretrained(folder, local_files_only=True)
    pipe.set_progress_bar_config(disable=True)
    stock = stock_clip(pipe, params, **last_image())
    assert max_frame_diff(written.frames[done.image_path], stock) == 0

"""LTX-Video as the files artists have: Lightricks' all-in-one file (transformer and VAE)
beside ComfyUI's T5-XXL, and a GGUF Q8_0 of the transformer beside an LTX-Video VAE file,
detected from their headers, assembled through diffusers' own LTX converters and run
through Easel's loop: the stock `LTXPipeline`'s frames exactly, and across a resume.

On the tiny LTX-Video of tiny_ltx_files (the same weights as a diffusers folder, the
reference; the config folder the files load with is the tiny folder's, named as the
shipped 0.9.1 one), and the shipped 0.9.0 / 0.9.1 configs checked to build (0.9.5 on:
test_ltx_condition_files).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from app.engine.generation.device import CPU
from app.engine.generation.errors import UnsupportedModel
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.files.sources import ModelInfo, ModelSearchPath
from app.engine.generation.load.pipelines import (
    PipelineCache,
    SingleFileConfigs,
    bundled_configs,
)
from app.engine.generation.outcome import OutcomeKind
from app.engine.generation.request_checks import check_runnable
from app.engine.generation.runner import Runner
from tests.engine.generation.test_ltx import Written, clip, ltx_params, max_frame_diff
from tests.engine.generation.test_ltx import written as written
from tests.engine.generation.tiny_architectures import model_info, pause_at
from tests.engine.generation.tiny_ltx_files import (
    TinyLtxFiles,
    stock_from_files,
    write_tiny_ltx_files,
)

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> TinyLtxFiles:
    return write_tiny_ltx_files(tmp_path_factory.mktemp("ltx-files"))


def files_runner(files: TinyLtxFiles, model: ModelInfo) -> Runner:
    cache = PipelineCache(configs=SingleFileConfigs(files.configs.parent))
    return Runner(device=CPU, resolve=lambda _name: model, threads=1, cache=cache)


def stock(pipe: Any, params: Any) -> list[np.ndarray]:
    """`pipe` called as its model card does (its defaults otherwise), as pictures; after
    `torch.manual_seed(seed)`, as 0.9.1's decoder draws its injected noise from there."""
    torch.manual_seed(params.seed)
    frames = pipe(
        prompt=params.prompt, negative_prompt=params.negative_prompt or None,
        height=params.height, width=params.width, num_frames=params.frames,
        frame_rate=params.fps, num_inference_steps=params.steps, guidance_scale=params.cfg,
        generator=torch.Generator().manual_seed(params.seed), output_type="pil",
    ).frames[0]  # fmt: skip
    return [np.asarray(frame, dtype=np.int16) for frame in frames]


def test_the_all_in_one_file_and_the_gguf_are_ltx_video_with_their_parts(
    files: TinyLtxFiles,
) -> None:
    all_in_one = files.checkpoint.name
    layouts = (
        (files.checkpoint, "", {"transformer": all_in_one, "ltx_vae": all_in_one}),
        (files.gguf_model, "Q8_0", {"transformer": files.gguf_model.name,
                                    "ltx_vae": "ltx-video-0.9.1-vae.safetensors"}),
    )  # fmt: skip
    for path, quantisation, parts in layouts:
        model = model_info(path)
        assert model.architecture is Architecture.LTX_VIDEO, model.unsupported_reason
        assert model.config_name == "ltx-video-0.9.1" and model.quantisation == quantisation
        named = {part.kind: part.path.name for part in model.parts}
        assert named == {**parts, "t5": "t5xxl_fp16.safetensors"}


def test_the_files_draw_the_stock_pipeline_s_frames_and_the_gguf_resumes_exactly(
    files: TinyLtxFiles, written: Written, tmp_path: Path
) -> None:
    params = ltx_params(negative_prompt="blurry")
    done = clip(files_runner(files, model_info(files.checkpoint, "m")), params, tmp_path, "one")
    ours = written.of(done)
    assert max_frame_diff(ours, stock(stock_from_files(files, files.checkpoint), params)) == 0
    from diffusers import LTXPipeline

    twin = LTXPipeline.from_pretrained(files.folder, local_files_only=True)
    twin.set_progress_bar_config(disable=True)
    assert max_frame_diff(ours, stock(twin, params)) <= 1  # the same weights, other alignment

    gguf = model_info(files.gguf_model, "m")
    whole = written.of(clip(files_runner(files, gguf), params, tmp_path, "gguf"))
    assert max_frame_diff(whole, stock(stock_from_files(files, files.gguf_model), params)) == 0
    paused = clip(files_runner(files, gguf), params, tmp_path, "paused", on_step=pause_at(2))
    assert paused.kind is OutcomeKind.PAUSED
    resumed = clip(files_runner(files, gguf), params, tmp_path, "paused")  # a fresh runner
    assert max_frame_diff(written.of(resumed), whole) == 0


def _layout(files: TinyLtxFiles, root: Path, checkpoint: dict[str, torch.Tensor]) -> Path:
    (root / "text_encoders").mkdir(parents=True)
    t5 = files.models / "text_encoders" / "t5xxl_fp16.safetensors"
    (root / "text_encoders" / t5.name).symlink_to(t5)
    model = root / "checkpoints" / "ltx.safetensors"
    model.parent.mkdir()
    save_file(checkpoint, str(model))
    return model


def test_missing_parts_are_refused_in_one_sentence_and_0_9_5_vaes_are_told_apart(
    files: TinyLtxFiles, tmp_path: Path
) -> None:
    original = load_file(str(files.checkpoint))
    lonely = _layout(files, tmp_path / "no-t5", original)
    (lonely.parents[1] / "text_encoders" / "t5xxl_fp16.safetensors").unlink()
    needs_t5 = "ltx: needs a T5-XXL text encoder in text_encoders/"
    assert model_info(lonely).unsupported_reason == needs_t5
    params = ltx_params(model="ltx")
    with pytest.raises(UnsupportedModel, match=f"{needs_t5}$"):
        check_runnable(params, ModelSearchPath(user=(lonely.parents[1],)))
    bare = {k: v for k, v in original.items() if not k.startswith("vae.")}
    assert model_info(_layout(files, tmp_path / "no-vae", bare)).unsupported_reason == (
        "ltx: needs an LTX-Video VAE in vae/"
    )
    # 0.9.5 on: the encoder ends on 2048 channels (what diffusers tells the release by),
    # which makes the file `ltx-condition`'s (test_ltx_condition_files runs such files).
    newer = {**original, "vae.encoder.conv_out.conv.weight": torch.zeros(9, 2048, 1, 1, 1)}
    model = model_info(_layout(files, tmp_path / "095", newer))
    assert model.architecture is Architecture.LTX_CONDITION, model.unsupported_reason
    assert model.config_name == "ltx-video-0.9.5"
    deep = {**original, "model.diffusion_model.transformer_blocks.47.scale_shift_table":
            torch.zeros(6, 16)}  # fmt: skip
    assert model_info(_layout(files, tmp_path / "13b", deep)).unsupported_reason == (
        "ltx: an LTX-Video 13B transformer needs the VAE of LTX-Video 0.9.7 or later (its "
        "encoder ends on 2048 channels), but its VAE is an older one (0.9.0 or 0.9.1)"
    )


@pytest.mark.parametrize("release", ["ltx-video-0.9.0", "ltx-video-0.9.1"])
def test_the_shipped_configs_build_the_released_networks(release: str) -> None:
    """Each component on the meta device, from the shipped folder alone: the 2B
    transformer (28 blocks of 2048) and each release's VAE; T5 settings for 128 tokens."""
    import diffusers
    from accelerate import init_empty_weights

    folder = bundled_configs().root / release
    index = json.loads((folder / "model_index.json").read_text())
    assert index["_class_name"] == "LTXPipeline"
    with init_empty_weights():
        transformer = diffusers.LTXVideoTransformer3DModel.from_config(
            diffusers.LTXVideoTransformer3DModel.load_config(folder / "transformer")
        )
        vae = diffusers.AutoencoderKLLTXVideo.from_config(
            diffusers.AutoencoderKLLTXVideo.load_config(folder / "vae")
        )
    width = transformer.config.num_attention_heads * transformer.config.attention_head_dim
    assert len(transformer.transformer_blocks) == 28 and width == 2048
    assert vae.config.timestep_conditioning is (release == "ltx-video-0.9.1")
    tokenizer = json.loads((folder / "tokenizer" / "tokenizer_config.json").read_text())
    assert tokenizer["model_max_length"] == 128

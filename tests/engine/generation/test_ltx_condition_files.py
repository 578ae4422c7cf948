"""LTX-Video 0.9.5 on as the files artists have: Lightricks' all-in-one file (a transformer
and a 0.9.5 VAE) beside ComfyUI's T5-XXL, detected as `ltx-condition` from its tensors,
assembled through diffusers' own LTX converters and run through Easel's loop: the stock
`LTXConditionPipeline`'s frames exactly (with diffusers' own single-file loads of the same
file), and across a pause resumed by a fresh runner. 13B files are told by their depth;
what cannot run is refused in one sentence (the GGUF's run: the benchmark's
`ltx-0.9.5-gguf-q8_0` row); the shipped 0.9.5 and 13B configs build the
released networks, whose shapes in Lightricks' keys are detected as their release.

On the tiny LTX-Video 0.9.5 of tiny_ltx095_files (the config folder the file loads with is
the tiny folder's, named as the shipped one).
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image
from safetensors.torch import load_file

from app.engine.generation.device import CPU
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
from app.engine.jobs.params import GenerationParams
from tests.engine.generation.test_ltx import (
    PNG,
    WITH_IMAGE,
    Written,
    clip,
    ltx_params,
    max_frame_diff,
)
from tests.engine.generation.test_ltx import written as written
from tests.engine.generation.tiny_architectures import model_info, pause_at
from tests.engine.generation.tiny_ltx095_files import (
    TinyLtx095Files,
    ltx_095_vae_to_original,
    save_weights,
    stock_from_file,
    write_tiny_ltx095_files,
)
from tests.engine.generation.tiny_ltx_files import (
    TRANSFORMER_PREFIX,
    VAE_PREFIX,
    ltx_transformer_to_original,
)

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

DEEP_BLOCK = "model.diffusion_model.transformer_blocks.47.scale_shift_table"  # 13B's 48th
OLD_VAE = {  # what tells a 0.9.1 VAE (bare keys): an encoder ending on 512 channels
    "encoder.conv_out.conv.weight": torch.zeros(9, 512, 3, 3, 3),
    "decoder.conv_in.conv.weight": torch.zeros(32, 8, 3, 3, 3),  # 8 latent channels
}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> TinyLtx095Files:
    return write_tiny_ltx095_files(tmp_path_factory.mktemp("ltx095-files"))


@pytest.fixture(scope="module")
def weights(files: TinyLtx095Files) -> dict[str, torch.Tensor]:
    return load_file(str(files.checkpoint))


def files_runner(files: TinyLtx095Files, model: ModelInfo) -> Runner:
    cache = PipelineCache(configs=SingleFileConfigs(files.configs.parent))
    return Runner(device=CPU, resolve=lambda _name: model, threads=1, cache=cache)


def stock(pipe: Any, params: GenerationParams) -> list[np.ndarray]:
    """`pipe` with its defaults (size, frames, steps, guidance and the prompts aside), the
    picture as `image` (a condition at frame 0, strength 1)."""
    image = Image.open(io.BytesIO(PNG)).convert("RGB")
    torch.manual_seed(params.seed)
    frames = pipe(
        image=image, prompt=params.prompt, negative_prompt=params.negative_prompt or None,
        height=params.height, width=params.width, num_frames=params.frames,
        frame_rate=params.fps, num_inference_steps=params.steps, guidance_scale=params.cfg,
        generator=torch.Generator().manual_seed(params.seed), output_type="pil",
    ).frames[0]  # fmt: skip
    return [np.asarray(frame, dtype=np.int16) for frame in frames]


def _layout(files: TinyLtx095Files, root: Path, weights: dict[str, torch.Tensor]) -> Path:
    """`weights` as models/checkpoints/ltx.safetensors beside the T5 (a link)."""
    (root / "text_encoders").mkdir(parents=True)
    t5 = files.models / "text_encoders" / "t5xxl_fp16.safetensors"
    (root / "text_encoders" / t5.name).symlink_to(t5)
    model = root / "checkpoints" / "ltx.safetensors"
    save_weights(weights, model)
    return model


def test_the_all_in_one_file_and_the_gguf_are_ltx_video_0_9_5_with_their_parts(
    files: TinyLtx095Files,
) -> None:
    name = files.checkpoint.name
    layouts = (
        (files.checkpoint, "", {"transformer": name, "ltx_vae": name}),
        (files.gguf_model, "Q8_0", {"transformer": files.gguf_model.name,
                                    "ltx_vae": "ltx-video-0.9.5-vae.safetensors"}),
    )  # fmt: skip
    for path, quantisation, parts in layouts:
        model = model_info(path)
        assert model.architecture is Architecture.LTX_CONDITION, model.unsupported_reason
        assert model.config_name == "ltx-video-0.9.5" and model.quantisation == quantisation
        named = {part.kind: part.path.name for part in model.parts}
        assert named == {**parts, "t5": "t5xxl_fp16.safetensors"}
    # Found by name in the models folder, and a clip from a first and a last image on it
    # accepted at submit (what 0.9.5+ draws: `ltx-condition`'s requests).
    params = ltx_params(
        model=files.checkpoint.stem, **WITH_IMAGE, last_image=WITH_IMAGE["init_image"]
    )
    found = check_runnable(params, ModelSearchPath(user=(files.models,)))
    assert found.path == files.checkpoint and found.label.startswith("LTX-Video 0.9.5+")


def test_the_file_draws_the_stock_pipeline_s_frames_and_resumes_exactly(
    files: TinyLtx095Files, written: Written, tmp_path: Path
) -> None:
    params = ltx_params(negative_prompt="blurry", steps=4, **WITH_IMAGE)
    model = model_info(files.checkpoint, "ltx")
    whole = written.of(clip(files_runner(files, model), params, tmp_path, "whole"))
    assert len(whole) == params.frames
    assert max_frame_diff(whole, stock(stock_from_file(files), params)) == 0
    paused = clip(files_runner(files, model), params, tmp_path, "paused", on_step=pause_at(2))
    assert paused.kind is OutcomeKind.PAUSED
    resumed = clip(files_runner(files, model), params, tmp_path, "paused")  # a fresh runner
    assert resumed.resumed_from is not None and resumed.resumed_from.step == 2
    assert max_frame_diff(written.of(resumed), whole) == 0


def test_a_13b_file_with_its_vae_is_told_by_its_depth(
    files: TinyLtx095Files, weights: dict[str, torch.Tensor], tmp_path: Path
) -> None:
    deep = {**weights, DEEP_BLOCK: torch.zeros(6, 16)}
    model = model_info(_layout(files, tmp_path, deep))
    assert model.architecture is Architecture.LTX_CONDITION, model.unsupported_reason
    assert model.config_name == "ltx-video-0.9.7-13b"


def test_a_13b_file_beside_an_older_vae_and_its_own_takes_its_own(
    files: TinyLtx095Files, weights: dict[str, torch.Tensor], tmp_path: Path
) -> None:
    """ComfyUI's split layout: the 13B transformer alone in `diffusion_models/`, and in
    `vae/` a 0.9.1 VAE (first by name: the one paired first) beside 0.9.7's."""
    transformer = {k: v for k, v in weights.items() if not k.startswith("vae.")}
    root = tmp_path / "models"
    model = _layout(files, root, {**transformer, DEEP_BLOCK: torch.zeros(6, 16)})
    split = model.parents[1] / "diffusion_models" / "ltxv-13b-0.9.7-dev.safetensors"
    split.parent.mkdir()
    model.rename(split)
    save_weights(OLD_VAE, root / "vae" / "ltx-video-0.9.1-vae.safetensors")
    own = root / "vae" / "ltxv-13b-0.9.7-vae.safetensors"
    own.symlink_to(files.models / "vae" / "ltx-video-0.9.5-vae.safetensors")
    found = model_info(split)
    assert found.config_name == "ltx-video-0.9.7-13b", found.unsupported_reason
    assert {part.kind: part.path for part in found.parts}["ltx_vae"] == own


def test_what_cannot_run_is_refused_in_one_sentence(
    files: TinyLtx095Files, weights: dict[str, torch.Tensor], tmp_path: Path
) -> None:
    transformer = {k: v for k, v in weights.items() if not k.startswith("vae.")}
    lonely = {**transformer, DEEP_BLOCK: torch.zeros(6, 16)}
    assert model_info(_layout(files, tmp_path / "no-vae", lonely)).unsupported_reason == (
        "ltx: needs an LTX-Video VAE in vae/"
    )
    # 0.9.1's VAE beside a 13B transformer: the VAE's encoder ends on 512 channels.
    old_vae = {**lonely, **{f"vae.{key}": value for key, value in OLD_VAE.items()}}
    assert model_info(_layout(files, tmp_path / "old-vae", old_vae)).unsupported_reason == (
        "ltx: an LTX-Video 13B transformer needs the VAE of LTX-Video 0.9.7 or later (its "
        "encoder ends on 2048 channels), but its VAE is an older one (0.9.0 or 0.9.1)"
    )
    truncated = tmp_path / "cut" / "checkpoints" / "ltx.safetensors"  # a download cut short
    truncated.parent.mkdir(parents=True)
    data = files.checkpoint.read_bytes()
    truncated.write_bytes(data[: len(data) // 2])
    reason = model_info(truncated).unsupported_reason
    assert reason.startswith("ltx.safetensors cannot be used: the file is truncated (")
    assert reason.endswith(" needed)") and ". " not in reason  # one sentence, the sizes in it


@pytest.mark.parametrize(
    ("release", "blocks", "width"),
    [("ltx-video-0.9.5", 28, 2048), ("ltx-video-0.9.7-13b", 48, 4096)],
)
def test_the_shipped_configs_build_the_released_networks(
    release: str, blocks: int, width: int
) -> None:
    """Each component on the meta device, from the shipped folder alone: the transformer of
    its size (13B: 13.0 billion weights) and 0.9.5's VAE, as `LTXConditionPipeline`."""
    import diffusers
    from accelerate import init_empty_weights
    from diffusers.loaders.single_file_utils import convert_ltx_vae_checkpoint_to_diffusers

    from app.engine.generation.families.ltx import files

    folder = bundled_configs().root / release
    index = json.loads((folder / "model_index.json").read_text())
    assert index["_class_name"] == "LTXConditionPipeline"
    with init_empty_weights():
        transformer = diffusers.LTXVideoTransformer3DModel.from_config(
            diffusers.LTXVideoTransformer3DModel.load_config(folder / "transformer")
        )
        vae = diffusers.AutoencoderKLLTXVideo.from_config(
            diffusers.AutoencoderKLLTXVideo.load_config(folder / "vae")
        )
    config = transformer.config
    assert len(transformer.transformer_blocks) == blocks
    assert config.num_attention_heads * config.attention_head_dim == width
    weights = sum(p.numel() for p in transformer.parameters())
    assert (12.5e9 < weights < 13.5e9) if blocks == 48 else (1.8e9 < weights < 2.1e9)
    assert vae.encoder.conv_out.conv.weight.shape[1] == 2048 and vae.config.timestep_conditioning
    scheduler = json.loads((folder / "scheduler" / "scheduler_config.json").read_text())
    assert scheduler["use_dynamic_shifting"] is False  # the pipeline passes its timesteps
    # The released networks' shapes in Lightricks' keys (diffusers' converter gives the
    # network's keys back) are detected as this release, from the shapes alone.
    original_vae = ltx_095_vae_to_original(vae.state_dict())
    assert set(convert_ltx_vae_checkpoint_to_diffusers(dict(original_vae))) == set(vae.state_dict())
    shapes = {
        k: list(v.shape) for k, v in ltx_transformer_to_original(transformer.state_dict()).items()
    }
    bare = {k.removeprefix(TRANSFORMER_PREFIX): v for k, v in shapes.items()}
    header = files.read_header(bare, "ltx")
    assert not isinstance(header, str), header
    needs = files.read_vae(
        header, {k.removeprefix(VAE_PREFIX): list(v.shape) for k, v in original_vae.items()}
    )
    assert not isinstance(needs, str), needs
    assert needs.architecture is Architecture.LTX_CONDITION and needs.config_name == release

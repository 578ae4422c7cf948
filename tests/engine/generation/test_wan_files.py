"""Wan 2.1 as the files artists have: ComfyUI's split layout (the transformer in Wan-AI's
keys in `diffusion_models/`, UMT5 in `text_encoders/`, the Wan VAE in `vae/`) and city96's
GGUF Q8_0, detected from their headers, assembled through diffusers' own Wan converters and
run through Easel's loop: the stock pipeline's frames exactly, and across a resume.

On the tiny Wan of tiny_wan_files (the same weights as a diffusers folder, the reference):
its files load with Easel's shipped wan2.1-t2v-1.3b folder but for the tiny networks' own
configs, and UMT5's tokenizer from the SentencePiece model in the UMT5 file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file, save_file

from app.engine.generation.device import CPU
from app.engine.generation.errors import ModelLoadFailed
from app.engine.generation.families.wan import umt5 as wan_umt5
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.files.sources import ModelInfo
from app.engine.generation.load.assemble import gguf_weights
from app.engine.generation.load.pipelines import (
    PipelineCache,
    SingleFileConfigs,
    bundled_configs,
    load_pipeline,
)
from app.engine.generation.outcome import OutcomeKind
from app.engine.generation.runner import Runner
from tests.engine.generation.test_wan import (
    Written,
    clip,
    max_frame_diff,
    stock,
    wan_params,
)
from tests.engine.generation.test_wan import written as written
from tests.engine.generation.tiny_architectures import model_info, pause_at
from tests.engine.generation.tiny_wan_files import (
    TinyWanFiles,
    stock_from_files,
    write_tiny_wan_files,
    write_wan_gguf,
)

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> TinyWanFiles:
    return write_tiny_wan_files(tmp_path_factory.mktemp("wan-files"))


def files_runner(files: TinyWanFiles, model: ModelInfo) -> Runner:
    cache = PipelineCache(configs=SingleFileConfigs(files.configs.parent))
    return Runner(device=CPU, resolve=lambda _name: model, threads=1, cache=cache)


def test_the_split_files_the_gguf_and_an_fp8_file_are_wan_2_1_with_their_parts(
    files: TinyWanFiles,
) -> None:
    original = load_file(str(files.split_model))
    fp8 = {k: v.to(torch.float8_e4m3fn) if v.ndim == 2 else v for k, v in original.items()}
    fp8_file = files.split_model.with_name("wan2.1_t2v_1.3B_fp8_e4m3fn.safetensors")
    save_file(fp8, str(fp8_file))
    layouts = ((files.split_model, ""), (files.gguf_model, "Q8_0"), (fp8_file, "fp8"))
    for path, quantisation in layouts:
        model = model_info(path)
        assert model.architecture is Architecture.WAN2_1, model.unsupported_reason
        assert model.config_name == "wan2.1-t2v-1.3b" and model.quantisation == quantisation
        assert {part.kind: part.path.name for part in model.parts} == {
            "transformer": path.name,
            "umt5": "umt5_xxl_fp16.safetensors",
            "wan_vae": "wan_2.1_vae.safetensors",
        }


def test_split_files_draw_the_stock_folder_s_frames_and_the_gguf_resumes_exactly(
    files: TinyWanFiles, written: Written, tmp_path: Path
) -> None:
    params = wan_params(model="m", scheduler="UniPC", negative_prompt="blurry", steps=3, frames=5)
    split = model_info(files.split_model, "m")
    done = clip(files_runner(files, split), params, tmp_path, "split")
    assert done.kind is OutcomeKind.COMPLETED and done.image_path is not None
    ours = written.frames[done.image_path]
    assert max_frame_diff(ours, stock(stock_from_files(files, files.split_model), params)) == 0
    from diffusers import WanPipeline

    twin = WanPipeline.from_pretrained(files.folder, local_files_only=True)
    twin.set_progress_bar_config(disable=True)
    assert max_frame_diff(ours, stock(twin, params)) <= 1

    gguf = model_info(files.gguf_model, "m")
    whole = clip(files_runner(files, gguf), params, tmp_path, "gguf")
    theirs = stock(stock_from_files(files, files.gguf_model), params)
    assert max_frame_diff(written.frames[tmp_path / "gguf.mp4"], theirs) == 0
    paused = clip(files_runner(files, gguf), params, tmp_path, "paused", on_step=pause_at(2))
    assert paused.kind is OutcomeKind.PAUSED
    resumed = clip(files_runner(files, gguf), params, tmp_path, "paused")  # a fresh runner
    assert resumed.kind is OutcomeKind.COMPLETED and whole.kind is OutcomeKind.COMPLETED
    ours = written.frames[tmp_path / "paused.mp4"]
    assert max_frame_diff(ours, written.frames[tmp_path / "gguf.mp4"]) == 0


def _copy_layout(files: TinyWanFiles, root: Path, transformer: dict[str, Any]) -> Path:
    for folder in ("text_encoders", "vae"):
        (root / folder).mkdir(parents=True)
        for file in (files.models / folder).iterdir():
            (root / folder / file.name).symlink_to(file)
    model = root / "diffusion_models" / "wan.safetensors"
    model.parent.mkdir()
    save_file(transformer, str(model))
    return model


def test_files_easel_cannot_run_are_refused_in_one_sentence(
    files: TinyWanFiles, tmp_path: Path
) -> None:
    original = load_file(str(files.split_model))
    i2v = {**original, "img_emb.proj.0.weight": torch.zeros(4)}
    refusal = model_info(_copy_layout(files, tmp_path / "i2v", i2v)).unsupported_reason
    assert refusal == (  # Wan 2.1 I2V's file, its CLIP vision file missing
        "wan: needs a CLIP vision model 4 wide in clip_vision/ (ComfyUI's "
        "clip_vision_h.safetensors, open-clip ViT-H/14, for Wan 2.1 I2V)"
    )
    lonely = _copy_layout(files, tmp_path / "no-vae", original)
    for file in (lonely.parents[1] / "vae").iterdir():
        file.unlink()
    reason = model_info(lonely).unsupported_reason
    assert reason == "wan: needs a Wan VAE in vae/"
    # Without a tokenizer in the UMT5 file, beside it or in the cache: one sentence.
    umt5 = load_file(str(files.models / "text_encoders" / "umt5_xxl_fp16.safetensors"))
    bare = tmp_path / "bare"
    model = _copy_layout(files, bare, original)
    encoder = bare / "text_encoders" / "umt5_xxl_fp16.safetensors"
    encoder.unlink()
    save_file({k: v for k, v in umt5.items() if k != "spiece_model"}, str(encoder))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(wan_umt5, "hf_cache_dirs", lambda: ())
        assert model_info(model).unsupported_reason == (
            f"wan: {wan_umt5.missing_tokenizer(encoder)}"
        )


def test_the_released_files_load_with_the_shipped_config_folder(files: TinyWanFiles) -> None:
    model = model_info(files.split_model, "wan")
    shipped = bundled_configs().root / model.config_name
    assert model.config_name == "wan2.1-t2v-1.3b" and (shipped / "model_index.json").is_file()
    # The tiny DiT does not fit the shipped 1.3B's 30 blocks of 1536: the loader's sentence.
    with pytest.raises(ModelLoadFailed, match=r"^model 'wan' \("):
        load_pipeline(model, CPU)


def test_a_city96_gguf_s_flattened_tensor_gets_its_shape_back(files: TinyWanFiles) -> None:
    import diffusers

    original = load_file(str(files.split_model))["patch_embedding.weight"]
    restored = gguf_weights(files.gguf_model)["patch_embedding.weight"]
    assert restored.shape == original.shape  # (24, 16, 1, 2, 2), stored as (24, 64)
    assert float((restored - original).abs().max()) < 0.02  # Q8_0's rounding
    with pytest.raises(ValueError, match=r"patch_embedding\.weight has an expected shape"):
        diffusers.WanTransformer3DModel.from_single_file(
            str(files.gguf_model), config=str(files.configs), subfolder="transformer",
            quantization_config=diffusers.GGUFQuantizationConfig(compute_dtype=torch.float32),
            local_files_only=True,
        )  # fmt: skip


@pytest.mark.parametrize("stated", [[24, 16, 1, 2, 3], [0, 64], [-1, 1536]])
def test_a_gguf_whose_stated_shape_does_not_hold_its_values_is_refused_in_a_sentence(
    files: TinyWanFiles, tmp_path: Path, stated: list[int]
) -> None:
    original = load_file(str(files.split_model))
    damaged = write_wan_gguf(
        original, tmp_path / "damaged.gguf", {"patch_embedding.weight": stated}
    )
    with pytest.raises(
        ModelLoadFailed,
        match=r"^damaged\.gguf: its metadata gives "
        r"patch_embedding\.weight the shape .* does not hold its 1536 values",
    ):
        gguf_weights(damaged)


_LINEAR_WEIGHTS = tuple(f"{name}.weight" for name in ("q", "k", "v", "o", "wi_0", "wi_1", "wo"))


def _scaled_fp8(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """ComfyUI's `umt5_xxl_fp8_e4m3fn_scaled` layout: each linear weight in fp8 over its
    largest value, the scale beside it (`<name>.scale_weight`), the `scaled_fp8` mark."""
    scaled: dict[str, torch.Tensor] = {"scaled_fp8": torch.empty(0, dtype=torch.float8_e4m3fn)}
    for key, value in weights.items():
        if value.ndim != 2 or not key.endswith(_LINEAR_WEIGHTS):
            scaled[key] = value
            continue
        scale = value.abs().max() / 448
        scaled[key] = (value / scale).to(torch.float8_e4m3fn)
        scaled[key.removesuffix("weight") + "scale_weight"] = scale
    return scaled


def test_comfyui_s_scaled_fp8_umt5_is_its_fp8_values_times_their_scales(
    files: TinyWanFiles, tmp_path: Path
) -> None:
    from transformers import UMT5EncoderModel

    umt5 = load_file(str(files.models / "text_encoders" / "umt5_xxl_fp16.safetensors"))
    model = _copy_layout(files, tmp_path / "scaled", load_file(str(files.split_model)))
    encoders = model.parents[1] / "text_encoders"
    (encoders / "umt5_xxl_fp16.safetensors").unlink()
    scaled = _scaled_fp8(umt5)
    save_file(scaled, str(encoders / "umt5_xxl_fp8_e4m3fn_scaled.safetensors"))
    info = model_info(model, "m")
    assert {p.path.name for p in info.parts} >= {"umt5_xxl_fp8_e4m3fn_scaled.safetensors"}
    cache = PipelineCache(configs=SingleFileConfigs(files.configs.parent))
    ours = cache.get(info, CPU).pipe.text_encoder
    # The reference: the scales applied by hand, into transformers' own model of the folder.
    reference = UMT5EncoderModel.from_pretrained(files.folder / "text_encoder").eval()
    plain = {
        key: value.float() * scaled[key.removesuffix("weight") + "scale_weight"]
        if key.removesuffix("weight") + "scale_weight" in scaled
        else value
        for key, value in scaled.items()
        if key not in ("scaled_fp8", "spiece_model") and not key.endswith("scale_weight")
    }
    reference.load_state_dict({**plain, "encoder.embed_tokens.weight": plain["shared.weight"]})
    ids = torch.tensor([[5, 9, 14, 3, 1, 0, 0]])
    mask = (ids > 0) | (torch.arange(7) == 4)
    with torch.no_grad():
        theirs = reference(ids, attention_mask=mask).last_hidden_state
        assert torch.equal(ours(ids, attention_mask=mask).last_hidden_state, theirs)

"""Qwen-Image and Qwen-Image-Edit as the files artists have: ComfyUI's split layout
(`diffusion_models/qwen_image_bf16.safetensors`, `text_encoders/qwen_2.5_vl_7b.safetensors`
in Qwen's released keys without its head, `vae/qwen_image_vae.safetensors` in Wan-AI's keys)
with a `text_encoders/tokenizer/` folder, an fp8 e4m3fn copy and a GGUF Q8_0 of the
transformer (tiny_qwen_files.py).

Through Easel's loop the split files draw stock `QwenImagePipeline`'s image of the same
tiny model as a diffusers folder (max pixel difference 0), and an edit stock
`QwenImageEditPipeline`'s; the quantised files draw the stock pipeline's image on the
components Easel loaded, and a job paused on each resumes in a fresh process to the whole
run's. Which model a file is comes from its name (the tensors are alike); without a
tokenizer beside the files or in the Hugging Face cache the file is refused in one sentence.
"""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from diffusers import QwenImageEditPipeline, QwenImagePipeline
from diffusers.pipelines.qwenimage import pipeline_qwenimage_edit, pipeline_qwenimage_edit_plus
from PIL import Image
from safetensors.torch import load_file, save_file

from app.engine.generation.device import CPU
from app.engine.generation.families.qwen.files import NO_TOKENIZER
from app.engine.generation.families.qwen.processor import image_only_processor
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.load.pipelines import SingleFileConfigs, load_pipeline
from app.engine.generation.outcome import OutcomeKind, StepDecision
from app.engine.jobs.params import KIND_EDIT, GenerationParams
from app.engine.jobs.run_inputs import RunInputs
from tests.engine.generation.file_jobs import paused_jobs_resume_in_a_fresh_process, runner_on
from tests.engine.generation.test_img2img import init_png
from tests.engine.generation.tiny_architectures import max_diff, model_info, pixels
from tests.engine.generation.tiny_qwen_files import (
    TinyQwenFiles,
    in_fresh_memory,
    wide_tiny_transformer,
    write_q4_k_gguf,
    write_tiny_qwen_files,
)

pytestmark = pytest.mark.filterwarnings(
    "ignore:__array__ implementation:DeprecationWarning", "ignore::FutureWarning"
)

STEPS, PAUSE_AT = 3, 2
PICTURE = (64, 48)
STOCK_DIMENSIONS = pipeline_qwenimage_edit.calculate_dimensions
PLUS_DIMENSIONS = pipeline_qwenimage_edit_plus.calculate_dimensions


@pytest.fixture(autouse=True)
def small_input_area(monkeypatch: pytest.MonkeyPatch) -> None:
    """The edit pipeline reads its input at about 1 MP: shrunk 256-fold, for the stock
    pipeline and Easel alike (as test_qwen_edit.py)."""

    def small(target_area: int, ratio: float) -> Any:
        return STOCK_DIMENSIONS(target_area // 256, ratio)

    def small_plus(target_area: int, ratio: float) -> Any:
        return PLUS_DIMENSIONS(target_area // 256, ratio)

    monkeypatch.setattr(pipeline_qwenimage_edit, "calculate_dimensions", small)
    monkeypatch.setattr(pipeline_qwenimage_edit_plus, "calculate_dimensions", small_plus)


@pytest.fixture(autouse=True)
def no_hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No Hugging Face cache of this machine's is searched for a tokenizer."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    for name in ("HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[Architecture, TinyQwenFiles]:
    return {
        arch: write_tiny_qwen_files(arch, tmp_path_factory.mktemp(arch.value))
        for arch in (Architecture.QWEN_IMAGE, Architecture.QWEN_IMAGE_EDIT)
    }


def text_params(**changes: Any) -> GenerationParams:
    base: dict[str, Any] = {
        "prompt": "a red circle", "negative_prompt": "blue", "model": "m", "steps": STEPS,
        "cfg": 4.0, "width": 64, "height": 48, "seed": 1234,
    }  # fmt: skip
    return GenerationParams(**{**base, **changes})


def edit_params(**changes: Any) -> GenerationParams:
    return text_params(prompt="make it night", kind=KIND_EDIT, init_image="job:1", **changes)


def stock_text(pipe: Any, params: GenerationParams) -> Any:
    pipe.set_progress_bar_config(disable=True)
    return pipe(
        prompt=params.prompt, negative_prompt=params.negative_prompt, true_cfg_scale=params.cfg,
        num_inference_steps=params.steps, height=params.height, width=params.width,
        generator=torch.Generator("cpu").manual_seed(params.seed),
    ).images[0]  # fmt: skip


def stock_edit(pipe: Any, params: GenerationParams) -> Any:
    pipe.set_progress_bar_config(disable=True)
    return pipe(
        image=Image.open(io.BytesIO(init_png(PICTURE))), prompt=params.prompt,
        negative_prompt=params.negative_prompt, true_cfg_scale=params.cfg,
        num_inference_steps=params.steps, height=params.height, width=params.width,
        generator=torch.Generator("cpu").manual_seed(params.seed),
    ).images[0]  # fmt: skip


def run(path: Path, configs: Path, params: GenerationParams, out: Path) -> Path:
    inputs = RunInputs(init_image=init_png(PICTURE)) if params.kind == KIND_EDIT else RunInputs()
    outcome = runner_on(model_info(path), configs).run(
        params, inputs, output_path=out, checkpoint_path=out.with_suffix(".ckpt"),
        on_step=lambda _p: StepDecision.CONTINUE,
    )  # fmt: skip
    assert outcome.kind is OutcomeKind.COMPLETED and outcome.image_path is not None
    return outcome.image_path


def test_each_file_is_told_by_its_keys_and_name(
    files: dict[Architecture, TinyQwenFiles], tmp_path: Path
) -> None:
    qwen = files[Architecture.QWEN_IMAGE]
    for path, quantisation in ((qwen.split_model, ""), (qwen.fp8_model, "fp8"),
                               (qwen.gguf_model, "Q8_0")):  # fmt: skip
        found = model_info(path)
        assert (found.architecture, found.config_name, found.quantisation) == (
            Architecture.QWEN_IMAGE,
            "qwen-image",
            quantisation,
        ), found.unsupported_reason
        assert sorted(part.kind for part in found.parts) == ["qwen2.5-vl", "transformer", "wan_vae"]
    edit = model_info(files[Architecture.QWEN_IMAGE_EDIT].split_model)
    assert (edit.architecture, edit.config_name) == (
        Architecture.QWEN_IMAGE_EDIT,
        "qwen-image-edit",
    )
    # The same tensors under the released names of Edit Plus (2509, 2511): their own configs.
    for name, config in (("qwen_image_edit_2509_bf16", "qwen-image-edit-2509"),
                         ("Qwen-Image-Edit-2511-Q8_0", "qwen-image-edit-2511")):  # fmt: skip
        source = qwen.gguf_model if name.endswith("Q8_0") else qwen.split_model
        renamed = source.with_name(name + source.suffix)
        shutil.copy(source, renamed)
        try:
            found = model_info(renamed)
            assert (found.architecture, found.config_name) == (
                Architecture.QWEN_IMAGE_EDIT_PLUS,
                config,
            ), found.unsupported_reason
        finally:
            renamed.unlink()


def test_a_mixed_fp8_transformer_is_qwen_image_stored_fp8_scaled(
    files: dict[Architecture, TinyQwenFiles],
) -> None:
    """ComfyUI's mixed fp8 files (`weight_scale` beside each float8 weight): listed as
    scaled fp8, each weight dequantised with its scale as it loads (test_scaled_fp8_files)."""
    qwen = files[Architecture.QWEN_IMAGE]
    weights = load_file(str(qwen.fp8_model))
    weights["img_in.weight_scale"] = torch.ones(1)
    mixed = qwen.fp8_model.with_name("qwen_image_edit_2511_fp8mixed.safetensors")
    save_file(weights, str(mixed))
    try:
        found = model_info(mixed)
    finally:
        mixed.unlink()
    assert found.supported, found.unsupported_reason
    assert found.quantisation == "fp8 scaled"


def test_the_split_files_draw_the_diffusers_folders_image(
    files: dict[Architecture, TinyQwenFiles], tmp_path: Path
) -> None:
    """Stock `QwenImagePipeline` on the diffusers folder of the same tiny model, and stock
    `QwenImageEditPipeline` for an edit; every weight Easel loaded is the folder's (but the
    text encoder's head, which the file leaves out and no pipeline reads)."""
    qwen = files[Architecture.QWEN_IMAGE]
    params = text_params()
    ours = run(qwen.split_model, qwen.configs, params, tmp_path / "qwen.png")
    twin: Any = QwenImagePipeline.from_pretrained(qwen.folder, local_files_only=True)
    assert max_diff(pixels(ours), pixels(stock_text(twin, params))) == 0
    loaded = load_pipeline(model_info(qwen.split_model), CPU, SingleFileConfigs(qwen.configs)).pipe
    for name in ("transformer", "vae", "text_encoder"):
        mine, theirs = loaded.components[name].state_dict(), twin.components[name].state_dict()
        assert sorted(mine) == sorted(theirs)
        assert all(torch.equal(mine[k], theirs[k]) for k in mine if k != "lm_head.weight"), name

    edit = files[Architecture.QWEN_IMAGE_EDIT]
    params = edit_params()
    ours = run(edit.split_model, edit.configs, params, tmp_path / "edit.png")
    stock_pipe: Any = QwenImageEditPipeline.from_pretrained(
        edit.folder, processor=image_only_processor(edit.folder / "processor"),
        local_files_only=True,
    )  # fmt: skip
    assert max_diff(pixels(ours), pixels(stock_edit(in_fresh_memory(stock_pipe), params))) == 0


def test_an_edit_plus_file_draws_the_stock_edit_plus_image(
    files: dict[Architecture, TinyQwenFiles], tmp_path: Path
) -> None:
    """The same tensors under Edit Plus 2509's released name load with its config (the
    shipped one's shape: `QwenImageEditPlusPipeline`), an edit equal to stock Plus's."""
    edit = files[Architecture.QWEN_IMAGE_EDIT]
    configs = tmp_path / "configs"
    shutil.copytree(edit.configs / "qwen-image-edit", configs / "qwen-image-edit-2509")
    index_path = configs / "qwen-image-edit-2509" / "model_index.json"
    index = json.loads(index_path.read_text(encoding="utf-8"))
    index["_class_name"] = "QwenImageEditPlusPipeline"
    index_path.write_text(json.dumps(index), encoding="utf-8")
    plus = edit.split_model.with_name("qwen_image_edit_2509_bf16.safetensors")
    shutil.copy(edit.split_model, plus)
    try:
        params = edit_params()
        ours = run(plus, configs, params, tmp_path / "plus.png")
        loaded = load_pipeline(model_info(plus), CPU, SingleFileConfigs(configs)).pipe
    finally:
        plus.unlink()
    assert type(loaded).__name__ == "QwenImageEditPlusPipeline"
    stock = type(loaded)(**loaded.components)
    assert max_diff(pixels(ours), pixels(stock_edit(stock, params))) == 0


@pytest.mark.parametrize("layout", ["fp8", "gguf"])
def test_the_quantised_files_draw_the_stock_pipelines_image(
    files: dict[Architecture, TinyQwenFiles], layout: str, tmp_path: Path
) -> None:
    qwen = files[Architecture.QWEN_IMAGE]
    path = qwen.fp8_model if layout == "fp8" else qwen.gguf_model
    params = text_params()
    ours = run(path, qwen.configs, params, tmp_path / "ours.png")
    loaded = load_pipeline(model_info(path), CPU, SingleFileConfigs(qwen.configs)).pipe
    stock = type(loaded)(**loaded.components)
    assert max_diff(pixels(ours), pixels(stock_text(stock, params))) == 0


def test_a_k_quant_gguf_draws_the_stock_pipelines_image(
    files: dict[Architecture, TinyQwenFiles], tmp_path: Path
) -> None:
    """A Q4_K GGUF (a one-block transformer 256 wide: K-quant blocks are 256 values) beside
    the same text encoder, VAE and tokenizer, with its own config folder."""
    import gguf

    qwen = files[Architecture.QWEN_IMAGE]
    wide = wide_tiny_transformer()
    configs = tmp_path / "configs"
    shutil.copytree(qwen.configs, configs)
    wide.save_config(configs / "qwen-image" / "transformer")
    path = qwen.split_model.with_name("qwen-image-Q4_K_M.gguf")
    write_q4_k_gguf(wide.state_dict(), path)
    try:
        found = model_info(path)
        assert (found.architecture, found.quantisation) == (Architecture.QWEN_IMAGE, "Q4_K")
        params = text_params()
        ours = run(path, configs, params, tmp_path / "ours.png")
        loaded = load_pipeline(found, CPU, SingleFileConfigs(configs)).pipe
    finally:
        path.unlink()
    quantised = {getattr(weight, "quant_type", None) for weight in loaded.transformer.parameters()}
    assert gguf.GGMLQuantizationType.Q4_K in quantised  # kept quantised, as stored
    assert pixels(ours).std() > 10  # a picture, not a flat field
    stock = type(loaded)(**loaded.components)
    assert max_diff(pixels(ours), pixels(stock_text(stock, params))) == 0


def test_jobs_paused_on_the_quantised_files_resume_in_a_fresh_process(
    files: dict[Architecture, TinyQwenFiles], tmp_path: Path, fresh_process: Callable[..., Any]
) -> None:
    qwen = files[Architecture.QWEN_IMAGE]
    jobs = [
        (model_info(path), qwen.configs, text_params(seed=7))
        for path in (qwen.fp8_model, qwen.gguf_model)
    ]
    paused_jobs_resume_in_a_fresh_process(jobs, PAUSE_AT, tmp_path, fresh_process)


def test_without_a_tokenizer_the_file_is_refused_in_one_sentence_and_a_cached_one_serves(
    files: dict[Architecture, TinyQwenFiles], tmp_path: Path
) -> None:
    qwen = files[Architecture.QWEN_IMAGE]
    models = tmp_path / "models"
    for part in ("diffusion_models", "vae"):
        shutil.copytree(qwen.split_model.parents[1] / part, models / part)
    encoders = models / "text_encoders"
    encoders.mkdir()
    shutil.copy(qwen.tokenizer.parent / "qwen_2.5_vl_7b.safetensors", encoders)
    alone = models / "diffusion_models" / qwen.split_model.name
    assert model_info(alone).unsupported_reason == f"qwen_image_bf16: {NO_TOKENIZER}"
    # A Hugging Face cache snapshot of Qwen/Qwen-Image holds one in tokenizer/.
    snapshot = tmp_path / "hub" / "models--Qwen--Qwen-Image" / "snapshots" / "0123abc"
    shutil.copytree(qwen.tokenizer, snapshot / "tokenizer")
    found = model_info(alone)
    assert found.architecture is Architecture.QWEN_IMAGE, found.unsupported_reason


def test_comfyuis_fp8_scaled_text_encoder_is_dequantised_as_comfyui_does(
    files: dict[Architecture, TinyQwenFiles], tmp_path: Path
) -> None:
    """`qwen_2.5_vl_7b_fp8_scaled.safetensors`: float8 weight matrices, each with its float32
    `scale_weight`, and the `scaled_fp8` marker; loaded as weight x scale."""
    from app.engine.generation.families.qwen.loading import text_encoder

    qwen = files[Architecture.QWEN_IMAGE]
    original = load_file(str(qwen.tokenizer.parent / "qwen_2.5_vl_7b.safetensors"))
    scaled: dict[str, torch.Tensor] = {"scaled_fp8": torch.zeros(2, dtype=torch.float8_e4m3fn)}
    for key, value in original.items():
        if key.endswith(".weight") and value.ndim == 2 and "embed_tokens" not in key:
            scale = value.abs().max() / 448
            scaled[key] = (value / scale).to(torch.float8_e4m3fn)
            scaled[key.removesuffix(".weight") + ".scale_weight"] = scale.reshape(1)
        else:
            scaled[key] = value
    config = qwen.configs / "qwen-image"
    model = text_encoder(scaled, config, "text_encoder", torch.float32)
    state = model.state_dict()
    probe = "model.layers.0.self_attn.q_proj"
    expected = scaled[probe + ".weight"].float() * scaled[probe + ".scale_weight"]
    assert torch.equal(state["model.language_model.layers.0.self_attn.q_proj.weight"], expected)
    assert torch.equal(state["lm_head.weight"], state["model.language_model.embed_tokens.weight"])
    save_file(scaled, str(tmp_path / "scaled.safetensors"))  # a file safetensors can hold

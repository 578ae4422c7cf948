"""Chroma and Flux.1 Kontext as the files artists have: ComfyUI's split layout
(`chroma-unlocked-v50.safetensors` in lodestones' keys, `flux1-kontext-dev.safetensors` in
Black Forest Labs' keys, beside text_encoders/ and vae/ae.safetensors) and GGUF Q8_0.

Kontext dev's keys and shapes are Flux.1 dev's, so the file's name tells them apart (it
contains "kontext"); Chroma's `distilled_guidance_layer` tells it apart by content. Through
Easel's loop each draws the stock pipeline's image on the same components (max pixel
difference 0), the split files holding exactly their diffusers-folder twin's weights; a job
paused on a GGUF resumes in a fresh process to the whole run's.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file, save_file

from app.engine.generation.device import CPU
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.load.pipelines import (
    SingleFileConfigs,
    _pipeline_class,
    load_pipeline,
)
from app.engine.generation.outcome import OutcomeKind, StepDecision
from app.engine.jobs.params import GenerationParams
from tests.engine.generation.file_jobs import paused_jobs_resume_in_a_fresh_process, runner_on
from tests.engine.generation.tiny_architectures import max_diff, model_info, pixels
from tests.engine.generation.tiny_transformer_files import (
    SPLIT_FILE_NAMES,
    write_gguf,
    write_tiny_split,
)

pytestmark = pytest.mark.filterwarnings(
    "ignore:__array__ implementation:DeprecationWarning", "ignore::FutureWarning"
)

FAMILIES = (Architecture.CHROMA, Architecture.FLUX1_KONTEXT)
STEPS, PAUSE_AT = 3, 2


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[Architecture, dict[str, Path]]:
    found = {}
    for arch in FAMILIES:
        layout = write_tiny_split(arch, tmp_path_factory.mktemp(arch.value))
        gguf = layout.split_model.with_name(f"{SPLIT_FILE_NAMES[arch.value]}-Q8_0.gguf")
        write_gguf(load_file(str(layout.split_model)), gguf, arch)
        found[arch] = {
            "split": layout.split_model, "gguf": gguf, "folder": layout.folder,
            "configs": layout.configs,
        }  # fmt: skip
    return found


def params_for(arch: Architecture, **changes: Any) -> GenerationParams:
    chroma = {"negative_prompt": "a dog", "cfg": 4.0}  # true CFG, as stock's default
    base: dict[str, Any] = {
        "prompt": "the cat", "model": "m", "steps": STEPS, "cfg": 3.5, "width": 64,
        "height": 48, "seed": 1234, **(chroma if arch is Architecture.CHROMA else {}),
    }  # fmt: skip
    return GenerationParams(**{**base, **changes})


def stock_image(pipe: Any, arch: Architecture, params: GenerationParams) -> Any:
    """The stock pipeline called with its defaults but the job's settings; Kontext's
    `max_area` is the job's area (it would draw 1 MP otherwise, as Easel refuses to)."""
    pipe.set_progress_bar_config(disable=True)
    extra: dict[str, Any] = (
        {"negative_prompt": params.negative_prompt} if params.negative_prompt else {}
    )
    if arch is Architecture.FLUX1_KONTEXT:
        extra["max_area"] = params.width * params.height
    image = pipe(
        prompt=params.prompt, num_inference_steps=params.steps, guidance_scale=params.cfg,
        height=params.height, width=params.width,
        generator=torch.Generator("cpu").manual_seed(params.seed), **extra,
    ).images[0]  # fmt: skip
    return pixels(image)


def test_chroma_is_told_by_its_keys_and_kontext_by_its_name(
    files: dict[Architecture, dict[str, Path]], tmp_path: Path
) -> None:
    chroma = model_info(files[Architecture.CHROMA]["split"])
    assert chroma.architecture is Architecture.CHROMA, chroma.unsupported_reason
    assert sorted(part.kind for part in chroma.parts) == ["t5", "transformer", "vae"]
    kontext = model_info(files[Architecture.FLUX1_KONTEXT]["split"])
    assert kontext.architecture is Architecture.FLUX1_KONTEXT, kontext.unsupported_reason
    assert kontext.config_name == "flux1-kontext-dev"
    # The same bytes under Flux.1 dev's name are Flux.1 dev: the keys cannot tell them apart.
    renamed = files[Architecture.FLUX1_KONTEXT]["split"].with_name("flux1-dev.safetensors")
    shutil.copy(files[Architecture.FLUX1_KONTEXT]["split"], renamed)
    try:
        assert model_info(renamed).architecture is Architecture.FLUX1
    finally:
        renamed.unlink()
    for arch in FAMILIES:
        gguf = model_info(files[arch]["gguf"])
        assert (gguf.architecture, gguf.quantisation) == (arch, "Q8_0"), gguf.unsupported_reason
        original = load_file(str(files[arch]["split"]))
        fp8 = {k: v.to(torch.float8_e4m3fn) if v.ndim >= 2 else v for k, v in original.items()}
        fp8_file = files[arch]["split"].with_name(files[arch]["split"].stem + "-fp8.safetensors")
        save_file(fp8, str(fp8_file))
        try:
            found = model_info(fp8_file)
            assert (found.architecture, found.quantisation) == (arch, "fp8")
        finally:
            fp8_file.unlink()


def test_a_chroma_file_without_a_t5_is_refused_in_one_sentence(
    files: dict[Architecture, dict[str, Path]], tmp_path: Path
) -> None:
    alone = tmp_path / "models" / "diffusion_models" / "chroma-unlocked-v50.safetensors"
    alone.parent.mkdir(parents=True)
    shutil.copy(files[Architecture.CHROMA]["split"], alone)
    shutil.copytree(
        files[Architecture.CHROMA]["split"].parents[1] / "vae", alone.parents[1] / "vae"
    )
    model = model_info(alone)
    assert model.unsupported_reason == (
        "chroma-unlocked-v50: needs a T5-XXL text encoder in text_encoders/"
    )


@pytest.mark.parametrize(
    ("arch", "layout"),
    [
        (Architecture.CHROMA, "split"),
        (Architecture.CHROMA, "gguf"),
        (Architecture.FLUX1_KONTEXT, "split"),
        (Architecture.FLUX1_KONTEXT, "gguf"),
    ],
    ids=lambda v: getattr(v, "value", v),
)
def test_the_loop_on_the_files_draws_the_stock_pipelines_image(
    files: dict[Architecture, dict[str, Path]], arch: Architecture, layout: str, tmp_path: Path
) -> None:
    model, configs = model_info(files[arch][layout]), files[arch]["configs"]
    params = params_for(arch)
    outcome = runner_on(model, configs).run(
        params, output_path=tmp_path / "ours.png", checkpoint_path=tmp_path / "ours.ckpt",
        on_step=lambda _p: StepDecision.CONTINUE,
    )  # fmt: skip
    assert outcome.kind is OutcomeKind.COMPLETED and outcome.image_path is not None
    loaded = load_pipeline(model, CPU, SingleFileConfigs(configs)).pipe
    if layout == "split":  # every weight its diffusers-folder twin's, exactly
        twin = _pipeline_class(arch).from_pretrained(files[arch]["folder"], local_files_only=True)
        for name in ("transformer", "vae", "text_encoder"):
            ours, theirs = loaded.components[name].state_dict(), twin.components[name].state_dict()
            assert sorted(ours) == sorted(theirs)
            assert all(torch.equal(ours[k], theirs[k]) for k in ours), name
    # The stock pipeline on the components Easel loaded (the twin's own object can differ
    # by 1 at some sizes: the same weights at other memory alignments take other CPU
    # kernels; cloned into fresh memory they agree exactly).
    stock = type(loaded)(**loaded.components)
    assert max_diff(pixels(outcome.image_path), stock_image(stock, arch, params)) == 0


def test_a_job_paused_on_a_gguf_resumes_in_a_fresh_process_to_the_same_image(
    files: dict[Architecture, dict[str, Path]], tmp_path: Path, fresh_process: Callable[..., Any]
) -> None:
    jobs = [
        (model_info(files[arch]["gguf"]), files[arch]["configs"], params_for(arch, seed=7))
        for arch in FAMILIES
    ]
    paused_jobs_resume_in_a_fresh_process(jobs, PAUSE_AT, tmp_path, fresh_process)


def test_chroma_keys_convert_as_diffusers_converts_them_at_the_released_width() -> None:
    """Easel's lodestones -> diffusers conversion (any width) equals diffusers' own (width
    fixed at 3072) on a Chroma1-HD-size layout: one column per tensor, as Flux's test."""
    from diffusers import ChromaTransformer2DModel
    from diffusers.loaders.single_file_utils import (
        convert_chroma_transformer_checkpoint_to_diffusers,
    )

    from app.engine.generation.families.chroma.keys import (
        chroma_from_diffusers,
        chroma_to_diffusers,
    )
    from app.engine.generation.load.pipelines import bundled_configs

    config = ChromaTransformer2DModel.load_config(bundled_configs().root / "chroma" / "transformer")
    config.update(num_layers=2, num_single_layers=2, approximator_layers=2)
    with torch.device("meta"):
        model = ChromaTransformer2DModel.from_config(config)
        shapes = {k: v.shape for k, v in model.state_dict().items()}
    generator = torch.Generator().manual_seed(0)
    skeleton = {k: torch.randn(shape[0], 1, generator=generator) for k, shape in shapes.items()}
    original = chroma_from_diffusers(skeleton)
    assert "distilled_guidance_layer.layers.0.in_layer.weight" in original
    ours = chroma_to_diffusers({"model.diffusion_model." + k: v for k, v in original.items()})
    theirs = convert_chroma_transformer_checkpoint_to_diffusers(dict(original))
    assert sorted(ours) == sorted(theirs) == sorted(skeleton)
    assert all(torch.equal(ours[k], theirs[k]) and torch.equal(ours[k], skeleton[k]) for k in ours)


def test_an_edit_on_a_kontext_gguf_file_is_the_stock_pipelines_edit(
    files: dict[Architecture, dict[str, Path]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An instruction and a picture (the edit job) on the quantised file: as test_kontext.py
    does on folders, with the preferred resolutions shrunk eightfold for both sides."""
    import io

    from diffusers.pipelines.flux import pipeline_flux_kontext
    from PIL import Image

    from app.engine.jobs.params import KIND_EDIT
    from app.engine.jobs.run_inputs import RunInputs
    from tests.engine.generation.test_img2img import init_png

    table = [(w // 8, h // 8) for w, h in pipeline_flux_kontext.PREFERRED_KONTEXT_RESOLUTIONS]
    monkeypatch.setattr(pipeline_flux_kontext, "PREFERRED_KONTEXT_RESOLUTIONS", table)
    arch = Architecture.FLUX1_KONTEXT
    model, configs = model_info(files[arch]["gguf"]), files[arch]["configs"]
    params = params_for(arch, prompt="make it night", kind=KIND_EDIT, init_image="job:1")
    picture = init_png((64, 48))
    outcome = runner_on(model, configs).run(
        params, RunInputs(init_image=picture), output_path=tmp_path / "ours.png",
        checkpoint_path=tmp_path / "ours.ckpt", on_step=lambda _p: StepDecision.CONTINUE,
    )  # fmt: skip
    assert outcome.kind is OutcomeKind.COMPLETED and outcome.image_path is not None
    loaded = load_pipeline(model, CPU, SingleFileConfigs(configs)).pipe
    stock = type(loaded)(**loaded.components)
    stock.set_progress_bar_config(disable=True)
    expected = stock(
        image=Image.open(io.BytesIO(picture)), prompt=params.prompt,
        num_inference_steps=params.steps, height=params.height, width=params.width,
        max_area=params.width * params.height,
        generator=torch.Generator("cpu").manual_seed(params.seed),
    ).images[0]  # fmt: skip
    assert max_diff(pixels(outcome.image_path), pixels(expected)) == 0

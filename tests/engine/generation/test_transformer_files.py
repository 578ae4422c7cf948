"""Flux.1 and SD 3.5 from the files artists have: an all-in-one `.safetensors` in the
original key layout, and ComfyUI's split layout (diffusion_models/, text_encoders/, vae/).

Each is detected from headers alone, and the pipeline Easel assembles from it has exactly
the weights of its diffusers-folder twin, so stock diffusers on it draws the twin's image
(max difference 0). Files that do not fit are refused in one sentence naming the file.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from app.engine.generation.device import CPU, DeviceChoice
from app.engine.generation.errors import UnsupportedModel
from app.engine.generation.files.architecture import Architecture, Prediction
from app.engine.generation.files.sources import ModelInfo, ModelSearchPath, ModelSource, list_models
from app.engine.generation.load.pipelines import SingleFileConfigs, _pipeline_class, load_pipeline
from app.engine.generation.request_checks import check_runnable
from app.engine.jobs.params import GenerationParams
from tests.engine.generation.tiny_transformer_files import (
    CONFIG_NAMES,
    T5_WIDTH,
    TinyLayouts,
    write_tiny_layouts,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")

FAMILIES = [Architecture.FLUX1, Architecture.SD3]


@pytest.fixture(scope="module")
def layouts(tmp_path_factory: pytest.TempPathFactory) -> dict[Architecture, TinyLayouts]:
    root = tmp_path_factory.mktemp("transformer-files")
    return {arch: write_tiny_layouts(arch, root / arch.value) for arch in FAMILIES}


@pytest.fixture(scope="module")
def twins(layouts: dict[Architecture, TinyLayouts]) -> dict[Architecture, object]:
    return {
        arch: _pipeline_class(arch).from_pretrained(layout.folder, local_files_only=True)
        for arch, layout in layouts.items()
    }


def _info(path: Path) -> ModelInfo:
    from app.engine.generation.files.sources import detected

    return detected(ModelInfo(path.stem, path, ModelSource.USER))


def _aligned(pipe: object) -> object:
    """Every weight copied into fresh memory. CPU kernels' float results depend on where a
    weight lies (a mapped file puts tensors at any offset): cloning the twin's own weights
    moves its tiny Flux image by 4e-7. With both pipelines' weights placed alike, equal
    weights must give equal images, bit for bit."""
    for component in pipe.components.values():  # type: ignore[attr-defined]
        if isinstance(component, torch.nn.Module):
            for tensor in [*component.parameters(), *component.buffers()]:
                tensor.data = tensor.data.clone()
    return pipe


def _image(pipe: object, architecture: Architecture) -> np.ndarray:
    options: dict[str, Any] = {"height": 32, "width": 32, "num_inference_steps": 2}
    if architecture is Architecture.FLUX1:
        options["max_sequence_length"] = 16
    else:
        options.update(max_sequence_length=16, guidance_scale=4.0, negative_prompt="blurry")
    result = pipe(  # type: ignore[operator]
        "a cat", generator=torch.Generator("cpu").manual_seed(7), output_type="np", **options
    )
    return np.asarray(result.images[0])


@pytest.mark.parametrize("layout", ["all-in-one", "split"])
@pytest.mark.parametrize("architecture", FAMILIES, ids=lambda a: a.value)
def test_the_assembled_pipeline_is_its_diffusers_twin(
    layouts: dict[Architecture, TinyLayouts],
    twins: dict[Architecture, object],
    architecture: Architecture,
    layout: str,
) -> None:
    files = layouts[architecture]
    model = _info(files.all_in_one if layout == "all-in-one" else files.split_model)
    assert model.supported, model.unsupported_reason
    assert (model.architecture, model.prediction) == (architecture, Prediction.FLOW)
    assert model.config_name == CONFIG_NAMES[architecture]
    ours = load_pipeline(model, CPU, SingleFileConfigs(files.configs)).pipe
    twin = twins[architecture]
    for name, component in twin.components.items():  # type: ignore[attr-defined]
        if isinstance(component, torch.nn.Module):
            theirs, mine = component.state_dict(), getattr(ours, name).state_dict()
            assert sorted(mine) == sorted(theirs), name
            assert all(torch.equal(mine[k], theirs[k]) for k in theirs), name
    assert type(ours.scheduler).__name__ == type(twin.scheduler).__name__  # type: ignore[attr-defined]
    assert ours.scheduler.config == twin.scheduler.config  # type: ignore[attr-defined]
    drawn = _image(_aligned(ours), architecture)
    assert np.abs(drawn - _image(_aligned(twin), architecture)).max() == 0


T5_COMPONENTS = {Architecture.FLUX1: "text_encoder_2", Architecture.SD3: "text_encoder_3"}


@pytest.mark.parametrize("architecture", FAMILIES, ids=lambda a: a.value)
def test_on_a_float16_only_device_the_assembled_t5_runs_in_float32(
    layouts: dict[Architecture, TinyLayouts], architecture: Architecture
) -> None:
    """As the folder loads with diffusers' per-component dtype (device.precision): T5 in
    float32, everything else in float16, each weight equal to the twin's so loaded."""
    files = layouts[architecture]
    float16_only = DeviceChoice("cpu", "float16")  # a Turing GPU's choice, see test_float16_devices
    ours = load_pipeline(_info(files.split_model), float16_only, SingleFileConfigs(files.configs))
    t5 = T5_COMPONENTS[architecture]
    dtypes = {"default": torch.float16, t5: torch.float32}
    twin = _pipeline_class(architecture).from_pretrained(
        files.folder, local_files_only=True, dtype=dtypes
    )
    for name, component in twin.components.items():
        if isinstance(component, torch.nn.Module):
            mine = getattr(ours.pipe, name)
            assert mine.dtype == dtypes.get(name, torch.float16), name
            theirs, held = component.state_dict(), mine.state_dict()
            assert all(torch.equal(held[k], theirs[k]) for k in theirs), name


def test_the_split_layout_is_listed_with_its_parts_and_only_the_diffusion_model(
    layouts: dict[Architecture, TinyLayouts],
) -> None:
    files = layouts[Architecture.SD3]
    [model] = list_models(ModelSearchPath(user=(files.split_root,)))
    assert model.name == "sd3.5_medium" and model.supported
    assert model.label == "SD 3.5, 1024 px"
    assert {part.kind: part.path.name for part in model.parts} == {
        "transformer": "sd3.5_medium.safetensors",
        "clip_l": "clip_l.safetensors",
        "clip_g": "clip_g.safetensors",
        "t5": "t5xxl_fp16.safetensors",
        "vae": "sd3.5_medium_ae.safetensors",
    }


def _copy_split(files: TinyLayouts, dest: Path) -> Path:
    shutil.copytree(files.split_root, dest)
    return dest


def test_a_missing_part_is_named_with_its_folder(
    layouts: dict[Architecture, TinyLayouts], tmp_path: Path
) -> None:
    root = _copy_split(layouts[Architecture.FLUX1], tmp_path / "models")
    (root / "text_encoders" / "t5xxl_fp16.safetensors").unlink()
    [model] = list_models(ModelSearchPath(user=(root,)))
    assert model.unsupported_reason == "flux1-dev: needs a T5-XXL text encoder in text_encoders/"
    (root / "vae" / "flux1-dev_ae.safetensors").unlink()
    [model] = list_models(ModelSearchPath(user=(root,)))
    assert model.unsupported_reason == (
        "flux1-dev: needs a T5-XXL text encoder in text_encoders/ and a VAE in vae/"
    )
    params = GenerationParams("a cat", model="flux1-dev", width=32, height=32)
    with pytest.raises(UnsupportedModel, match="needs a T5-XXL text encoder in text_encoders/"):
        check_runnable(params, ModelSearchPath(user=(root,)))


def _resized_t5(source: Path, dest: Path, width: int) -> None:
    weights = load_file(str(source))
    odd = {
        k: torch.zeros([width if n == T5_WIDTH else n for n in v.shape]) for k, v in weights.items()
    }
    save_file(odd, str(dest))


def test_a_text_encoder_of_the_wrong_size_is_refused_naming_the_file(
    layouts: dict[Architecture, TinyLayouts], tmp_path: Path
) -> None:
    root = _copy_split(layouts[Architecture.FLUX1], tmp_path / "models")
    t5 = root / "text_encoders" / "t5xxl_fp16.safetensors"
    _resized_t5(t5, root / "text_encoders" / "t5_base.safetensors", 64)
    [model] = list_models(ModelSearchPath(user=(root,)))
    assert model.supported  # the one that fits is used; the other is ignored
    assert {p.kind: p.path.name for p in model.parts}["t5"] == "t5xxl_fp16.safetensors"
    t5.unlink()
    [model] = list_models(ModelSearchPath(user=(root,)))
    assert model.unsupported_reason == (
        f"flux1-dev: t5_base.safetensors in text_encoders/ is a T5 text encoder 64 wide, "
        f"but the model needs a T5-XXL text encoder {T5_WIDTH} wide"
    )
    params = GenerationParams("a cat", model="flux1-dev", width=32, height=32)
    with pytest.raises(UnsupportedModel, match=r"t5_base\.safetensors"):
        check_runnable(params, ModelSearchPath(user=(root,)))


def test_mismatched_clips_and_vae_are_refused_naming_the_files(
    layouts: dict[Architecture, TinyLayouts],
    tmp_path: Path,
) -> None:
    files = layouts[Architecture.SD3]
    root = _copy_split(files, tmp_path / "models")
    (root / "text_encoders" / "clip_g.safetensors").unlink()
    [model] = list_models(ModelSearchPath(user=(root,)))
    assert model.unsupported_reason == (
        "sd3.5_medium: its CLIP-L and CLIP-G text encoders must be 80 wide together; "
        "found clip_l.safetensors (32)"
    )
    # A Flux VAE file of 16 channels fits SD 3 too (same layout); one of 4 does not.
    vae = root / "vae" / "sd3.5_medium_ae.safetensors"
    weights = load_file(str(vae))
    key = "decoder.conv_in.weight"
    weights[key] = torch.zeros(weights[key].shape[0], 4, 3, 3)
    save_file(weights, str(vae))
    shutil.copy(files.split_root / "text_encoders" / "clip_g.safetensors", root / "text_encoders")
    [model] = list_models(ModelSearchPath(user=(root,)))
    assert model.unsupported_reason == (
        "sd3.5_medium: sd3.5_medium_ae.safetensors in vae/ is a VAE of 4 latent channels, "
        "but the model needs 16"
    )


def test_a_flux_file_in_checkpoints_finds_missing_parts_in_the_split_folders(
    layouts: dict[Architecture, TinyLayouts], tmp_path: Path
) -> None:
    """A transformer-only file in checkpoints/ (where A1111 users put files) borrows the
    text encoders and VAE of text_encoders/ and vae/ beside it."""
    root = _copy_split(layouts[Architecture.FLUX1], tmp_path / "models")
    (root / "checkpoints").mkdir()
    shutil.move(root / "diffusion_models" / "flux1-dev.safetensors", root / "checkpoints")
    [model] = list_models(ModelSearchPath(user=(root,)))
    assert model.supported and model.path.parent.name == "checkpoints"


def test_a_schnell_file_and_an_sd3_0_file_are_told_apart_by_their_keys(tmp_path: Path) -> None:
    def header_only(name: str, keys: dict[str, tuple[int, ...]]) -> ModelInfo:
        path = tmp_path / f"{name}.safetensors"
        save_file({k: torch.zeros(shape) for k, shape in keys.items()}, str(path))
        return _info(path)

    flux = {
        "double_blocks.0.img_attn.norm.key_norm.scale": (4,),
        "img_in.weight": (8, 64),
        "txt_in.weight": (8, 96),
        "vector_in.in_layer.weight": (8, 32),
    }
    schnell = header_only("flux1-schnell", flux)
    assert schnell.unsupported_reason.startswith("flux1-schnell: needs a CLIP-L text encoder")
    sd3 = header_only(
        "sd3_medium",
        {
            "joint_blocks.0.x_block.attn.qkv.weight": (4, 4),
            "x_embedder.proj.weight": (8, 16, 2, 2),
            "context_embedder.weight": (8, 96),
            "y_embedder.mlp.0.weight": (8, 80),
        },
    )
    assert "SD 3.0 medium" in sd3.unsupported_reason


def test_flux_keys_convert_as_diffusers_converts_them_at_the_released_width() -> None:
    """Easel's BFL -> diffusers conversion (any width) equals diffusers' own (width fixed
    at 3072) on a released-size Flux.1 dev layout: every tensor of one column, so the
    full-size keys and splits are checked without 12 B weights."""
    from diffusers import FluxTransformer2DModel
    from diffusers.loaders.single_file_utils import (
        convert_flux_transformer_checkpoint_to_diffusers,
    )

    from app.engine.generation.families.flux.keys import flux_from_diffusers, flux_to_diffusers
    from app.engine.generation.load.pipelines import bundled_configs

    config = FluxTransformer2DModel.load_config(
        bundled_configs().root / "flux1-dev" / "transformer"
    )
    config.update(num_layers=2, num_single_layers=2)  # the per-block layout repeats
    with torch.device("meta"):
        shapes = {
            k: v.shape for k, v in FluxTransformer2DModel.from_config(config).state_dict().items()
        }
    generator = torch.Generator().manual_seed(0)
    skeleton = {k: torch.randn(shape[0], 1, generator=generator) for k, shape in shapes.items()}
    original = flux_from_diffusers(skeleton)
    ours = flux_to_diffusers({"model.diffusion_model." + k: v for k, v in original.items()})
    theirs = convert_flux_transformer_checkpoint_to_diffusers(dict(original))
    assert sorted(ours) == sorted(theirs) == sorted(skeleton)
    assert all(torch.equal(ours[k], theirs[k]) and torch.equal(ours[k], skeleton[k]) for k in ours)

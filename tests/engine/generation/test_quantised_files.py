"""Quantised diffusion models of Flux.1 and SD 3.5: GGUF (city96's ComfyUI-GGUF layout)
loaded through diffusers' GGUF quantizer, and fp8 (float8_e4m3fn) safetensors kept in fp8
and upcast per layer as each runs (diffusers' layerwise casting); the quantisation shown
in the picker's label.

fp8 bound against the unquantised twin: e4m3 keeps 3 bits of mantissa, so each weight is
off by up to 1/16 of itself (6.25 %); measured 0.022 on these tiny models: bound 0.05.

The GGUF Q8_0 file is written by the test from the tiny transformer's original-layout
weights with gguf's own writer. Bound against the unquantised twin: Q8_0 stores each block
of 32 weights as int8 times one float16 scale (the block's largest magnitude / 127), so a
weight moves by at most 1/254 of its block's largest magnitude (0.4 %); on these tiny
random models that moves a pixel (0..1) by 0.0024 at most (measured), so the bound is 0.01.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from app.engine.generation.device import CPU
from app.engine.generation.errors import UnsupportedModel
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.files.sources import (
    ModelInfo,
    ModelSearchPath,
    ModelSource,
    detected,
    list_models,
)
from app.engine.generation.files.transformer_files import GGUF_RUNNABLE
from app.engine.generation.load.pipelines import SingleFileConfigs, _pipeline_class, load_pipeline
from app.engine.generation.request_checks import check_runnable
from app.engine.jobs.params import GenerationParams
from tests.engine.generation.tiny_transformer_files import (
    CONFIG_NAMES,
    FILE_NAMES,
    TinyLayouts,
    write_gguf,
    write_tiny_layouts,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")

Q8_0_BOUND = 0.01
FP8_BOUND = 0.05
FAMILIES = [Architecture.FLUX1, Architecture.SD3]


@pytest.fixture(scope="module")
def quantised(tmp_path_factory: pytest.TempPathFactory) -> dict[Architecture, TinyLayouts]:
    root = tmp_path_factory.mktemp("quantised-files")
    layouts = {}
    for arch in FAMILIES:
        layout = write_tiny_layouts(arch, root / arch.value)
        original = load_file(str(layout.split_model))
        layout.split_model.unlink()  # the quantised files are the diffusion models here
        fp8_root = layout.split_root.parent / "fp8"  # a models folder with the fp8 one
        shutil.copytree(layout.split_root, fp8_root)
        fp8 = {k: v.to(torch.float8_e4m3fn) if v.ndim >= 2 else v for k, v in original.items()}
        save_file(fp8, str(_fp8_file(layout, arch)))
        write_gguf(original, _gguf(layout, arch), arch)
        layouts[arch] = layout
    return layouts


def _gguf(layout: TinyLayouts, arch: Architecture) -> Path:
    return layout.split_model.with_name(f"{FILE_NAMES[arch]}-Q8_0.gguf")


def _image(pipe: Any, architecture: Architecture) -> np.ndarray:
    options: dict[str, Any] = {"height": 32, "width": 32, "num_inference_steps": 2}
    options["max_sequence_length"] = 16
    if architecture is Architecture.SD3:
        options.update(guidance_scale=4.0, negative_prompt="blurry")
    result = pipe(
        "a cat", generator=torch.Generator("cpu").manual_seed(7), output_type="np", **options
    )
    return np.asarray(result.images[0])


def _assembled(layout: TinyLayouts, arch: Architecture) -> Any:
    model = detected(ModelInfo(f"{FILE_NAMES[arch]}-Q8_0", _gguf(layout, arch), ModelSource.USER))
    assert model.supported, model.unsupported_reason
    return load_pipeline(model, CPU, SingleFileConfigs(layout.configs)).pipe


def test_a_gguf_model_is_listed_with_its_quantisation(
    quantised: dict[Architecture, TinyLayouts],
) -> None:
    [model] = list_models(ModelSearchPath(user=(quantised[Architecture.FLUX1].split_root,)))
    assert (model.name, model.quantisation) == ("flux1-dev-Q8_0", "Q8_0")
    assert model.label == "Flux.1, 1024 px, Q8_0" and model.config_name == "flux1-dev"
    assert {p.kind for p in model.parts} == {"transformer", "clip_l", "t5", "vae"}


def test_sd3_gguf_draws_what_stock_diffusers_draws_from_the_same_file(
    quantised: dict[Architecture, TinyLayouts],
) -> None:
    from diffusers import GGUFQuantizationConfig, SD3Transformer2DModel

    arch = Architecture.SD3
    layout = quantised[arch]
    ours = _assembled(layout, arch)
    twin = _pipeline_class(arch).from_pretrained(layout.folder, local_files_only=True)
    stock_transformer = SD3Transformer2DModel.from_single_file(
        str(_gguf(layout, arch)),
        quantization_config=GGUFQuantizationConfig(compute_dtype=torch.float32),
        config=str(layout.configs / CONFIG_NAMES[arch]),
        subfolder="transformer",
        torch_dtype=torch.float32,
        local_files_only=True,
    )
    stock = type(twin)(**{**twin.components, "transformer": stock_transformer})
    drawn = _image(ours, arch)
    assert np.abs(drawn - _image(stock, arch)).max() == 0
    assert 0 < np.abs(drawn - _image(twin, arch)).max() <= Q8_0_BOUND


def test_flux_gguf_holds_the_files_weights_and_draws_within_the_bound(
    quantised: dict[Architecture, TinyLayouts],
) -> None:
    """Stock diffusers cannot read a Flux transformer narrower than the released 3072
    (its key conversion fixes the width), so the tiny file is checked layer by layer: each
    of the pipeline's layers is the file's tensor as diffusers reads it (the same quantised
    bytes; dequantised, as at run time, they are gguf's own dequantisation to float16)."""
    import gguf
    from diffusers.models.model_loading_utils import load_gguf_checkpoint
    from diffusers.quantizers.gguf.utils import GGUFParameter, dequantize_gguf_tensor

    from app.engine.generation.families.flux.keys import flux_to_diffusers

    def plain(value: torch.Tensor) -> torch.Tensor:
        return dequantize_gguf_tensor(value) if isinstance(value, GGUFParameter) else value

    arch = Architecture.FLUX1
    layout = quantised[arch]
    ours = _assembled(layout, arch)
    in_file = load_gguf_checkpoint(str(_gguf(layout, arch)), return_tensors=True)
    expected = {k: plain(v) for k, v in flux_to_diffusers(dict(in_file)).items()}
    held = dict(ours.transformer.named_parameters())
    assert sorted(held) == sorted(expected)
    assert sum(isinstance(p, GGUFParameter) for p in held.values()) > 10  # kept quantised
    for name, param in held.items():
        assert torch.equal(plain(param), expected[name]), name
    reader = gguf.GGUFReader(str(_gguf(layout, arch)))
    reference = next(t for t in reader.tensors if t.tensor_type.name == "Q8_0")
    ours_first = plain(in_file[reference.name]).float().numpy().reshape(-1)
    theirs_first = gguf.quants.dequantize(reference.data, reference.tensor_type).reshape(-1)
    assert np.allclose(ours_first, theirs_first, rtol=1e-3, atol=1e-6)
    twin = _pipeline_class(arch).from_pretrained(layout.folder, local_files_only=True)
    assert 0 < np.abs(_image(ours, arch) - _image(twin, arch)).max() <= Q8_0_BOUND


def test_a_gguf_of_an_unsupported_quantisation_is_refused_at_submit(
    quantised: dict[Architecture, TinyLayouts], tmp_path: Path
) -> None:
    import gguf

    arch = Architecture.FLUX1
    source = gguf.GGUFReader(str(_gguf(quantised[arch], arch)))
    odd = tmp_path / "diffusion_models" / "flux1-dev-IQ2_XXS.gguf"
    odd.parent.mkdir()
    writer = gguf.GGUFWriter(str(odd), "flux")
    kind = gguf.GGMLQuantizationType.IQ2_XXS
    for tensor in source.tensors:
        shape = [int(n) for n in reversed(tensor.shape)]
        if tensor.name == "double_blocks.0.img_mlp.0.weight":  # one layer in IQ2_XXS
            shape[-1] = 256  # IQ2_XXS blocks are 256 wide
            raw = np.zeros(gguf.quants.quant_shape_to_byte_shape(shape, kind), np.uint8)
            writer.add_tensor(tensor.name, raw, raw_dtype=kind)
        else:
            writer.add_tensor(tensor.name, np.zeros(shape, np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    [model] = list_models(ModelSearchPath(user=(tmp_path,)))
    assert model.unsupported_reason.startswith(
        "flux1-dev-IQ2_XXS: its weights are GGUF IQ2_XXS, a quantisation diffusers cannot run"
    )
    params = GenerationParams("a cat", model="flux1-dev-IQ2_XXS", width=32, height=32)
    with pytest.raises(UnsupportedModel, match="GGUF IQ2_XXS"):
        check_runnable(params, ModelSearchPath(user=(tmp_path,)))


def test_the_runnable_gguf_types_are_diffusers_own() -> None:
    from diffusers.quantizers.gguf.utils import SUPPORTED_GGUF_QUANT_TYPES

    runnable = {kind.name for kind in SUPPORTED_GGUF_QUANT_TYPES} | {"F32", "F16"}
    assert set(GGUF_RUNNABLE) == runnable


def _fp8_file(layout: TinyLayouts, arch: Architecture) -> Path:
    return (
        layout.split_root.parent
        / "fp8"
        / "diffusion_models"
        / f"{FILE_NAMES[arch]}-fp8.safetensors"
    )


@pytest.mark.parametrize("arch", FAMILIES, ids=lambda a: a.value)
def test_an_fp8_model_stays_fp8_and_draws_what_diffusers_draws_from_the_file(
    quantised: dict[Architecture, TinyLayouts], arch: Architecture
) -> None:
    from app.engine.generation.families.flux.keys import flux_to_diffusers

    layout = quantised[arch]
    path = _fp8_file(layout, arch)
    [model] = list_models(ModelSearchPath(user=(path.parent.parent,)))
    assert (model.quantisation, model.label.rsplit(", ", 1)[-1]) == ("fp8", "fp8")
    ours = load_pipeline(model, CPU, SingleFileConfigs(layout.configs)).pipe
    stored = load_file(str(path))
    fp8_values = sum(v.numel() for v in stored.values() if v.dtype == torch.float8_e4m3fn)
    held = {n for n, p in ours.transformer.named_parameters() if p.dtype == torch.float8_e4m3fn}
    held_values = sum(p.numel() for n, p in ours.transformer.named_parameters() if n in held)
    assert held_values > 0.6 * fp8_values  # the weight layers stay fp8 between steps
    # diffusers' own load of the file: widened at load, then layerwise casting.
    transformer_class = type(ours.transformer)
    source: Any = str(path) if arch is Architecture.SD3 else flux_to_diffusers(stored)
    stock_transformer = transformer_class.from_single_file(
        source,
        config=str(layout.configs / CONFIG_NAMES[arch]),
        subfolder="transformer",
        torch_dtype=torch.float32,
        local_files_only=True,
    )
    stock_transformer.enable_layerwise_casting(
        storage_dtype=torch.float8_e4m3fn, compute_dtype=torch.float32
    )
    stock_fp8 = stock_transformer.named_parameters()
    assert held == {n for n, p in stock_fp8 if p.dtype == torch.float8_e4m3fn}
    twin = _pipeline_class(arch).from_pretrained(layout.folder, local_files_only=True)
    stock = type(twin)(**{**twin.components, "transformer": stock_transformer})
    drawn = _image(ours, arch)
    assert np.abs(drawn - _image(stock, arch)).max() == 0
    assert 0 < np.abs(drawn - _image(twin, arch)).max() <= FP8_BOUND


def test_a_scaled_fp8_flux_draws_what_diffusers_draws_from_its_weights_multiplied_out(
    quantised: dict[Architecture, TinyLayouts], tmp_path: Path
) -> None:
    """ComfyUI's `flux1-dev-fp8-scaled` layout (each weight fp8 times its `scale_weight`):
    dequantised at load, the image of the same weights multiplied out, as a plain file
    loaded by diffusers' own `from_single_file`."""
    from diffusers import FluxTransformer2DModel

    from app.engine.generation.families.flux.keys import flux_to_diffusers
    from tests.engine.generation.test_scaled_fp8_files import multiplied_out, scaled_fp8

    arch = Architecture.FLUX1
    layout = quantised[arch]
    plain_fp8 = load_file(str(_fp8_file(layout, arch)))
    scaled = scaled_fp8({k: v.float() if v.ndim >= 2 else v for k, v in plain_fp8.items()})
    root = tmp_path / "models"
    shutil.copytree(layout.split_root, root, ignore=shutil.ignore_patterns("*.gguf"))
    save_file(scaled, str(root / "diffusion_models" / "flux1-dev-fp8-scaled.safetensors"))
    [model] = list_models(ModelSearchPath(user=(root,)))
    assert (model.name, model.quantisation) == ("flux1-dev-fp8-scaled", "fp8 scaled")
    ours = load_pipeline(model, CPU, SingleFileConfigs(layout.configs)).pipe
    stock_transformer = FluxTransformer2DModel.from_single_file(
        flux_to_diffusers(multiplied_out(scaled)),
        config=str(layout.configs / CONFIG_NAMES[arch]),
        subfolder="transformer",
        torch_dtype=torch.float32,
        local_files_only=True,
    )
    twin = _pipeline_class(arch).from_pretrained(layout.folder, local_files_only=True)
    stock = type(twin)(**{**twin.components, "transformer": stock_transformer})
    drawn = _image(ours, arch)
    assert np.abs(drawn - _image(stock, arch)).max() == 0
    assert 0 < np.abs(drawn - _image(twin, arch)).max() <= FP8_BOUND


def test_the_window_lists_the_quantisation_and_the_size_of_every_part(
    quantised: dict[Architecture, TinyLayouts],
) -> None:
    from app.engine.generation.files.sources import disk_bytes
    from app.engine.settings import Settings
    from app.ui.presenters.model_choices import disk_size_text
    from app.ui.wiring import model_choices

    root = quantised[Architecture.FLUX1].split_root
    choice = next(c for c in model_choices(Settings(models_dir=str(root))) if "Q8_0" in c.name)
    [model] = list_models(ModelSearchPath(user=(root,)))
    assert len(model.files) == 4  # the GGUF, CLIP-L, T5 and the VAE
    assert choice.disk_bytes == sum(disk_bytes(path) for path in model.files)
    assert choice.label() == (
        f"flux1-dev-Q8_0 · Flux.1, 1024 px · Q8_0 · {disk_size_text(choice.disk_bytes)}"
    )


def test_a_damaged_gguf_is_listed_as_unsupported_not_a_crash(tmp_path: Path) -> None:
    (tmp_path / "unet").mkdir()
    (tmp_path / "unet" / "cut.gguf").write_bytes(b"GGUF\x03\x00\x00\x00 cut short")
    [model] = list_models(ModelSearchPath(user=(tmp_path,)))
    assert model.unsupported_reason.startswith("cut.gguf cannot be used: it is not a readable")

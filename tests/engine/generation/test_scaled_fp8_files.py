"""ComfyUI's scaled fp8 diffusion models (`wan2.1_t2v_14B_fp8_scaled.safetensors`,
`flux1-dev-fp8-scaled`, `qwen_image_edit_2511_fp8mixed`): each weight matrix stored as
float8_e4m3fn with one float32 scale beside it (`<layer>.scale_weight`, and the
`scaled_fp8` mark; mixed files spell it `<layer>.weight_scale` and add `comfy_quant`),
dequantised as they load (weight x scale, as ComfyUI's fp8 layers compute it).

The reference: the same scaled weights multiplied out by the test and written as a plain
file, loaded by diffusers' own `from_single_file` into the stock `WanPipeline` (0 apart,
every frame, and across a pause). The tiny Wan of tiny_wan_files, its UMT5 and VAE files.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from app.engine.generation.files.architecture import Architecture
from app.engine.generation.files.transformer_files import SCALED_FP8
from app.engine.generation.outcome import OutcomeKind
from app.engine.generation.scaled_fp8 import unscaled_fp8
from tests.engine.generation.test_wan import Written, clip, max_frame_diff, stock, wan_params
from tests.engine.generation.test_wan import written as written
from tests.engine.generation.test_wan_files import files_runner
from tests.engine.generation.tiny_architectures import model_info, pause_at
from tests.engine.generation.tiny_wan_files import (
    TinyWanFiles,
    stock_from_files,
    write_tiny_wan_files,
)

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

StateDict = dict[str, torch.Tensor]
SCALED_NAME = "wan2.1_t2v_1.3B_fp8_scaled.safetensors"
FP8_LARGEST = 448.0  # float8_e4m3fn's largest finite value


def scaled_fp8(weights: StateDict, seed: int = 3, mixed: bool = False) -> StateDict:
    """ComfyUI's fp8_scaled layout of `weights`: each weight matrix as fp8 values times a
    random per-tensor scale (at least its largest value / 448, so no value saturates), an
    activation scale of 1 beside it (as ComfyUI writes them), the `scaled_fp8` mark. `mixed`:
    its later fp8mixed layout (`weight_scale`, `input_scale`, each layer's `comfy_quant`, no
    mark), the first weight matrix left unquantised, as mixed files keep some layers."""
    generator = torch.Generator().manual_seed(seed)
    scaled: StateDict = {} if mixed else {"scaled_fp8": torch.empty(0, dtype=torch.float8_e4m3fn)}
    names = ("weight_scale", "input_scale") if mixed else ("scale_weight", "scale_input")
    matrices = [k for k, v in weights.items() if v.ndim == 2 and k.endswith(".weight")]
    kept = set(matrices[:1]) if mixed else set()
    for key, value in weights.items():
        if key not in matrices or key in kept:
            scaled[key] = value
            continue
        spread = 1 + torch.rand((), generator=generator)
        scale = (value.abs().max().float() / FP8_LARGEST * spread).reshape(())
        layer = key.removesuffix(".weight")
        scaled[key] = (value.float() / scale).to(torch.float8_e4m3fn)
        scaled[f"{layer}.{names[0]}"] = scale
        scaled[f"{layer}.{names[1]}"] = torch.ones(())
        if mixed:
            quant = json.dumps({"format": "float8_e4m3fn"}).encode()
            scaled[f"{layer}.comfy_quant"] = torch.tensor(list(quant), dtype=torch.uint8)
    return scaled


_SCALES = (".scale_weight", ".weight_scale")
_NOT_WEIGHTS = ("scaled_fp8", ".scale_input", ".input_scale", ".comfy_quant", *_SCALES)


def multiplied_out(scaled: StateDict) -> StateDict:
    """The plain weights a scaled file stands for, computed here apart from Easel's code."""
    plain = {}
    for key, value in scaled.items():
        if key.endswith(_NOT_WEIGHTS):
            continue
        layer = key.removesuffix(".weight")
        scales = [scaled[layer + name] for name in _SCALES if layer + name in scaled]
        plain[key] = value.float() * scales[0] if scales else value
    return plain


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> TinyWanFiles:
    return write_tiny_wan_files(tmp_path_factory.mktemp("wan-scaled-files"))


@pytest.fixture(scope="module")
def scaled_file(files: TinyWanFiles) -> Path:
    """The scaled file in diffusion_models/, and its weights multiplied out elsewhere."""
    scaled = scaled_fp8(load_file(str(files.split_model)))
    path = files.split_model.with_name(SCALED_NAME)
    save_file(scaled, str(path))
    plain = files.models.parent / "dequantised" / "wan.safetensors"
    plain.parent.mkdir()
    save_file(multiplied_out(scaled), str(plain))
    return path


def test_a_scaled_fp8_file_is_wan_2_1_stored_fp8_scaled(scaled_file: Path) -> None:
    model = model_info(scaled_file)
    assert model.architecture is Architecture.WAN2_1, model.unsupported_reason
    assert model.quantisation == SCALED_FP8 == "fp8 scaled"


def test_it_draws_the_frames_of_its_weights_multiplied_out_and_resumes_exactly(
    files: TinyWanFiles, scaled_file: Path, written: Written, tmp_path: Path
) -> None:
    params = wan_params(model="m", scheduler="UniPC", steps=3, frames=5)
    model = model_info(scaled_file, "m")
    whole = clip(files_runner(files, model), params, tmp_path, "whole")
    assert whole.kind is OutcomeKind.COMPLETED and whole.image_path is not None
    ours = written.frames[whole.image_path]
    plain = files.models.parent / "dequantised" / "wan.safetensors"
    assert max_frame_diff(ours, stock(stock_from_files(files, plain), params)) == 0

    paused = clip(files_runner(files, model), params, tmp_path, "paused", on_step=pause_at(2))
    assert paused.kind is OutcomeKind.PAUSED
    resumed = clip(files_runner(files, model), params, tmp_path, "paused")  # a fresh runner
    assert resumed.kind is OutcomeKind.COMPLETED
    assert max_frame_diff(written.frames[tmp_path / "paused.mp4"], ours) == 0


def test_mixed_files_weight_scale_is_scale_weight_and_their_markers_are_no_weights() -> None:
    """ComfyUI renames `scale_weight` to `weight_scale` (comfy.utils.convert_old_quants):
    the same number; `comfy_quant` and `input_scale` are not weights."""
    seeded = torch.Generator().manual_seed(0)
    weights = {"a.weight": torch.randn(4, 8, generator=seeded), "a.bias": torch.randn(4)}
    weights.update({"b.weight": torch.eye(3), "c.weight": torch.randn(2, 3, generator=seeded)})
    old, mixed = scaled_fp8(weights), scaled_fp8(weights, mixed=True)
    assert mixed["a.weight"].dtype == torch.float32 and "b.comfy_quant" in mixed
    for scaled in (old, mixed):
        dequantised, expected = unscaled_fp8(scaled), multiplied_out(scaled)
        assert dequantised.keys() == expected.keys() == weights.keys()
        assert all(torch.equal(dequantised[k], expected[k]) for k in weights)
        moved = (dequantised["c.weight"] - weights["c.weight"]).abs()  # e4m3: 1/16 at most
        assert float(moved.max()) > 0 and bool((moved <= weights["c.weight"].abs() / 16).all())
    assert torch.equal(unscaled_fp8(mixed)["a.weight"], weights["a.weight"])
    expected = multiplied_out(old)
    halves = unscaled_fp8(old, torch.bfloat16)
    assert halves["a.weight"].dtype == torch.bfloat16
    assert torch.equal(halves["a.weight"], expected["a.weight"].to(torch.bfloat16))


def _refused(files: TinyWanFiles, root: Path, change: dict[str, torch.Tensor]) -> str:
    """The refusal of a scaled file with `change` made, in a models folder of its own."""
    for folder in ("text_encoders", "vae"):
        shutil.copytree(files.models / folder, root / folder)
    scaled = {**scaled_fp8(load_file(str(files.split_model))), **change}
    path = root / "diffusion_models" / SCALED_NAME
    path.parent.mkdir(parents=True)
    save_file(scaled, str(path))
    return model_info(path).unsupported_reason


def test_a_scale_of_no_weight_of_no_fp8_or_of_many_values_is_refused_naming_the_file(
    files: TinyWanFiles, tmp_path: Path
) -> None:
    stray = {"blocks.7.ffn.0.scale_weight": torch.tensor(0.5)}
    assert _refused(files, tmp_path / "stray", stray) == (
        f"{SCALED_NAME} cannot be used: its scale blocks.7.ffn.0.scale_weight belongs to no "
        "weight (blocks.7.ffn.0.weight is not in the file)"
    )
    wide = {"blocks.0.ffn.0.weight": torch.ones(4, 2)}  # a scale on a float32 weight
    assert _refused(files, tmp_path / "wide", wide) == (
        f"{SCALED_NAME} cannot be used: its weight blocks.0.ffn.0.weight is stored as F32, "
        "not fp8, with a scale (blocks.0.ffn.0.scale_weight): a quantisation Easel cannot run"
    )
    blocks = {"blocks.0.ffn.0.weight_scale": torch.ones(4, 2)}  # nvfp4's block scales
    assert _refused(files, tmp_path / "blocks", blocks) == (
        f"{SCALED_NAME} cannot be used: its scale blocks.0.ffn.0.weight_scale holds 8 values, "
        "not the one per tensor of ComfyUI's fp8 scaled files (a block-quantised layout "
        "Easel cannot run)"
    )

"""Flux.1 and SD 3.5 on a float16-only device (a GPU before Ampere, MPS without bfloat16),
whose T5 overflows float16 as the released T5 XXL does: the job finishes with a finite
image, the stock pipeline's as its users run it there (T5 in float32, the rest in float16,
the embeddings cast and passed in). The CPU stands in for the device: `DeviceChoice("cpu",
"float16")` computes in float16 and, like a Turing GPU, has no native bfloat16 (see
`device.precision`, whose choices per device are checked without one here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from app.engine.generation.device import (
    DTYPE_ENV,
    DeviceChoice,
    Precision,
    component_dtypes,
    family_precision,
    precision,
)
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.outcome import OutcomeKind, StepDecision
from app.engine.generation.runner import Runner
from app.engine.jobs.params import GenerationParams
from app.testing.tiny.unet import overflow_t5_in_float16
from tests.engine.generation.tiny_architectures import (
    generate,
    max_diff,
    model_info,
    pause_at,
    pixels,
)

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

FLOAT16_ONLY = DeviceChoice("cpu", "float16")
STEPS, PAUSE_AT = 3, 2
PROMPT = "the cat"


@pytest.mark.parametrize(
    ("kind", "chosen", "forced", "bf16", "expected"),
    [
        ("cuda", "float16", None, False, Precision("float16", "float32")),  # Turing, Volta
        ("cuda:1", "float16", None, True, Precision("bfloat16", "bfloat16")),  # Ampere on
        ("mps", "float16", None, True, Precision("float16", "bfloat16")),  # recent macOS
        ("mps", "float16", None, False, Precision("float16", "float32")),
        ("cpu", "float32", None, False, Precision("float32", "float32")),
        # $EASEL_DTYPE sets the transformer's dtype exactly; T5 is still kept out of float16.
        ("cuda", "float16", "float16", True, Precision("float16", "bfloat16")),
        ("cpu", "float16", "float16", False, Precision("float16", "float32")),
        ("cpu", "bfloat16", "bfloat16", False, Precision("bfloat16", "bfloat16")),
        ("cuda", "float32", "float32", True, Precision("float32", "float32")),
    ],
)
def test_text_encoders_that_overflow_float16_never_run_in_it(
    kind: str, chosen: str, forced: str | None, bf16: bool, expected: Precision
) -> None:
    assert precision(kind, chosen, forced=forced, bf16_native=bf16) == expected


def test_each_family_names_its_overflowing_text_encoders() -> None:
    turing = Precision("float16", "float32")
    assert component_dtypes(Architecture.FLUX1, turing) == {
        "default": "float16", "text_encoder_2": "float32",
    }  # fmt: skip
    assert component_dtypes(Architecture.SD3, turing) == {
        "default": "float16", "text_encoder_3": "float32",
    }  # fmt: skip
    for qwen3 in (Architecture.ZIMAGE, Architecture.FLUX2_KLEIN):
        assert component_dtypes(qwen3, turing) == {
            "default": "float16", "text_encoder": "float32",
        }  # fmt: skip
    assert component_dtypes(Architecture.SDXL, turing) == {"default": "float16"}


def test_a_turing_gpu_is_recognised_from_what_torch_reports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(DTYPE_ENV, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    capability = {"now": (7, 5)}
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda _index: capability["now"])
    assert family_precision(DeviceChoice("cuda", "float16")) == Precision("float16", "float32")
    capability["now"] = (8, 6)
    assert family_precision(DeviceChoice("cuda", "float16")) == Precision("bfloat16", "bfloat16")


def test_a_mac_gets_bfloat16_text_encoders_only_where_its_probe_runs_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from app.engine.generation import device

    monkeypatch.delenv(DTYPE_ENV, raising=False)
    mac = DeviceChoice("mps", "float16")
    assert not device.bf16_native(mac)  # no MPS here: the probe says no, as any failure does
    monkeypatch.setattr(device, "_mps_computes_bfloat16", lambda: True)
    assert family_precision(mac) == Precision("float16", "bfloat16")


def test_forced_float16_on_the_cpu_runs_as_a_float16_only_gpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(DTYPE_ENV, "float16")
    assert family_precision(FLOAT16_ONLY) == Precision("float16", "float32")


# ---------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Flux.1 and SD 3.5 with a T5 that overflows float16; Z-Image and Flux.2 Klein as they
    are (a tiny Qwen3 does not overflow: their runs check the dtypes and casts alone)."""
    from app.testing.tiny.flux import build_tiny_flux
    from app.testing.tiny.klein import write_tiny_klein
    from app.testing.tiny.sd3 import build_tiny_sd3
    from app.testing.tiny.zimage import write_tiny_zimage

    root = tmp_path_factory.mktemp("float16-devices")
    flux = build_tiny_flux(guidance_embeds=True)
    overflow_t5_in_float16(flux.text_encoder_2)
    flux.save_pretrained(root / "flux")
    sd3 = build_tiny_sd3()
    overflow_t5_in_float16(sd3.text_encoder_3)
    sd3.save_pretrained(root / "sd3")
    return {
        "flux": root / "flux",
        "sd3": root / "sd3",
        "zimage": write_tiny_zimage(root / "zimage"),
        "klein": write_tiny_klein(root / "klein"),
    }


WIDE_ENCODERS = {
    "flux": "text_encoder_2", "sd3": "text_encoder_3", "zimage": "text_encoder",
    "klein": "text_encoder",
}  # fmt: skip


def stock_pipeline(folder: Path, family: str, dtype: Any) -> Any:
    from diffusers import (
        Flux2KleinPipeline,
        FluxPipeline,
        StableDiffusion3Pipeline,
        ZImagePipeline,
    )

    cls = {
        "flux": FluxPipeline, "sd3": StableDiffusion3Pipeline, "zimage": ZImagePipeline,
        "klein": Flux2KleinPipeline,
    }[family]  # fmt: skip
    pipe = cls.from_pretrained(folder, local_files_only=True, dtype=dtype)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def stock_on_a_float16_gpu(folder: Path, family: str, params: GenerationParams) -> np.ndarray:
    """As a stock user runs it on a float16-only GPU (diffusers' Flux docs: the text
    encoders in float32): loaded with the wide encoder in float32, the rest in float16.
    Z-Image takes its encoder's float32 output as it is; the others make their latents in
    the embeddings' dtype, which their float16 transformer then refuses, so there the
    prompt is encoded first and the embeddings cast to float16 and passed in."""
    half = torch.float16
    pipe = stock_pipeline(folder, family, {"default": half, WIDE_ENCODERS[family]: torch.float32})
    generator = torch.Generator().manual_seed(params.seed)
    size = {"height": params.height, "width": params.width}
    common = {"num_inference_steps": params.steps, "guidance_scale": params.cfg, **size}
    with torch.no_grad():  # as the pipelines encode (and diffusers' docs show)
        inputs = _stock_inputs(pipe, family, params)
    return pixels(pipe(generator=generator, **inputs, **common).images[0])


def _stock_inputs(pipe: Any, family: str, params: GenerationParams) -> dict[str, Any]:
    half = torch.float16
    if family == "zimage":
        return {"prompt": PROMPT, "negative_prompt": params.negative_prompt}
    if family == "flux":
        embeds, pooled, _ = pipe.encode_prompt(PROMPT, None, max_sequence_length=512)
        return {"prompt_embeds": embeds.to(half), "pooled_prompt_embeds": pooled}
    if family == "klein":
        embeds, _ = pipe.encode_prompt(PROMPT)
        negative, _ = pipe.encode_prompt("")  # the pipeline's own negative prompt
        return {"prompt_embeds": embeds.to(half), "negative_prompt_embeds": negative.to(half)}
    embeds, negative, pooled, negative_pooled = pipe.encode_prompt(
        PROMPT, None, None, negative_prompt=params.negative_prompt, max_sequence_length=256
    )
    return {
        "prompt_embeds": embeds.to(half), "negative_prompt_embeds": negative.to(half),
        "pooled_prompt_embeds": pooled, "negative_pooled_prompt_embeds": negative_pooled,
    }  # fmt: skip


GUIDANCE: dict[str, dict[str, Any]] = {
    "flux": {"cfg": 3.5},
    "sd3": {"cfg": 5.0, "negative_prompt": "a dog"},
    "zimage": {"cfg": 5.0, "negative_prompt": "a dog", "height": 64},
    "klein": {"cfg": 4.0},
}


def params_for(family: str) -> GenerationParams:
    base: dict[str, Any] = {
        "prompt": PROMPT, "model": "m", "steps": STEPS, "width": 64, "height": 48, "seed": 1234,
    }  # fmt: skip
    return GenerationParams(**{**base, **GUIDANCE[family]})


@pytest.mark.parametrize("family", ["flux", "sd3"])
def test_the_models_t5_overflows_in_float16(folders: dict[str, Path], family: str) -> None:
    """The premise: in float16 its T5 gives NaN, in float32 finite embeddings."""
    for dtype, finite in ((torch.float16, False), (torch.float32, True)):
        pipe = stock_pipeline(folders[family], family, dtype)
        tokens = pipe.tokenizer_2 if family == "flux" else pipe.tokenizer_3
        t5 = getattr(pipe, WIDE_ENCODERS[family])
        with torch.no_grad():
            out = t5(tokens(PROMPT, return_tensors="pt").input_ids)[0]
        assert bool(torch.isfinite(out).all()) is finite


@pytest.mark.parametrize("family", ["flux", "sd3", "zimage", "klein"])
def test_on_a_float16_only_device_the_job_finishes_as_the_stock_pipeline(
    folders: dict[str, Path], tmp_path: Path, family: str
) -> None:
    """Finite and the stock image; paused and resumed by a fresh runner, the same image."""
    model = model_info(folders[family])
    runner = Runner(device=FLOAT16_ONLY, resolve=lambda _name: model, threads=1)
    params = params_for(family)
    ours = generate(runner, params, tmp_path, family)
    pipe = runner.load("m").pipe  # held: the one the job ran
    assert pipe.transformer.dtype == torch.float16
    assert getattr(pipe, WIDE_ENCODERS[family]).dtype == torch.float32
    assert max_diff(ours, stock_on_a_float16_gpu(folders[family], family, params)) <= 1
    job: dict[str, Any] = {
        "output_path": tmp_path / "job.png", "checkpoint_path": tmp_path / "job.ckpt",
    }  # fmt: skip
    assert runner.run(params, on_step=pause_at(PAUSE_AT), **job).kind is OutcomeKind.PAUSED
    fresh = Runner(device=FLOAT16_ONLY, resolve=lambda _name: model, threads=1)
    resumed = fresh.run(params, on_step=lambda _p: StepDecision.CONTINUE, **job)
    assert resumed.resumed_from is not None
    assert max_diff(pixels(tmp_path / "job.png"), ours) == 0

"""Few-step LoRA jobs (prompts/few_step.py) in half precision on the CPU, as a GPU computes
them: Easel's image equals the stock pipeline loaded in that same dtype, the LoRA loaded
with `load_lora_weights` and the scheduler its authors publish (test_few_step.py runs the
Qwen-Image-Lightning and SDXL-Lightning in float32), and FLUX.1-Turbo-Alpha (its steps and
guidance; no schedule of its own), each in bfloat16 and float16: there Qwen2.5-VL and T5 run
in float32, as on a float16-only GPU, and the stock pipeline is handed their embeddings cast,
as test_half_precision_flow's references are."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from app.engine.generation.device import DeviceChoice
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.files.sources import ModelSearchPath
from app.engine.generation.load.pipelines import PipelineCache
from app.engine.generation.outcome import OutcomeKind
from app.engine.generation.prompts.few_step import lora_defaults
from app.engine.generation.runner import Runner
from app.engine.jobs.params import GenerationParams
from tests.engine.generation.tiny_architectures import go_on, max_diff, model_info, pixels

pytestmark = pytest.mark.filterwarnings(
    "ignore:__array__ implementation:DeprecationWarning",
    "ignore:`upcast_vae` is deprecated:FutureWarning",  # stock SDXL decoding in float16
)

QWEN_LORA = "Qwen-Image-Lightning-4steps-V1.0"
FLUX_LORA = "FLUX.1-Turbo-Alpha"
SDXL_LORA = "sdxl_lightning_4step_lora"


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    """{family: (its tiny diffusers folder, its few-step LoRA file)}, written once."""
    from app.testing.tiny.flux import write_tiny_flux, write_tiny_flux_lora
    from app.testing.tiny.qwen import write_tiny_qwen, write_tiny_qwen_lora
    from app.testing.tiny.unet import write_tiny_lora, write_tiny_pipeline

    root = tmp_path_factory.mktemp("few-step-half")
    qwen_lora = root / "qwen-loras" / "lora" / f"{QWEN_LORA}.safetensors"
    write_tiny_qwen_lora(qwen_lora)
    sdxl_lora = root / "sdxl-loras" / "lora" / f"{SDXL_LORA}.safetensors"
    write_tiny_lora(sdxl_lora, seed=3, architecture=Architecture.SDXL)
    flux_lora = write_tiny_flux_lora(root / "flux-loras" / "lora" / f"{FLUX_LORA}.safetensors")
    return {
        "flux": (write_tiny_flux(root / "flux"), flux_lora),
        "qwen": (write_tiny_qwen(root / "qwen"), qwen_lora),
        "sdxl": (write_tiny_pipeline(root / "sdxl", architecture=Architecture.SDXL), sdxl_lora),
    }


def job(lora: Path, prompt: str) -> GenerationParams:
    """The job an artist submits naming the LoRA, its steps, CFG and schedule filled in."""
    asked = GenerationParams(
        prompt=f"{prompt} <lora:{lora.stem}>", model="m", width=64, height=48, seed=7
    )
    search = ModelSearchPath(user=(lora.parents[1],))
    return lora_defaults(asked, explicit=(), search=search).params


def easel(folder: Path, lora: Path, params: GenerationParams, dtype: str, out: Path) -> Any:
    model = model_info(folder, "m")
    runner = Runner(
        device=DeviceChoice("cpu", dtype), resolve=lambda _n: model,
        cache=PipelineCache(lora_folders=[lora.parent]), threads=1,
    )  # fmt: skip
    outcome = runner.run(
        params, output_path=out, checkpoint_path=out.with_suffix(".ckpt"), on_step=go_on
    )
    assert outcome.kind is OutcomeKind.COMPLETED and outcome.image_path is not None
    return pixels(outcome.image_path)


def stock_qwen(folder: Path, lora: Path, params: GenerationParams, dtype: str) -> Any:
    """As the Qwen-Image-Lightning card, in `dtype`: the published scheduler, the LoRA
    loaded, `true_cfg_scale` 1 (float16: Qwen2.5-VL in float32, its embeddings cast)."""
    import json

    from diffusers import FlowMatchEulerDiscreteScheduler, QwenImagePipeline

    half = getattr(torch, dtype)
    dtypes: Any = half if dtype == "bfloat16" else {"default": half, "text_encoder": torch.float32}
    scheduler = FlowMatchEulerDiscreteScheduler.from_config(json.loads(params.scheduler_config))
    pipe: Any = QwenImagePipeline.from_pretrained(
        folder, scheduler=scheduler, dtype=dtypes, local_files_only=True
    )
    pipe.load_lora_weights(str(lora))
    pipe.set_progress_bar_config(disable=True)
    image = pipe(
        **qwen_prompt(pipe, "the cat", half), width=params.width, height=params.height,
        num_inference_steps=params.steps, true_cfg_scale=params.cfg,
        generator=torch.Generator().manual_seed(params.seed),
    ).images[0]  # fmt: skip
    return pixels(image)


def qwen_prompt(pipe: Any, prompt: str, half: torch.dtype) -> dict[str, Any]:
    """The prompt; with Qwen2.5-VL wider than the transformer, its embeddings cast (the
    stock pipeline would hand float32 ones to its float16 transformer)."""
    if pipe.text_encoder.dtype == half:
        return {"prompt": prompt}
    with torch.no_grad():
        embeds, _ = pipe.encode_prompt(prompt)
    return {"prompt_embeds": embeds.to(half)}


def stock_flux(folder: Path, lora: Path, params: GenerationParams, dtype: str) -> Any:
    """As the FLUX.1-Turbo-Alpha card, in `dtype`: the LoRA loaded, its 8 steps at guidance
    3.5 (float16: T5 in float32, its embeddings cast)."""
    from diffusers import FluxPipeline

    half = getattr(torch, dtype)
    dtypes: Any = (
        half if dtype == "bfloat16" else {"default": half, "text_encoder_2": torch.float32}
    )
    pipe: Any = FluxPipeline.from_pretrained(folder, dtype=dtypes, local_files_only=True)
    pipe.load_lora_weights(str(lora))
    pipe.set_progress_bar_config(disable=True)
    prompt: dict[str, Any] = {"prompt": "a red fox"}
    if pipe.text_encoder_2.dtype != half:
        with torch.no_grad():
            embeds, pooled, _ = pipe.encode_prompt("a red fox", None, max_sequence_length=512)
        prompt = {"prompt_embeds": embeds.to(half), "pooled_prompt_embeds": pooled}
    image = pipe(
        **prompt, width=params.width, height=params.height, num_inference_steps=params.steps,
        guidance_scale=params.cfg, generator=torch.Generator().manual_seed(params.seed),
    ).images[0]  # fmt: skip
    return pixels(image)


def stock_sdxl(folder: Path, lora: Path, params: GenerationParams, dtype: str) -> Any:
    """As the SDXL-Lightning card, in `dtype`: trailing Euler, the LoRA, guidance 0."""
    from diffusers import EulerDiscreteScheduler, StableDiffusionXLPipeline

    pipe: Any = StableDiffusionXLPipeline.from_pretrained(
        folder, dtype=getattr(torch, dtype), local_files_only=True
    )
    pipe.scheduler = EulerDiscreteScheduler.from_config(
        pipe.scheduler.config, timestep_spacing="trailing"
    )
    pipe.load_lora_weights(str(lora))
    pipe.set_progress_bar_config(disable=True)
    image = pipe(
        "a girl smiling", num_inference_steps=params.steps, guidance_scale=params.cfg,
        width=params.width, height=params.height,
        generator=torch.Generator().manual_seed(params.seed),
    ).images[0]  # fmt: skip
    return pixels(image)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize(
    ("family", "prompt", "stock"),
    [
        ("qwen", "the cat", stock_qwen),
        ("sdxl", "a girl smiling", stock_sdxl),
        ("flux", "a red fox", stock_flux),
    ],
    ids=["qwen-lightning", "sdxl-lightning", "flux-turbo"],
)
def test_a_few_step_lora_job_in_half_precision_equals_stock_in_that_dtype(
    models: dict[str, tuple[Path, Path]], tmp_path: Path, family: str, prompt: str,
    stock: Any, dtype: str,
) -> None:  # fmt: skip
    folder, lora = models[family]
    params = job(lora, prompt)
    ours = easel(folder, lora, params, dtype, tmp_path / "ours.png")
    theirs = stock(folder, lora, params, dtype)
    assert float(np.asarray(ours).std()) > 5  # a picture: a NaN decodes flat in both
    # Exact: the same job run in float32 is 1 (float16) to 6 (bfloat16) levels away.
    assert max_diff(ours, theirs) == 0

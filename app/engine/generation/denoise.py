"""Our own denoising loop, step by step, mirroring `StableDiffusionPipeline.__call__` and
`StableDiffusionXLPipeline.__call__`.

The stock pipelines cannot stop and resume exactly (multistep history and generator state
are internal), so we drive their components ourselves: `encode_prompt`, `unet`,
`scheduler.step`, `vae` and `image_processor`, in the same order and with the same
arithmetic, which keeps results bit-identical to the stock pipelines. SDXL adds a pooled
text embedding and six "time ids" (original size, crop corner, target size) as extra UNet
conditioning; both are part of the state and of a checkpoint.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import torch
from diffusers import (
    DDIMScheduler,
    DPMSolverMultistepScheduler,
    EulerAncestralDiscreteScheduler,
    EulerDiscreteScheduler,
)
from diffusers.utils.torch_utils import randn_tensor
from PIL import Image

from app.engine.generation import img2img
from app.engine.generation.architecture import size_problem
from app.engine.generation.checkpoint import Checkpoint
from app.engine.generation.errors import CheckpointCorrupt, CheckpointMismatch
from app.engine.generation.lora import prompt_text
from app.engine.generation.prompt_weights import encode_weighted, needs_a1111_encoding
from app.engine.jobs.params import GenerationParams, InvalidParameters

SCHEDULER_CLASSES: dict[str, type[Any]] = {
    "Euler": EulerDiscreteScheduler,
    "Euler a": EulerAncestralDiscreteScheduler,
    "DDIM": DDIMScheduler,
    "DPM++ 2M": DPMSolverMultistepScheduler,
}


@dataclass
class DenoiseState:
    scheduler: Any
    timesteps: torch.Tensor
    index: int  # next timestep to run
    steps_done: int  # completed scheduler steps (progress)
    total_steps: int
    latents: torch.Tensor
    prompt_embeds: torch.Tensor  # [uncond, cond] when CFG is on
    timestep_cond: torch.Tensor | None
    generator: torch.Generator
    guidance: float
    do_cfg: bool
    # SDXL only: the second encoder's pooled output and the size/crop conditioning.
    pooled_embeds: torch.Tensor | None = None
    add_time_ids: torch.Tensor | None = None
    denoised: torch.Tensor | None = None  # the scheduler's x0 estimate, for previews

    @property
    def finished(self) -> bool:
        return self.index >= len(self.timesteps)


def make_scheduler(pipe: Any, name: str) -> Any:
    """A fresh scheduler of the A1111 kind `name`, from the model's own scheduler config."""
    try:
        cls = SCHEDULER_CLASSES[name]
    except KeyError:
        raise ValueError(
            f"unknown scheduler {name!r} (known: {', '.join(SCHEDULER_CLASSES)})"
        ) from None
    return cls.from_config(pipe.scheduler.config)


def new_generator(seed: int) -> torch.Generator:
    # Always a CPU generator: the same seed gives the same noise on every device, and its
    # state can be saved and restored across devices.
    return torch.Generator(device="cpu").manual_seed(seed)


def is_sdxl(pipe: Any) -> bool:
    return hasattr(pipe, "text_encoder_2")


@dataclass
class _Conditioning:
    embeds: torch.Tensor  # [uncond, cond] when CFG is on
    pooled: torch.Tensor | None = None
    time_ids: torch.Tensor | None = None


def _encode(pipe: Any, params: GenerationParams, do_cfg: bool) -> _Conditioning:
    device = pipe._execution_device
    prompt = prompt_text(params.prompt)  # without its <lora:...> tags, as A1111 does
    negative = params.negative_prompt
    if any(needs_a1111_encoding(text, pipe.tokenizer) for text in (prompt, negative)):
        cond, uncond, pooled, uncond_pooled = encode_weighted(pipe, prompt, negative, do_cfg)
    elif not is_sdxl(pipe):
        cond, uncond = pipe.encode_prompt(prompt, device, 1, do_cfg, negative)
    else:
        cond, uncond, pooled, uncond_pooled = pipe.encode_prompt(
            prompt=prompt,
            device=device,
            num_images_per_prompt=1,
            do_classifier_free_guidance=do_cfg,
            negative_prompt=negative,
        )
    if not is_sdxl(pipe):
        return _Conditioning(torch.cat([uncond, cond]) if do_cfg else cond)
    size = (params.height, params.width)  # original = target size, no crop: the stock default
    projection_dim = pipe.text_encoder_2.config.projection_dim
    time_ids = pipe._get_add_time_ids(
        size, (0, 0), size, dtype=cond.dtype, text_encoder_projection_dim=projection_dim
    )
    if do_cfg:
        cond, pooled = torch.cat([uncond, cond]), torch.cat([uncond_pooled, pooled])
        time_ids = torch.cat([time_ids, time_ids])
    return _Conditioning(cond.to(device), pooled.to(device), time_ids.to(device))


@torch.no_grad()
def start(pipe: Any, params: GenerationParams, init_image: bytes | None = None) -> DenoiseState:
    """The state before the first step; from noise, or (img2img) from `init_image`'s PNG."""
    problem = size_problem(native_size(pipe), params.width, params.height)
    if problem:
        raise InvalidParameters(problem)
    device = pipe._execution_device
    scheduler = _scheduler_with_timesteps(pipe, params, device)
    do_cfg = _uses_cfg(pipe, params)
    conditioning = _encode(pipe, params, do_cfg)
    embeds = conditioning.embeds
    generator = new_generator(params.seed)
    if init_image is None:
        shape = _latent_shape(pipe, params)
        noise = randn_tensor(shape, generator=generator, device=device, dtype=embeds.dtype)
        timesteps, steps = scheduler.timesteps, params.steps
        latents = noise * scheduler.init_noise_sigma
    else:
        timesteps, steps, latents = img2img.start_latents(
            pipe, scheduler, params, init_image, generator, embeds.dtype
        )
    return DenoiseState(
        scheduler=scheduler,
        timesteps=timesteps,
        index=0,
        steps_done=0,
        total_steps=steps,
        latents=latents,
        prompt_embeds=embeds,
        timestep_cond=_timestep_cond(pipe, params, embeds.dtype),
        generator=generator,
        guidance=params.cfg,
        do_cfg=do_cfg,
        pooled_embeds=conditioning.pooled,
        add_time_ids=conditioning.time_ids,
    )


def restore(pipe: Any, params: GenerationParams, checkpoint: Checkpoint) -> DenoiseState:
    """The state a checkpoint was taken in, on this pipeline's device and dtype."""
    device, dtype = pipe._execution_device, pipe.unet.dtype
    scheduler = _scheduler_with_timesteps(pipe, params, device)
    _check_fits(pipe, params, checkpoint, scheduler)
    _load_scheduler_state(scheduler, checkpoint.scheduler_state, device)
    generator = new_generator(params.seed)
    try:
        generator.set_state(checkpoint.generator_state)
    except RuntimeError as error:
        raise CheckpointCorrupt(f"checkpoint has a damaged generator state: {error}") from error
    cond = checkpoint.timestep_cond
    if is_sdxl(pipe) and (checkpoint.pooled_embeds is None or checkpoint.add_time_ids is None):
        raise CheckpointMismatch("checkpoint was made by a non-SDXL model; this model is SDXL")
    timesteps, steps = scheduler.timesteps, params.steps
    if params.init_image:
        timesteps, steps = img2img.trim_schedule(scheduler, params)
    return DenoiseState(
        scheduler=scheduler,
        timesteps=timesteps,
        index=checkpoint.index,
        steps_done=checkpoint.steps_done,
        total_steps=steps,
        latents=checkpoint.latents.to(device, dtype),
        prompt_embeds=checkpoint.prompt_embeds.to(device, dtype),
        timestep_cond=None if cond is None else cond.to(device, dtype),
        generator=generator,
        guidance=params.cfg,
        do_cfg=_uses_cfg(pipe, params),
        pooled_embeds=_on(checkpoint.pooled_embeds, device, dtype),
        add_time_ids=_on(checkpoint.add_time_ids, device, dtype),
    )


def _on(
    tensor: torch.Tensor | None, device: torch.device, dtype: torch.dtype
) -> torch.Tensor | None:
    return None if tensor is None else tensor.to(device, dtype)


def _check_fits(
    pipe: Any, params: GenerationParams, checkpoint: Checkpoint, scheduler: Any
) -> None:
    """Params match already; this catches a model swapped under the same name."""
    expected = type(scheduler).__name__
    if checkpoint.scheduler_class != expected:
        raise CheckpointMismatch(
            f"checkpoint uses scheduler {checkpoint.scheduler_class}, not {expected}"
        )
    shape = _latent_shape(pipe, params)
    if tuple(checkpoint.latents.shape) != shape:
        raise CheckpointMismatch(
            f"checkpoint latents {tuple(checkpoint.latents.shape)} do not fit this model "
            f"and size {shape}"
        )
    if not 0 <= checkpoint.index <= len(scheduler.timesteps):
        raise CheckpointCorrupt(f"checkpoint step index {checkpoint.index} is out of range")


def snapshot(state: DenoiseState, params: GenerationParams, elapsed_s: float) -> Checkpoint:
    return Checkpoint(
        params=params.to_dict(),
        steps_done=state.steps_done,
        index=state.index,
        elapsed_s=elapsed_s,
        latents=state.latents,
        prompt_embeds=state.prompt_embeds,
        timestep_cond=state.timestep_cond,
        generator_state=state.generator.get_state(),
        scheduler_class=type(state.scheduler).__name__,
        scheduler_state=_scheduler_state(state.scheduler),
        pooled_embeds=state.pooled_embeds,
        add_time_ids=state.add_time_ids,
    )


@torch.no_grad()
def advance(pipe: Any, state: DenoiseState) -> bool:
    """Run one timestep; True when that completed a scheduler step (a safe point to stop)."""
    t = state.timesteps[state.index]
    model_input = torch.cat([state.latents] * 2) if state.do_cfg else state.latents
    if hasattr(state.scheduler, "scale_model_input"):
        model_input = state.scheduler.scale_model_input(model_input, t)
    noise_pred = pipe.unet(
        model_input,
        t,
        encoder_hidden_states=state.prompt_embeds,
        timestep_cond=state.timestep_cond,
        cross_attention_kwargs=None,
        added_cond_kwargs=_added_conditioning(state),
        return_dict=False,
    )[0]
    if state.do_cfg:
        uncond, cond = noise_pred.chunk(2)
        noise_pred = uncond + state.guidance * (cond - uncond)
    kwargs = _step_kwargs(state.scheduler, state.generator)
    output = state.scheduler.step(noise_pred, t, state.latents, **kwargs, return_dict=True)
    state.latents = output.prev_sample
    state.denoised = _x0_estimate(state.scheduler, output)
    state.index += 1
    if _is_step_boundary(state):
        state.steps_done += 1
        return True
    return False


def _added_conditioning(state: DenoiseState) -> dict[str, torch.Tensor] | None:
    if state.pooled_embeds is None or state.add_time_ids is None:
        return None
    return {"text_embeds": state.pooled_embeds, "time_ids": state.add_time_ids}


@torch.no_grad()
def decode(pipe: Any, state: DenoiseState) -> Image.Image:
    if is_sdxl(pipe):
        return _decode_sdxl(pipe, state.latents)
    latents = state.latents / pipe.vae.config.scaling_factor
    image = pipe.vae.decode(latents, return_dict=False, generator=state.generator)[0]
    return pipe.image_processor.postprocess(image, output_type="pil", do_denormalize=[True])[0]


def _decode_sdxl(pipe: Any, latents: torch.Tensor) -> Image.Image:
    vae = pipe.vae
    # SDXL's VAE overflows to NaN (a black image) in float16; its config asks for float32.
    upcast = vae.dtype == torch.float16 and vae.config.force_upcast
    if upcast:
        vae.to(dtype=torch.float32)
        latents = latents.to(torch.float32)
    mean, std = getattr(vae.config, "latents_mean", None), getattr(vae.config, "latents_std", None)
    if mean is not None and std is not None:
        mean_t = torch.tensor(mean).view(1, 4, 1, 1).to(latents.device, latents.dtype)
        std_t = torch.tensor(std).view(1, 4, 1, 1).to(latents.device, latents.dtype)
        latents = latents * std_t / vae.config.scaling_factor + mean_t
    else:
        latents = latents / vae.config.scaling_factor
    try:
        image = vae.decode(latents, return_dict=False)[0]
    finally:
        if upcast:
            vae.to(dtype=torch.float16)
    return pipe.image_processor.postprocess(image, output_type="pil")[0]


def _scheduler_with_timesteps(pipe: Any, params: GenerationParams, device: torch.device) -> Any:
    scheduler = make_scheduler(pipe, params.scheduler)
    scheduler.set_timesteps(params.steps, device=device)
    if is_sdxl(pipe) and hasattr(scheduler, "set_begin_index"):
        scheduler.set_begin_index(0)  # as StableDiffusionXLPipeline does before its loop
    return scheduler


def native_size(pipe: Any) -> int:
    return int(pipe.unet.config.sample_size) * int(pipe.vae_scale_factor)


def _latent_shape(pipe: Any, params: GenerationParams) -> tuple[int, int, int, int]:
    factor = pipe.vae_scale_factor
    return (1, pipe.unet.config.in_channels, params.height // factor, params.width // factor)


def _uses_cfg(pipe: Any, params: GenerationParams) -> bool:
    # As the stock pipeline: guidance-distilled UNets (time_cond_proj_dim) take CFG as input.
    return params.cfg > 1 and pipe.unet.config.time_cond_proj_dim is None


def _timestep_cond(pipe: Any, params: GenerationParams, dtype: torch.dtype) -> torch.Tensor | None:
    dim = pipe.unet.config.time_cond_proj_dim
    if dim is None:
        return None
    scale = torch.tensor(params.cfg - 1).repeat(1)
    embedding = pipe.get_guidance_scale_embedding(scale, embedding_dim=dim)
    return embedding.to(device=pipe._execution_device, dtype=dtype)


def _step_kwargs(scheduler: Any, generator: torch.Generator) -> dict[str, Any]:
    accepted = inspect.signature(scheduler.step).parameters
    kwargs: dict[str, Any] = {}
    if "eta" in accepted:
        kwargs["eta"] = 0.0
    if "generator" in accepted:
        kwargs["generator"] = generator
    return kwargs


def _x0_estimate(scheduler: Any, output: Any) -> torch.Tensor | None:
    """The scheduler's guess of the final latents (a clean preview), if it exposes one."""
    estimate = getattr(output, "pred_original_sample", None)
    if estimate is None and str(getattr(scheduler.config, "algorithm_type", "")).endswith("++"):
        history = getattr(scheduler, "model_outputs", None) or [None]
        estimate = history[-1]  # DPM-Solver++ keeps its x0 predictions as model_outputs
    return estimate


def _is_step_boundary(state: DenoiseState) -> bool:
    """The stock pipeline's progress rule: 2nd-order schedulers run 2 timesteps per step."""
    order = getattr(state.scheduler, "order", 1)
    warmup = len(state.timesteps) - state.total_steps * order
    return state.finished or (state.index > warmup and state.index % order == 0)


def _scheduler_state(scheduler: Any) -> dict[str, Any]:
    # Everything but the config (rebuilt from the model on resume): sigmas, step index,
    # multistep history (DPM++ model_outputs, lower_order_nums), ...
    return {k: v for k, v in vars(scheduler).items() if k != "_internal_dict"}


def _load_scheduler_state(scheduler: Any, state: dict[str, Any], device: torch.device) -> None:
    for key, value in state.items():
        current = getattr(scheduler, key, None)
        # Keep each tensor where the scheduler itself keeps it (e.g. Euler's sigmas on the CPU).
        target = current.device if isinstance(current, torch.Tensor) else device
        setattr(scheduler, key, _to_device(value, target))


def _to_device(value: Any, device: torch.device) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, list):
        return [_to_device(item, device) for item in value]
    return value

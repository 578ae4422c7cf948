"""Wan 2.1 text to video: UMT5's hidden states, a 3D DiT on (1, 2, 2) patches of the Wan
VAE's 16-channel latents (4 frames to a latent frame after the first, 8x8 pixels to a
latent pixel), flow matching.

Mirrors `WanPipeline.__call__` (diffusers 0.42), call for call:
- the prompt cleaned (`prompt_clean`), tokenised to 512 tokens, UMT5's last hidden states
  of its real tokens, zero-padded back to 512 (`encode_prompt`), then cast to the
  transformer's dtype; the negative prompt encoded the same way ("" when none), under CFG;
- CFG whenever `guidance_scale > 1`: two transformer calls, `uncond + g * (cond - uncond)`,
  in the cache contexts "cond" and "uncond" (a cached job's First Block Cache: one state each);
- the scheduler's `set_timesteps(steps)` and `set_begin_index(0)`; latents drawn in float32
  with the job's generator, `(1, 16, (frames - 1) // 4 + 1, height / 8, width / 8)`, cast to
  the transformer's dtype as its input only, the timestep `t` as is (a Wan 2.2 folder's
  `expand_timesteps`: one per patch, as the stock loop builds it);
- a folder with two experts (`boundary_ratio`, Wan 2.2 A14B) switches from `transformer` to
  `transformer_2` below the boundary timestep, as the stock loop does: a pure function of
  the step's timestep, so a resumed job switches where the uninterrupted one would;
- decoding: the latents in the VAE's dtype, un-normalised by the VAE's `latents_mean` and
  `latents_std`, decoded whole, post-processed to frames (`VideoProcessor`).

What `GenerationParams` means here: `cfg` is the stock `guidance_scale` (5.0 by default);
the sampler "UniPC" is the folder's own UniPC (the released folders ship it: the stock
pipeline's default), "Euler" the flow-matching Euler with the folder's shift (its own
scheduler when the folder ships Euler). Each, built so, equals the stock pipeline given it.
`frames` and `fps` are the clip's (`video_params` checks them at submit). A checkpoint
carries the prompt's hidden states (and the negative's, under CFG); the scheduler's state is
its step index and sigmas (`schedulers.KINDS`), the latents are the whole clip's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from diffusers import FlowMatchEulerDiscreteScheduler, UniPCMultistepScheduler
from diffusers.utils.torch_utils import randn_tensor
from PIL import Image

from app.engine.generation.experts import expert_in_use, prompt_encoding, swap_of
from app.engine.generation.families.base import Conditioning, Schedule
from app.engine.generation.families.flow import FlowFamily, sentence_prompt
from app.engine.generation.families.flow_params import sampler_problem
from app.engine.generation.families.wan import WAN21, WAN_SAMPLERS
from app.engine.generation.loop.variation import varied_noise
from app.engine.generation.preview import png_of, to_uint8_hwc
from app.engine.jobs.params import KIND_VIDEO, GenerationParams, InvalidParameters

if TYPE_CHECKING:
    from app.engine.generation.guidance.control import ControlGuide
    from app.engine.generation.loop.inpaint import MaskedImage

PROMPT_EMBEDS = "prompt_embeds"  # UMT5's hidden states, (1, 512, width)
NEGATIVE_EMBEDS = "negative_embeds"  # the negative prompt's, under CFG
MAX_SEQUENCE_LENGTH = 512  # the stock `__call__`'s default (its `encode_prompt` alone says 226)


class WanFamily(FlowFamily):
    """`WanPipeline`'s models (Wan 2.1 T2V 1.3B and 14B)."""

    name = WAN21.checkpoint_family
    label = WAN21.checkpoint_label
    checkpoint_tensors: tuple[str, ...] = (PROMPT_EMBEDS,)

    @property
    def dtype(self) -> torch.dtype:
        """float32, what a checkpoint's tensors are restored in: the latents start in float32
        and UniPC keeps them so, Euler in the transformer's dtype after its first step (it
        upcasts its sample anyway), and the prompt's states are cast back to the
        transformer's dtype in `predict`; float32 holds every bf16/fp16 value exactly."""
        return torch.float32

    @property
    def transformer_dtype(self) -> torch.dtype:
        dtype: torch.dtype = self._experts()[0].dtype
        return dtype

    def native_size(self) -> int:
        return WAN21.native_size

    def latent_shape(self, params: GenerationParams) -> tuple[int, ...]:
        if params.kind != KIND_VIDEO:
            raise InvalidParameters(f"{self.label} models draw videos, not images")
        temporal = self.pipe.vae_scale_factor_temporal
        spatial = self.pipe.vae_scale_factor_spatial
        multiple = spatial * self._experts()[0].config.patch_size[1]  # Wan 2.1: 16
        if params.width % multiple or params.height % multiple:
            raise InvalidParameters(
                f"{self.label} draws sizes in multiples of {multiple} pixels, "
                f"not {params.width}x{params.height}"
            )
        channels = self._latent_channels()
        latent_frames = (params.frames - 1) // temporal + 1
        return (1, channels, latent_frames, params.height // spatial, params.width // spatial)

    def _latent_channels(self) -> int:
        """The noise's channels: the transformer's input (`WanPipeline.prepare_latents`)."""
        return int(self._experts()[0].config.in_channels)

    def checkpoint_needs(self, params: GenerationParams) -> tuple[str, ...]:
        if self.uses_cfg(params):
            return (*self.checkpoint_tensors, NEGATIVE_EMBEDS)
        return self.checkpoint_tensors

    def scheduler(self, params: GenerationParams) -> Any:
        """Steps 4 of the stock pipeline: `set_timesteps(steps)`, then its loop's
        `set_begin_index(0)`."""
        problem = sampler_problem(params.scheduler, self.label, WAN_SAMPLERS)
        if problem:
            raise InvalidParameters(problem)
        made = _unipc_of if params.scheduler == "UniPC" else _euler_of
        scheduler = made(self.pipe.scheduler)
        scheduler.set_timesteps(params.steps, device=self.device)
        scheduler.set_begin_index(0)
        return scheduler

    def uses_cfg(self, params: GenerationParams) -> bool:
        return params.cfg > 1.0  # the stock pipeline's do_classifier_free_guidance

    @property
    def device(self) -> torch.device:
        """The pipeline's device; one expert at a time, the swap's (its experts and text
        encoder may all be waiting in RAM, where diffusers' `_execution_device` would look)."""
        swap = swap_of(self.pipe)
        return super().device if swap is None else torch.device(swap.device)

    def encode(self, params: GenerationParams, do_cfg: bool) -> Conditioning:
        # One expert at a time, UMT5 is on the device for this alone (`experts`).
        with prompt_encoding(self.pipe):
            prompt_embeds, negative_embeds = self.pipe.encode_prompt(
                prompt=sentence_prompt(params.prompt),
                negative_prompt=sentence_prompt(params.negative_prompt) or None,
                do_classifier_free_guidance=do_cfg,
                max_sequence_length=MAX_SEQUENCE_LENGTH,
                device=self.device,
            )
        conditioning = {PROMPT_EMBEDS: prompt_embeds.to(self.transformer_dtype)}
        if do_cfg:
            conditioning[NEGATIVE_EMBEDS] = negative_embeds.to(self.transformer_dtype)
        return conditioning

    def initial_latents(
        self,
        scheduler: Any,
        params: GenerationParams,
        generator: torch.Generator,
        init_image: bytes | None,
        conditioning: Conditioning,
        masked: MaskedImage | None = None,
    ) -> Schedule:
        if init_image is not None or masked is not None:  # submit refuses them (params)
            raise InvalidParameters(f"{self.label} text to video takes no init image or mask")
        shape = self.latent_shape(params)
        noise = randn_tensor(shape, generator=generator, device=self.device, dtype=torch.float32)
        return Schedule(scheduler.timesteps, params.steps, varied_noise(noise, params))

    def resumed_schedule(self, scheduler: Any, params: GenerationParams) -> tuple[Any, int]:
        return scheduler.timesteps, params.steps

    def predict(
        self,
        scheduler: Any,
        latents: torch.Tensor,
        t: torch.Tensor,
        conditioning: Conditioning,
        guidance: float,
        do_cfg: bool,
        control: ControlGuide | None = None,
        index: int = 0,
    ) -> torch.Tensor:
        # On the device: one expert at a time moves it there at the switch (`experts`).
        model = expert_in_use(self.pipe, self._expert_at(scheduler, t))
        dtype = self.transformer_dtype
        model_input = self._model_input(latents, conditioning).to(dtype)
        timestep = self._timestep(latents, t, conditioning)
        extra = self._extra_inputs(conditioning)
        where = {  # the stock loop's `cache_context_kwargs` (First Block Cache reads none)
            "step_index": index,
            "sigma": float(scheduler.sigmas[index]),
            "num_inference_steps": len(scheduler.timesteps),
        }
        noise_pred = self._transformer(model, model_input, timestep, conditioning, where, extra)
        if do_cfg:
            noise_uncond = self._transformer(
                model, model_input, timestep, conditioning, where, extra, context="uncond"
            )
            noise_pred = noise_uncond + guidance * (noise_pred - noise_uncond)
        return noise_pred

    @staticmethod
    def _transformer(
        model: Any,
        model_input: torch.Tensor,
        timestep: torch.Tensor,
        conditioning: Conditioning,
        where: dict[str, Any],
        extra: dict[str, Any],
        context: str = "cond",
    ) -> torch.Tensor:
        """One expert's call as the stock loop makes it: the prompt's in the "cond" cache
        context, the negative prompt's in "uncond" (step caching keeps a state for each);
        `extra`: image to video's inputs (the image encoder's states)."""
        embeds = conditioning[PROMPT_EMBEDS if context == "cond" else NEGATIVE_EMBEDS]
        with model.cache_context(context, **where):
            output: torch.Tensor = model(
                hidden_states=model_input,
                timestep=timestep,
                encoder_hidden_states=embeds.to(model_input.dtype),
                attention_kwargs=None,
                return_dict=False,
                **extra,
            )[0]
        return output

    def _experts(self) -> tuple[Any, ...]:
        """The transformers the pipeline holds: one (Wan 2.1), or high- and low-noise."""
        experts = (self.pipe.transformer, getattr(self.pipe, "transformer_2", None))
        return tuple(expert for expert in experts if expert is not None)

    def _expert_at(self, scheduler: Any, t: torch.Tensor) -> Any:
        """The stock loop's choice: the low-noise expert below the boundary timestep."""
        ratio = self.pipe.config.boundary_ratio
        if ratio is None or t >= ratio * scheduler.config.num_train_timesteps:
            return self.pipe.transformer
        return self.pipe.transformer_2

    def _model_input(self, latents: torch.Tensor, conditioning: Conditioning) -> torch.Tensor:
        """What the transformer reads of the latents (image to video adds the image's)."""
        return latents

    def _extra_inputs(self, conditioning: Conditioning) -> dict[str, torch.Tensor]:
        """Inputs beyond the prompt's (Wan 2.1 I2V: the CLIP image states)."""
        return {}

    def _noise_mask(self, latents: torch.Tensor, conditioning: Conditioning) -> torch.Tensor:
        """1 where the latents are denoised (`WanPipeline`'s `mask`: everywhere)."""
        return torch.ones(latents.shape, dtype=torch.float32, device=latents.device)

    def _timestep(
        self, latents: torch.Tensor, t: torch.Tensor, conditioning: Conditioning
    ) -> torch.Tensor:
        if not self.pipe.config.expand_timesteps:
            return t.expand(latents.shape[0])
        mask = self._noise_mask(latents, conditioning)
        per_patch = (mask[0][0][:, ::2, ::2] * t).flatten()  # as the stock loop's temp_ts
        return per_patch.unsqueeze(0).expand(latents.shape[0], -1)

    def decode(self, latents: torch.Tensor, generator: torch.Generator) -> list[Image.Image]:
        """The clip's frames, as the stock pipeline decodes them (whole, in the VAE's dtype)."""
        vae = self.pipe.vae
        latents = latents.to(vae.device, dtype=vae.dtype)
        shape = (1, vae.config.z_dim, 1, 1, 1)
        mean = torch.tensor(vae.config.latents_mean).view(shape).to(latents.device, latents.dtype)
        std = 1.0 / torch.tensor(vae.config.latents_std).view(shape).to(
            latents.device, latents.dtype
        )
        latents = latents / std + mean
        video = vae.decode(latents, return_dict=False)[0]
        frames: list[Image.Image] = self.pipe.video_processor.postprocess_video(
            video, output_type="pil"
        )[0]
        return frames

    def finish(self, image: Any, masked: MaskedImage | None) -> Any:
        return image  # a clip: nothing to paste back


def _flow_shift(config: Any) -> float:
    """A flow scheduler config's shift: UniPC's `flow_shift`, Euler's `shift`."""
    return float(config.get("flow_shift", config.get("shift", 1.0)))


def _unipc_of(scheduler: Any) -> Any:
    """UniPC on flow sigmas: the folder's own when it ships one (the released folders), else
    one made as they make it (flow prediction, flow sigmas, the folder's shift)."""
    config = scheduler.config
    if isinstance(scheduler, UniPCMultistepScheduler):
        return UniPCMultistepScheduler.from_config(config)
    return UniPCMultistepScheduler(
        num_train_timesteps=config.get("num_train_timesteps", 1000),
        prediction_type="flow_prediction",
        use_flow_sigmas=True,
        flow_shift=_flow_shift(config),
    )


def _euler_of(scheduler: Any) -> Any:
    """The flow-matching Euler scheduler of the folder's scheduler config: the same config
    when the folder ships Euler; the shift of another flow scheduler (the released folders'
    UniPC `flow_shift`) otherwise."""
    config = scheduler.config
    if isinstance(scheduler, FlowMatchEulerDiscreteScheduler):
        return FlowMatchEulerDiscreteScheduler.from_config(config)
    return FlowMatchEulerDiscreteScheduler(
        num_train_timesteps=config.get("num_train_timesteps", 1000), shift=_flow_shift(config)
    )


class WanPreviewer:
    """The middle frame of the clip to come, through a fixed linear map (cheap: no VAE,
    whose 3D decode would cost as much as a step): grey shapes, rough but recognisable."""

    def __init__(self, pipe: Any) -> None:
        vae = pipe.vae
        channels = int(vae.config.z_dim)
        self._mean = torch.tensor(vae.config.latents_mean).view(channels, 1, 1)
        self._std = torch.tensor(vae.config.latents_std).view(channels, 1, 1)
        self._factors = torch.full((channels, 3), 1.0 / channels)

    def png(self, latents: torch.Tensor, image_size: tuple[int, int]) -> bytes:
        frame = latents[0, :, latents.shape[2] // 2].detach().float().cpu()
        frame = frame * self._std + self._mean  # as the VAE sees them
        pixels = frame.permute(1, 2, 0) @ self._factors
        return png_of(to_uint8_hwc(pixels), image_size)

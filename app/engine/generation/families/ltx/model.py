"""LTX-Video, text and image to video: T5's hidden states and their attention mask, a 3D
DiT on 1x1x1 patches of the LTX VAE's latents (8 frames to a latent frame after the first,
32x32 pixels to a latent pixel), flow matching with a shift that grows with the clip's
length.

Mirrors `LTXPipeline.__call__` (diffusers 0.42), call for call:
- the prompt tokenised to 128 tokens, T5's last hidden states (all 128, padding included)
  with the tokens' attention mask (`encode_prompt`); the negative prompt encoded the same
  way ("" when none) under CFG, and the two run as one batch of two, negative first; the
  states in the transformer's dtype, the stock pipeline's "prompt_embeds dtype" below (T5's
  own wherever the stock pipeline runs whole; in float16, where T5 runs in float32, cast
  as a stock user passes them);
- CFG whenever `guidance_scale > 1`: `uncond + g * (cond - uncond)` on the float32 output;
  the call (one batch, CFG or not) in the cache context "cond_uncond", as the stock loop's
  (a cached job's First Block Cache: one state);
- the schedule: sigmas `linspace(1, 1 / steps, steps)` with the shift `mu` of the clip's
  latent tokens (`calculate_shift` over the scheduler config's sequence lengths), the
  released config's `shift_terminal` stretching them; no begin index, as the stock loop;
- latents drawn in float32 with the job's generator, `(1, C, (frames - 1) // 8 + 1, h / 32,
  w / 32)`, and kept in float32 by the loop (the transformer's output is upcast before the
  step); the stock pipeline packs them into tokens for the transformer, which `predict`
  does per call: the scheduler's step, the guidance and the upcast are elementwise, so
  stepping the unpacked latents gives the same numbers in another order;
- the rotary positions scaled by `(8 / fps, 32, 32)`: the job's fps is the stock
  `frame_rate` (a clip at another rate is conditioned on that rate, as in diffusers);
- decoding: the latents un-normalised by the VAE's `latents_mean` and `latents_std`, cast
  to the states' dtype, and a VAE with `timestep_conditioning` (0.9.1 on) decoded at
  the stock `decode_timestep` 0 with its `decode_noise_scale` (0 too: the noise it draws
  from the job's generator is weighed by zero), post-processed to frames; a decoder that
  injects noise of its own (0.9.1's) draws it from torch's global generator, which the
  stock call leaves as it finds it: here seeded with the job's seed for the decode (the
  stock pipeline's clip called right after `torch.manual_seed(seed)`).

With an input image (the job's init image), `LTXImageToVideoPipeline.__call__` (the same
components): the image resized to the clip (`video_processor.preprocess`) in the states'
dtype, encoded by the VAE (a sample drawn from the job's generator, then the noise),
normalised, and made the first latent frame (`init * mask + noise * (1 - mask)`, the mask 1
on that frame); each call's timestep is per token, 0 on the first frame's; the scheduler
steps the other frames and the first is kept as it is (here: the loop steps them all, which
is elementwise, and `after_step` puts the image's frame back).

What `GenerationParams` means here: `cfg` is the stock `guidance_scale` (3.0 by default
there), the sampler is the folder's own flow-matching Euler. A checkpoint carries the
prompt's hidden states and mask (and the negative's, under CFG; and the image's latent
frame for image to video, so a resumed clip needs no VAE encode); the scheduler's state is
its step index and sigmas (`schedulers.KINDS`), the latents are the whole clip's, unpacked.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from diffusers import FlowMatchEulerDiscreteScheduler
from diffusers.pipelines.ltx.pipeline_ltx import calculate_shift
from diffusers.pipelines.ltx.pipeline_ltx_image2video import retrieve_latents
from diffusers.utils.torch_utils import randn_tensor
from PIL import Image

from app.engine.generation.families.base import Conditioning, Schedule
from app.engine.generation.families.flow import FlowFamily, sentence_prompt
from app.engine.generation.families.flow_params import sampler_problem
from app.engine.generation.families.ltx import LTX_SAMPLERS, LTX_SIZE_MULTIPLE, LTX_VIDEO
from app.engine.generation.loop.variation import varied_noise
from app.engine.generation.preview import png_of, to_uint8_hwc
from app.engine.jobs.params import KIND_VIDEO, GenerationParams, InvalidParameters

if TYPE_CHECKING:
    from app.engine.generation.guidance.control import ControlGuide
    from app.engine.generation.loop.inpaint import MaskedImage

PROMPT_EMBEDS = "prompt_embeds"  # T5's hidden states, (1, 128, 4096)
PROMPT_MASK = "prompt_mask"  # which of the 128 are the prompt's tokens, (1, 128)
NEGATIVE_EMBEDS = "negative_embeds"  # the negative prompt's, under CFG
NEGATIVE_MASK = "negative_mask"
MAX_SEQUENCE_LENGTH = 128  # the stock `__call__`'s default
FIRST_FRAME = "first_frame"  # image to video: the image's latent frame, the clip's first
DECODE_TIMESTEP = 0.0  # the stock `decode_timestep`; its `decode_noise_scale` defaults to it


class LTXVideoFamily(FlowFamily):
    """`LTXPipeline`'s models (LTX-Video 0.9.x, 2B and 13B)."""

    name = LTX_VIDEO.checkpoint_family
    label = LTX_VIDEO.checkpoint_label
    checkpoint_tensors: tuple[str, ...] = (PROMPT_EMBEDS, PROMPT_MASK)
    max_sequence_length = MAX_SEQUENCE_LENGTH  # the stock `__call__`'s

    def __init__(self, pipe: Any) -> None:
        super().__init__(pipe)
        # The rotary positions' scale, set with the job's schedule (`scheduler`, which a
        # start and a resume both ask first): the one thing `predict` needs of the job.
        self._rope_scale: tuple[float, float, float] | None = None

    @property
    def dtype(self) -> torch.dtype:
        """float32, what a checkpoint's tensors are restored in: the stock loop keeps its
        latents in float32 (the transformer's output is upcast before the step), and the
        prompt's states and mask are cast back in `predict`; float32 holds every bf16 value
        (and every 0 and 1 of the mask) exactly."""
        return torch.float32

    @property
    def transformer_dtype(self) -> torch.dtype:
        dtype: torch.dtype = self.pipe.transformer.dtype
        return dtype

    def native_size(self) -> int:
        return LTX_VIDEO.native_size

    def latent_shape(self, params: GenerationParams) -> tuple[int, ...]:
        if params.kind != KIND_VIDEO:
            raise InvalidParameters(f"{self.label} models draw videos, not images")
        if params.width % LTX_SIZE_MULTIPLE or params.height % LTX_SIZE_MULTIPLE:
            raise InvalidParameters(
                f"{self.label} draws sizes in multiples of {LTX_SIZE_MULTIPLE} pixels, "
                f"not {params.width}x{params.height}"
            )
        temporal = self.pipe.vae_temporal_compression_ratio
        spatial = self.pipe.vae_spatial_compression_ratio
        channels = self.pipe.transformer.config.in_channels
        latent_frames = (params.frames - 1) // temporal + 1
        return (1, channels, latent_frames, params.height // spatial, params.width // spatial)

    def checkpoint_needs(self, params: GenerationParams) -> tuple[str, ...]:
        needs = self.checkpoint_tensors
        if self.uses_cfg(params):
            needs = (*needs, NEGATIVE_EMBEDS, NEGATIVE_MASK)
        return (*needs, FIRST_FRAME) if params.init_image else needs

    def scheduler(self, params: GenerationParams) -> Any:
        """Steps 5 and 6 of the stock pipeline: the sigmas and the shift of the clip's
        length (`retrieve_timesteps` passes the sigmas and `mu` alone), and the rotary
        positions' scale of its frame rate."""
        problem = sampler_problem(params.scheduler, self.label, LTX_SAMPLERS)
        if problem:
            raise InvalidParameters(problem)
        scheduler = FlowMatchEulerDiscreteScheduler.from_config(self.pipe.scheduler.config)
        _, _, frames, height, width = self.latent_shape(params)
        config = scheduler.config
        mu = calculate_shift(
            frames * height * width,
            config.get("base_image_seq_len", 256),
            config.get("max_image_seq_len", 4096),
            config.get("base_shift", 0.5),
            config.get("max_shift", 1.15),
        )
        sigmas = np.linspace(1.0, 1 / params.steps, params.steps)
        scheduler.set_timesteps(sigmas=sigmas, device=self.device, mu=mu)
        spatial = self.pipe.vae_spatial_compression_ratio
        self._rope_scale = (self.pipe.vae_temporal_compression_ratio / params.fps, spatial, spatial)
        return scheduler

    def uses_cfg(self, params: GenerationParams) -> bool:
        return params.cfg > 1.0  # the stock pipeline's do_classifier_free_guidance

    def encode(self, params: GenerationParams, do_cfg: bool) -> Conditioning:
        embeds, mask, negative_embeds, negative_mask = self.pipe.encode_prompt(
            prompt=sentence_prompt(params.prompt),
            negative_prompt=sentence_prompt(params.negative_prompt) or None,
            do_classifier_free_guidance=do_cfg,
            max_sequence_length=self.max_sequence_length,
            device=self.device,
        )
        conditioning = {PROMPT_EMBEDS: embeds, PROMPT_MASK: mask}
        if do_cfg:
            conditioning |= {NEGATIVE_EMBEDS: negative_embeds, NEGATIVE_MASK: negative_mask}
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
        if masked is not None:  # submit refuses a mask on a video job (params)
            raise InvalidParameters(f"{self.label} takes no mask")
        shape = self.latent_shape(params)
        image = None if init_image is None else self._image_latents(init_image, params, generator)
        noise = randn_tensor(shape, generator=generator, device=self.device, dtype=torch.float32)
        latents = varied_noise(noise, params)
        if image is not None:  # the stock i2v `prepare_latents`: the image's frame, then noise
            mask = _first_frame_mask(latents)
            latents = image.repeat(1, 1, shape[2], 1, 1) * mask + latents * (1 - mask)
            conditioning[FIRST_FRAME] = latents[:, :, :1].clone()
        return Schedule(scheduler.timesteps, params.steps, latents)

    def _image_latents(
        self, init_image: bytes, params: GenerationParams, generator: torch.Generator
    ) -> torch.Tensor:
        """The input image's normalised latents, one frame, float32 (drawn from the job's
        generator before the noise, as the stock `prepare_latents` samples them)."""
        pipe = self.pipe
        with Image.open(io.BytesIO(init_image)) as opened:
            picture = opened.convert("RGB")
        pixels = pipe.video_processor.preprocess(picture, height=params.height, width=params.width)
        pixels = pixels.to(device=self.device, dtype=self.transformer_dtype)  # the states'
        encoded = retrieve_latents(pipe.vae.encode(pixels.unsqueeze(2)), generator)  # 1 frame
        latents = encoded.to(torch.float32)
        normalised: torch.Tensor = pipe._normalize_latents(
            latents, pipe.vae.latents_mean, pipe.vae.latents_std
        )
        return normalised

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
        """One call of the transformer on the clip's tokens (negative and positive as one
        batch under CFG, as the stock loop), its output upcast, guided, unpacked."""
        embeds, mask = self._text(conditioning, do_cfg)
        _, _, frames, height, width = latents.shape
        tokens = self._packed(latents)
        model_input = torch.cat([tokens] * 2) if do_cfg else tokens
        model_input = model_input.to(embeds.dtype)
        timestep = t.expand(model_input.shape[0])
        if FIRST_FRAME in conditioning:  # image to video: the first frame's tokens at 0
            kept = self._packed(_first_frame_mask(latents)).squeeze(-1)
            kept = torch.cat([kept] * 2) if do_cfg else kept
            timestep = timestep.unsqueeze(-1) * (1 - kept)
        transformer = self.pipe.transformer
        # One cache context for the batch of two, named as the stock loop names it: a cached
        # job's First Block Cache keeps one state (`loop/step_cache.py`).
        with transformer.cache_context("cond_uncond"):
            noise_pred: torch.Tensor = transformer(
                hidden_states=model_input,
                encoder_hidden_states=embeds,
                timestep=timestep,
                encoder_attention_mask=mask,
                num_frames=frames,
                height=height,
                width=width,
                rope_interpolation_scale=self._rope_of_job(),
                attention_kwargs=None,
                return_dict=False,
            )[0]
        noise_pred = noise_pred.float()
        if do_cfg:
            noise_uncond, noise_text = noise_pred.chunk(2)
            noise_pred = noise_uncond + guidance * (noise_text - noise_uncond)
        return self._unpacked(noise_pred, frames, height, width)

    def _packed(self, latents: torch.Tensor) -> torch.Tensor:
        """(B, C, F, H, W) latents as the transformer's tokens (the stock `_pack_latents`
        with the transformer's patch sizes: 1x1x1 for LTX-Video)."""
        pipe = self.pipe
        tokens: torch.Tensor = pipe._pack_latents(
            latents, pipe.transformer_spatial_patch_size, pipe.transformer_temporal_patch_size
        )
        return tokens

    def _unpacked(self, tokens: torch.Tensor, frames: int, height: int, width: int) -> torch.Tensor:
        """Tokens back to (B, C, F, H, W), as the stock `_unpack_latents`."""
        pipe = self.pipe
        latents: torch.Tensor = pipe._unpack_latents(
            tokens, frames, height, width,
            pipe.transformer_spatial_patch_size, pipe.transformer_temporal_patch_size,
        )  # fmt: skip
        return latents

    def _rope_of_job(self) -> tuple[float, float, float]:
        if self._rope_scale is None:  # a start and a resume both set the schedule first
            raise RuntimeError("LTX-Video's schedule is not set: no frame rate to scale by")
        return self._rope_scale

    def _text(self, conditioning: Conditioning, do_cfg: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """The prompt's states in the transformer's dtype and its mask as booleans (the
        stock pipeline's; a restored checkpoint holds them in float32), the negative's
        first under CFG."""
        dtype = self.transformer_dtype
        embeds = conditioning[PROMPT_EMBEDS].to(dtype)
        mask = conditioning[PROMPT_MASK].bool()
        if do_cfg:
            embeds = torch.cat([conditioning[NEGATIVE_EMBEDS].to(dtype), embeds])
            mask = torch.cat([conditioning[NEGATIVE_MASK].bool(), mask])
        return embeds, mask

    def after_step(
        self,
        scheduler: Any,
        latents: torch.Tensor,
        timesteps: torch.Tensor,
        index: int,
        conditioning: Conditioning,
    ) -> torch.Tensor:
        """Image to video: the first latent frame is the image's at every step (the stock
        loop steps only the frames after it); text to video: the latents as stepped."""
        if FIRST_FRAME not in conditioning:
            return latents
        first = conditioning[FIRST_FRAME].to(latents.dtype)
        return torch.cat([first, latents[:, :, 1:]], dim=2)

    def decode(self, latents: torch.Tensor, generator: torch.Generator) -> list[Image.Image]:
        """The clip's frames, as the stock pipeline decodes them (whole)."""
        vae = self.pipe.vae
        shape = (1, -1, 1, 1, 1)
        mean = vae.latents_mean.view(shape).to(latents.device, latents.dtype)
        std = vae.latents_std.view(shape).to(latents.device, latents.dtype)
        latents = latents * std / vae.config.scaling_factor + mean
        latents = latents.to(self.transformer_dtype)  # the stock prompt_embeds' dtype
        timestep = None
        if vae.config.timestep_conditioning:
            noise = randn_tensor(
                latents.shape, generator=generator, device=latents.device, dtype=latents.dtype
            )
            timestep = torch.tensor([DECODE_TIMESTEP], device=latents.device, dtype=latents.dtype)
            scale = timestep[:, None, None, None, None]  # decode_noise_scale: the timestep's
            latents = (1 - scale) * latents + scale * noise
        with _decoder_noise_seeded(generator.initial_seed(), latents.device):
            video = vae.decode(latents.to(vae.dtype), timestep, return_dict=False)[0]
        frames: list[Image.Image] = self.pipe.video_processor.postprocess_video(
            video, output_type="pil"
        )[0]
        return frames

    def finish(self, image: Any, masked: MaskedImage | None) -> Any:
        return image  # a clip: nothing to paste back


@contextmanager
def _decoder_noise_seeded(seed: int, device: torch.device) -> Iterator[None]:
    """torch's global generator seeded with the job's seed, and put back after: a decoder
    that injects noise (0.9.1's: `decoder_inject_noise`) draws it from there, as the stock
    pipeline's `vae.decode` is given no generator. So a clip is the stock pipeline's called
    right after `torch.manual_seed(seed)`, and a resumed clip the uninterrupted one."""
    on_cpu = device.type == "cpu"
    devices = [] if on_cpu else [device]
    with torch.random.fork_rng(devices=devices, device_type="cuda" if on_cpu else device.type):
        torch.manual_seed(seed)
        yield


def _first_frame_mask(latents: torch.Tensor) -> torch.Tensor:
    """The stock i2v `conditioning_mask`: (1, 1, F, H, W) in float32, 1 on the first frame."""
    _, _, frames, height, width = latents.shape
    mask = torch.zeros((1, 1, frames, height, width), device=latents.device, dtype=torch.float32)
    mask[:, :, 0] = 1.0
    return mask


class LTXVideoPreviewer:
    """The middle frame of the clip to come, through a fixed linear map (cheap: no VAE):
    grey shapes, rough but recognisable."""

    def __init__(self, pipe: Any) -> None:
        vae = pipe.vae
        channels = int(vae.config.latent_channels)
        self._mean = vae.latents_mean.detach().float().cpu().view(channels, 1, 1)
        self._std = vae.latents_std.detach().float().cpu().view(channels, 1, 1)
        self._factors = torch.full((channels, 3), 1.0 / channels)

    def png(self, latents: torch.Tensor, image_size: tuple[int, int]) -> bytes:
        frame = latents[0, :, latents.shape[2] // 2].detach().float().cpu()
        frame = frame * self._std + self._mean  # as the VAE sees them
        pixels = frame.permute(1, 2, 0) @ self._factors
        return png_of(to_uint8_hwc(pixels), image_size)

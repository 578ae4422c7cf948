"""LTX-Video 0.9.5 on through conditioning frames, as `LTXConditionPipeline` (diffusers 0.42)
draws them with its defaults: text to video, or from an image at frame 0 (the job's init
image), and optionally a last image at the clip's last frame ("first and last frame": the
stock `conditions` of those two images at frames 0 and `frames - 1`, or the job's
`last_image_frame`), each at the job's strength (`image_strength`, `last_image_strength`;
stock's 1.0 by default), call for call:
- the prompt as `LTXPipeline`'s (`model.py`) but to 256 tokens, its `max_sequence_length`;
- the schedule: `linear_quadratic_schedule(steps) * 1000` as the scheduler's timesteps
  (`retrieve_timesteps`; the folder's config says how they are stretched), or the job's own
  list (its scheduler config's `timesteps`, stock's `timesteps=`: a distilled release's,
  prompts/few_step.py);
- the latents as the stock loop holds them: packed into tokens `(1, tokens, channels)` in
  float32, drawn from the job's generator, then each condition encoded by the VAE (a sample
  from the generator), normalised and made its frames (`lerp` by its strength); a
  per-token conditioning mask (a condition's strength on its tokens) and the tokens'
  positions in pixels and seconds (`video_coords`, scaled by 1 / fps) ride beside them;
- each step: the transformer at `min(t, (1 - mask) * 1000)` per token (a condition's tokens
  at 0 at strength 1), CFG on its output as it comes (not upcast), the scheduler stepped on
  the negated prediction per token (`per_token_timesteps`), a condition's tokens kept until
  `t` falls below `(1 - strength) * 1000`; before each step a condition's tokens held at
  strength 1 are its latents plus `0.15 * t^2` of fresh noise from the generator
  (`image_cond_noise_scale`; drawn whatever the strengths). Here that noise is drawn at the
  end of the step before (and for the first step, with the latents): the generator draws
  in the same order, so a checkpoint between steps holds the latents the next step starts
  from;
- decoding as `LTXPipeline`'s, of the clip's own tokens (`model.py`).

The loop's latents are the clip's own tokens; a last image's tokens, which the stock loop
keeps in front of them (at strength 1 never stepped, only re-noised), ride in the
conditioning (`EXTRA_TOKENS`, as the next step starts from them), so a checkpoint's
latents are the clip's whatever its conditions. A checkpoint carries the prompt's states
and masks, the tokens' positions and, for a clip from images, the conditioned latents, the
mask and the extra tokens (the VAE is not needed to resume).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from diffusers import FlowMatchEulerDiscreteScheduler
from diffusers.pipelines.ltx.pipeline_ltx_condition import (
    linear_quadratic_schedule,
    retrieve_latents,
)
from diffusers.schedulers.scheduling_flow_match_euler_discrete import (
    FlowMatchEulerDiscreteSchedulerOutput,
)
from diffusers.utils.torch_utils import randn_tensor
from PIL import Image

from app.engine.generation.families.base import Conditioning, Schedule
from app.engine.generation.families.flow_params import sampler_problem
from app.engine.generation.families.ltx import LTX_CONDITION, LTX_SAMPLERS
from app.engine.generation.families.ltx.model import LTXVideoFamily, LTXVideoPreviewer
from app.engine.generation.loop.variation import varied_noise
from app.engine.jobs.params import (
    TIMESTEPS,
    GenerationParams,
    InvalidParameters,
    decode_scheduler_config,
)

if TYPE_CHECKING:
    from app.engine.generation.guidance.control import ControlGuide
    from app.engine.generation.loop.inpaint import MaskedImage

VIDEO_COORDS = "video_coords"  # each token's (time, y, x): seconds and pixels, (1, 3, tokens)
CONDITION_MASK = "condition_mask"  # 1 on a condition's tokens, 0 elsewhere, (1, tokens)
CONDITIONED = "conditioned_latents"  # the tokens once conditioned: the re-noising's base
EXTRA_TOKENS = "extra_tokens"  # a last image's tokens as the next step starts from them
IMAGE_COND_NOISE_SCALE = 0.15  # the stock `image_cond_noise_scale`
CONDITION_SEQUENCE_LENGTH = 256  # the stock `max_sequence_length`


@dataclass(frozen=True)
class ExtraCondition:
    """A condition away from frame 0 (the last image), as the stock loop keeps it: its own
    tokens in front of the clip's, their positions, and how firmly they hold."""

    tokens: torch.Tensor  # (1, tokens, channels), packed
    positions: torch.Tensor  # each token's (frame, y, x) in pixels, (1, 3, tokens)
    strength: float  # the stock `strength`: its mask's value, its `lerp`'s weight


class LTXConditionFamily(LTXVideoFamily):
    """`LTXConditionPipeline`'s models (LTX-Video 0.9.5, 0.9.7, 0.9.8)."""

    name = LTX_CONDITION.checkpoint_family
    label = LTX_CONDITION.checkpoint_label
    checkpoint_tensors = (*LTXVideoFamily.checkpoint_tensors, VIDEO_COORDS)
    max_sequence_length = CONDITION_SEQUENCE_LENGTH

    def __init__(self, pipe: Any) -> None:
        super().__init__(pipe)
        self._clip: tuple[int, int, int] | None = None  # latent frames, height, width

    def latent_shape(self, params: GenerationParams) -> tuple[int, ...]:
        """The clip's tokens, packed: (1, frames x height x width, channels)."""
        _, channels, frames, height, width = super().latent_shape(params)
        return (1, frames * height * width, channels)

    def checkpoint_needs(self, params: GenerationParams) -> tuple[str, ...]:
        needs = super().checkpoint_needs(params)
        needs = tuple(name for name in needs if name != "first_frame")
        if params.last_image:
            needs = (*needs, EXTRA_TOKENS)
        return (*needs, CONDITION_MASK, CONDITIONED) if params.init_image else needs

    def scheduler(self, params: GenerationParams) -> Any:
        problem = sampler_problem(params.scheduler, self.label, LTX_SAMPLERS)
        if problem:
            raise InvalidParameters(problem)
        overrides = decode_scheduler_config(params.scheduler_config)
        timesteps = overrides.pop(TIMESTEPS, None)  # a list as stock is given it
        if timesteps is None:
            timesteps = linear_quadratic_schedule(params.steps) * 1000
        scheduler = FlowMatchEulerDiscreteScheduler.from_config(
            self.pipe.scheduler.config, **overrides
        )
        scheduler.set_timesteps(timesteps=timesteps, device=self.device)
        _, _, frames, height, width = super().latent_shape(params)
        self._clip = (frames, height, width)
        return scheduler

    def initial_latents(
        self,
        scheduler: Any,
        params: GenerationParams,
        generator: torch.Generator,
        init_image: bytes | None,
        conditioning: Conditioning,
        masked: MaskedImage | None = None,
        last_image: bytes | None = None,
    ) -> Schedule:
        """The stock `prepare_latents` with an image at frame 0 and one at the last frame
        (each optional), then the first step's re-noising of the conditions' tokens."""
        if masked is not None:  # submit refuses a mask on a video job (params)
            raise InvalidParameters(f"{self.label} takes no mask")
        pipe = self.pipe
        shape = super().latent_shape(params)
        _, _, frames, height, width = shape
        noise = randn_tensor(shape, generator=generator, device=self.device, dtype=torch.float32)
        latents = varied_noise(noise, params)
        frames_mask = torch.zeros((1, frames), device=self.device, dtype=torch.float32)
        extra: list[ExtraCondition] = []
        if init_image is not None:
            image = self._condition_latents(init_image, params, generator)
            count, strength = image.size(2), params.image_strength
            latents[:, :, :count] = torch.lerp(latents[:, :, :count], image, strength)
            frames_mask[:, :count] = strength
        if last_image is not None:
            extra.append(self._extra_condition(last_image, params, generator))
        ids = self._ids(frames, height, width)
        mask = frames_mask.gather(1, ids[:, 0])  # each token's latent frame's
        ids = self._scaled(ids, frame_index=0)
        latents = pipe._pack_latents(
            latents, pipe.transformer_spatial_patch_size, pipe.transformer_temporal_patch_size
        )
        coords = torch.cat([*(each.positions for each in extra), ids], dim=2).float()
        coords[:, 0] = coords[:, 0] * (1.0 / params.fps)
        conditioning[VIDEO_COORDS] = coords
        if init_image is not None or extra:
            latents = self._conditioned(scheduler, latents, mask, extra, conditioning, generator)
        return Schedule(scheduler.timesteps, params.steps, latents)

    def _conditioned(
        self,
        scheduler: Any,
        latents: torch.Tensor,
        mask: torch.Tensor,
        extra: list[ExtraCondition],
        conditioning: Conditioning,
        generator: torch.Generator,
    ) -> torch.Tensor:
        """A clip with conditions: the mask over all the tokens (an extra condition's in
        front, its strength on each), the conditioned tokens kept as the re-noising's base,
        and the first step's re-noising (the stock loop's, drawn before its first call; it
        re-noises only the tokens held at strength 1)."""
        masks = [
            torch.full(each.tokens.shape[:2], each.strength, device=self.device) for each in extra
        ]
        conditioning[CONDITION_MASK] = torch.cat([*masks, mask], dim=1)
        # Without a condition in front, the packed tokens as they are, as stock keeps them:
        # a copy (`cat`) would lay them out token by token where stock's run channel by
        # channel, and the transformer's first projection rounds half precision otherwise
        # on that layout (without CFG, whose `cat` makes both alike: 5 levels in bfloat16).
        whole = torch.cat([*(each.tokens for each in extra), latents], dim=1) if extra else latents
        conditioning[CONDITIONED] = whole.clone()
        whole = _renoised(self.pipe, scheduler.timesteps[0], whole, conditioning, generator)
        return self._split(whole, conditioning)

    def _extra_condition(
        self, picture: bytes, params: GenerationParams, generator: torch.Generator
    ) -> ExtraCondition:
        """The last image at its frame (not 0) as tokens of its own and their positions, as
        the stock `prepare_latents` makes them (its `lerp` with fresh noise by the
        strength)."""
        pipe = self.pipe
        strength = params.last_image_strength
        image = self._condition_latents(picture, params, generator)
        noise = randn_tensor(
            image.shape, generator=generator, device=self.device, dtype=image.dtype
        )
        image = torch.lerp(noise, image, strength)
        _, _, count, height, width = image.shape
        ids = self._ids(count, height, width)
        positions = self._scaled(ids, frame_index=params.last_image_index)
        tokens = pipe._pack_latents(
            image, pipe.transformer_spatial_patch_size, pipe.transformer_temporal_patch_size
        )
        return ExtraCondition(tokens, positions, strength)

    def _ids(self, frames: int, height: int, width: int) -> torch.Tensor:
        """The stock `_prepare_video_ids`: each token's (latent frame, y, x), (1, 3, tokens)."""
        pipe = self.pipe
        ids: torch.Tensor = pipe._prepare_video_ids(
            1, frames, height, width, patch_size=pipe.transformer_spatial_patch_size,
            patch_size_t=pipe.transformer_temporal_patch_size, device=self.device,
        )  # fmt: skip
        return ids

    def _scaled(self, ids: torch.Tensor, frame_index: int) -> torch.Tensor:
        """The stock `_scale_video_ids`: the tokens' positions in pixels and pixel frames,
        from `frame_index` on."""
        pipe = self.pipe
        scaled: torch.Tensor = pipe._scale_video_ids(
            ids, scale_factor=pipe.vae_spatial_compression_ratio,
            scale_factor_t=pipe.vae_temporal_compression_ratio, frame_index=frame_index,
            device=self.device,
        )  # fmt: skip
        return scaled

    def _whole(self, latents: torch.Tensor, conditioning: Conditioning) -> torch.Tensor:
        """All the stock loop's tokens: a last image's in front of the clip's."""
        if EXTRA_TOKENS not in conditioning:
            return latents
        return torch.cat([conditioning[EXTRA_TOKENS].to(latents.dtype), latents], dim=1)

    def _split(self, whole: torch.Tensor, conditioning: Conditioning) -> torch.Tensor:
        """The clip's own tokens of `whole`; those in front of them (a last image's) go to
        the conditioning, as the next step starts from them."""
        if self._clip is None:  # a start and a resume both set the schedule first
            raise RuntimeError("LTX-Video's schedule is not set: no clip size to split by")
        frames, height, width = self._clip
        extra = whole.shape[1] - frames * height * width
        if extra:
            conditioning[EXTRA_TOKENS] = whole[:, :extra]
        return whole[:, extra:]

    def _condition_latents(
        self, picture: bytes, params: GenerationParams, generator: torch.Generator
    ) -> torch.Tensor:
        """An image's normalised latents (one frame, float32), as the stock
        `prepare_latents` encodes a condition (a sample drawn from the job's generator)."""
        pipe = self.pipe
        with Image.open(io.BytesIO(picture)) as opened:
            image = opened.convert("RGB")
        pixels = pipe.video_processor.preprocess(image, params.height, params.width)
        pixels = pixels.unsqueeze(2).to(self.device, dtype=pipe.vae.dtype)
        encoded = retrieve_latents(pipe.vae.encode(pixels), generator=generator)
        normalised: torch.Tensor = pipe._normalize_latents(
            encoded, pipe.vae.latents_mean, pipe.vae.latents_std
        )
        return normalised.to(self.device, dtype=torch.float32)

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
        """One call of the transformer on the tokens at their own timesteps, guided."""
        embeds, mask = self._text(conditioning, do_cfg)
        latents = self._whole(latents, conditioning)
        model_input = torch.cat([latents] * 2) if do_cfg else latents
        model_input = model_input.to(embeds.dtype)
        timestep = _per_token(t, conditioning, model_input.shape[0])
        coords = conditioning[VIDEO_COORDS]
        coords = torch.cat([coords, coords]) if do_cfg else coords
        transformer = self.pipe.transformer
        with transformer.cache_context("cond_uncond"):  # as the stock loop names it
            noise_pred: torch.Tensor = transformer(
                hidden_states=model_input,
                encoder_hidden_states=embeds,
                timestep=timestep,
                encoder_attention_mask=mask,
                video_coords=coords,
                attention_kwargs=None,
                return_dict=False,
            )[0]
        if do_cfg:
            noise_uncond, noise_text = noise_pred.chunk(2)
            noise_pred = noise_uncond + guidance * (noise_text - noise_uncond)
        return noise_pred

    def step(
        self,
        scheduler: Any,
        noise_pred: torch.Tensor,
        t: torch.Tensor,
        latents: torch.Tensor,
        generator: torch.Generator,
        conditioning: Conditioning,
    ) -> Any:
        """The stock step per token on the negated prediction; a condition's tokens kept,
        then re-noised for the next step (none after the last)."""
        latents = self._whole(latents, conditioning)
        timestep = _per_token(t, conditioning, 1)
        stepped = scheduler.step(
            -noise_pred, t, latents, per_token_timesteps=timestep, return_dict=False
        )[0]
        if CONDITION_MASK not in conditioning:
            return _output(stepped)
        denoised = (t / 1000 - 1e-6 < (1.0 - conditioning[CONDITION_MASK])).unsqueeze(-1)
        latents = torch.where(denoised, stepped, latents)
        if scheduler.step_index < len(scheduler.timesteps):
            next_t = scheduler.timesteps[scheduler.step_index]
            latents = _renoised(self.pipe, next_t, latents, conditioning, generator)
        return _output(self._split(latents, conditioning))

    def after_step(
        self,
        scheduler: Any,
        latents: torch.Tensor,
        timesteps: torch.Tensor,
        index: int,
        conditioning: Conditioning,
    ) -> torch.Tensor:
        return latents  # `step` did what the stock loop does after it

    def decode(self, latents: torch.Tensor, generator: torch.Generator) -> list[Image.Image]:
        """The clip's own tokens (the latents: a last image's are not) unpacked, decoded."""
        if self._clip is None:  # a start and a resume both set the schedule first
            raise RuntimeError("LTX-Video's schedule is not set: no clip size to unpack")
        frames, height, width = self._clip
        return super().decode(self._unpacked(latents, frames, height, width), generator)


def _output(latents: torch.Tensor) -> Any:
    """The scheduler's kind of output, holding what the step left (no x0 estimate)."""
    return FlowMatchEulerDiscreteSchedulerOutput(prev_sample=latents)  # type: ignore[arg-type]


def _per_token(t: torch.Tensor, conditioning: Conditioning, batch: int) -> torch.Tensor:
    """Each token's timestep: the step's, a condition's tokens at 0 (the stock loop's)."""
    timestep = t.expand(batch).unsqueeze(-1).float()
    if CONDITION_MASK not in conditioning:
        return timestep
    mask = conditioning[CONDITION_MASK]
    return torch.min(timestep, (1 - torch.cat([mask] * batch)) * 1000.0)


def _renoised(
    pipe: Any, t: torch.Tensor, latents: torch.Tensor, conditioning: Conditioning,
    generator: torch.Generator,
) -> torch.Tensor:  # fmt: skip
    """A condition's tokens as the step at `t` starts from: their latents and noise."""
    noised: torch.Tensor = pipe.add_noise_to_image_conditioning_latents(
        t / 1000.0, conditioning[CONDITIONED], latents, IMAGE_COND_NOISE_SCALE,
        conditioning[CONDITION_MASK], generator,
    )  # fmt: skip
    return noised


class LTXConditionPreviewer(LTXVideoPreviewer):
    """The middle frame of the packed tokens, as `LTXVideoPreviewer` draws a frame."""

    def __init__(self, pipe: Any) -> None:
        super().__init__(pipe)
        self._spatial = int(pipe.vae_spatial_compression_ratio)

    def png(self, latents: torch.Tensor, image_size: tuple[int, int]) -> bytes:
        width, height = image_size[0] // self._spatial, image_size[1] // self._spatial
        per_frame = max(width * height, 1)
        frames = max(latents.shape[1] // per_frame, 1)
        middle = latents[:, (frames // 2) * per_frame : (frames // 2 + 1) * per_frame]
        frame = middle.reshape(1, height, width, -1).permute(0, 3, 1, 2).unsqueeze(2)
        return super().png(frame, image_size)

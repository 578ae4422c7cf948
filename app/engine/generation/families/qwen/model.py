"""Qwen-Image: a Qwen2.5-VL text encoder's last hidden states, an MMDiT on 2x2 patches of
16-channel latents, flow matching with a resolution-dependent (exponential) shift, and
true classifier-free guidance with a negative prompt, its result rescaled to the norm of
the prompt's prediction.

Mirrors `QwenImagePipeline.__call__` (diffusers 0.42), and for img2img and inpaint
`QwenImageImg2ImgPipeline` and `QwenImageInpaintPipeline`, call for call:
- the prompt in the pipeline's own template (a system line, the user's turn), the template's
  first 34 tokens dropped, at most 512 tokens kept (`encode_prompt`'s default); one prompt
  has no padding, so no attention mask (the stock pipeline drops an all-ones one);
- sigmas 1 .. 1/steps, `mu` from the number of patches (the released scheduler shifts
  dynamically), `set_begin_index(0)` before the loop;
- the transformer's timestep is `t / 1000` in the latents' dtype; its patch grid is given
  as `img_shapes`; the prompt and the negative prompt are two calls (`cache_context`
  "cond" and "uncond"), combined as `neg + cfg * (pos - neg)` and rescaled per patch to
  the prompt's norm (`torch.norm` over the packed channels);
- the latents are in the prompt embeddings' dtype throughout; decoding undoes the VAE's
  per-channel mean and standard deviation (in the VAE's dtype, `x / (1 / std) + mean`) on
  5D latents (one frame) and keeps the frame;
- img2img and inpaint: the schedule trimmed by strength (`get_timesteps`: 4 steps at 0.6
  run 3), the image encoded (its latent distribution sampled with the job's generator),
  normalised as `(x - mean) * (1 / std)`, noised to the first remaining step
  (`scale_noise`); inpaint keeps the area outside the mask after every step,
  `(1 - mask) * image + mask * latents`, the image latents noised to the next timestep.

One difference of form, none of numbers: as Flux.1's family, the loop keeps the latents
unpacked, (1, 16, h/8, w/8), and `predict` packs them for the transformer (and for the CFG
rescale, whose norm runs over a packed patch) and unpacks its output. Packing is a
permutation; the noise is drawn in the stock shape's order (the frame axis is 1), the
scheduler's step and the inpaint blend are element by element. The stock inpaint pipeline
also encodes the masked image, which its 64-channel transformer never reads and after which
nothing random is drawn: left out, no pixel changes.

What `GenerationParams` means here (see `flow_params`): `cfg` is the stock
`true_cfg_scale` (its default is 4); above 1 each step runs the transformer twice, with the
prompt and with the negative prompt (an empty one is the empty text, as the stock pipeline
given `negative_prompt=""`); at 1 or below, one call, the negative prompt unread (the stock
pipeline warns). The sampler is "Euler", the folder's flow-matching Euler. A1111's
`(word:1.2)` weights and BREAK are dropped from the prompt (`flow.sentence_prompt`).
No ControlNet or IP-Adapter here.

A checkpoint carries the prompt's hidden states (and the negative's, under CFG), for an
inpaint the mask, the image latents and the blending noise (`inpaint.MASK`, ...); the
scheduler's state is its step index and sigmas (`schedulers.KINDS`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from diffusers.pipelines.qwenimage.pipeline_qwenimage import calculate_shift, retrieve_timesteps
from diffusers.pipelines.stable_diffusion.pipeline_stable_diffusion_img2img import (
    retrieve_latents,
)
from diffusers.utils.torch_utils import randn_tensor
from PIL import Image

from app.engine.generation.families.base import Conditioning, Schedule
from app.engine.generation.families.flow import (
    FlowFamily,
    flow_scheduler,
    packed_latent_shape,
    sentence_prompt,
    trim_schedule,
)
from app.engine.generation.families.qwen import QWEN_IMAGE
from app.engine.generation.loop import inpaint, vae_precision
from app.engine.generation.loop.variation import varied_noise
from app.engine.generation.preview import (
    TINY_VAE_MAX_PARAMS,
    LinearPreviewer,
    png_of,
    preview_size,
    to_uint8_hwc,
)
from app.engine.jobs.init_image import fit_to, open_rgb
from app.engine.jobs.params import GenerationParams, InvalidParameters

if TYPE_CHECKING:
    from app.engine.generation.guidance.control import ControlGuide
    from app.engine.generation.loop.inpaint import MaskedImage

PROMPT_EMBEDS = "prompt_embeds"  # the prompt's hidden states, (1, its tokens, width)
NEGATIVE_EMBEDS = "negative_embeds"  # the negative prompt's, under CFG
MAX_SEQUENCE_LENGTH = 512  # the stock `__call__`'s default: tokens kept of the prompt


class QwenImageFamily(FlowFamily):
    """`QwenImagePipeline`'s models (Qwen-Image and its fine-tunes)."""

    name = QWEN_IMAGE.checkpoint_family  # as declared: what its checkpoints say
    label = QWEN_IMAGE.checkpoint_label
    checkpoint_tensors: tuple[str, ...] = (PROMPT_EMBEDS,)

    def native_size(self) -> int:
        return int(self.pipe.default_sample_size) * int(self.pipe.vae_scale_factor)  # 1024

    def latent_shape(self, params: GenerationParams) -> tuple[int, ...]:
        return packed_latent_shape(self.pipe, self.label, params)

    def checkpoint_needs(self, params: GenerationParams) -> tuple[str, ...]:
        needs = self.checkpoint_tensors
        if self.uses_cfg(params):
            needs = (*needs, NEGATIVE_EMBEDS)
        if params.is_inpaint:
            needs = (*needs, inpaint.MASK, inpaint.IMAGE_LATENTS, inpaint.NOISE)
        return needs

    def scheduler(self, params: GenerationParams) -> Any:
        """The stock pipeline's step 4: sigmas 1 .. 1/steps, shifted by `mu` from the number
        of image patches; then `set_begin_index(0)` as before its loop."""
        scheduler = flow_scheduler(self.pipe, params.scheduler, self.label, params.scheduler_config)
        steps = params.steps
        _, _, height, width = self.latent_shape(params)
        config = scheduler.config
        mu = calculate_shift(
            (height // 2) * (width // 2),
            config.get("base_image_seq_len", 256),
            config.get("max_image_seq_len", 4096),
            config.get("base_shift", 0.5),
            config.get("max_shift", 1.15),
        )
        sigmas: Any = np.linspace(1.0, 1 / steps, steps)  # as stock: an array
        retrieve_timesteps(scheduler, steps, self.device, sigmas=sigmas, mu=mu)
        scheduler.set_begin_index(0)
        return scheduler

    def uses_cfg(self, params: GenerationParams) -> bool:
        """The stock `do_true_cfg`: `true_cfg_scale > 1` with a negative prompt, which Easel
        always hands it (an empty one is the empty text)."""
        return params.cfg > 1

    def encode(self, params: GenerationParams, do_cfg: bool) -> Conditioning:
        conditioning = {PROMPT_EMBEDS: self._encoded(params.prompt)}
        if do_cfg:
            conditioning[NEGATIVE_EMBEDS] = self._encoded(params.negative_prompt)
        return conditioning

    def _encoded(self, prompt: str) -> torch.Tensor:
        """`encode_prompt` of one text: its hidden states without the template's head, in
        the transformer's dtype (a no-op unless the text encoder runs wider, as on a
        float16-only device: there the stock pipeline's users cast them so)."""
        embeds, mask = self.pipe.encode_prompt(
            prompt=sentence_prompt(prompt),
            device=self.device,
            max_sequence_length=MAX_SEQUENCE_LENGTH,
        )
        if mask is not None:  # one text is never padded: the stock pipeline drops its mask
            raise AssertionError("a single prompt came back padded")
        return self.for_transformer(embeds)

    def initial_latents(
        self,
        scheduler: Any,
        params: GenerationParams,
        generator: torch.Generator,
        init_image: bytes | None,
        conditioning: Conditioning,
        masked: MaskedImage | None = None,
    ) -> Schedule:
        dtype = conditioning[PROMPT_EMBEDS].dtype
        if masked is not None:
            return self._inpaint_start(scheduler, params, generator, masked, conditioning)
        if init_image is not None:
            image = fit_to(open_rgb(init_image), (params.width, params.height))
            return self._img2img_start(scheduler, params, generator, image, None, dtype)
        noise = randn_tensor(
            self.latent_shape(params), generator=generator, device=self.device, dtype=dtype
        )
        noise = varied_noise(noise, params)  # A1111's variation seed, if any
        return Schedule(scheduler.timesteps, len(scheduler.timesteps), noise)

    def _img2img_start(
        self,
        scheduler: Any,
        params: GenerationParams,
        generator: torch.Generator,
        image: Image.Image,
        crop: tuple[int, int, int, int] | None,
        dtype: torch.dtype,
    ) -> _Start:
        """`QwenImageImg2ImgPipeline` (and the inpaint one, with a crop): the schedule
        trimmed by strength, the image encoded, the latents noised to its first step; the
        image latents and the noise kept for inpaint's blending."""
        timesteps, steps = trim_schedule(scheduler, params)
        if steps < 1:
            raise InvalidParameters(
                f"strength {params.strength:g} leaves no step of {params.steps} to run"
            )
        resize_mode = "fill" if crop is not None else "default"
        pixels = self.pipe.image_processor.preprocess(
            image, height=params.height, width=params.width, crops_coords=crop,
            resize_mode=resize_mode,
        ).to(dtype=torch.float32)  # fmt: skip
        image_latents = self._encode_image(pixels.to(self.device, dtype), generator)
        shape = self.latent_shape(params)
        noise = randn_tensor(shape, generator=generator, device=self.device, dtype=dtype)
        latents = scheduler.scale_noise(image_latents, timesteps[:1].repeat(1), noise)
        return _Start(timesteps, steps, latents, image_latents, noise)

    def _inpaint_start(
        self,
        scheduler: Any,
        params: GenerationParams,
        generator: torch.Generator,
        masked: MaskedImage,
        conditioning: Conditioning,
    ) -> Schedule:
        """`QwenImageInpaintPipeline`'s start: as img2img, then the binarised mask at
        latent size (nearest, every channel), kept with the image latents and the noise
        for `after_step`."""
        dtype = conditioning[PROMPT_EMBEDS].dtype
        start = self._img2img_start(scheduler, params, generator, masked.image, masked.crop, dtype)
        resize_mode = "fill" if masked.crop is not None else "default"
        mask_condition = inpaint.mask_processor(self.pipe, patch=2).preprocess(
            masked.mask, height=params.height, width=params.width, resize_mode=resize_mode,
            crops_coords=masked.crop,
        )  # fmt: skip
        _, channels, height, width = start.latents.shape
        mask = torch.nn.functional.interpolate(mask_condition, size=(height, width))
        conditioning[inpaint.MASK] = mask.to(self.device, dtype).repeat(1, channels, 1, 1)
        conditioning[inpaint.IMAGE_LATENTS] = start.image_latents
        conditioning[inpaint.NOISE] = start.noise
        return start

    def _encode_image(self, pixels: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """`_encode_vae_image` on one frame: sampled, normalised per channel, the frame axis
        dropped. Qwen-Image's pipelines never upcast the VAE (see vae_precision)."""
        vae = self.pipe.vae

        def sample(image: torch.Tensor) -> torch.Tensor:
            latents = retrieve_latents(vae.encode(image.unsqueeze(2)), generator=generator)
            mean, inverse_std = _mean_and_inverse_std(vae.config, latents)
            normalised: torch.Tensor = (latents - mean) * inverse_std
            return normalised[:, :, 0]

        return vae_precision.run_encoder(vae, pixels, False, sample)

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
        batch, channels, height, width = latents.shape
        packed = self.pipe._pack_latents(latents, batch, channels, height, width)
        timestep = t.expand(batch).to(packed.dtype) / 1000
        model_input, grid = packed, [(1, height // 2, width // 2)]
        if (extra := self.extra_tokens(conditioning)) is not None:  # an edit's input images
            tokens, extra_grids = extra
            model_input, grid = torch.cat([packed, tokens], dim=1), [*grid, *extra_grids]
        img_shapes = [grid] * batch
        own = packed.size(1)  # the output for the latents' own tokens only, as stock keeps
        embeds = conditioning[PROMPT_EMBEDS]
        noise_pred = self._transformer(model_input, timestep, embeds, img_shapes)[:, :own]
        if do_cfg:
            negative = self._transformer(
                model_input, timestep, conditioning[NEGATIVE_EMBEDS], img_shapes, "uncond"
            )[:, :own]
            combined = negative + guidance * (noise_pred - negative)
            cond_norm = torch.norm(noise_pred, dim=-1, keepdim=True)
            noise_norm = torch.norm(combined, dim=-1, keepdim=True)
            noise_pred = combined * (cond_norm / noise_norm)
        return _unpacked(noise_pred, height, width)

    def extra_tokens(
        self, conditioning: Conditioning
    ) -> tuple[torch.Tensor, list[tuple[int, int, int]]] | None:
        """Tokens the transformer reads after the latents' own, and their patch grids (one
        an input image); none here (Qwen-Image-Edit's input images: `edit.py`)."""
        return None

    def _transformer(
        self,
        packed: torch.Tensor,
        timestep: torch.Tensor,
        embeds: torch.Tensor,
        img_shapes: list[list[tuple[int, int, int]]],
        context: str = "cond",
    ) -> torch.Tensor:
        """One transformer call as the stock loop makes it (no guidance embedder: the
        released models have none; no attention mask: one prompt is never padded)."""
        transformer = self.pipe.transformer
        with transformer.cache_context(context):
            output: torch.Tensor = transformer(
                hidden_states=packed,
                timestep=timestep,
                guidance=None,
                encoder_hidden_states_mask=None,
                encoder_hidden_states=embeds,
                img_shapes=img_shapes,
                attention_kwargs={},
                return_dict=False,
            )[0]
        return output

    def decode(self, latents: torch.Tensor, generator: torch.Generator) -> Image.Image:
        image = decoded(self.pipe.vae, latents)
        pil: Image.Image = self.pipe.image_processor.postprocess(image, output_type="pil")[0]
        return pil


def decoded(vae: Any, latents: torch.Tensor, *, check: bool = True) -> torch.Tensor:
    """Loop latents (1, 16, h, w) as an image tensor in [-1, 1], as the stock pipelines
    decode: cast to the VAE's dtype, unnormalised there (`x / (1 / std) + mean`), decoded
    as one frame, the frame kept. Never upcast (vae_precision), but float32 after a NaN."""

    def unnormalise_and_decode(frame: torch.Tensor) -> torch.Tensor:
        frame = frame.unsqueeze(2)
        mean, inverse_std = _mean_and_inverse_std(vae.config, frame)
        image: torch.Tensor = vae.decode(frame / inverse_std + mean, return_dict=False)[0]
        return image[:, :, 0]

    return vae_precision.run_decoder(vae, latents, False, unnormalise_and_decode, check=check)


def _mean_and_inverse_std(config: Any, latents: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The VAE's per-channel `latents_mean` and `1 / latents_std` for 5D `latents`, in
    their dtype, computed as the stock pipelines compute them (the reciprocal taken in that
    dtype: dividing by it is not always multiplying by the standard deviation)."""
    shape = (1, config.z_dim, 1, 1, 1)
    device, dtype = latents.device, latents.dtype
    mean = torch.tensor(config.latents_mean).view(shape).to(device, dtype)
    inverse_std = 1.0 / torch.tensor(config.latents_std).view(shape).to(device, dtype)
    return mean, inverse_std


@dataclass(frozen=True)
class _Start(Schedule):
    """An img2img start, with what inpaint's blending keeps of it."""

    image_latents: torch.Tensor
    noise: torch.Tensor


def _unpacked(packed: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """`QwenImagePipeline._unpack_latents` for latents `height` x `width` (not pixels),
    without the frame axis."""
    batch, _, channels = packed.shape
    latents = packed.view(batch, height // 2, width // 2, channels // 4, 2, 2)
    latents = latents.permute(0, 3, 1, 4, 2, 5)
    return latents.reshape(batch, channels // 4, height, width)


class QwenImagePreviewer:
    """Previews of Qwen-Image's latents, which its VAE takes as 5D and normalised per
    channel: a tiny VAE decodes them as the family's decode does; a real one (as costly as
    a step) is replaced by a grey linear map of the unnormalised latents. The declaration
    names it (`FamilySpec.preview`)."""

    def __init__(self, pipe: Any) -> None:
        self._pipe = pipe
        self._tiny = sum(p.numel() for p in pipe.vae.parameters()) <= TINY_VAE_MAX_PARAMS
        channels = int(pipe.vae.config.z_dim)
        self._linear = LinearPreviewer(torch.full((channels, 3), 1.0 / channels))

    @torch.no_grad()
    def png(self, latents: torch.Tensor, image_size: tuple[int, int]) -> bytes:
        vae = self._pipe.vae
        if not self._tiny:
            frame = latents.float().unsqueeze(2)
            mean, inverse_std = _mean_and_inverse_std(vae.config, frame)
            return self._linear.png((frame / inverse_std + mean)[:, :, 0], image_size)
        width, height = preview_size(image_size)
        factor = int(self._pipe.vae_scale_factor)
        size = (-(-height // factor), -(-width // factor))
        if latents.shape[-2] > size[0] or latents.shape[-1] > size[1]:
            latents = torch.nn.functional.interpolate(latents, size=size, mode="area")
        image = decoded(vae, latents, check=False)
        return png_of(to_uint8_hwc(image[0].permute(1, 2, 0)), image_size)

"""Flux.1 ControlNets in our own loop: mirrors `FluxControlNetPipeline` (diffusers 0.42; its
img2img and inpaint twins prepare the control images alike, before the init image's
latents), one `FluxControlNetModel` or several (`FluxMultiControlNetModel`), call for call.

Each control image goes through the pipeline's `image_processor` (the job's size, [-1, 1]).
InstantX's and Shakker-Labs' nets (no `input_hint_block`) read it as latents: the VAE
encodes it *sampling* its latent distribution from the job's generator, before the job's
noise is drawn, then it is shifted, scaled and packed as the latents are. XLabs' nets read
the pixels through their own hint block, and the transformer repeats their double-block
residuals over its blocks (`controlnet_blocks_repeat`). As stock, the first net says which
kind all are. Each step every net is called on the packed latents with its layer's weight
times "keep" (1 inside the layer's start/end share of the timesteps), a Union net with its
layer's `control_mode` (`jobs.params.FLUX_UNION_TYPES`), and the residuals of several are
summed in layer order.

On resume the images are prepared again from a fresh generator of the job's seed: the same
draws as at the start, so the remaining steps are guided by exactly what guided the first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from diffusers.pipelines.flux.pipeline_flux_controlnet import retrieve_latents

from app.engine.jobs.init_image import open_rgb
from app.engine.jobs.params import GenerationParams, InvalidParameters

Residuals = tuple[list[torch.Tensor] | None, list[torch.Tensor] | None, bool]


def flux_images(
    pipe: Any,
    params: GenerationParams,
    nets: Sequence[Any],
    images: Sequence[bytes],
    generator: torch.Generator,
) -> list[torch.Tensor]:
    """Each layer's control image as its net reads it, in layer order."""
    latent_input = reads_latents(nets[0])  # as stock: the first net says it for all
    if any(reads_latents(net) != latent_input for net in nets):
        raise InvalidParameters(
            "Flux.1 ControlNets that read latents (InstantX, Shakker-Labs) and ones that read "
            "pixels (XLabs) cannot guide one job together"
        )
    prepared = [_prepared(pipe, png, params) for png in images]
    if not latent_input:
        return prepared
    return [_packed_latents(pipe, image, generator) for image in prepared]  # in layer order


def reads_latents(net: Any) -> bool:
    """InstantX's and Shakker-Labs' nets read the VAE's latents; XLabs' its own hint block's."""
    return net.input_hint_block is None


def _prepared(pipe: Any, png: bytes, params: GenerationParams) -> torch.Tensor:
    """`FluxControlNetPipeline.prepare_image` for one image and one picture per prompt."""
    image = pipe.image_processor.preprocess(open_rgb(png), height=params.height, width=params.width)
    image = image.repeat_interleave(1, dim=0)
    return image.to(device=pipe._execution_device, dtype=pipe.vae.dtype)


def _packed_latents(pipe: Any, image: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    vae = pipe.vae
    latents = retrieve_latents(vae.encode(image), generator=generator)  # sampled, as stock
    latents = (latents - vae.config.shift_factor) * vae.config.scaling_factor
    batch, _, height, width = latents.shape
    channels = pipe.transformer.config.in_channels // 4
    return pipe._pack_latents(latents, batch, channels, height, width)


def flux_residuals(
    guide: Any,  # a control.ControlGuide (control imports this module: no import back)
    index: int,
    hidden_states: torch.Tensor,
    timestep: torch.Tensor,
    guidance: float,
    text: dict[str, torch.Tensor],
) -> Residuals:
    """(double-block residuals, single-block residuals, whether the transformer repeats the
    double-block ones) at timestep `index`; `timestep`: already divided by 1000, as stock
    passes it; `text`: the transformer's `pooled_projections`, `encoder_hidden_states`,
    `txt_ids` and `img_ids`."""
    first = guide.units[0].net
    embedded = None
    if first.config.guidance_embeds:  # stock reads the first net's
        embedded = torch.tensor([guidance], device=hidden_states.device)
        embedded = embedded.expand(hidden_states.shape[0])
    blocks: list[torch.Tensor] | None = None
    singles: list[torch.Tensor] | None = None
    for number, unit in enumerate(guide.units):
        layer = unit.layers[0]
        mode = None
        if unit.modes:
            mode = torch.tensor(unit.modes[0]).to(hidden_states.device, dtype=torch.long)
            mode = mode.view(-1, 1).expand(hidden_states.shape[0], 1)
        unit_blocks, unit_singles = unit.net(
            hidden_states=hidden_states, controlnet_cond=unit.images[0], controlnet_mode=mode,
            conditioning_scale=guide.weights[layer] * guide.keeps[index][layer],
            timestep=timestep, guidance=embedded, joint_attention_kwargs={}, return_dict=False,
            **text,
        )  # fmt: skip
        if number == 0:  # as FluxMultiControlNetModel merges them: in order, summed
            blocks, singles = unit_blocks, unit_singles
        else:
            blocks = _summed(blocks, unit_blocks)
            singles = _summed(singles, unit_singles)
    return blocks, singles, not reads_latents(first)


def _summed(
    before: list[torch.Tensor] | None, now: list[torch.Tensor] | None
) -> list[torch.Tensor] | None:
    if before is None or now is None:
        return before
    return [a + b for a, b in zip(before, now, strict=True)]

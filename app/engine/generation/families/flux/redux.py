"""Flux.1 Redux in our own loop: a reference image becomes extra T5-space tokens after the
prompt's, as `FluxPriorReduxPipeline` makes them for `FluxPipeline`.

Mirrors the stock pair as diffusers documents it (`pipe_prior_redux(image, prompt=...,
prompt_embeds_scale=..., pooled_prompt_embeds_scale=...)` with the base pipeline's text
encoders, then `pipe(**pipe_prior_output)`): the picture through the Redux folder's SigLIP
encoder (the prior's own `encode_image`: its processor, no random numbers) and its
`ReduxImageEncoder`; those tokens appended to the prompt's T5 sequence; each reference's
weight is the prior's per-image `prompt_embeds_scale` and `pooled_prompt_embeds_scale`
(several images: the prior's weighted sum). The prompt is always encoded, as Black Forest
Labs' own Redux and ComfyUI's style model do (the stock example without text encoders puts
zeros there instead: an empty prompt here is T5's encoding of ""). The result is the job's
conditioning, so a checkpoint carries the image tokens and a resumed job reads exactly them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from app.engine.generation.guidance.redux_models import ReduxInfo, ReduxNotFound
from app.engine.jobs.init_image import open_rgb

_HELD = "_easel_redux"  # the `Redux` the pipeline's next job reads its references with


@dataclass
class Redux:
    """A loaded Redux folder (its stock prior pipeline, no text encoders) and the weights
    of the job's reference images, in order."""

    path: str
    prior: Any  # FluxPriorReduxPipeline
    weights: tuple[float, ...] = ()


def use_redux(pipe: Any, models: Sequence[ReduxInfo], weights: Sequence[float]) -> None:
    """Make `pipe` hold the Redux model the job's references name (one per reference; all
    the same one: the stock prior encodes every image with one encoder), at their weights;
    loaded once and kept while jobs name it, dropped when a job names none."""
    if not models:
        setattr(pipe, _HELD, None)
        return
    first = models[0]
    if other := next((m for m in models if m.path != first.path), None):
        raise ReduxNotFound(
            f"reference images {first.name!r} and {other.name!r} name different Redux "
            "models; one job's references use one"
        )
    held: Redux | None = getattr(pipe, _HELD, None)
    path = str(first.path.resolve())
    if held is None or held.path != path:
        held = Redux(path, _load_prior(pipe, first))
    held.weights = tuple(float(weight) for weight in weights)
    setattr(pipe, _HELD, held)


def _load_prior(pipe: Any, model: ReduxInfo) -> Any:
    from diffusers import FluxPriorReduxPipeline

    prior = FluxPriorReduxPipeline.from_pretrained(
        model.path, dtype=pipe.transformer.dtype, local_files_only=True
    )
    width = pipe.transformer.config.joint_attention_dim
    if (made := prior.image_embedder.config.txt_in_features) != width:
        raise ReduxNotFound(
            f"Redux model {model.name!r} makes {made}-wide tokens, but this Flux.1 model's "
            f"text is {width} wide"
        )
    prior.set_progress_bar_config(disable=True)
    return prior.to(pipe._execution_device)


def held_redux(pipe: Any) -> Redux | None:
    held: Redux | None = getattr(pipe, _HELD, None)
    return held


def redux_modules(pipe: Any) -> list[Any]:
    """The held Redux model's weights (the memory budget counts them with the pipeline)."""
    held = held_redux(pipe)
    return [] if held is None else [held.prior.image_encoder, held.prior.image_embedder]


@torch.no_grad()
def with_image_tokens(
    redux: Redux, images: Sequence[bytes], prompt_embeds: torch.Tensor, pooled: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(T5 sequence, pooled) with the reference `images`' tokens: `FluxPriorReduxPipeline.
    __call__`'s steps 3 to the weighted sum, on the prompt as encoded for one image."""
    prior = redux.prior
    device = prior._execution_device
    pictures = [open_rgb(png) for png in images]
    count = len(pictures)
    image_embeds = prior.image_embedder(prior.encode_image(pictures, device, 1)).image_embeds
    image_embeds = image_embeds.to(device=device)
    text = prompt_embeds.repeat(count, 1, 1)  # the prior encodes the prompt once per image
    pooled_text = pooled.repeat(count, 1)
    embeds = torch.cat([text, image_embeds], dim=1)
    scales = torch.tensor(redux.weights, device=device, dtype=image_embeds.dtype)
    embeds *= scales[:, None, None]
    pooled_text *= scales[:, None]
    return embeds.sum(dim=0, keepdim=True), pooled_text.sum(dim=0, keepdim=True)

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
ComfyUI's Redux file and its SigLIP file (guidance/redux_models.py) are built into the same
stock prior pipeline as the folder loads into.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
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

    dtype = pipe.transformer.dtype
    if model.image_encoder is not None and model.config is not None:
        prior = _prior_from_files(model.path, model.image_encoder, model.config, dtype)
    else:
        prior = FluxPriorReduxPipeline.from_pretrained(
            model.path, dtype=dtype, local_files_only=True
        )
    width = pipe.transformer.config.joint_attention_dim
    if (made := prior.image_embedder.config.txt_in_features) != width:
        raise ReduxNotFound(
            f"Redux model {model.name!r} makes {made}-wide tokens, but this Flux.1 model's "
            f"text is {width} wide"
        )
    prior.set_progress_bar_config(disable=True)
    return prior.to(pipe._execution_device)


def _prior_from_files(
    embedder_file: Path, encoder_file: Path, config: Path, dtype: torch.dtype
) -> Any:
    """The stock prior of ComfyUI's files: the Redux projection (diffusers' own key names)
    and the SigLIP vision encoder (transformers' `vision_model.` keys; a file without the
    pooling head, which Redux never reads, builds the tower without it), configured by the
    shipped folder, its image processor the released one's settings."""
    from accelerate import init_empty_weights
    from diffusers import FluxPriorReduxPipeline
    from diffusers.pipelines.flux.modeling_flux import ReduxImageEncoder
    from safetensors.torch import load_file
    from transformers import SiglipImageProcessor, SiglipVisionConfig, SiglipVisionModel

    embedder_weights = load_file(str(embedder_file))
    # The released files' `vision_model.` prefix, which transformers 5's model drops.
    encoder_weights = {
        key.removeprefix(_SIGLIP_PREFIX): value
        for key, value in load_file(str(encoder_file)).items()
    }
    settings = SiglipVisionConfig.from_pretrained(config / "image_encoder", local_files_only=True)
    settings.vision_use_head = any(key.startswith(_SIGLIP_HEAD) for key in encoder_weights)
    with init_empty_weights(include_buffers=False):
        encoder = SiglipVisionModel._from_config(settings, dtype=dtype)
        embedder = ReduxImageEncoder.from_config(
            ReduxImageEncoder.load_config(config / "image_embedder", local_files_only=True)
        )
    if all(key.startswith(_SIGLIP_PREFIX) for key in encoder.state_dict()):  # transformers 4
        encoder_weights = {_SIGLIP_PREFIX + key: value for key, value in encoder_weights.items()}
    for module, weights in ((encoder, encoder_weights), (embedder, embedder_weights)):
        cast = {key: value.to(dtype) for key, value in weights.items()}
        module.load_state_dict(cast, strict=True, assign=True)
    processor = SiglipImageProcessor.from_pretrained(
        config / "feature_extractor", local_files_only=True
    )
    return FluxPriorReduxPipeline(
        image_encoder=encoder.eval(), feature_extractor=processor, image_embedder=embedder.eval()
    )


_SIGLIP_PREFIX = "vision_model."
_SIGLIP_HEAD = "head."


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

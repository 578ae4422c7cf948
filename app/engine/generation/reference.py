"""IP-Adapter in our own loop: a reference image's embeddings join each UNet call.

Mirrors the stock pipelines' IP-Adapter path as their users take it
(`load_ip_adapter`, `set_ip_adapter_scale`, `ip_adapter_image=`): the adapter is loaded into
the pipeline by diffusers itself (its image encoder, image projection and the attention
processors that add the image tokens), the image is encoded by the pipeline's own
`prepare_ip_adapter_image_embeds` (no random numbers), and the embeddings go to the UNet
as `added_cond_kwargs["image_embeds"]`. They are part of the job's conditioning, so a
checkpoint carries them and a resumed job is guided by exactly them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from app.engine.generation.ip_adapters import IPAdapterInfo, IPAdapterNotFound
from app.engine.jobs.init_image import open_rgb

IMAGE_EMBEDS = "ip_adapter_image_embeds"  # [negative, positive] under CFG
_LOADED = "_easel_ip_adapter"  # which adapter file the pipeline holds now


def use_ip_adapter(pipe: Any, adapter: IPAdapterInfo | None, weight: float = 1.0) -> None:
    """Make `pipe` hold exactly `adapter` (None: none), at `weight`: loaded once and kept
    while jobs name it, unloaded (processors restored, encoder freed) when they do not."""
    current = getattr(pipe, _LOADED, None)
    wanted = str(adapter.path.resolve()) if adapter is not None else None
    if current != wanted:
        if current is not None:
            pipe.unload_ip_adapter()
            setattr(pipe, _LOADED, None)
        if adapter is not None:
            _check_fits(pipe, adapter)
            pipe.load_ip_adapter(
                str(adapter.path.parent), subfolder="", weight_name=adapter.path.name,
                image_encoder_folder="image_encoder", local_files_only=True,
            )  # fmt: skip
            setattr(pipe, _LOADED, wanted)
    if adapter is not None:
        pipe.set_ip_adapter_scale(weight)


def _check_fits(pipe: Any, adapter: IPAdapterInfo) -> None:
    width = pipe.unet.config.cross_attention_dim
    if adapter.cross_attention_dim is not None and adapter.cross_attention_dim != width:
        raise IPAdapterNotFound(
            f"IP-Adapter {adapter.name!r} is for {adapter.label} (width "
            f"{adapter.cross_attention_dim}), but this model's cross-attention is {width} wide"
        )
    if not adapter.image_encoder.is_dir():
        raise IPAdapterNotFound(f"IP-Adapter {adapter.name!r} has no {adapter.image_encoder}")


@torch.no_grad()
def image_embeds(pipe: Any, images: Sequence[bytes], do_cfg: bool) -> dict[str, torch.Tensor]:
    """The conditioning the reference `images` add (nothing without any)."""
    if not images:
        return {}
    pictures = [open_rgb(png) for png in images]
    [embeds] = pipe.prepare_ip_adapter_image_embeds(
        pictures if len(pictures) > 1 else pictures[0], None, pipe._execution_device, 1, do_cfg
    )
    return {IMAGE_EMBEDS: embeds}


def with_image_embeds(
    added: dict[str, torch.Tensor] | None, conditioning: dict[str, torch.Tensor]
) -> dict[str, Any] | None:
    """The UNet's `added_cond_kwargs` with the reference's embeddings, when there are some."""
    if IMAGE_EMBEDS not in conditioning:
        return added
    return {**(added or {}), "image_embeds": [conditioning[IMAGE_EMBEDS]]}

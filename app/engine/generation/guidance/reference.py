"""IP-Adapter in our own loop: reference images' embeddings join each UNet call.

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

from app.engine.generation.guidance.ip_adapters import IPAdapterInfo, IPAdapterNotFound
from app.engine.jobs.init_image import open_rgb

IMAGE_EMBEDS = "ip_adapter_image_embeds"  # [negative, positive] under CFG; the first image's
_LOADED = "_easel_ip_adapters"  # which adapter files the pipeline holds now, in order


def embeds_key(index: int) -> str:
    """The conditioning key of reference image `index`'s embeddings."""
    return IMAGE_EMBEDS if index == 0 else f"{IMAGE_EMBEDS}_{index}"


def use_ip_adapters(pipe: Any, adapters: Sequence[IPAdapterInfo], weights: Sequence[float]) -> None:
    """Make `pipe` hold exactly `adapters` (one per reference image, in order; none: none),
    each at its weight: loaded once and kept while jobs name the same ones, unloaded
    (processors restored, encoder freed) when they do not.

    Several reference images are diffusers' "multi IP-Adapter": `load_ip_adapter` with a
    list (the same file may come twice), `set_ip_adapter_scale` with one weight per
    adapter, `ip_adapter_image` with one image per adapter. Its scale is per adapter, so an
    adapter per image is what gives each image a weight of its own."""
    current = getattr(pipe, _LOADED, ())
    wanted = tuple(str(adapter.path.resolve()) for adapter in adapters)
    if current != wanted:
        _switch(pipe, current, adapters, wanted)
    if adapters:
        pipe.set_ip_adapter_scale([float(weight) for weight in weights])


def _switch(
    pipe: Any, current: tuple[str, ...], adapters: Sequence[IPAdapterInfo], wanted: tuple[str, ...]
) -> None:
    from app.engine.generation.memory import offload_device

    offloaded = offload_device(pipe)
    if current:
        pipe.unload_ip_adapter()
        setattr(pipe, _LOADED, ())
    if adapters:
        for adapter in adapters:
            _check_fits(pipe, adapter)
        _check_one_encoder(adapters)
        pipe.load_ip_adapter(
            [str(adapter.path.parent) for adapter in adapters],
            subfolder=[""] * len(adapters),
            weight_name=[adapter.path.name for adapter in adapters],
            image_encoder_folder="image_encoder", local_files_only=True,
        )  # fmt: skip
        setattr(pipe, _LOADED, wanted)
    if offloaded is not None:
        # Low-VRAM mode: the hooks placed again, the image encoder's too (loaded beside
        # the offloaded pipeline it would sit in RAM while asked to run on the device).
        pipe.enable_model_cpu_offload(device=offloaded)


def _check_fits(pipe: Any, adapter: IPAdapterInfo) -> None:
    width = pipe.unet.config.cross_attention_dim
    if adapter.cross_attention_dim is not None and adapter.cross_attention_dim != width:
        raise IPAdapterNotFound(
            f"IP-Adapter {adapter.name!r} is for {adapter.label} (width "
            f"{adapter.cross_attention_dim}), but this model's cross-attention is {width} wide"
        )
    if not adapter.image_encoder.is_dir():
        raise IPAdapterNotFound(f"IP-Adapter {adapter.name!r} has no {adapter.image_encoder}")


def _check_one_encoder(adapters: Sequence[IPAdapterInfo]) -> None:
    """diffusers encodes every reference image with one image encoder (the first
    adapter's): adapters trained with another one cannot share a job."""
    first = adapters[0]
    expected = _encoder_config(first)
    for adapter in adapters[1:]:
        if _encoder_config(adapter) != expected:
            raise IPAdapterNotFound(
                f"IP-Adapters {first.name!r} and {adapter.name!r} use different image encoders "
                f"({first.image_encoder} and {adapter.image_encoder}): use one kind per job"
            )


def _encoder_config(adapter: IPAdapterInfo) -> bytes:
    try:
        return (adapter.image_encoder / "config.json").read_bytes()
    except OSError:
        return b""


@torch.no_grad()
def image_embeds(pipe: Any, images: Sequence[bytes], do_cfg: bool) -> dict[str, torch.Tensor]:
    """The conditioning the reference `images` add, one entry per image and adapter
    (nothing without any)."""
    if not images:
        return {}
    pictures = [open_rgb(png) for png in images]
    embeds = pipe.prepare_ip_adapter_image_embeds(pictures, None, pipe._execution_device, 1, do_cfg)
    return {embeds_key(index): each for index, each in enumerate(embeds)}


def with_image_embeds(
    added: dict[str, torch.Tensor] | None, conditioning: dict[str, torch.Tensor]
) -> dict[str, Any] | None:
    """The UNet's `added_cond_kwargs` with the references' embeddings, when there are some."""
    embeds: list[torch.Tensor] = []
    while embeds_key(len(embeds)) in conditioning:
        embeds.append(conditioning[embeds_key(len(embeds))])
    if not embeds:
        return added
    return {**(added or {}), "image_embeds": embeds}

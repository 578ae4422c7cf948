"""ControlNet in our own loop: one or several control layers guide each step's UNet call.

Mirrors `StableDiffusionControlNetPipeline` and `StableDiffusionXLControlNetPipeline`
(`MultiControlNetModel` for several layers) call for call: each control image is
prepared by the pipelines' `control_image_processor` (resized to the job's size, [0, 1],
doubled under CFG), each ControlNet is called on the UNet's input with its weight times
"keep" (1 inside the layer's start/end share of the timesteps, 0 outside), and the
residuals of several layers are summed in layer order before the UNet adds them.

The control images are job inputs, read again on resume: preparing them draws no random
numbers, so a resumed job is guided by exactly what guided its first steps (the params
name each image by its digest, and a checkpoint resumes only with the same params).
Loaded ControlNets stay with the runner while jobs name them (`ControlNetCache`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from diffusers.image_processor import VaeImageProcessor

from app.engine.generation.architecture import Architecture
from app.engine.generation.controlnets import ControlNetInfo, ControlNetNotFound
from app.engine.jobs.init_image import open_rgb
from app.engine.jobs.params import ControlLayer, GenerationParams
from app.engine.paths import resources_dir


@dataclass
class ControlGuide:
    """A job's control layers, ready for every step."""

    nets: list[Any]  # ControlNetModel, one per layer
    images: list[torch.Tensor]  # prepared as the pipelines' `prepare_image`
    weights: list[float]
    keeps: list[list[float]]  # per timestep index, per layer: 1.0 acts, 0.0 does not
    guess_mode: bool  # a "global pool" ControlNet (shuffle): conditional batch only

    def residuals(
        self,
        index: int,
        latents: torch.Tensor,
        model_input: torch.Tensor,
        t: torch.Tensor,
        scheduler: Any,
        prompt_embeds: torch.Tensor,
        added: dict[str, torch.Tensor] | None,
        do_cfg: bool,
    ) -> tuple[list[torch.Tensor], torch.Tensor]:
        """(down block residuals, mid block residual) for the UNet at timestep `index`."""
        if self.guess_mode and do_cfg:
            control_input = latents
            if hasattr(scheduler, "scale_model_input"):
                control_input = scheduler.scale_model_input(control_input, t)
            embeds = prompt_embeds.chunk(2)[1]
            control_added = None if added is None else {k: v.chunk(2)[1] for k, v in added.items()}
        else:
            control_input, embeds, control_added = model_input, prompt_embeds, added
        down: list[torch.Tensor] = []
        mid = torch.empty(0)
        keeps = self.keeps[index]
        for layer, (net, image) in enumerate(zip(self.nets, self.images, strict=True)):
            # The pipelines' `controlnet_conditioning_scale * controlnet_keep[i]`.
            scale = self.weights[layer] * keeps[layer]
            layer_down, layer_mid = net(
                control_input,
                t,
                encoder_hidden_states=embeds,
                controlnet_cond=image,
                conditioning_scale=scale,
                guess_mode=self.guess_mode,
                added_cond_kwargs=control_added,
                return_dict=False,
            )
            if layer == 0:  # as MultiControlNetModel merges them: in order, summed
                down, mid = list(layer_down), layer_mid
            else:
                down = [before + now for before, now in zip(down, layer_down, strict=True)]
                mid = mid + layer_mid
        if self.guess_mode and do_cfg:
            down = [torch.cat([torch.zeros_like(d), d]) for d in down]
            mid = torch.cat([torch.zeros_like(mid), mid])
        return down, mid


def control_image_processor(pipe: Any) -> VaeImageProcessor:
    """The ControlNet pipelines' `control_image_processor`."""
    return VaeImageProcessor(
        vae_scale_factor=pipe.vae_scale_factor, do_convert_rgb=True, do_normalize=False
    )


def make_guide(
    pipe: Any,
    params: GenerationParams,
    nets: Sequence[Any],
    images: Sequence[bytes],
    timesteps: int,
    do_cfg: bool,
    crop: tuple[int, int, int, int] | None = None,
) -> ControlGuide | None:
    """The guide for `params`' layers (None without any), with `nets` and `images` in the
    layers' order; `timesteps`: how many the job runs (start/end are shares of them);
    `crop`: an "only masked" inpaint's box, which the control images are cut to as well
    (the ControlNet inpaint pipelines' `crops_coords` with `resize_mode="fill"`)."""
    layers = params.control_layers
    if not layers:
        return None
    guess_mode = bool(nets[0].config.global_pool_conditions)  # the pipelines read the first
    processor = control_image_processor(pipe)
    device = pipe._execution_device
    prepared = []
    for net, png in zip(nets, images, strict=True):
        image = processor.preprocess(
            open_rgb(png), height=params.height, width=params.width, crops_coords=crop,
            resize_mode="default" if crop is None else "fill",
        )  # fmt: skip
        image = image.to(dtype=torch.float32).to(device=device, dtype=net.dtype)
        prepared.append(torch.cat([image] * 2) if do_cfg and not guess_mode else image)
    return ControlGuide(
        nets=list(nets),
        images=prepared,
        weights=[float(layer.weight) for layer in layers],
        keeps=[_keeps(layers, i, timesteps) for i in range(timesteps)],
        guess_mode=guess_mode,
    )


def _keeps(layers: Sequence[ControlLayer], i: int, n: int) -> list[float]:
    return [1.0 - float(i / n < layer.start or (i + 1) / n > layer.end) for layer in layers]


class ControlNetCache:
    """Loaded ControlNets by file, on the pipeline's device and dtype: loaded once, kept
    while jobs name them, dropped when a job names none of them (a ControlNet is a third of
    its model's UNet: keeping unused ones would cost that much memory per net)."""

    def __init__(self, configs: Path | None = None) -> None:
        """`configs`: where the config of each architecture's ControlNet is, for single
        files (`<configs>/controlnet-sd1/config.json`...); default: the shipped ones."""
        self._configs = configs
        self._loaded: dict[tuple[str, str, str], Any] = {}

    def get(self, infos: Sequence[ControlNetInfo], pipe: Any) -> list[Any]:
        device, dtype = pipe._execution_device, pipe.unet.dtype
        keys = [(str(info.path.resolve()), str(device), str(dtype)) for info in infos]
        for key in [key for key in self._loaded if key not in keys]:
            del self._loaded[key]
        nets = []
        for info, key in zip(infos, keys, strict=True):
            if key not in self._loaded:
                self._loaded[key] = _load(info, dtype, self._configs).to(device)
            nets.append(self._loaded[key])
        return nets

    @property
    def loaded(self) -> list[str]:
        """The files of the ControlNets held now."""
        return [key[0] for key in self._loaded]

    def clear(self) -> None:
        self._loaded.clear()


def controlnet_config(architecture: Architecture, configs: Path | None = None) -> Path:
    """The config folder a single-file ControlNet of `architecture` is loaded with."""
    root = configs if configs is not None else resources_dir() / "model_configs"
    return root / f"controlnet-{architecture.value}"


def _load(info: ControlNetInfo, dtype: torch.dtype, configs: Path | None) -> Any:
    from diffusers import ControlNetModel

    if info.path.is_dir():
        return ControlNetModel.from_pretrained(info.path, torch_dtype=dtype)
    if info.architecture is None:
        raise ControlNetNotFound(f"ControlNet {info.name!r} fits no known architecture")
    config = controlnet_config(info.architecture, configs)
    if not (config / "config.json").is_file():
        raise ControlNetNotFound(
            f"ControlNet {info.name!r} is an {info.architecture.label} file, and Easel has no "
            f"{info.architecture.label} ControlNet config to load it with ({config})"
        )
    # Offline: diffusers converts the original keys itself (`convert_controlnet_checkpoint`)
    # and takes the shape of the model from our shipped config, never from the hub.
    return ControlNetModel.from_single_file(
        str(info.path), config=str(config), torch_dtype=dtype, local_files_only=True
    )

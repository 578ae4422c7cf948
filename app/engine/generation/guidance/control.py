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

Flux.1's ControlNets (`FluxControlNetModel`) prepare their images and guide the transformer
as `FluxControlNetPipeline` does instead (`flux_control`); the guide holds them alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from diffusers.image_processor import VaeImageProcessor

from app.engine.generation.files.architecture import Architecture
from app.engine.generation.guidance.controlnets import (
    FLUX_CONTROLNET_CLASS,
    UNION_CLASS,
    ControlNetInfo,
    ControlNetNotFound,
)
from app.engine.jobs.init_image import open_rgb
from app.engine.jobs.params import (
    FLUX_UNION_TYPES,
    SDXL_UNION_TYPES,
    ControlLayer,
    GenerationParams,
    InvalidParameters,
)
from app.engine.paths import resources_dir

UNION_TRANSFORMER_HEADS = 8  # xinsir's Union config (heads are not in the tensors' shapes)


@dataclass
class ControlUnit:
    """One ControlNet call per step: a plain ControlNet with its layer, or a ControlNet
    Union with every layer that names it (their images fused in one call, as one
    `ControlNetUnionModel` given lists is called by `StableDiffusionXLControlNetUnionPipeline`)."""

    net: Any
    layers: list[int]  # the job's layer indices it serves, in order
    images: list[torch.Tensor]  # prepared as the pipelines' `prepare_image`, per layer
    modes: list[int] = field(default_factory=list)  # Union: each layer's control type index


@dataclass
class ControlGuide:
    """A job's control layers, ready for every step once `over` its timesteps."""

    units: list[ControlUnit]
    weights: list[float]  # per layer
    spans: list[tuple[float, float]]  # per layer: its start and end share of the timesteps
    guess_mode: bool  # a "global pool" ControlNet (shuffle): conditional batch only
    keeps: list[list[float]] = field(default_factory=list)  # per timestep, per layer: 1 acts

    def over(self, timesteps: int) -> ControlGuide:
        """The guide for a job of `timesteps` (known once img2img has trimmed them): each
        layer's keep per timestep, as the pipelines' `controlnet_keep`."""
        return replace(self, keeps=[_keeps(self.spans, i, timesteps) for i in range(timesteps)])

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
        for number, unit in enumerate(self.units):
            # The pipelines' `controlnet_conditioning_scale * controlnet_keep[i]`.
            scales = [self.weights[layer] * keeps[layer] for layer in unit.layers]
            common = {
                "encoder_hidden_states": embeds, "guess_mode": self.guess_mode,
                "added_cond_kwargs": control_added, "return_dict": False,
            }  # fmt: skip
            if unit.modes:
                control_type = torch.zeros(unit.net.config.num_control_type).scatter_(
                    0, torch.tensor(unit.modes), 1
                )
                control_type = (
                    control_type.reshape(1, -1)
                    .to(prompt_embeds.device, dtype=prompt_embeds.dtype)
                    .repeat(2 if do_cfg else 1, 1)
                )
                unit_down, unit_mid = unit.net(
                    control_input, t, controlnet_cond=unit.images, control_type=control_type,
                    control_type_idx=unit.modes, conditioning_scale=scales, **common,
                )  # fmt: skip
            else:
                unit_down, unit_mid = unit.net(
                    control_input, t, controlnet_cond=unit.images[0],
                    conditioning_scale=scales[0], **common,
                )  # fmt: skip
            if number == 0:  # as MultiControlNetModel merges them: in order, summed
                down, mid = list(unit_down), unit_mid
            else:
                down = [before + now for before, now in zip(down, unit_down, strict=True)]
                mid = mid + unit_mid
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
    do_cfg: bool,
    crop: tuple[int, int, int, int] | None,
    generator: torch.Generator,
) -> ControlGuide | None:
    """The guide for `params`' layers (None without any), with `nets` and `images` in the
    layers' order, to be put `over` the job's timesteps; `crop`: an "only masked" inpaint's
    box, which the control images are cut to as well (the ControlNet inpaint pipelines'
    `crops_coords` with `resize_mode="fill"`). Made before the job's noise is drawn:
    Flux.1's ControlNets draw from `generator` first (`flux_control`)."""
    layers = params.control_layers
    if not layers:
        return None
    spans = [(float(layer.start), float(layer.end)) for layer in layers]
    weights = [float(layer.weight) for layer in layers]
    if is_flux_controlnet(nets[0]):
        units = _flux_units(pipe, params, nets, images, generator)
        return ControlGuide(units=units, weights=weights, spans=spans, guess_mode=False)
    guess_mode = bool(nets[0].config.global_pool_conditions)  # the pipelines read the first
    units = _unet_units(pipe, params, nets, images, do_cfg and not guess_mode, crop)
    return ControlGuide(units=units, weights=weights, spans=spans, guess_mode=guess_mode)


def _unet_units(
    pipe: Any,
    params: GenerationParams,
    nets: Sequence[Any],
    images: Sequence[bytes],
    doubled: bool,
    crop: tuple[int, int, int, int] | None,
) -> list[ControlUnit]:
    """The UNet families' layers: a plain net per layer, a Union fusing the layers that
    name it; `doubled`: each image twice, for CFG's two halves."""
    layers = params.control_layers
    processor = control_image_processor(pipe)
    device = pipe._execution_device
    units: dict[int, ControlUnit] = {}  # by net: a Union serves all the layers naming it
    for index, (net, png, layer) in enumerate(zip(nets, images, layers, strict=True)):
        image = processor.preprocess(
            open_rgb(png), height=params.height, width=params.width, crops_coords=crop,
            resize_mode="default" if crop is None else "fill",
        )  # fmt: skip
        # As the pipelines' batch repeat: a contiguous copy (the processor's tensor is not,
        # and the convolutions round differently on other strides).
        image = image.to(dtype=torch.float32).repeat_interleave(1, dim=0)
        image = image.to(device=device, dtype=net.dtype)
        image = torch.cat([image] * 2) if doubled else image
        union = is_union(net)
        key = id(net) if union else -1 - index
        unit = units.setdefault(key, ControlUnit(net, [], []))
        unit.layers.append(index)
        unit.images.append(image)
        if union:
            unit.modes.append(union_mode(layer, index))
    return list(units.values())


def _flux_units(
    pipe: Any,
    params: GenerationParams,
    nets: Sequence[Any],
    images: Sequence[bytes],
    generator: torch.Generator,
) -> list[ControlUnit]:
    """Flux.1's layers (`flux_control`): one unit each, as `FluxMultiControlNetModel` calls
    its nets (a Union too, with the layer's mode)."""
    from app.engine.generation.guidance.flux_control import flux_images

    prepared = flux_images(pipe, params, nets, images, generator)
    layers = params.control_layers
    return [
        ControlUnit(net, [index], [image], [union_mode(layer, index, FLUX_UNION_TYPES)])
        if net.union
        else ControlUnit(net, [index], [image])
        for index, (net, image, layer) in enumerate(zip(nets, prepared, layers, strict=True))
    ]


def is_flux_controlnet(net: Any) -> bool:
    return type(net).__name__ == FLUX_CONTROLNET_CLASS


def is_union(net: Any) -> bool:
    return type(net).__name__ == UNION_CLASS


def union_mode(layer: ControlLayer, index: int, types: Sequence[str] = SDXL_UNION_TYPES) -> int:
    """The index of `layer`'s control type in its Union's `types`, as the Union pipelines'
    `control_mode`."""
    if layer.union_type not in types:
        raise InvalidParameters(
            f"control layer {index} needs a control type its Union takes ({', '.join(types)})"
        )
    return list(types).index(layer.union_type)


def _keeps(spans: Sequence[tuple[float, float]], i: int, n: int) -> list[float]:
    return [1.0 - float(i / n < start or (i + 1) / n > end) for start, end in spans]


class ControlNetCache:
    """Loaded ControlNets by file, on the pipeline's device and dtype: loaded once, kept
    while jobs name them, dropped when a job names none of them (a ControlNet is a third of
    its model's UNet: keeping unused ones would cost that much memory per net).

    Beside a pipeline in low-VRAM mode each net is offloaded as diffusers offloads a
    pipeline's ControlNet (`cpu_offload_with_hook`): kept in RAM, moved to the device by
    its first call of a job and back by `offload()` once the job's steps are done."""

    def __init__(self, configs: Path | None = None) -> None:
        """`configs`: where the config of each architecture's ControlNet is, for single
        files (`<configs>/controlnet-sd1/config.json`...); default: the shipped ones."""
        self._configs = configs
        self._loaded: dict[tuple[str, str, str, bool], Any] = {}
        self._hooks: dict[tuple[str, str, str, bool], Any] = {}

    def get(self, infos: Sequence[ControlNetInfo], pipe: Any) -> list[Any]:
        if not infos:  # none named: none kept (and no UNet asked: Flux and SD 3.x have none)
            self._loaded.clear()
            self._hooks.clear()
            return []
        from app.engine.generation.memory import offload_device

        offloaded = offload_device(pipe)
        # The denoiser's dtype: a UNet's, or a transformer's (Flux.1's ControlNets).
        denoiser = pipe.unet if hasattr(pipe, "unet") else pipe.transformer
        device, dtype = pipe._execution_device, denoiser.dtype
        keys = [
            (str(info.path.resolve()), str(device), str(dtype), offloaded is not None)
            for info in infos
        ]
        for key in [key for key in self._loaded if key not in keys]:
            del self._loaded[key]
            self._hooks.pop(key, None)
        nets = []
        for info, key in zip(infos, keys, strict=True):
            if key not in self._loaded:
                net = _load(info, dtype, self._configs, denoiser.config)
                if offloaded is None:
                    self._loaded[key] = net.to(device)
                else:
                    from accelerate import cpu_offload_with_hook

                    self._loaded[key], self._hooks[key] = cpu_offload_with_hook(net, offloaded)
            nets.append(self._loaded[key])
        return nets

    def retain(self, infos: Sequence[ControlNetInfo]) -> None:
        """Drop the nets that none of `infos` names: before a model load, not after it."""
        wanted = {str(info.path.resolve()) for info in infos}
        for key in [key for key in self._loaded if key[0] not in wanted]:
            del self._loaded[key]
            self._hooks.pop(key, None)

    def offload(self) -> None:
        """Low-VRAM mode: the nets back to RAM (as the stock pipelines' final offload)."""
        for hook in self._hooks.values():
            hook.offload()

    @property
    def loaded(self) -> list[str]:
        """The files of the ControlNets held now."""
        return [key[0] for key in self._loaded]

    @property
    def nets(self) -> list[Any]:
        return list(self._loaded.values())

    def clear(self) -> None:
        self._loaded.clear()
        self._hooks.clear()


def controlnet_config(architecture: Architecture, configs: Path | None = None) -> Path:
    """The config folder a single-file ControlNet of `architecture` is loaded with."""
    root = configs if configs is not None else resources_dir() / "model_configs"
    return root / f"controlnet-{architecture.value}"


def _load(
    info: ControlNetInfo, dtype: torch.dtype, configs: Path | None, denoiser: Any = None
) -> Any:
    """`denoiser`: the model's UNet's or transformer's config (a Flux.1 ControlNet file
    takes its rotary axes from it: they are not in its weights)."""
    from diffusers import ControlNetModel, ControlNetUnionModel

    own_class = info.architecture.spec.guidance.controlnet_class if info.architecture else ""
    if own_class and info.path.is_dir():  # a transformer family's (Flux.1's), by its class
        import diffusers

        return getattr(diffusers, own_class).from_pretrained(info.path, torch_dtype=dtype)
    if own_class:  # Flux.1's as one file: diffusers' keys or XLabs' own
        return _load_flux_file(info, dtype, getattr(denoiser, "axes_dims_rope", None))
    if info.path.is_dir():
        model_class = ControlNetUnionModel if info.union else ControlNetModel
        return model_class.from_pretrained(info.path, torch_dtype=dtype)
    if info.architecture is None:
        raise ControlNetNotFound(f"ControlNet {info.name!r} fits no known architecture")
    config = controlnet_config(info.architecture, configs)
    if not (config / "config.json").is_file():
        raise ControlNetNotFound(
            f"ControlNet {info.name!r} is an {info.architecture.label} file, and Easel has no "
            f"{info.architecture.label} ControlNet config to load it with ({config})"
        )
    if info.union:
        return _load_union_file(info, config, dtype)
    if info.layout == "original" and info.architecture.spec.guidance.added_embedding:
        return _load_original_added_embedding(info, config, dtype)
    # Offline: diffusers converts the original keys itself (`convert_controlnet_checkpoint`)
    # and takes the shape of the model from our shipped config, never from the hub.
    return ControlNetModel.from_single_file(
        str(info.path), config=str(config), torch_dtype=dtype, local_files_only=True
    )


def _load_flux_file(info: ControlNetInfo, dtype: torch.dtype, axes_dims_rope: Any) -> Any:
    """A Flux.1 ControlNet file as a `FluxControlNetModel` (config from its tensors' shapes,
    `flux_control_files`), loaded strictly: a tensor left out fails loudly rather than
    staying random."""
    from diffusers import FluxControlNetModel
    from safetensors.torch import load_file

    from app.engine.generation.guidance import flux_control_files as files

    state = load_file(str(info.path))
    if files.is_xlabs(list(state)):
        state = files.to_diffusers(state, lambda tensor: list(tensor.chunk(3, dim=0)))
    shapes = {key: list(tensor.shape) for key, tensor in state.items()}
    config = files.config_from_shapes(shapes, axes_dims_rope)
    with torch.device("meta"):  # no random weights drawn only to be overwritten
        net = FluxControlNetModel.from_config(config)
    # Cast as `from_pretrained(torch_dtype=...)` casts a folder's weights (none kept in fp32).
    net.load_state_dict({k: v.to(dtype) for k, v in state.items()}, strict=True, assign=True)
    return net.eval()


def _load_union_file(info: ControlNetInfo, config: Path, dtype: torch.dtype) -> Any:
    """A ControlNet Union as one file (diffusers' keys, as ComfyUI keeps xinsir's): the
    architecture's ControlNet config with the Union's own sizes read from its tensors."""
    from diffusers import ControlNetUnionModel
    from safetensors.torch import load_file

    state = load_file(str(info.path))
    types, channels = state["task_embedding"].shape
    layers = {key.split(".")[1] for key in state if key.startswith("transformer_layes.")}
    settings = {
        **ControlNetUnionModel.load_config(config), "num_control_type": int(types),
        "num_trans_channel": int(channels), "num_trans_layer": len(layers),
        "num_proj_channel": int(state["spatial_ch_projs.weight"].shape[0]),
        "num_trans_head": UNION_TRANSFORMER_HEADS,
    }  # fmt: skip
    settings.pop("_class_name", None)
    net = ControlNetUnionModel.from_config(settings)
    net.load_state_dict(state, strict=True)
    return net.to(dtype=dtype)


_ADDED_EMBEDDING = {  # the original layout's `label_emb` is the "text_time" embedding (SDXL's)
    "add_embedding.linear_1.weight": "label_emb.0.0.weight",
    "add_embedding.linear_1.bias": "label_emb.0.0.bias",
    "add_embedding.linear_2.weight": "label_emb.0.2.weight",
    "add_embedding.linear_2.bias": "label_emb.0.2.bias",
}


def _load_original_added_embedding(info: ControlNetInfo, config: Path, dtype: torch.dtype) -> Any:
    """A ControlNet file in the original layout (`control_model.*`) of a family with an added
    embedding (SDXL's "text_time"): diffusers' own converter for everything but the added
    embedding, which it drops (0.42: its `convert_controlnet_checkpoint` never maps
    `label_emb`); we map that one ourselves, and load strictly, so a key left out fails
    loudly instead of staying random."""
    from diffusers import ControlNetModel
    from diffusers.loaders.single_file_utils import convert_controlnet_checkpoint
    from safetensors.torch import load_file

    state = load_file(str(info.path))
    settings = ControlNetModel.load_config(config)
    converted = convert_controlnet_checkpoint(state, settings)
    prefix = "control_model."
    for key, original in _ADDED_EMBEDDING.items():
        if prefix + original not in state:
            raise ControlNetNotFound(f"ControlNet {info.name!r} lacks {prefix}{original}")
        converted[key] = state[prefix + original]
    net = ControlNetModel.from_config(settings)
    net.load_state_dict(converted, strict=True)
    return net.to(dtype=dtype)

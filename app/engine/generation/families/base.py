"""What the denoise loop asks of a model family, and nothing else.

A family knows its pipeline's components and drives them as its stock diffusers pipeline
does (same calls, same order, same arithmetic): that keeps our images bit-identical to
the stock ones. The loop itself only holds the family, the scheduler, the latents and the
family's named conditioning tensors, and asks the family at each point where models differ.

Written with the next families in mind: SD 3.5 (flow matching, three text encoders with
T5, a transformer instead of a UNet) brings its own scheduler setup and `predict`; Flux
(packed latents, distilled guidance as a model input, no CFG) its own `latent_shape`,
`initial_latents`, `uses_cfg`, `predict` and `decode`. Neither needs the loop to change.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import torch
from PIL import Image

from app.engine.jobs.params import GenerationParams

if TYPE_CHECKING:
    from app.engine.generation.guidance.control import ControlGuide
    from app.engine.generation.loop.inpaint import MaskedImage

# What the model is conditioned on for the whole job (prompt embeddings and the like), by
# name. A checkpoint stores these tensors as they are, so a resumed job is conditioned on
# exactly what it started with.
Conditioning = dict[str, torch.Tensor]


@dataclass(frozen=True)
class Schedule:
    """Where a job's denoising starts: its timesteps, their scheduler steps, the latents."""

    timesteps: torch.Tensor
    total_steps: int
    latents: torch.Tensor


class ModelFamily(Protocol):
    """One family of models (SD 1.x/2.x, SDXL, ...) behind the loop's one interface."""

    name: str  # stored in checkpoints: a checkpoint resumes only on its own family
    label: str  # for people: "SDXL"
    checkpoint_tensors: tuple[str, ...]  # what a checkpoint's conditioning must carry

    @property
    def device(self) -> torch.device: ...

    @property
    def dtype(self) -> torch.dtype:
        """The denoiser's dtype: restored tensors are cast to it."""
        ...

    def native_size(self) -> int:
        """The image size (pixels per side) the model was trained at."""
        ...

    def latent_shape(self, params: GenerationParams) -> tuple[int, ...]: ...

    def checkpoint_needs(self, params: GenerationParams) -> tuple[str, ...]:
        """The conditioning tensors a checkpoint of `params` must carry (inpaint adds some)."""
        ...

    def scheduler(self, params: GenerationParams) -> Any:
        """A fresh scheduler of `params.scheduler`, its timesteps set as the stock loop's."""
        ...

    def uses_cfg(self, params: GenerationParams) -> bool:
        """Whether each step runs the model twice (classifier-free guidance)."""
        ...

    def encode(self, params: GenerationParams, do_cfg: bool) -> Conditioning:
        """The prompt (A1111 weights, BREAK and long prompts included) as conditioning."""
        ...

    def encode_references(
        self, images: Sequence[bytes], do_cfg: bool, conditioning: Conditioning
    ) -> Conditioning:
        """What reference images (PNGs) add to or change in the prompt's `conditioning`
        (IP-Adapter: image embeddings; Flux.1 Redux: tokens after the prompt's); {} for none."""
        ...

    def encode_edit(
        self, params: GenerationParams, images: Sequence[bytes], do_cfg: bool
    ) -> Conditioning:
        """An edit's instruction read with its input images (PNGs, the init image first) by
        a family whose text encoder sees them (Qwen-Image-Edit: the prompts and each image's
        latents); {} where the model reads the init image in `initial_latents` (Flux.1
        Kontext). More images than the family reads are refused (submit refuses them first)."""
        ...

    def initial_latents(
        self,
        scheduler: Any,
        params: GenerationParams,
        generator: torch.Generator,
        init_image: bytes | None,
        conditioning: Conditioning,
        masked: MaskedImage | None = None,
    ) -> Schedule:
        """From noise, or (img2img) from the noised `init_image` part-way down the schedule;
        (inpaint) from `masked`, adding what its steps need to `conditioning`."""
        ...

    def resumed_schedule(self, scheduler: Any, params: GenerationParams) -> tuple[Any, int]:
        """(timesteps, total steps) of a job resumed from a checkpoint: as `initial_latents`
        chose them, without drawing any noise."""
        ...

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
        """The model's output at timestep `t` (the `index`-th), guided by CFG and by the
        job's control layers: what `scheduler.step` takes."""
        ...

    def step(
        self,
        scheduler: Any,
        noise_pred: torch.Tensor,
        t: torch.Tensor,
        latents: torch.Tensor,
        generator: torch.Generator,
        conditioning: Conditioning,
    ) -> Any:
        """The scheduler's step on the model's prediction (its output, with `prev_sample`):
        `stock_step` but where a stock loop steps otherwise (LTX-Video's conditioning)."""
        ...

    def after_step(
        self,
        scheduler: Any,
        latents: torch.Tensor,
        timesteps: torch.Tensor,
        index: int,
        conditioning: Conditioning,
    ) -> torch.Tensor:
        """The latents after step `index` (inpaint keeps the unmasked area here)."""
        ...

    def decode(self, latents: torch.Tensor, generator: torch.Generator) -> Image.Image: ...

    def finish(self, image: Image.Image, masked: MaskedImage | None) -> Image.Image:
        """The decoded image as the job's result (only masked: pasted back)."""
        ...


def stock_step(
    scheduler: Any, noise_pred: torch.Tensor, t: torch.Tensor, latents: torch.Tensor,
    generator: torch.Generator,
) -> Any:  # fmt: skip
    """`scheduler.step` as the stock loops call it: no eta (DDIM's 0), the job's generator
    for the schedulers that draw noise."""
    accepted = inspect.signature(scheduler.step).parameters
    kwargs: dict[str, Any] = {}
    if "eta" in accepted:
        kwargs["eta"] = 0.0
    if "generator" in accepted:
        kwargs["generator"] = generator
    return scheduler.step(noise_pred, t, latents, **kwargs, return_dict=True)

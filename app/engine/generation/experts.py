"""Wan 2.2 A14B's pair of experts within the device's budget.

A folder with `transformer` and `transformer_2` holds two experts of the same size (14B
each: 28 GB in bfloat16, 14 GB in fp8), and a clip runs the high-noise one until the
boundary timestep, then the low-noise one, never both in one step. The budget counts both
(`memory.pipeline_bytes`); where the whole pipeline does not fit the device's budget but the
pipeline less one expert does, the plan is "one expert at a time" (as ComfyUI users run A14B
on a 24 GB card): the low-noise expert waits in system RAM and the two change places at the
switch, once per clip (a copy of its weights, seconds against the minutes of a clip). The
expert used is the step's timestep's (the family's `_expert_at`), so a clip paused after the
switch resumes with the low-noise expert moved onto the device at its first step.

The UMT5 text encoder (umt5-xxl: 11 GB in bfloat16) is needed only to encode a job's
prompt, once: a resumed clip's prompt states are in its checkpoint. In this plan it waits in
RAM too and comes onto the device only while a prompt is encoded, with no expert there
(`encoding`): so the device holds at most the rest of the pipeline and the largest of an
expert and the text encoder (a 14 GB fp8 expert and UMT5 fit a 24 GB card, not together).

Low-VRAM mode (model CPU offload) already keeps one component at a time on the GPU, the
experts included (`WanPipeline.model_cpu_offload_seq`): no plan is made there.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from app.engine.generation.memory import module_bytes, pipeline_bytes

log = logging.getLogger(__name__)

BOTH_ON_DEVICE = "both experts on the device"
ONE_AT_A_TIME = "one expert at a time"
WAITING_ROOM = "cpu"  # where the expert not in use (and the text encoder) waits
TEXT_ENCODER = "text_encoder"
TEXT_ENCODER_NOTE = ", the text encoder off the device once the prompt is encoded"
_SWAP_ATTRIBUTE = "_easel_expert_swap"


def expert_plan(whole_bytes: int, device_bytes: int) -> str:
    """Both experts on the device when the whole pipeline (`whole_bytes`, both experts
    counted) fits `device_bytes`; else one at a time (the pipeline less one expert on the
    device: if even that does not fit, the out-of-memory retry's low-VRAM mode takes over)."""
    return BOTH_ON_DEVICE if whole_bytes <= device_bytes else ONE_AT_A_TIME


@dataclass
class ExpertSwap:
    """Keeps at most one of a pipeline's experts on `device`, the other waiting in RAM, and
    its text encoder in RAM but while a prompt is encoded (none of the experts there then);
    `on_device`: the expert on the device ("" for none); `moves` names each module as it is
    moved onto the device (for the log and the tests)."""

    experts: dict[str, Any]  # "transformer" and "transformer_2": the modules
    device: str
    text_encoder: Any = None  # the pipeline's, when it has one
    on_device: str = ""
    moves: list[str] = field(default_factory=list)

    def use(self, expert: Any) -> Any:
        """`expert` on the device, the other moved off it first (never both at once)."""
        name = next(key for key, module in self.experts.items() if module is expert)
        if name != self.on_device:
            self._clear()
            expert.to(self.device)
            self.on_device = name
            self.moves.append(name)
            log.info("expert %s moved onto %s (one expert at a time)", name, self.device)
        return expert

    @contextmanager
    def encoding(self) -> Iterator[None]:
        """The text encoder on the device while a prompt is encoded, no expert beside it;
        back in RAM after (the prompt's states are all a clip needs of it)."""
        if self.text_encoder is None:
            yield
            return
        self._clear()
        self.text_encoder.to(self.device)
        self.moves.append(TEXT_ENCODER)
        try:
            yield
        finally:
            self.text_encoder.to(WAITING_ROOM)
            _empty_device_cache()
            log.info("text encoder moved off %s: the prompt is encoded", self.device)

    def _clear(self) -> None:
        """The expert on the device (if any) back in RAM, its memory given back."""
        if self.on_device:
            self.experts[self.on_device].to(WAITING_ROOM)
            self.on_device = ""
            _empty_device_cache()

    @property
    def waiting_bytes(self) -> int:
        """The weights never on the device at once with the largest of the parts that take
        turns there (the two experts and the text encoder): not the device's to hold."""
        taking_turns = [*self.experts.values(), self.text_encoder]
        sizes = [module_bytes([part]) for part in taking_turns if part is not None]
        return sum(sizes) - max(sizes)


def experts_of(pipe: Any) -> dict[str, Any]:
    """A pipeline's two experts by name; empty when it has one transformer (or none)."""
    second = getattr(pipe, "transformer_2", None)
    if second is None or getattr(pipe, "transformer", None) is None:
        return {}
    return {"transformer": pipe.transformer, "transformer_2": second}


def place(pipe: Any, device: str, device_bytes: int | None) -> str | None:
    """Put `pipe` on `device` by its experts' plan for `device_bytes` (None: no limit); None
    for a pipeline of one transformer (all of it moves); with one expert at a time,
    everything but the experts and the text encoder, which wait in RAM for their turn."""
    import torch

    experts = experts_of(pipe)
    if not experts:
        pipe.to(device)
        return None
    whole = pipeline_bytes(pipe)
    plan = expert_plan(whole, whole if device_bytes is None else device_bytes)
    if plan == BOTH_ON_DEVICE:
        pipe.to(device)
        setattr(pipe, _SWAP_ATTRIBUTE, None)
        return plan
    swap = ExpertSwap(experts, device, text_encoder=getattr(pipe, TEXT_ENCODER, None))
    taking_turns = (*experts.values(), swap.text_encoder)
    for component in pipe.components.values():
        if isinstance(component, torch.nn.Module):
            waits = any(component is part for part in taking_turns)
            component.to(WAITING_ROOM if waits else device)
    setattr(pipe, _SWAP_ATTRIBUTE, swap)
    log.info("%s on %s: the pair does not fit its budget", plan, device)
    return plan


def swap_of(pipe: Any) -> ExpertSwap | None:
    """The pipeline's swap when it runs one expert at a time, else None."""
    swap: ExpertSwap | None = getattr(pipe, _SWAP_ATTRIBUTE, None)
    return swap


def plan_of(pipe: Any) -> str | None:
    """The plan `place` made for `pipe` (None: a pipeline of one transformer, or not placed
    by a plan: low-VRAM mode)."""
    if not experts_of(pipe) or not hasattr(pipe, _SWAP_ATTRIBUTE):
        return None
    return ONE_AT_A_TIME if swap_of(pipe) is not None else BOTH_ON_DEVICE


def note(pipe: Any) -> str:
    """For the job's timeline: why a clip runs slower at its switch ("" otherwise)."""
    swap = swap_of(pipe)
    if swap is None:
        return ""
    encoder = "" if swap.text_encoder is None else TEXT_ENCODER_NOTE
    return f"{ONE_AT_A_TIME}{encoder} (the pair does not fit this device's memory budget)"


@contextmanager
def prompt_encoding(pipe: Any) -> Iterator[None]:
    """Around a prompt's encoding: one expert at a time, the text encoder comes onto the
    device for it alone (`ExpertSwap.encoding`); otherwise nothing moves."""
    swap = swap_of(pipe)
    if swap is None:
        yield
        return
    with swap.encoding():
        yield


def expert_in_use(pipe: Any, expert: Any) -> Any:
    """`expert`, on the device: moved there (and the other off) when one at a time."""
    swap = swap_of(pipe)
    return expert if swap is None else swap.use(expert)


def waiting_bytes(pipe: Any) -> int:
    """The weights off the device while the pipeline is on it (an expert waiting)."""
    swap = swap_of(pipe)
    return 0 if swap is None else swap.waiting_bytes


def _empty_device_cache() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()

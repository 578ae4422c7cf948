"""Compiled models on request (a job's `compile`): the denoiser's repeated blocks through
`torch.compile`, once per loaded model (the pipeline cache keeps one per model, device and
dtype), with inductor's compiled code kept in the data folder for later workers.

Regional compilation (diffusers' `compile_repeated_blocks`: each transformer block class
compiled once and reused by every block of it) compiles in seconds where the whole model
takes minutes, for nearly the same speed. Models without `_repeated_blocks` (SD 3.5's
transformer) have their `transformer_blocks` compiled the same way. `torch.compile` is
lazy: the blocks compile during the first step of the first job that asks, whose timeline
then says how long that took ("compiling the model… (once) took 41.2 s"; `history.eta`
counts it as load time). Inductor's FX graph cache lives in `TORCHINDUCTOR_CACHE_DIR`,
set here to `compile-cache` in the data folder unless already set: a later worker (or
the next start) still traces, but reuses the compiled kernels instead of building them.

A compile failure (no C compiler, an operation dynamo cannot trace, ...) never fails the
job: the runner catches it (`is_compile_failure`), takes the compiled blocks off for good
on this loaded model (`give_up`) and runs the job again without, with one sentence in its
timeline. A job that does not ask runs its model eagerly even when an earlier job compiled
it: the compiled blocks are put aside, not dropped, and put back for the next that asks.
"""

from __future__ import annotations

import logging
import os
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch._dynamo.exc import TorchDynamoException

from app.engine.paths import data_dir

log = logging.getLogger(__name__)

CACHE_FOLDER = "compile-cache"  # under the data folder: inductor's cache, shared by workers
CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"
# `torch.compile`'s backend; tests put a failing one here to prove the fallback.
BACKEND: Any = "inductor"
COMPILING = "compiling the model… (once)"
BLOCK_LISTS = ("transformer_blocks", "single_transformer_blocks")  # without _repeated_blocks


@dataclass
class _Compiled:
    """What compiling did to one denoiser: its compiled regions (module -> compiled call),
    how long its first compiled call took, and whether compiling failed."""

    regions: dict[torch.nn.Module, Any] = field(default_factory=dict)
    first_call_s: float | None = None
    reported: bool = False
    failed: str = ""
    hooks: list[Any] = field(default_factory=list)


# By denoiser: a model dropped from the pipeline cache takes its entry with it.
_STATES: weakref.WeakKeyDictionary[torch.nn.Module, _Compiled] = weakref.WeakKeyDictionary()


def denoiser_of(pipe: Any) -> torch.nn.Module | None:
    """The pipeline's transformer or UNet: the part that runs at every step."""
    for name in ("transformer", "unet"):
        module = getattr(pipe, name, None)
        if isinstance(module, torch.nn.Module):
            return module
    return None


def prepare(pipe: Any, wanted: bool) -> None:
    """`pipe`'s denoiser compiled if `wanted` (compiled now on its first job, lazily: the
    work happens at its first call), else eager. Nothing if it has no denoiser, or if
    compiling it failed before (it stays eager)."""
    denoiser = denoiser_of(pipe)
    if denoiser is None:
        return
    state = _STATES.get(denoiser)
    if not wanted or (state is not None and state.failed):
        if state is not None:
            _attach(state, compiled=False)
        return
    if state is None:
        state = _STATES[denoiser] = _compile(denoiser)
    _attach(state, compiled=True)


def _compile(denoiser: torch.nn.Module) -> _Compiled:
    os.environ.setdefault(CACHE_ENV, str(compile_cache_folder()))
    regions = _regions(denoiser)
    for region in regions:
        region.compile(backend=BACKEND)
    state = _Compiled({region: region._compiled_call_impl for region in regions})
    _time_first_call(denoiser, state)
    log.info("compiling %d blocks of %s", len(regions), type(denoiser).__name__)
    return state


def compile_cache_folder() -> Path:
    return data_dir() / CACHE_FOLDER


def _regions(denoiser: torch.nn.Module) -> list[torch.nn.Module]:
    """The modules to compile: the repeated blocks diffusers names, else the block lists,
    else the whole denoiser."""
    names = set(getattr(denoiser, "_repeated_blocks", None) or ())
    if names:
        found = [m for m in denoiser.modules() if type(m).__name__ in names]
        if found:
            return found
    listed = [block for name in BLOCK_LISTS for block in getattr(denoiser, name, ())]
    return listed or [denoiser]


def _attach(state: _Compiled, *, compiled: bool) -> None:
    for region, call in state.regions.items():
        region._compiled_call_impl = call if compiled else None


def _time_first_call(denoiser: torch.nn.Module, state: _Compiled) -> None:
    """Time the denoiser's first call after compiling (the compile happens in it)."""
    started: list[float] = []

    def before(_module: Any, _args: Any) -> None:
        started.append(time.perf_counter())

    def after(_module: Any, _args: Any, _output: Any) -> None:
        state.first_call_s = time.perf_counter() - started[0]
        for hook in state.hooks:
            hook.remove()

    state.hooks = [denoiser.register_forward_pre_hook(before),
                   denoiser.register_forward_hook(after)]  # fmt: skip


def is_compile_failure(error: BaseException) -> bool:
    """Whether `error` is torch.compile's (dynamo's or a backend's, inductor's included)."""
    return isinstance(error, TorchDynamoException)


def give_up(pipe: Any, error: BaseException) -> str:
    """Take the compiled blocks off `pipe`'s denoiser for good (later jobs that ask run it
    eagerly too: no second attempt at what failed); the sentence for the job's timeline."""
    reason = _reason(error)
    log.warning("compiling the model failed, running it eagerly: %s", error)
    denoiser = denoiser_of(pipe)
    state = _STATES.get(denoiser) if denoiser is not None else None
    if state is not None:
        _attach(state, compiled=False)
        for hook in state.hooks:
            hook.remove()
        state.failed = reason
    torch._dynamo.reset()  # drop what was traced (and its guards) with it
    return f"the model could not be compiled ({reason[:200]}): it ran without compiling"


def _reason(error: BaseException) -> str:
    """The root of a compile failure, in a line ("RuntimeError: no C compiler here"): dynamo
    wraps a backend's error in a long message of its own."""
    root = error
    while (cause := getattr(root, "inner_exception", None) or root.__cause__) is not None:
        root = cause
    lines = str(root).strip().splitlines()
    return f"{type(root).__name__}: {lines[0]}" if lines else type(root).__name__


def note(pipe: Any) -> str:
    """The timeline's "compiling the model… (once) took 41.2 s", once: after the first job
    that compiled this denoiser; "" otherwise."""
    denoiser = denoiser_of(pipe)
    state = _STATES.get(denoiser) if denoiser is not None else None
    if state is None or state.first_call_s is None or state.reported or state.failed:
        return ""
    state.reported = True
    return f"{COMPILING} took {state.first_call_s:.1f} s"


def is_compiled(pipe: Any) -> bool:
    """Whether `pipe`'s denoiser runs compiled now."""
    denoiser = denoiser_of(pipe)
    state = _STATES.get(denoiser) if denoiser is not None else None
    return (
        state is not None
        and not state.failed
        and any(region._compiled_call_impl is not None for region in state.regions)
    )

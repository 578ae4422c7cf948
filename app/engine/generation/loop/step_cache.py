"""Step caching (a job's "speed"): diffusers' First Block Cache on the job's transformer,
its state kept in the checkpoint so that a paused job resumes to the same image.

The hook (`diffusers.hooks.apply_first_block_cache`, what `transformer.enable_cache(
FirstBlockCacheConfig(threshold))` applies) runs the first transformer block at every step
and compares its residual with the one of the last fully computed step: when the relative
mean absolute change is at most the threshold, it skips the other blocks and adds the
residual they made then. So the cache carries state between steps: per cache context
("cond", and "uncond" for CFG) an `FBCSharedBlockState` holding the first block's output
and residual of the last full step and the other blocks' residuals. A stock pipeline
starts a call with that state empty (`maybe_free_model_hooks` resets it after each call),
as `prepare` does here; `saved` and `load` carry it through a checkpoint exactly (the
tensors as they are, the decision flag as a bool), so the resumed steps decide and add
exactly what the uninterrupted run would.

Where the hook works as diffusers 0.42.1 ships it: Flux.1, whose family calls the
transformer inside `transformer.cache_context("cond")` as `FluxPipeline` does; Qwen-Image,
whose family names the prompt's call "cond" and the negative prompt's "uncond" as
`QwenImagePipeline` does (true CFG: two states, both in the checkpoint), and so its edit
families, as `QwenImageEditPipeline` and `QwenImageEditPlusPipeline` do; Wan 2.1, likewise
"cond" and "uncond" under CFG as `WanPipeline` does (on `transformer` only, as the stock
`pipe.transformer.enable_cache`: a Wan 2.2 folder's low-noise expert runs uncached);
LTX-Video, whose family calls the transformer on the batch of negative and prompt in the
one context "cond_uncond", as `LTXPipeline` and `LTXImageToVideoPipeline` do. Not
(`request_checks` refuses a speed there; tests/engine/generation/test_step_cache.py shows
each stock pipeline failing): Flux.2 Klein, where the stock pipeline with the hook fails
(its last block returns one tensor, its first a pair: the hook subtracts a list from a
tensor); SD 3.5, whose transformer has no `enable_cache` and whose stock pipeline names
no cache context, so the hook applied by hand raises; Flux.1 Kontext, whose transformer is
Flux.1's but whose `FluxKontextPipeline` names no cache context, so its first call raises;
Chroma, whose `enable_cache` itself raises (diffusers registers no block metadata for
`ChromaTransformerBlock`, and `ChromaPipeline` names no cache context either); Z-Image,
likewise without `enable_cache`, whose blocks name their input `x` where the hook asks for
`hidden_states` (a loop of ours could work around each, but there would be no stock run to
equal); the UNet families (no First Block Cache hook for UNets).
"""

from __future__ import annotations

from typing import Any

import torch
from diffusers.hooks import FirstBlockCacheConfig, HookRegistry
from diffusers.hooks.first_block_cache import _FBC_LEADER_BLOCK_HOOK, FBCSharedBlockState

from app.engine.generation.errors import CheckpointCorrupt, CheckpointMismatch
from app.engine.generation.files.registry import families
from app.engine.jobs.params import GenerationParams, InvalidParameters

# What a checkpoint keeps of each context's `FBCSharedBlockState` (all of its attributes).
_STATE_FIELDS = ("head_block_output", "head_block_residual", "tail_block_residuals")

CacheState = dict[str, dict[str, Any]]  # by cache context: the state's fields


def prepare(pipe: Any, family_name: str, params: GenerationParams) -> None:
    """`pipe`'s transformer with the job's cache (or none), its state empty: as a stock
    pipeline starts a call after `enable_cache` (or `disable_cache`). The pipeline is
    shared by the worker's jobs, so a job without a speed takes the hook off again."""
    transformer = getattr(pipe, "transformer", None)
    threshold = params.cache_threshold
    if transformer is None or not hasattr(transformer, "enable_cache"):
        if threshold:
            raise InvalidParameters("step caching works on transformer models only")
        return
    config = getattr(transformer, "_cache_config", None)
    if threshold and family_name not in _cached_families():
        raise InvalidParameters(f"step caching does not work with {family_name} models yet")
    wanted = FirstBlockCacheConfig(threshold=threshold) if threshold else None
    if config != wanted:
        if config is not None:
            transformer.disable_cache()
        if wanted is not None:
            transformer.enable_cache(wanted)
    if wanted is not None:
        transformer._reset_stateful_cache()


def saved(pipe: Any) -> CacheState:
    """The cache's state between steps, by context, for a checkpoint ({} when uncached)."""
    manager = _state_manager(pipe)
    if manager is None:
        return {}
    return {
        name: {
            **{field: _copied(getattr(state, field)) for field in _STATE_FIELDS},
            "should_compute": bool(state.should_compute),
        }
        for name, state in manager._state_cache.items()
    }


def load(pipe: Any, cache: CacheState, index: int) -> None:
    """Put a checkpoint's cache state back (after `prepare`), on the pipeline's device.
    A cached job's checkpoint after its first step must carry some: else it would resume
    as if the cache were empty, to another image."""
    manager = _state_manager(pipe)
    if manager is None:
        if cache:
            raise CheckpointMismatch("checkpoint carries a step cache; this job runs uncached")
        return
    if not cache and index > 0:
        raise CheckpointMismatch("checkpoint lacks the step cache's state of this cached job")
    # Where the transformer computes: with low-VRAM offloading its weights rest on the CPU
    # between calls, and the hook's residuals live where its outputs are made.
    device = pipe._execution_device
    states = {}
    for name, fields in cache.items():
        state = FBCSharedBlockState()
        try:
            for field in _STATE_FIELDS:
                setattr(state, field, _on(fields[field], device))
            state.should_compute = bool(fields["should_compute"])
        except (KeyError, TypeError) as error:
            raise CheckpointCorrupt(f"checkpoint has a damaged step cache: {error}") from error
        states[name] = state
    manager._state_cache = states


def _state_manager(pipe: Any) -> Any:
    """The First Block Cache's `StateManager` on `pipe`'s transformer, or None: the head
    block's hook holds it, shared with every other block's."""
    transformer = getattr(pipe, "transformer", None)
    if transformer is None or getattr(transformer, "_cache_config", None) is None:
        return None
    for module in transformer.modules():
        registry = getattr(module, "_diffusers_hook", None)
        if isinstance(registry, HookRegistry) and (
            hook := registry.get_hook(_FBC_LEADER_BLOCK_HOOK)
        ):
            return getattr(hook, "state_manager", None)
    return None


def _copied(value: Any) -> Any:
    """Tensors (in lists and tuples, None kept) detached, as the checkpoint stores them."""
    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, list | tuple):
        return type(value)(_copied(item) for item in value)
    return value


def _on(value: Any, device: torch.device) -> Any:
    """A stored value back as the hook holds it: tensors on `device` (dtype kept), tuples
    as tuples (a checkpoint may turn them into lists; the hook only indexes them)."""
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, list | tuple):
        return type(value)(_on(item, device) for item in value)
    if value is None:
        return None
    raise TypeError(f"unexpected {type(value).__name__} in the step cache")


def _cached_families() -> set[str]:
    """The `ModelFamily.name`s whose declaration says the hook runs there as in stock's."""
    return {spec.checkpoint_family for spec in families() if spec.step_cache}

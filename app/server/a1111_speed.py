"""Step caching ("speed") as A1111-style clients ask for it: SD.Next's settings in
`override_settings` and Forge's First Block Cache script in `alwayson_scripts`.

Easel's step caching is diffusers' First Block Cache, ported from ParaAttention: the other
blocks are skipped while the first block's residual changed, relative to its mean
magnitude, by at most the threshold since the last full step. What the clients call it:
- SD.Next (modules/ui_definitions.py, "Pipeline Modifiers"): `para_cache_enabled` and
  `para_diff_threshold` run ParaAttention's own First Block Cache
  (`apply_cache_on_pipe(residual_diff_threshold=...)`): the same measure, so the same
  threshold. Its other caches (`teacache_enabled`, `faster_cache_enabled`, `pab_enabled`,
  `cache_dit_enabled`; with `cuda_compile`, DeepCache as `cuda_compile_backend`
  "deep-cache" and the "pruna" backend's `pruna_cachers`) are other methods: refused when
  switched on.
- Forge: no built-in cache; its First Block Cache is the "First Block Cache / TeaCache"
  extension (DenOfEquity/sd-forge-blockcache; args enabled, method, threshold, uncached
  starting steps, max consecutive cached, do not cache the last step). Its First Block
  Cache is taken with its threshold; it measures the first block's output (summed over the
  skipped steps) where Easel measures the residual, so a threshold skips somewhat other
  steps. Its TeaCache, and settings Easel's cache has not, are refused.
- Forge Neo: "First Block Cache Integrated" (always with a warm-up and a limit of
  consecutive cached steps, which Easel's cache has not) and "Spectrum Integrated" (a
  forecast of the skipped steps): refused when enabled.
A script is found by its title, as A1111 finds it (case aside); its args are positional,
the missing ones at the script's defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.engine.jobs.params import MAX_SPEED_THRESHOLD, SPEED_FAST, SPEED_OFF
from app.server.a1111_fields import UnsupportedRequest, compile_asked


@dataclass(frozen=True)
class Speed:
    """A request's step caching, as `GenerationParams` takes it."""

    speed: str = SPEED_OFF
    threshold: float = 0.0  # 0: the speed setting's own


OFF = Speed()
SDNEXT_CACHE = "para_cache_enabled"
SDNEXT_THRESHOLD = "para_diff_threshold"
# SD.Next's other step caches, by setting: each is another method than Easel's.
SDNEXT_OTHER_CACHES = {
    "teacache_enabled": "TeaCache",
    "faster_cache_enabled": "FasterCache",
    "pab_enabled": "Pyramid Attention Broadcast",
    "cache_dit_enabled": "Cache-DiT",
}
# SD.Next's caches that run as a compile backend, with `cuda_compile`: DeepCache (UNets), and
# Pruna's cachers ("fastercache", "deepcache", "fora", "pab") under the "pruna" backend.
BACKEND = "cuda_compile_backend"
DEEPCACHE_BACKEND, PRUNA_BACKEND, PRUNA_CACHERS = "deep-cache", "pruna", "pruna_cachers"

FORGE_CACHE = "First Block Cache / TeaCache"  # the extension's title
FIRST_BLOCK_CACHE = "First Block Cache"
# The extension's args after enabled: method, threshold, uncached starting steps, max
# consecutive cached, do not cache the last step; its defaults.
FORGE_DEFAULTS = (FIRST_BLOCK_CACHE, 0.1, 1, 0, False)
# Forge Neo's built-in caches, by title: why each is refused when enabled.
NEO_CACHES = {
    "First Block Cache Integrated": "Easel's First Block Cache has no warm-up or limit of "
    f"consecutive cached steps (First Block Cache Integrated): send {FORGE_CACHE!r}'s "
    f"First Block Cache or override_settings {SDNEXT_CACHE} instead",
    "Spectrum Integrated": "Easel's step caching is First Block Cache, not Spectrum's "
    "forecast of the skipped steps (Spectrum Integrated)",
}
SPEED_SCRIPTS = {title.lower() for title in (FORGE_CACHE, *NEO_CACHES)}


def speed_asked(settings: Mapping[str, Any], scripts: Mapping[str, Any]) -> Speed:
    """The step caching a request's `override_settings` or `alwayson_scripts` asks for
    (at most one of them); `UnsupportedRequest` for a cache Easel has not."""
    asked = {
        source: speed
        for source, speed in (
            (SDNEXT_CACHE, _sdnext_speed(settings)),
            (FORGE_CACHE, _forge_speed(scripts)),
        )
        if speed != OFF
    }
    if len(asked) > 1:
        raise UnsupportedRequest(
            f"step caching is asked twice ({' and '.join(asked)}): send one of them"
        )
    return next(iter(asked.values()), OFF)


def without_speed_scripts(scripts: Mapping[str, Any]) -> dict[str, Any]:
    """`alwayson_scripts` less the step caching scripts (`speed_asked` reads those)."""
    return {name: args for name, args in scripts.items() if name.lower() not in SPEED_SCRIPTS}


def _sdnext_speed(settings: Mapping[str, Any]) -> Speed:
    for key, method in SDNEXT_OTHER_CACHES.items():
        if settings.get(key) not in (None, False):
            raise UnsupportedRequest(
                f"Easel's step caching is First Block Cache, not {method} ({key}): "
                f"send {SDNEXT_CACHE} instead"
            )
    _check_compile_backend(settings)
    enabled = settings.get(SDNEXT_CACHE, False)
    if not isinstance(enabled, bool):
        raise UnsupportedRequest(f"{SDNEXT_CACHE} must be true or false")
    if not enabled:
        return OFF
    return _first_block_cache(settings.get(SDNEXT_THRESHOLD), SDNEXT_THRESHOLD)


def _check_compile_backend(settings: Mapping[str, Any]) -> None:
    backend = settings.get(BACKEND)
    if backend not in (DEEPCACHE_BACKEND, PRUNA_BACKEND) or not compile_asked(settings):
        return
    if backend == DEEPCACHE_BACKEND:
        raise UnsupportedRequest(
            f"Easel has no DeepCache ({BACKEND} {backend}); its step caching is First Block "
            f"Cache ({SDNEXT_CACHE}), for transformer models"
        )
    if cachers := settings.get(PRUNA_CACHERS):
        raise UnsupportedRequest(
            f"Easel has none of Pruna's cachers ({PRUNA_CACHERS} {cachers!r}); its step caching "
            f"is First Block Cache ({SDNEXT_CACHE})"
        )


def _forge_speed(scripts: Mapping[str, Any]) -> Speed:
    by_title = {name.lower(): script for name, script in scripts.items()}
    for title, refusal in NEO_CACHES.items():
        if title.lower() in by_title and _args(title, by_title[title.lower()])[:1] == [True]:
            raise UnsupportedRequest(refusal)
    args = _args(FORGE_CACHE, by_title.get(FORGE_CACHE.lower(), {}))
    if args[:1] != [True]:
        return OFF
    settings = (*args[1:], *FORGE_DEFAULTS[len(args) - 1 :])
    method, threshold, uncached, most_cached, no_last = settings[:5]
    if method != FIRST_BLOCK_CACHE:
        raise UnsupportedRequest(
            f"Easel's step caching is First Block Cache, not {method} ({FORGE_CACHE})"
        )
    if (uncached, most_cached, no_last) != FORGE_DEFAULTS[2:]:
        raise UnsupportedRequest(
            f"Easel's First Block Cache may skip any step after the first ({FORGE_CACHE}: "
            "send 1 uncached starting step, 0 max consecutive cached, last step cached)"
        )
    return _first_block_cache(threshold, f"{FORGE_CACHE}'s threshold")


def _args(title: str, script: Any) -> list[Any]:
    args = script.get("args", []) if isinstance(script, dict) else None
    if not isinstance(args, list):
        raise UnsupportedRequest(f"alwayson_scripts' {title!r} needs its settings in a list, args")
    return args


def _first_block_cache(threshold: object, name: str) -> Speed:
    """Speed fast at the client's threshold (Easel's own when it sends none); a threshold
    of 0 caches nothing, as ParaAttention's."""
    if threshold is None:
        return Speed(SPEED_FAST)
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise UnsupportedRequest(f"{name} must be a number")
    if not 0 <= threshold <= MAX_SPEED_THRESHOLD:
        raise UnsupportedRequest(f"{name} must be between 0 and {MAX_SPEED_THRESHOLD:g}")
    return Speed(SPEED_FAST, float(threshold)) if threshold else OFF

"""Sets this process's wall clock off by `EASEL_CHAOS_CLOCK_SKEW_S` seconds: a machine whose
clock is wrong, for the chaos benchmark's `skew` fault.

Python imports `sitecustomize` at start-up from `sys.path`, so with this folder on
PYTHONPATH every process of a skewed machine is skewed, including the workers a headless
supervisor spawns (spawn starts fresh interpreters; they inherit the environment). Only the
wall clock moves (`time.time`, `time.time_ns`, which is all Easel reads it by); monotonic
time stays true, as on a real machine whose clock was set wrong.

libfaketime did this before, but under Python 3.11 it cannot be used for a whole worker:
with `FAKETIME_DONT_FAKE_MONOTONIC=1` every `time.sleep` fails (EINVAL from the absolute
`clock_nanosleep`), and without it a `threading.Event.wait` waits for the offset itself
(its deadline is on the faked monotonic clock, the kernel's wait on the true one).
"""

from __future__ import annotations

import os
import time

_SKEW_S = float(os.environ.get("EASEL_CHAOS_CLOCK_SKEW_S") or 0.0)

if _SKEW_S:
    _true_time, _true_time_ns = time.time, time.time_ns
    _skew_ns = round(_SKEW_S * 1e9)

    def _skewed_time() -> float:
        return _true_time() + _SKEW_S

    def _skewed_time_ns() -> int:
        return _true_time_ns() + _skew_ns

    time.time = _skewed_time
    time.time_ns = _skewed_time_ns

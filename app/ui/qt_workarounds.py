"""Guards against known bugs of the Qt binding, applied once when `app.ui` is imported.

PySide6/shiboken6 6.12.0 (the abi3 wheel) returns `None` from every void C++ call without
taking a reference to it, and on some paths does the same with `True`. Python 3.12+ does
not mind (those objects are immortal there), but on 3.11 each call lowers the reference
count by one, and after some 30,000 calls (a minute of painting) the interpreter aborts
with "Fatal Python error: none_dealloc" (or bool_dealloc). The guard gives these
singletons a reference count they can never run out of, which is what 3.12 does anyway.
It checks for the bug first, so it turns itself off on a fixed binding.
"""

from __future__ import annotations

import ctypes
import logging
import sys

from PySide6.QtCore import QObject

log = logging.getLogger(__name__)

_HEADROOM = 1 << 40  # a trillion leaked references: centuries of painting


def leaks_none_references() -> bool:
    probe = QObject()
    before = sys.getrefcount(None)
    for _ in range(10):
        probe.setObjectName("probe")  # a void C++ method
    return sys.getrefcount(None) < before


def guard_none_refcount() -> bool:
    """Make None, True and False immortal if the binding leaks them; True if it did."""
    if sys.version_info >= (3, 12) or sys.implementation.name != "cpython":
        return False
    if not leaks_none_references():
        return False
    for singleton in (None, True, False):
        # ob_refcnt is the first field of every CPython object; the GIL is held here.
        ctypes.c_ssize_t.from_address(id(singleton)).value += _HEADROOM
    log.info("applied the None/True/False reference guard for this PySide6 build")
    return True

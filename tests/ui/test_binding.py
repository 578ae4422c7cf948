"""The installed Qt binding keeps Python's reference counts straight (why PySide6 is pinned).

PySide6 6.12.0 returned `None` from void C++ calls without taking a reference to it; on
Python 3.11 (where None is not immortal) the count ran down and the interpreter aborted
with "none_dealloc" after a minute of painting. pyproject pins a release without the bug;
this test fails if an upgrade brings it back.
"""

from __future__ import annotations

import sys

import pytest
from PySide6.QtCore import QObject, QTimer

CALLS = 1000


@pytest.mark.parametrize("singleton", [None, True, False], ids=repr)
def test_void_calls_do_not_drop_references_to_singletons(singleton: object) -> None:
    probe, timer = QObject(), QTimer()
    before = sys.getrefcount(singleton)
    for _ in range(CALLS):
        probe.setObjectName("probe")  # void C++ methods: each returns None
        timer.stop()
        probe.blockSignals(False)  # returns a bool
    assert sys.getrefcount(singleton) - before == 0

"""Rolling checkpoints written beside the denoising loop, at most one at a time.

The loop hands over a detached copy of its state (`detached_copy`: a few small tensors)
and goes on; serialising, hashing, writing, fsync and rename happen on the saver's own
thread, started once per run and waiting for work in between. A thread started for each
save cost the loop that thread's start: `Thread.start` waits until the new thread runs,
and the new thread went straight into `torch.save`, whose pickling holds the GIL, so the
loop got the GIL back only once the serialising was done or the interpreter's switch
interval (5 ms) ran out: 3-6 ms of the loop's time per save on the benchmark's clip,
about as long as the whole save, fsyncs included (measured, issue 38). A thread already
waiting is woken instead; the loop's part of a save is its copy (0.1 ms).

`last_save_s` is a save's whole length, from the moment the loop asked for it to the
rename: the copy, the wait for the saver's thread, and every part of the saving. It is
one measure of its cost. The other is the loop's own (`LoopLoss`): on a CPU the saver's
thread competes with the loop for the GIL and the cores, and the steps that ran while a
save was in flight, and the one right after it, can come out slower than the typical
step by more than the save's length (a tiny clip's 1.7 ms save cost its loop 3 ms on a
busy 2-core machine; issue 38). `cost_s`, the larger of the two, is what
`workers.checkpoint_pacing` paces by, so its bound holds either way.
The payload goes from torch's buffer to the file and the hash without a copy
(`checkpoint.save_checkpoint`): copying a clip's tens of MB held the GIL.
"""

from __future__ import annotations

import logging
import statistics
import threading
import time
from collections import deque
from pathlib import Path

from app.engine.generation.loop.checkpoint import Checkpoint, detached_copy, save_checkpoint

log = logging.getLogger(__name__)

# A step is "typical" by the median of this many recent steps no save touched; fewer than
# `_MIN_TYPICAL` known (a save at the run's first steps): that save's loss is not judged.
_TYPICAL_STEPS = 9
_MIN_TYPICAL = 3


class LoopLoss:
    """What the last save cost the loop, from the loop's own step lengths: how much longer
    than the typical step were the steps a save was in flight in, and the one after it
    (what a save leaves behind: caches, freed memory). Noise on a busy machine only adds
    (a faster step is not counted): it can make the interval longer, never the cost
    look smaller."""

    def __init__(self) -> None:
        self._untouched: deque[float] = deque(maxlen=_TYPICAL_STEPS)  # steps no save touched
        self._lost_s = 0.0  # so far, for the save being counted
        self._counting = False  # a save touched the last step: the next one counts too
        self.last_s = 0.0  # the last save's, once its steps are all counted

    def add(self, step_s: float, *, saving: bool) -> None:
        """One step's length; `saving`: a save was in flight at some moment of it."""
        if not saving and not self._counting:
            self._untouched.append(step_s)
            return
        if len(self._untouched) >= _MIN_TYPICAL:
            self._lost_s += max(0.0, step_s - statistics.median(self._untouched))
        if saving:
            self._counting = True
            return
        self.last_s, self._lost_s, self._counting = self._lost_s, 0.0, False


class RollingSaver:
    """Writes rolling checkpoints to `path` on a thread of its own, one at a time.

    A save asked for while one is in flight is skipped, never queued. Leaving the `with`
    waits for the save in flight and ends the thread, so nothing is written after the run
    returns (a deleted checkpoint stays deleted).
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._changed = threading.Condition()  # guards the three fields below
        self._pending: tuple[Checkpoint, float] | None = None  # the copy, and when asked
        self._busy = False  # a save handed over and not yet finished
        self._closing = False
        self._thread: threading.Thread | None = None
        self.last_save_s = 0.0  # how long the last save took, from the ask to the rename
        self._loop_loss = LoopLoss()  # on the loop's thread only, as the two fields below
        self._step_ended_at: float | None = None
        self._touched = False  # a save was in flight at some moment since that step ended

    @property
    def busy(self) -> bool:
        return self._busy

    @property
    def cost_s(self) -> float:
        """What the last save cost the run: its length or the loop's loss, the larger."""
        return max(self.last_save_s, self._loop_loss.last_s)

    def step_ended(self, now: float) -> None:
        """On the loop's thread, at each step's end (`time.monotonic`): its length, for
        the loop's loss (`LoopLoss`)."""
        busy = self._busy
        if self._step_ended_at is not None:
            self._loop_loss.add(now - self._step_ended_at, saving=self._touched or busy)
        self._step_ended_at, self._touched = now, busy

    def __enter__(self) -> RollingSaver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.wait()
        with self._changed:
            self._closing = True
            self._changed.notify_all()
        if self._thread is not None:
            self._thread.join()

    def save_soon(self, checkpoint: Checkpoint, asked_at: float | None = None) -> None:
        """Save `checkpoint` in the background unless a save is in flight. `asked_at`
        (`time.monotonic`): when the loop began on it (its snapshot), counted in the save."""
        if self._busy:
            return
        asked = time.monotonic() if asked_at is None else asked_at
        copy = detached_copy(checkpoint)
        self._start_thread()
        with self._changed:
            self._pending, self._busy = (copy, asked), True
            self._changed.notify_all()
        self._touched = True

    def wait(self) -> None:
        """Until the save in flight (if any) is written or given up."""
        with self._changed:
            while self._busy:
                self._changed.wait()

    def _start_thread(self) -> None:
        """Started at the first save, so a run that saves nothing starts no thread; and
        before the first save is handed over, so the new thread waits (without the GIL)
        instead of serialising while `Thread.start` waits for it to run."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._thread = threading.Thread(target=self._serve, name="rolling-checkpoint", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while (work := self._next()) is not None:
            try:
                self._save(*work)
            finally:
                with self._changed:
                    self._busy = False
                    self._changed.notify_all()

    def _next(self) -> tuple[Checkpoint, float] | None:
        with self._changed:
            while self._pending is None and not self._closing:
                self._changed.wait()
            work, self._pending = self._pending, None
            return work

    def _save(self, checkpoint: Checkpoint, asked: float) -> None:
        try:
            save_checkpoint(self._path, checkpoint)
        except (OSError, RuntimeError) as error:  # a full disk costs progress, never the job
            log.warning("rolling checkpoint %s not saved: %s", self._path, error)
            return
        except Exception:  # a bug: said, and the thread goes on serving the run
            log.exception("rolling checkpoint %s not saved", self._path)
            return
        self.last_save_s = time.monotonic() - asked

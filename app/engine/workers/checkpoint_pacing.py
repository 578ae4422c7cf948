"""How often a run takes a rolling checkpoint: the asked interval, stretched so that
checkpoints cost at most `MAX_CHECKPOINT_SHARE` of the run.

A save's cost is its whole length as the rolling saver measures it
(`StepProgress.last_save_s`, `loop.rolling_saver`): from the moment the loop asked for it
(its snapshot of the state) to the rename, so the loop's copy, the hand-over to the
saver's thread, and the serialising, hashing, writing and both fsyncs (the file's and
its folder's) on that thread. That bounds what the save costs the run by construction:
the loop cannot lose more of its time to a save than the time the save was in flight,
whether it waited for the GIL, for a core (a CPU run shares both with the saver's
thread) or not at all (a GPU's steps go on meanwhile). Once per run, not per
checkpoint, and not counted: the saver's thread start at the first save (under 1 ms) and
removing the last checkpoint when the run finishes (a few ms, an unlink); on a database
other machines share, the heartbeat thread's copy of the file into it, which only moves
the ask earlier (`JobRun._copy_lag_s`).

Measured on the benchmark's 33-frame 128x128 clip on a busy 2-core CPU (issue 38): a
save takes 3-20 ms from ask to rename, of which the loop itself spends 0.1-0.3 ms (its
copy) and loses 0-5 ms to the saver's thread competing for the GIL and the cores; so at
1 s the bound is 2% and the real cost well under 1%. Small images save in milliseconds
and keep the asked interval (10 s by default); a clip's latents take longer: an 81-frame
480p Wan 2.1 clip's 42 MB save, 0.3 s, stretches it to 16 s. Never past
`MAX_STRETCHED_INTERVAL_S`, so a crash loses at most that much work (unless the user
asked for a longer interval).
"""

from __future__ import annotations

MAX_CHECKPOINT_SHARE = 0.02  # of the run's time, at most, spent on rolling checkpoints
MAX_STRETCHED_INTERVAL_S = 300.0  # five minutes of work lost to a crash, at most


def paced_interval_s(asked_s: float, last_save_s: float) -> float:
    """The interval between rolling checkpoints: `asked_s` (0: none), or longer when a
    save of `last_save_s` would cost more than `MAX_CHECKPOINT_SHARE` of it."""
    if asked_s <= 0:
        return 0.0
    within_share_s = last_save_s / MAX_CHECKPOINT_SHARE
    return max(asked_s, min(within_share_s, MAX_STRETCHED_INTERVAL_S))

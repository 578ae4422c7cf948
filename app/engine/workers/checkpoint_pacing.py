"""How often a run takes a rolling checkpoint: the asked interval, stretched so that
checkpoints cost at most `MAX_CHECKPOINT_SHARE` of the run.

A save's cost is the larger of two measures (`StepProgress.last_save_s`, from the rolling
saver's `cost_s`, `loop.rolling_saver`): its whole length, from the moment the loop asked
for it (its snapshot of the state) to the rename, so the loop's copy, the hand-over to
the saver's thread, and the serialising, hashing, writing and both fsyncs (the file's
and its folder's) on that thread; and what the loop itself lost to it, the steps a save
was in flight in and the one after it less the typical step. On a GPU the steps go on
meanwhile and the first is the larger; on a CPU the saver's thread competes with the
loop for the GIL (torch's pickling) and the cores, and either may be. Measured on a busy
2-core machine (issue 38), every 6-8 steps of the benchmark's clip: a 12.6 MB save
(shaped as a 480p clip's) 14-15 ms long cost the loop 6-7 ms (its loss 6-8 ms: the fsyncs
run beside it), the clip's own 0.2 MB save 1.7-1.8 ms long cost it 3-3.5 ms (its loss
2.5-3 ms: waking the thread, the GIL, caches). Counting the larger, the 2% holds either
way. (Saves back to back, at every step, cost 1.1-1.3 times their length and leave no
typical step to judge the loss by; the pacing never asks for them, only
`checkpoint_every_steps` can.) Once per run, not per checkpoint, and not counted: the
saver's thread start at the first save (under 1 ms) and removing the last checkpoint when
the run finishes (a few ms, an unlink); on a database other machines share, the
heartbeat thread's copy of the file into it, which only moves the ask earlier
(`JobRun._copy_lag_s`).

So a tiny clip's checkpoint costs well under 1% at the shortest interval a user can set
(1 s): small images and clips save in milliseconds and keep the asked interval (10 s by
default, where the loop waits 0.1-0.2 ms for its copy); real clips' latents take longer:
an 81-frame 480p Wan 2.1 clip's 42 MB save, 0.3 s, stretches it to 16 s. Never past
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

"""How often a run takes a rolling checkpoint: the asked interval, stretched so that
checkpoints cost at most `MAX_CHECKPOINT_SHARE` of the run.

A save's cost is its length as the rolling saver measures it (`StepProgress.last_save_s`):
the copy the loop takes of its state (the loop waits for that), then serialising, hashing,
writing and fsyncing on the saver's thread. That thread shares the cores (and the GIL)
with the loop on a CPU run, so the whole save is counted as if the loop had waited for it:
the bound holds even there, and is loose on a GPU, whose steps go on meanwhile. Small
images save in milliseconds and keep the asked interval (10 s by default); a clip's
latents take longer: an 81-frame 480p Wan 2.1 clip's 42 MB save, 0.3 s, stretches it to
16 s. Never past `MAX_STRETCHED_INTERVAL_S`, so a crash loses at most that much work
(unless the user asked for a longer interval).
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

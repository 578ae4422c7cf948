"""Model-aware claims: which due job a worker takes, given the models it holds.

The rule, which the claim statement (`queue_sql.affinity_claim_statement`) applies in one
statement on both stores:

1. Only the due PENDING jobs at the highest priority are candidates, the `CLAIM_WINDOW`
   oldest of them: a higher priority always goes first, whatever the worker holds, and a
   claim costs the same on a queue of thousands.
2. Taking a job passes over every older candidate; each of those counts one more pass
   (`job.passed_over`) and keeps the time of its first (`job.passed_over_at`). A job that
   has been passed over `max_skips` times, or first passed over `max_wait_s` ago, is at its
   bound: no claim may pass it, so the chosen job is never younger than the oldest job at
   its bound. That is the fairness bound: affinity delays no job by more than `max_skips`
   jobs, nor for longer than `max_wait_s` (plus the job that ran when the time ran out).
3. A job for a model that another live worker holds (the worker table) is left to that
   worker, though passed over all the same, until it has waited `max_wait_s` (that worker
   may be busy for long) or reached its bound; then anyone may take it.
4. Among the jobs a claim may take: the oldest one for a model the worker holds; else the
   model under the most pressure, where each of its candidates counts 1 plus its waiting
   time in units of `max_wait_s` (count and waiting time); then age.

A claim resets the taken job's counters; a job back in PENDING (retry, resume) starts over.
"""

from __future__ import annotations

from dataclasses import dataclass

# A claim names at most this many models held by the worker, and by other workers (the
# statement's parameters are fixed): a worker holds a few models, not dozens.
MAX_HELD = 8
MAX_PEERS = 16
CLAIM_WINDOW = 64  # candidates a claim looks at: the oldest of the highest priority


@dataclass(frozen=True)
class AffinityBound:
    """How far affinity may delay a job: at most `max_skips` jobs taken before it, and
    never once `max_wait_s` passed since the first; 0 skips turns affinity off."""

    max_wait_s: float = 60.0
    max_skips: int = 8
    # Other workers' models count while their row was heard from this recently (their
    # heartbeat timeout; the worker table's beat is at most 5 s).
    peers_seen_within_s: float = 15.0

    def problems(self) -> list[str]:
        problems = []
        if not 0 < self.max_wait_s <= 86_400:
            problems.append("the affinity wait bound must be between 0 and 86400 seconds")
        if not 0 <= self.max_skips <= 1000:
            problems.append("the affinity skip bound must be between 0 and 1000 jobs")
        return problems


DEFAULT_BOUND = AffinityBound()


def model_slots(prefix: str, models: tuple[str, ...] | list[str], size: int) -> dict[str, object]:
    """Bind values `<prefix>_0` .. `<prefix>_<size-1>`: the models, padded with NULL (which
    matches no job)."""
    padded: list[str | None] = [*list(dict.fromkeys(models))[:size]]
    padded += [None] * (size - len(padded))
    return {f"{prefix}_{index}": model for index, model in enumerate(padded)}

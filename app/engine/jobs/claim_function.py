"""PostgreSQL's model-aware claim as one server-side function: one round trip a claim.

A claim by statements costs the claimer a round trip for the other workers' models, one for
the claims' lock, the claim and its commit, and, when the worker's models change, two more
for its worker row: about 1 ms of the claimer's CPU and as much of the server's, which on a
busy machine capped claims well under 1,000 a second. The function does it all in the one
statement that calls it, its own transaction: it reads the peers' models, takes the claims'
lock, runs the claim statement (`queue_sql.affinity_claim_statement`, the same SQL, its
values the function's arguments), decides again when a cancel moved the chosen job, and
writes the worker row's models when they change (`LoadsTaken`).

The function's name carries a hash of its body, so machines of different Easel versions on
one queue each find their own, and it is created on first use (not by a schema version):
its body is built from the engine's claim statement, which the schema steps cannot see.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import text

from app.engine.jobs.affinity import MAX_HELD, MAX_PEERS
from app.models.db import Prepared

# The function's arguments, in order, as the call binds them (their names prefixed `p_`).
ARGUMENTS = (
    ("now", "double precision"), ("worker_id", "text"), ("held", "text[]"),
    ("row_held", "text[]"), ("keep", "integer"), ("max_wait_s", "double precision"),
    ("max_skips", "integer"), ("seen_since", "double precision"), ("source", "text"),
    ("message", "text"),
)  # fmt: skip
# Whether the planner knows how many jobs are queued. Until the job table's first ANALYZE
# with rows in it (autovacuum's comes up to a minute after a large submit) it guesses that
# a handful are, and any index that starts with the status looks as good as the primary
# key: the claim read every queued job, several times (27 ms a claim on 10,000 queued
# jobs). A claimer's first claim gathers them where they are missing.
STATUS_STATISTICS = text(
    "SELECT EXISTS (SELECT 1 FROM pg_stats WHERE schemaname = current_schema()"
    " AND tablename = 'job' AND attname = 'status')"
)
ANALYZE_JOBS = text("ANALYZE job")
_PLACEHOLDER = re.compile(r"\$(\d+)")
_SLOT = re.compile(r"(held|peer)_(\d+)")


@dataclass(frozen=True)
class LoadsTaken:
    """`JobQueue.claim`'s `row_models` for a worker that loads the taken job's model and
    keeps its `keep` most recently used ones (`held`, most recent first): the models it
    holds once it has taken a job for `model`, or None when it holds the same set as
    before. A plain value, so that PostgreSQL's claim function applies it in the claim."""

    held: tuple[str, ...]
    keep: int

    def __post_init__(self) -> None:
        if self.keep < 1:
            raise ValueError(f"a worker keeps at least one model, not {self.keep}")

    def __call__(self, model: str) -> list[str] | None:
        after = [model, *[held for held in self.held if held != model]][: self.keep]
        return None if set(after) == set(self.held) else after


@dataclass(frozen=True)
class ClaimFunction:
    name: str
    definition: str  # CREATE FUNCTION ...
    call: Prepared  # SELECT <the job's columns> FROM name(<ARGUMENTS>)


def claim_function(
    claim: Prepared, columns: Sequence[str], claims_key: int, tries: int
) -> ClaimFunction:
    """The function that runs `claim` (the compiled `affinity_claim_statement`, `$n`
    numbered, whose last column is `chosen_id`), and its call, returning `columns` (the
    job's, in `claim`'s order) of the taken job: one row, or none when nothing was due or
    the chosen job moved `tries` times."""
    assert claim.numbered, "the claim statement is built with $n placeholders"
    body = _BODY.format(
        claim=_with_function_values(claim),
        claims_key=claims_key,
        tries=tries,
        max_peers=MAX_PEERS,
        peers_of=_PEERS_OF,
    )
    arguments = ", ".join(f"p_{argument} {kind}" for argument, kind in ARGUMENTS)
    rest = (
        f"({arguments}) RETURNS SETOF job\n"
        "LANGUAGE plpgsql VOLATILE\n"
        # The window is the first rows of the queued jobs' index, in its order. Before the
        # table's first ANALYZE the planner guesses a handful of queued rows and reads all
        # of them through a bitmap, then sorts them: 27 ms a claim on 10,000 queued jobs.
        "SET enable_bitmapscan = off\n"
        # Each statement planned once a connection: a custom plan for each call's values
        # cost a tenth of the server's CPU a claim (the peers' read and its sublinks).
        "SET plan_cache_mode = force_generic_plan\n"
        f"AS $claim$\n{body}$claim$"
    )
    name = f"easel_claim_{hashlib.sha256(rest.encode()).hexdigest()[:12]}"  # all but the name
    definition = f"CREATE OR REPLACE FUNCTION {name}{rest}"
    casts = ", ".join(f"%s::{kind}" for _, kind in ARGUMENTS)
    call = Prepared(
        f"SELECT {', '.join(columns)} FROM {name}({casts})",
        tuple(argument for argument, _ in ARGUMENTS),
        {},
    )
    return ClaimFunction(name, definition, call)


def _with_function_values(claim: Prepared) -> str:
    """`claim`'s SQL with each `$n` replaced by what the function holds for it: an argument,
    a held or peer model slot (NULL past the list's end, which matches no job, as the
    statement's padding does), or the constant the statement binds."""
    arguments = {argument for argument, _ in ARGUMENTS}

    def value(found: re.Match[str]) -> str:
        name = claim.parameter_names[int(found[1]) - 1]
        slot = _SLOT.fullmatch(name)
        if slot:
            array = "p_held" if slot[1] == "held" else "v_peers"
            return f"{array}[{int(slot[2]) + 1}]"
        if name in arguments:
            return f"p_{name}"
        return _literal(claim.fixed_values[name])

    sql = _PLACEHOLDER.sub(value, claim.sql)
    assert f"p_held[{MAX_HELD}]" in sql and f"v_peers[{MAX_PEERS}]" in sql, "slots unbound"
    return sql


def _literal(fixed: object) -> str:
    if fixed is None:
        return "NULL"
    if isinstance(fixed, bool):
        return "TRUE" if fixed else "FALSE"
    if isinstance(fixed, int | float):
        return repr(fixed)
    if isinstance(fixed, str):
        return "'" + fixed.replace("'", "''") + "'"
    raise TypeError(f"no SQL literal for the claim's constant {fixed!r}")


# The models the live worker rows list (JSON text) other than the claimer's, those it
# holds left out: the strings of each JSON list; a row with anything else lists none.
_PEERS_OF = """
        SELECT element #>> '{}' FROM worker, json_array_elements(
            CASE WHEN json_typeof(worker.models::json) = 'array' THEN worker.models::json END
        ) AS element
        WHERE worker.id <> p_worker_id AND worker.last_seen_at >= p_seen_since
            AND worker.state <> 'exited' AND worker.models IS NOT NULL
            AND json_typeof(element) = 'string' AND NOT (element #>> '{}') = ANY(p_held)"""

_BODY = """
DECLARE
    v_row text;
    v_peers text[] := '{{}}';
    v_claim record;
    v_after text[];
BEGIN
    -- The models other live workers hold (what `JobQueue._peer_models` reads), before
    -- the lock: it guards the queue's rows, not the worker table.
    BEGIN
        v_peers := ARRAY({peers_of});
    EXCEPTION WHEN invalid_text_representation THEN  -- a row's models are not JSON
        v_peers := '{{}}';
        FOR v_row IN SELECT worker.id FROM worker LOOP  -- each alone: a damaged one holds none
            BEGIN
                v_peers := v_peers || ARRAY({peers_of}
                    AND worker.id = v_row);
            EXCEPTION WHEN invalid_text_representation THEN
                NULL;
            END;
        END LOOP;
    END;
    v_peers := (SELECT array_agg(DISTINCT peer) FROM unnest(v_peers) AS peer);
    v_peers := v_peers[1:{max_peers}];
    PERFORM pg_advisory_xact_lock({claims_key});
    FOR v_try IN 1..{tries} LOOP
        {claim}
        INTO v_claim;
        IF v_claim.chosen_id IS NULL THEN
            RETURN;  -- nothing due
        END IF;
        EXIT WHEN v_claim.id IS NOT NULL;  -- taken; else a cancel moved it: decide again
    END LOOP;
    IF v_claim.id IS NULL THEN
        RETURN;
    END IF;
    IF p_keep > 0 THEN  -- `LoadsTaken`: the worker row's models, when they change
        v_after := (ARRAY[v_claim.model] || array_remove(p_row_held, v_claim.model))[1:p_keep];
        IF NOT (v_after @> p_row_held AND p_row_held @> v_after) THEN
            UPDATE worker SET models = array_to_json(v_after)::text,
                last_seen_at = v_claim.updated_at
            WHERE worker.id = p_worker_id;
        END IF;
    END IF;
    RETURN QUERY SELECT * FROM job WHERE job.id = v_claim.id;
END
"""

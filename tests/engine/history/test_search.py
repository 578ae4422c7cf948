"""Search and filter: the index's answers equal a brute-force filter over the same jobs."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.engine.history.search import BadSearch, JobFilter, parse_duration, search
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.models.opening import open_database
from tests.engine.history.conftest import JOB_SPECS, MODELS, SIZES, VOCABULARY, JobSpec, insert_jobs

TERM = st.tuples(
    st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=2),
    st.booleans(),  # prefix
    st.booleans(),  # excluded
    st.booleans(),  # in the negative prompt
)


def typed(term: tuple[list[str], bool, bool, bool]) -> str:
    words, prefix, excluded, negative = term
    if prefix:
        words = [*words[:-1], words[-1][:2]]  # "ca*" matches cat, car, cart
    text = " ".join(words)
    text = f'"{text}"' if len(words) > 1 else text
    return ("-" if excluded else "") + ("neg:" if negative else "") + text + ("*" if prefix else "")


def brute_force_has(text: str, term: tuple[list[str], bool, bool, bool]) -> bool:
    words, prefix, _, _ = term
    tokens = re.findall(r"[a-z0-9]+", text.lower())
    for start in range(len(tokens) - len(words) + 1):
        window = tokens[start : start + len(words)]
        *head, last = words
        if window[:-1] == head and (
            window[-1].startswith(last[:2]) if prefix else window[-1] == last
        ):
            return True
    return False


def brute_force(spec: JobSpec, terms: list[tuple[list[str], bool, bool, bool]],
                job_filter: JobFilter) -> bool:  # fmt: skip
    for term in terms:
        found = brute_force_has(spec.negative if term[3] else spec.prompt, term)
        if found == term[2]:  # an excluded term found, or a wanted one missing
            return False
    return (
        (not job_filter.statuses or spec.status in job_filter.statuses)
        and (job_filter.model is None or spec.model == job_filter.model)
        and (job_filter.size is None or spec.size == job_filter.size)
        and (job_filter.since is None or spec.created_at >= job_filter.since)
        and (job_filter.until is None or spec.created_at < job_filter.until)
        and (job_filter.starred is None or spec.starred == job_filter.starred)
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    specs=st.lists(JOB_SPECS, min_size=1, max_size=30),
    terms=st.lists(TERM, max_size=3),
    statuses=st.sets(st.sampled_from(list(JobStatus)), max_size=3),
    model=st.one_of(st.none(), st.sampled_from(MODELS)),
    size=st.one_of(st.none(), st.sampled_from(SIZES)),
    since=st.one_of(st.none(), st.floats(1_000.0, 100_000.0)),
    until=st.one_of(st.none(), st.floats(1_000.0, 100_000.0)),
    starred=st.one_of(st.none(), st.booleans()),
)
def test_search_equals_a_brute_force_filter(
    specs: list[JobSpec],
    terms: list[tuple[list[str], bool, bool, bool]],
    statuses: set[JobStatus],
    model: str | None,
    size: tuple[int, int] | None,
    since: float | None,
    until: float | None,
    starred: bool | None,
) -> None:
    job_filter = JobFilter(
        text=" ".join(typed(term) for term in terms), statuses=frozenset(statuses),
        model=model, size=size, since=since, until=until, starred=starred,
    )  # fmt: skip
    with tempfile.TemporaryDirectory() as folder:
        db = open_database(Path(folder) / "easel.db")
        ids = insert_jobs(db, specs)
        found = [job.id for job in search(JobQueue(db), job_filter, limit=None)]
        db.dispose()
    expected = [
        i for i, spec in zip(ids, specs, strict=True) if brute_force(spec, terms, job_filter)
    ]
    assert found == sorted(expected, reverse=True)


def test_prompt_edits_and_deletes_keep_the_index_in_step(tmp_path: Path) -> None:
    db = open_database(tmp_path / "easel.db")
    queue = JobQueue(db)
    job_id = queue.submit(GenerationParams("a red circle"))
    with db.write() as conn:
        conn.exec_driver_sql("UPDATE job SET prompt = 'a blue square' WHERE id = ?", (job_id,))
    assert search(queue, JobFilter(text="red")) == []
    assert [job.id for job in search(queue, JobFilter(text="blue"))] == [job_id]
    with db.write() as conn:
        conn.exec_driver_sql("DELETE FROM job_transition WHERE job_id = ?", (job_id,))
        conn.exec_driver_sql("DELETE FROM job WHERE id = ?", (job_id,))
    assert search(queue, JobFilter(text="blue")) == []
    db.dispose()


@pytest.mark.parametrize(
    ("text", "complaint"),
    [('"red circle', "quote that is never closed"), ("red -", "no letters or digits")],
)
def test_malformed_search_is_one_clear_sentence(tmp_path: Path, text: str, complaint: str) -> None:
    db = open_database(tmp_path / "easel.db")
    with pytest.raises(BadSearch, match=complaint):
        search(JobQueue(db), JobFilter(text=text))
    db.dispose()


def test_durations_read_like_people_write_them() -> None:
    assert [parse_duration(t) for t in ("30d", "12h", "90m", "2w", "45s", "1.5d")] == [
        30 * 86400, 12 * 3600, 90 * 60, 14 * 86400, 45, 1.5 * 86400,
    ]  # fmt: skip
    for bad in ("7", "d", "7x", "-3d", ""):
        with pytest.raises(BadSearch, match="is not a duration"):
            parse_duration(bad)

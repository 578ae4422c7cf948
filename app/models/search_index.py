"""Word search over prompts: the store's full-text index and the clause that queries it.

SQLite: an FTS5 table with external content (the prompts stay in `job`; the index holds
only their words), kept in step by triggers, so every writer (submit, a migration, a
prune) updates it without knowing it exists. PostgreSQL: `to_tsvector` @@ `to_tsquery`
with the 'simple' configuration (no stemming, like FTS5's unicode61 tokenizer).
Everything dialect-specific about search lives here; the engine passes parsed `Term`s.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import (
    Boolean,
    ColumnElement,
    Connection,
    TextualSelect,
    and_,
    bindparam,
    column,
    func,
    not_,
    text,
    true,
)

from app.models.tables import JOB

FTS_TABLE = "job_search"

_SQLITE_DDL = (
    f"CREATE VIRTUAL TABLE IF NOT EXISTS {FTS_TABLE} USING fts5("
    "prompt, negative_prompt, content='job', content_rowid='id')",
    # Only inserts, deletes and prompt edits touch the index: status updates (the hot path)
    # name other columns, so the UPDATE trigger does not fire for them.
    f"""CREATE TRIGGER IF NOT EXISTS job_search_insert AFTER INSERT ON job BEGIN
        INSERT INTO {FTS_TABLE} (rowid, prompt, negative_prompt)
        VALUES (new.id, new.prompt, new.negative_prompt); END""",
    f"""CREATE TRIGGER IF NOT EXISTS job_search_delete AFTER DELETE ON job BEGIN
        INSERT INTO {FTS_TABLE} ({FTS_TABLE}, rowid, prompt, negative_prompt)
        VALUES ('delete', old.id, old.prompt, old.negative_prompt); END""",
    f"""CREATE TRIGGER IF NOT EXISTS job_search_update
        AFTER UPDATE OF prompt, negative_prompt ON job BEGIN
        INSERT INTO {FTS_TABLE} ({FTS_TABLE}, rowid, prompt, negative_prompt)
        VALUES ('delete', old.id, old.prompt, old.negative_prompt);
        INSERT INTO {FTS_TABLE} (rowid, prompt, negative_prompt)
        VALUES (new.id, new.prompt, new.negative_prompt); END""",
)


@dataclass(frozen=True)
class Term:
    """One search term: words that must follow each other (a phrase of one or more)."""

    words: tuple[str, ...]
    prefix: bool = False  # the last word may continue (`circ*`, type-ahead)
    excluded: bool = False  # `-word`: jobs whose prompt has it are left out
    negative_prompt: bool = False  # `neg:word`: look in the negative prompt instead


def create_search_index(conn: Connection) -> None:
    """Create the index and its triggers, and index the prompts already stored."""
    if conn.dialect.name != "sqlite":
        return  # PostgreSQL computes tsvectors in the query (an expression index can follow)
    for statement in _SQLITE_DDL:
        conn.exec_driver_sql(statement)
    conn.exec_driver_sql(f"INSERT INTO {FTS_TABLE} ({FTS_TABLE}) VALUES ('rebuild')")


def prompt_matches(dialect: str, terms: list[Term]) -> ColumnElement[bool]:
    """A WHERE clause on `job`: every term found (the excluded ones absent)."""
    if not terms:
        return true()
    if dialect == "sqlite":
        return _fts5_clause(terms)
    if dialect == "postgresql":
        return _tsquery_clause(terms)
    raise NotImplementedError(f"word search is not available on {dialect}")


def _fts5_clause(terms: list[Term]) -> ColumnElement[bool]:
    wanted = [_fts5_term(t) for t in terms if not t.excluded]
    unwanted = [_fts5_term(t) for t in terms if t.excluded]
    if wanted:
        # FTS5's NOT is binary ("a NOT b"), so the exclusions hang off the wanted terms.
        expression = " AND ".join(wanted) + "".join(f" NOT {u}" for u in unwanted)
        return JOB.c.id.in_(_fts5_rowids(expression, "wanted"))
    return not_(JOB.c.id.in_(_fts5_rowids(" OR ".join(unwanted), "unwanted")))


def _fts5_rowids(expression: str, name: str) -> TextualSelect:
    query = text(f"SELECT rowid FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH :{name}")
    return query.bindparams(bindparam(name, expression)).columns(column("rowid"))


def _fts5_term(term: Term) -> str:
    # Words are letters and digits only (the parser split them so), hence safe to quote.
    phrase = " + ".join(f'"{word}"' for word in term.words) + ("*" if term.prefix else "")
    column = "negative_prompt" if term.negative_prompt else "prompt"
    return f"{column} : ({phrase})"


def _tsquery_clause(terms: list[Term]) -> ColumnElement[bool]:
    clauses: list[ColumnElement[bool]] = []
    for term in terms:
        column = JOB.c.negative_prompt if term.negative_prompt else JOB.c.prompt
        words = [*term.words[:-1], term.words[-1] + (":*" if term.prefix else "")]
        query = func.to_tsquery("simple", " <-> ".join(words))
        found = func.to_tsvector("simple", column).op("@@", return_type=Boolean)(query)
        clauses.append(not_(found) if term.excluded else found)
    return and_(*clauses)

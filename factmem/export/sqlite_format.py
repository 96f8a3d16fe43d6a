"""The SQLite file format of a memory: the seed's tables and factmem's, and the check of a file against them.

The tables and what each holds are described in :mod:`factmem.export.sqlite` (which writes and reads
them); this module holds their ``CREATE TABLE`` statements, the column specs (name, declared type,
nullable) both directions use, and :func:`validate_sqlite`.

The file is checked before anything is written: required tables; in each, missing columns and
each column's type affinity — columns a deployment added to the seed's three tables (a ``user_id``)
are ignored and listed (``extra_columns`` of the result, which the what-if and tune report as a note),
extra columns in factmem's own tables are refused; then every value's storage class (SQLite is dynamically
typed: ``'abc'`` can sit in an INTEGER column), NULLs in NOT NULL columns, and unknown kinds and
statuses. Each problem is a :class:`~factmem.errors.ProductionDBError` naming the file, the table,
the column and the first offending row.
Nothing is written before the check passes.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np

from factmem.core.codes import KINDS, MAX_TIME, MIN_TIME
from factmem.core.params import MemoryParams
from factmem.errors import FactmemError, ProductionDBError
from factmem.store.calls import SOURCES
from factmem.store.examined import EXAMINED_OUTCOMES
from factmem.store.schema import STATUSES

__all__ = ["SQLITE_FORMAT", "SEED_FACTS_DDL", "SEED_LINKS_DDL", "EVIDENCE_DDL", "EVIDENCE_INDEX", "FACTS_INDEX",
           "META_FINGERPRINT", "META_PERIOD", "read_meta", "STATE_DDL",
           "EXAMINED_DDL", "LEGACY_EMPTY_DDL", "META_DDL", "FACTS_SPEC", "LINKS_SPEC", "EVIDENCE_SPEC", "STATE_SPEC",
           "LEGACY_EMPTY_SPEC", "EXAMINED_SPEC", "open_sqlite", "check_file", "check_meta", "check_active_keys",
           "validate_sqlite", "read_meta_params", "check_acyclic", "text_error",
           "SEED_TABLES", "extra_columns_note"]

SQLITE_FORMAT = "factmem.sqlite/1"

#: The seed's DDL, verbatim.
SEED_FACTS_DDL = """CREATE TABLE IF NOT EXISTS memory_facts (
    id                  INTEGER PRIMARY KEY,
    subject             TEXT NOT NULL,
    predicate           TEXT NOT NULL,
    object              TEXT NOT NULL,
    note                TEXT,
    kind                TEXT NOT NULL,
    confidence          REAL NOT NULL,
    reinforcement_count INTEGER NOT NULL,
    first_seen          INTEGER NOT NULL,
    last_reinforced     INTEGER NOT NULL,
    decay_rate          REAL NOT NULL,
    status              TEXT NOT NULL,
    supersedes_id       INTEGER
);"""

SEED_LINKS_DDL = """CREATE TABLE IF NOT EXISTS memory_fact_links (
    parent_id   INTEGER NOT NULL REFERENCES memory_facts(id) ON DELETE CASCADE,
    child_id    INTEGER NOT NULL REFERENCES memory_facts(id) ON DELETE CASCADE,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (parent_id, child_id)
);"""

EVIDENCE_DDL = """CREATE TABLE IF NOT EXISTS memory_evidence (
    id          INTEGER PRIMARY KEY,
    fact_id     INTEGER NOT NULL REFERENCES memory_facts(id) ON DELETE CASCADE,
    session_id  TEXT,
    message_id  TEXT,
    observed_at INTEGER NOT NULL,
    action      TEXT,
    confidence  REAL,
    source      TEXT
);"""
EVIDENCE_INDEX = "CREATE INDEX IF NOT EXISTS memory_evidence_fact_id ON memory_evidence(fact_id);"
#: The index the seed's queries need: ``remember`` looks up a (subject, predicate)'s active facts at
#: every observation, the context a subject's active facts. Without it every call scans the table.
FACTS_INDEX = ("CREATE INDEX IF NOT EXISTS memory_facts_subject_predicate_status "
               "ON memory_facts(subject, predicate, status);")

STATE_DDL = """CREATE TABLE IF NOT EXISTS factmem_fact_state (
    id                INTEGER PRIMARY KEY REFERENCES memory_facts(id) ON DELETE CASCADE,
    status_changed_at INTEGER,
    status_reason     TEXT,
    stale             INTEGER NOT NULL DEFAULT 0
);"""

EXAMINED_DDL = """CREATE TABLE IF NOT EXISTS factmem_abstraction_examined (
    subject     TEXT NOT NULL,
    member_ids  TEXT NOT NULL,
    examined_at INTEGER NOT NULL,
    pass_id     TEXT,
    outcome     TEXT NOT NULL
);"""

#: The side table of files written before examined memberships (empty answers only); read on import.
LEGACY_EMPTY_DDL = """CREATE TABLE IF NOT EXISTS factmem_abstraction_empty (
    subject     TEXT NOT NULL,
    member_ids  TEXT NOT NULL,
    examined_at INTEGER NOT NULL,
    pass_id     TEXT
);"""

#: ``factmem_meta`` keys beside ``format``, ``factmem_version`` and ``params``: the fingerprint of the
#: parameters the memory was built with (``factmem.export.params_fingerprint``, the Rust module's
#: ``PARAMS_FINGERPRINT``) and its consolidation period in seconds. A client that writes the file
#: under other parameters or another schedule updates them (docs/design.md, "Writing a production client").
META_FINGERPRINT = "params_fingerprint"
META_PERIOD = "consolidate_every_seconds"

META_DDL = """CREATE TABLE IF NOT EXISTS factmem_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);"""

# (column, affinity, nullable) of every table; evidence and state list their optional columns apart.
FACTS_SPEC = [("id", "INTEGER", False), ("subject", "TEXT", False), ("predicate", "TEXT", False),
          ("object", "TEXT", False), ("note", "TEXT", True), ("kind", "TEXT", False),
          ("confidence", "REAL", False), ("reinforcement_count", "INTEGER", False),
          ("first_seen", "INTEGER", False), ("last_reinforced", "INTEGER", False),
          ("decay_rate", "REAL", False), ("status", "TEXT", False), ("supersedes_id", "INTEGER", True)]
LINKS_SPEC = [("parent_id", "INTEGER", False), ("child_id", "INTEGER", False), ("created_at", "INTEGER", False)]
EVIDENCE_SPEC = [("id", "INTEGER", False), ("fact_id", "INTEGER", False), ("session_id", "TEXT", True),
             ("message_id", "TEXT", True), ("observed_at", "INTEGER", False), ("action", "TEXT", True),
             ("confidence", "REAL", True), ("source", "TEXT", True)]
_EVIDENCE_OPTIONAL = {"id", "action", "confidence", "source"}
STATE_SPEC = [("id", "INTEGER", False), ("status_changed_at", "INTEGER", True), ("status_reason", "TEXT", True),
          ("stale", "INTEGER", False)]
LEGACY_EMPTY_SPEC = [("subject", "TEXT", False), ("member_ids", "TEXT", False), ("examined_at", "INTEGER", False),
          ("pass_id", "TEXT", True)]
EXAMINED_SPEC = LEGACY_EMPTY_SPEC + [("outcome", "TEXT", False)]
_ID_ARRAY_RULE = [(
    "member_ids", "NOT json_valid(member_ids) OR json_type(member_ids) <> 'array' OR EXISTS "
    "(SELECT 1 FROM json_each(member_ids) WHERE type <> 'integer')", "a JSON array of integer fact ids")]


# -- validation of a SQLite file ---------------------------------------------------------------------------


def _affinity(declared: str) -> str:
    """SQLite's type-affinity rules (section 3.1 of its datatype page) for a declared type."""
    t = declared.upper()
    if "INT" in t:
        return "INTEGER"
    if any(s in t for s in ("CHAR", "CLOB", "TEXT")):
        return "TEXT"
    if t == "" or "BLOB" in t:
        return "BLOB"
    if any(s in t for s in ("REAL", "FLOA", "DOUB")):
        return "REAL"
    return "NUMERIC"


def open_sqlite(path: Path) -> sqlite3.Connection:
    if not path.exists():
        raise ProductionDBError(f"{path}: no such file")
    if path.is_dir():
        raise ProductionDBError(f"{path}: is a directory")
    try:
        sq = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
        sq.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:
        raise ProductionDBError(f"{path}: not a SQLite database ({exc})") from None
    return sq


def _columns(sq: sqlite3.Connection, table: str) -> dict[str, str]:
    return {r[1]: r[2] for r in sq.execute(f'PRAGMA table_info("{table}")').fetchall()}


#: the seed's tables: a deployment adds its own columns to them (``user_id``, ``embedding``), which are
#: ignored (reported in ``extra_columns``); factmem's own tables must match exactly
SEED_TABLES = ("memory_facts", "memory_fact_links", "memory_evidence")


def _check_table(path: Path, sq, table: str, spec: list[tuple[str, str, bool]], optional: frozenset[str] | set[str] = frozenset(),
                 extra: list[str] | None = None) -> dict[str, str]:
    """Columns of ``table`` match ``spec`` (names, affinities); returns the present ones' affinities.
    Columns ``spec`` does not name are appended to ``extra`` when it is given (a seed table: ignored),
    else refused."""
    have = _columns(sq, table)
    expected = [c for c, _, _ in spec]
    for col in expected:
        if col not in have and col not in optional:
            raise ProductionDBError(f"{path}: table {table}: missing column {col!r} "
                                    f"(expected {', '.join(expected)})")
    for col in have:
        if col not in expected:
            if extra is not None:
                extra.append(col)
                continue
            raise ProductionDBError(f"{path}: table {table}: unexpected column {col!r} "
                                    f"(expected exactly {', '.join(expected)})")
    for col, aff, _ in spec:
        if col in have and _affinity(have[col]) != aff:
            raise ProductionDBError(f"{path}: table {table}: column {col!r} has type {have[col] or '(none)'!r}, "
                                    f"expected {aff}")
    return {c: a for c, a, _ in spec if c in have}


def _scan(path: Path, sq, table: str, spec: list[tuple[str, str, bool]], present: dict[str, str],
          domains: dict[str, tuple] | None = None, rules: list[tuple[str, str, str]] | None = None) -> int:
    """One scan of ``table``: every stored value has its column's storage class (SQLite is dynamically
    typed), no NULL where NOT NULL, and ``domains`` columns hold only their allowed values. Only when
    a check fails does a second query locate the first offending row. Returns the row count."""
    allowed = {"INTEGER": ("integer",), "TEXT": ("text",), "REAL": ("real", "integer")}
    checks: list[tuple[str, str, str]] = []
    for col, aff, nullable in spec:
        if col not in present:
            continue
        ok = allowed[aff] + (("null",) if nullable else ())
        checks.append((col, f'typeof("{col}") NOT IN ({", ".join(repr(s) for s in ok)})', aff))
    for col, values in (domains or {}).items():
        lits = ", ".join(repr(v) for v in values)  # fixed vocabularies of plain words: safe to inline
        checks.append((col, f'"{col}" NOT IN ({lits})', "domain"))
    checks.extend(rules or [])  # (column, SQL condition of a bad row, what a good value is)
    sums = sq.execute(f'SELECT count(*){"".join(f", sum(CASE WHEN {c} THEN 1 ELSE 0 END)" for _, c, _ in checks)} '
                      f'FROM "{table}"').fetchone()
    for (col, cond, what), n in zip(checks, sums[1:]):
        if not n:
            continue
        rowid, value, kind = sq.execute(
            f'SELECT rowid, "{col}", typeof("{col}") FROM "{table}" WHERE {cond} ORDER BY rowid LIMIT 1').fetchone()
        if what == "domain":
            assert domains is not None  # a domain check exists only for a column with a domain
            allowed_values = ", ".join(map(str, domains[col]))
            problem = f"unknown value {value!r}; allowed: {allowed_values}"
        elif what not in ("INTEGER", "TEXT", "REAL"):
            problem = f"{value!r} is not {what}"
        elif kind == "null":
            problem = "NULL in a NOT NULL column"
        else:
            problem = f"{value!r} is {kind}, expected {what.lower()}"
        raise ProductionDBError(f"{path}: table {table}: column {col!r}: {problem} ({n} rows; first at rowid {rowid})")
    return int(sums[0])


_TIME_RULE = f"a Unix time in the supported range (years 0001-9999: {MIN_TIME} to {MAX_TIME})"
_FINITE_MAX = "1.7976931348623157e308"


def _time_rule(col: str) -> tuple[str, str, str]:
    return (col, f'"{col}" IS NOT NULL AND ("{col}" < {MIN_TIME} OR "{col}" > {MAX_TIME})', _TIME_RULE)


def _invariant_rules(present: dict[str, dict[str, str]]) -> dict[str, list[tuple[str, str, str]]]:
    """The store's invariants as per-row rules (column, SQL condition of a bad row, what is expected),
    checked after the storage classes: values in their domains, times in range, no dangling reference."""
    facts_ids = "(SELECT id FROM memory_facts)"
    rules: dict[str, list[tuple[str, str, str]]] = {
        "memory_facts": [
            ("confidence", "confidence < 0 OR confidence > 1", "a confidence in [0, 1]"),
            ("decay_rate", f"decay_rate < 0 OR decay_rate > {_FINITE_MAX}", "a finite decay rate >= 0"),
            ("reinforcement_count", "reinforcement_count < 0", "a count >= 0"),
            _time_rule("first_seen"), _time_rule("last_reinforced"),
            ("supersedes_id", f"supersedes_id IS NOT NULL AND supersedes_id NOT IN {facts_ids}",
             "the id of a fact in memory_facts (a dangling supersedes_id)"),
            ("supersedes_id", "supersedes_id = id", "the id of another fact (a fact cannot supersede itself)"),
            # what remember and ingest refuse (factmem.store.calls): an empty key part, NUL in a key
            *[(col, f"trim({col}) = ''", f"a non-empty {col}") for col in ("subject", "predicate", "object")],
            *[(col, f"instr(CAST({col} AS BLOB), x'00') > 0", f"a {col} without NUL (\\0)")
              for col in ("subject", "predicate")],
        ],
        "memory_fact_links": [
            ("parent_id", f"parent_id NOT IN {facts_ids}", "the id of a fact in memory_facts (a link to a missing fact)"),
            ("child_id", f"child_id NOT IN {facts_ids}", "the id of a fact in memory_facts (a link to a missing fact)"),
            _time_rule("created_at"),
        ],
        "memory_evidence": [
            ("fact_id", f"fact_id NOT IN {facts_ids}", "the id of a fact in memory_facts (evidence for a missing fact)"),
            _time_rule("observed_at"),
        ],
        "factmem_fact_state": [
            ("id", f"id NOT IN {facts_ids}", "the id of a fact in memory_facts (state of a missing fact)"),
            _time_rule("status_changed_at"),
        ],
        "factmem_abstraction_empty": [_time_rule("examined_at")],
    }
    ev = present.get("memory_evidence", {})
    for col, words in (("action", ("insert", "reinforce")), ("source", SOURCES)):
        if col in ev:  # NULL: a production memory that does not record it
            rules["memory_evidence"].append((col, f"{col} IS NOT NULL AND {col} NOT IN ({', '.join(map(repr, words))})",
                                             f"one of {', '.join(words)} (or NULL)"))
    if "confidence" in ev:
        rules["memory_evidence"].append(("confidence", "confidence < 0 OR confidence > 1", "a confidence in [0, 1]"))
    if "id" in ev:
        rules["memory_evidence"].append(
            ("id", "id IN (SELECT id FROM memory_evidence GROUP BY id HAVING count(*) > 1)", "a unique evidence id"))
    return {table: [r for r in rs if r[0] in present.get(table, {})] for table, rs in rules.items()}


def _check_unique_fact_ids(path: Path, sq: sqlite3.Connection) -> None:
    pk = {r[1]: (r[2], r[5]) for r in sq.execute('PRAGMA table_info("memory_facts")').fetchall()}
    if not (pk["id"][1] == 1 and pk["id"][0].upper() == "INTEGER"):  # not a rowid alias: ids may repeat
        dup = sq.execute("SELECT id, count(*) FROM memory_facts GROUP BY id HAVING count(*) > 1 LIMIT 1").fetchone()
        if dup:
            raise ProductionDBError(f"{path}: table memory_facts: column 'id': value {dup[0]!r} appears {dup[1]} times")


def check_meta(path: Path, sq: sqlite3.Connection, tables: list[str]) -> None:
    """``factmem_meta.format``, when present, must be a format this factmem reads."""
    if "factmem_meta" not in tables:
        return
    try:
        row = sq.execute("SELECT value FROM factmem_meta WHERE key = 'format'").fetchone()
    except sqlite3.DatabaseError as exc:
        raise ProductionDBError(f"{path}: table factmem_meta: unreadable ({exc})") from None
    if row is not None and row[0] != SQLITE_FORMAT:
        raise ProductionDBError(f"{path}: table factmem_meta: key 'format' = {row[0]!r}: this factmem reads "
                                f"{SQLITE_FORMAT!r} (a newer or unknown format; upgrade factmem)")


def check_active_keys(path: Path, sq: sqlite3.Connection, multi_valued: frozenset[str]) -> None:
    """One active fact per (subject, predicate) of a single-valued predicate."""
    import json

    row = sq.execute(
        "SELECT subject, predicate, count(*), group_concat(rowid) FROM memory_facts WHERE status = 'active' "
        "AND predicate NOT IN (SELECT value FROM json_each(?)) GROUP BY subject, predicate HAVING count(*) > 1 "
        "ORDER BY min(rowid) LIMIT 1", [json.dumps(sorted(multi_valued))]).fetchone()
    if row is not None:
        subject, predicate, n, rowids = row
        raise ProductionDBError(
            f"{path}: table memory_facts: rowids {rowids}: {n} active facts for ({subject!r}, {predicate!r}); rule: "
            "one active fact per (subject, predicate) of a single-valued predicate — declare the predicate "
            "multi-valued in the params, or keep them as stored with allow_multiple_active=True "
            "(--allow-multiple-active)")


def validate_sqlite(path: str | os.PathLike) -> dict[str, Any]:
    """Check that a SQLite file is a memory factmem can import (see the module docstring); returns
    what it found: row counts, present optional columns and tables. Raises ProductionDBError."""
    path = Path(path)
    sq = open_sqlite(path)
    try:
        return check_file(path, sq)
    except sqlite3.OperationalError as exc:  # text that is not UTF-8: named by table, row and column
        raise text_error(path, sq, exc) from None
    finally:
        sq.close()


def check_file(path: Path, sq: sqlite3.Connection) -> dict[str, Any]:
    tables = {r[0] for r in sq.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()}
    for t in ("memory_facts", "memory_fact_links", "memory_evidence"):
        if t not in tables:
            raise ProductionDBError(f"{path}: missing table {t!r} (a memory file has memory_facts, "
                                    "memory_fact_links and memory_evidence)")
    info: dict[str, Any] = {"tables": sorted(tables)}
    specs = {"memory_facts": (FACTS_SPEC, set()), "memory_fact_links": (LINKS_SPEC, set()),
             "memory_evidence": (EVIDENCE_SPEC, _EVIDENCE_OPTIONAL)}
    if "factmem_fact_state" in tables:
        specs["factmem_fact_state"] = (STATE_SPEC, set())
    if "factmem_abstraction_empty" in tables:
        specs["factmem_abstraction_empty"] = (LEGACY_EMPTY_SPEC, set())
    if "factmem_abstraction_examined" in tables:
        specs["factmem_abstraction_examined"] = (EXAMINED_SPEC, set())
    present = {}
    extra_columns: dict[str, list[str]] = {}
    for table, (spec, optional) in specs.items():
        added: list[str] | None = [] if table in SEED_TABLES else None
        present[table] = _check_table(path, sq, table, spec, optional, added)
        if added:
            extra_columns[table] = added
    domains: dict[str, dict[str, tuple]] = {"memory_facts": {"kind": KINDS, "status": STATUSES},
                                            "factmem_fact_state": {"stale": (0, 1)},
                                            "factmem_abstraction_examined": {"outcome": EXAMINED_OUTCOMES}}
    rules = {"factmem_abstraction_empty": list(_ID_ARRAY_RULE), "factmem_abstraction_examined": list(_ID_ARRAY_RULE)}
    for table, extra in _invariant_rules(present).items():
        rules.setdefault(table, []).extend(extra)
    counts = {}
    for table, (spec, _) in specs.items():  # memory_facts first: the references below point into it
        counts[table] = _scan(path, sq, table, spec, present[table], domains.get(table), rules.get(table))
        if table == "memory_facts":
            _check_unique_fact_ids(path, sq)
    info["evidence_columns"] = list(present["memory_evidence"])
    info["counts"] = counts
    info["extra_columns"] = extra_columns
    return info


def read_meta(path: Path, sq: sqlite3.Connection, tables: list[str]) -> dict[str, str]:
    """Every ``factmem_meta`` key and value as text (empty when the file has no such table)."""
    if "factmem_meta" not in tables:
        return {}
    try:
        return {str(k): str(v) for k, v in sq.execute("SELECT key, value FROM factmem_meta").fetchall()}
    except sqlite3.DatabaseError as exc:
        raise ProductionDBError(f"{path}: table factmem_meta: unreadable ({exc})") from None


def extra_columns_note(extra: dict[str, list[str]]) -> str | None:
    """The note saying which added columns of the seed's tables were ignored (None when there are none)."""
    if not extra:
        return None
    parts = [f"{table} ({', '.join(cols)})" for table, cols in sorted(extra.items())]
    return ("Columns not in the seed's schema were ignored: " + "; ".join(parts) + ".")


def read_meta_params(path: Path, sq: sqlite3.Connection, tables: list[str]) -> MemoryParams | None:
    """The params an export saved in ``factmem_meta`` (None when the file has none); a corrupt entry
    raises :class:`ProductionDBError` naming the file, table and key."""
    if "factmem_meta" not in tables:
        return None
    try:
        rows = dict(sq.execute("SELECT key, value FROM factmem_meta").fetchall())
    except sqlite3.DatabaseError as exc:
        raise ProductionDBError(f"{path}: table factmem_meta: unreadable ({exc})") from None
    if "params" not in rows:
        return None
    try:
        return MemoryParams.from_json(str(rows["params"]))
    except ValueError as exc:
        raise ProductionDBError(f"{path}: table factmem_meta: key 'params': {exc}") from None


def check_acyclic(path: Path, ids: np.ndarray, supersedes: np.ndarray, has: np.ndarray) -> None:
    """No ``supersedes_id`` chain of ``memory_facts`` loops back on itself (``ids`` sorted and unique;
    ``has`` false where ``supersedes_id`` is NULL). Pointer doubling in numpy: after 2^k > n steps
    every chain that does not end has entered a loop, and the fact it stands on is in it."""
    n = len(ids)
    if not n:
        return
    at = np.minimum(np.searchsorted(ids, supersedes), n - 1)
    nxt = np.append(np.where(has & (ids[at] == supersedes), at, n), n)  # n: a chain's end, which stays there
    steps = 1
    while steps <= n:
        nxt = nxt[nxt]
        steps *= 2
    looping = np.flatnonzero(nxt[:n] != n)
    if looping.size:
        on = int(nxt[looping[0]])
        loop, cur = [int(ids[on])], on
        while len(loop) <= 20:
            cur = int(at[cur])
            if cur == on:
                break
            loop.append(int(ids[cur]))
        chain = " -> ".join(map(str, loop)) + (f" -> {loop[0]}" if len(loop) <= 20 else " ...")
        raise ProductionDBError(f"{path}: table memory_facts: column 'supersedes_id': the chain of fact {loop[0]} "
                                f"loops ({chain}); rule: a fact supersedes only older facts, never itself")


def text_error(path: Path, sq: sqlite3.Connection, exc: sqlite3.Error, tables: tuple[str, ...] = (
        "memory_facts", "memory_evidence", "factmem_fact_state", "factmem_abstraction_examined",
        "factmem_abstraction_empty", "factmem_meta")) -> FactmemError:
    """What a read that failed with ``exc`` tells the user: for text that is not UTF-8 (SQLite stores
    any bytes as TEXT; Python's driver cannot decode them), the table, the row and the column of the
    first such value; else the driver's words. Run on the error path only (a scan in Python)."""
    if "decode" not in str(exc).lower():
        return ProductionDBError(f"{path}: cannot read: {exc}")
    present = {r[0] for r in sq.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()}
    columns = {t: [r[1] for r in sq.execute(f'PRAGMA table_info("{t}")').fetchall()] for t in tables if t in present}
    old_factory = sq.text_factory
    sq.text_factory = bytes  # (names read before: they would come back as bytes too)
    try:
        for table, cols in columns.items():
            texts = [c for c in cols
                     if sq.execute(f'SELECT 1 FROM "{table}" WHERE typeof("{c}") = \'text\' LIMIT 1').fetchone()]
            if not texts:
                continue
            cur = sq.execute(f'SELECT rowid, {", ".join(f"{chr(34)}{c}{chr(34)}" for c in texts)} FROM "{table}" '
                             "ORDER BY rowid")
            for row in cur:
                for col, value in zip(texts, row[1:]):
                    if isinstance(value, bytes):
                        try:
                            value.decode("utf-8")
                        except UnicodeDecodeError as bad:
                            return ProductionDBError(
                                f"{path}: table {table}: column {col!r}: rowid {row[0]}: text that is not UTF-8 "
                                f"({bad.reason} at byte {bad.start}: {value[:40]!r}); factmem reads TEXT as UTF-8 — "
                                "repair or re-encode the value")
    finally:
        sq.text_factory = old_factory
    return ProductionDBError(f"{path}: text that is not UTF-8 ({exc})")

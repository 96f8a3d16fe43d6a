"""The DuckDB schema of a fact store, and its version.

``memory_facts`` carries the seed's columns verbatim and in the seed's order, then factmem's:
``status_changed_at`` (when the fact left ``active``), ``status_reason`` (``decay``, ``pruned`` or
``contradiction``) and ``stale`` (a derived fact one of whose children was superseded or archived by
decay since it was derived).

``memory_abstraction_examined`` remembers every cluster membership an abstraction model answered
for (subject, sorted member ids, time, pass, and ``outcome``: ``derived`` or ``empty`` for ``[]``), so
that a pass over unchanged clusters makes no calls (see :mod:`factmem.store.examined`).

**Versions.** Schema 2 replaced schema 1's ``memory_abstraction_empty`` (the same columns, empty
answers only) by ``memory_abstraction_examined``. A schema-1 file opened for writing is migrated in
one transaction (:func:`factmem.store.examined.migrate_examined`: its rows become
``outcome = 'empty'`` rows); opened read-only it is read as it is (:data:`LEGACY_EXAMINED_SQL`).

**Compression named where DuckDB's choice is slow.** A file store compresses every row group as it is
written (inside the INSERT: that is most of what a file replay costs beyond an in-memory one).
``memory_evidence.message_id`` holds one distinct id a row; DuckDB's analysis picks FSST for it, which
cost ~0.3 s of CPU per million rows — as much as all the other evidence columns together. It is
declared ``USING COMPRESSION zstd``: ~5x cheaper to write, files ~10 % larger (measured on a 1M-event
replay: the writes' CPU 0.87 s → 0.67 s, the file 21 → 23 MB). Naming every other column's method too
saved nothing measurable. Files made before keep DuckDB's choice (it is a storage detail: readers
see the same column).

No index or key constraint sits on ``memory_facts``: ids are assigned by the store, and DuckDB
bulk-loads and scans much faster without an ART index (which would also hold every id in memory).

**Text columns from codes.** The low-cardinality text columns (``status``, ``status_reason``,
``kind``, evidence ``action`` and ``source``) are written from the engines' integer codes as
dictionary arrays (:func:`text_column` over :data:`STATUS_LABELS` and its siblings): DuckDB stores
small integers plus a few words far faster than a string a row.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from factmem.core.codes import KINDS, STATUSES, Status

__all__ = ["SCHEMA_VERSION", "SEED_FACT_COLUMNS", "FACT_COLUMNS", "EVIDENCE_COLUMNS", "LINK_COLUMNS", "DDL",
    "TABLES", "effective_sql", "text_column", "STATUS_LABELS", "REASON_LABELS", "KIND_LABELS", "ACTION_LABELS",
    "SOURCE_LABELS"]

#: the words of the text columns, indexed by the engines' codes (:func:`text_column`)
STATUS_LABELS = pa.array([Status(i).label for i in range(len(STATUSES))], pa.string())  # by Status
REASON_LABELS = pa.array(["contradiction", "decay"], pa.string())  # by Status - 1 (active has none)
KIND_LABELS = pa.array(list(KINDS), pa.string())  # by KIND_CODES
ACTION_LABELS = pa.array(["insert", "reinforce"], pa.string())
SOURCE_LABELS = pa.array(["observation"], pa.string())


def text_column(codes: np.ndarray, words: pa.Array, null: np.ndarray | None = None) -> pa.DictionaryArray:
    """A text column as a dictionary array: ``words[codes]``, null where ``null``."""
    indices = codes.astype(np.int8)
    if null is not None:
        indices = np.where(null, 0, indices).astype(np.int8)
    return pa.DictionaryArray.from_arrays(pa.array(indices, mask=null), words)

SCHEMA_VERSION = 2

SEED_FACT_COLUMNS: tuple[str, ...] = (
    "id", "subject", "predicate", "object", "note", "kind", "confidence", "reinforcement_count",
    "first_seen", "last_reinforced", "decay_rate", "status", "supersedes_id",
)
FACT_COLUMNS: tuple[str, ...] = SEED_FACT_COLUMNS + ("status_changed_at", "status_reason", "stale")
EVIDENCE_COLUMNS: tuple[str, ...] = (
    "id", "fact_id", "session_id", "message_id", "observed_at", "action", "confidence", "source",
)
LINK_COLUMNS: tuple[str, ...] = ("parent_id", "child_id", "created_at")


DDL = """
CREATE TABLE IF NOT EXISTS factmem_meta (
    key   VARCHAR PRIMARY KEY,
    value VARCHAR NOT NULL
);
CREATE TABLE IF NOT EXISTS memory_facts (
    id                  BIGINT NOT NULL,
    subject             VARCHAR NOT NULL,
    predicate           VARCHAR NOT NULL,
    object              VARCHAR NOT NULL,
    note                VARCHAR,
    kind                VARCHAR NOT NULL,
    confidence          DOUBLE NOT NULL,
    reinforcement_count BIGINT NOT NULL,
    first_seen          BIGINT NOT NULL,
    last_reinforced     BIGINT NOT NULL,
    decay_rate          DOUBLE NOT NULL,
    status              VARCHAR NOT NULL,
    supersedes_id       BIGINT,
    status_changed_at   BIGINT,
    status_reason       VARCHAR,
    stale               BOOLEAN NOT NULL DEFAULT false
);
CREATE TABLE IF NOT EXISTS memory_fact_links (
    parent_id   BIGINT NOT NULL,
    child_id    BIGINT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (parent_id, child_id)
);
CREATE TABLE IF NOT EXISTS memory_abstraction_examined (
    subject     VARCHAR NOT NULL,
    member_ids  BIGINT[] NOT NULL,  -- sorted
    examined_at BIGINT NOT NULL,
    pass_id     VARCHAR,
    outcome     VARCHAR NOT NULL    -- derived | empty
);
CREATE TABLE IF NOT EXISTS memory_evidence (
    id          BIGINT NOT NULL,
    fact_id     BIGINT NOT NULL,
    session_id  VARCHAR,
    message_id  VARCHAR USING COMPRESSION zstd,  -- unique per row: see the module docstring
    observed_at BIGINT NOT NULL,
    action      VARCHAR,   -- insert | reinforce (NULL in a production memory that does not record it)
    confidence  DOUBLE,    -- the fact's confidence right after this observation (idem)
    source      VARCHAR    -- observation | abstraction (idem)
);
"""

TABLES: tuple[str, ...] = ("memory_facts", "memory_fact_links", "memory_evidence")

EXAMINED_COLUMNS: tuple[str, ...] = ("subject", "member_ids", "examined_at", "pass_id", "outcome")

#: The examined records of a schema-1 file opened read-only (which cannot be migrated).
LEGACY_EXAMINED_SQL = ("(SELECT subject, list_sort(member_ids) AS member_ids, examined_at, pass_id, "
                       "'empty' AS outcome FROM memory_abstraction_empty)")


def effective_sql(at_param: str = "$at", prefix: str = "") -> str:
    """The seed's effective confidence as a DuckDB expression, evaluated inside the query."""
    p = prefix
    return (
        f"{p}confidence * exp(-{p}decay_rate * greatest(0.0, "
        f"CAST({at_param} - {p}last_reinforced AS DOUBLE) / 86400.0))"
    )

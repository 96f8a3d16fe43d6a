"""What the abstraction pass examined: every cluster membership a model answered for.

A mixin of :class:`factmem.store.factstore.FactStore`. ``memory_abstraction_examined`` holds one row
per answered call (append-only, like the evidence log):

* ``subject`` and ``member_ids`` — the cluster: the subject's active non-derived facts when the
  model was asked, their ids sorted;
* ``examined_at`` and ``pass_id`` — when, and in which pass;
* ``outcome`` — ``derived`` (the model proposed generalizations that were stored) or ``empty``
  (it answered ``[]``). Failed and skipped calls are not answers and leave no row.

The abstraction pass reads it to keep its rule "a pass over unchanged clusters makes no calls": a
membership that has a row was answered for, and asking again would repeat the question (see
:mod:`factmem.abstraction.passes` for how each ``link_scope`` uses it). Schema-1 files kept only the
empty answers, in ``memory_abstraction_empty``; a writable open migrates them
(:func:`migrate_examined`), a read-only open reads them as ``empty`` rows.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal, get_args

import duckdb
import pandas as pd

from factmem.core.timeutil import resolve_at
from factmem.errors import InputError
from factmem.store.base import StoreBase
from factmem.store.schema import LEGACY_EXAMINED_SQL

__all__ = ["ExaminedOutcome", "EXAMINED_OUTCOMES", "EXAMINED_TABLE", "ExaminedRecords", "migrate_examined"]

ExaminedOutcome = Literal["derived", "empty"]
#: The outcomes an examined-membership row records (an answer with items, or ``[]``).
EXAMINED_OUTCOMES: tuple[ExaminedOutcome, ...] = get_args(ExaminedOutcome)
EXAMINED_TABLE = "memory_abstraction_examined"


def migrate_examined(con: duckdb.DuckDBPyConnection, tables: set[str]) -> None:
    """Schema 1 → 2 inside the caller's transaction: ``memory_abstraction_empty`` rows (when the file
    has that table; the first schema-1 files did not) become ``outcome = 'empty'`` rows."""
    con.execute(f"""CREATE TABLE {EXAMINED_TABLE} (subject VARCHAR NOT NULL, member_ids BIGINT[] NOT NULL,
                    examined_at BIGINT NOT NULL, pass_id VARCHAR, outcome VARCHAR NOT NULL)""")
    if "memory_abstraction_empty" in tables:
        con.execute(f"INSERT INTO {EXAMINED_TABLE} SELECT subject, list_sort(member_ids), examined_at, pass_id, "
                    "'empty' FROM memory_abstraction_empty ORDER BY examined_at, subject")
        con.execute("DROP TABLE memory_abstraction_empty")
    con.execute("UPDATE factmem_meta SET value = '2' WHERE key = 'schema_version'")


class ExaminedRecords(StoreBase):
    """Examined-membership records (mixed into FactStore)."""

    #: The relation the examined records are read from: the table, or a schema-1 file's legacy one.
    _examined_sql: str = EXAMINED_TABLE

    @property
    def examined_relation(self) -> str:
        """SQL naming the examined records (``subject, member_ids, examined_at, pass_id, outcome``):
        the table, or for a schema-1 file opened read-only a subquery over its empty-answer table."""
        return self._examined_sql

    def _use_legacy_examined(self, tables: set[str]) -> None:
        """A schema-1 file opened read-only: read its empty-answer records, if it has any."""
        if "memory_abstraction_empty" in tables:
            self._examined_sql = LEGACY_EXAMINED_SQL
        else:
            self._examined_sql = ("(SELECT NULL::VARCHAR AS subject, []::BIGINT[] AS member_ids, 0::BIGINT AS "
                                  "examined_at, NULL::VARCHAR AS pass_id, 'empty' AS outcome WHERE false)")

    def record_examined(self, subject: str, member_ids: Iterable[int], outcome: ExaminedOutcome,
                        at: Any = None, pass_id: str | None = None) -> None:
        """Note that the abstraction model answered for this exact cluster (``outcome``: ``derived``
        or ``empty``). ``member_ids`` are stored sorted."""
        self._writable()
        if outcome not in EXAMINED_OUTCOMES:
            raise InputError(f"outcome must be one of {', '.join(EXAMINED_OUTCOMES)}, got {outcome!r}")
        if not isinstance(subject, str) or not subject:
            raise InputError(f"subject must be a non-empty string, got {subject!r}")
        if pass_id is not None and not isinstance(pass_id, str):
            raise InputError(f"pass_id must be a string or None, got {pass_id!r}")
        ids = sorted({int(i) for i in member_ids})
        with self._transaction():
            self._db.execute(f"INSERT INTO {EXAMINED_TABLE} VALUES (?, ?, ?, ?, ?)",
                            [subject, ids, resolve_at(at), pass_id, outcome])

    def record_empty_answer(self, subject: str, member_ids: Iterable[int], at: Any = None,
                            pass_id: str | None = None) -> None:
        """Note that the abstraction model found nothing to generalize in this exact cluster
        (``record_examined(..., "empty")``)."""
        self.record_examined(subject, member_ids, "empty", at=at, pass_id=pass_id)

    def examined(self, subject: str | None = None) -> pd.DataFrame:
        """The examined-membership records (of one subject, or all), by time then subject;
        ``member_ids`` as lists of ints."""
        where, args = ("WHERE subject = ?", [subject]) if subject is not None else ("", [])
        df = self._read(f"SELECT subject, member_ids, examined_at, pass_id, outcome FROM {self._examined_sql} "
                        f"{where} ORDER BY examined_at, subject, member_ids", args)
        df["member_ids"] = [[int(i) for i in ids] for ids in df["member_ids"]]
        return df

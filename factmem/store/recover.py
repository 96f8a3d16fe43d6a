"""Recovering a store that was not closed: apply the calls its journal holds, so that other tools
(DuckDB's own client, a read-only store, an export) read complete tables.

A store written behind (:mod:`factmem.store.writebehind`) keeps the calls it has not yet written to
the tables in its journal, ``<file>.journal``; opening the store for writing applies them. A program
killed before it closed its store leaves them there, and a reader that is not factmem does not see
them (a read-only FactStore refuses the file until they are applied). :func:`recover` — ``factmem
store recover DB`` — opens the store for writing once and closes it: the journal is applied and
removed, and the file alone holds every call that returned.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from factmem.errors import StoreError
from factmem.store.factstore import FactStore

__all__ = ["RecoverResult", "recover"]


@dataclass(frozen=True)
class RecoverResult:
    """What :func:`recover` did: ``applied`` calls of a journal written to ``path``'s tables."""

    path: Path
    applied: int
    facts: int

    def __str__(self) -> str:
        if not self.applied:
            return f"{self.path}: nothing to recover (no journal with pending calls); {self.facts} facts"
        return f"{self.path}: applied {self.applied} journaled calls; {self.facts} facts, no journal left"


def recover(path: str | os.PathLike) -> RecoverResult:
    """Apply a pending journal to the store file ``path`` (see the module docstring). A damaged
    journal is a :class:`~factmem.store.journal.JournalError` naming its line; nothing is applied."""
    path = Path(path)
    if not Path(os.path.realpath(path)).is_file():
        raise StoreError(f"{path}: no such store file")
    store = FactStore(path)
    try:
        applied = store.recovered_calls
        facts = len(store)
    finally:
        store.close()
    return RecoverResult(path, applied, facts)

"""Where ``remember`` finds the active facts of one (subject, predicate) without scanning the table.

``memory_facts`` has no index on purpose (an ART index would slow bulk ``ingest``/``replay`` and hold
every key in memory: see :mod:`factmem.store.schema`), so a ``WHERE subject = ? AND predicate = ?``
scans every row — milliseconds per call at a million facts. ``remember`` instead asks this in-process
map for *candidate* fact ids and reads only those rows (``id IN (…)``: DuckDB's zone maps on the
id column, which grows with insertion order, skip all but the row groups holding them).

The map is a superset of the truth, never a subset, and that is all its consistency needs:

* keys are the 64-bit ``md5`` of ``subject || chr(0) || predicate`` (DuckDB's ``md5_number_lower``,
  reproduced with :mod:`hashlib`), held in two sorted numpy arrays (hash, fact id) — 16 bytes per
  active fact — plus a small dict for facts added since;
* facts become active only when inserted, with the next id; so the map covers every fact with an id
  below ``covered``, and catches up on the rest (one query over the table's tail) before a lookup
  after a set-based write (``ingest``, ``replay``, an import): those writes do no work for it;
* a candidate may have left ``active`` (superseded, archived by ``consolidate``, pruned) or, after a
  hash collision, be another key's fact: ``remember`` verifies every candidate in SQL (status,
  subject, predicate) and the ones found inactive are dropped from the map (another key's stay);
* a rolled-back transaction may have numbered facts that no longer exist and will be renumbered:
  the store then discards the map (:meth:`KeyIndex.reset`), which is rebuilt at the next lookup
  from the active facts (one scan; a reopened store also builds it at its first ``remember``).

It is used under the store's lock, like everything else that touches the connection.
"""

from __future__ import annotations

import hashlib

import duckdb
import numpy as np

__all__ = ["KeyIndex", "key_hash"]

_HASH_SQL = "md5_number_lower(subject || chr(0) || predicate)"  # UBIGINT: viewed as int64 in numpy


def key_hash(subject: str, predicate: str) -> int:
    """The map's key: what ``md5_number_lower(subject || chr(0) || predicate)`` gives in DuckDB (the
    digest's bytes 8–15, little-endian), as a signed 64-bit integer."""
    digest = hashlib.md5((subject + "\0" + predicate).encode("utf-8")).digest()
    return int.from_bytes(digest[8:16], "little", signed=True)


class KeyIndex:
    """Candidate ids of the active facts of each (subject, predicate); see the module docstring."""

    #: merge the dict of recent additions into the arrays beyond this many keys
    MERGE_AT = 50_000
    #: above this many candidates for one key, the caller scans instead (a key with a huge history)
    MAX_CANDIDATES = 256

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget everything; the next lookup rebuilds from the table."""
        self.hashes = np.empty(0, np.int64)
        self.ids = np.empty(0, np.int64)
        self.recent: dict[int, list[int]] = {}
        self.dead: set[int] = set()
        self.covered = 0  # every active fact with an id below this is in the map
        self.built = False

    def _rows(self, con: duckdb.DuckDBPyConnection, from_id: int) -> tuple[np.ndarray, np.ndarray]:
        got = con.execute(f"SELECT {_HASH_SQL} AS h, id FROM memory_facts WHERE status = 'active' AND id >= ?",
                          [int(from_id)]).fetchnumpy()
        return np.asarray(got["h"], np.uint64).view(np.int64), np.asarray(got["id"], np.int64)

    def _set_arrays(self, hashes: np.ndarray, ids: np.ndarray) -> None:
        order = np.argsort(hashes, kind="stable")
        self.hashes, self.ids = hashes[order], ids[order]

    def _catch_up(self, con: duckdb.DuckDBPyConnection, next_fact_id: int) -> None:
        if not self.built:
            self.reset()
            hashes, ids = self._rows(con, 0)
            self._set_arrays(hashes, ids)
            self.built = True
        elif self.covered < next_fact_id:
            hashes, ids = self._rows(con, self.covered)
            if len(ids) > 1000:
                self._set_arrays(np.concatenate([self.hashes, hashes]), np.concatenate([self.ids, ids]))
            else:
                for h, i in zip(hashes.tolist(), ids.tolist()):  # a few facts: the tail of the last write
                    self.recent.setdefault(h, []).append(i)
        self.covered = next_fact_id
        if len(self.recent) > self.MERGE_AT or len(self.dead) > max(self.MERGE_AT, len(self.ids) // 2):
            self._compact()

    def _compact(self) -> None:
        """Fold the recent additions into the arrays and drop the ids known to be inactive."""
        extra_h = np.fromiter((h for h, ids in self.recent.items() for _ in ids), np.int64)
        extra_i = np.fromiter((i for ids in self.recent.values() for i in ids), np.int64)
        hashes, ids = np.concatenate([self.hashes, extra_h]), np.concatenate([self.ids, extra_i])
        if self.dead:
            keep = ~np.isin(ids, np.fromiter(self.dead, np.int64))
            hashes, ids = hashes[keep], ids[keep]
        self._set_arrays(hashes, ids)
        self.recent, self.dead = {}, set()

    def candidates(self, con: duckdb.DuckDBPyConnection, next_fact_id: int, subject: str,
                   predicate: str) -> list[int] | None:
        """Ids that may be active facts of (subject, predicate) — every active one among them — or
        None when there are too many to list (the caller then scans)."""
        if not self.built or self.covered < next_fact_id:
            self._catch_up(con, next_fact_id)
        h = key_hash(subject, predicate)
        lo, hi = int(np.searchsorted(self.hashes, h, "left")), int(np.searchsorted(self.hashes, h, "right"))
        found = self.ids[lo:hi].tolist() + self.recent.get(h, [])
        if self.dead:
            found = [i for i in found if i not in self.dead]
        return found if len(found) <= self.MAX_CANDIDATES else None

    def settle(self, inactive: list[int]) -> None:
        """Record candidates found no longer active (a candidate of another key — a hash collision —
        stays: it is that key's)."""
        if inactive and self.built:
            self.dead.update(int(i) for i in inactive)

    def added(self, subject: str, predicate: str, fact_id: int) -> None:
        """A fact ``remember`` just inserted (with the store's next id)."""
        if not self.built:
            return  # the first lookup builds the map from the table, this fact included
        self.recent.setdefault(key_hash(subject, predicate), []).append(int(fact_id))
        if self.covered == fact_id:
            self.covered = fact_id + 1

    def removed(self, fact_id: int) -> None:
        """A fact that left ``active`` (superseded by ``remember``)."""
        if self.built:
            self.dead.add(int(fact_id))

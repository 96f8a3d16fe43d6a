"""Rows grouped by a 64-bit key hash: the write-behind state's index (:mod:`factmem.store.active`).

:class:`HashChains` maps each hash to the rows added under it, in the order they were added: an
open-addressing table (linear probing, at most half full, a power of two in size) holds per hash
its newest row, and ``older[row]`` links each row to the one added before it under the same hash
(-1: the first). The hashes are already well mixed (SplitMix64's finalizer,
:mod:`factmem.store.keyhash`), so a hash's slot is its low bits.

* :meth:`HashChains.add` — rows with their hashes, each appended to its hash's group: O(1) a row,
  whatever the number of rows already held (the sorted index it replaces merged a tail of
  appended rows into a sorted array at every batch, and re-sorted everything past 65,536);
* :meth:`HashChains.find` — for each wanted hash, every row added under it, oldest first, as
  (index into the wanted hashes, row) pairs grouped by wanted hash: O(rows found).

Rows are never removed one by one: a row that left the active set stays until the state is
compacted, and then the chains are built again (:meth:`HashChains.of`). Different keys whose hashes
collide share a group; the caller checks every row found against its key.

>>> import numpy as np
>>> chains = HashChains.of(np.array([7, 3, 7, -2], dtype=np.int64))
>>> chains.add(np.array([4]), np.array([3], dtype=np.int64))
>>> [a.tolist() for a in chains.find(np.array([7, 3, 5], dtype=np.int64))]
[[0, 0, 1, 1], [0, 2, 1, 4]]
"""

from __future__ import annotations

import numpy as np

from factmem.core.compiled import njit

__all__ = ["HashChains"]

_EMPTY = -1  # a slot holding no hash (its newest row); a row with no older one


@njit
def _insert(slot_hash, slot_newest, older, rows, hashes):  # pragma: no cover - compiled
    """Append each row to its hash's group; returns how many hashes were new to the table."""
    mask = len(slot_hash) - 1
    added = 0
    for i in range(len(rows)):
        h = hashes[i]
        row = rows[i]
        s = h & mask
        while True:
            newest = slot_newest[s]
            if newest == _EMPTY:
                slot_hash[s] = h
                older[row] = _EMPTY
                added += 1
                break
            if slot_hash[s] == h:
                older[row] = newest
                break
            s = (s + 1) & mask
        slot_newest[s] = row
    return added


@njit
def _rehash(old_hash, old_newest, slot_hash, slot_newest):  # pragma: no cover - compiled
    """The occupied slots of a table moved into a larger empty one (the chains stay as they are)."""
    mask = len(slot_hash) - 1
    for s in range(len(old_hash)):
        if old_newest[s] != _EMPTY:
            t = old_hash[s] & mask
            while slot_newest[t] != _EMPTY:
                t = (t + 1) & mask
            slot_hash[t] = old_hash[s]
            slot_newest[t] = old_newest[s]


@njit
def _find(slot_hash, slot_newest, older, wanted):  # pragma: no cover - compiled
    """(wanted index, row) for every row of every wanted hash, grouped by wanted index, each group
    oldest first (its chain is newest first: filled from the group's end)."""
    mask = len(slot_hash) - 1
    n = len(wanted)
    newest = np.empty(n, np.int64)
    count = np.zeros(n, np.int64)
    total = 0
    for i in range(n):
        h = wanted[i]
        s = h & mask
        found = _EMPTY
        while slot_newest[s] != _EMPTY:
            if slot_hash[s] == h:
                found = slot_newest[s]
                break
            s = (s + 1) & mask
        newest[i] = found
        row = found
        while row != _EMPTY:
            count[i] += 1
            row = older[row]
        total += count[i]
    query = np.empty(total, np.int64)
    rows = np.empty(total, np.int64)
    end = 0
    for i in range(n):
        end += count[i]
        j = end
        row = newest[i]
        while row != _EMPTY:
            j -= 1
            query[j] = i
            rows[j] = row
            row = older[row]
    return query, rows


def _table_size(hashes: int) -> int:
    """The slots for this many distinct hashes: a power of two, at most half of them used."""
    return 1 << max(4, int(2 * hashes - 1).bit_length())


class HashChains:
    """Rows grouped by key hash, each group in the order its rows were added (the module docstring)."""

    def __init__(self, rows: int = 0, hashes: int = 0) -> None:
        size = _table_size(hashes)
        self.slot_hash = np.zeros(size, np.int64)
        self.slot_newest = np.full(size, _EMPTY, np.int64)
        self.older = np.full(max(rows, 16), _EMPTY, np.int64)
        self.hashes = 0  # distinct hashes held

    @classmethod
    def of(cls, hashes: np.ndarray, rows: np.ndarray | None = None) -> HashChains:
        """The chains of ``rows`` (default: ``0 .. len(hashes) - 1``) added in that order, ``hashes[i]``
        being the hash of ``rows[i]``."""
        rows = np.arange(len(hashes), dtype=np.int64) if rows is None else rows
        chains = cls(int(rows.max()) + 1 if len(rows) else 0, len(hashes))
        chains.add(rows, hashes)
        return chains

    def add(self, rows: np.ndarray, hashes: np.ndarray) -> None:
        """Append each of ``rows`` (new to the chains) to the group of its hash, in the order given."""
        if not len(rows):
            return
        top = int(rows.max())
        if top >= len(self.older):
            grown = np.full(max(2 * len(self.older), top + 1), _EMPTY, np.int64)
            grown[:len(self.older)] = self.older
            self.older = grown
        if 2 * (self.hashes + len(rows)) > len(self.slot_hash):  # (as if every hash were new: at most half full)
            size = _table_size(self.hashes + len(rows))
            slot_hash, slot_newest = np.zeros(size, np.int64), np.full(size, _EMPTY, np.int64)
            _rehash(self.slot_hash, self.slot_newest, slot_hash, slot_newest)
            self.slot_hash, self.slot_newest = slot_hash, slot_newest
        self.hashes += int(_insert(self.slot_hash, self.slot_newest, self.older,
                                   np.ascontiguousarray(rows, np.int64), np.ascontiguousarray(hashes, np.int64)))

    def find(self, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(index into ``wanted``, row) for every row added under each wanted hash: grouped by wanted
        index in ascending order, each group oldest row first."""
        return _find(self.slot_hash, self.slot_newest, self.older, np.ascontiguousarray(wanted, np.int64))

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
  (index into the wanted hashes, row) pairs grouped by wanted hash: O(rows found);
  :meth:`HashChains.rows_of` the same for one hash, as a list.

**A single call never starts the compiler.** A process's first compiled call costs ~0.4 s (Numba's
code generator starting, whatever its on-disk cache holds) — more than the whole first
``remember()`` may take. So the chains are built (:meth:`HashChains.of`), and the table grown, with
numpy: the rows grouped by a packed sort on (home slot, hash, position), each linked to the one
before it in its group; the distinct hashes, in order of home slot, each take their home slot or
the slot after the hash before them, whichever is later (a running maximum); the few pushed past
the table's end wrap to its start in numpy rounds (:func:`_place`). Every slot between a hash's home
and its place is held, so a probe finds it: a linear-probing table like the one the compiled loop
fills, perhaps arranged otherwise. One row added or looked up (a ``remember`` call) is a short loop
in Python over the numpy arrays; only a batch's rows (``add``, ``find``) run compiled — so the
first batch a process ingests pays that start once, as its first ``replay()`` does. Measured on a
year of daily batches (2,740 events each, a file store): the lookups and appends took ~0.35 s less
than with the sorted index they replace, about what that start costs — a gain for a process that
runs on (or has started Numba already), about even for one that ingests a year and exits. The
tests hold the two ways of filling and of reading a table to the same groups.

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
_ONE_BY_ONE = 4  # rows added at once up to this many: a loop in Python (a call's), beyond it compiled


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


def _fill(slot_hash: np.ndarray, slot_newest: np.ndarray, distinct: np.ndarray, newest: np.ndarray,
          in_home_order: bool = False) -> None:
    """Fill an empty table with distinct hashes and their newest rows by linear probing, in order of
    home slot: each hash takes its home slot or the one after the hash before it, whichever is
    later — a running maximum (slot minus rank never decreases). The few pushed past the table's
    end wrap around to its start (:func:`_place`)."""
    size = len(slot_hash)
    home = distinct & np.int64(size - 1)
    if not in_home_order:
        by_home = np.argsort(home, kind="stable")
        distinct, newest, home = distinct[by_home], newest[by_home], home[by_home]
    rank = np.arange(len(distinct), dtype=np.int64)
    slot = np.maximum.accumulate(home - rank) + rank
    inside = slot < size
    slot_hash[slot[inside]], slot_newest[slot[inside]] = distinct[inside], newest[inside]
    if not inside.all():
        _place(slot_hash, slot_newest, distinct[~inside], newest[~inside])


def _place(slot_hash: np.ndarray, slot_newest: np.ndarray, hashes: np.ndarray, newest: np.ndarray) -> None:
    """Put distinct ``hashes`` (none in the table yet) with their newest rows into the table, by linear
    probing in numpy rounds: in each, every hash not yet placed tries the next slot of its probe
    sequence, and of several trying one empty slot one takes it (the one whose write numpy's
    scatter leaves: the same in every run). Every slot a hash passed is held by then, so a probe
    from its home slot finds it."""
    mask = np.int64(len(slot_hash) - 1)
    waiting = np.arange(len(hashes))
    slot = hashes & mask
    while waiting.size:
        trying = slot[waiting]
        free = np.flatnonzero(slot_newest[trying] == _EMPTY)
        hopeful, target = waiting[free], trying[free]
        slot_hash[target] = hashes[hopeful]  # (several writes to one slot: one stays, and took the slot)
        took = slot_hash[target] == hashes[hopeful]  # (the hashes are distinct)
        slot_newest[target[took]] = newest[hopeful[took]]
        left = np.ones(len(waiting), bool)
        left[free[took]] = False
        waiting = waiting[left]
        slot[waiting] = (slot[waiting] + 1) & mask


def _by_home_then_hash(hashes: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The order of positions by (home slot in a table of ``size``, hash, position), and the hashes in
    it: each hash rotated so that its home slot's bits lead, its top bits cleared for the position,
    and the packed numbers sorted as plain numbers (np.sort: about twice as fast as a stable
    argsort); the rare runs sharing their kept bits are then put in order by a lexsort."""
    n = len(hashes)
    home_bits = size.bit_length() - 1
    keyed = hashes.view(np.uint64)
    if home_bits:
        keyed = (keyed >> np.uint64(home_bits)) | (keyed << np.uint64(64 - home_bits))  # home slot's bits on top
    position_bits = max(int(n - 1).bit_length(), 1)
    low = np.uint64((1 << position_bits) - 1)
    packed = np.sort((keyed & ~low) | np.arange(n, dtype=np.uint64))
    order = (packed & low).astype(np.int64)
    kept = packed >> np.uint64(position_bits)
    tie = np.flatnonzero(kept[1:] == kept[:-1])  # neighbours sharing their kept bits
    if tie.size:
        member = np.zeros(n, bool)
        member[tie] = member[tie + 1] = True
        at = np.flatnonzero(member)  # runs in ascending kept bits: one sort of all keeps each in its place
        order[at] = order[at][np.lexsort((order[at], keyed[order[at]]))]
    return order, hashes[order]


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
        size = _table_size(hashes)  # (room for this many distinct hashes)
        self.slot_hash = np.zeros(size, np.int64)
        self.slot_newest = np.full(size, _EMPTY, np.int64)
        self.older = np.full(max(rows, 16), _EMPTY, np.int64)
        self.hashes = 0  # distinct hashes held

    @classmethod
    def of(cls, hashes: np.ndarray, rows: np.ndarray | None = None) -> HashChains:
        """The chains of ``rows`` (default: ``0 .. len(hashes) - 1``) added in that order, ``hashes[i]``
        being the hash of ``rows[i]`` — built with numpy, no compiled code (the module docstring)."""
        rows = np.arange(len(hashes), dtype=np.int64) if rows is None else np.asarray(rows, np.int64)
        hashes = np.asarray(hashes, np.int64)
        chains = cls(int(rows.max()) + 1 if len(rows) else 0, len(rows))
        if not len(rows):
            return chains
        size = len(chains.slot_hash)
        order, grouped = _by_home_then_hash(hashes, size)
        grouped_rows = rows[order]
        starts = np.ones(len(grouped), bool)
        starts[1:] = grouped[1:] != grouped[:-1]
        chains.older[grouped_rows] = np.where(starts, _EMPTY, np.roll(grouped_rows, 1))
        ends = np.append(starts[1:], True)
        distinct, newest = grouped[ends], grouped_rows[ends]  # in order of their home slot
        _fill(chains.slot_hash, chains.slot_newest, distinct, newest, in_home_order=True)
        chains.hashes = len(distinct)
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
            held = self.slot_newest != _EMPTY
            distinct, newest = self.slot_hash[held], self.slot_newest[held]
            size = _table_size(self.hashes + len(rows))
            self.slot_hash, self.slot_newest = np.zeros(size, np.int64), np.full(size, _EMPTY, np.int64)
            _fill(self.slot_hash, self.slot_newest, distinct, newest)
        if len(rows) <= _ONE_BY_ONE:  # a call's row or two: no compiled code (the module docstring)
            for row, h in zip(rows.tolist(), np.asarray(hashes, np.int64).tolist()):
                self._add_one(row, h)
            return
        self.hashes += int(_insert(self.slot_hash, self.slot_newest, self.older,
                                   np.ascontiguousarray(rows, np.int64), np.ascontiguousarray(hashes, np.int64)))

    def _slot_of(self, h: int) -> int:
        """The slot holding hash ``h``, or the empty slot where its probe sequence ends."""
        mask = len(self.slot_hash) - 1
        s = h & mask
        while self.slot_newest[s] != _EMPTY and self.slot_hash[s] != h:
            s = (s + 1) & mask
        return s

    def _add_one(self, row: int, h: int) -> None:
        s = self._slot_of(h)
        newest = int(self.slot_newest[s])
        if newest == _EMPTY:
            self.slot_hash[s] = h
            self.hashes += 1
        self.older[row] = newest
        self.slot_newest[s] = row

    def rows_of(self, h: int) -> list[int]:
        """Every row added under hash ``h``, oldest first (one call's key: no compiled code)."""
        rows = []
        row = int(self.slot_newest[self._slot_of(h)])
        while row != _EMPTY:
            rows.append(row)
            row = int(self.older[row])
        return rows[::-1]

    def find(self, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(index into ``wanted``, row) for every row added under each wanted hash: grouped by wanted
        index in ascending order, each group oldest row first."""
        return _find(self.slot_hash, self.slot_newest, self.older, np.ascontiguousarray(wanted, np.int64))

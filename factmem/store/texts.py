"""The text columns of the write-behind state (:mod:`factmem.store.active`): the key and the object of
every active fact, without a Python string per row.

A :class:`Texts` holds rows ``[0, n_base)`` as the Arrow array read from the table (in the table's
order; ``order`` maps a row to its place there) and the rows appended by calls since as Python
strings; it is indexed like a numpy column (one row gives a ``str``, an array of rows an object
array) and gives Arrow arrays of rows (:meth:`Texts.arrow`) without spelling the base's strings in
Python. The base is never changed in place. :class:`KeyTexts` is the key column
(:func:`~factmem.store.calls.state_key`), spelled from the subject and predicate columns only when a
row is compared.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from factmem.errors import StoreError
from factmem.store.calls import state_key
from factmem.store.keyhash import state_keys

__all__ = ["Texts", "KeyTexts"]


class Texts:
    """A text column of the state: rows ``[0, n_base)`` in Arrow (read from the table as it is, in the
    table's order: opening makes no Python string a row; ``order`` maps a row to its place there),
    rows after them Python strings (``extra``, appended by calls). Indexed like a numpy column: one
    row gives a ``str``, an array of rows an object array."""

    def __init__(self, base: pa.Array | pa.ChunkedArray, capacity: int, order: np.ndarray | None = None):
        self.base = base
        self.order = None if order is None else np.asarray(order, np.int64)  # None: the identity
        self.n_base = len(base)
        self.extra = np.empty(max(capacity - self.n_base, 0), object)  # (an empty object array holds None)

    def _at(self, rows: np.ndarray) -> pa.Array:
        return pa.array(rows if self.order is None else self.order[rows])

    def _base_take(self, rows: np.ndarray) -> pa.Array:
        """The base's strings of these rows (all below n_base)."""
        taken = self.base.take(self._at(rows)).cast(pa.string())
        return _flat(taken) if isinstance(taken, pa.ChunkedArray) else taken

    def _base_one(self, r: int) -> str:
        return self.base[r if self.order is None else int(self.order[r])].as_py()

    def __len__(self) -> int:
        return self.n_base + len(self.extra)

    def __getitem__(self, rows: Any) -> Any:
        if isinstance(rows, (int, np.integer)):
            r = int(rows)
            return self.extra[r - self.n_base] if r >= self.n_base else self._base_one(r)
        rows = np.asarray(rows, np.int64)
        out = np.empty(len(rows), object)
        old = rows < self.n_base
        if old.any():
            out[old] = self._base_take(rows[old]).to_numpy(zero_copy_only=False)
        if not old.all():
            out[~old] = self.extra[rows[~old] - self.n_base]
        return out

    def __setitem__(self, rows: Any, values: Any) -> None:
        """Rows appended since the base (the base is never changed in place)."""
        if isinstance(rows, (int, np.integer)):  # a call's new fact: no numpy call (~5 us each) for one row
            if rows < self.n_base:
                raise StoreError("internal: a text column of the write-behind state changed in place")
            self.extra[int(rows) - self.n_base] = values
            return
        at = np.asarray(rows, np.int64) - self.n_base
        if (np.atleast_1d(at) < 0).any():
            raise StoreError("internal: a text column of the write-behind state changed in place")
        self.extra[at] = values.to_numpy(zero_copy_only=False) if isinstance(values, (pa.Array, pa.ChunkedArray)) \
            else values

    def arrow(self, rows: np.ndarray) -> pa.Array:
        """These rows as an Arrow string array: the base's taken in Arrow (no Python string made), the
        appended ones' from their strings, then put in the rows' order."""
        rows = np.asarray(rows, np.int64)
        if not len(rows) or rows.max() < self.n_base:
            return self._base_take(rows)
        new = rows >= self.n_base
        appended = pa.array(self.extra[rows[new] - self.n_base], pa.string())
        if new.all():
            return appended
        old = ~new
        both = pa.concat_arrays([self._base_take(rows[old]), appended])
        place = np.empty(len(rows), np.int64)  # where each row's string is in ``both``
        n_old = int(old.sum())
        place[old], place[new] = np.arange(n_old), np.arange(n_old, len(rows))
        return both.take(pa.array(place))

    def equal(self, rows: np.ndarray, other: pa.Array) -> np.ndarray:
        """Whether row ``rows[i]`` holds ``other[i]`` (a bool array)."""
        return np.asarray(pc.equal(self.arrow(rows), other.cast(pa.string())), bool)

    def grown(self, capacity: int) -> Texts:
        more = capacity - len(self)
        if more > 0:
            self.extra = np.concatenate([self.extra, np.empty(more, object)])
        return self

    def reordered(self, order: np.ndarray, n: int) -> Texts:
        """Rows ``order`` (of the first ``n``) as the new rows 0.., all in a new base."""
        whole = pa.concat_arrays([self._base_take(np.arange(self.n_base)),
                                  pa.array(self.extra[:max(n - self.n_base, 0)], pa.string())])
        return Texts(whole.take(pa.array(np.asarray(order, np.int64))), len(self))


class KeyTexts(Texts):
    """The key column (:func:`~factmem.store.calls.state_key`) of the rows read from the table, spelled
    from their subject and predicate only when a row is compared (``base``: the subjects)."""

    def __init__(self, subjects: pa.ChunkedArray, predicates: pa.ChunkedArray, capacity: int,
                 order: np.ndarray | None = None):
        super().__init__(subjects, capacity, order)
        self.predicates = predicates

    def _base_take(self, rows: np.ndarray) -> pa.Array:
        at = self._at(rows)
        return state_keys(self.base.take(at), self.predicates.take(at))

    def _base_one(self, r: int) -> str:
        i = int(self.order[r]) if self.order is not None else r
        return state_key(self.base[i].as_py(), self.predicates[i].as_py())


def _flat(col: pa.ChunkedArray) -> pa.Array:
    return col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)

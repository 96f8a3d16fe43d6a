"""The text columns of the write-behind state (:mod:`factmem.store.active`): the key and the object of
every active fact, without a Python string per row.

A :class:`Texts` holds rows ``[0, n_base)`` as the Arrow array read from the table (in the table's
order; ``order`` maps a row to its place there) and the rows appended by calls since — a batch's
as the Arrow array it came in (no Python string per row), a single call's as its string until the
rows are next read in Arrow; it is indexed like a numpy column (one row gives a ``str``, an array of rows an object
array) and gives Arrow arrays of rows (:meth:`Texts.arrow`) without spelling the base's strings in
Python. The base is never changed in place. :class:`KeyTexts` is the key column
(:func:`~factmem.store.calls.state_key`), spelled from the subject and predicate columns only when a
row is compared.

:meth:`Texts.equal` — whether rows hold given strings (a batch's lookup checks the rows its key
hashes found against the keys themselves) — and :meth:`Texts.positions` — where rows' strings are
among distinct ones (the found facts' objects in the batch's object dictionary) — compare the bytes
where they are, compiled: a key row read from the table against its subject and predicate,
unspelled; no Arrow array of the rows is made (the take, concatenation and reordering of
:meth:`Texts.arrow`, then ``pc.equal`` or ``pc.index_in``). They run for batches only: a single call
never starts the compiler (:mod:`factmem.store.hashchains`).
"""

from __future__ import annotations

import bisect
from typing import Any

import numpy as np
import pyarrow as pa

from factmem.core.compiled import njit
from factmem.errors import StoreError
from factmem.store.calls import state_key
from factmem.store.keyhash import as_text, state_keys, string_buffers

__all__ = ["Texts", "KeyTexts"]


@njit(inline=True)
def _same(a_data, a0, a1, b_data, b0, b1):  # pragma: no cover - compiled
    """Whether bytes ``a_data[a0:a1]`` equal ``b_data[b0:b1]``."""
    if a1 - a0 != b1 - b0:
        return False
    for j in range(a1 - a0):
        if a_data[a0 + j] != b_data[b0 + j]:
            return False
    return True


@njit(inline=True)
def _same_key(w_data, w0, w1, s_data, s0, s1, p_data, p0, p1):  # pragma: no cover - compiled
    """Whether bytes ``w_data[w0:w1]`` are the key ``f"{len(s)}\0{s}\0{p}"`` of subject ``s_data[s0:s1]``
    and predicate ``p_data[p0:p1]`` (``len`` in code points: the bytes that do not continue one)."""
    chars = 0
    for j in range(s0, s1):
        if (s_data[j] & 0xC0) != 0x80:
            chars += 1
    digits = 1
    t = chars
    while t >= 10:
        t //= 10
        digits += 1
    if w1 - w0 != digits + 1 + (s1 - s0) + 1 + (p1 - p0):
        return False
    t = chars
    for d in range(digits - 1, -1, -1):
        if w_data[w0 + d] != 48 + t % 10:
            return False
        t //= 10
    at = w0 + digits
    if w_data[at] != 0 or w_data[at + 1 + (s1 - s0)] != 0:
        return False
    return _same(w_data, at + 1, at + 1 + (s1 - s0), s_data, s0, s1) and _same(w_data, w1 - (p1 - p0), w1, p_data, p0, p1)


@njit
def _holds(rows, at, w_off, w_data, n_base, order, b_off, b_data, spelled, p_off, p_data, a_off, a_data
           ):  # pragma: no cover - compiled
    """Whether row ``rows[i]`` holds string ``at[i]`` of (``w_off``, ``w_data``): a base row ``r`` at
    ``order[r]`` (``order`` empty: at ``r``) of the base's buffers — spelled, or (``spelled`` false) a
    key made of a subject there and a predicate in (``p_off``, ``p_data``) — an appended row at
    ``r - n_base`` of the appended rows' buffers."""
    out = np.empty(len(rows), np.bool_)
    for i in range(len(rows)):
        r = rows[i]
        w0, w1 = w_off[at[i]], w_off[at[i] + 1]
        if r >= n_base:
            a = r - n_base
            out[i] = _same(w_data, w0, w1, a_data, a_off[a], a_off[a + 1])
        else:
            j = order[r] if len(order) else r
            if spelled:
                out[i] = _same(w_data, w0, w1, b_data, b_off[j], b_off[j + 1])
            else:
                out[i] = _same_key(w_data, w0, w1, b_data, b_off[j], b_off[j + 1], p_data, p_off[j], p_off[j + 1])
    return out


_FNV_OFFSET, _FNV_PRIME = np.uint64(0xCBF29CE484222325), np.uint64(0x100000001B3)


@njit(inline=True)
def _fnv(data, a0, a1):  # pragma: no cover - compiled
    """FNV-1a over bytes ``data[a0:a1]`` (a probe's hash: any well-spread one serves)."""
    h = _FNV_OFFSET
    for j in range(a0, a1):
        h = (h ^ np.uint64(data[j])) * _FNV_PRIME
    return h


@njit
def _positions(rows, n_base, order, b_off, b_data, a_off, a_data, w_off, w_data):  # pragma: no cover - compiled
    """For each row (as :func:`_holds` reads it), the position of its string among the distinct
    strings ``w`` (an open-addressing table of them, built here), or -1."""
    n_words = len(w_off) - 1
    size = 2
    while size < 2 * n_words:
        size *= 2
    mask = np.uint64(size - 1)
    slots = np.full(size, -1, np.int64)
    for w in range(n_words):
        h = _fnv(w_data, w_off[w], w_off[w + 1]) & mask
        while slots[h] != -1:
            h = (h + np.uint64(1)) & mask
        slots[h] = w
    out = np.empty(len(rows), np.int64)
    for i in range(len(rows)):
        r = rows[i]
        if r >= n_base:
            data = a_data
            r0, r1 = np.int64(a_off[r - n_base]), np.int64(a_off[r - n_base + 1])
        else:
            j = order[r] if len(order) else r
            data = b_data
            r0, r1 = np.int64(b_off[j]), np.int64(b_off[j + 1])
        found = -1
        h = _fnv(data, r0, r1) & mask
        while slots[h] != -1:
            w = slots[h]
            if _same(data, r0, r1, w_data, w_off[w], w_off[w + 1]):
                found = w
                break
            h = (h + np.uint64(1)) & mask
        out[i] = found
    return out


def _nulls(strings: pa.Array, at: np.ndarray) -> np.ndarray:
    """Whether ``strings[at[i]]`` is null (only called for an array that has nulls)."""
    return np.asarray(strings.is_null(), bool)[at]


class Texts:
    """A text column of the state: rows ``[0, n_base)`` in Arrow (read from the table as it is, in the
    table's order: opening makes no Python string a row; ``order`` maps a row to its place there),
    rows after them appended by calls — a batch's as the Arrow array it came in, a single call's as
    its Python string until the rows are next read in Arrow. Indexed like a numpy column: one row
    gives a ``str``, an array of rows an object array; a row never written holds None."""

    def __init__(self, base: pa.Array | pa.ChunkedArray, capacity: int, order: np.ndarray | None = None):
        self.base = base
        self.order = None if order is None else np.asarray(order, np.int64)  # None: the identity
        self.n_base = len(base)
        self.capacity = max(capacity, self.n_base)
        # appended rows [n_base, n_base + n_appended): ``parts`` (Arrow, in row order; joined into one when
        # read in Arrow), then ``singles`` (one call's string each, made a part when read in Arrow)
        self.parts: list[pa.Array] = []
        self._ends: list[int] = []  # where each part ends, counted in appended rows
        self.n_parts = 0  # rows in parts
        self.singles: list[str | None] = []

    @property
    def n_appended(self) -> int:
        return self.n_parts + len(self.singles)

    def _at(self, rows: np.ndarray) -> pa.Array:
        return pa.array(rows if self.order is None else self.order[rows])

    def _base_take(self, rows: np.ndarray) -> pa.Array:
        """The base's strings of these rows (all below n_base)."""
        taken = self._flat_base().take(self._at(rows)).cast(pa.string())
        return _flat(taken) if isinstance(taken, pa.ChunkedArray) else taken

    def _flat_base(self) -> pa.Array:
        """The base as one array, made so at the first batch read: ``take`` from a table's chunked column
        costs ~15x a take from one array (0.9 ms against 0.06 for 1,500 rows of 830k), and a single
        call's row (:meth:`_base_one`) reads the chunks as they are (opening copies nothing)."""
        if isinstance(self.base, pa.ChunkedArray):
            self.base = _flat(self.base)
        return self.base

    def _base_one(self, r: int) -> str:
        return self.base[r if self.order is None else int(self.order[r])].as_py()

    def _seal(self) -> None:
        """The single calls' strings so far as a part."""
        if self.singles:
            singles, self.singles = self.singles, []
            self._add_part(pa.array(singles, pa.string()))

    def _appended(self, upto: int) -> pa.Array:
        """The appended rows as one Arrow array, at least ``upto`` long (rows never written: null)."""
        self._seal()
        if len(self.parts) != 1:
            joined = pa.concat_arrays(self.parts) if self.parts else pa.array([], pa.string())
            self.parts, self._ends = [joined], [self.n_parts]
        if upto > self.n_parts:
            return pa.concat_arrays([self.parts[0], pa.nulls(upto - self.n_parts, pa.string())])
        return self.parts[0]

    def _add_part(self, values: pa.Array) -> None:
        self.parts.append(values)
        self.n_parts += len(values)
        self._ends.append(self.n_parts)

    def _pad_to(self, appended_index: int) -> None:
        """Rows skipped before ``appended_index`` (a column a batch's rows do not set) hold None."""
        gap = appended_index - self.n_appended
        if gap < 0:
            raise StoreError("internal: a text column of the write-behind state changed in place")
        if gap:
            if self.singles or gap <= 8:
                self.singles.extend([None] * gap)
            else:
                self._add_part(pa.nulls(gap, pa.string()))

    def __len__(self) -> int:
        return self.capacity

    def __getitem__(self, rows: Any) -> Any:
        if isinstance(rows, (int, np.integer)):
            r = int(rows)
            if r < self.n_base:
                return self._base_one(r)
            a = r - self.n_base
            if a >= self.n_appended:
                return None
            if a >= self.n_parts:
                return self.singles[a - self.n_parts]
            # (a single call reads its row where it is: joining the parts here would copy them every call)
            part = bisect.bisect_right(self._ends, a)
            return self.parts[part][a - (self._ends[part - 1] if part else 0)].as_py()
        return self.arrow(np.asarray(rows, np.int64)).to_numpy(zero_copy_only=False)

    def __setitem__(self, rows: Any, values: Any) -> None:
        """Rows appended since the base, in row order (the base is never changed in place)."""
        if isinstance(rows, (int, np.integer)):  # a call's new fact: no numpy call (~5 us each) for one row
            self._pad_to(int(rows) - self.n_base)
            self.singles.append(values)
            return
        at = np.asarray(rows, np.int64) - self.n_base
        if not len(at):
            return
        if (at[1:] != at[:-1] + 1).any():
            raise StoreError("internal: rows appended to a text column of the write-behind state out of order")
        self._pad_to(int(at[0]))
        self._seal()  # (a part follows the singles before it)
        if isinstance(values, pa.ChunkedArray):
            values = _flat(values)
        self._add_part(values.cast(pa.string()) if isinstance(values, pa.Array) else pa.array(values, pa.string()))

    def arrow(self, rows: np.ndarray) -> pa.Array:
        """These rows as an Arrow string array: the base's and the appended rows' taken in Arrow (no
        Python string made), then put in the rows' order."""
        rows = np.asarray(rows, np.int64)
        if not len(rows) or rows.max() < self.n_base:
            return self._base_take(rows)
        new = rows >= self.n_base
        appended = self._appended(int(rows.max()) + 1 - self.n_base).take(pa.array(rows[new] - self.n_base))
        if new.all():
            return appended
        old = ~new
        both = pa.concat_arrays([self._base_take(rows[old]), appended])
        place = np.empty(len(rows), np.int64)  # where each row's string is in ``both``
        n_old = int(old.sum())
        place[old], place[new] = np.arange(n_old), np.arange(n_old, len(rows))
        return both.take(pa.array(place))

    def equal(self, rows: np.ndarray, strings: pa.Array, at: np.ndarray) -> np.ndarray:
        """Whether row ``rows[i]`` holds ``strings[at[i]]`` (a bool array; a null never matches), the
        bytes compared where they are, compiled (the module docstring)."""
        rows = np.asarray(rows, np.int64)
        at = np.asarray(at, np.int64)
        if not len(rows):
            return np.zeros(0, bool)
        wanted = as_text(strings)
        base, subjects_only, predicates, appended, order = self._compiled_parts(rows)
        out = _holds(rows, at, *string_buffers(wanted), self.n_base, order, *string_buffers(base), not subjects_only,
                     *string_buffers(predicates), *string_buffers(appended))
        # a null's bytes are empty, and no wanted string is then told from it: take nulls out by their mask
        if wanted.null_count:
            out &= ~_nulls(wanted, at)
        null = self._null_rows(rows, base, appended)
        if null is not None:
            out &= ~null
        return out

    def positions(self, rows: np.ndarray, words: pa.Array) -> np.ndarray:
        """Where row ``rows[i]``'s string is among the distinct strings ``words`` (int64; -1: not
        there, or a null), found by hash and compared byte by byte where the rows are, compiled (a
        batch's lookup of its rows' objects in its object dictionary: as ``pc.index_in`` of
        :meth:`arrow`, without making the rows an Arrow array). A plain text column only."""
        rows = np.asarray(rows, np.int64)
        if not len(rows):
            return np.zeros(0, np.int64)
        base, subjects_only, _, appended, order = self._compiled_parts(rows)
        if subjects_only:
            raise StoreError("internal: positions() of a key column")
        words = as_text(words)
        if words.null_count:
            raise StoreError("internal: positions() among strings with a null")
        out = _positions(rows, self.n_base, order, *string_buffers(base), *string_buffers(appended),
                         *string_buffers(words))
        null = self._null_rows(rows, base, appended)
        if null is not None:
            out[null] = -1
        return out

    def _compiled_parts(self, rows: np.ndarray) -> tuple[pa.Array, bool, pa.Array, pa.Array, np.ndarray]:
        """What the compiled passes read for these rows: the base's parts (:meth:`_base_parts`), the
        appended rows as one array, and the order (empty: the identity)."""
        base, subjects_only, predicates = self._base_parts()
        appended = self._appended(int(rows.max()) + 1 - self.n_base) if rows.max() >= self.n_base \
            else pa.array([], pa.string())
        order = self.order if self.order is not None else np.empty(0, np.int64)
        return base, subjects_only, predicates, appended, order

    def _null_rows(self, rows: np.ndarray, base: pa.Array, appended: pa.Array) -> np.ndarray | None:
        """Which of ``rows`` hold null (None: none can) — the compiled passes read a null as empty."""
        new = rows >= self.n_base
        in_appended, in_base = bool(appended.null_count and new.any()), bool(base.null_count and not new.all())
        if not (in_appended or in_base):
            return None
        null = np.zeros(len(rows), bool)
        if in_appended:
            null[new] = _nulls(appended, rows[new] - self.n_base)
        if in_base:
            null[~new] = _nulls(base, rows[~new] if self.order is None else self.order[rows[~new]])
        return null

    def _base_parts(self) -> tuple[pa.Array, bool, pa.Array]:
        """The base as one text array; whether it holds only the subjects of keys (:class:`KeyTexts`),
        and then their predicates."""
        self.base = as_text(self._flat_base())
        return self.base, False, pa.array([], pa.string())

    def grown(self, capacity: int) -> Texts:
        self.capacity = max(self.capacity, capacity)
        return self

    def reordered(self, order: np.ndarray, n: int) -> Texts:
        """Rows ``order`` (of the first ``n``) as the new rows 0.., all in a new base."""
        parts = [self._base_take(np.arange(self.n_base))]
        if n > self.n_base:
            parts.append(self._appended(n - self.n_base).slice(0, n - self.n_base))
        whole = pa.concat_arrays(parts)
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
        if isinstance(self.predicates, pa.ChunkedArray):
            self.predicates = _flat(self.predicates)
        return state_keys(self._flat_base().take(at), self.predicates.take(at))

    def _base_one(self, r: int) -> str:
        i = int(self.order[r]) if self.order is not None else r
        return state_key(self.base[i].as_py(), self.predicates[i].as_py())

    def _base_parts(self) -> tuple[pa.Array, bool, pa.Array]:
        self.base = as_text(self._flat_base())
        if isinstance(self.predicates, pa.ChunkedArray):
            self.predicates = _flat(self.predicates)
        self.predicates = as_text(self.predicates)
        return self.base, True, self.predicates


def _flat(col: pa.ChunkedArray) -> pa.Array:
    return col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)

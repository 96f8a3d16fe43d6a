"""Whole-column helpers the scorers share: ranges covering indices, membership in sorted keys,
per-group minima, lexicographic ranks (of texts, of session ids), and cutting grouped rows into blocks.

>>> cover_count(4, np.array([0, 1]), np.array([2, 4])).tolist()
[1.0, 2.0, 1.0, 1.0]
>>> member(np.array([2, 5, 9]), np.array([5, 6])).tolist()
[True, False]
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from factmem.core.compiled import njit
from factmem.core.context_rule import lexicographic_rank
from factmem.errors import InputError

__all__ = ["sorted_unique", "cover_count", "member", "group_min", "lexicographic_rank", "blocks", "session_starts",
           "sorted_level", "triple_ranks"]


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """The distinct values, ascending — ``np.unique(values)`` by a sort (numpy 2.4's ``np.unique`` hashes
    integers first: ~100x slower on a million distinct int64 keys)."""
    s = np.sort(np.asarray(values), kind="stable")
    if len(s) < 2:
        return s
    keep = np.empty(len(s), bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def cover_count(n: int, lo: np.ndarray, hi: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """How many [lo, hi) index ranges cover each of 0..n-1 (empty ranges count nothing; with
    ``weights``, their sum); float64."""
    ok = hi > lo
    w = None if weights is None else weights[ok]
    d = np.bincount(lo[ok], weights=w, minlength=n + 1)[: n + 1] - np.bincount(hi[ok], weights=w, minlength=n + 1)[: n + 1]
    return np.cumsum(d[:-1], dtype=np.float64)


def member(sorted_keys: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Whether each ``query`` value is in ``sorted_keys`` (ascending)."""
    if not len(sorted_keys):
        return np.zeros(len(query), bool)
    pos = np.minimum(np.searchsorted(sorted_keys, query), len(sorted_keys) - 1)
    return sorted_keys[pos] == query


def group_min(group: np.ndarray, value: np.ndarray) -> np.ndarray:
    """For each row, the minimum of ``value`` (int64) over the rows of its ``group``."""
    group = np.asarray(group)
    value = np.asarray(value, np.int64)
    if not len(group):
        return np.zeros(0, np.int64)
    if group.dtype.kind in "iu" and 0 <= int(group.min()) and int(group.max()) < 4 * len(group) + 1024:
        codes, n_groups = group.astype(np.int64, copy=False), int(group.max()) + 1  # small ids: their own codes
    else:
        codes, uniq = pd.factorize(group)
        codes, n_groups = codes.astype(np.int64, copy=False), len(uniq)
    return _group_min(codes, value, n_groups)


@njit
def _group_min(codes, value, n_groups):  # pragma: no cover - compiled
    low = np.full(n_groups, np.iinfo(np.int64).max, np.int64)
    for i in range(len(codes)):
        if value[i] < low[codes[i]]:
            low[codes[i]] = value[i]
    out = np.empty(len(codes), np.int64)
    for i in range(len(codes)):
        out[i] = low[codes[i]]
    return out


def blocks(group: np.ndarray, cnt: np.ndarray, size: int) -> list[tuple[int, int]]:
    """Cut rows ordered by ``group`` into ranges of whole groups holding about ``size`` of ``cnt``."""
    n = len(group)
    if not n:
        return []
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])  # each group's first row
    before = (np.cumsum(cnt) - cnt)[starts]  # counted before it
    block = before // size
    cuts = starts[np.r_[True, block[1:] != block[:-1]]]
    bounds = np.r_[cuts, n]
    return [(int(x), int(y)) for x, y in zip(bounds[:-1], bounds[1:])]


def sorted_level(index: pd.MultiIndex, level: int) -> tuple[np.ndarray, np.ndarray] | None:
    """One level of a MultiIndex of strings as (its distinct values in use, in code point order; each row's
    position among them) — read off the index's own levels and codes when the level is sorted, as
    ``MultiIndex.from_arrays`` leaves it (no string hashed or sorted again: ``np.unique`` of a log's
    subjects took 0.07–0.2 s); None when it is not (the caller sorts)."""
    values, codes = index.levels[level], np.asarray(index.codes[level], np.int64)
    if not len(codes) or (codes < 0).any() or not values.is_monotonic_increasing:
        return None
    names = np.asarray(values, dtype=object)
    if not all(isinstance(v, str) for v in names):  # (the order checked is the dtype's: strings' code points)
        return None
    used = np.zeros(len(names), bool)
    used[codes] = True
    position = np.cumsum(used) - 1
    return names[used], position[codes]


def triple_ranks(triples: pd.MultiIndex) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Of a log's triples (subject, predicate, object): the distinct subjects in code point order, each
    triple's subject among them, and each triple's (predicate, object) rank in lexicographic order
    (:func:`lexicographic_rank`) — from the index's sorted levels when it has them."""
    subjects, predicates, objects = (sorted_level(triples, i) for i in range(3))
    if subjects is None:
        names, subject = np.unique(np.asarray(triples.get_level_values(0), dtype=object), return_inverse=True)
    else:
        names, subject = subjects
    if predicates is None or objects is None:
        po_rank = lexicographic_rank(triples.get_level_values(1), triples.get_level_values(2))
    else:  # positions in sorted levels order as the strings do: a lexsort of integers
        order = np.lexsort((objects[1], predicates[1]))
        po_rank = np.empty(len(order), np.int64)
        po_rank[order] = np.arange(len(order))
    return names, np.asarray(subject, np.int64), po_rank


def session_starts(sessions, message_sessions=None, message_ts=None) -> tuple[np.ndarray, pa.Array, np.ndarray]:
    """Per mention, the rank of its session id (``sessions``) in lexicographic order; the ids in that
    order (an Arrow string array); and each ranked session's start: the first of ``message_ts`` among
    the messages of that session (``message_sessions``; NaN for a session with no message; all NaN
    when no messages are given), float64.

    The ids of mentions and messages are numbered together, by Arrow's dictionary encoding (no Python
    string a row), and the distinct ids the mentions use sorted by code point — the order of Python's
    ``sorted`` on ``str`` (a reindex of the messages' per-session minima by the ranked ids, hashed
    again as Python strings, cost 0.3 s on a log of 770K messages)."""
    mentions = _arrow_strings(sessions)
    parts = [mentions] if message_sessions is None else [mentions, _arrow_strings(message_sessions)]
    encoded = (pa.concat_arrays(parts) if len(parts) > 1 else parts[0]).dictionary_encode()
    codes, words = encoded.indices, encoded.dictionary
    n_mentions = len(mentions)
    mention_codes = codes.slice(0, n_mentions)
    if mention_codes.null_count:
        raise InputError(f"{mention_codes.null_count} mentions have no session_id")
    mention_codes = np.asarray(mention_codes, np.int64)
    used = np.zeros(len(words), bool)
    used[mention_codes] = True
    code_of_used = np.flatnonzero(used)
    order = np.asarray(pc.array_sort_indices(words.take(pa.array(code_of_used))), np.int64)  # by code point
    rank_of_code = np.full(len(words), -1, np.int64)
    rank_of_code[code_of_used[order]] = np.arange(len(order))
    names = words.take(pa.array(code_of_used[order]))
    first = np.full(len(words), np.inf)
    if message_sessions is not None:
        msg_codes = codes.slice(n_mentions)
        keep = ~np.asarray(msg_codes.is_null(), bool)  # messages without a session start none
        np.minimum.at(first, np.asarray(msg_codes.fill_null(0), np.int64)[keep],
                      np.asarray(message_ts, np.int64)[keep].astype(np.float64))
    start = first[code_of_used[order]]
    start[np.isinf(start)] = np.nan
    return rank_of_code[mention_codes], names, start


def _arrow_strings(values) -> pa.Array:
    """A column of ids as one Arrow string array (an Arrow-backed pandas column: its own array)."""
    if isinstance(values, pd.Series):
        values = values.array
    array = pa.array(values, from_pandas=True)
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    return array if array.type == pa.string() else array.cast(pa.string())

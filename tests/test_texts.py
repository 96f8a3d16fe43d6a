"""The write-behind state's text columns (:mod:`factmem.store.texts`) against a plain list: rows read
from the table (one chunk or several), rows appended by batches (Arrow) and by single calls
(strings), rows a batch's append skipped (None), in any mix, read one at a time, as object arrays and
as Arrow, and after a merge (:meth:`Texts.reordered`)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from factmem.errors import StoreError
from factmem.store.calls import state_key
from factmem.store.texts import KeyTexts, Texts

words = st.text(alphabet="aéz\0 ", min_size=0, max_size=4)
# one step: ("batch", gap before it, its strings) or ("single", gap, one string)
steps = st.lists(st.one_of(
    st.tuples(st.just("batch"), st.integers(0, 12), st.lists(words, min_size=0, max_size=6)),
    st.tuples(st.just("single"), st.integers(0, 2), words)), max_size=12)


def _base(values: list[str], chunks: int) -> pa.ChunkedArray:
    cuts = np.array_split(np.arange(len(values)), max(chunks, 1))
    return pa.chunked_array([pa.array([values[i] for i in c], pa.string()) for c in cuts], pa.string())


def _build(base: list[str], chunks: int, script: list) -> tuple[Texts, list]:
    texts = Texts(_base(base, chunks), len(base) + 64)
    model: list = list(base)
    for what, gap, values in script:
        model.extend([None] * gap)
        at = len(model)
        if what == "batch":
            texts[np.arange(at, at + len(values))] = pa.array(values, pa.string())
            model.extend(values)
        else:
            texts[at] = values
            model.append(values)
    return texts, model


@settings(max_examples=150, deadline=None)
@given(base=st.lists(words, max_size=8), chunks=st.integers(1, 3), script=steps, seed=st.integers(0, 2**31))
def test_texts_read_like_a_list(base, chunks, script, seed):
    texts, model = _build(base, chunks, script)
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, len(model), size=10) if model else np.zeros(0, np.int64)
    assert [texts[int(r)] for r in rows] == [model[r] for r in rows]  # (first: before any read joins the parts)
    assert texts.arrow(rows).to_pylist() == [model[r] for r in rows]
    assert list(texts[rows]) == [model[r] for r in rows]
    past = len(model) + 3  # a row no call wrote holds None, as the numpy columns' rows hold their zero
    assert texts[past] is None and texts.arrow(np.array([past])).to_pylist() == [None]
    # reads in between do not change what later appends and reads see
    texts[len(model)] = "late"
    model.append("late")
    assert texts.arrow(np.arange(len(model))).to_pylist() == model
    order = rng.permutation(len(model))
    merged = texts.reordered(order, len(model))
    assert merged.arrow(np.arange(len(model))).to_pylist() == [model[r] for r in order]


def test_texts_refuse_a_change_in_place_and_appends_out_of_order():
    texts = Texts(pa.chunked_array([pa.array(["a", "b"])]), 8)
    with pytest.raises(StoreError, match="changed in place"):
        texts[1] = "x"
    texts[np.arange(2, 4)] = pa.array(["c", "d"])
    with pytest.raises(StoreError, match="changed in place"):
        texts[3] = "x"
    with pytest.raises(StoreError, match="out of order"):
        texts[np.array([5, 4])] = pa.array(["e", "f"])
    assert texts.arrow(np.arange(4)).to_pylist() == ["a", "b", "c", "d"]


def test_key_texts_spell_keys_of_the_table_rows_and_keep_appended_keys():
    subjects = pa.chunked_array([pa.array(["ada", "bob"]), pa.array(["cy"])])
    predicates = pa.chunked_array([pa.array(["likes"]), pa.array(["is", "x"])])
    keys = KeyTexts(subjects, predicates, 8)
    keys[np.arange(3, 5)] = pa.array([state_key("dee", "p"), state_key("eve", "q")])
    keys[5] = state_key("fay", "r")
    want = [state_key("ada", "likes"), state_key("bob", "is"), state_key("cy", "x"),
            state_key("dee", "p"), state_key("eve", "q"), state_key("fay", "r")]
    assert keys.arrow(np.array([5, 0, 3, 2, 1, 4])).to_pylist() == [want[i] for i in (5, 0, 3, 2, 1, 4)]
    assert keys[1] == want[1] and keys[4] == want[4]
    assert keys.equal(np.array([0, 4]), pa.array([want[0], want[3]]), np.array([0, 1])).tolist() == [True, False]


@settings(max_examples=150, deadline=None)
@given(base=st.lists(words, max_size=8), chunks=st.integers(1, 3), script=steps, seed=st.integers(0, 2**31),
       others=st.lists(st.one_of(st.none(), words), min_size=1, max_size=6), large=st.booleans())
def test_equal_compares_each_row_with_the_string_asked(base, chunks, script, seed, others, large):
    """Texts.equal (compiled, the bytes where they are) against the list: rows of the base (in the
    table's order or another), appended by batches and single calls, never written (None); the
    strings asked for (plain or large strings, nulls among them) picked by index, each row's own or
    another."""
    texts, model = _build(base, chunks, script)
    if not model:
        return
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, len(model), size=12)
    pool = [model[r] for r in rows] + others
    strings = pa.array(pool, pa.large_string() if large else pa.string())
    at = rng.integers(0, len(pool), size=len(rows))
    at[: len(rows) // 2] = np.arange(len(rows) // 2)  # half of them asked for the row's own string
    expected = [model[r] is not None and pool[a] is not None and model[r] == pool[a] for r, a in zip(rows, at)]
    assert texts.equal(rows, strings, at).tolist() == expected
    merged = texts.reordered(rng.permutation(len(model)), len(model))  # a base in another order than the rows'
    place = merged.arrow(np.arange(len(model))).to_pylist()
    expected = [place[r] is not None and pool[a] is not None and place[r] == pool[a] for r, a in zip(rows, at)]
    assert merged.equal(rows, strings, at).tolist() == expected
    ordered = Texts(pa.array(model, pa.string()), len(model), order=np.arange(len(model))[::-1].copy())
    assert ordered.equal(rows, strings, at).tolist() == [
        model[len(model) - 1 - r] is not None and pool[a] is not None and model[len(model) - 1 - r] == pool[a]
        for r, a in zip(rows, at)]


subjects_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=14)


@settings(max_examples=150, deadline=None)
@given(pairs=st.lists(st.tuples(subjects_text, subjects_text), min_size=1, max_size=10), seed=st.integers(0, 2**31))
def test_key_rows_from_the_table_compare_with_keys_unspelled(pairs, seed):
    """A key row read from the table (its subject and predicate, in the table's order or another)
    against keys: its own, another pair's, near misses (the length prefix or a NUL moved, a byte more)."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(pairs)) if seed % 2 else None
    subjects = pa.chunked_array([pa.array([s for s, _ in pairs], pa.string())])
    predicates = pa.chunked_array([pa.array([p for _, p in pairs], pa.string())])
    keys = KeyTexts(subjects, predicates, len(pairs) + 4, order)
    own = [state_key(*pairs[int(order[r]) if order is not None else r]) for r in range(len(pairs))]
    near = [f"{len(s) + 1}\0{s}\0{p}" for s, p in pairs] + [f"{len(s)}\0{s}{p}\0" for s, p in pairs] + \
        [f"{len(s)}{s}\0\0{p}" for s, p in pairs] + [f"{len(s)}\0{s}\0x{p}" for s, p in pairs]
    pool = own + [state_key(s, p) for s, p in pairs] + near
    rows = rng.integers(0, len(pairs), size=16)
    at = rng.integers(0, len(pool), size=16)
    assert keys.equal(rows, pa.array(pool, pa.string()), at).tolist() == [own[r] == pool[a] for r, a in zip(rows, at)]


@settings(max_examples=150, deadline=None)
@given(base=st.lists(words, max_size=8), chunks=st.integers(1, 3), script=steps, seed=st.integers(0, 2**31),
       extra=st.lists(words, max_size=6), large=st.booleans())
def test_positions_find_each_rows_string_among_distinct_ones(base, chunks, script, seed, extra, large):
    """Texts.positions (compiled: a hash table of the distinct strings, bytes compared) against
    list.index: rows of the base (in the table's order or another), appended, never written (None:
    -1, as is a string not among them, and the empty string is one like any other)."""
    texts, model = _build(base, chunks, script)
    if not model:
        return
    rng = np.random.default_rng(seed)
    present = sorted({v for v in model if v is not None})
    pool = [v for v in dict.fromkeys(extra + present) if rng.random() < 0.7]  # distinct; some rows' strings left out
    rng.shuffle(pool)
    distinct = pa.array(pool, pa.large_string() if large else pa.string())
    rows = rng.integers(0, len(model), size=12)
    expect = [pool.index(model[r]) if model[r] is not None and model[r] in pool else -1 for r in rows]
    assert texts.positions(rows, distinct).tolist() == expect
    merged = texts.reordered(rng.permutation(len(model)), len(model))
    place = merged.arrow(np.arange(len(model))).to_pylist()
    expect = [pool.index(place[r]) if place[r] is not None and place[r] in pool else -1 for r in rows]
    assert merged.positions(rows, distinct).tolist() == expect
    ordered = Texts(pa.array(model, pa.string()), len(model), order=np.arange(len(model))[::-1].copy())
    flipped = model[::-1]
    expect = [pool.index(flipped[r]) if flipped[r] is not None and flipped[r] in pool else -1 for r in rows]
    assert ordered.positions(rows, distinct).tolist() == expect

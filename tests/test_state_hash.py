"""The write-behind state's key hash is one function however it is computed: over an Arrow array's
buffers (any offset, chunked or not, large or plain strings), from a subject and a predicate column
without spelling the key, compiled with the key spelled from dictionaries and codes, or from one
Python string (a ``remember`` call); and the rows found by it
are every row chained under it, in the order added (:class:`~factmem.store.hashchains.HashChains`)."""

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from factmem.store.calls import state_key
from factmem.store.hashchains import HashChains
from factmem.store.keyhash import key_hashes, keys_and_hashes, pair_hashes, state_keys

texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)


@given(st.lists(st.tuples(texts, texts), min_size=1, max_size=40), st.integers(0, 5))
def test_every_way_of_hashing_a_key_agrees(pairs, cut):
    subjects = pa.array([s for s, _ in pairs], pa.string())
    predicates = pa.array([p for _, p in pairs], pa.string())
    one_by_one = np.array([key_hashes([state_key(s, p)])[0] for s, p in pairs])
    keys = state_keys(subjects, predicates)
    assert keys.to_pylist() == [state_key(s, p) for s, p in pairs]
    assert (key_hashes(keys) == one_by_one).all()
    assert (key_hashes(keys.cast(pa.large_string())) == one_by_one).all()
    assert (key_hashes(np.array([state_key(s, p) for s, p in pairs] * 2, object))[:len(pairs)] == one_by_one).all()
    assert (pair_hashes(subjects, predicates) == one_by_one).all()
    cut = min(cut, len(pairs))  # a slice (an offset into the buffers) and a chunked column
    assert (key_hashes(keys.slice(cut)) == one_by_one[cut:]).all()
    chunked = pa.chunked_array([subjects.slice(0, cut), subjects.slice(cut)], pa.string())
    chunked_p = pa.chunked_array([predicates.slice(0, cut), predicates.slice(cut)], pa.string())
    assert (pair_hashes(chunked, chunked_p) == one_by_one).all()
    # compiled, from dictionaries (a slice of one, large strings in the other) and each pair's codes
    s_words, p_words = pa.array(["pad"] + sorted({s for s, _ in pairs}), pa.string()).slice(1), \
        pa.array(sorted({p for _, p in pairs}), pa.large_string())
    s_codes = np.array([s_words.to_pylist().index(s) for s, _ in pairs])
    p_codes = np.array([p_words.to_pylist().index(p) for _, p in pairs])
    spelled, hashed = keys_and_hashes(s_words, p_words, s_codes, p_codes)
    assert spelled.to_pylist() == keys.to_pylist()
    assert (hashed == one_by_one).all()


def test_distinct_keys_hash_apart():
    keys = [state_key(f"user{i}", f"p{j}") for i in range(300) for j in range(40)]
    assert len(set(key_hashes(pa.array(keys)).tolist())) == len(keys)


# a few distinct hash values, some sharing their low bits (the same slot of a small table), extremes
_hashes = st.sampled_from([0, 1, -1, 16, 32, 48, 2**62, -2**63, 2**63 - 1, 12345678901234567, -99])


@settings(max_examples=150)
@given(st.lists(st.lists(_hashes, max_size=30), min_size=1, max_size=6), st.lists(_hashes, max_size=12))
def test_hash_chains_find_every_row_of_a_hash_in_the_order_added(additions, wanted):
    """HashChains against a dict of lists: rows added in several calls — up to 4 rows one by one in
    Python, more compiled; the table grows, slots collide — and built at once with numpy: every
    wanted hash's rows found oldest first (compiled, grouped by wanted index in order; one hash in
    Python)."""
    chains, reference, row = HashChains(), {}, 0
    for hashes in additions:
        rows = np.arange(row, row + len(hashes), dtype=np.int64)
        chains.add(rows, np.array(hashes, np.int64))
        for r, h in zip(rows.tolist(), hashes):
            reference.setdefault(h, []).append(r)
        row += len(hashes)
        query, found = chains.find(np.array(wanted, np.int64))
        expected = [(i, r) for i, h in enumerate(wanted) for r in reference.get(h, [])]
        assert list(zip(query.tolist(), found.tolist())) == expected
        assert all(chains.rows_of(h) == reference.get(h, []) for h in wanted)
    every = np.concatenate([np.array(h, np.int64) for h in additions])
    rebuilt = HashChains.of(every)  # built at once: the same groups
    query, found = rebuilt.find(np.array(wanted, np.int64))
    assert list(zip(query.tolist(), found.tolist())) == [(i, r) for i, h in enumerate(wanted) for r in reference.get(h, [])]
    assert all(rebuilt.rows_of(h) == reference.get(h, []) for h in wanted)
    rebuilt.add(np.array([row]), np.array([wanted[0] if wanted else 5], np.int64))  # then one more, in Python
    assert rebuilt.rows_of(wanted[0] if wanted else 5) == reference.get(wanted[0] if wanted else 5, []) + [row]

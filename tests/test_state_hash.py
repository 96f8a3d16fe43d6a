"""The write-behind state's key hash is one function however it is computed: over an Arrow array's
buffers (any offset, chunked or not, large or plain strings), from a subject and a predicate column
without spelling the key, or from one Python string (a ``remember`` call)."""

import numpy as np
import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from factmem.store.calls import state_key
from factmem.store.keyhash import key_hashes, pair_hashes, state_keys

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


def test_distinct_keys_hash_apart():
    keys = [state_key(f"user{i}", f"p{j}") for i in range(300) for j in range(40)]
    assert len(set(key_hashes(pa.array(keys)).tolist())) == len(keys)

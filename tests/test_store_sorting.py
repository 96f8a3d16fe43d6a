"""The batch writers' orders are the stable sorts they replace: ``_stable_order`` (packed pairs sorted
as numbers, or the argsort / lexsort when they do not fit one int64) and ``_dense_order`` (a scatter
for consecutive ids, else a sort); and a flush's pending tables become one table whatever their
text columns' encoding."""

import numpy as np
import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from factmem.store.active import _one_table
from factmem.store.writes import _dense_order, _stable_order


@given(st.lists(st.integers(0, 50), max_size=60), st.booleans(), st.integers(0, 2**32))
def test_stable_order_is_the_stable_sort(values, huge, seed):
    v = np.array(values, np.int64) + (np.int64(2**61) if huge else 0)  # huge: the packed pairs do not fit
    order, sorted_values = _stable_order(v)
    assert (order == np.argsort(v, kind="stable")).all() and (sorted_values == np.sort(v)).all()
    gpos = np.random.default_rng(seed).permutation(len(v)).astype(np.int64)  # a global order as the tiebreak
    order, sorted_values = _stable_order(v, gpos)
    assert (order == np.lexsort((gpos, v))).all() and (sorted_values == v[order]).all()


def test_dense_order_sorts_ids():
    rng = np.random.default_rng(1)
    for ids in (rng.permutation(100) + 7, np.array([5, 3, 9, 4]), np.array([], np.int64)):
        ids = np.asarray(ids, np.int64)
        assert (ids[_dense_order(ids)] == np.sort(ids)).all()


def test_one_table_keeps_or_casts_the_text_columns():
    schema = pa.schema([("id", pa.int64()), ("action", pa.string())])
    labels = pa.array(["insert", "reinforce"])
    batch = pa.table({"id": [1, 2], "action": pa.DictionaryArray.from_arrays(pa.array([0, 1], pa.int8()), labels)})
    calls = pa.table({"id": [3], "action": ["reinforce"]}, schema=schema)
    same = _one_table([batch, batch], schema)
    assert same.column("action").num_chunks == 1 and pa.types.is_dictionary(same.schema.field("action").type)
    mixed = _one_table([batch, calls], schema)
    assert mixed.schema == schema and mixed.column("action").to_pylist() == ["insert", "reinforce", "reinforce"]

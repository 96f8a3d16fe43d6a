"""The linear-time top-k selection of the context metrics equals a full sort, ties included."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from factmem.errors import InputError
from factmem.evaluation.topk import top_k_masks


def _by_full_sort(point, value, tie, budgets):
    order = np.lexsort((tie, -value, point))
    grp = point[order]
    first = np.r_[True, grp[1:] != grp[:-1]]
    pos = np.arange(len(order))
    rank = np.empty(len(order), np.int64)
    rank[order] = pos - np.maximum.accumulate(np.where(first, pos, 0))
    return [rank < k for k in budgets]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31), n=st.integers(0, 3000), n_points=st.integers(1, 60),
       distinct=st.sampled_from([2, 7, 50, None]), floor=st.sampled_from([0.0, 0.05, 0.3]),
       budgets=st.sampled_from([(1,), (3, 20), (5, 10, 50)]))
def test_equals_a_full_sort(seed, n, n_points, distinct, floor, budgets):
    rng = np.random.default_rng(seed)
    point = rng.integers(0, n_points, n)
    if distinct is None:  # values that differ only in their last bits, and exact repeats
        value = np.nextafter(0.9, 0.0) - rng.integers(0, 40, n) * np.finfo(float).eps
    else:  # few distinct values: long runs of exact ties, decided by the tie key
        value = floor + (1 - floor) * rng.integers(0, distinct, n) / max(distinct - 1, 1)
    tie = rng.permutation(n)  # a unique tie key, like (last_reinforced, first_seen, predicate, object)
    got = top_k_masks(point, value, budgets, n_points, lambda idx: (tie[idx],), floor=floor)
    want = _by_full_sort(point, value, tie, budgets)
    for g, w in zip(got, want):
        assert np.array_equal(g, w)


def test_values_below_the_floor_and_tiny_values_are_still_exact():
    rng = np.random.default_rng(1)
    point = rng.integers(0, 5, 4000)
    value = np.where(rng.random(4000) < 0.5, rng.random(4000) * 1e-9, rng.random(4000) * 1e-300)
    tie = rng.permutation(4000)
    got = top_k_masks(point, value, (7,), 5, lambda idx: (tie[idx],), floor=0.1)
    assert np.array_equal(got[0], _by_full_sort(point, value, tie, (7,))[0])


def test_a_value_outside_zero_one_is_refused():
    with pytest.raises(InputError, match=r"\[0, 1\]"):
        top_k_masks(np.zeros(3, np.int64), np.array([0.5, 1.5, np.nan]), (1,), 1, lambda idx: ())

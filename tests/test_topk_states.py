"""The compiled point-by-point top-k of the context metrics equals ranking every point's candidates
by a full sort, with effective confidences computed as the reference model computes them."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from factmem.errors import InputError
from factmem.evaluation.topk import context_top_k


def _by_full_sort(lo, stop, point_key, conf, rate, start, cols, t, thr, k):
    best = np.full((len(t), k), -1, np.int64)
    held = np.zeros(len(t), np.int64)
    for p in range(len(t)):  # a test oracle: a loop over points and states is the point
        cand = []
        for s in range(len(lo)):
            if lo[s] <= p and point_key[p] < stop[s]:
                e = conf[s] * math.exp(-rate[s] * max(0.0, (int(t[p]) - int(start[s])) / 86400))
                if e >= thr:
                    cand.append((-e, *(int(c[s]) for c in cols), s))
        cand.sort()
        top = [c[-1] for c in cand[:k]]
        best[p, :len(top)], held[p] = top, len(top)
    return best, held


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31), n_states=st.integers(0, 120), n_points=st.integers(1, 40),
       k=st.sampled_from([1, 3, 20]), thr=st.sampled_from([0.0, 0.1, 0.5]), ties=st.booleans(),
       keyed=st.booleans())
def test_equals_a_full_sort_of_each_point(seed, n_states, n_points, k, thr, ties, keyed):
    """States held over a count of points from their first (``stop = lo + cnt``, a point's key its
    index), or keyed as the context metrics key them: ascending point keys with gaps and repeats and a
    stop key anywhere — held at none of its points, at some, or past the last."""
    rng = np.random.default_rng(seed)
    t = np.sort(rng.integers(0, 40 * 86400, n_points))
    lo = np.sort(rng.integers(0, n_points, n_states))
    if keyed:
        point_key = np.cumsum(rng.integers(0, 3, n_points))
        stop = rng.integers(-1, int(point_key[-1]) + 3, n_states)
    else:
        point_key = np.arange(n_points)
        cnt = rng.integers(1, n_points + 1, n_states)
        stop = lo + np.minimum(cnt, n_points - lo)
    start = t[lo] - rng.integers(1, 86400, n_states)
    if ties:  # few distinct values and keys: exact ties, decided by the keys and then the index
        conf = rng.choice([0.5, 0.9], n_states)
        rate = rng.choice([0.0, 0.1, -0.05], n_states)  # a negative rate: the value rises again
        start = np.where(rng.random(n_states) < 0.5, start, t[lo] - 3600)
        cols = (-start, -rng.integers(0, 2, n_states), rng.integers(0, 3, n_states))
    else:
        conf = rng.random(n_states)
        rate = rng.random(n_states) * 0.5
        cols = (-start, -rng.integers(0, 10**6, n_states), rng.permutation(n_states))
    got = context_top_k(lo, stop, conf, rate, start, cols, t, thr, k, point_key=point_key if keyed else None)
    best, held = _by_full_sort(lo, stop, point_key, conf, rate, start, cols, t, thr, k)
    assert np.array_equal(got.held, held)
    assert np.array_equal(got.best, best)
    point, rank, state, value = got.pairs()
    assert np.array_equal(state, best[point, rank])


def test_point_keys_that_do_not_ascend_are_refused():
    with pytest.raises(InputError, match="point_key"):
        context_top_k(np.array([0]), np.array([5]), np.ones(1), np.zeros(1), np.zeros(1, np.int64), (),
                      np.array([10, 20]), 0.0, 1, point_key=np.array([3, 2]))


def test_states_out_of_order_are_refused():
    with pytest.raises(InputError, match="sorted by their first point"):
        context_top_k(np.array([1, 0]), np.array([1, 1]), np.ones(2), np.zeros(2), np.zeros(2, np.int64), (),
                      np.array([10, 20]), 0.0, 1)

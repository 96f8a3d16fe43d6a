"""The wave kernel's time helpers against plain definitions: ``grid_index`` is ``np.searchsorted``
(by arithmetic on evenly spaced grids), and ``first_archive_time`` is the first consolidation that
archives a fact, found by trying every consolidation in turn."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from factmem.core.codes import MAX_TIME, MIN_TIME, NO_TIME, OPEN, SECONDS_PER_DAY
from factmem.core.timeutil import grid_index
from factmem.engine.waves import effective_at, first_archive_time

times = st.integers(MIN_TIME, MAX_TIME)


@st.composite
def grids(draw):
    start = draw(st.integers(MIN_TIME, MAX_TIME - 10**9))
    count = draw(st.integers(0, 40))
    if draw(st.booleans()):  # evenly spaced: the arithmetic path
        step = draw(st.sampled_from([1, 60, 3600, SECONDS_PER_DAY, 7 * SECONDS_PER_DAY, 10**7]))
        return np.arange(count, dtype=np.int64) * step + start
    gaps = draw(st.lists(st.integers(1, 10**6), min_size=count, max_size=count))
    return start + np.cumsum(np.array(gaps, dtype=np.int64))


@settings(max_examples=300)
@given(grid=grids(), offsets=st.lists(st.integers(-3 * 10**7, 3 * 10**7), max_size=30),
       extremes=st.lists(st.sampled_from([OPEN, NO_TIME, MIN_TIME, MAX_TIME]), max_size=4))
def test_grid_index_is_searchsorted(grid, offsets, extremes):
    base = int(grid[0]) if grid.size else 0
    # values on, next to and between the grid's times, and the sentinels
    near = [int(t) + d for t in grid[:5].tolist() + grid[-3:].tolist() for d in (-1, 0, 1)]
    values = np.array([base + o for o in offsets] + near + extremes, dtype=np.int64)
    for side in ("left", "right"):
        assert np.array_equal(grid_index(grid, values, side), np.searchsorted(grid, values, side=side)), side


def brute_first_archive(c, rate, last, threshold, grid, upto):
    out = np.full(len(c), OPEN, np.int64)
    for i in range(len(c)):
        for t in grid:
            if last[i] < t <= upto[i] and effective_at(c[i], rate[i], int(t), last[i]) < threshold[i]:
                out[i] = t
                break
    return out


@settings(max_examples=200)
@given(data=st.data(), daily=st.booleans())
def test_first_archive_time_is_the_first_consolidation_below_threshold(data, daily):
    start = data.draw(st.integers(-3 * 10**9, 3 * 10**9))
    count = data.draw(st.integers(1, 60))
    if daily:
        grid = start + SECONDS_PER_DAY * np.arange(1, count + 1, dtype=np.int64)
    else:
        grid = start + np.cumsum(np.array(data.draw(st.lists(st.integers(1, 3 * SECONDS_PER_DAY), min_size=count,
                                                             max_size=count)), dtype=np.int64))
    k = data.draw(st.integers(1, 25))
    c = np.array(data.draw(st.lists(st.floats(0.01, 1.0), min_size=k, max_size=k)))
    rate = np.array(data.draw(st.lists(st.sampled_from([0.0, 0.003, 0.05, 0.3, 1.2, 5.0]), min_size=k, max_size=k)))
    threshold = np.array(data.draw(st.lists(st.sampled_from([0.01, 0.05, 0.2, 0.5]), min_size=k, max_size=k)))
    span = int(grid[-1] - start) + SECONDS_PER_DAY
    last = start + np.array(data.draw(st.lists(st.integers(-SECONDS_PER_DAY, span), min_size=k, max_size=k)), np.int64)
    upto = last + np.array(data.draw(st.lists(st.integers(0, span), min_size=k, max_size=k)), np.int64)
    # thresholds met exactly at a consolidation: the closed form's guess sits on the boundary
    on = data.draw(st.lists(st.booleans(), min_size=k, max_size=k))
    for i in np.flatnonzero(on):
        t = int(grid[len(grid) // 2])
        if rate[i] > 0 and last[i] < t:
            threshold[i] = float(effective_at(c[i], rate[i], t, last[i]))
    expected = brute_first_archive(c, rate, last, threshold, grid, upto)
    assert np.array_equal(first_archive_time(c, rate, last, threshold, grid, upto), expected)
    archived = expected != OPEN
    if archived.any():  # the caller's promise that a consolidation archives them
        got = first_archive_time(c[archived], rate[archived], last[archived], threshold[archived], grid,
                                 upto[archived], known_archived=True)
        assert np.array_equal(got, expected[archived])


def test_first_archive_time_takes_plain_scalars():
    """All arguments broadcast, plain Python scalars included: a 0-d answer equal to the 1-row one."""
    grid = np.arange(1, 11, dtype=np.int64) * SECONDS_PER_DAY
    got = first_archive_time(0.9, 0.5, 0, 0.2, grid, 10 * SECONDS_PER_DAY)
    row = first_archive_time([0.9], [0.5], [0], [0.2], grid, [10 * SECONDS_PER_DAY])
    assert got.shape == () and got.item() == row[0] == 4 * SECONDS_PER_DAY  # 0.9·e^(−0.5·3) ≥ 0.2 > 0.9·e^(−2)
    assert first_archive_time(0.9, 0.0, 0, 0.2, grid, 10 * SECONDS_PER_DAY).item() == OPEN  # never decays

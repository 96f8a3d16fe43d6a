"""Decision rules and estimators at the edges where a plausible slip would change an answer without
breaking the existing tests: the bootstrap interval's level (golden values, checked against an
independent paired resample), the promotion rule on intervals that straddle 0 in both directions,
Kaplan–Meier with a delayed entry at an event time, the sampled points per subject, the closed-form
archive time when rounding puts its guess one consolidation late, and the cardinality comparison's
cross-fitting and kept/dropped verdicts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from factmem.core.codes import OPEN
from factmem.core.params import MemoryParams
from factmem.data.generate import generate
from factmem.engine.waves import effective_at, first_archive_time
from factmem.evaluation.cardinality_policy import compare_policies, subject_folds
from factmem.evaluation.context import FIELDS, ContextEvaluator
from factmem.evaluation.simulate import prepare
from factmem.fitting.models import kaplan_meier, percentile_interval
from factmem.tuning.decision import below_empty
from factmem.tuning.tune import Comparison, bootstrap_difference, decide
from tests.test_cardinality import dataset_of

# -- the bootstrap interval and the promotion rule -------------------------------------------------------


def _sums(points, utility):
    s = np.zeros((len(points), len(FIELDS)))
    s[:, FIELDS.index("points")] = points
    s[:, FIELDS.index("utility")] = utility
    return s


POINTS = [4, 7, 2, 9, 5, 3, 8, 6]
A = _sums(POINTS, [2.0, 3.5, 1.5, 4.0, 1.0, 2.5, 5.0, 2.0])
B = _sums(POINTS, [1.0, 3.0, 1.0, 4.5, 1.5, 1.0, 3.0, 2.5])


def test_bootstrap_interval_golden_values():
    """A 95% percentile interval of the pooled difference over resampled subjects: the same subjects
    drawn for both sides (paired), ``resamples`` rows of ``n`` draws with replacement from
    ``default_rng(seed)``."""
    c = bootstrap_difference(A, B, "utility", resamples=400, seed=7)
    assert (c.a, c.b, c.difference) == pytest.approx((21.5 / 44, 17.5 / 44, 4 / 44))
    assert (c.low, c.high) == pytest.approx((-0.011912020905923356, 0.2143339768339768), abs=1e-12)
    # the same interval, computed independently
    idx = np.random.default_rng(7).integers(0, len(POINTS), size=(400, len(POINTS)))
    pts, ua, ub = np.array(POINTS, float), A[:, FIELDS.index("utility")], B[:, FIELDS.index("utility")]
    d = ua[idx].sum(axis=1) / pts[idx].sum(axis=1) - ub[idx].sum(axis=1) / pts[idx].sum(axis=1)
    assert (c.low, c.high) == pytest.approx(tuple(np.quantile(d, [0.025, 0.975])), abs=1e-12)
    assert c.low < 0 < c.high  # at 95% the interval straddles 0 here; a 90% one would not (it starts at 0)
    assert np.quantile(d, 0.05) >= 0


@pytest.mark.parametrize("low, high, promoted", [
    (-0.3, 0.1, False),   # mostly better (lower), but the interval reaches above 0
    (-0.1, 0.3, False),   # mostly worse, the interval reaches below 0
    (-0.3, -0.1, True),   # entirely better
    (0.1, 0.3, False),    # entirely worse
])
def test_promotion_when_lower_is_better(low, high, promoted):
    c = Comparison(0.3, 0.4, (low + high) / 2, low, high, 40, 1000)
    assert (decide(c, True)[0] == "recommended") == promoted
    higher = Comparison(0.4, 0.3, -(low + high) / 2, -high, -low, 40, 1000)  # the mirror: higher is better
    assert (decide(higher, False)[0] == "recommended") == promoted


@pytest.mark.parametrize("low, high, promoted", [
    (-0.03, -0.005, False),  # better, but by less than the minimum effect
    (-0.03, -0.02, True),    # better by more than it
])
def test_the_minimum_effect_when_lower_is_better(low, high, promoted):
    c = Comparison(0.3, 0.32, (low + high) / 2, low, high, 40, 1000)
    assert (decide(c, True, min_effect=0.01)[0] == "recommended") == promoted
    higher = Comparison(0.32, 0.3, -(low + high) / 2, -high, -low, 40, 1000)
    assert (decide(higher, False, min_effect=0.01)[0] == "recommended") == promoted


def test_below_the_empty_memory_when_lower_is_better():
    """Baseline − empty: with a lower-is-better objective (say charged@k), a positive difference is
    the baseline doing worse than showing nothing."""
    worse = Comparison(0.4, 0.0, 0.4, 0.3, 0.5, 40, 1000)
    assert below_empty(worse, "charged@20", True).startswith("**The baseline scores below the empty memory**")
    assert below_empty(worse, "utility@20", False) is None
    better = Comparison(0.0, 0.4, -0.4, -0.5, -0.3, 40, 1000)
    assert below_empty(better, "charged@20", True) is None


# -- Kaplan–Meier with delayed entry ---------------------------------------------------------------------


def km_by_definition(entry, exit, event):
    times = sorted({float(x) for x, e in zip(exit, event) if e})
    s, surv, risk = 1.0, [], []
    for tau in times:
        n = sum(1 for a, b in zip(entry, exit) if a < tau <= b)
        d = sum(1 for b, e in zip(exit, event) if e and b == tau)
        s *= (1 - d / n) if n else 1.0
        surv.append(s)
        risk.append(n)
    return np.array(times), np.array(surv), np.array(risk)


def test_kaplan_meier_an_entry_at_an_event_time_is_not_at_risk_then():
    # lifetime 3 enters at 2.0, when lifetime 1 ends: the risk set at 2.0 is {1, 2}, not {1, 2, 3}
    times, surv, at_risk = kaplan_meier(np.array([0.0, 0.0, 2.0]), np.array([2.0, 5.0, 4.0]),
                                        np.array([True, False, True]))
    assert times.tolist() == [2.0, 4.0] and at_risk.tolist() == [2, 2]
    np.testing.assert_allclose(surv, [0.5, 0.25])


@settings(max_examples=60)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5), st.booleans()), min_size=1, max_size=12))
def test_kaplan_meier_equals_its_definition(rows):
    entry = np.array([min(a, a + b) for a, b, _ in rows], float)
    exit = np.array([a + max(b, 1) for a, b, _ in rows], float)  # integer times: entries meet event times
    event = np.array([e for _, _, e in rows])
    got = kaplan_meier(entry, exit, event)
    want = km_by_definition(entry, exit, event)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1])
    np.testing.assert_array_equal(got[2], want[2])


def test_percentile_interval_golden_values():
    values = np.array([3.0, np.nan, 1.0, 4.0, 1.5, 9.0, 2.6, 5.0, np.inf, 3.5])  # failed refits are dropped
    assert percentile_interval(values) == pytest.approx((1.0875, 8.3), abs=1e-12)
    assert percentile_interval(values, 0.5) == pytest.approx(tuple(np.quantile(values[np.isfinite(values)], [0.25, 0.75])))


# -- sampled points --------------------------------------------------------------------------------------


def test_sampling_keeps_exactly_the_bound_where_a_subject_has_more():
    P = prepare(generate("tiny", seed=2))
    full = ContextEvaluator(P).points.groupby("subject").size()
    for m in (1, 3):
        got = ContextEvaluator(P, max_points_per_subject=m, seed=1).points.groupby("subject").size()
        pd.testing.assert_series_equal(got, full.clip(upper=m), check_names=False)
    assert (full > 3).all()  # every subject is cut: the bound is what each one keeps


# -- the closed-form archive time ------------------------------------------------------------------------


def test_the_archive_time_guess_one_consolidation_late_is_corrected():
    """At a rate of 1e-12/day the closed form's rounding (ln(c/θ)/λ, ~1e10 days) is worth hundreds
    of seconds: on a grid one second apart its guess lands after the first consolidation below θ."""
    c, rate, last, threshold = 0.22701208903825926, 1e-12, 772_623_404, 0.22701208844079185
    grid = np.arange(1_000_000_000, 1_000_040_000, dtype=np.int64)
    below = effective_at(c, rate, grid, last) < threshold
    want = int(grid[np.argmax(below)]) if below.any() else OPEN
    assert want != OPEN and not below[0]
    one = [np.array([x]) for x in (c, rate, last, threshold, int(grid[-1]))]
    assert first_archive_time(*one[:4], grid, one[4]).item() == want


@settings(max_examples=40)
@given(st.floats(0.05, 1.0), st.sampled_from([1e-12, 1e-13]), st.integers(0, 10**9), st.integers(0, 19_999),
       st.booleans())
def test_archive_time_at_tiny_rates_on_dense_grids(c, rate, last, at, just_above):
    grid = np.arange(1_000_000_000, 1_000_020_000, dtype=np.int64)
    t = int(grid[at])
    threshold = float(effective_at(c, rate, t, last))
    if just_above:
        threshold = float(np.nextafter(threshold, np.inf))
    below = effective_at(c, rate, grid, last) < threshold
    want = int(grid[np.argmax(below)]) if below.any() else OPEN
    one = [np.array([x]) for x in (c, rate, last, threshold, int(grid[-1]))]
    assert first_archive_time(*one[:4], grid, one[4]).item() == want


# -- the cardinality comparison --------------------------------------------------------------------------


def dataset(rows):
    return dataset_of(rows)


def test_a_fold_that_flips_the_decision_is_scored_by_the_other_folds_choice():
    """The subjects of fold 0 hold their values side by side (5 still-valid changes each), the others
    hand theirs over (one change each): on all subjects ``team`` is multi-valued, on folds 1 and 2
    alone it is single-valued. Held out, fold 0 is scored by the single-valued choice (50 false);
    a choice that saw fold 0 would score it multi-valued (no false)."""
    names = [f"p{i:02d}" for i in range(30)]
    fold = subject_folds(names, 3, 0)
    rows = []
    for p in names:
        if fold[p] == 0:
            rows += [(p, "team", f"{p}v{j}", 2000 + j, 2020) for j in range(6)]
        else:
            rows += [(p, "team", f"{p}a", 2000, 2002), (p, "team", f"{p}b", 2003, None)]
    assert (fold == 0).sum() == 10
    t = compare_policies(dataset(rows), n_boot=50).table.set_index(["policy", "source"])
    assert (t.loc[("best static per-predicate choice", "truth"), ["false", "missed"]] == [0, 20]).all()
    assert (t.loc[("cost decision", "truth"), ["false", "missed"]] == [50, 20]).all()
    # one mention per value: the change-counting first pass and the replay agree on every row
    assert (t[["counted_false", "counted_missed"]].to_numpy() == t[["false", "missed"]].to_numpy()).all()


@pytest.mark.parametrize("national, kept", [(3, False), (6, True)])
def test_the_richer_policy_is_kept_on_its_interval_not_its_point_estimate(national, kept):
    """40 players hand their clubs over; ``national`` of them also hold a national team beside them.
    The exemption saves errors for those players only: with 3 of them the difference is below 0 but
    its interval reaches 0 (dropped); with 6 the whole interval is below 0 (kept)."""
    rows = []
    for i in range(40):
        p = f"p{i:02d}"
        rows += [(p, "team", f"{p}a", 2000, 2002), (p, "team", f"{p}b", 2003, 2005), (p, "team", f"{p}c", 2006, None)]
        if i < national:
            rows += [(p, "team", "national", 2004, 2010)]
    cmp = compare_policies(dataset(rows), n_boot=200)
    row = cmp.table.set_index(["policy", "source"]).loc[("cost decision + concurrent objects", "truth")]
    assert row["vs_best_static"] < 0
    assert (row["vs_best_static_high"] < 0) == kept
    note = next(n for n in cmp.notes if n.startswith("cost decision + concurrent objects (from truth)"))
    assert note.split(" (from truth) ")[1].startswith("kept: beats" if kept else "dropped: does not beat")


def test_the_comparison_interval_is_at_its_stated_level():
    """40 subjects with one change each, 20 of them still valid: the seed's rule errs on exactly those.
    A resample's error share is Binomial(40, 1/2) / 40: its 2.5% and 97.5% points are 35% and 65%
    (P(X <= 13) = 1.9%, P(X <= 14) = 4.0%); a 90% interval would be [37.5%, 62.5%]."""
    rows = []
    for i in range(40):
        p = f"p{i:02d}"
        rows += [(p, "team", f"{p}a", 2000, 2005 if i % 2 else 2002), (p, "team", f"{p}b", 2003, None)]
    cmp = compare_policies(dataset(rows), n_boot=4000)
    seed_rule = cmp.table.set_index(["policy", "source"]).loc[("seed rule: every predicate single-valued", "-")]
    assert (seed_rule["changes"], seed_rule["false"], seed_rule["error_pct"]) == (40, 20, 50.0)
    assert 34.0 <= seed_rule["error_pct_low"] <= 36.0 and 64.0 <= seed_rule["error_pct_high"] <= 66.0


# -- the charges of the context metrics ------------------------------------------------------------------


def test_stale_and_false_facts_are_told_apart_and_costed_apart():
    """Two values that changed (stale) and one misstatement (false) in a context of four: the counts
    differ, so a rule that swapped the two kinds (or their costs) changes the numbers."""
    from tests.test_context import T0 as C0
    from tests.test_context import beliefs_of
    from tests.test_context import dataset as context_dataset

    day = 86_400
    said = [(C0, "s0", "ada", p, o, "explicit") for p, o in [("lives_in", "berlin"), ("works_at", "acme"),
                                                              ("drinks", "coffee"), ("likes", "tea")]]
    ds = context_dataset(said + [(C0 + 10 * day, "s10", "ada", "likes", "tea", "explicit")],
                         [("ada", "lives_in", "berlin", "explicit", C0 - day, C0 + 5 * day, None),
                          ("ada", "works_at", "acme", "explicit", C0 - day, C0 + 4 * day, None),
                          ("ada", "drinks", "coffee", "explicit", C0, C0, None, "misstatement"),
                          ("ada", "likes", "tea", "explicit", C0 - day, None, None)])
    P = prepare(ds)
    keep = MemoryParams(decay_rate=dict.fromkeys(("explicit", "user_preference", "episodic"), 0.0))
    bel = beliefs_of(P, keep)
    s = ContextEvaluator(P, budgets=(10,)).score(bel, keep).summary()
    assert (s["points"], s["hits"], s["context"]) == (1, 1, 4)
    assert (s["stale"], s["expired"], s["false"], s["unneeded"]) == (2, 0, 1, 0)
    costly = ContextEvaluator(P, budgets=(10,), costs="stale=1,false=3").score(bel, keep).summary()
    assert costly["charged"] == 2 * 1 + 1 * 3 and costly["utility"] == 1 - 5

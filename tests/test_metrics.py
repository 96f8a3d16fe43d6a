"""Metrics on a tiny hand-built case whose answers are worked out by hand (and brute force)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from factmem.core.codes import OPEN, EndReason
from factmem.core.timeutil import even_step
from factmem.evaluation.auc import auc_with_unheld, weighted_auc
from factmem.evaluation.metrics import Evaluator
from factmem.evaluation.metrics_kernels import held_until, merge_runs

D = 86400
EXPLICIT = 0


def case():
    # A: true on [0, 10d), mentioned at 0 and 5d; B: true from 3d on, mentioned at 4d and 8d;
    # C: a misstatement (empty interval), mentioned at 2d.
    truth = pd.DataFrame({"triple": [0, 1, 2], "kind": [EXPLICIT] * 3, "valid_from": [0, 3 * D, 2 * D],
                          "valid_to": pd.array([10 * D, None, 2 * D], dtype="Int64"),
                          "relevant_until": pd.array([None, None, None], dtype="Int64")})
    mentions = pd.DataFrame({"triple": [0, 0, 1, 1, 2], "ts": [0, 5 * D, 4 * D, 8 * D, 2 * D]})
    # no decay (rate 0) keeps the numbers readable
    beliefs = pd.DataFrame({
        "triple": [0, 0, 1, 2],
        "kind": [EXPLICIT] * 4,
        "start": [0, 5 * D, 4 * D, 2 * D],
        "end": [5 * D, OPEN, 4 * D + 3600, 6 * D],
        "reason": [0, 3, 2, 1],  # reinforced, open, archived, superseded
        "confidence": [0.4, 0.58, 0.4, 0.4],
        "rate": [0.0] * 4,
    })
    return truth, mentions, beliefs, np.arange(1, 13) * D


def test_believed_precision_recall_stale_lost():
    truth, mentions, beliefs, cps = case()
    ev = Evaluator(truth, mentions, cps).score(beliefs, retrieval_threshold=0.05)
    c = ev.checkpoints
    assert c["believed"].tolist() == [1, 1, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1]
    assert c["true_believed"].tolist() == [1] * 9 + [0] * 3
    assert c["needed"].tolist() == [1, 1, 1, 1, 2, 2, 2, 2, 2, 1, 1, 1]
    assert c["precision"].tolist() == [1, 1, .5, .5, .5, .5, 1, 1, 1, 0, 0, 0]
    assert c["recall"].tolist() == [1, 1, 1, 1, .5, .5, .5, .5, .5, 0, 0, 0]
    # A is believed after it stopped being true; C (never true) is wrong, not stale
    assert c["stale"].tolist() == [0] * 9 + [1] * 3
    # B was archived while true and mentioned again at 8d: forgetting regret from the day-5 checkpoint
    assert c["lost"].tolist() == [0] * 4 + [1] * 8
    assert ev.lost[["triple", "archived_at", "needed_again_at", "why"]].values.tolist() == [[1, 4 * D + 3600, 8 * D, "decay"]]
    assert ev.summary["lost"] == 1


def brute_samples():
    """(p, y, held) at each checkpoint, enumerated by hand from the case's story."""
    e = 1e-4
    s = []
    for d in range(1, 13):
        a_p = 0.4 if d <= 5 else 0.58
        s.append((a_p, int(d < 10), True))  # A, held throughout
        if 3 <= d <= 6:
            s.append((0.4, 0, True))  # C held until superseded at 6d
        elif d >= 7:
            s.append((e, 0, False))  # C mentioned, no longer held
        if d >= 5:
            s.append((e, 1, False))  # B mentioned at 4d, archived, true
    return s


def test_calibration_matches_brute_force():
    truth, mentions, beliefs, cps = case()
    ev = Evaluator(truth, mentions, cps).score(beliefs, retrieval_threshold=0.05)
    s = brute_samples()
    p = np.array([x[0] for x in s])
    y = np.array([x[1] for x in s])
    ll = -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))
    assert ev.summary["log_loss"] == pytest.approx(ll, rel=1e-12)
    assert ev.summary["brier"] == pytest.approx(np.mean((p - y) ** 2), rel=1e-12)
    assert ev.summary["samples"] == len(s)
    # AUC by brute force over all (positive, negative) pairs, ties count half
    pos, neg = p[y == 1], p[y == 0]
    auc = np.mean([(a > b) + 0.5 * (a == b) for a in pos for b in neg])
    assert ev.summary["auc"] == pytest.approx(auc, rel=1e-12)
    # every fact is explicit: the per-kind row is the whole
    row = ev.calibration_by_kind.set_index("kind").loc["explicit"]
    assert row["log_loss"] == pytest.approx(ll, rel=1e-12) and row["auc"] == pytest.approx(auc, rel=1e-12)
    assert row["samples"] == len(s) and row["held"] == sum(1 for x in s if x[2])
    held = [(x[0], x[1]) for x in s if x[2]]
    assert ev.summary["held_log_loss"] == pytest.approx(
        -np.mean([yy * math.log(pp) + (1 - yy) * math.log(1 - pp) for pp, yy in held]), rel=1e-12)


def test_rmse_bins_and_reliability_by_hand():
    """RMSE(bins) over held samples, binned by kind × age since the state began ([0,1), [1,3), [3,7),
    [7,14) ... days), each bin weighted by its size; reliability bins by predicted probability."""
    truth, mentions, beliefs, cps = case()
    ev = Evaluator(truth, mentions, cps).score(beliefs, retrieval_threshold=0.05)
    # held samples (p, y, age in days), from the case's story: A's first state (0.4, ages 1-5 at days
    # 1-5), A's second (0.58, ages 1-7 at days 6-12; true until day 10), C (0.4, false, ages 1-4)
    held = [(0.4, 1, d) for d in range(1, 6)] + [(0.58, int(d < 10), d - 5) for d in range(6, 13)] + \
           [(0.4, 0, d - 2) for d in range(3, 7)]
    bins: dict = {}
    for p, y, age in held:
        bins.setdefault(0 if age < 1 else 1 if age < 3 else 2 if age < 7 else 3, []).append((p, y))
    assert sorted(len(v) for v in bins.values()) == [1, 6, 9]  # unequal bins: weighting matters
    weighted = math.sqrt(sum(len(v) * (np.mean([p for p, _ in v]) - np.mean([y for _, y in v])) ** 2
                             for v in bins.values()) / len(held))
    assert ev.summary["rmse_bins"] == pytest.approx(weighted, rel=1e-12)
    unweighted = math.sqrt(np.mean([(np.mean([p for p, _ in v]) - np.mean([y for _, y in v])) ** 2 for v in bins.values()]))
    assert abs(weighted - unweighted) > 0.01
    assert ev.calibration_by_kind.set_index("kind").loc["explicit", "rmse_bins"] == pytest.approx(weighted, rel=1e-12)
    # reliability: held samples by predicted probability in tenths (0.4 -> bin 4, 0.58 -> bin 5)
    rel = ev.reliability
    assert rel["kind"].unique().tolist() == ["all", "explicit"]
    for _, r in rel.iterrows():
        members = [(p, y) for p, y, _ in held if min(int(p * 10), 9) == r["bin"]]
        assert r["n"] == len(members)
        assert r["p_mean"] == pytest.approx(np.mean([p for p, _ in members]), rel=1e-12)
        assert r["y_mean"] == pytest.approx(np.mean([y for _, y in members]), rel=1e-12)
    assert rel[rel["kind"] == "all"][["bin", "n"]].values.tolist() == [[4, 9], [5, 7]]


def test_decay_and_retrieval_threshold():
    truth, mentions, beliefs, cps = case()
    b = beliefs.copy()
    b["rate"] = 0.3
    # A's second state: 0.58 * exp(-0.3 * age) >= 0.25 until age < ln(2.32)/0.3 = 2.8 days
    ev = Evaluator(truth, mentions, cps).score(b, retrieval_threshold=0.25)
    c = ev.checkpoints.set_index(ev.checkpoints["t"] // D)
    # (C, 0.4 * exp(-0.3 * 4) = 0.12 at day 6, is below the threshold)
    assert c.loc[6, "believed"] == 1 and c.loc[7, "believed"] == 1 and c.loc[8, "believed"] == 0
    # first state: 0.4 * exp(-0.3 * age) >= 0.25 for age <= 1.56 days: believed at day 1 only
    assert c.loc[1, "believed"] == 1 and c.loc[2, "believed"] == 0


def test_weighted_auc():
    assert weighted_auc(np.array([0.1, 0.9]), np.array([0, 1])) == 1.0
    assert weighted_auc(np.array([0.5, 0.5]), np.array([0, 1])) == 0.5
    assert weighted_auc(np.array([0.2, 0.8, 0.2]), np.array([1, 0, 0]), np.array([1.0, 1.0, 3.0])) == pytest.approx(
        (0 * 1 + 0.5 * 3) / (1 * 4))


@pytest.mark.parametrize("seed", range(5))
def test_the_auc_of_sorted_held_samples_and_unheld_counts_is_the_weighted_auc(seed):
    # held samples (ties at eps and elsewhere, as rounded confidences make them) plus triples not held,
    # which predict eps: counted, not listed — the same number as weighted_auc over every sample listed
    rng = np.random.default_rng(seed)
    eps = 1e-4
    p = np.maximum(np.round(rng.uniform(eps, 1, 200), 1), eps)  # held samples predict at least eps
    p[rng.random(200) < 0.1] = eps
    y = (rng.random(200) < p).astype(int)
    w_true, w_false = int(rng.integers(0, 20)), int(rng.integers(0, 20))
    listed_p = np.concatenate([p, np.full(w_true + w_false, eps)])
    listed_y = np.concatenate([y, np.ones(w_true, int), np.zeros(w_false, int)])
    assert auc_with_unheld(p, y, w_true, w_false, eps) == pytest.approx(weighted_auc(listed_p, listed_y), abs=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_merged_sorted_runs_equal_a_sort_of_them_all(seed):
    # runs of any length (empty ones too), ties within and across runs, as the kinds' sorted predictions are
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 40, size=int(rng.integers(1, 6)))
    lengths[rng.random(len(lengths)) < 0.3] = 0
    values = np.round(rng.random(int(lengths.sum())), int(rng.integers(1, 4)))
    bounds = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    for a, b in zip(bounds[:-1], bounds[1:]):
        values[a:b].sort()
    first = int(rng.integers(0, len(bounds)))  # a slice of the runs, as the evaluator passes each label's
    got = merge_runs(values, bounds[first:])
    assert got.tolist() == np.sort(values[bounds[first]:]).tolist()


def test_bad_input():
    truth, mentions, beliefs, cps = case()
    with pytest.raises(ValueError, match="strictly increasing"):
        Evaluator(truth, mentions, cps[::-1])
    with pytest.raises(ValueError, match="truth lacks column 'valid_from'"):
        Evaluator(truth.drop(columns="valid_from"), mentions, cps)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31), even=st.booleans(), n_cp=st.integers(1, 30))
def test_held_until_is_the_first_checkpoint_at_or_after_the_visible_end(seed, even, n_cp):
    """A state is held up to the first checkpoint at or after its visible end (an event's end seen one
    second later), every checkpoint when open — evenly spaced checkpoints (arithmetic) or not (a search)."""
    rng = np.random.default_rng(seed)
    cp = (np.arange(n_cp) * 86400 if even else np.cumsum(rng.integers(1, 200_000, n_cp))).astype(np.int64) + 10**9
    end = rng.integers(int(cp[0]) - 200_000, int(cp[-1]) + 200_000, 500)
    on = rng.random(500) < 0.2  # ends on a checkpoint's instant
    end[on] = rng.choice(cp, int(on.sum()))
    reason = rng.integers(0, 4, 500).astype(np.int64)
    end = np.where(reason == EndReason.OPEN, OPEN, end)
    got = held_until(end, reason, cp, even_step(cp), OPEN, int(EndReason.REINFORCED), int(EndReason.SUPERSEDED))
    visible = end + ((reason == EndReason.REINFORCED) | (reason == EndReason.SUPERSEDED))
    want = np.where(end == OPEN, len(cp), np.searchsorted(cp, np.where(end == OPEN, 0, visible), "left"))
    assert np.array_equal(got, want)

"""Cardinality chosen by cost: single- or multi-valued per predicate, from truth or from mentions.

**Value changes.** A *value change* is two consecutive objects of one (subject, predicate) in
start order (ties — the same start — keep the truth's row order, which for imported facts is the
source file's order); two consecutive rows with the same object are no change. A single-valued
memory supersedes the old value when the new one arrives: a *false supersession* if the old value
was still valid then, a *true* one if it had ended. A multi-valued memory keeps the old value
beside the new one: a *missed supersession* if the old value had ended.

Whether the old value was still valid is judged by one of two rules (:data:`RULES`):

* ``"handover"`` (the default) compares *periods*. A bound known to a year (or month, day) says
  the value began, or last held, somewhere in that period (truth columns ``start_period`` and
  ``end_period``; without them a bound is exact, its period one second). The old value was still
  valid only if the period it last held in begins after the new value's start period has ended:
  an old value whose end year is the new value's start year was *handed over* in that year — a
  true supersession. This is the rule under which the overlap is certain.
* ``"inclusive"`` compares seconds: still valid if the old value's ``valid_to`` (the end of its
  end period, exclusive) is after the new value's ``valid_from``. With year bounds every same-year
  handover counts as an overlap: the rule under which an overlap is merely possible.

An open (unknown) end is still valid under both rules. Rows never true (``valid_to <= valid_from``,
the generator's misstatements) are left out.

**From mentions alone** (:func:`mention_changes`): the changes are consecutive distinct objects in
order of first mention, and a change counts as *mentioned again* — evidence that the old value was
still valid — when the old object is mentioned more than ``window_days`` after the new object's
first mention. A window of one period (a year for year-bounded imports:
:func:`default_window_days`) asks for a mention in a later period than the new value's first, the
mention-side analogue of the handover rule. (Also requiring the new object to be mentioned after
that — interleaving proper, excluding a value that came back — was tried and did worse on both
Wikidata12k and the synthetic ``small`` log: recalled events are still true.) The evidence is one-
sided: a still-valid value that is never mentioned again looks like a change.

**The decision** (:func:`decide_cardinality`): per predicate, single-valued costs
``w_false × (changes whose old value was still valid)`` and multi-valued costs
``w_missed × (changes whose old value had ended)``; the cheaper wins (a tie stays single-valued, the
seed's choice). The share of still-valid changes gets a Wilson interval, and a decision whose
interval contains the break-even share ``w_missed / (w_false + w_missed)`` is flagged ``uncertain``.

Policies richer than the binary registry, and the held-out comparison of every policy, are in
:mod:`factmem.evaluation.cardinality_policy`.

Ground floor: pandas, numpy and scipy; :mod:`factmem.evaluation.cardinality` for the previous threshold rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm

from factmem.core.codes import DAY, OPEN
from factmem.errors import InputError

__all__ = [
    "RULES",
    "SOURCES",
    "Weights",
    "decide_cardinality",
    "default_window_days",
    "mention_changes",
    "multi_valued_of",
    "suggest_cardinality",
    "value_changes",
    "wilson_interval",
]

RULES = ("handover", "inclusive")
SOURCES = ("truth", "mentions")
#: numpy datetime units of the periods a bound may be known to
_UNITS = {"year": "Y", "month": "M", "day": "D"}
#: a re-mention later than this after the period's start lies in a later period
_PERIOD_DAYS = {"year": 366.0, "month": 31.0, "day": 1.0}
DEFAULT_WINDOW_DAYS = 30.0


@dataclass(frozen=True)
class Weights:
    """What one false and one missed supersession cost (default: equal)."""

    w_false: float = 1.0
    w_missed: float = 1.0

    def __post_init__(self) -> None:
        for name in ("w_false", "w_missed"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v) or v < 0:
                raise InputError(f"{name} = {v!r} is invalid: must be a finite number >= 0")
        if self.w_false == 0 and self.w_missed == 0:
            raise InputError("w_false and w_missed are both 0: nothing to minimise")

    @property
    def break_even(self) -> float:
        """The share of still-valid changes above which multi-valued is cheaper."""
        return self.w_missed / (self.w_false + self.w_missed)

    def to_dict(self) -> dict[str, float]:
        return {"w_false": float(self.w_false), "w_missed": float(self.w_missed)}


# -- value changes -----------------------------------------------------------------------------------


def _check_rule(rule: str) -> str:
    if rule not in RULES:
        raise InputError(f"rule = {rule!r} is invalid: must be one of {', '.join(RULES)}")
    return rule


def _label(rule: str) -> str:
    return f"still_valid_{_check_rule(rule)}"


def _period_column(truth: pd.DataFrame, name: str) -> np.ndarray:
    if name not in truth.columns:
        return np.full(len(truth), None, dtype=object)
    col = truth[name].to_numpy(dtype=object)
    bad = pd.notna(col) & ~pd.Series(col).isin(list(_UNITS)).to_numpy()
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"truth row {i}: {name} = {col[i]!r}; expected empty or one of {', '.join(_UNITS)}")
    return col


def _start_period_end(valid_from: np.ndarray, period: np.ndarray) -> np.ndarray:
    """First second after the period the value began in (exact bounds: a one-second period)."""
    out = valid_from + 1
    for name, unit in _UNITS.items():  # a loop over the three period kinds
        rows = period == name
        if rows.any():
            start = valid_from[rows].astype("datetime64[s]").astype(f"datetime64[{unit}]")
            out[rows] = (start + 1).astype("datetime64[s]").astype(np.int64)
    return out


def _end_period_start(valid_to: np.ndarray, period: np.ndarray) -> np.ndarray:
    """First second of the period the value last held in (open ends stay :data:`OPEN`)."""
    is_open = valid_to == OPEN
    out = np.where(is_open, OPEN, valid_to - 1)
    for name, unit in _UNITS.items():
        rows = (period == name) & ~is_open
        if rows.any():
            last = (valid_to[rows] - 1).astype("datetime64[s]").astype(f"datetime64[{unit}]")
            out[rows] = last.astype("datetime64[s]").astype(np.int64)
    return out


def value_changes(truth: pd.DataFrame) -> pd.DataFrame:
    """The value changes of a truth table, one row each, judged by both rules.

    ``truth``: subject, predicate, object, valid_from, valid_to (nullable: open), optionally
    ``start_period`` / ``end_period`` ("year", "month", "day"; empty: exact). Returns subject,
    predicate, old_object, new_object, old_valid_from, old_valid_to (nullable), new_valid_from,
    ``still_valid_handover`` and ``still_valid_inclusive`` (the old value was still valid when the
    new one started, by each rule), in (subject, predicate, start) order.
    """
    missing = [c for c in ("subject", "predicate", "object", "valid_from", "valid_to") if c not in truth.columns]
    if missing:
        raise InputError(f"truth has no column {missing[0]!r}")
    vf_all = truth["valid_from"].to_numpy(np.int64)
    vt_all = pd.array(truth["valid_to"], dtype="Int64").to_numpy(dtype=np.int64, na_value=OPEN)
    ever = vt_all > vf_all  # never-true rows (misstatements) are no value
    subj = truth["subject"].to_numpy(object)[ever]
    pred = truth["predicate"].to_numpy(object)[ever]
    obj = truth["object"].to_numpy(object)[ever]
    vf, vt = vf_all[ever], vt_all[ever]
    start_period = _period_column(truth, "start_period")[ever]
    end_period = _period_column(truth, "end_period")[ever]
    subj_code = pd.factorize(subj, sort=True)[0]
    pred_code = pd.factorize(pred, sort=True)[0]
    order = np.lexsort((np.arange(len(vf)), vf, pred_code, subj_code))
    subj, pred, obj, vf, vt = subj[order], pred[order], obj[order], vf[order], vt[order]
    start_period, end_period = start_period[order], end_period[order]
    subj_code, pred_code = subj_code[order], pred_code[order]
    pair = (subj_code[1:] == subj_code[:-1]) & (pred_code[1:] == pred_code[:-1]) & (obj[1:] != obj[:-1])
    old, new = np.flatnonzero(pair), np.flatnonzero(pair) + 1
    old_end_period_start = _end_period_start(vt[old], end_period[old])
    new_start_period_end = _start_period_end(vf[new], start_period[new])
    old_vt = vt[old]
    return pd.DataFrame({
        "subject": pd.Series(subj[new], dtype=object),
        "predicate": pd.Series(pred[new], dtype=object),
        "old_object": pd.Series(obj[old], dtype=object),
        "new_object": pd.Series(obj[new], dtype=object),
        "old_valid_from": vf[old],
        "old_valid_to": pd.arrays.IntegerArray(np.where(old_vt == OPEN, 0, old_vt), old_vt == OPEN),
        "new_valid_from": vf[new],
        "still_valid_handover": old_end_period_start >= new_start_period_end,
        "still_valid_inclusive": old_vt > vf[new],
    })


def default_window_days(scenario: Mapping[str, Any] | None, rule: str = "handover") -> float:
    """The mention window that matches a truth rule.

    For an imported log whose scenario records the periods of its start bounds: one typical
    period under ``"handover"`` (a re-mention in a later period than the new value's first), 0
    under ``"inclusive"`` (any re-mention after it). Otherwise 30 days.
    """
    _check_rule(rule)
    periods = ((scenario or {}).get("import") or {}).get("start_periods") or {}
    known = {p: int(n) for p, n in periods.items() if p in _PERIOD_DAYS and int(n) > 0}
    if not known:
        return DEFAULT_WINDOW_DAYS
    if rule == "inclusive":
        return 0.0
    typical = max(sorted(known), key=lambda p: known[p])
    return _PERIOD_DAYS[typical]


def mention_changes(events: pd.DataFrame, *, window_days: float = DEFAULT_WINDOW_DAYS) -> pd.DataFrame:
    """The value changes seen in mentions, and whether the old value was mentioned again.

    ``events``: subject, predicate, object, ts (in log order). A change is two consecutive
    distinct objects of one (subject, predicate) in order of first mention (ties in log order);
    ``mentioned_again``: the old object is mentioned at some ts > ``new_first_ts + window_days``
    (evidence that it was still valid); ``mentioned_again_at``: the first such ts;
    ``informative``: the old or the new object is mentioned after ``new_first_ts + window_days`` (if
    neither is, the mentions say nothing about the change: one-off events look like this).
    """
    if isinstance(window_days, bool) or not isinstance(window_days, (int, float)) or not window_days >= 0:
        raise InputError(f"window_days = {window_days!r} is invalid: must be a number >= 0")
    missing = [c for c in ("subject", "predicate", "object", "ts") if c not in events.columns]
    if missing:
        raise InputError(f"events have no column {missing[0]!r}")
    ts = events["ts"].to_numpy(np.int64)
    in_order = np.argsort(ts, kind="stable")  # log order within a timestamp
    subj = events["subject"].to_numpy(object)[in_order]
    pred = events["predicate"].to_numpy(object)[in_order]
    obj = events["object"].to_numpy(object)[in_order]
    ts = ts[in_order]
    triple = pd.MultiIndex.from_arrays([subj, pred, obj]).factorize()[0]  # numbered in first-mention order
    n_triples = int(triple.max()) + 1 if len(triple) else 0
    first_row = np.full(n_triples, len(ts), np.int64)
    np.minimum.at(first_row, triple, np.arange(len(ts)))
    last_ts = np.full(n_triples, np.iinfo(np.int64).min, np.int64)
    np.maximum.at(last_ts, triple, ts)
    t_subj, t_pred, t_obj = subj[first_row], pred[first_row], obj[first_row]
    s_code = pd.factorize(t_subj, sort=True)[0]
    p_code = pd.factorize(t_pred, sort=True)[0]
    seq = np.lexsort((first_row, p_code, s_code))
    pair = (s_code[seq][1:] == s_code[seq][:-1]) & (p_code[seq][1:] == p_code[seq][:-1])
    old_t, new_t = seq[:-1][pair], seq[1:][pair]
    new_first = ts[first_row[new_t]]
    # each triple is the old value of at most one change: index the change by its old triple
    change_of_old = np.full(n_triples, -1, np.int64)
    change_of_old[old_t] = np.arange(len(old_t))
    ch = change_of_old[triple]
    rows = ch >= 0
    ch_rows, ts_rows = ch[rows], ts[rows]
    # no upper bound at the new value's last mention: an old event recalled after the next one
    # is still true (bounding it to the new value's mentions was tried: worse on both test logs)
    hit = ts_rows > new_first[ch_rows] + window_days * DAY
    again = np.bincount(ch_rows[hit], minlength=len(old_t)) > 0
    first_hit = np.full(len(old_t), OPEN, np.int64)
    np.minimum.at(first_hit, ch_rows[hit], ts_rows[hit])
    # informative: either value is heard of past the window, so silence of the old one means something
    after = new_first + window_days * DAY
    informative = (last_ts[old_t] > after) | (last_ts[new_t] > after)
    return pd.DataFrame({
        "subject": pd.Series(t_subj[new_t], dtype=object),
        "predicate": pd.Series(t_pred[new_t], dtype=object),
        "old_object": pd.Series(t_obj[old_t], dtype=object),
        "new_object": pd.Series(t_obj[new_t], dtype=object),
        "new_first_ts": new_first,
        "new_last_ts": last_ts[new_t],
        "mentioned_again": again,
        "mentioned_again_at": pd.arrays.IntegerArray(np.where(again, first_hit, 0), ~again),
        "informative": informative,
    })


# -- the decision --------------------------------------------------------------------------------------


def wilson_interval(successes: np.ndarray, trials: np.ndarray, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval of a binomial share (0..1; [0, 1] where there are no trials)."""
    k = np.asarray(successes, dtype=float)
    n = np.asarray(trials, dtype=float)
    z = float(norm.ppf(0.5 + confidence / 2))
    with np.errstate(invalid="ignore", divide="ignore"):
        share = k / n
        denom = 1 + z * z / n
        centre = (share + z * z / (2 * n)) / denom
        half = z * np.sqrt(share * (1 - share) / n + z * z / (4 * n * n)) / denom
    low = np.where(n > 0, np.clip(centre - half, 0, 1), 0.0)
    high = np.where(n > 0, np.clip(centre + half, 0, 1), 1.0)
    return low, high


def decide_cardinality(changes: pd.DataFrame, label: str, weights: Weights = Weights(), *,
                       source: str = "truth", confidence: float = 0.95) -> pd.DataFrame:
    """Per predicate, the counts of both choices, their costs, and the cheaper choice.

    ``changes``: from :func:`value_changes` or :func:`mention_changes`; ``label``: the boolean
    column saying the old value was still valid (``still_valid_handover``, ``mentioned_again``, ...).
    Columns: predicate, source, changes, ``single_false`` (= still valid), ``single_missed`` (0),
    ``multi_false`` (0), ``multi_missed`` (= ended), ``cost_single``, ``cost_multi``, ``choice``
    ("single" | "multi"), ``cost`` and ``cost_share`` (per change) of the choice with its Wilson
    interval (``cost_share_low``, ``cost_share_high``), ``still_valid_share`` with its interval,
    and ``uncertain`` (the interval contains the break-even share). Mention changes (with an
    ``informative`` column) add ``informative``, the changes that carry evidence; a predicate with
    none is also ``uncertain``.
    """
    if label not in changes.columns:
        raise InputError(f"changes have no column {label!r}")
    g = changes.assign(_sv=changes[label].astype(bool)).groupby("predicate", sort=True)["_sv"]
    n = g.size()
    still = g.sum().astype(np.int64)
    ended = (n - still).astype(np.int64)
    low, high = wilson_interval(still.to_numpy(), n.to_numpy(), confidence)
    cost_single = weights.w_false * still
    cost_multi = weights.w_missed * ended
    multi = (cost_multi < cost_single).to_numpy()
    share = (still / n).to_numpy(float)
    # per change, the chosen option's cost: w_false × share (single) or w_missed × (1 − share) (multi)
    cost_share = np.where(multi, weights.w_missed * (1 - share), weights.w_false * share)
    cost_low = np.where(multi, weights.w_missed * (1 - high), weights.w_false * low)
    cost_high = np.where(multi, weights.w_missed * (1 - low), weights.w_false * high)
    out = pd.DataFrame({
        "predicate": n.index.astype(object),
        "source": source,
        "changes": n.to_numpy(np.int64),
        "single_false": still.to_numpy(np.int64),
        "single_missed": 0,
        "multi_false": 0,
        "multi_missed": ended.to_numpy(np.int64),
        "cost_single": cost_single.to_numpy(float),
        "cost_multi": cost_multi.to_numpy(float),
        "choice": np.where(multi, "multi", "single"),
        "cost": np.minimum(cost_single, cost_multi).to_numpy(float),
        "cost_share": cost_share,
        "cost_share_low": cost_low,
        "cost_share_high": cost_high,
        "still_valid_share": share,
        "still_valid_low": low,
        "still_valid_high": high,
        "uncertain": (low <= weights.break_even) & (weights.break_even <= high),
    })
    if "informative" in changes.columns:
        informative = changes["informative"].astype(bool).groupby(changes["predicate"], sort=True).sum()
        out["informative"] = informative.reindex(n.index).to_numpy(np.int64)
        out["uncertain"] |= out["informative"] == 0
    return out.reset_index(drop=True)


def multi_valued_of(decision: pd.DataFrame) -> frozenset[str]:
    """The predicates a :func:`decide_cardinality` table declares multi-valued."""
    return frozenset(decision.loc[decision["choice"] == "multi", "predicate"])


def suggest_cardinality(dataset, *, rule: str = "handover", weights: Weights = Weights(),
                        window_days: float | None = None, confidence: float = 0.95) -> pd.DataFrame:
    """The per-predicate decision for a dataset: from truth intervals when it has any, else mentions."""
    if len(dataset.truth):
        return decide_cardinality(value_changes(dataset.truth), _label(rule), weights, source="truth",
                                  confidence=confidence)
    window = default_window_days(dataset.scenario, rule) if window_days is None else window_days
    return decide_cardinality(mention_changes(dataset.events, window_days=window), "mentioned_again", weights,
                              source="mentions", confidence=confidence)

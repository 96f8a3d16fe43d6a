"""Cardinality policies beyond the binary registry, and the held-out comparison of every policy.

**A richer policy** (:class:`ConcurrentObjects`, :func:`learn_concurrent_policy`): on a
single-valued predicate some objects are held beside the others (a national team beside a club):
an object that *stays* is not superseded by a new value, one that *joins* does not supersede the
current one. Each (predicate, object, role) is decided by the same cost rule on its changes, shrunk
toward the predicate's share by a beta prior of ``prior_strength`` pseudo-changes. Per predicate the
policy then takes multi-valued, single-valued, or single-valued with exemptions (at the prior
strength), whichever costs least in an inner k-fold over subjects. The store does not apply it (its
registry is per predicate); :func:`compare_policies` measures what it would gain.

**The comparison** (:func:`compare_policies`): with truth, every policy's false and missed counts
are those of a *replay* of the log through the memory with that policy's registry
(:mod:`factmem.evaluation.cardinality_replay`: what a user counts from ``supersedes_id`` against the
truth intervals), as a share of the truth's value changes — the table predicts what the store will
do. *False* counts the still-valid values the replay superseded (once per value: alternating
mentions may drop and re-insert one many times; ``false_supersessions`` counts every time), *missed*
the changes whose ended old value the replay still held after the new one arrived. The change
counting (each value change superseded or not, by the registry alone) is kept beside
it as a labelled fast first pass (``counted_*`` columns) with its gap to the replay: the two nearly
agree on a log with one mention per fact (they differ only where a value has several truth rows),
and differ when repeated mentions of an old value re-insert it and supersede the newer one. With no truth, the policies are scored on the mention changes by counting
(re-mentions standing in for truth; nothing to replay against). Choices that learn
from data are made with k-fold cross-fitting over subjects (seeded): each subject's changes are
scored by a choice made without that subject, so the reported number is not chosen with
hindsight; the best static choice *with* hindsight is the baseline. Intervals are a seeded
bootstrap over subjects.

Value changes, weights and the per-predicate decision are in :mod:`factmem.evaluation.cardinality_choice`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from factmem.core.codes import OPEN
from factmem.errors import InputError
from factmem.evaluation.cardinality_choice import (
    Weights,
    _check_rule,
    _label,
    decide_cardinality,
    default_window_days,
    mention_changes,
    multi_valued_of,
    value_changes,
)

__all__ = [
    "PRIOR_GRID",
    "ConcurrentObjects",
    "ConcurrentPolicy",
    "PolicyComparison",
    "compare_policies",
    "learn_concurrent_objects",
    "learn_concurrent_policy",
    "subject_folds",
    "superseded",
]

#: prior strengths the inner cross-validation of the concurrent-objects policy chooses from
PRIOR_GRID: tuple[float, ...] = (0.0, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0)


# -- a richer policy: objects held beside the others ---------------------------------------------------


@dataclass
class ConcurrentObjects:
    """Per single-valued predicate, objects exempt from supersession.

    ``stay``: predicate → objects that a new value does not supersede; ``join``: predicate →
    objects whose arrival supersedes nothing.
    """

    stay: dict[str, frozenset[str]] = field(default_factory=dict)
    join: dict[str, frozenset[str]] = field(default_factory=dict)

    def size(self) -> int:
        return sum(len(v) for v in self.stay.values()) + sum(len(v) for v in self.join.values())

    def to_dict(self) -> dict[str, dict[str, list[str]]]:
        return {"stay": {p: sorted(v) for p, v in sorted(self.stay.items())},
                "join": {p: sorted(v) for p, v in sorted(self.join.items())}}

    def _pairs(self, role: str) -> pd.MultiIndex:
        table = self.stay if role == "stay" else self.join
        rows = [(p, o) for p, objs in table.items() for o in objs]
        return pd.MultiIndex.from_tuples(rows, names=["predicate", "object"]) if rows else \
            pd.MultiIndex.from_arrays([[], []], names=["predicate", "object"])


@dataclass
class _Encoded:
    """Changes as integer codes: predicate, and (predicate, object) keys of the old and new values."""

    predicates: np.ndarray  # names, by code
    keys: pd.MultiIndex  # (predicate, object), by key code
    pred: np.ndarray  # per change
    old_key: np.ndarray
    new_key: np.ndarray
    key_pred: np.ndarray  # predicate code of each key
    still: np.ndarray  # per change: the old value was still valid


def _encode(changes: pd.DataFrame, label: str) -> _Encoded:
    if label not in changes.columns:
        raise InputError(f"changes have no column {label!r}")
    pred_code, predicates = pd.factorize(changes["predicate"].to_numpy(object), sort=True)
    both = pd.MultiIndex.from_arrays([np.concatenate([changes["predicate"].to_numpy(object)] * 2),
                                      np.concatenate([changes["old_object"].to_numpy(object),
                                                      changes["new_object"].to_numpy(object)])])
    key_code, keys = both.factorize()
    n = len(changes)
    key_pred = np.zeros(len(keys), np.int64)
    key_pred[key_code] = np.concatenate([pred_code, pred_code])
    return _Encoded(np.asarray(predicates, dtype=object), keys, pred_code, key_code[:n], key_code[n:], key_pred,
                    changes[label].to_numpy(bool))


def _exemptions(enc: _Encoded, rows: np.ndarray, weights: Weights, strength: float) -> tuple[np.ndarray, np.ndarray]:
    """Per key, whether it stays (as an old value) and joins (as a new one), learned on ``rows``.

    Every predicate is treated as single-valued; keys unseen in ``rows`` are not exempt.
    """
    n_keys, n_preds = len(enc.keys), len(enc.predicates)
    still = enc.still[rows].astype(float)
    pred_n = np.bincount(enc.pred[rows], minlength=n_preds)
    with np.errstate(invalid="ignore", divide="ignore"):
        share_of_pred = np.bincount(enc.pred[rows], weights=still, minlength=n_preds) / pred_n
    prior = np.nan_to_num(share_of_pred)[enc.key_pred]
    out = []
    for key in (enc.old_key[rows], enc.new_key[rows]):  # a loop over the two roles
        n = np.bincount(key, minlength=n_keys)
        with np.errstate(invalid="ignore", divide="ignore"):
            share = (np.bincount(key, weights=still, minlength=n_keys) + strength * prior) / (n + strength)
        out.append((n > 0) & (weights.w_false * share > weights.w_missed * (1 - share)))
    return out[0], out[1]


def _objects_from(enc: _Encoded, stay: np.ndarray, join: np.ndarray) -> ConcurrentObjects:
    tables = []
    for exempt in (stay, join):
        table: dict[str, set[str]] = {}
        for p, o in enc.keys[exempt]:  # only the (few) exempt objects
            table.setdefault(str(p), set()).add(str(o))
        tables.append({p: frozenset(v) for p, v in sorted(table.items())})
    return ConcurrentObjects(stay=tables[0], join=tables[1])


def _check_strength(prior_strength) -> float:
    if isinstance(prior_strength, bool) or not isinstance(prior_strength, (int, float)) or not prior_strength >= 0:
        raise InputError(f"prior_strength = {prior_strength!r} is invalid: must be a number >= 0")
    return float(prior_strength)


def learn_concurrent_objects(changes: pd.DataFrame, label: str, multi_valued: Iterable[str],
                             weights: Weights = Weights(), *, prior_strength: float = 2.0) -> ConcurrentObjects:
    """Learn which objects of single-valued predicates stay or join (see the module docstring).

    Per (predicate, object) in a role (old object → stay, new object → join), the still-valid share
    is ``(still + prior_strength × q) / (changes + prior_strength)`` with ``q`` the predicate's
    share; the object is exempt when ``w_false × share > w_missed × (1 − share)``. Predicates in
    ``multi_valued`` get no exemptions (nothing to exempt from).
    """
    strength = _check_strength(prior_strength)
    enc = _encode(changes, label)
    stay, join = _exemptions(enc, np.ones(len(changes), bool), weights, strength)
    multi = np.isin(enc.predicates, list(frozenset(multi_valued)))[enc.key_pred]
    return _objects_from(enc, stay & ~multi, join & ~multi)


@dataclass
class ConcurrentPolicy:
    """Per predicate: multi-valued, or single-valued with its concurrent objects exempt.

    ``per_predicate``: the option each predicate took (``multi``, ``single``, or ``single+objects``
    with its ``prior_strength``) and the inner cross-validated cost of each option.
    """

    multi_valued: frozenset[str]
    objects: ConcurrentObjects
    per_predicate: pd.DataFrame

    def superseded(self, changes: pd.DataFrame) -> np.ndarray:
        return superseded(changes, self.multi_valued, self.objects)

    def to_dict(self) -> dict[str, Any]:
        return {"multi_valued_predicates": sorted(self.multi_valued), "concurrent_objects": self.objects.to_dict(),
                "per_predicate": self.per_predicate.to_dict(orient="records")}


def learn_concurrent_policy(changes: pd.DataFrame, label: str, weights: Weights = Weights(), *,
                            prior_strength: float | None = None, folds: int = 3, seed: int = 0) -> ConcurrentPolicy:
    """Choose per predicate between multi-valued, single-valued, and single-valued with concurrent
    objects (at each prior strength of :data:`PRIOR_GRID`, or ``prior_strength`` alone), by the
    cost of each option in a k-fold over the subjects of ``changes`` (the options without learning,
    multi and single, cost their plain counts). Ties go to the simpler option.
    """
    grid = PRIOR_GRID if prior_strength is None else (_check_strength(prior_strength),)
    enc = _encode(changes, label)
    n_preds = len(enc.predicates)
    still = enc.still.astype(float)
    cost_multi = weights.w_missed * np.bincount(enc.pred, weights=1 - still, minlength=n_preds)
    cost_single = weights.w_false * np.bincount(enc.pred, weights=still, minlength=n_preds)
    cost_objects = np.zeros((len(grid), n_preds))
    subjects = changes["subject"].unique()
    if len(subjects) >= folds:
        inner = subject_folds(subjects, folds, seed).reindex(changes["subject"]).to_numpy()
        for k in range(folds):  # loops over folds and prior strengths
            train, test = inner != k, inner == k
            for j, strength in enumerate(grid):
                stay, join = _exemptions(enc, train, weights, strength)
                sup = ~(stay[enc.old_key[test]] | join[enc.new_key[test]])
                err = weights.w_false * (sup & enc.still[test]) + weights.w_missed * (~sup & ~enc.still[test])
                cost_objects[j] += np.bincount(enc.pred[test], weights=err, minlength=n_preds)
    else:  # too few subjects to cross-validate: no exemptions
        cost_objects[:] = np.inf
    best_j = np.argmin(cost_objects, axis=0)
    best_objects = cost_objects[best_j, np.arange(n_preds)]
    # options in order of simplicity; argmin takes the first of equal costs
    option = np.argmin(np.stack([cost_single, cost_multi, best_objects]), axis=0)
    names = np.array(["single", "multi", "single+objects"], dtype=object)[option]
    strength_of = np.where(option == 2, np.asarray(grid, float)[best_j], np.nan)
    stay = np.zeros(len(enc.keys), bool)
    join = np.zeros(len(enc.keys), bool)
    for strength in np.unique(strength_of[option == 2]):  # a loop over the strengths in use
        s_k, j_k = _exemptions(enc, np.ones(len(changes), bool), weights, float(strength))
        mine = (option == 2)[enc.key_pred] & (strength_of[enc.key_pred] == strength)
        stay |= s_k & mine
        join |= j_k & mine
    per_predicate = pd.DataFrame({"predicate": enc.predicates, "option": names, "prior_strength": strength_of,
                                  "cost_single": cost_single, "cost_multi": cost_multi,
                                  "cost_single_objects": best_objects})
    return ConcurrentPolicy(multi_valued=frozenset(enc.predicates[option == 1]), objects=_objects_from(enc, stay, join),
                            per_predicate=per_predicate)


def superseded(changes: pd.DataFrame, multi_valued: Iterable[str], objects: ConcurrentObjects | None = None) -> np.ndarray:
    """Per change, whether a memory with this registry supersedes the old value."""
    out = ~changes["predicate"].isin(frozenset(multi_valued)).to_numpy()
    if objects is not None and len(changes):
        old = pd.MultiIndex.from_arrays([changes["predicate"], changes["old_object"]])
        new = pd.MultiIndex.from_arrays([changes["predicate"], changes["new_object"]])
        out &= ~old.isin(objects._pairs("stay")) & ~new.isin(objects._pairs("join"))
    return out


# -- held-out split -----------------------------------------------------------------------------------


def subject_folds(subjects: Iterable[str], folds: int = 3, seed: int = 0) -> pd.Series:
    """A seeded assignment of each distinct subject to one of ``folds`` folds (sizes differ by ≤ 1).

    The subjects are sorted first, so the assignment depends only on the set of subjects.
    """
    if isinstance(folds, bool) or not isinstance(folds, (int, np.integer)) or folds < 2:
        raise InputError(f"folds = {folds!r} is invalid: must be an integer >= 2")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"seed = {seed!r} is invalid: must be a non-negative integer")
    names = np.array(sorted(set(map(str, subjects))), dtype=object)
    if len(names) < folds:
        raise InputError(f"{len(names)} subjects cannot be split into {folds} folds")
    rng = np.random.default_rng(seed)
    fold = np.empty(len(names), np.int64)
    fold[rng.permutation(len(names))] = np.arange(len(names)) % folds
    return pd.Series(fold, index=pd.Index(names, name="subject"), name="fold")


# -- the comparison -----------------------------------------------------------------------------------


@dataclass
class PolicyComparison:
    """What each cardinality policy costs on a dataset's value changes (see :func:`compare_policies`).

    ``table``: one row per policy; ``per_predicate``: the decision on all subjects (hindsight) with
    both choices' counts; ``population``: what the percentages are of; ``settings``: the inputs;
    ``notes``: verdicts (the richer policy kept or dropped).
    """

    table: pd.DataFrame
    per_predicate: pd.DataFrame
    population: str
    settings: dict[str, Any]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table.to_dict(orient="records"),
                "per_predicate": self.per_predicate.to_dict(orient="records"),
                "population": self.population, "settings": dict(self.settings), "notes": list(self.notes)}

    def __str__(self) -> str:
        t = self.table
        shown = pd.DataFrame({
            "policy": t["policy"], "from": t["source"], "chosen on": t["chosen_on"],
            "false": t["false"], "missed": t["missed"], "false+missed": t["errors"],
            "false %": t["false_pct"].map("{:.1f}".format), "missed %": t["missed_pct"].map("{:.1f}".format),
            "false+missed %": [f"{e:.1f} [{lo:.1f}, {hi:.1f}]" for e, lo, hi in
                               zip(t["error_pct"], t["error_pct_low"], t["error_pct_high"])],
            "vs best static (pts)": [f"{d:+.1f} [{lo:+.1f}, {hi:+.1f}]" for d, lo, hi in
                                     zip(t["vs_best_static"], t["vs_best_static_low"], t["vs_best_static_high"])],
        })
        if "counted_error_pct" in t.columns and (t["measured_by"] == "replay").any():
            shown.insert(4, "false supersedes_id", t["false_supersessions"])
            shown["counted % (first pass)"] = t["counted_error_pct"].map("{:.1f}".format)
            shown["gap (pts)"] = t["gap_pts"].map("{:+.1f}".format)
        lines = [self.population, "", shown.to_string(index=False)]
        lines += ["", *("note: " + n for n in self.notes)] if self.notes else []
        return "\n".join(lines)


def _scored_changes(dataset, rule: str, window: float) -> tuple[pd.DataFrame, str, str]:
    """The changes every policy is scored on, their label column, and the population's description."""
    if len(dataset.truth):
        changes = value_changes(dataset.truth)
        label = _label(rule)
        what = (f"value changes in the truth (two consecutive objects of one subject and predicate in start "
                f"order), judged by the {rule} rule")
    else:
        changes = mention_changes(dataset.events, window_days=window)
        label = "mentioned_again"
        what = (f"value changes seen in mentions (no truth: 'false' means the old object was mentioned again "
                f"more than {window:g} days after the new one was first mentioned)")
    return changes, label, what


def _marked_at(mentioned: pd.DataFrame) -> pd.Series:
    """Per (subject, predicate), when a superseded value was first mentioned again (restore policy)."""
    hits = mentioned[mentioned["mentioned_again"]]
    return hits["mentioned_again_at"].astype(np.int64).groupby([hits["subject"], hits["predicate"]]).min()


def _arrival(dataset, changes: pd.DataFrame) -> np.ndarray:
    """When the memory first hears of each change's new value (its first mention; else its start)."""
    ev = dataset.events
    first = ev.groupby(["subject", "predicate", "object"], sort=False)["ts"].min()
    key = pd.MultiIndex.from_arrays([changes["subject"], changes["predicate"], changes["new_object"]])
    at = first.reindex(key).to_numpy(dtype=float)
    start = changes["new_valid_from"].to_numpy(dtype=float) if "new_valid_from" in changes else \
        changes["new_first_ts"].to_numpy(dtype=float)
    return np.where(np.isfinite(at), at, start).astype(np.int64)


def compare_policies(dataset, *, rule: str = "handover", weights: Weights = Weights(), folds: int = 3,
                     seed: int = 0, window_days: float | None = None, prior_strength: float | None = None,
                     threshold: float = 0.2, n_boot: int = 1000, confidence: float = 0.95) -> PolicyComparison:
    """Score the cardinality policies on a dataset (the table of ``factmem cardinality DIR --compare``).

    Rows (policy, source): the seed's rule (every predicate single-valued); the best static
    per-predicate choice *with hindsight* (chosen on all subjects: the baseline); the cost decision
    from truth and from mentions; the previous suggestion (overlap share >= ``threshold``,
    :func:`factmem.evaluation.cardinality.measure_cardinality`) from truth and from mentions; the cost decision
    plus concurrent objects (:func:`learn_concurrent_policy`: per predicate multi, single or single
    with exempt objects, by an inner k-fold on the training subjects), from truth and from mentions; and the restore policy (the cost
    decision from mentions, plus: once a superseded value of a subject is mentioned again, that
    subject's predicate is multi-valued from then on). All but the first two are chosen on the other
    folds (k-fold over subjects, seeded). Rows needing truth are left out when the dataset has none.

    Columns: policy, source, chosen_on, changes, false, missed, errors, cost, the three as % of the
    changes, the error %'s bootstrap interval (``error_pct_low``/``_high``), and the difference from
    the best static choice in points with its interval (``vs_best_static``, ``_low``, ``_high``).
    ``window_days`` (None: :func:`default_window_days`) is the mention window.
    """
    from factmem.evaluation.cardinality import measure_cardinality, suggest_multi_valued

    _check_rule(rule)
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 1:
        raise InputError(f"n_boot = {n_boot!r} is invalid: must be a positive integer")
    window = default_window_days(dataset.scenario, rule) if window_days is None else float(window_days)
    changes, label, what = _scored_changes(dataset, rule, window)
    if not len(changes):
        raise InputError("the dataset has no value changes (no subject and predicate with two objects): "
                         "nothing to compare")
    has_truth = bool(len(dataset.truth))
    events = dataset.events
    fold_of = subject_folds(pd.concat([changes["subject"], events["subject"]]).unique(), folds, seed)
    change_fold = fold_of.reindex(changes["subject"]).to_numpy()
    event_fold = fold_of.reindex(events["subject"]).to_numpy()
    mentioned = changes if not has_truth else mention_changes(events, window_days=window)
    mentioned_fold = fold_of.reindex(mentioned["subject"]).to_numpy()
    still = changes[label].to_numpy(bool)
    exempt_objects: dict[str, list[int]] = {"truth": [], "mentions": []}

    # per (policy, source): whether it supersedes each change; held-out rows are filled fold by fold
    held_out = [("cost decision", "truth"), ("cost decision", "mentions"),
                (f"previous suggestion: overlap share >= {threshold:g}", "truth"),
                (f"previous suggestion: overlap share >= {threshold:g}", "mentions"),
                ("cost decision + concurrent objects", "truth"), ("cost decision + concurrent objects", "mentions"),
                ("restore: a superseded value mentioned again makes its subject multi-valued", "mentions")]
    if not has_truth:
        held_out = [key for key in held_out if key[1] != "truth"]
    sup = {key: np.zeros(len(changes), bool) for key in held_out}
    # each held-out policy's registry per fold: (multi-valued predicates, exempt objects, restore)
    registry: dict[tuple[str, str], list[tuple[frozenset, ConcurrentObjects | None, bool]]] = \
        {key: [] for key in held_out}
    marked_at = _marked_at(mentioned)
    marked = marked_at.reindex(pd.MultiIndex.from_arrays([changes["subject"], changes["predicate"]])).to_numpy(float)
    restored = np.isfinite(marked) & (marked <= _arrival(dataset, changes))
    for k in range(folds):  # a loop over folds
        test = change_fold == k
        scored = changes[test]
        train_m = mentioned[mentioned_fold != k]
        training = {"mentions": (train_m, "mentioned_again")}
        if has_truth:
            training["truth"] = (changes[change_fold != k], label)
        for src, (train, lab) in training.items():  # a loop over the two sources
            multi = multi_valued_of(decide_cardinality(train, lab, weights, source=src))
            sup[("cost decision", src)][test] = superseded(scored, multi)
            registry[("cost decision", src)].append((multi, None, False))
            policy = learn_concurrent_policy(train, lab, weights, prior_strength=prior_strength, folds=folds,
                                             seed=seed)
            exempt_objects[src].append(policy.objects.size())
            sup[("cost decision + concurrent objects", src)][test] = policy.superseded(scored)
            registry[("cost decision + concurrent objects", src)].append((policy.multi_valued, policy.objects, False))
            if src == "mentions":
                sup[held_out[-1]][test] = superseded(scored, multi) & ~restored[test]
                registry[held_out[-1]].append((multi, None, True))
        ev_train = events[event_fold != k]
        previous = suggest_multi_valued(measure_cardinality(None, ev_train, threshold=threshold)) \
            if len(ev_train) else frozenset()
        sup[(f"previous suggestion: overlap share >= {threshold:g}", "mentions")][test] = superseded(scored, previous)
        registry[(f"previous suggestion: overlap share >= {threshold:g}", "mentions")].append((previous, None, False))
        if has_truth:
            truth_train = dataset.truth[fold_of.reindex(dataset.truth["subject"]).to_numpy() != k]
            previous = suggest_multi_valued(measure_cardinality(truth_train, threshold=threshold)) \
                if len(truth_train) else frozenset()
            sup[(f"previous suggestion: overlap share >= {threshold:g}", "truth")][test] = superseded(scored, previous)
            registry[(f"previous suggestion: overlap share >= {threshold:g}", "truth")].append((previous, None, False))

    hindsight = decide_cardinality(changes, label, weights, source="truth" if has_truth else "mentions",
                                   confidence=confidence)
    on = f"other folds ({folds}-fold by subject, seed {seed})"
    rows = [(("seed rule: every predicate single-valued", "-"), "-", np.ones(len(changes), bool)),
            (("best static per-predicate choice", "truth" if has_truth else "mentions"), "all subjects (hindsight)",
             superseded(changes, multi_valued_of(hindsight)))]
    rows += [(key, on, sup[key]) for key in held_out]
    static: dict[tuple[str, str], list[tuple[frozenset, ConcurrentObjects | None, bool]]] = {rows[0][0]: [(frozenset(), None, False)] * folds,
              rows[1][0]: [(multi_valued_of(hindsight), None, False)] * folds}
    every_subject = np.asarray(fold_of.index, dtype=object)
    code_of = pd.Series(np.arange(len(every_subject)), index=fold_of.index)
    n_subj = len(every_subject)
    change_code = code_of.reindex(changes["subject"]).to_numpy(np.int64)
    per_subject_changes = np.bincount(change_code, minlength=n_subj).astype(float)
    # the change counting: each change superseded or not by the registry alone
    counted_false = np.stack([np.bincount(change_code, weights=flags & still, minlength=n_subj)
                              for _, _, flags in rows], axis=1)
    counted_missed = np.stack([np.bincount(change_code, weights=~flags & ~still, minlength=n_subj)
                               for _, _, flags in rows], axis=1)
    if has_truth:  # the replay: what the memory supersedes with each policy's registry
        replay_false, replay_missed, raw = [], [], []
        for key, _, _ in rows:  # a loop over the policies
            folds_registry = static[key] if key in static else registry[key]
            f_sub, m_sub, n_raw = _replayed(dataset, changes, rule, folds_registry, event_fold, marked_at, code_of,
                                            n_subj)
            raw.append(n_raw)
            replay_false.append(f_sub)
            replay_missed.append(m_sub)
        false_counts, missed_counts = np.stack(replay_false, axis=1), np.stack(replay_missed, axis=1)
        measured_by = "replay"
        false_supersessions = np.asarray(raw, np.int64)
    else:
        false_supersessions = np.full(len(rows), -1, np.int64)
        false_counts, missed_counts = counted_false, counted_missed
        measured_by = "change counting"
    table = _score_table(false_counts, missed_counts, per_subject_changes, weights, n_boot, seed, confidence)
    counted = _score_table(counted_false, counted_missed, per_subject_changes, weights, 1, seed, confidence)
    table.insert(0, "policy", [key[0] for key, _, _ in rows])
    table.insert(1, "source", [key[1] for key, _, _ in rows])
    table.insert(2, "chosen_on", [on_ for _, on_, _ in rows])
    table.insert(3, "measured_by", measured_by)
    table["counted_false"] = counted["false"].to_numpy()
    table["counted_missed"] = counted["missed"].to_numpy()
    table["counted_error_pct"] = counted["error_pct"].to_numpy()
    table["gap_pts"] = table["error_pct"] - table["counted_error_pct"]
    table["false_supersessions"] = false_supersessions  # every supersedes_id of a still-valid value (-1: none)

    how = ("false and missed counted by replaying the log through the memory with each policy's registry "
           "(nothing forgotten), judged against the truth intervals; 'counted' = the change counting, a fast first "
           "pass" if has_truth else "false and missed by change counting (no truth to replay against)")
    population = (f"{len(changes):,} {what}; {changes['subject'].nunique():,} subjects with a change; {how}. "
                  f"Percentages are of the {len(changes):,} changes; intervals: {confidence:.0%} bootstrap over subjects "
                  f"({n_boot} resamples, seed {seed}), the hindsight choice held fixed. Cost = {weights.w_false:g} x "
                  f"false + {weights.w_missed:g} x missed. Mention window {window:g} days.")
    settings = {"rule": rule, **weights.to_dict(), "folds": folds, "seed": seed, "window_days": window,
                "prior_strength": prior_strength, "exempt_objects_per_fold": exempt_objects, "threshold": threshold,
                "n_boot": n_boot, "confidence": confidence, "scored_on": "truth" if has_truth else "mentions"}
    return PolicyComparison(table=table, per_predicate=hindsight, population=population, settings=settings,
                            notes=_verdicts(table))


def _replayed(dataset, changes: pd.DataFrame, rule: str, folds_registry: list, event_fold: np.ndarray,
              marked_at: pd.Series, code_of: pd.Series, n_subj: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Per subject, the still-valid values superseded and the missed changes of a replay of the whole
    log in which each subject's mentions follow its fold's registry, and the number of supersessions
    of a still-valid value (see :mod:`factmem.evaluation.cardinality_replay`)."""
    from factmem.evaluation.cardinality_replay import replay_errors, replay_registry

    events = dataset.events
    n = len(events)
    pred = events["predicate"].to_numpy(object)
    multi, stay, join = np.zeros(n, bool), np.zeros(n, bool), np.zeros(n, bool)
    switch = np.full(n, OPEN, np.int64)
    pairs = pd.MultiIndex.from_arrays([events["predicate"], events["object"]])
    for k, (mv, objects, restore) in enumerate(folds_registry):  # a loop over folds
        mine = event_fold == k
        multi[mine] = np.isin(pred[mine], list(mv))
        if objects is not None:
            stay[mine] = pairs[mine].isin(objects._pairs("stay"))
            join[mine] = pairs[mine].isin(objects._pairs("join"))
        if restore and len(marked_at):
            at = marked_at.reindex(pd.MultiIndex.from_arrays([events["subject"][mine], events["predicate"][mine]]))
            when = at.to_numpy(np.float64)  # Unix seconds: exact in a float
            marked = np.isfinite(when)
            rows_ = np.flatnonzero(mine)
            switch[rows_[marked]] = when[marked].astype(np.int64)
    replay = replay_registry(events, multi, stay, join, switch)
    sup, ch = replay_errors(replay, dataset.truth, events, rule=rule, changes=changes)
    # a still-valid value the memory dropped counts once, however often alternating mentions drop it
    dropped = sup[sup["false"]].drop_duplicates("value_row")
    false = np.bincount(code_of.reindex(dropped["subject"]).to_numpy(np.int64), minlength=n_subj).astype(float)
    missed = np.bincount(code_of.reindex(ch["subject"]).to_numpy(np.int64), weights=ch["missed"].to_numpy(float),
                         minlength=n_subj)
    return false, missed, float(sup["false"].sum())


def _score_table(false: np.ndarray, missed: np.ndarray, per_subject_changes: np.ndarray, weights: Weights,
                 n_boot: int, seed: int, confidence: float) -> pd.DataFrame:
    """Counts, shares and bootstrap intervals (over subjects) per policy column: ``false`` and
    ``missed`` are (subjects, policies) counts, shares are of all the changes."""
    n = float(per_subject_changes.sum())
    # resample the subjects that carry a change or an error (the others contribute nothing)
    carry = (per_subject_changes > 0) | ((false + missed) > 0).any(axis=1)
    false, missed, per_subject_changes = false[carry], missed[carry], per_subject_changes[carry]
    per_subject_errors = false + missed
    n_subj = len(per_subject_changes)
    rng = np.random.default_rng(seed)
    resampled_pct = []
    for start in range(0, n_boot, 200):  # chunks keep the (resamples × subjects) weights small
        size = min(200, n_boot - start)
        draw = rng.multinomial(n_subj, np.full(n_subj, 1 / n_subj), size=size).astype(float)
        resampled_pct.append(100 * (draw @ per_subject_errors) / (draw @ per_subject_changes)[:, None])
    pct = np.concatenate(resampled_pct, axis=0)
    tail = (1 - confidence) / 2
    best = 1  # the hindsight row is the baseline
    diff = pct - pct[:, [best]]
    f, m = false.sum(0), missed.sum(0)
    e = f + m
    return pd.DataFrame({
        "changes": int(n),
        "false": np.rint(f).astype(np.int64),
        "missed": np.rint(m).astype(np.int64),
        "errors": np.rint(e).astype(np.int64),
        "cost": weights.w_false * f + weights.w_missed * m,
        "false_pct": 100 * f / n,
        "missed_pct": 100 * m / n,
        "error_pct": 100 * e / n,
        "error_pct_low": np.quantile(pct, tail, axis=0),
        "error_pct_high": np.quantile(pct, 1 - tail, axis=0),
        "vs_best_static": 100 * (e - e[best]) / n,
        "vs_best_static_low": np.quantile(diff, tail, axis=0),
        "vs_best_static_high": np.quantile(diff, 1 - tail, axis=0),
    })


def _verdicts(table: pd.DataFrame) -> list[str]:
    """A richer policy is kept only where it beats the best static choice with hindsight, held out."""
    notes = []
    richer = table["policy"].str.startswith(("cost decision + concurrent objects", "restore:"))
    for _, r in table[richer].iterrows():
        verdict = "kept: beats" if r["vs_best_static_high"] < 0 else "dropped: does not beat"
        notes.append(f"{r['policy'].split(':')[0]} (from {r['source']}) {verdict} the best static choice with "
                     f"hindsight, held out: {r['vs_best_static']:+.1f} points [{r['vs_best_static_low']:+.1f}, "
                     f"{r['vs_best_static_high']:+.1f}] of false+missed")
    return notes

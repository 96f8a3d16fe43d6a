"""How well a no-truth definition of "needed" tracks the truth: measured on logs that have both.

A production memory has no ground truth, so ``tune --log PROD.sqlite`` chooses parameters by a proxy
(:mod:`factmem.evaluation.proxies`). Whether a proxy leads to the choice the truth would make is a
measurable question on synthetic logs with truth. :func:`measure_agreement` answers it for one log:

1. **Candidates**: the baseline (seed defaults with the log's multi-valued predicates:
   :func:`factmem.tuning.tune.base_params`) and ``n`` random draws of the default search space
   (seeded), replayed once (daily consolidation) and scored by every definition — the truth and each
   proxy — at every session start, budget ``k``, per subject.
2. Per proxy, against the truth:

   * ``rho`` — Spearman correlation of the candidates' utility@k (over all subjects) under the proxy
     and under the truth: does the proxy rank the candidates as the truth does?
   * ``decision_agrees`` — the promotion rule of ``tune`` (k-fold over subjects: each fold's choice
     scored on its held-out subjects, 95% bootstrap interval of the difference against the baseline,
     promoted when it excludes 0) applied with the proxy's scores and with the truth's: the same
     verdict? A proxy whose candidates mostly tie is *flat* and never promotes
     (:func:`flat_share`, :data:`FLAT_SHARE`).
   * ``truth_utility`` — the truth-scored held-out utility@k of the proxy's recommendation (each
     subject scored under the truth by the choice the proxy made on the other folds), beside
     ``truth_best`` (the truth's own choice, scored the same way) and ``truth_baseline``; ``regret`` =
     ``truth_best − truth_utility``; ``gain`` = ``truth_utility − truth_baseline`` (what following the
     proxy is worth, in the truth's terms).

:func:`agreement_table` runs it over several presets; ``benchmarks/bench_proxies.py`` prints the
table that docs/design.md records and from which the default proxy
(:data:`factmem.production.tune.DEFAULT_PROXY`) was chosen.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from factmem.core.params import MemoryParams
from factmem.evaluation.context import FIELDS, ContextEvaluator
from factmem.evaluation.proxies import PROXIES
from factmem.evaluation.simulate import PreparedLog, Schedule, encode_events, kernel_belief_arrays, prepare

__all__ = ["ALL_PROXIES", "DEFAULT_PROXY", "PROXY_AGREEMENT", "agreement_sentence", "proxy_notes", "FLAT_SHARE", "flat_share", "AgreementResult",
           "measure_agreement", "agreement_table", "spearman", "best_proxy"]

#: every no-truth definition of needed: the evaluator's ``next-session`` and those of :mod:`factmem.evaluation.proxies`
ALL_PROXIES: tuple[str, ...] = ("next-session", *PROXIES)
#: a definition is flat when more than this share of the candidates tie at the most common utility
FLAT_SHARE = 0.5
_CHUNK = 16  # candidates replayed at once (bounds the belief arrays held)

#: the no-truth definition of needed used when none is asked for: the best-agreeing one of the measured
#: table (docs/design.md, "Tuning without truth"; ``benchmarks/bench_proxies.py``): ``tune --log
#: PROD.sqlite`` and ``whatif`` use it
DEFAULT_PROXY = "kind-aware"
#: measured agreement with the truth per proxy (``benchmarks/bench_proxies.py``, 7 presets, 48 candidates):
#: mean Spearman rho of the candidates' utility@20, share of presets where the promote decision agrees,
#: mean truth-scored regret of the proxy's held-out recommendation against the truth's own
PROXY_AGREEMENT: dict[str, dict[str, float]] = {
    "next-session": {"rho": 0.462, "rho_min": -0.530, "decision_agrees": 2 / 7, "regret": 0.170, "presets": 7},
    "next-3-sessions": {"rho": 0.550, "rho_min": -0.371, "decision_agrees": 2 / 7, "regret": 0.159, "presets": 7},
    "hindsight": {"rho": 0.603, "rho_min": -0.309, "decision_agrees": 4 / 7, "regret": 0.084, "presets": 7},
    "later-mention": {"rho": 0.583, "rho_min": -0.320, "decision_agrees": 5 / 7, "regret": 0.152, "presets": 7},
    "kind-aware": {"rho": 0.761, "rho_min": 0.355, "decision_agrees": 7 / 7, "regret": 0.019, "presets": 7},
}


def agreement_sentence(needed: str) -> str:
    """What the report says about the proxy: its measured agreement with the truth."""
    a = PROXY_AGREEMENT.get(needed)
    if a is None or not a["presets"]:
        return f"needed = {needed}: no measured agreement with the truth."
    return (f"needed = {needed} (a proxy: the file has no truth). On synthetic logs with truth, this proxy's ranking "
            f"of the candidates agrees at ρ = {a['rho']:.2f} (Spearman, mean over {a['presets']:.0f} presets; worst "
            f"{a['rho_min']:+.2f}); its "
            f"promote/not decision matches the truth's on {100 * a['decision_agrees']:.0f}% of them; following it "
            f"costs {a['regret']:.3f} of truth-scored utility@20 against the truth's own choice "
            "(docs/design.md, \"Tuning without truth\").")



def proxy_notes(needed: str, kinds: Any) -> list[str]:
    """Notes on whether the log gives the proxy ``needed`` what it reads: ``kind-aware`` tells episodes
    from lasting facts by the kind of their mentions (``kinds``: the mentions' kind column), so a log
    with no episode at all — a client that does not classify what it stores — reads every fact as
    lasting, needed until contradicted."""
    if needed != "kind-aware" or not len(kinds):
        return []
    k = pd.Series(kinds)
    if isinstance(k.dtype, pd.CategoricalDtype):  # the codes, not 10M strings
        cats = k.cat.categories
        has = "episodic" in cats and bool((k.cat.codes.to_numpy() == cats.get_loc("episodic")).any())
    else:
        has = bool((k == "episodic").any())
    if has:
        return []
    return ["needed = kind-aware reads episodes and lasting facts apart by their kind, and this log has no fact of "
            "kind episodic: every fact is read as lasting (needed until the log says another value), so forgetting "
            "can only look worse. If the client stores episodes under another kind, this proxy cannot tell them "
            "apart; compare with --needed hindsight."]


def flat_share(values: np.ndarray, *, decimals: int = 12) -> float:
    """Share of candidates at the most common value (rounded to ``decimals``): 1.0 when all tie."""
    v = np.round(np.asarray(values, np.float64), decimals)
    v = v[np.isfinite(v)]
    if not len(v):
        return 1.0
    _, counts = np.unique(v, return_counts=True)
    return float(counts.max() / len(v))


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman rank correlation (average ranks for ties); NaN when either side is constant."""
    ra = pd.Series(a).rank().to_numpy()
    rb = pd.Series(b).rank().to_numpy()
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


@dataclass
class AgreementResult:
    """One log's agreement of each proxy with the truth (``table``: one row per proxy) and the
    per-candidate utilities under every definition (``utilities``: candidate × definition)."""

    log: str
    budget: int
    candidates: int
    table: pd.DataFrame
    utilities: pd.DataFrame


def _per_subject_sums(prepared: PreparedLog, candidates: list[MemoryParams], modes: Sequence[str], budget: int,
                      schedule: Schedule) -> dict[str, np.ndarray]:
    """candidate × subject × FIELDS sums at ``budget`` for each definition (one replay per chunk)."""
    evaluators = {m: ContextEvaluator(prepared, budgets=(budget,), needed=m) for m in modes}  # type: ignore[arg-type]
    grid = schedule.consolidations(prepared.start, prepared.end)
    out: dict[str, list[np.ndarray]] = {m: [] for m in modes}
    encoded = encode_events(prepared, candidates[0].multi_valued_predicates)
    for a in range(0, len(candidates), _CHUNK):
        chunk = candidates[a:a + _CHUNK]
        for p, bel in zip(chunk, kernel_belief_arrays(prepared, chunk, grid, encoded)):
            for m, ev in evaluators.items():
                out[m].append(ev.score(bel, p).sums[0, :, 0, :])
    subjects = {m: ev.subjects for m, ev in evaluators.items()}
    ref = subjects[modes[0]]
    result = {}
    for m in modes:  # align subjects (a definition may score a subject no other does)
        s = np.stack(out[m])
        idx = pd.Index(subjects[m]).get_indexer(pd.Index(ref))
        aligned = np.zeros((s.shape[0], len(ref), s.shape[2]))
        ok = idx >= 0
        aligned[:, ok, :] = s[:, idx[ok], :]
        result[m] = aligned
    return result


def _utility(sums: np.ndarray) -> np.ndarray:
    """Pooled utility of candidate × subject × FIELDS sums over subjects (per candidate)."""
    pts = sums[..., FIELDS.index("points")].sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(pts > 0, sums[..., FIELDS.index("utility")].sum(axis=-1) / pts, np.nan)


def _fold_choice(sums: np.ndarray, folds: np.ndarray, n_folds: int) -> np.ndarray:
    """Per subject, the candidate chosen on the other folds (best pooled utility; first on ties)."""
    choice = np.zeros(len(folds), np.int64)
    for f in range(n_folds):  # a few folds
        u = _utility(sums[:, folds != f, :])
        u = np.where(np.isnan(u), -np.inf, u)
        choice[folds == f] = int(np.argmax(u))
    return choice


def _held_out(sums: np.ndarray, choice: np.ndarray) -> np.ndarray:
    """subject × FIELDS rows: each subject scored by its fold's choice."""
    return sums[choice, np.arange(sums.shape[1]), :]


def _decision(sums: np.ndarray, folds: np.ndarray, n_folds: int, bootstrap: int, seed: int) -> tuple[bool, float]:
    """(promoted, held-out difference against the baseline) by ``tune``'s rule; flat never promotes."""
    from factmem.tuning.uncertainty import bootstrap_difference

    if flat_share(_utility(sums)) > FLAT_SHARE:
        return False, 0.0
    rows = _held_out(sums, _fold_choice(sums, folds, n_folds))
    c = bootstrap_difference(rows, sums[0], "utility", resamples=bootstrap, seed=seed)
    return bool(c.excludes_zero(False)), float(c.difference)


def measure_agreement(log: Any, proxies: Sequence[str] = ALL_PROXIES, *,
                      n: int = 48, budget: int = 20, folds: int = 3, bootstrap: int = 200, seed: int = 0,
                      schedule: Schedule | None = None, name: str | None = None) -> AgreementResult:
    """Agreement of each proxy with the truth on one log with truth (see the module docstring)."""
    from factmem.tuning.settings import DEFAULT_SPACE, Holdout
    from factmem.tuning.space import random_points
    from factmem.tuning.tune import base_params

    prepared = prepare(log)
    base = base_params(prepared)
    candidates = [base] + [p for p in random_points(DEFAULT_SPACE, base, n, seed) if p != base]
    modes = ["truth", *proxies]
    sums = _per_subject_sums(prepared, candidates, modes, budget, schedule or Schedule())
    fold_of = Holdout(folds=folds, seed=seed).subject_folds(sums["truth"].shape[1])
    truth = sums["truth"]
    truth_u = _utility(truth)
    truth_choice = _fold_choice(truth, fold_of, folds)
    truth_best = float(_utility(_held_out(truth, truth_choice)[None])[0])
    truth_base = float(truth_u[0])
    truth_promoted, truth_diff = _decision(truth, fold_of, folds, bootstrap, seed)
    rows = []
    for m in proxies:
        s = sums[m]
        u = _utility(s)
        promoted, diff = _decision(s, fold_of, folds, bootstrap, seed)
        rec = float(_utility(_held_out(truth, _fold_choice(s, fold_of, folds))[None])[0])
        rows.append({"proxy": m, "rho": spearman(u, truth_u), "flat_share": flat_share(u),
                     "promoted": promoted, "truth_promoted": truth_promoted,
                     "decision_agrees": promoted == truth_promoted, "proxy_difference": diff,
                     "truth_difference": truth_diff, "truth_utility": rec, "truth_best": truth_best,
                     "truth_baseline": truth_base, "regret": truth_best - rec, "gain": rec - truth_base})
    label = name or str(getattr(prepared.dataset, "path", None) or prepared.dataset.scenario.get("name", "log"))
    utilities = pd.DataFrame({m: _utility(sums[m]) for m in modes})
    return AgreementResult(label, budget, len(candidates), pd.DataFrame(rows), utilities)


def agreement_table(logs: dict[str, Any], proxies: Sequence[str] = ALL_PROXIES, **kwargs: Any) -> pd.DataFrame:
    """:func:`measure_agreement` over several logs (name -> log): one row per (log, proxy), and per
    proxy a row ``mean`` (ρ and the utilities averaged, decisions counted as the share that agree)."""
    frames = []
    for label, log in logs.items():
        r = measure_agreement(log, proxies, name=label, **kwargs)
        frames.append(r.table.assign(log=label, candidates=r.candidates))
    table = pd.concat(frames, ignore_index=True)
    means = table.groupby("proxy", sort=False).agg(
        rho=("rho", "mean"), flat_share=("flat_share", "mean"), decision_agrees=("decision_agrees", "mean"),
        truth_utility=("truth_utility", "mean"), truth_best=("truth_best", "mean"),
        truth_baseline=("truth_baseline", "mean"), regret=("regret", "mean"), gain=("gain", "mean")).reset_index()
    means["log"] = "mean"
    cols = ["log", "proxy", "rho", "decision_agrees", "promoted", "truth_promoted", "flat_share", "truth_utility",
            "truth_best", "truth_baseline", "regret", "gain", "candidates"]
    out = pd.concat([table, means], ignore_index=True)
    return out[[c for c in cols if c in out.columns]]


def best_proxy(table: pd.DataFrame) -> str:
    """The proxy with the highest mean ρ (ties: the higher decision agreement, then the lower regret)."""
    m = table[table["log"] == "mean"].copy()
    m["rho_key"] = m["rho"].fillna(-math.inf)
    m = m.sort_values(["rho_key", "decision_agrees", "regret"], ascending=[False, False, True], kind="stable")
    return str(m.iloc[0]["proxy"])

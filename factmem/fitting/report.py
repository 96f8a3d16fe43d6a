"""The output folder of :func:`factmem.fitting.fit.fit`: ``report.md``, ``estimates.csv``, ``params.toml``, figures.

``write_result`` writes::

    estimates.csv        one row per estimate (scope, name, quantity, estimate, low, high, n, source)
    fallbacks.csv        the estimates not made, and what stands in for them
    predicate_rates.csv  the candidates for decay_rate_by_predicate, their intervals, and the decision
    silent_curves.csv    P(true | silent d days) by day: empirical, two-state model, seed model
    params.toml          the fitted parameters (a versioned params document, factmem.export.document)
    report.md            populations, rules, fallbacks, the numbers with their intervals
    survival.png         Kaplan–Meier vs fitted exponential lifetimes (kinds, top predicates)
    silent_kinds.png     P(true | silent d) fitted vs empirical per kind
    silent_predicates.png  the same for the predicates with the most silent spells

The bytes depend only on the result (and ``created_at``, stamped into params.toml when not
given): no run time or wall clock appears in the report.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from factmem.core.params import KINDS
from factmem.export import write_params_file
from factmem.plots.common import save
from factmem.plots.fit import silent_fit, survival_fit

if TYPE_CHECKING:  # the result type lives in fit.py, which imports this module lazily
    from factmem.fitting.fit import FitResult

__all__ = ["OUTPUT_FILES", "render_report", "write_result"]

OUTPUT_FILES = ("estimates.csv", "fallbacks.csv", "predicate_rates.csv", "silent_curves.csv", "params.toml",
                "report.md", "survival.png", "silent_kinds.png", "silent_predicates.png")


def write_result(result: FitResult, out_dir: Path, *, created_at: str | None = None, figures: bool = True) -> Path:
    """Write every output file of a fit into ``out_dir`` (created if needed; the figures only with
    ``figures``); returns the folder."""
    out_dir.mkdir(parents=True, exist_ok=True)
    result.estimates.to_csv(out_dir / "estimates.csv", index=False, lineterminator="\n", float_format="%.10g")
    result.fallbacks.to_csv(out_dir / "fallbacks.csv", index=False, lineterminator="\n")
    result.predicate_rates.to_csv(out_dir / "predicate_rates.csv", index=False, lineterminator="\n",
                                  float_format="%.10g")
    result.silent_curves.to_csv(out_dir / "silent_curves.csv", index=False, lineterminator="\n", float_format="%.10g")
    provenance = {"notes": _notes(result)}
    if result.dataset_sha256:
        provenance["dataset_sha256"] = result.dataset_sha256
    if created_at is not None:
        provenance["created_at"] = created_at
    write_params_file(out_dir / "params.toml", result.params, provenance)
    (out_dir / "report.md").write_text(render_report(result), encoding="utf-8")
    if not figures:
        return out_dir
    kinds = result.predicate_kinds
    if len(result.survival):
        save(survival_fit(result.survival, result.estimates, predicate_kinds=kinds), out_dir / "survival.png")
    curves = result.silent_curves
    if len(curves):
        save(silent_fit(curves, result.estimates, scope="kind", predicate_kinds=kinds), out_dir / "silent_kinds.png")
        save(silent_fit(curves, result.estimates, scope="predicate", predicate_kinds=kinds),
             out_dir / "silent_predicates.png")
    return out_dir


def _notes(result: FitResult) -> str:
    source = result.sources[0]
    exported = int(result.predicate_rates["exported"].sum()) if len(result.predicate_rates) else 0
    return (f"factmem fit (source {source}): decay_rate and initial_confidence per kind are the seed model's "
            f"maximum-likelihood lambda and c0 fitted to 'still true and relevant' over held, silent facts "
            f"({'truth labels' if source == 'truth' else 'the two-state model of the log'}); "
            f"decay_rate_by_predicate: {exported} predicates whose lambda at their kind's c0 has a 95% interval "
            f"excluding the kind's rate; see report.md")


# -- the report ----------------------------------------------------------------------------------------


def _num(x: float, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if isinstance(x, float) and math.isinf(x):
        return "∞"
    if x == 0:
        return "0"
    return f"{x:.{digits}g}" if abs(x) < 1e4 else f"{x:.3e}"


def _interval(row: pd.Series, digits: int = 3) -> str:
    if not (np.isfinite(row["low"]) and np.isfinite(row["high"])):
        return "–"
    return f"[{_num(row['low'], digits)}, {_num(row['high'], digits)}]"


def _half_life(rate: float) -> str:
    return _num(math.log(2) / rate) if rate > 0 else "∞"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def _pick(e: pd.DataFrame, scope: str, name: str, quantity: str, source: str) -> pd.Series | None:
    sel = e[(e["scope"] == scope) & (e["name"] == name) & (e["quantity"] == quantity) & (e["source"] == source)]
    return sel.iloc[0] if len(sel) else None


def render_report(result: FitResult) -> str:
    """The Markdown report of a fit: what was estimated, from which population, with which rule."""
    s, pop = result.settings, result.populations
    ds = result.dataset
    sources = result.sources
    lines = ["# Decay fitted from data", ""]
    lines += [
        f"Dataset: `{ds.get('path') or 'in memory'}` (sha256 `{(result.dataset_sha256 or '')[:16]}…`), "
        f"{ds.get('mentions')} mentions of {ds.get('subjects')} subjects in {ds.get('sessions')} sessions, "
        f"{ds.get('truth_rows')} truth rows; log from {_date(ds.get('start'))} to {_date(ds.get('end'))}.",
        "",
        f"Sources: {', '.join(sources)}. Every interval is 95%. Fallback rule: a predicate with fewer than "
        f"{s['min_observations']} observations of a quantity gets no estimate of its own and uses its kind's; a kind "
        f"with fewer gets none, and in params.toml keeps the base value. Bootstrap: {s['bootstrap']} resamples of "
        f"subjects (seed {s['seed']}).",
        "",
    ]
    lines += _params_section(result)
    lines += _predicate_rates_section(result)
    if "truth" in sources:
        lines += _truth_section(result)
    lines += _silent_section(result)
    if "log" in sources:
        lines += _log_section(result)
    lines += _populations_section(result, pop)
    lines += _identification_section(result)
    lines += _fallback_section(result)
    lines += ["## Figures", "",
              "- `survival.png`: Kaplan–Meier survival of lifetimes (left-truncated at the log's start, censored at "
              "its end) against the fitted exponential, per kind and for the six predicates with the most lifetimes.",
              "- `silent_kinds.png`, `silent_predicates.png`: P(true | held and silent d days) — empirical (truth), "
              "the two-state model (log only) and the seed model c0·e^(−λd), fitted to truth and to the log.", ""]
    return "\n".join(lines) + "\n"


def _date(ts) -> str:
    if ts is None:
        return "?"
    return pd.Timestamp(int(ts), unit="s", tz="UTC").strftime("%Y-%m-%d")


def _params_section(result: FitResult) -> list[str]:
    e = result.estimates
    src = result.sources[0]
    rows = []
    for k in KINDS:
        lam = _pick(e, "kind", k, "seed_lambda", src)
        c0 = _pick(e, "kind", k, "initial_confidence", src)
        fitted = lam is not None and math.isclose(result.params.decay_rate[k], lam["estimate"])
        rows.append([
            k,
            f"{_num(result.params.decay_rate[k], 4)}" + (f" {_interval(lam, 3)}" if fitted else ""),
            _half_life(result.params.decay_rate[k]),
            f"{_num(result.params.initial_confidence[k], 3)}" + (f" {_interval(c0, 3)}" if fitted and c0 is not None else ""),
            f"{_num(result.base.decay_rate[k], 4)} / {_num(result.base.initial_confidence[k], 3)}",
            f"fitted ({src})" if fitted else "base (fallback)",
        ])
    out = ["## Parameters written to params.toml", "",
           "The seed's model p = c0·e^(−λ·days since the last mention), fitted by maximum likelihood to whether a "
           "held, silent fact is still true and relevant; `decay_rate` := λ, `initial_confidence` := c0 "
           f"(≤ confidence_cap {result.base.confidence_cap:g}). The change rate is reported below, not exported: "
           "the memory's decay is a confidence model, not a hazard.", ""]
    out += _table(["kind", "decay_rate λ /day [95%]", "half-life (days)", "initial_confidence c0 [95%]",
                   "base λ / c0", "value"], rows)
    return out + [""]


def _predicate_rates_section(result: FitResult) -> list[str]:
    table = result.predicate_rates
    src = result.sources[0]
    exported = table[table["exported"]] if len(table) else table
    out = ["## Per-predicate decay rates (`decay_rate_by_predicate`)", "",
           "The memory starts every fact of a kind at the kind's initial_confidence c0, so a predicate's candidate "
           "rate is the seed model's λ refitted on its observations with c0 held at its kind's value "
           f"(`seed_lambda_kind_c0`, from the {src}). **Rule:** a predicate gets its own rate in params.toml only "
           f"when it has at least {result.settings['min_observations']} silent spells, its kind was fitted, and the "
           "95% bootstrap interval of its λ excludes its kind's rate — the data tell it apart from its kind. Every "
           "other predicate decays at its kind's rate. "
           f"{len(exported)} of {len(table)} predicates get their own rate.", ""]
    rows = []
    for _, r in table.iterrows():  # one row per predicate
        est = f"{_num(r['estimate'], 3)} {_interval(r)}" if np.isfinite(r["estimate"]) else "–"
        rows.append([r["predicate"], r["kind"], est, _half_life(r["estimate"]) if np.isfinite(r["estimate"]) else "–",
                     _num(r["kind_rate"], 3), str(r["n"]) if r["n"] else "–",
                     ("**own rate**: " if r["exported"] else "kind's rate: ") + str(r["reason"])])
    out += _table(["predicate", "kind", "λ at kind c0 /day [95%]", "half-life (days)", "kind λ", "n spells",
                   "in params.toml"], rows)
    return out + [""]


def _truth_section(result: FitResult) -> list[str]:
    e = result.estimates
    out = ["## From the truth", "",
           "**Change rate**: exponential lifetimes of fact values, left-truncated at the log's start (a value true "
           "before it enters observation then) and right-censored at its end; rate = changes / days observed, exact "
           "Poisson interval; n = lifetimes. Episodic kinds: the **relevance horizon** (days from an episode to the "
           "end of its relevance), the same estimator inverted. **Seed model**: λ and c0 as above, from truth labels.",
           ""]
    rows = []
    for scope in ("kind", "predicate"):
        names = [k for k in KINDS if k in set(e["name"])] if scope == "kind" else sorted(
            set(e.loc[(e["scope"] == "predicate") & (e["source"] == "truth"), "name"]))
        for name in names:
            rate = _pick(e, scope, name, "change_rate", "truth")
            horizon = _pick(e, scope, name, "relevance_horizon_days", "truth")
            lam = _pick(e, scope, name, "seed_lambda", "truth")
            c0 = _pick(e, scope, name, "initial_confidence", "truth")
            if rate is None and horizon is None and lam is None:
                continue
            life = (f"{_num(rate['estimate'], 3)} {_interval(rate)} (n {rate['n']})" if rate is not None else
                    f"horizon {_num(horizon['estimate'], 3)} d {_interval(horizon)} (n {horizon['n']})"
                    if horizon is not None else "→ kind")
            seed = (f"{_num(lam['estimate'], 3)} {_interval(lam)}" if lam is not None else "→ kind")
            conf = (f"{_num(c0['estimate'], 3)} {_interval(c0)}" if c0 is not None else "→ kind")
            rows.append([f"{name} ({scope})", life, seed, conf, str(lam["n"]) if lam is not None else "–"])
    out += _table(["kind / predicate", "change rate /day [95%] (n lifetimes)", "seed λ /day [95%]", "seed c0 [95%]",
                   "n silent spells"], rows)
    return out + [""]


def _silent_section(result: FitResult) -> list[str]:
    e = result.estimates
    days = result.settings["silent_days"]
    out = ["## P(true | held and silent for d days)", "",
           "Population: held facts (mentioned, not superseded by a newer value of a single-valued subject–predicate) "
           "silent for d days, whose d-th silent day falls inside the log (censored at its end). Empirical = share "
           "true and relevant then (truth); model = the two-state model fitted to the log alone, averaged over the "
           "same spells with each subject's sessions in those days; |Δ| = |model − empirical|.", ""]
    rows = []
    for k in [k for k in KINDS if ((e["scope"] == "kind") & (e["name"] == k)).any()]:
        for d in days:
            emp = _pick(e, "kind", k, f"p_true_silent_{d}d", "truth")
            mod = _pick(e, "kind", k, f"p_true_silent_{d}d", "log")
            if emp is None and mod is None:
                continue
            diff = abs(mod["estimate"] - emp["estimate"]) if emp is not None and mod is not None else float("nan")
            rows.append([k, str(d),
                         f"{_num(emp['estimate'], 3)} {_interval(emp)}" if emp is not None else "–",
                         f"{_num(mod['estimate'], 3)} {_interval(mod)}" if mod is not None else "–",
                         _num(diff, 2), str(emp["n"] if emp is not None else mod["n"] if mod is not None else "–")])
    out += _table(["kind", "d", "empirical [95%]", "two-state model [95%]", "|Δ|", "n spells"], rows)
    if any(r[0] == "episodic" for r in rows):
        out += ["", "For **episodic** facts the log-only model is not identified and is shown for completeness only: "
                "one-off chatter (said once, never relevant again) looks like a true fact that is rarely mentioned, "
                "and an episode that recurs months later looks like a long silence of a true one. Without truth, "
                "episodic kinds keep the base parameters."]
    return out + [""]


def _log_section(result: FitResult) -> list[str]:
    e = result.estimates
    out = ["## From the log alone: the two-state model", "",
           "A true fact comes up in each later session of its subject with probability q; its value changes at "
           "rate h per day; a share u of changes is never announced (the held fact turns false in silence), the "
           "others announce a new value that supersedes it (single-valued predicates; for multi-valued ones every "
           "change is silent to the held fact, u = 1, not estimated). Fitted by maximum likelihood to silent spells "
           "(re-mention after g days and K silent sessions, supersession, or censoring at the subject's last message); "
           "re-mention rate /day = q × mean sessions per subject-day "
           f"({_num(result.populations.get('sessions_per_subject_day', float('nan')), 3)}). Kind rows pool the "
           "kind's spells in one fit.", ""]
    rows = []
    for scope in ("kind", "predicate"):
        names = sorted(set(e.loc[(e["scope"] == scope) & (e["source"] == "log") & (e["quantity"] == "change_rate"),
                                 "name"]), key=lambda n: (KINDS.index(n) if n in KINDS else 9, n))
        for name in names:
            cells = []
            for q in ("remention_probability", "remention_rate", "change_rate", "silent_change_share"):
                r = _pick(e, scope, name, q, "log")
                cells.append(f"{_num(r['estimate'], 3)} {_interval(r)}" if r is not None else "–")
            fitted = _pick(e, scope, name, "change_rate", "log")
            rows.append([f"{name} ({scope})", *cells, str(fitted["n"]) if fitted is not None else "–"])
    out += _table(["kind / predicate", "q per session", "re-mentions /day", "change rate h /day", "unannounced share u",
                   "n spells"], rows)
    out += ["", "Known limit: a value that comes back (A → B → A, likely when a slot has few values, as `works_on` in "
            "the generator) looks like a long silence of a true fact, which biases h down for such predicates."]
    return out + [""]


def _populations_section(result: FitResult, pop: dict) -> list[str]:
    s = result.settings
    outcomes = pop.get("spell_outcomes", {})
    mvp = s.get("multi_valued_predicates", [])
    return [
        "## Populations and rules", "",
        f"- **Observed spans (censoring)**: a subject is observed only from its first to its last message in the log "
        f"({pop.get('subjects_observed', '?')} subjects with more than one message, "
        f"{_num(pop.get('observed_subject_days', float('nan')), 4)} subject-days in all). Every population below "
        "is truncated at the subject's first message and censored at its last — not at the log's start and end: a "
        "person who stopped talking says nothing about the months after, and a subject with one message "
        "contributes no exposure. Shifting a subject's timeline leaves every estimate unchanged.",
        f"- **Lifetimes** (truth): {pop.get('lifetimes', 0)} fact values observed inside their subjects' spans; "
        "misstatements and one-off irrelevant facts (truth `noise`) are left out.",
        f"- **Silent spells** (log): {pop.get('spells')} — from a mention of a held fact to its next mention "
        f"({outcomes.get('re-mention', 0)}), its supersession ({outcomes.get('superseded', 0)}) or its subject's last "
        f"message ({outcomes.get('censored', 0)}, censored). A value said and replaced within one session counts as a slip, not a "
        "belief; a triple said several times in a session counts once. Multi-valued predicates (never superseded): "
        f"{', '.join(mvp) if mvp else 'none'}.",
        f"- **Sessions** of a subject: those in which it is mentioned ({pop.get('sessions')} in all).",
        f"- **Seed-model observations**: every held, silent fact at each of {pop.get('checkpoints')} checkpoints "
        f"every {_num(s['checkpoint_hours'], 3)} h on each subject's own clock, from its first message (age = days since its last mention): "
        f"{pop.get('checkpoint_observations')} observations"
        + (f", every {pop['checkpoint_stride']}-th checkpoint kept" if pop.get("checkpoint_stride", 1) > 1 else "")
        + "; n counts silent spells. Ages are binned (a quarter day up to a week, then 5% wider per bin) for the fit.",
        f"- **Intervals**: exact Poisson for rates and horizons from truth; otherwise percentile intervals over "
        f"{pop.get('bootstrap_resamples')} bootstrap resamples of the {pop.get('subjects')} subjects (every fit "
        "redone per resample; the log-based seed λ holds the two-state probabilities at their point fit).",
        "",
    ]


def _identification_section(result: FitResult) -> list[str]:
    out = ["## Not identified, and estimates at an edge", "",
           "A fitted parameter at an optimisation bound (the seed model's λ at 100/day or c0 at 1e-6; the two-state "
           "q at either bound or h at 50/day), or a predicted P(true | silent) that underflows (< 1e-12), is *not "
           "identified*: it is not reported as fitted, and the kind or predicate falls back as stated (a predicate to "
           "its kind, a kind to the base). An estimate at an edge of its parameter space (λ = 0, c0 at the cap, h at "
           "its lower bound, u at 0 or 1) is the maximum of the likelihood and stays fitted; it is listed too.", ""]
    notes = result.notes
    if not notes:
        return out + ["None.", ""]
    return out + [f"- {n}" for n in notes] + [""]


def _fallback_section(result: FitResult) -> list[str]:
    fb = result.fallbacks
    out = ["## Fallbacks", ""]
    if not len(fb):
        return out + ["None: every kind and predicate had enough observations.", ""]
    rows = [[f"{r['name']} ({r['scope']})", r["quantity"], r["source"], str(r["n"]), r["falls_back_to"]]
            for _, r in fb.iterrows()]
    return out + _table(["kind / predicate", "quantity", "source", "n", "uses"], rows) + [""]


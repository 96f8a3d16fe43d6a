"""The run folder a tune writes, and its ``report.md`` — the decision first, in the user's terms.

Files: ``report.md``; ``params.toml`` (the parameters to keep at the first budget, with provenance:
held-out metrics of these parameters and of the baseline, and the judged comparison — difference,
interval, population, budget, costs, references, rule — see :func:`judgement`) and ``params-k<K>.toml`` per budget;
figures (``budget.png``: held-out utility against the budget; ``slices.png``: the objective against
each searched parameter; ``pareto.png``: stale facts against recall in the context; ``calibration.png``;
``trajectories.png``; ``checkpoints.png``); tables (``sweep``, ``heldout``, ``subjects``,
``budget_curves``, ``checkpoints``, ``reliability``, ``lost``) as Parquet and in ``results.duckdb``;
the replayed memory under the recommendation (``memory.duckdb``); ``manifest.json``.

Every number in the report states its population (points, subjects), its baseline and, for the
decision, its interval.
"""

from __future__ import annotations

import datetime as _dt
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from factmem.core.params import MemoryParams
from factmem.evaluation.charges import CHARGE_KINDS, CHARGE_LABELS
from factmem.evaluation.context import ContextEvaluator
from factmem.evaluation.groups import describe_group_by
from factmem.evaluation.simulate import PreparedLog, kernel_beliefs, simulate
from factmem.tuning.decision import below_empty, comparison_lines, restart_lines
from factmem.tuning.identification import identification_lines
from factmem.tuning.references import reference_labels
from factmem.tuning.restarts import searched_values
from factmem.tuning.runs import manifest, write_run
from factmem.tuning.search import IDENTIFIED_SHARE, SearchOutcome
from factmem.tuning.settings import CONTEXT_OBJECTIVES

if TYPE_CHECKING:
    from factmem.tuning.tune import Recommendation, TuneResult

__all__ = ["write_tune_run", "budget_curve_table", "render_report", "judgement", "search_section", "importance_lines",
           "CURVE_K"]

#: the largest budget the utility-against-budget figure shows
CURVE_K = 100
#: bootstrap resamples of people for the band of the utility-against-budget figure (at most)
CURVE_RESAMPLES = 400


def _date(ts: int) -> str:
    return _dt.datetime.fromtimestamp(int(ts), tz=_dt.UTC).strftime("%Y-%m-%d")


def _fmt(v: Any, digits: int = 4) -> str:
    if isinstance(v, (float, np.floating)):
        return "n/a" if not math.isfinite(v) else f"{v:.{digits}g}"
    if isinstance(v, (list, tuple, frozenset)):
        return ", ".join(map(str, v)) or "—"
    return str(v)


def budget_curve_table(result: TuneResult, prepared: PreparedLog) -> pd.DataFrame:
    """Held-out utility@k for k = 1 … :data:`CURVE_K` of the recommendation (as judged: each subject
    by its fold's choice), the baseline and the seed defaults (and current): columns k, value, params,
    budget (the budget whose recommendation it is), and ``low``/``high``: the 95% bootstrap band over
    people (at most :data:`CURVE_RESAMPLES` seeded resamples, the same for every line)."""
    res = result.sweep
    obj, holdout = res.objective, res.holdout
    part = "all" if holdout.mode == "subjects" else "test"
    src = prepared if holdout.mode != "log" else holdout.log
    parts = None
    if holdout.mode == "time":
        assert res.split_at is not None
        parts = {"test": (res.split_at, np.iinfo(np.int64).max)}
    ctx = ContextEvaluator(src, budgets=obj.budgets, needed=obj.needed, costs=obj.costs,
                           parts=parts, max_points_per_subject=obj.max_points_per_subject, seed=holdout.seed,
                           curve_k=CURVE_K)
    grid = res.schedule.consolidations(src.start, src.end)
    cache: dict[int, np.ndarray] = {}

    def curve_of(index: int) -> np.ndarray:  # subject × k sums of utility@k
        if index not in cache:
            p = res.params[index]
            bel = kernel_beliefs(src, [p], grid)[0]
            sc = ctx.score(bel, p, curve=True)
            assert sc.curve is not None
            cache[index] = sc.curve[0]
        return cache[index]

    scope = part if part in ctx.parts else None
    total = ctx.scored_points(scope)
    points = ctx.points_per_subject(scope)
    # one seeded set of resamples of people for every line (paired, as the report's intervals are)
    resamples = min(holdout.bootstrap, CURVE_RESAMPLES)
    weights = None
    groups = result.groups.get(part)
    if groups is not None and len(groups) != len(points):
        groups = None
    n_groups = len(points) if groups is None or not len(points) else int(groups.max()) + 1
    if resamples > 0 and len(points) > 1:
        rng = np.random.default_rng(holdout.seed)
        draws = rng.integers(0, n_groups, size=(resamples, n_groups))
        weights = np.stack([np.bincount(d, minlength=n_groups) for d in draws]).astype(np.float64)
        if n_groups < len(points):  # whole groups drawn: each person as often as their group
            assert groups is not None
            weights = weights[:, groups]
    rows = []
    for k, rec in result.recommendations.items():
        if rec.fold_choices:
            folds = _folds(result, part, len(ctx.subjects))
            held = np.zeros_like(curve_of(rec.index), dtype=np.float64)
            for f, c in enumerate(rec.fold_choices):
                held[folds == f] = curve_of(c)[folds == f]
        else:
            held = curve_of(rec.index)
        roles = {"recommended": held, "baseline": curve_of(0)}
        i_def = next(i for i, p in enumerate(res.params) if p == MemoryParams())
        roles["seed defaults"] = curve_of(i_def)
        if result.current is not None:
            roles["current"] = curve_of(res.params.index(result.current))
        for name, per_subject in roles.items():
            frame = {"k": np.arange(1, CURVE_K + 1), "value": per_subject.sum(axis=0) / max(total, 1),
                     "params": name, "budget": k}
            if weights is not None:
                sampled = (weights @ per_subject) / np.maximum(weights @ points, 1)[:, None]
                frame["low"], frame["high"] = np.quantile(sampled, [0.025, 0.975], axis=0)
            rows.append(pd.DataFrame(frame))
    return pd.concat(rows, ignore_index=True)


def write_tune_run(result: TuneResult, prepared: PreparedLog, out: Path) -> Path:
    """Fill the run folder of ``result`` (see the module docstring; made by :func:`factmem.tune`,
    which marks it complete after this returns); returns its path. The figures are rendered by
    forked children while the rest is written (:func:`factmem.plots.saving_aside`), all complete on
    return."""
    from factmem import plots

    with plots.saving_aside():
        return _write_tune_run(result, prepared, out)


def _write_tune_run(result: TuneResult, prepared: PreparedLog, out: Path) -> Path:
    from factmem import plots
    from factmem.export import write_params_file

    res = result.sweep
    obj, holdout = res.objective, res.holdout
    tab = res.table
    primary = result.primary
    figs: dict[str, Path] = {}

    curves = budget_curve_table(result, prepared)
    first = curves[curves["budget"] == primary.budget]
    fig = plots.budget_curves(first, budgets=obj.budgets,
                              title=f"Held-out utility@k (costs {obj.costs}), recommendation for k = {primary.budget}")
    figs["budget"] = plots.save(fig, out / "budget.png")

    swept = [c for c in _swept(result) if c in tab.columns and tab[c].nunique() > 1]
    col = obj.column("all" if holdout.mode == "subjects" else "train", primary.budget)
    if swept and col in tab.columns:
        logs = [c for c in swept if c.startswith("decay_rate")]
        fig = plots.slices(tab, swept, col, highlight={"recommended": primary.index, "baseline": 0},
                           log_params=logs, lower_is_better=obj.lower_is_better)
        figs["slices"] = plots.save(fig, out / "slices.png")
    part = "all" if holdout.mode == "subjects" else "test"
    px, py = f"{part}.charged@{primary.budget}", f"{part}.recall@{primary.budget}"
    if px in tab.columns:
        fig = plots.pareto(tab.rename(columns={px: "charge per context", py: "recall@k"}),
                           x="charge per context", y="recall@k",
                           highlight={"recommended": primary.index, "baseline": 0},
                           title=f"Every candidate: the charge against needed facts in a context of {primary.budget}"
                                 f"\n(costs {obj.costs})")
        figs["pareto"] = plots.save(fig, out / "pareto.png")

    # the recommendation and the baseline replayed through a FactStore, for figures and inspection
    sched = res.schedule
    sim_rec = simulate(prepared, primary.params, sched, store_path=out / "memory.duckdb")
    sim_base = simulate(prepared, result.baseline, sched)
    try:
        rel = pd.concat([sim_rec.evaluation.reliability.query("kind == 'all'").assign(params="recommended"),
                         sim_base.evaluation.reliability.query("kind == 'all'").assign(params="baseline")])
        figs["calibration"] = plots.save(plots.reliability(rel, by="params"), out / "calibration.png")
        fig = plots.trajectories(sim_rec.trajectories, evidence=sim_rec.store.evidence(),
                                 facts=sim_rec.store.facts(at=prepared.end), threshold=primary.params.archive_threshold)
        figs["trajectories"] = plots.save(fig, out / "trajectories.png")
        figs["checkpoints"] = plots.save(plots.checkpoint_metrics(sim_rec.checkpoints), out / "checkpoints.png")
        ck = pd.concat([sim_rec.checkpoints.assign(params="recommended"),
                        sim_base.checkpoints.assign(params="baseline")], ignore_index=True)
        lost = sim_rec.evaluation.lost
        calib = {"recommended": sim_rec.summary, "baseline": sim_base.summary}
    finally:
        sim_rec.store.close()
        sim_base.store.close()

    heldout = pd.concat([r.heldout.assign(budget=k) for k, r in result.recommendations.items()], ignore_index=True)
    info = dict(
        dataset={"path": str(prepared.dataset.path) if prepared.dataset.path else None, "sha256": prepared.sha256,
                 "scenario": prepared.dataset.scenario, "events": int(len(prepared.events))},
        holdout=holdout.to_dict(), objective=obj.to_dict(), schedule=sched.to_dict(), split_at=res.split_at,
        n_params=len(res.params), points=res.points, sampled_from=res.sampled_from,
        recommendations={str(k): {"params": r.params.to_dict(), "promoted": r.promoted, "keep": r.keep,
                                  "decision": r.decision, "versus_baseline": r.versus_baseline.to_dict(),
                                  "stability": r.stability, "fold_choices": r.fold_choices,
                                  "notes": list(r.notes),
                                  "versus_current": None if r.versus_current is None else r.versus_current.to_dict(),
                                  "versus_references": {n: c.to_dict() for n, c in r.versus_references.items()},
                                  "baseline_versus_empty": None if r.baseline_versus_empty is None
                                  else r.baseline_versus_empty.to_dict(),
                                  "tradeoffs": list(r.tradeoffs),
                                  "identification": None if r.identification is None
                                  else r.identification.to_dict(), "candidate": r.candidate}
                         for k, r in result.recommendations.items()},
        promotion=result.promotion.to_dict(),
        restarts=[r.to_dict(result.search.resolved_space) for r in result.restarts],
        references={n: p.to_dict() for n, p in res.reference_params.items()},
        baseline=result.baseline.to_dict(), current=None if result.current is None else result.current.to_dict(),
        start=None if result.start is None else result.start.to_dict(), seconds=round(result.seconds, 2),
        search=result.search.to_dict(), compute=result.compute.to_dict(),
        studies=None if result.studies is None else {"file": "study.db", "names": list(result.studies.studies),
                                                     "rounds": result.studies.rounds,
                                                     "proposed": result.studies.proposed},
        calibration="every candidate" if res.calibration else "the rows the report shows",
    )
    man = manifest("tune", **info)
    write_run(out, man, finish=False, tables={"sweep": tab, "references": res.reference_table, "heldout": heldout, "budget_curves": curves, "checkpoints": ck,
                         "reliability": rel.reset_index(drop=True), "lost": lost,
                         "subjects": _subject_table(result),
                         "importances": result.importances if result.importances is not None else pd.DataFrame()})
    for k, rec in result.recommendations.items():
        chosen_row = rec.index if rec.keep == "recommended" else 0
        prov = {"run_id": str(tab.loc[chosen_row, "run_id"]) if rec.keep != "current" else "current",
                "dataset_sha256": prepared.sha256,
                "objective": f"{obj.name}@{k}" if obj.per_budget else obj.name,
                "git_commit": man["git_commit"] or "", "notes": rec.decision,
                # the held-out metrics of what is shipped and of what the decision judged it against
                "metrics": _metric_dict(rec, rec.keep),
                "baseline_metrics": _metric_dict(rec, "baseline"),
                "judgement": judgement(result, rec)}
        path = out / ("params.toml" if k == primary.budget else f"params-k{k}.toml")
        period = int(round(sched.consolidate_every_hours * 3600))  # the schedule travels with the values
        write_params_file(path, rec.chosen, prov, consolidate_every_seconds=period)
        if k == primary.budget and len(obj.budgets) > 1:
            write_params_file(out / f"params-k{k}.toml", rec.chosen, prov, consolidate_every_seconds=period)
    (out / "report.md").write_text(render_report(result, prepared, figs, calib, curves), encoding="utf-8")
    return out


def judgement(result: TuneResult, rec: Recommendation) -> dict[str, float | str]:
    """The judged comparison of one budget, as a flat table for a params file's provenance: what is
    kept, the held-out objective of the recommendation and the baseline, their difference and
    interval, the population, the budget, the costs, the references, the rule, identification and
    restarts."""
    res = result.sweep
    obj, holdout = res.objective, res.holdout
    vb = rec.versus_baseline
    metric = CONTEXT_OBJECTIVES.get(obj.name, obj.name)
    out: dict[str, float | str] = {
        "keep": rec.keep, "promoted": "yes" if rec.promoted else "no", "against": "baseline",
        "objective": f"{metric}@{rec.budget}" if obj.per_budget else obj.name, "budget": float(rec.budget),
        "recommended": vb.a, "baseline": vb.b, "difference": vb.difference, "low": vb.low, "high": vb.high,
        "level": 0.95, "people": float(vb.subjects), "points": float(vb.points), "resamples": float(holdout.bootstrap),
        "holdout": {"subjects": f"{holdout.folds}-fold over people", "time": "time split",
                    "log": "another log"}[holdout.mode],
        "costs": str(obj.costs),
        "min_effect": rec.min_effect,
        "rule": "promoted only if the 95% interval's near end clears min_effect against every comparison",
        "baseline_is": "the seed's numbers on the log's base (its multi-valued predicates)",
    }
    if rec.versus_current is not None:
        c = rec.versus_current
        out.update(current=c.b, current_difference=c.difference, current_low=c.low, current_high=c.high)
    for name, c in rec.versus_references.items():
        key = name.replace("-", "_")
        out.update({key: c.b, f"{key}_difference": c.difference, f"{key}_low": c.low, f"{key}_high": c.high})
    if rec.identification is not None:
        out["unidentified"] = ", ".join(rec.identification.unidentified) or "none"
    if rec.restarts:
        out["restarts"] = "; ".join(f"seed {r.seed}: {'promoted' if r.keep[rec.budget] == 'recommended' else 'not promoted'}"
                                    for r in rec.restarts)
    return out


def _swept(result: TuneResult) -> list[str]:
    """The flat parameters the search varied (an alias by the first parameter it sets)."""
    from factmem.tuning.space import ALIASES

    return [ALIASES.get(name, (name,))[0] for name in result.search.resolved_space]


def _metric_dict(rec: Recommendation, column: str) -> dict[str, float]:
    """Held-out metrics of one column of the held-out table, by key (``utility_at_20``, ``recall`` …)."""
    h = rec.heldout
    if column not in h.columns:
        return {}
    return {str(key): float(v) for key, v in zip(h["key"], h[column]) if isinstance(v, (int, float, np.floating))}


def _folds(result: TuneResult, part: str, n_subjects: int) -> np.ndarray:
    """Each subject's fold as the tune cut them (over groups of people who share sessions)."""
    holdout = result.sweep.holdout
    groups = result.groups.get(part)
    if groups is None or len(groups) != n_subjects:
        return holdout.subject_folds(n_subjects)
    return holdout.group_folds(groups)


def _subject_table(result: TuneResult) -> pd.DataFrame:
    """Per subject and budget: held-out utility of the recommendation (as judged) and of the baseline."""
    from factmem.evaluation.context import FIELDS

    res = result.sweep
    holdout = res.holdout
    part = "all" if holdout.mode == "subjects" else "test"
    subjects = res.subjects[part]
    rows = []
    for k, rec in result.recommendations.items():
        if not res.objective.per_budget:
            break
        b = res.objective.budgets.index(k)
        ctx = res.context[part][:, :, b, :]
        if rec.fold_choices:
            folds = _folds(result, part, len(subjects))
            chosen = np.asarray(rec.fold_choices)[folds]
        else:
            folds = np.full(len(subjects), -1)
            chosen = np.full(len(subjects), rec.index)
        r = ctx[chosen, np.arange(len(subjects)), :]
        pts = r[:, FIELDS.index("points")]
        with np.errstate(invalid="ignore", divide="ignore"):
            rows.append(pd.DataFrame({
                "budget": k, "subject": subjects, "fold": folds, "chosen_row": chosen, "points": pts,
                "utility_recommended": r[:, FIELDS.index("utility")] / pts,
                "utility_baseline": ctx[0, :, FIELDS.index("utility")] / ctx[0, :, FIELDS.index("points")],
                "recall_recommended": r[:, FIELDS.index("recall")] / pts,
                "recall_baseline": ctx[0, :, FIELDS.index("recall")] / ctx[0, :, FIELDS.index("points")],
            }))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()


def render_report(result: TuneResult, prepared: PreparedLog, figs: dict[str, Path], calib: dict[str, dict],
                  curves: pd.DataFrame) -> str:
    res = result.sweep
    obj, holdout = res.objective, res.holdout
    ds = prepared.dataset
    name = ds.scenario.get("name") or (ds.path.name if ds.path else "log")
    part = "all" if holdout.mode == "subjects" else "test"
    n_subj = len(res.subjects.get(part, []))
    n_pts = res.points.get(part, 0)
    needed = obj.needed or ("truth" if len(ds.truth) else "next-session")
    needed_text = ("true and relevant then, and mentioned since it became true" if needed == "truth"
                   else "mentioned in that session (no ground truth used)")
    how = {"subjects": f"{holdout.folds}-fold cross-fitting over groups of people (people who share sessions are one "
                       "group"
                       + ("" if holdout.group_by is None else f", here by {describe_group_by(holdout.group_by)}")
                       + "): each person is scored by the choice made on the other folds, so no one's number "
                       "comes from a choice made on their own conversations",
           "time": f"chosen on session starts before {_date(res.split_at or 0)}, judged after",
           "log": "chosen on this log, judged on another "
                  f"(`{getattr(holdout.log, 'dataset', None) and holdout.log.dataset.path}`)"
           }[holdout.mode]
    lines = [f"# factmem tune — {name}", ""]
    lines += ["## Decision", ""]
    for k, rec in result.recommendations.items():
        h = rec.heldout.set_index("metric")
        vb = rec.versus_baseline
        if obj.per_budget:
            rr = h.loc[f"recall@{k} (needed facts in the context)"]
            kinds = {kind: h.loc[CHARGE_LABELS[kind]] for kind in CHARGE_KINDS}

            def charges(side: str, kinds=kinds) -> str:
                return ", ".join(f"{kinds[kind][side]:.2f} {kind}" for kind in CHARGE_KINDS)

            lines.append(
                f"**Budget k = {k}** (the prompt holds at most {k} facts about a person). On held-out data the "
                f"recommended parameters put **{100 * rr['recommended']:.1f}%** of the facts a session needs into "
                f"the context, with a charge of **{h.loc['charge (cost-weighted)']['recommended']:.2f}** per "
                f"context ({charges('recommended')}), against {100 * rr['baseline']:.1f}% and "
                f"{h.loc['charge (cost-weighted)']['baseline']:.2f} ({charges('baseline')}) for the baseline "
                f"(costs {obj.costs}). "
                f"Utility@{k} {vb.a:.4f} against {vb.b:.4f}: difference **{vb.difference:+.4f}**, 95% interval "
                f"[{vb.low:+.4f}, {vb.high:+.4f}] ({holdout.bootstrap:,} bootstrap resamples of {vb.groups} held-out "
                f"groups of people — {vb.subjects} people, people who share sessions being one group; "
                f"{vb.points:,} session starts; promotion needs at least {holdout.min_groups} groups).")
        if obj.per_budget:
            lines += ["", *comparison_lines(rec, f"{CONTEXT_OBJECTIVES.get(obj.name, obj.name)}@{k}")]
            if rec.baseline_versus_empty is not None:
                sentence = below_empty(rec.baseline_versus_empty, f"{CONTEXT_OBJECTIVES.get(obj.name, obj.name)}@{k}",
                                       obj.lower_is_better)
                if sentence:
                    lines += ["", sentence]
            for t in rec.tradeoffs:
                lines += ["", t]
        lines += ["", f"> {rec.decision}", ""]
        restarts = restart_lines(rec, result.search.resolved_space)
        if restarts:
            lines += restarts + [""]
        if rec.versus_start is not None:
            vs = rec.versus_start
            lines += [f"The starting point (`start`, e.g. parameters fitted by maximum likelihood) against the swept "
                      f"recommendation, held out the same way: {vs.b:.4f} vs {vs.a:.4f} (recommended − start "
                      f"{vs.difference:+.4f}, 95% interval [{vs.low:+.4f}, {vs.high:+.4f}]).", ""]
        if math.isfinite(rec.stability):
            lines.append(f"Selection stability: the chosen candidate is within the noise of the best (top "
                         f"{100 * 0.05:.0f}% of {int(res.eligible().sum())} candidates) in {100 * rec.stability:.0f}% of "
                         f"{holdout.bootstrap:,} bootstrap resamples of the tuning data — a statement about that "
                         "candidate, not about its values: which values the log pins down is under Identification."
                         + (f" The folds chose rows {rec.fold_choices} (the final choice, on all subjects: "
                            f"row {rec.index})." if rec.fold_choices else ""))
            lines.append("")
        if rec.notes:
            lines += ["**Check the search range:**", ""] + [f"- {n}" for n in rec.notes] + [""]
    keep = result.primary
    lines += [f"`params.toml` holds the {'recommended' if keep.keep == 'recommended' else keep.keep} parameters for "
              f"k = {keep.budget}" + (", `params-k<K>.toml` those for each budget" if len(obj.budgets) > 1 else "")
              + ", ready for `factmem export params.toml --format rust --out memory_params.rs`.", ""]
    lines += ["**How this was measured.** "
              f"Log `{ds.path}` (sha256 `{prepared.sha256[:16]}…`): {len(prepared.events):,} fact mentions about "
              f"{prepared.events['subject'].nunique()} people, {_date(prepared.start)} → {_date(prepared.end)} "
              f"({(prepared.end - prepared.start) / 86400:.0f} days). A context is assembled at each session start "
              f"({n_pts:,} points with at least one needed fact"
              + (f", sampled from {res.sampled_from.get(part, 0):,}" if obj.max_points_per_subject else "")
              + f", {n_subj} people); a fact is *needed* there when it is {needed_text}; {obj.costs.describe()}; "
              f"utility@k = (needed facts in the context − the charges) / needed facts, averaged over points. "
              f"Held out: {how}. "
              f"The baseline is the seed's numbers on the same base (multi-valued predicates: "
              f"{_fmt(sorted(result.baseline.multi_valued_predicates))}); the pure seed defaults are shown beside it "
              "(for reference only: no decision compares with them, and they are never chosen). The reference policies, "
              "scored on the same points: " + "; ".join(f"*{n}* ({t})" for n, t in reference_labels().items()) + ". "
              f"Minimum effect: {result.promotion.min_effect:g} in {CONTEXT_OBJECTIVES.get(obj.name, obj.name)} units. "
              f"{int(res.eligible().sum())} candidates ({res.table['baseline'].sum()} baseline; plus "
              f"{int(res.table['probe'].sum()) if 'probe' in res.table.columns else 0} probe rows for identification"
              + (f"; {len(result.restarts) - 1} restarts with {result.restarts[1].candidates} candidates each"
                 if len(result.restarts) > 1 else "") + f") in {result.seconds:.0f} s; "
              f"consolidation every {res.schedule.consolidate_every_hours:g} h.", ""]

    idents = [(k, r) for k, r in result.recommendations.items() if r.identification is not None]
    if idents:
        lines += ["## Identification", "",
                  "Which searched values this log pins down. A parameter whose effect is below the minimum effect is not "
                  "identified: the search's value for it is noise, so the baseline's is shipped (and judged: every fold's "
                  "choice is projected the same way before the held-out comparison) — unless resetting them together "
                  "costs the best more than the minimum effect: then the fewest, largest effect first, are kept jointly.",
                  ""]
        for k, r in idents:
            assert r.identification is not None
            values = {n: [searched_values(result.search.resolved_space, run.params[k])[n] for run in r.restarts]
                      for n in result.search.resolved_space} if len(r.restarts) > 1 else None
            lines += identification_lines(r.identification, values) + [""]
    lines += importance_lines(result)
    lines += ["## What the recommendation changes", "", "| parameter | seed default | baseline | recommended |",
              "|---|---|---|---|"]
    defaults = MemoryParams().to_flat()
    base = result.baseline.to_flat()
    for key, (_, new) in keep.params.changes_from(result.baseline).items():
        lines.append(f"| `{key}` | {_fmt(defaults[key])} | {_fmt(base[key])} | {_fmt(new)} |")
    if figs.get("budget"):
        lines += ["", "## What each budget buys", "", f"![held-out utility against the budget]({figs['budget'].name})",
                  f"*Held-out utility@k for k = 1…100 at the recommendation for k = {keep.budget} (as judged: "
                  f"each person by the choice made without them), the baseline and the seed defaults; {n_pts:,} "
                  f"session starts of {n_subj} people.*", ""]
    lines += ["## Held-out metrics", ""]
    for k, rec in result.recommendations.items():
        h = rec.heldout
        cols = [c for c in h.columns if c not in ("metric", "key", "better", "scope")]
        lines += [f"At k = {k}:", "", "| metric | " + " | ".join(cols) + " | better | scope |",
                  "|---" * (len(cols) + 3) + "|"]
        for _, row in h.iterrows():
            lines.append(f"| {row['metric']} | " + " | ".join(_fmt(row[c]) for c in cols)
                         + f" | {row['better']} | {row['scope']} |")
        lines.append("")
    lines += ["*Context metrics* are per session start, averaged; *whole-memory* metrics are over every "
              "checkpoint (daily) and every fact the memory holds: precision and recall of the believed set (active "
              "facts above the retrieval threshold), believed-set size (context pressure), stale beliefs, lost facts "
              "(archived while still true and mentioned again later). Log loss reads effective confidence as the "
              "probability that a fact is true and relevant, clipped to [1e-4, 1 − 1e-4]: over the facts the memory "
              "holds, over every fact mentioned so far (a forgotten fact predicts 1e-4), and over context facts.", ""]
    lines += ["## Calibration", "",
              "On the tuning data, not held out (the whole log replayed under the recommendation, which was chosen on "
              "it — read these as a description of the memory, not as evidence for the choice): "
              f"log loss over held facts: recommended {_fmt(calib['recommended'].get('held_log_loss'))}, "
              f"baseline {_fmt(calib['baseline'].get('held_log_loss'))}; over every fact mentioned: "
              f"{_fmt(calib['recommended'].get('log_loss'))} and {_fmt(calib['baseline'].get('log_loss'))}. "
              "Calibration describes the memory; the decision above rests on the context metrics."
              + ("" if res.calibration else " Calibration was scored for the rows this report shows (baseline, seed "
                 "defaults, current, start, each recommendation); the sweep table leaves it empty for the other "
                 "candidates (`--calibrate-all` scores every one)."), ""]
    captions = {"slices": f"The objective on the tuning data against each searched parameter ({len(res.params)} "
                          "candidates; the star is the recommendation, the diamond the baseline)",
                "pareto": "Every candidate: the charge per context (stale, expired, false and unneeded facts "
                          "at their costs) against recall@k (the front in black)",
                "calibration": "Reliability over held facts: predicted confidence against observed frequency "
                               "(whole log; bins with their counts)",
                "trajectories": "Confidence trajectories of a few facts under the recommendation",
                "checkpoints": "Believed set, precision and recall over time under the recommendation"}
    lines += search_section(result)
    lines += ["## Figures", ""]
    for key in ("slices", "pareto", "calibration", "trajectories", "checkpoints"):
        if key in figs:
            lines += [f"![{captions[key]}]({figs[key].name})", f"*{captions[key]}.*", ""]
    lines += ["## Reproduce", "", "Results in `sweep.parquet` / `results.duckdb` (one row per candidate), per-person held-out "
              "numbers in `subjects.parquet`, the replayed memory in `memory.duckdb`; "
              "`factmem.tuning.runs.load_run(folder)` reloads everything.", ""]
    del curves
    return "\n".join(lines)


def importance_lines(result: TuneResult) -> list[str]:
    """Each searched parameter's importance in the all-data study (PED-ANOVA), beside the identification."""
    imp = result.importances
    if imp is None or not len(imp):
        return []
    names = [c for c in imp.columns if c not in ("parameter", "max", "identified")]
    lines = ["Importance of each searched parameter in the search (Optuna's PED-ANOVA on the all-data study: its share "
             "of what tells the good candidates from the rest; *important* at "
             f"{100 * IDENTIFIED_SHARE:.0f}% or more). It says where the search found the objective sensitive; the "
             "identification above (the effect of moving one value at the recommendation) decides what is shipped.", "",
             "| parameter | " + " | ".join(f"importance ({n})" for n in names) + " | important |",
             "|---" * (len(names) + 2) + "|"]
    for _, row in imp.sort_values("max", ascending=False, na_position="last").iterrows():
        lines.append(f"| `{row['parameter']}` | " + " | ".join(_fmt(row[n], 2) for n in names)
                     + f" | {'yes' if row['identified'] else '**no**'} |")
    lines += [""]
    # The two kinds of evidence can disagree; say so parameter by parameter, with what decided.
    ident = result.primary.identification
    checked = {} if ident is None else {p.name: p for p in ident.parameters}
    objective = "" if ident is None else ident.objective
    min_effect = 0.0 if ident is None else ident.min_effect
    share = f"{100 * IDENTIFIED_SHARE:.0f}%"
    for _, row in imp.iterrows():
        name, important, direct = row["parameter"], bool(row["identified"]), checked.get(row["parameter"])
        if direct is None:
            if not important:
                lines.append(f"- `{name}`: below {share} in the study, so the search's results do not say where it "
                             "should be.")
        elif not important and direct.identified:
            lines.append(f"- `{name}`: below {share} in the study, yet moving it alone at the recommendation changes "
                         f"{objective} by {direct.effect:.4g} (the identification above): the direct test decides, so it "
                         "is shipped as recommended.")
        elif direct.kept_jointly:
            lines.append(f"- `{name}`: {'important' if important else f'below {share}'} in the study; no effect alone at "
                         "the recommendation, but resetting it with the other unidentified parameters costs more than the "
                         "minimum effect: kept jointly, shipped as recommended.")
        elif not important:
            lines.append(f"- `{name}`: below {share} in the study and no effect at the recommendation: kept at the "
                         "baseline's value.")
        elif not direct.identified:
            lines.append(f"- `{name}`: important in the study (its good candidates gather in part of its range), but "
                         f"moving it alone at the recommendation changes {objective} by only {direct.effect:.4g} < "
                         f"{min_effect:g}: kept at the baseline's value.")
    if lines[-1]:
        lines.append("")
    return lines


def studies_sentence(out: SearchOutcome) -> str:
    """Which studies the search ran and what each choice is made among, in words."""
    names = list(out.studies)
    people = [n for n in names if n.startswith("people-")]
    if not people:
        return (f"one study ({', '.join(f'`{n}`' for n in names)}) of all tuning data; the recommendation is "
                "chosen among its candidates and the fixed points (baseline, seed defaults, current, start)")
    summary = [n for n in names if n not in people]
    return (f"one study per fold's people ({', '.join(f'`{n}`' for n in people)}), each told only the scores of "
            "its own fold's people; each fold chooses, by its training people's score, among the candidates "
            "the other folds' studies proposed, the shared ones and the fixed points (baseline, seed defaults, "
            "current, start) — never one that only the study told its own people's scores proposed; the "
            "recommendation is chosen among every candidate on all tuning data"
            + (f" (study `{summary[0]}` holds them all with that score, for the importances and the "
               "dashboard; it proposes nothing)" if summary else ""))


def search_section(result: TuneResult) -> list[str]:
    """The report's account of the search: sampler, studies, budget, the search's notes."""
    out = result.studies
    if out is None:
        return []
    s = result.search
    n_rows = len(out.sweep.params)
    if s.method in ("tpe", "cmaes", "gp"):
        start = (f"a start of {s.startup} shared by every study (they look at no score"
                 + ("; it opens with the space's corners — one kind shown and never decaying, the others starting "
                    "below the threshold; everything kept; the centre —, scored beside the studies (every study "
                    "may choose one, none is told them), then random draws" if s.corners else
                    ": random draws") + f"), then {s.n} of each study's own"
                 + (f", {s.local:.0%} of each round's drawn around the study's own best so far (local steps) and "
                    "the rest by its sampler" if s.local > 0 else ""))
    else:
        start = f"{out.proposed} candidates shared by every study"
    lines = ["## The search", "",
             f"Optuna sampler `{s.method}` (seed {s.seed}), {studies_sentence(out)}: {start} ({out.proposed} per study, "
             f"in {out.rounds} rounds); {n_rows} distinct parameter sets replayed by the search (the identification "
             "probes and the restarts come on top). The studies are in `study.db` (open them with "
             "`optuna-dashboard study.db`; every trial carries its `sweep.parquet` row and factmem's metrics as user "
             "attributes).", ""]
    for n in result.notes:
        lines += [f"- {n}"]
    if result.notes:
        lines.append("")
    return lines

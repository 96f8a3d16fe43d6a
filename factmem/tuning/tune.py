"""``factmem tune``: sweep, pick by the tuning part, judge on held-out data, write a report.

The recommendation is the parameter set with the best objective on the tuning part (checkpoints
before the split, or the whole tuning log). It is *promoted* only if it also beats the seed's
defaults on the held-out part — and, when ``current`` production parameters are given, those too —
by the objective; otherwise the defaults (or the current parameters) stay and the report says so.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from factmem.core.params import MemoryParams
from factmem.errors import InputError
from factmem.evaluation.cardinality import measure_cardinality, suggest_multi_valued
from factmem.evaluation.simulate import PreparedLog, Schedule, default_schedule, prepare, simulate
from factmem.tuning.runs import default_run_dir, manifest, run_folder, write_run
from factmem.tuning.sweep import OBJECTIVES, SweepResult, sweep

#: the default grid: the decay rate of each observed kind and the reinforcement gain
DEFAULT_SPACE: dict[str, list] = {
    "decay_rate.explicit": [0.001, 0.003, 0.01, 0.05],
    "decay_rate.user_preference": [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.04],
    "decay_rate.episodic": [0.15, 0.3, 0.6],
    "reinforce_gain": [0.15, 0.3, 0.5, 0.75, 1.0],
}

REPORT_METRICS = [("log_loss", "log loss", True), ("brier", "Brier score", True), ("auc", "AUC", False),
                  ("rmse_bins", "RMSE(bins)", True), ("precision", "precision", False),
                  ("recall", "recall", False), ("believed", "believed-set size", True),
                  ("stale", "stale beliefs", True), ("lost", "lost facts", True)]


def bundled_dataset() -> Path:
    """The bundled ``small`` dataset (installed with the package, or in a source checkout)."""
    try:
        p = resources.files("factmem.bundled") / "small"
        if p.is_dir():
            return Path(str(p))
    except ModuleNotFoundError:
        pass
    here = Path(__file__).resolve().parents[2] / "datasets" / "small"  # a source checkout: factmem/tuning/tune.py
    if here.is_dir():
        return here
    raise InputError("the bundled 'small' dataset is not installed; pass --log DIR")


@dataclass
class TuneResult:
    sweep: SweepResult
    recommended: MemoryParams
    best_index: int
    promoted: bool
    decision: str
    chosen: MemoryParams
    out: Path | None
    seconds: float
    heldout: pd.DataFrame = field(default_factory=pd.DataFrame)
    notes: list[str] = field(default_factory=list)

    def summary_table(self) -> pd.DataFrame:
        return self.heldout


def base_params(P: PreparedLog) -> MemoryParams:
    """Seed defaults with the log's multi-valued predicates (declared by its scenario, else measured)."""
    mvp = P.dataset.multi_valued_predicates
    if not mvp:
        table = measure_cardinality(P.dataset.truth if len(P.dataset.truth) else None, P.events)
        mvp = suggest_multi_valued(table)
    return MemoryParams(multi_valued_predicates=mvp)


def tune(log: Any = None, *, out: str | os.PathLike | None = None, space: Mapping[str, Any] | None = None,
         schedule: Schedule | None = None, split: float | None = 2 / 3, holdout: Any = None,
         objective: str = "log_loss", current: MemoryParams | None = None, search: str = "grid", n: int = 64,
         seed: int = 0, executor=None, workers: int | None = None, progress: bool = True,
         write: bool = True, force: bool = False) -> TuneResult:
    """Tune the memory's parameters on ``log`` (default: the bundled ``small`` dataset).

    Writes ``out`` (default ``runs/<timestamp>/``): sweep results (Parquet and DuckDB), manifest,
    figures (PNG), ``report.md`` and ``params.toml`` — the promoted parameters, ready for
    ``factmem export``. ``out`` must be new or empty (the run-folder rule of
    :mod:`factmem.tuning.runs`; ``force=True`` replaces a previous run); it is checked before the
    sweep, holds ``INCOMPLETE`` while the run writes, and is removed if the run fails.
    """
    if objective not in OBJECTIVES:
        raise InputError(f"unknown objective {objective!r}; objectives: {', '.join(OBJECTIVES)}")
    if not write:
        return _tune(log, None, space, schedule, split, holdout, objective, current, search, n, seed, executor,
                     workers, progress)
    with run_folder(out if out is not None else default_run_dir(), force=force) as folder:
        return _tune(log, folder, space, schedule, split, holdout, objective, current, search, n, seed, executor,
                     workers, progress)


def _tune(log, out: Path | None, space, schedule, split, holdout, objective, current, search, n, seed, executor,
          workers, progress) -> TuneResult:
    t0 = time.perf_counter()
    P = prepare(log if log is not None else bundled_dataset())
    H = None if holdout is None else prepare(holdout)
    schedule = schedule or default_schedule(P)
    base = base_params(P)
    res = sweep(P, space or DEFAULT_SPACE, base=base, schedule=schedule, split=split, holdout=H, search=search,
                n=n, seed=seed, objective=objective, executor=executor, workers=workers, progress=progress)
    extra = pd.DataFrame()
    if current is not None:
        extra = sweep(P, [current], schedule=schedule, split=split, holdout=H, objective=objective,
                      include_defaults=False, workers=0, progress=False).table
    tab = res.table
    best = res.best(objective, on="train")
    rec = res.params[best]
    col = f"test.{objective}"
    cur_v = float(extra[col].iloc[0]) if current is not None else None
    keep, decision = decide(objective, float(tab.loc[best, col]), float(tab.loc[0, col]), cur_v,
                            best_is_default=best == 0)
    promoted = keep == "recommended"
    chosen = {"recommended": rec, "current": current, "defaults": MemoryParams()}[keep]
    assert chosen is not None  # decide() keeps "current" only when current parameters were given
    base_row = next((i for i, p in enumerate(res.params) if p == base and i != 0), None)
    heldout = _heldout_table(tab, best, extra if current is not None else None, base_row)
    result = TuneResult(res, rec, best, promoted, decision, chosen, None, time.perf_counter() - t0, heldout,
                        _edge_notes(space or DEFAULT_SPACE, rec, search))
    if out is not None:
        result.out = _write(result, P, H, schedule, out, split, objective, seed, space or DEFAULT_SPACE, search, n,
                            current)
    result.seconds = time.perf_counter() - t0
    return result


def decide(objective: str, recommended: float, defaults: float, current: float | None = None, *,
           best_is_default: bool = False) -> tuple[str, str]:
    """The promotion rule: the recommendation must beat the seed defaults on held-out data by the
    objective — and be no worse than the current production parameters when given. Returns which
    parameters to keep (``recommended``, ``current`` or ``defaults``) and a sentence saying why."""
    lower = OBJECTIVES[objective]
    name = _metric_name(objective)
    beats = lambda a, b: a < b if lower else a > b
    no_worse = lambda a, b: a <= b if lower else a >= b
    cur = "" if current is None else f" and {current:.4g} for the current ones"
    if best_is_default:
        return "defaults", "Not promoted: the seed defaults are the best parameter set on the tuning part; they stay."
    if beats(recommended, defaults) and (current is None or no_worse(recommended, current)):
        return "recommended", (f"Promoted: on held-out data the recommended parameters reach {name} {recommended:.4g} against "
                      f"{defaults:.4g} for the seed defaults{cur} ({_rel(recommended, defaults)}).")
    if current is not None and beats(recommended, defaults):
        return "current", (f"Not promoted: on held-out data the recommended parameters reach {name} {recommended:.4g}, "
                       f"better than the seed defaults ({defaults:.4g}) but worse than the current parameters "
                       f"({current:.4g}); the current parameters stay.")
    keep = "current" if current is not None and no_worse(current, defaults) else "defaults"
    who = "the current parameters stay" if keep == "current" else "the seed defaults stay"
    return keep, (f"Not promoted: on held-out data the recommended parameters reach {name} {recommended:.4g} against "
                  f"{defaults:.4g} for the seed defaults{cur}; they do not beat the defaults, so {who}.")


def _metric_name(m: str) -> str:
    return dict((k, v) for k, v, _ in REPORT_METRICS).get(m, m)


def _rel(a: float, b: float) -> str:
    if b == 0 or not math.isfinite(a) or not math.isfinite(b):
        return "n/a"
    return f"{(a - b) / abs(b) * 100:+.1f}%"


def _edge_notes(space: Mapping[str, Any], rec: MemoryParams, search: str) -> list[str]:
    """Warn when the recommendation sits at the edge of a searched list: the optimum may lie beyond."""
    notes: list[str] = []
    if search != "grid" or not isinstance(space, Mapping):
        return notes
    for name, values in space.items():
        nums = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if len(nums) < 2:
            continue
        v = rec.get(name)
        if _at_domain_bound(name, v, rec):
            continue  # nothing lies beyond: the parameter cannot go further
        if v == min(nums) or v == max(nums):
            side = "lower" if v == min(nums) else "upper"
            notes.append(f"`{name}` = {v:g} is at the {side} edge of the searched values "
                         f"({min(nums):g}…{max(nums):g}); the optimum may lie beyond: widen the range.")
    return notes


def _at_domain_bound(name: str, value: float, params: MemoryParams) -> bool:
    head = name.split(".")[0]
    if head in ("decay_rate", "archive_threshold", "retrieval_threshold", "temperature") and value == 0:
        return True
    if head in ("reinforce_gain", "confidence_cap") and value == 1:
        return True
    return head == "initial_confidence" and value == params.confidence_cap


def _heldout_table(tab: pd.DataFrame, best: int, current: pd.DataFrame | None,
                   base_row: int | None = None) -> pd.DataFrame:
    rows = []
    for key, label, lower in REPORT_METRICS:
        col = f"test.{key}"
        row = {"metric": label, "seed defaults": tab.loc[0, col]}
        if base_row is not None:
            row["seed numbers + multi-valued"] = tab.loc[base_row, col]
        row["recommended"] = tab.loc[best, col]
        if current is not None:
            row["current"] = current[col].iloc[0]
        row["better"] = "lower" if lower else "higher"
        rows.append(row)
    return pd.DataFrame(rows)


# -- writing the run --------------------------------------------------------------------------------


def _write(result: TuneResult, P: PreparedLog, H: PreparedLog | None, schedule: Schedule, out: Path, split, objective,
           seed, space, search, n, current) -> Path:
    """Fill the run folder (made by :func:`tune`, which marks it complete after this returns)."""
    from factmem import plots
    from factmem.export import write_params_file
    res = result.sweep
    tab = res.table
    defaults, rec = MemoryParams(), result.recommended
    # the two contenders replayed through a FactStore for figures and inspection (held-out checkpoints)
    cps = schedule.checkpoints(P.start, P.end)
    eval_cps = cps[cps >= res.split_at] if res.split_at is not None and H is None else cps
    src = H or P
    if H is not None:
        eval_cps = schedule.checkpoints(H.start, H.end)
    sim_rec = simulate(src, rec, schedule, store_path=out / "memory.duckdb", checkpoints=eval_cps)
    sim_def = simulate(src, defaults, schedule, checkpoints=eval_cps)

    figs = {}
    fig = plots.trajectories(sim_rec.trajectories, evidence=sim_rec.store.evidence(),
                             facts=sim_rec.store.facts(at=src.end), threshold=rec.archive_threshold)
    figs["trajectories"] = plots.save(fig, out / "trajectories.png")
    swept = [k for k in space if tab[k].nunique() > 1] if isinstance(space, Mapping) else []
    if len(swept) >= 2:
        x, y = _two_most_influential(tab, swept, f"test.{objective}")
        fig = plots.sweep_heatmap(tab[~tab["baseline"]], x, y, f"test.{objective}", agg="min" if OBJECTIVES[objective] else "max",
                                  lower_is_better=OBJECTIVES[objective])
        figs["heatmap"] = plots.save(fig, out / "heatmap.png")
    hl = {"seed defaults": 0, "recommended": result.best_index}
    fig = plots.pareto(tab.rename(columns={"test.believed": "believed", "test.recall": "recall"}), x="believed",
                       y="recall", highlight=hl)
    figs["pareto"] = plots.save(fig, out / "pareto.png")
    rel = pd.concat([sim_rec.evaluation.reliability.query("kind == 'all'").assign(params="recommended"),
                     sim_def.evaluation.reliability.query("kind == 'all'").assign(params="seed defaults")])
    fig = plots.reliability(rel, by="params")
    figs["calibration"] = plots.save(fig, out / "calibration.png")
    fig = plots.checkpoint_metrics(sim_rec.checkpoints)
    figs["checkpoints"] = plots.save(fig, out / "checkpoints.png")

    ck = pd.concat([sim_rec.checkpoints.assign(params="recommended"), sim_def.checkpoints.assign(params="seed defaults")],
                   ignore_index=True)
    info = dict(
        dataset={"path": str(P.dataset.path) if P.dataset.path else None, "sha256": P.sha256,
                 "scenario": P.dataset.scenario, "events": int(len(P.events))},
        holdout=None if H is None else {"path": str(H.dataset.path) if H.dataset.path else None, "sha256": H.sha256},
        schedule=schedule.to_dict(), split_at=res.split_at, objective=objective, search=search,
        seeds={"search": seed, "dataset": P.dataset.scenario.get("seed")},
        space={k: (v if isinstance(v, list) else repr(v)) for k, v in space.items()} if isinstance(space, Mapping) else None,
        n_params=len(res.params), recommended=rec.to_dict(), promoted=result.promoted, decision=result.decision,
        chosen=result.chosen.to_dict(), current=None if current is None else current.to_dict(),
        seconds=round(result.seconds, 2),
    )
    man = manifest("tune", **info)
    write_run(out, man, finish=False, tables={
        "sweep": tab, "checkpoints": ck, "reliability": rel.reset_index(drop=True),
        "lost": sim_rec.evaluation.lost, "heldout": result.heldout,
        "cardinality": sim_rec.cardinality, "trajectories": sim_rec.trajectories,
    })
    metrics = {k: float(tab.loc[result.best_index, f"test.{k}"]) for k, _, _ in REPORT_METRICS}
    default_metrics = {k: float(tab.loc[0, f"test.{k}"]) for k, _, _ in REPORT_METRICS}
    chosen_row = result.best_index if result.promoted else 0
    write_params_file(out / "params.toml", result.chosen, {
        "run_id": str(tab.loc[chosen_row, "run_id"]), "dataset_sha256": P.sha256, "objective": objective,
        "git_commit": man["git_commit"] or "", "notes": result.decision,
        "metrics": {k: float(tab.loc[chosen_row, f"test.{k}"]) for k, _, _ in REPORT_METRICS},
        "default_metrics": default_metrics,
    })
    (out / "report.md").write_text(_report(result, P, H, schedule, objective, figs, metrics, default_metrics,
                                           sim_rec, sim_def, man), encoding="utf-8")
    sim_rec.store.close()
    sim_def.store.close()
    return out


def _two_most_influential(tab: pd.DataFrame, swept: list[str], col: str) -> tuple[str, str]:
    """The two swept parameters whose best-case objective varies most across their values."""
    spread = {}
    for k in swept:
        g = tab[~tab["baseline"]].groupby(k)[col].min()
        spread[k] = float(g.max() - g.min())
    a, b = sorted(swept, key=lambda k: (-spread[k], swept.index(k)))[:2]
    return a, b


def _date(ts: int) -> str:
    return _dt.datetime.fromtimestamp(int(ts), tz=_dt.UTC).strftime("%Y-%m-%d")


def _fmt(v: Any) -> str:
    if isinstance(v, (float, np.floating)):
        if not math.isfinite(v):
            return "n/a"
        return f"{v:.4g}"
    return str(v)


def _report(result: TuneResult, P: PreparedLog, H, schedule: Schedule, objective: str, figs: dict, metrics: dict,
            default_metrics: dict, sim_rec, sim_def, man: dict) -> str:
    res, tab = result.sweep, result.sweep.table
    ds = P.dataset
    lines = [f"# factmem tune — {ds.scenario.get('name', ds.path.name if ds.path else 'log')}", ""]
    lines += [f"- **Log**: `{ds.path}` (sha256 `{P.sha256[:16]}…`), {len(P.events):,} fact mentions about "
              f"{P.events['subject'].nunique()} subjects, {_date(P.start)} → {_date(P.end)} "
              f"({(P.end - P.start) / 86400:.0f} days)."]
    if H is not None:
        lines += [f"- **Held out**: another log, `{H.dataset.path}` (sha256 `{H.sha256[:16]}…`), {len(H.events):,} mentions."]
    else:
        assert res.split_at is not None  # a single log is scored on a time split
        lines += [f"- **Split**: tuned on checkpoints before {_date(res.split_at)}, held out after "
                  f"({(P.end - res.split_at) / 86400:.0f} days). The memory replays the whole log; only the scoring is split."]
    lines += [f"- **Schedule**: consolidate every {schedule.consolidate_every_hours:g} h, evaluate every "
              f"{schedule.evaluate_every_hours:g} h.",
              f"- **Search**: {len(res.params)} parameter sets (the seed defaults included) in {result.seconds:.0f} s; "
              f"objective **{_metric_name(objective)}** ({'lower' if OBJECTIVES[objective] else 'higher'} is better), "
              f"chosen on the tuning part.",
              f"- **Multi-valued predicates** (never superseded): {', '.join(sorted(result.recommended.multi_valued_predicates)) or 'none'}.",
              "", "## Decision", "", result.decision,
              "", f"`params.toml` holds the {'recommended' if result.promoted else 'unchanged'} parameters, ready for "
              "`factmem export params.toml --format rust --out memory_params.rs`.", ""]
    if result.notes:
        lines += ["**Check the search range:**", ""] + [f"- {n}" for n in result.notes] + [""]
    lines += ["## What the recommendation changes", "", "| parameter | seed default | recommended |", "|---|---|---|"]
    d, r = MemoryParams().to_flat(), result.recommended.to_flat()
    for k in d:
        if d[k] != r[k]:
            dv = ", ".join(d[k]) if isinstance(d[k], list) else _fmt(d[k])
            rv = ", ".join(r[k]) if isinstance(r[k], list) else _fmt(r[k])
            lines.append(f"| `{k}` | {dv or '—'} | {rv or '—'} |")
    ho = result.heldout
    mid = [c for c in ho.columns if c not in ("metric", "better")]
    lines += ["", "## Held-out metrics", "", "| metric | " + " | ".join(mid) + " | change vs defaults |",
              "|---" * (len(mid) + 2) + "|"]
    for (k, label, lower), (_, row) in zip(REPORT_METRICS, ho.iterrows()):
        vals = " | ".join(_fmt(row[c]) for c in mid)
        lines.append(f"| {label} ({'lower' if lower else 'higher'} is better) | {vals} | "
                     f"{_rel(metrics[k], default_metrics[k])} |")
    if "seed numbers + multi-valued" in mid:
        lines += ["", "*seed numbers + multi-valued*: the seed's numbers with the log's multi-valued predicates — "
                  "it separates what the cardinality choice buys from what the tuned numbers buy."]
    kinds = [c for c in tab.columns if c.startswith("test.log_loss.")]
    if kinds:
        lines += ["", "Log loss by kind on held-out data:", "", "| kind | seed defaults | recommended |", "|---|---|---|"]
        for c in kinds:
            lines.append(f"| {c.split('.')[-1]} | {_fmt(tab.loc[0, c])} | {_fmt(tab.loc[result.best_index, c])} |")
    lost = sim_rec.evaluation.lost
    lines += ["", "## What the numbers mean", "",
              "- *log loss, Brier, AUC*: effective confidence read as the probability that a fact is true and relevant, "
              "over every fact mentioned so far at each checkpoint; a forgotten true fact counts as probability 0 "
              "(clipped to 1e-4).",
              "- *RMSE(bins)*: calibration of held facts, binned by kind × days since the last reinforcement.",
              "- *precision / recall*: of the believed set (active facts above the retrieval threshold) against facts "
              "that are true, relevant and were mentioned; averaged over checkpoints.",
              "- *believed-set size*: the context pressure; *stale*: believed facts the world has moved past; "
              f"*lost*: facts archived while still true and mentioned again later (the recommended run lost {len(lost)}).",
              "", "## Figures", ""]
    captions = {"trajectories": "Confidence trajectories of a few facts (recommended parameters)",
                "heatmap": f"Held-out {_metric_name(objective)} over the two most influential parameters (best over the others)",
                "pareto": "Believed-set size against recall on held-out data; the front and the two contenders",
                "calibration": "Reliability on held-out data: predicted confidence against observed frequency",
                "checkpoints": "Believed set, precision and recall over time (recommended)"}
    for k, p in figs.items():
        lines += [f"![{captions.get(k, k)}]({Path(p).name})", f"*{captions.get(k, k)}.*", ""]
    lines += ["## Reproduce", "", f"factmem {man['factmem_version']}" + (f", commit `{man['git_commit'][:12]}`" if man['git_commit'] else "")
              + "; results in `sweep.parquet` / `results.duckdb`, replayed memory in `memory.duckdb`; "
              "`factmem.runs.load_run(folder)` reloads everything.", ""]
    return "\n".join(lines)

"""CLI commands of the tuning workflow: ``tune``, ``simulate``, ``sweep``, ``cardinality``.

Each is a thin wrapper over one library call (:func:`factmem.tuning.tune.tune`,
:func:`factmem.evaluation.simulate.simulate`, :func:`factmem.tuning.sweep.sweep`,
:func:`factmem.evaluation.cardinality_choice.suggest_cardinality` and
:func:`factmem.evaluation.cardinality_policy.compare_policies`).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from factmem.cli.options import (
    budgets_of,
    files_in,
    load_log,
    log_arg,
    params_arg,
    schedule_args,
    schedule_of,
    search_args,
    settings_of,
)
from factmem.cli.output import EXIT_NOT_PROMOTED, EXIT_OK, Output, output_args
from factmem.core.params import MemoryParams
from factmem.errors import InputError

__all__ = ["add_tune", "add_simulate", "add_sweep", "add_cardinality"]


def add_tune(sub) -> None:
    p = sub.add_parser(
        "tune", help="choose decay rates, thresholds and gain for a context budget; judge them held out (the main job)",
        description="Search decay rates, initial confidences, gain and the archive threshold for the parameters "
                    "that put the facts a conversation needs into a context of k facts per person and keep stale "
                    "ones out (utility@k); judge the choice on held-out people (k-fold over subjects, or a time "
                    "split, or another log) against the seed's numbers on the same base, with a bootstrap "
                    "interval; promote only if the interval excludes 0; write report.md, params.toml, figures and "
                    "tables to --out.")
    p.add_argument("--log", metavar="DIR|PROD.sqlite",
                   help="dataset folder (log.jsonl, truth.csv, ...), or a production memory file (SQLite in the "
                        "seed's schema, or a factmem store file): then needed is a no-truth proxy and the current "
                        "parameters are the baseline; default: the bundled 'small'")
    p.add_argument("--out", metavar="DIR", help="output folder, new or empty (default runs/<timestamp>/)")
    p.add_argument("--force", action="store_true", help="replace --out if it holds a previous run")
    search_args(p)
    p.add_argument("--current", metavar="PARAMS|seed",
                   help="production parameters (params.toml) the recommendation must also beat; with a production "
                        "file that records none (no factmem_meta), required: a params file, or 'seed' for the seed's "
                        "defaults said explicitly")
    p.add_argument("--max-search-people", type=int, default=None, metavar="N",
                   help="production file: search on a seeded sample of N people when it has more (default 2000; "
                        "judged on all)")
    p.add_argument("--max-search-observations", type=int, default=None, metavar="N",
                   help="production file: ... and of people holding at most N observations in all (default 150000; "
                        "a search's time grows with them)")
    g = p.add_argument_group("promotion rule")
    g.add_argument("--min-effect", type=float, default=0.01, metavar="D",
                   help="promote only if the 95%% interval's near end clears D (objective units; default 0.01) "
                        "against the baseline, --current, the empty memory and keep-everything")
    g.add_argument("--restarts", type=int, default=3, metavar="N",
                   help="run the search N times in all, with seeds SEED, SEED+1, ... (the later ones with half the "
                        "candidates); promote only if every run promotes (default 3; 1: no restart)")
    p.add_argument("--start", metavar="fit|PARAMS",
                   help="centre the search on these parameters: 'fit' (fitted from the log by maximum likelihood) "
                        "or a params file; the report shows them beside the swept optimum")
    schedule_args(p)
    p.add_argument("--calibrate-all", action="store_true",
                   help="score calibration (log loss, Brier, AUC, RMSE(bins)) for every candidate, not only for the "
                        "rows the report shows (slower; the sweep table then has them for every row)")
    p.add_argument("--fail-if-not-promoted", action="store_true",
                   help="exit with status 3 when nothing is promoted (for CI gates; default: 0 either way)")
    p.add_argument("--resume", metavar="RUN",
                   help="continue the tune run in folder RUN (its log, seed and settings) with --n more candidates "
                        "per study (default: as many as it had); writes the combined run to --out, else back to RUN")
    output_args(p)
    p.set_defaults(func=_run_tune)


def _start_of(args, log_dir) -> MemoryParams | None:
    if not args.start:
        return None
    if args.start == "fit":
        from factmem.evaluation.simulate import prepare
        from factmem.fitting.fit import fit
        from factmem.tuning.tune import base_params

        # fitted on the same base as tune's baseline (the log's multi-valued predicates), so the start
        # point differs from it only in what was fitted
        return fit(log_dir, bootstrap=0, base=base_params(prepare(log_dir))).params
    return params_arg(args.start)


def _run_tune(args) -> int:
    from pathlib import Path

    from factmem.tuning.tune import resume, tune

    if args.log and Path(args.log).is_file():  # a production memory, not a dataset folder
        from factmem.cli.production import run_tune_production

        return run_tune_production(args)
    for flag, given in (("--max-search-people", args.max_search_people), ("--max-search-observations",
                                                                         args.max_search_observations)):
        if given is not None:
            from factmem.errors import InputError

            raise InputError(f"{flag} applies to a production file (tune --log PROD.sqlite), not to "
                             f"{args.log or 'the bundled dataset'}: a dataset folder is searched on all its people")

    say = Output(args)
    search, objective, holdout, compute = settings_of(args)
    if args.resume:
        res = resume(args.resume, n=args.n, out=args.out, compute=compute)
    else:
        log_dir = load_log(args.log)
        from factmem.tuning.decision import Promotion

        promotion = Promotion(min_effect=args.min_effect, restarts=args.restarts)
        res = tune(log_dir, out=args.out, search=search, objective=objective, holdout=holdout, compute=compute,
                   schedule=schedule_of(args, log=log_dir), current=params_arg(args.current),
                   start=_start_of(args, log_dir), force=args.force, calibrate_all=args.calibrate_all,
                   promotion=promotion)
    restarts = f", {len(res.restarts) - 1} restarts of {res.restarts[1].candidates}" if len(res.restarts) > 1 else ""
    say.say(f"\n{int(res.sweep.eligible().sum())} candidates ({int(res.sweep.table['probe'].sum())} probes for "
            f"identification{restarts}) in {res.seconds:.0f} s")
    # the budget params.toml holds comes last, so that the terminal ends with what was written
    order = [k for k in res.recommendations if k != res.primary.budget] + [res.primary.budget]
    for k in order:
        rec = res.recommendations[k]
        t = rec.heldout.copy()
        for c in t.columns:
            if c not in ("metric", "key", "better", "scope"):
                t[c] = t[c].map(lambda v: f"{v:.4g}")
        say.say(f"\nbudget k = {k}: held-out metrics\n")
        say.say(t.drop(columns=["key", "better", "scope"]).to_string(index=False))
        changed = rec.params.changes_from(res.baseline)
        say.say("\nrecommended changes from the baseline: " + (
            ", ".join(f"{n} {a:.4g} -> {b:.4g}" if isinstance(a, float) else f"{n} {a} -> {b}"
                      for n, (a, b) in changed.items() if n != "multi_valued_predicates") or "none"))
        if rec.baseline_versus_empty is not None:
            from factmem.tuning.decision import below_empty

            sentence = below_empty(rec.baseline_versus_empty, f"held-out objective at k = {k}",
                                   res.sweep.objective.lower_is_better)
            if sentence:
                say.say("\n" + sentence.replace("**", ""))
        for line in rec.tradeoffs:
            say.say("\n" + line.replace("**", ""))
        say.say(f"\n{rec.decision}")
        if len(rec.restarts) > 1:
            say.say("runs of the search: " + "; ".join(
                f"seed {r.seed} ({r.candidates} candidates): "
                + ("promoted" if r.keep[k] == "recommended" else "not promoted") + f" {r.difference[k]:+.4f}"
                for r in rec.restarts))
        for n in rec.notes:
            say.say("note: " + n.replace("`", ""))
    primary = res.primary
    say.say(f"\nwrote {res.out}/ (report.md, params.toml, figures, results)")
    say.say(f"params.toml holds the {primary.keep} parameters for k = {primary.budget}: "
            f"{primary.decision.split(':')[0]}")
    code = EXIT_NOT_PROMOTED if args.fail_if_not_promoted and not res.promoted else EXIT_OK
    return say.result(res, files_in(res.out), exit_code=code,
                      decision={"promoted": res.promoted, "budget": res.primary.budget, "text": res.decision})


def add_simulate(sub) -> None:
    p = sub.add_parser("simulate", help="replay a log through a memory and score it against ground truth",
                       description="Replay a dataset through a FactStore with the given parameters on a schedule "
                                   "(optionally with abstraction passes) and print its scores; --out writes the "
                                   "run (manifest, checkpoints, lost facts, memory.duckdb).")
    log_arg(p)
    p.add_argument("--params", metavar="FILE", help="parameters file (TOML/JSON; default: seed defaults + the log's "
                                                    "multi-valued predicates)")
    p.add_argument("--out", metavar="DIR", help="write the run folder here (new or empty)")
    p.add_argument("--force", action="store_true", help="replace --out if it holds a previous run")
    schedule_args(p)
    p.add_argument("--abstract-every", type=float, metavar="DAYS", help="run the abstraction pass every DAYS")
    p.add_argument("--provider", choices=("oracle", "openai", "ollama"), default="oracle",
                   help="abstraction provider (default: the log's ground-truth oracle)")
    p.add_argument("--base-url", help="provider URL (openai, ollama)")
    p.add_argument("--model", help="model name")
    p.add_argument("--cassette", metavar="FILE", help="record/replay provider answers in this JSONL file")
    p.add_argument("--budget", default="20", metavar="K[,K...]",
                   help="context budget(s) k for the budgeted context metrics printed (default 20)")
    output_args(p)
    p.set_defaults(func=_run_simulate)


def _run_simulate(args) -> int:
    from factmem.evaluation.simulate import prepare, simulate
    from factmem.tuning.runs import manifest, run_folder, write_run
    from factmem.tuning.tune import base_params

    say = Output(args)
    budgets = budgets_of(args.budget)
    log = load_log(args.log)
    prepared = prepare(log)
    params = params_arg(args.params) or base_params(prepared)
    provider = None
    if args.abstract_every:
        from factmem.abstraction.providers import make_provider

        dataset = str(prepared.dataset.path) if args.provider == "oracle" else None
        provider = make_provider(args.provider, base_url=args.base_url, model=args.model, cassette=args.cassette,
                                 dataset=dataset)
    schedule = schedule_of(args, args.abstract_every, log)
    if not args.out:
        run = simulate(prepared, params, schedule, provider=provider, model=args.model)
        try:
            context = context_metrics(prepared, params, schedule, budgets)
            say.say(_simulation_text(run, context))
        finally:
            run.store.close()
        return say.result({**run.to_dict(), "context": context})
    with run_folder(args.out, force=args.force) as out:
        run = simulate(prepared, params, schedule, provider=provider, model=args.model,
                       store_path=out / "memory.duckdb")
        try:
            context = context_metrics(prepared, params, schedule, budgets)
            say.say(_simulation_text(run, context))
            write_run(out, manifest("simulate", dataset={"path": str(prepared.dataset.path), "sha256": prepared.sha256},
                                    params=params.to_dict(), schedule=run.schedule.to_dict(), summary=run.summary,
                                    context=context),
                      {"checkpoints": run.checkpoints, "lost": run.evaluation.lost, "passes": run.passes,
                       "cardinality": run.cardinality, "trajectories": run.trajectories,
                       "reliability": run.evaluation.reliability}, finish=False)
        finally:
            run.store.close()
    final = Path(args.out)  # the run was written beside it and renamed into place when complete
    say.say(f"\nwrote {final}/")
    return say.result({**run.to_dict(), "context": context}, files_in(final))


CONTEXT_METRICS = ("utility", "recall", "precision", "stale", "false", "context")


def context_metrics(prepared, params: MemoryParams, schedule, budgets: tuple[int, ...]) -> dict[str, dict[str, float]]:
    """The budgeted context metrics of one parameter set at every session start (what tune's
    decisions rest on), by budget: ``{"20": {"utility": ..., "recall": ..., ...}}``."""
    from factmem.tuning.settings import Compute, Objective
    from factmem.tuning.sweep import sweep

    res = sweep(prepared, [params], schedule=schedule, objective=Objective(budgets=budgets),
                compute=Compute(workers=0, progress=False))
    row = res.table.iloc[0]
    return {str(k): {m: float(row[f"all.{m}@{k}"]) for m in CONTEXT_METRICS if f"all.{m}@{k}" in row.index}
            for k in budgets}


def _simulation_text(run, context: dict[str, dict[str, float]]) -> str:
    s = run.summary
    lines = ["whole memory, at the daily checkpoints:",
             pd.Series({k: s[k] for k in ("log_loss", "brier", "auc", "rmse_bins", "precision", "recall", "believed",
                                          "stale", "lost")}).to_string()]
    for k, values in context.items():
        lines += ["", f"context of k = {k} facts per person, at every session start:",
                  pd.Series({f"{m}@{k}": v for m, v in values.items()}).to_string()]
    if len(run.passes):
        lines.append("\nabstraction passes:\n" + run.passes.to_string(index=False))
    return "\n".join(lines)


def add_sweep(sub) -> None:
    p = sub.add_parser("sweep", help="score many parameter sets on a log (grid or random search)",
                       description="Replay a dataset with every parameter set of a space and score each: the "
                                   "budgeted context metrics at every session start (per budget) and the whole-memory "
                                   "metrics at every checkpoint, on the parts the hold-out defines. Parameter sets "
                                   "are evaluated together by the vectorized kernel, in parallel processes or on a "
                                   "Dask cluster.")
    log_arg(p)
    search_args(p, method="grid")
    p.add_argument("--out", metavar="DIR", help="write results (Parquet, DuckDB) and manifest here (new or empty)")
    p.add_argument("--force", action="store_true", help="replace --out if it holds a previous run")
    schedule_args(p)
    output_args(p)
    p.set_defaults(func=_run_sweep)


def _run_sweep(args) -> int:
    from contextlib import nullcontext

    from factmem.evaluation.simulate import prepare
    from factmem.tuning.runs import manifest, run_folder, write_run
    from factmem.tuning.sweep import sweep
    from factmem.tuning.tune import base_params

    say = Output(args)
    search, objective, holdout, compute = settings_of(args)
    if search.space is None:
        raise InputError("nothing to sweep: give --param NAME=VALUES or --space FILE")
    # the output folder is checked (and marked INCOMPLETE) before the sweep, not after it
    with run_folder(args.out, force=args.force) if args.out else nullcontext(None) as out:
        log = load_log(args.log)
        prepared = prepare(log)
        res = sweep(prepared, search.space, base=base_params(prepared), schedule=schedule_of(args, log=log),
                    objective=objective, holdout=holdout, search=search, compute=compute)
        part = "all" if holdout.mode == "subjects" else "train"
        col = objective.column(part)
        # `threshold` is stored as the two thresholds it sets (they are equal)
        swept = [("archive_threshold" if c == "threshold" else c) for c in search.space]
        cols = ["run_id", "baseline", "seed_defaults", *[c for c in swept if c in res.table.columns], col]
        top = res.table.sort_values(col, ascending=objective.lower_is_better)[cols].head(10)
        say.say(top.rename(columns={"archive_threshold": "threshold"} if "threshold" in search.space else {})
                .to_string(index=False))
        if len(res.reference_table):  # the same points under the reference policies, never candidates
            refs = res.reference_table
            shown = [c for c in ("reference", col, col.replace("utility@", "recall@")) if c in refs.columns]
            say.say("\nreference policies (same points; empty: nothing in the context; keep-everything: no decay, "
                    "thresholds at 1e-6):\n" + refs[shown].to_string(index=False))
        if out is not None:
            write_run(out, manifest("sweep", dataset={"path": str(prepared.dataset.path), "sha256": prepared.sha256},
                                    schedule=res.schedule.to_dict(), split_at=res.split_at,
                                    objective=objective.to_dict(), holdout=holdout.to_dict(),
                                    search=search.to_dict()),
                      {"sweep": res.table, "references": res.reference_table}, finish=False)
    final = Path(args.out) if out is not None else None  # (written beside it, renamed into place)
    if final is not None:
        say.say(f"\nwrote {final}/")
    return say.result({"objective": col, "candidates": len(res.table), "top": top}, files_in(final))


def add_cardinality(sub) -> None:
    p = sub.add_parser("cardinality", help="choose single- or multi-valued per predicate by cost; --compare the policies",
                       description="Per predicate, the value changes whose old value was still valid (false "
                                   "supersessions if single-valued) and those whose old value had ended (missed if "
                                   "multi-valued), from truth intervals or, without truth, from re-mentions of the old value, "
                                   "and the cheaper choice. --compare scores the seed rule, the best static choice "
                                   "with hindsight and the suggestions (chosen on held-out folds of subjects), each "
                                   "by replaying the log through the memory with its registry and counting the "
                                   "supersessions against the truth; the change counting is shown beside it as a "
                                   "first pass, with its gap.")
    p.add_argument("dir", metavar="DIR", help="dataset folder")
    p.add_argument("--rule", choices=("handover", "inclusive"), default="handover",
                   help="an old value ending in the new one's start period was handed over (default) or overlapped")
    p.add_argument("--w-false", type=float, default=1.0, help="cost of a false supersession (default 1)")
    p.add_argument("--w-missed", type=float, default=1.0, help="cost of a missed supersession (default 1)")
    p.add_argument("--window-days", type=float, metavar="DAYS",
                   help="a re-mention this long after the new value's first counts as evidence it was still valid "
                        "(default: one bound period of an imported log, else 30)")
    p.add_argument("--compare", action="store_true", help="score the policies on held-out subjects")
    p.add_argument("--folds", type=int, default=3, help="folds of subjects for --compare (default 3)")
    p.add_argument("--seed", type=int, default=0, help="seed of the folds and the bootstrap (default 0)")
    p.add_argument("--threshold", type=float, default=0.2,
                   help="overlap share of the previous suggestion, shown for reference by --compare (default 0.2)")
    output_args(p)
    p.set_defaults(func=_run_cardinality)


def _run_cardinality(args) -> int:
    from factmem.data.logs import load
    from factmem.evaluation.cardinality_choice import Weights, multi_valued_of, suggest_cardinality
    from factmem.evaluation.cardinality_policy import compare_policies

    ds = load(load_log(args.dir))
    weights = Weights(args.w_false, args.w_missed)
    table = suggest_cardinality(ds, rule=args.rule, weights=weights, window_days=args.window_days)
    shown = table[["predicate", "source", "changes", "single_false", "multi_missed", "cost_single", "cost_multi",
                   "choice", "uncertain"]].rename(columns={"single_false": "false if single",
                                                          "multi_missed": "missed if multi"})
    shown.insert(5, "still valid % [95%]", [f"{100 * v:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]" for v, lo, hi in
                                            zip(table["still_valid_share"], table["still_valid_low"],
                                                table["still_valid_high"])])
    if "informative" in table.columns:
        shown.insert(5, "informative", table["informative"])
    say = Output(args)
    say.say(shown.to_string(index=False))
    say.say(f"\nsuggested multi_valued_predicates = {sorted(multi_valued_of(table))}")
    cmp = None
    if args.compare:
        cmp = compare_policies(ds, rule=args.rule, weights=weights, folds=args.folds, seed=args.seed,
                               window_days=args.window_days, threshold=args.threshold)
        say.say(f"\n{cmp}")
    return say.result({"multi_valued_predicates": sorted(multi_valued_of(table)), "predicates": table,
                       "comparison": cmp})

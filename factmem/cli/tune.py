"""CLI commands of the tuning workflow: ``tune``, ``simulate``, ``sweep``, ``cardinality``.

Each is a thin wrapper over one library call (:func:`factmem.tuning.tune.tune`,
:func:`factmem.evaluation.simulate.simulate`, :func:`factmem.tuning.sweep.sweep`,
:func:`factmem.evaluation.cardinality_choice.suggest_cardinality` and ``compare_policies``).
"""

from __future__ import annotations

import argparse
import tomllib
from pathlib import Path

import pandas as pd

from factmem.errors import InputError


def _schedule_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--consolidate-every", type=float, default=None, metavar="HOURS",
                   help="consolidate (archive what decayed) every HOURS of log time (default 24; 8760, yearly, for "
                        "a log made by import-triples)")
    p.add_argument("--evaluate-every", type=float, default=None, metavar="HOURS",
                   help="score the believed set every HOURS (default 24; 8760 for a log made by import-triples)")


def _schedule(args, abstract_days=None, log=None):
    """The schedule the flags ask for; what they leave out comes from the log's default schedule
    (daily, or yearly for imported temporal facts: :func:`factmem.evaluation.simulate.default_schedule`)."""
    from factmem.evaluation.simulate import YEARLY_HOURS, Schedule

    default = YEARLY_HOURS if _imported(log) else 24.0
    return Schedule(default if args.consolidate_every is None else args.consolidate_every,
                    default if args.evaluate_every is None else args.evaluate_every, abstract_days)


def _imported(log) -> bool:
    """Whether a dataset folder was made by import-triples (its scenario names the importer)."""
    if log is None:
        return False
    scenario = Path(log) / "scenario.toml"
    try:
        data = tomllib.loads(scenario.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False  # the dataset loader reports a bad scenario with its line
    return str(data.get("generator", "")).endswith("importer")


def _search_args(p: argparse.ArgumentParser) -> None:
    """What to sweep, how to split, how to rank, where to run: shared by ``tune`` and ``sweep``."""
    p.add_argument("--space", metavar="FILE", help="TOML of parameter -> list of values (or {low, high, log})")
    p.add_argument("--param", action="append", metavar="NAME=VALUES",
                   help="sweep NAME over comma-separated VALUES, or low:high[:log] with --search random (repeatable)")
    p.add_argument("--search", choices=("grid", "random"), default="grid", help="grid (default) or random search")
    p.add_argument("--n", type=int, default=64, help="parameter sets for random search (default 64)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random search (default 0)")
    p.add_argument("--split", type=float, default=2 / 3, metavar="F",
                   help="the held-out part starts at this fraction of the log's span (default 0.667)")
    p.add_argument("--holdout", metavar="DIR", help="score on this other log (e.g. another seed) instead of a time split")
    p.add_argument("--objective", default="log_loss",
                   help="log_loss (default), brier, rmse_bins, auc, recall, precision, stale, believed, lost")
    p.add_argument("--workers", type=int, default=None, help="worker processes (default: all cores; 0: none)")
    p.add_argument("--dask", metavar="ADDRESS", help="run the sweep on a Dask distributed cluster at ADDRESS")


def _log_arg(p: argparse.ArgumentParser, required: bool = False) -> None:
    p.add_argument("--log", metavar="DIR", required=required,
                   help="dataset folder (log.jsonl, truth.csv, ...)" + ("" if required else "; default: the bundled 'small'"))


def _load_log(path):
    from factmem.tuning.tune import bundled_dataset

    p = Path(path) if path else bundled_dataset()
    if not p.exists():
        raise InputError(f"{p}: no such dataset folder")
    return p


def _executor(args):
    if getattr(args, "dask", None):
        from factmem.tuning.sweep import dask_executor

        return dask_executor(args.dask)
    return None


def _parse_space(args) -> dict:
    """--space FILE.toml and/or --param name=v1,v2 (or name=low:high[:log] with --search random)."""
    from factmem.tuning.sweep import Range

    space: dict = {}
    if args.space:
        try:
            data = tomllib.loads(Path(args.space).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise InputError(f"{args.space}: no such space file") from None
        except tomllib.TOMLDecodeError as exc:
            raise InputError(f"{args.space}: invalid TOML: {exc}") from None
        for name, v in _flatten(data).items():
            if isinstance(v, dict):
                try:
                    space[name] = Range(float(v["low"]), float(v["high"]), bool(v.get("log", False)))
                except KeyError as exc:
                    raise InputError(f"{args.space}: {name} needs 'low' and 'high', missing {exc}") from None
            else:
                space[name] = v if isinstance(v, list) else [v]
    for spec in args.param or []:
        if "=" not in spec:
            raise InputError(f"--param {spec!r}: expected name=v1,v2,... or name=low:high[:log]")
        name, vals = spec.split("=", 1)
        if ":" in vals:
            parts = vals.split(":")
            try:
                space[name] = Range(float(parts[0]), float(parts[1]), len(parts) > 2 and parts[2] == "log")
            except ValueError:
                raise InputError(f"--param {spec!r}: a range is low:high[:log] with numbers") from None
        else:
            space[name] = [_value(x) for x in vals.split(",")]
    return space


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and not ({"low", "high"} & set(v)):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _value(x: str):
    for cast in (int, float):
        try:
            return cast(x)
        except ValueError:
            pass
    return x


def _params_arg(path):
    if not path:
        return None
    from factmem.export import load_params_file

    return load_params_file(path)[0]


# -- tune -----------------------------------------------------------------------------------------------


def _add_tune(sub) -> None:
    p = sub.add_parser(
        "tune", help="sweep, pick by held-out objective, write report, figures and params.toml (the main job)",
        description="Tune decay rates and reinforcement gain on a log: sweep a parameter grid, choose on the "
                    "tuning part, judge against the seed's defaults on held-out data (promotion rule), and write "
                    "results, manifest, figures, report.md and params.toml to --out.")
    _log_arg(p)
    p.add_argument("--out", metavar="DIR", help="output folder, new or empty (default runs/<timestamp>/)")
    p.add_argument("--force", action="store_true", help="replace --out if it holds a previous run")
    _search_args(p)
    p.add_argument("--current", metavar="PARAMS", help="production parameters (params.toml) the recommendation must also beat")
    _schedule_args(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_run_tune)


def _run_tune(args) -> int:
    from factmem.tuning.tune import tune

    space = _parse_space(args) or None
    log = _load_log(args.log)
    res = tune(log, out=args.out, space=space, schedule=_schedule(args, log=log), split=args.split,
               holdout=args.holdout, objective=args.objective, current=_params_arg(args.current),
               search=args.search, n=args.n, seed=args.seed, executor=_executor(args), workers=args.workers,
               progress=not args.quiet, force=args.force)
    t = res.heldout.copy()
    for c in t.columns[1:-1]:
        t[c] = t[c].map(lambda v: f"{v:.4g}")
    t = t.drop(columns="better")
    print(f"\nswept {len(res.sweep.params)} parameter sets in {res.seconds:.0f} s; held-out metrics:\n")
    print(t.to_string(index=False))
    changed = {k: (v, res.recommended.to_flat()[k]) for k, v in __import__("factmem").MemoryParams().to_flat().items()
               if res.recommended.to_flat()[k] != v}
    print("\nrecommended changes: " + (", ".join(f"{k} {a} -> {b}" for k, (a, b) in changed.items()
                                                 if k != "multi_valued_predicates") or "none"))
    print(f"\n{res.decision}")
    for n in res.notes:
        print("note: " + n.replace("`", ""))
    print(f"\nwrote {res.out}/ (report.md, params.toml, figures, results)")
    return 0


# -- simulate -------------------------------------------------------------------------------------------


def _add_simulate(sub) -> None:
    p = sub.add_parser("simulate", help="replay a log through a memory and score it against ground truth",
                       description="Replay a dataset through a FactStore with the given parameters on a schedule "
                                   "(optionally with abstraction passes) and print its scores; --out writes the "
                                   "run (manifest, checkpoints, lost facts, memory.duckdb).")
    _log_arg(p)
    p.add_argument("--params", metavar="FILE", help="parameters file (TOML/JSON; default: seed defaults + the log's "
                                                    "multi-valued predicates)")
    p.add_argument("--out", metavar="DIR", help="write the run folder here (new or empty)")
    p.add_argument("--force", action="store_true", help="replace --out if it holds a previous run")
    _schedule_args(p)
    p.add_argument("--abstract-every", type=float, metavar="DAYS", help="run the abstraction pass every DAYS")
    p.add_argument("--provider", choices=("oracle", "openai", "ollama"), default="oracle",
                   help="abstraction provider (default: the log's ground-truth oracle)")
    p.add_argument("--base-url", help="provider URL (openai, ollama)")
    p.add_argument("--model", help="model name")
    p.add_argument("--cassette", metavar="FILE", help="record/replay provider answers in this JSONL file")
    p.set_defaults(func=_run_simulate)


def _run_simulate(args) -> int:
    from factmem.evaluation.simulate import prepare, simulate
    from factmem.tuning.runs import manifest, run_folder, write_run
    from factmem.tuning.tune import base_params

    log = _load_log(args.log)
    P = prepare(log)
    params = _params_arg(args.params) or base_params(P)
    provider = None
    if args.abstract_every:
        from factmem.abstraction.providers import make_provider

        dataset = str(P.dataset.path) if args.provider == "oracle" else None
        provider = make_provider(args.provider, base_url=args.base_url, model=args.model, cassette=args.cassette,
                                 dataset=dataset)
    schedule = _schedule(args, args.abstract_every, log)
    if not args.out:
        run = simulate(P, params, schedule, provider=provider, model=args.model)
        _print_simulation(run)
        run.store.close()
        return 0
    with run_folder(args.out, force=args.force) as out:
        run = simulate(P, params, schedule, provider=provider, model=args.model, store_path=out / "memory.duckdb")
        try:
            _print_simulation(run)
            write_run(out, manifest("simulate", dataset={"path": str(P.dataset.path), "sha256": P.sha256},
                                    params=params.to_dict(), schedule=run.schedule.to_dict(), summary=run.summary),
                      {"checkpoints": run.checkpoints, "lost": run.evaluation.lost, "passes": run.passes,
                       "cardinality": run.cardinality, "trajectories": run.trajectories,
                       "reliability": run.evaluation.reliability}, finish=False)
        finally:
            run.store.close()
    print(f"\nwrote {out}/")
    return 0


def _print_simulation(run) -> None:
    s = run.summary
    print(pd.Series({k: s[k] for k in ("log_loss", "brier", "auc", "rmse_bins", "precision", "recall", "believed",
                                       "stale", "lost")}).to_string())
    if len(run.passes):
        print("\nabstraction passes:\n" + run.passes.to_string(index=False))


# -- sweep ----------------------------------------------------------------------------------------------


def _add_sweep(sub) -> None:
    p = sub.add_parser("sweep", help="score many parameter sets on a log (grid or random search)",
                       description="Replay a dataset with every parameter set of a space and score each on a "
                                   "tuning part and a held-out part. Parameter sets are evaluated together by the "
                                   "vectorized kernel, in parallel processes or on a Dask cluster.")
    _log_arg(p)
    _search_args(p)
    p.add_argument("--out", metavar="DIR", help="write results (Parquet, DuckDB) and manifest here (new or empty)")
    p.add_argument("--force", action="store_true", help="replace --out if it holds a previous run")
    _schedule_args(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_run_sweep)


def _run_sweep(args) -> int:
    from contextlib import nullcontext

    from factmem.evaluation.simulate import prepare
    from factmem.tuning.runs import manifest, run_folder, write_run
    from factmem.tuning.sweep import OBJECTIVES, sweep
    from factmem.tuning.tune import base_params

    space = _parse_space(args)
    if not space:
        raise InputError("nothing to sweep: give --param NAME=VALUES or --space FILE")
    if args.objective not in OBJECTIVES:
        raise InputError(f"unknown objective {args.objective!r}; objectives: {', '.join(OBJECTIVES)}")
    # the output folder is checked (and marked INCOMPLETE) before the sweep, not after it
    with run_folder(args.out, force=args.force) if args.out else nullcontext(None) as out:
        log = _load_log(args.log)
        P = prepare(log)
        res = sweep(P, space, base=base_params(P), schedule=_schedule(args, log=log), split=args.split,
                    holdout=args.holdout, search=args.search, n=args.n, seed=args.seed, objective=args.objective,
                    executor=_executor(args), workers=args.workers, progress=not args.quiet)
        cols = ["run_id", "baseline"] + [c for c in space] + [f"train.{args.objective}", f"test.{args.objective}",
                                                              "test.recall", "test.believed"]
        asc = OBJECTIVES[args.objective]
        print(res.table.sort_values(f"train.{args.objective}", ascending=asc)[cols].head(10).to_string(index=False))
        if out is not None:
            write_run(out, manifest("sweep", dataset={"path": str(P.dataset.path), "sha256": P.sha256},
                                    schedule=res.schedule.to_dict(), split_at=res.split_at, objective=args.objective,
                                    search=args.search, seeds={"search": args.seed}),
                      {"sweep": res.table}, finish=False)
    if out is not None:
        print(f"\nwrote {out}/")
    return 0


# -- cardinality ----------------------------------------------------------------------------------------


def _add_cardinality(sub) -> None:
    p = sub.add_parser("cardinality", help="choose single- or multi-valued per predicate by cost; --compare the policies",
                       description="Per predicate, the value changes whose old value was still valid (false "
                                   "supersessions if single-valued) and those whose old value had ended (missed if "
                                   "multi-valued), from truth intervals or, without truth, from re-mentions of the old value, "
                                   "and the cheaper choice. --compare scores the seed rule, the best static choice "
                                   "with hindsight and the suggestions (chosen on held-out folds of subjects).")
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
    p.set_defaults(func=_run_cardinality)


def _run_cardinality(args) -> int:
    from factmem.data.logs import load
    from factmem.evaluation.cardinality_choice import Weights, compare_policies, multi_valued_of, suggest_cardinality

    ds = load(_load_log(args.dir))
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
    print(shown.to_string(index=False))
    print(f"\nsuggested multi_valued_predicates = {sorted(multi_valued_of(table))}")
    if args.compare:
        cmp = compare_policies(ds, rule=args.rule, weights=weights, folds=args.folds, seed=args.seed,
                               window_days=args.window_days, threshold=args.threshold)
        print(f"\n{cmp}")
    return 0

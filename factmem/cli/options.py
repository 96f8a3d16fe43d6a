"""Options several commands share (dataset, schedule, search, parameters files) and how they map to
library arguments. Parsing that means anything lives in the library (:mod:`factmem.tuning.space`,
:func:`factmem.data.logs.resolve_dataset`); this module only wires argparse to it."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from factmem.core.codes import SEARCH_MODES

__all__ = ["check_out", "budgets_of", "files_in", "schedule_args", "schedule_of", "search_args", "settings_of", "log_arg", "load_log", "executor_of", "space_of", "params_arg"]


def schedule_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--consolidate-every", type=float, default=None, metavar="HOURS",
                   help="consolidate (archive what decayed) every HOURS of log time (default 24; 8760, yearly, for "
                        "a log made by import-triples)")
    p.add_argument("--evaluate-every", type=float, default=None, metavar="HOURS",
                   help="score the believed set every HOURS (default 24; 8760 for a log made by import-triples)")


def schedule_of(args: argparse.Namespace, abstract_days: float | None = None, log: Path | None = None) -> Any:
    """The schedule the flags ask for; what they leave out comes from the log's default schedule
    (daily, or yearly for imported temporal facts: :func:`factmem.evaluation.simulate.default_schedule`)."""
    from factmem.evaluation.simulate import YEARLY_HOURS, Schedule

    default = YEARLY_HOURS if _imported(log) else 24.0
    return Schedule(default if args.consolidate_every is None else args.consolidate_every,
                    default if args.evaluate_every is None else args.evaluate_every, abstract_days)


def _imported(log: Path | None) -> bool:
    """Whether a dataset folder was made by import-triples (its scenario names the importer)."""
    import tomllib

    if log is None:
        return False
    scenario = Path(log) / "scenario.toml"
    try:
        data = tomllib.loads(scenario.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False  # the dataset loader reports a bad scenario with its line
    return str(data.get("generator", "")).endswith("importer")


def search_args(p: argparse.ArgumentParser, *, method: str = "random") -> None:
    """What to try, what "better" means, how to hold out, where to run: shared by ``tune`` and ``sweep``."""
    g = p.add_argument_group("search")
    g.add_argument("--space", metavar="FILE", help="TOML of parameter -> list of values (or {low, high, log})")
    g.add_argument("--param", action="append", metavar="NAME=VALUES",
                   help="search NAME over comma-separated VALUES, or low:high[:log] (a range; random search) "
                        "(repeatable; `threshold` sets archive_threshold and retrieval_threshold together)")
    if method == "grid":  # sweep: points drawn without looking at scores
        g.add_argument("--search", choices=("grid", "random"), default=method, help=f"grid or random (default {method})")
        g.add_argument("--n", type=int, default=256, help="random draws (default 256)")
    else:
        from factmem.tuning.settings import Search

        default = Search()
        g.add_argument("--sampler", "--search", dest="search", choices=SEARCH_MODES, default=default.method,
                       help=f"Optuna sampler: tpe, cmaes, gp (needs torch), random, or grid (every combination of "
                            f"the listed values) (default {default.method})")
        g.add_argument("--n", type=int, default=None,
                       help=f"candidates each study proposes (holding out by people, one study per fold's people; "
                            f"default {default.n}; with --resume: how many more)")
        g.add_argument("--startup", type=int, default=default.startup,
                       help=f"tpe, cmaes, gp: random draws shared by every study before they adapt "
                            f"(default {default.startup})")
        g.add_argument("--no-corners", dest="corners", action="store_false",
                       help="tpe, cmaes, gp: a shared start of random draws only (default: it opens with the "
                            "space's corners — one kind shown and never decaying, the others starting below the "
                            "threshold; everything kept; the centre —, scored beside the studies: any may choose "
                            "one, none is told them)")
        g.add_argument("--local", type=float, default=default.local, metavar="SHARE",
                       help=f"tpe, cmaes, gp: the share of each study's own candidates, every round, drawn around "
                            f"that study's own best so far (small steps, as a local refinement) instead of by the "
                            f"sampler; 0: none (default {default.local:g})")
    g.add_argument("--seed", type=int, default=0, help="seed of the search, folds and bootstrap (default 0)")
    o = p.add_argument_group("objective")
    o.add_argument("--objective", default="utility",
                   help="utility (default: utility@k of the budgeted context), recall_at_k, precision_at_k, "
                        "stale_at_k; or whole-memory metrics log_loss, brier, rmse_bins, auc, recall, precision, "
                        "stale, believed, lost (these need --split or --holdout)")
    o.add_argument("--budget", default="20", metavar="K[,K...]",
                   help="context budget(s) k: facts per person in the prompt (default 20; e.g. 5,10,20,50)")
    cost_arg(o)
    from factmem.evaluation.context_scores import NEEDED_MODES

    o.add_argument("--needed", choices=NEEDED_MODES, default=None,
                   help="what a context should hold: facts true and relevant then (truth; default when the log "
                        "has truth), or a no-truth proxy (for real logs; factmem.evaluation.proxies): the facts the "
                        "next session mentions (next-session), those the next 3 sessions mention (next-3-sessions), "
                        "those mentioned again later, charging the ones never mentioned again (hindsight) or only the "
                        "contradicted ones (later-mention), or by kind — lasting facts while the log's latest word, "
                        "episodes while one of the 2 previous sessions mentions them (kind-aware: the default for a "
                        "production file, the best-agreeing on logs with truth)")
    o.add_argument("--max-points", type=int, default=None, metavar="N",
                   help="sample at most N session starts per person (seeded; default: all)")
    h = p.add_argument_group("held-out judgement")
    h.add_argument("--folds", type=int, default=3, help="k-fold over subjects (the default judgement; default 3)")
    h.add_argument("--split", type=float, default=None, metavar="F",
                   help="hold out by time instead: judge after this fraction of the log's span (e.g. 0.667)")
    h.add_argument("--holdout", metavar="DIR", help="hold out another log instead (e.g. another seed)")
    h.add_argument("--bootstrap", type=int, default=1000,
                   help="bootstrap resamples of groups of people (default 1000)")
    h.add_argument("--group-by", default=None, metavar="COLUMN|FILE.csv",
                   help="what makes people one group for folds and resamples: a mention column (components of "
                        "people sharing a value), or a CSV file subject,group (default: session_id — people who "
                        "share sessions are one group)")
    h.add_argument("--min-groups", type=int, default=10, metavar="N",
                   help="held-out groups of people needed to promote (default 10; fewer: too few to decide)")
    c = p.add_argument_group("compute")
    c.add_argument("--workers", type=int, default=None, help="worker processes (default: all cores; 0: none)")
    c.add_argument("--dask", metavar="ADDRESS", help="run the sweep on a Dask distributed cluster at ADDRESS")


def settings_of(args: argparse.Namespace) -> tuple[Any, Any, Any, Any]:
    """(Search, Objective, Holdout, Compute) from the shared options."""
    from factmem.tuning.settings import Compute, Holdout, Objective, Search

    budgets = budgets_of(args.budget)
    if args.holdout and args.split is not None:
        from factmem.errors import InputError

        raise InputError("give either --holdout DIR or --split F, not both")
    mode: Any = "log" if args.holdout else ("time" if args.split is not None else "subjects")
    space = space_of(args) or None
    search = Search(space=space, method=args.search, n=args.n if args.n is not None else Search().n,
                    startup=getattr(args, "startup", Search().startup), seed=args.seed,
                    corners=getattr(args, "corners", Search().corners), local=getattr(args, "local", Search().local))
    objective = Objective(name=args.objective, budgets=budgets, costs=args.cost, needed=args.needed,
                          max_points_per_subject=args.max_points)
    holdout = Holdout(mode=mode, folds=args.folds, split=args.split if args.split is not None else 2 / 3,
                      log=args.holdout, bootstrap=args.bootstrap, seed=args.seed,
                      group_by=args.group_by, min_groups=args.min_groups)
    quiet = getattr(args, "quiet", False) or getattr(args, "json", False)
    compute = Compute(workers=args.workers, executor=executor_of(args), progress=not quiet)
    return search, objective, holdout, compute


def cost_arg(g: Any) -> None:
    g.add_argument("--cost", default="stale=1,expired=1,false=1,unneeded=0", metavar="KIND=W[,...]",
                   help="cost of each kind of context fact that is not needed, relative to a needed one: stale "
                        "(true before, not now), expired (true, its relevance over), false (never true), unneeded "
                        "(true, not needed); kinds left out keep the defaults stale=1,expired=1,false=1,unneeded=0")


def log_arg(p: argparse.ArgumentParser, required: bool = False) -> None:
    p.add_argument("--log", metavar="DIR", required=required,
                   help="dataset folder (log.jsonl, truth.csv, ...)" + ("" if required else "; default: the bundled 'small'"))


def load_log(path: str | None) -> Path:
    """The dataset folder of ``--log`` (default: the bundled ``small``)."""
    from factmem.data.logs import resolve_dataset

    return resolve_dataset(path)


def executor_of(args: argparse.Namespace) -> Any:
    if getattr(args, "dask", None):
        from factmem.tuning.sweep import dask_executor

        return dask_executor(args.dask)
    return None


def space_of(args: argparse.Namespace) -> dict[str, Any]:
    """The search space of ``--space FILE`` and ``--param NAME=...`` (see :mod:`factmem.tuning.space`)."""
    from factmem.tuning.space import parse_space

    return parse_space(args.space, args.param or ())


def params_arg(path: str | None) -> Any:
    if not path:
        return None
    from factmem.export import load_params_file

    return load_params_file(path)[0]


def files_in(folder: Path | str | None) -> list[str]:
    """Every file below ``folder``, sorted (what ``--json`` lists as written); empty for None."""
    if folder is None:
        return []
    root = Path(folder)
    return sorted(str(f) for f in root.rglob("*") if f.is_file()) if root.is_dir() else []


def budgets_of(text: str) -> tuple[int, ...]:
    """``--budget K[,K...]`` as integers."""
    from factmem.errors import InputError

    try:
        return tuple(int(x) for x in str(text).split(","))
    except ValueError:
        raise InputError(f"--budget {text!r}: expected K or K1,K2,... (integers)") from None


def check_out(out: Path, force: bool) -> None:
    """What ``--out`` means in every command: a new or empty folder, or — with ``--force`` — one whose
    files the command replaces. A file in its place, or a folder with something in it and no
    ``--force``, is refused before any work (:class:`~factmem.errors.InputError`)."""
    from factmem.errors import InputError

    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out}: exists and is not a folder")
    if not force and out.is_dir() and any(out.iterdir()):
        raise InputError(f"--out {out}: the folder is not empty; choose a new or empty folder, or pass --force to "
                         "replace what is there")

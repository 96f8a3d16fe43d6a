"""Options several commands share (dataset, schedule, search, parameters files) and how they map to
library arguments. Parsing that means anything lives in the library (:mod:`factmem.tuning.space`,
:func:`factmem.data.logs.resolve_dataset`); this module only wires argparse to it."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

__all__ = ["schedule_args", "schedule_of", "search_args", "log_arg", "load_log", "executor_of", "space_of", "params_arg"]


def schedule_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--consolidate-every", type=float, default=24.0, metavar="HOURS",
                   help="consolidate (archive what decayed) every HOURS of log time (default 24)")
    p.add_argument("--evaluate-every", type=float, default=24.0, metavar="HOURS",
                   help="score the believed set every HOURS (default 24)")


def schedule_of(args: argparse.Namespace, abstract_days: float | None = None) -> Any:
    from factmem.evaluation.simulate import Schedule

    return Schedule(args.consolidate_every, args.evaluate_every, abstract_days)


def search_args(p: argparse.ArgumentParser) -> None:
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

"""CLI command ``runs``: ``runs list [DIR]`` and ``runs compare RUN...`` — thin wrappers over
:func:`factmem.tuning.catalog.list_runs` and :func:`~factmem.tuning.catalog.compare_runs`."""

from __future__ import annotations

import json

from factmem.cli.output import Output, output_args

__all__ = ["add_runs"]


def add_runs(sub) -> None:
    p = sub.add_parser("runs", help="the runs you have made: list them, compare tune runs side by side",
                       description="List the run folders under a directory (default runs/), or compare tune runs: "
                                   "decision, budget, objective, held-out utility with its interval, the parameters "
                                   "changed from the baseline, and the log's fingerprint.")
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)
    ls = verbs.add_parser("list", help="the run folders under DIR, newest first")
    ls.add_argument("dir", nargs="?", default="runs", metavar="DIR", help="folder of runs (default runs/)")
    output_args(ls)
    ls.set_defaults(func=_run_list, command="runs list")
    cmp = verbs.add_parser("compare", help="tune runs side by side")
    cmp.add_argument("runs", nargs="+", metavar="RUN", help="tune run folders")
    output_args(cmp)
    cmp.set_defaults(func=_run_compare, command="runs compare")


def _show(args, table) -> int:
    say = Output(args)
    if table.empty:
        say.say("no runs")
    else:
        say.say(table.to_string(index=False, na_rep="—", float_format=lambda v: f"{v:.4g}"))
    return say.result({"runs": json.loads(table.to_json(orient="records"))})


def _run_list(args) -> int:
    from factmem.tuning.catalog import list_runs

    return _show(args, list_runs(args.dir))


def _run_compare(args) -> int:
    from factmem.tuning.catalog import compare_runs

    return _show(args, compare_runs(args.runs))

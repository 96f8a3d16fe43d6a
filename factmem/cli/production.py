"""CLI command ``whatif``: what new parameters would have done to a production memory.

A thin wrapper over :func:`factmem.production.whatif.whatif`: ``factmem whatif PROD.sqlite --params
NEW.toml --out DIR`` writes ``report.md``, figures, Parquet tables and a manifest to ``DIR``, then
prints a few lines (reproduction, what changes at the compared time, utility@k with its interval).
Bad input (a file not in the seed's schema, an empty evidence table, evidence pointing at missing
facts, a params file that fails validation, a bad option) exits with status 2 and one line naming
the problem; nothing is written then.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from factmem.cli.options import budgets_of, check_out, files_in
from factmem.cli.output import Output, output_args

__all__ = ["add_whatif", "summary"]


def add_whatif(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "whatif", help="what new parameters would have done to a production memory (SQLite, the seed's schema)",
        description="Rebuild the mention log from a production memory's evidence, check that a replay under its "
                    "current parameters reproduces its facts, replay it under the new parameters, and compare: "
                    "facts forgotten or kept, supersessions, believed-set size over time, and the budgeted context "
                    "metrics at every session start (needed = the facts the session mentions) with a bootstrap "
                    "interval over people. Writes report.md, figures, Parquet tables and a manifest to --out.")
    p.add_argument("production", metavar="PROD.sqlite", help="the production memory (SQLite in the seed's schema)")
    p.add_argument("--params", metavar="NEW.toml", required=True, help="the parameters to try (TOML or JSON)")
    p.add_argument("--current", metavar="CURRENT.toml",
                   help="the parameters production runs now, when the file does not record them (factmem_meta); "
                        "default: the file's, else the seed's defaults")
    p.add_argument("--budget", default="20", metavar="K[,K...]",
                   help="context budget(s) k: facts per person in the prompt (default 20; the first one is used for "
                        "the per-person tables)")
    p.add_argument("--at", metavar="T", help="the time compared: Unix seconds or ISO-8601 (default: the last observation)")
    p.add_argument("--needed", choices=("next-session",), default="next-session",
                   help="what a context should hold: the facts the next session mentions (production has no truth)")
    p.add_argument("--consolidate-every", type=float, default=24.0, metavar="HOURS",
                   help="the replay consolidates every HOURS at multiples since the epoch (default 24: midnight UTC)")
    p.add_argument("--cost", default="stale=1,unneeded=0", metavar="KIND=W[,...]",
                   help="cost of a context fact the next session does not need, relative to a needed one: stale "
                        "(it mentions another value) or unneeded (default stale=1,unneeded=0)")
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples of people (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap and of point sampling (default 0)")
    p.add_argument("--max-points", type=int, default=None, metavar="N",
                   help="sample at most N session starts per person (seeded; default: all)")
    p.add_argument("--top", type=int, default=10, help="most affected people listed in the report (default 10)")
    p.add_argument("--out", metavar="DIR", required=True, help="output folder, new or empty (created)")
    p.add_argument("--force", action="store_true", help="write into --out even if it holds files (replacing them)")
    p.add_argument("--no-figures", action="store_true", help="skip the PNG figures")
    output_args(p)
    p.set_defaults(func=_run_whatif)


def _run_whatif(args: argparse.Namespace) -> int:
    from factmem.core.timeutil import parse_time
    from factmem.production.whatif import whatif

    budgets = budgets_of(args.budget)
    out = Path(args.out)
    check_out(out, args.force)
    at = parse_time(args.at, name="--at") if args.at is not None else None
    result = whatif(args.production, args.params, current=args.current, budgets=budgets, at=at, needed=args.needed,
                    consolidate_every_hours=args.consolidate_every, costs=args.cost,
                    bootstrap=args.bootstrap, seed=args.seed, max_points_per_subject=args.max_points, top=args.top,
                    out=out, figures=not args.no_figures)
    say = Output(args)
    say.say(summary(result))
    return say.result(result, files_in(out))


def _fmt(v: float) -> str:
    return "n/a" if not math.isfinite(v) else f"{v:.4g}"


def summary(result) -> str:
    """The few lines printed after a what-if."""
    s, rep = result.summary, result.reproduction
    k = result.settings.budgets[0]
    util = result.comparison("utility", k)
    interval = (f"[{util['low']:+.3g}, {util['high']:+.3g}]" if math.isfinite(util["low"]) and
                math.isfinite(util["high"]) else "no interval")
    lines = [
        f"what-if on {result.production['path']} ({result.production['counts']['observations']:,} observations, "
        f"{s['subjects']:,} people) in {result.seconds:.1f} s",
        f"current parameters: {result.current.source}; reproduced {rep.reproduced:,} of {rep.checked:,} production facts"
        + (f" ({rep.failed:,} not: {', '.join(f'{c} {n}' for c, n in rep.by_cause.items())})" if rep.failed else ""),
        f"at the compared time: {s['forgotten']:,} facts forgotten, {s['kept']:,} kept, "
        f"{s['superseded_differently']:,} superseded differently; believed {s['believed_current']:,} -> "
        f"{s['believed_new']:,}; {s['subjects_changed']:,} of {s['subjects']:,} people affected",
        f"utility@{k} (next session, {util['points']:,.0f} session starts): {_fmt(util['current'])} -> "
        f"{_fmt(util['new'])}, difference {util['difference']:+.3g} {interval} (95%, bootstrap over people)",
        f"wrote {result.out}/ (report.md, figures, tables, manifest.json)",
    ]
    return "\n".join(lines)

"""CLI command ``whatif``: what new parameters would have done to a production memory.

A thin wrapper over :func:`factmem.production.whatif.whatif`: ``factmem whatif PROD.sqlite --params
NEW.toml --out DIR`` writes ``report.md``, figures, Parquet tables and a manifest to ``DIR``, then
prints a few lines (reproduction, what changes at the compared time, utility@k with its interval).
Bad input (a file not in the seed's schema, an empty evidence table, evidence pointing at missing
facts, a params file that fails validation, a bad option) exits with status 2 and one line naming
the problem; nothing is written then. A file that records no parameters (no ``factmem_meta``) needs
``--current FILE`` or ``--current seed`` (exit 2 without). When the current parameters' replay does not
rebuild more than 5% of the file's facts, the run folder is written, the report and the printed lines
start with a warning, and the exit status is 4 (:data:`factmem.production.current.EXIT_NOT_REPRODUCED`).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from factmem.cli.options import budgets_of, check_out, files_in
from factmem.cli.output import Output, output_args

__all__ = ["add_whatif", "summary", "run_tune_production", "tune_summary"]


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
    p.add_argument("--current", metavar="FILE|seed",
                   help="the parameters production runs now, when the file does not record them (factmem_meta): a "
                        "params file, or 'seed' for the seed's defaults said explicitly; required for such a file")
    p.add_argument("--budget", default="20", metavar="K[,K...]",
                   help="context budget(s) k: facts per person in the prompt (default 20; the first one is used for "
                        "the per-person tables)")
    p.add_argument("--at", metavar="T", help="the time compared: Unix seconds or ISO-8601 (default: the last observation)")
    from factmem.evaluation.context_scores import NEEDED_MODES
    from factmem.tuning.agreement import DEFAULT_PROXY

    p.add_argument("--needed", choices=[m for m in NEEDED_MODES if m != "truth"], default=DEFAULT_PROXY,
                   help=f"what a context should hold (production has no truth: a proxy; default {DEFAULT_PROXY}, the "
                        "best-agreeing with the truth on synthetic logs — see docs/design.md)")
    p.add_argument("--consolidate-every", type=float, default=None, metavar="HOURS",
                   help="the replay consolidates every HOURS at multiples since the epoch (default: the period the "
                        "file records in factmem_meta, else 24: midnight UTC)")
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
    from factmem.production.current import EXIT_NOT_REPRODUCED, reproduction_warning
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
    warning = reproduction_warning(result.reproduction, result.current.source)
    return say.result(result, files_in(out), exit_code=EXIT_NOT_REPRODUCED if warning else 0)


def _fmt(v: float) -> str:
    return "n/a" if not math.isfinite(v) else f"{v:.4g}"


def summary(result) -> str:
    """The few lines printed after a what-if."""
    s, rep = result.summary, result.reproduction
    k = result.settings.budgets[0]
    util = result.comparison("utility", k)
    interval = (f"[{util['low']:+.3g}, {util['high']:+.3g}]" if math.isfinite(util["low"]) and
                math.isfinite(util["high"]) else "no interval")
    from factmem.production.current import reproduction_warning
    from factmem.tuning.agreement import agreement_sentence

    warning = reproduction_warning(rep, result.current.source)
    lines = ([warning.replace("**", "")] if warning else []) + [
        f"what-if on {result.production['path']} ({result.production['counts']['observations']:,} observations, "
        f"{s['subjects']:,} people) in {result.seconds:.1f} s",
        f"current parameters: {result.current.source}; reproduced {rep.reproduced:,} of {rep.checked:,} production facts"
        + (f" ({rep.failed:,} not: {', '.join(f'{c} {n}' for c, n in rep.by_cause.items())})" if rep.failed else ""),
        f"at the compared time: {s['forgotten']:,} facts forgotten, {s['kept']:,} kept, "
        f"{s['superseded_differently']:,} superseded differently; believed {s['believed_current']:,} -> "
        f"{s['believed_new']:,}; {s['subjects_changed']:,} of {s['subjects']:,} people affected",
        f"utility@{k} (needed = {result.settings.needed}, {util['points']:,.0f} session starts): {_fmt(util['current'])} -> "
        f"{_fmt(util['new'])}, difference {util['difference']:+.3g} {interval} (95%, bootstrap over people)",
        agreement_sentence(result.settings.needed),
        f"wrote {result.out}/ (report.md, figures, tables, manifest.json)",
    ]
    return "\n".join(lines)


def run_tune_production(args: argparse.Namespace) -> int:
    """``factmem tune --log PROD.sqlite``: :func:`factmem.production.tune.tune_production` with the tune
    command's options (those that need truth or another log are refused)."""
    from factmem.cli.options import settings_of
    from factmem.errors import InputError
    from factmem.production.tune import MAX_SEARCH_OBSERVATIONS, MAX_SEARCH_SUBJECTS, tune_production

    for flag, given in (("--split", args.split is not None), ("--holdout", bool(args.holdout)),
                        ("--start", bool(args.start)), ("--evaluate-every", args.evaluate_every is not None),
                        ("--objective", args.objective != "utility")):
        if given:
            raise InputError(f"{flag} does not apply to a production file (tune --log {args.log}): it is tuned on "
                             "utility@k with a no-truth proxy, held out over folds of people")
    if args.needed == "truth":
        raise InputError(f"--needed truth: {args.log} is a production file, it has no truth; choose a proxy")
    search, objective, holdout, compute = settings_of(args)
    result = tune_production(args.log, current=args.current, needed=args.needed, out=args.out, force=args.force,
                             search=search, budgets=objective.budgets, costs=objective.costs,
                             folds=holdout.folds, bootstrap=holdout.bootstrap, seed=holdout.seed,
                             consolidate_every_hours=args.consolidate_every,
                             max_points_per_subject=objective.max_points_per_subject,
                             max_search_subjects=MAX_SEARCH_SUBJECTS if args.max_search_people is None else args.max_search_people,
                             max_search_observations=(MAX_SEARCH_OBSERVATIONS if args.max_search_observations is None
                                                      else args.max_search_observations),
                             compute=compute)
    say = Output(args)
    say.say(tune_summary(result))
    from factmem.cli.output import EXIT_NOT_PROMOTED

    code = result.exit_status or (EXIT_NOT_PROMOTED if args.fail_if_not_promoted and not result.promoted else 0)
    return say.result(result.manifest_extra(), files_in(result.out), exit_code=code,
                      decision={"promoted": result.promoted, "budget": result.tune.primary.budget,
                                "text": result.decision})


def tune_summary(result) -> str:
    """The lines printed after ``tune --log PROD.sqlite``: warning first, the decision, the proxy's
    measured agreement, what was sampled, and the next commands last."""
    from factmem.production.tune import agreement_sentence

    rep = result.reproduction
    s = result.sample
    lines = [result.warning.replace("**", "")] if result.warning else []
    lines += [f"tune on {result.production['path']} ({result.production['counts']['observations']:,} observations, "
              f"{s['subjects']:,} people) in {result.seconds:.0f} s",
              f"current parameters: {result.current.source}; reproduced {rep.reproduced:,} of {rep.checked:,} "
              "production facts",
              agreement_sentence(result.needed)]
    if s["searched"] < s["subjects"]:
        lines.append(f"sampled: the search ran on {s['searched']:,} of {s['subjects']:,} people "
                     f"({s['searched_observations']:,} of {s['observations']:,} observations; seed {s['seed']}); "
                     "judged on all")
    if result.flat:
        lines.append("this log cannot rank the candidates: nothing promoted")
    lines.append(result.decision)
    lines += [f"wrote {result.out}/ (report.md, params.toml, figures, tables, manifest.json)", "next:"]
    lines += [f"  {c}" for c in result.next_commands()]
    return "\n".join(lines)

"""CLI command ``fit``: estimate decay from a dataset and write the fit's folder.

A thin wrapper over :func:`factmem.fitting.fit.fit` and :meth:`~factmem.fitting.fit.FitResult.write`:
``factmem fit --log DIR --out DIR`` writes ``estimates.csv``, ``predicate_rates.csv``,
``fallbacks.csv``, ``silent_curves.csv``, ``params.toml``, ``report.md`` and the figures, then prints
a short summary (the per-kind parameters written, and the predicates given their own decay rate).
Bad input (no such folder, an empty log, ``--source truth`` without truth, too few observations, an
invalid option) exits with status 2 and one line naming the problem; nothing is written then.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from factmem.cli.options import check_out, files_in, load_log, log_arg
from factmem.cli.output import Output, output_args
from factmem.errors import InputError

__all__ = ["add_fit"]


def add_fit(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "fit", help="estimate decay rates from a log by maximum likelihood, per kind and per predicate, with intervals",
        description="Fit how fast facts go stale to a dataset: change rates and relevance horizons from the truth, "
                    "the seed model's decay rate and initial confidence (per kind, and per predicate where the "
                    "95% interval tells the predicate apart from its kind), and a two-state silence model from the "
                    "log alone. Writes estimates.csv, predicate_rates.csv, params.toml (ready for "
                    "`factmem export`), report.md and figures to --out.")
    log_arg(p)
    p.add_argument("--out", metavar="DIR", required=True, help="output folder, new or empty (created)")
    p.add_argument("--force", action="store_true", help="write into --out even if it holds files (replacing them)")
    p.add_argument("--source", choices=("auto", "truth", "log"), default="auto",
                   help="truth, log, or auto (default: both when the dataset has truth; params from truth)")
    p.add_argument("--min-observations", type=int, default=50, metavar="N",
                   help="observations (lifetimes, silent spells) a kind or predicate needs for its own estimate; "
                        "below, a predicate uses its kind's (default 50)")
    p.add_argument("--bootstrap", type=int, default=100, metavar="N",
                   help="bootstrap resamples of subjects for the 95%% intervals (default 100; 0: no intervals, "
                        "and then no per-predicate rates)")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap (default 0)")
    p.add_argument("--base", metavar="PARAMS",
                   help="params file the fitted values replace theirs in (default: the seed's defaults)")
    p.add_argument("--created-at", metavar="ISO", help="timestamp written into params.toml (for byte-identical reruns)")
    p.add_argument("--no-figures", action="store_true", help="skip the PNG figures")
    output_args(p)
    p.set_defaults(func=_run_fit)


def _run_fit(args: argparse.Namespace) -> int:
    from factmem.fitting.fit import fit

    log, out = load_log(args.log), Path(args.out)
    if not log.is_dir():
        raise InputError(f"--log {log}: not a dataset folder")
    check_out(out, args.force)
    base = None
    if args.base:
        from factmem.export import load_params_file

        base = load_params_file(args.base)[0]
    say = Output(args)
    say.status(f"fitting {log} ({args.bootstrap} bootstrap resamples; about half a minute on the bundled small)")
    result = fit(log, source=args.source, min_observations=args.min_observations, bootstrap=args.bootstrap,
                 seed=args.seed, base=base)
    say.status(f"fitted in {result.seconds:.1f} s; writing {out}/")
    result.write(out, created_at=args.created_at, figures=not args.no_figures)
    say.say(summary(result, out))
    return say.result(result, files_in(out))


def _num(x: float, digits: int = 3) -> str:
    if not math.isfinite(x):
        return "∞" if x == math.inf else "–"
    return f"{x:.{digits}g}"


def _interval(low: float, high: float) -> str:
    return f"[{_num(low)}, {_num(high)}]" if math.isfinite(low) and math.isfinite(high) else ""


def summary(result, out: Path) -> str:
    """The few lines printed after a fit: per kind the decay rate and initial confidence written to
    params.toml (with the 95% interval when fitted), then the predicates with their own rate."""
    import pandas as pd

    from factmem.core.codes import KINDS

    e, params, src = result.estimates, result.params, result.sources[0]
    rows = []
    for kind in KINDS:
        sel = e[(e["scope"] == "kind") & (e["name"] == kind) & (e["quantity"] == "seed_lambda") & (e["source"] == src)]
        rate = params.decay_rate[kind]
        fitted = len(sel) and math.isclose(float(sel["estimate"].iloc[0]), rate)
        rows.append({
            "kind": kind,
            "decay_rate /day": _num(rate, 4),
            "95%": _interval(float(sel["low"].iloc[0]), float(sel["high"].iloc[0])) if fitted else "",
            "half-life d": _num(math.log(2) / rate if rate > 0 else math.inf),
            "initial_confidence": _num(params.initial_confidence[kind]),
            "from": f"fit ({src})" if fitted else "base",
        })
    lines = [f"fitted {result.dataset.get('path') or 'dataset'} in {result.seconds:.1f} s "
             f"(sources: {', '.join(result.sources)}; {result.settings['bootstrap']} bootstrap resamples)", "",
             pd.DataFrame(rows).to_string(index=False), ""]
    own = result.predicate_rates[result.predicate_rates["exported"]] if len(result.predicate_rates) else None
    if own is not None and len(own):
        lines.append(f"{len(own)} of {len(result.predicate_rates)} predicates get their own decay rate "
                     "(95% interval excludes their kind's):")
        shown = pd.DataFrame({
            "predicate": own["predicate"], "kind": own["kind"], "decay_rate /day": own["estimate"].map(lambda v: _num(v, 4)),
            "95%": [_interval(lo, hi) for lo, hi in zip(own["low"], own["high"])],
            "kind's": own["kind_rate"].map(lambda v: _num(v, 4)),
        })
        lines.append(shown.to_string(index=False))
    else:
        lines.append("no predicate gets its own decay rate (none has an interval excluding its kind's rate)")
    unidentified = [n for n in result.notes if n.startswith("not identified")]
    if unidentified:
        lines += ["", f"{len(unidentified)} estimates not identified (at an optimisation bound, or underflowing); "
                  "they fall back as stated:", *(f"  {n}" for n in unidentified)]
    lines += ["", f"wrote {out}/ (report.md, estimates.csv, predicate_rates.csv, params.toml, figures)"]
    return "\n".join(lines)

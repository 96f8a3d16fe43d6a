"""CLI commands for datasets: ``generate`` (a synthetic log, :func:`factmem.data.generate.generate`) and
``import-triples`` (real time-stamped facts, :func:`factmem.data.importer.import_triples`)."""

from __future__ import annotations

import argparse
import sys
import time

from factmem.cli.options import files_in
from factmem.cli.output import Output, output_args
from factmem.errors import InputError

__all__ = ["add_generate", "add_import_triples", "add_import_log"]


def add_generate(sub: argparse._SubParsersAction) -> None:
    from factmem.data.presets import PRESETS

    presets = "\n".join(f"  {name:15s} {desc}" for name, desc in PRESETS.items())
    p = sub.add_parser(
        "generate",
        help="generate a synthetic conversation log with ground truth",
        description="Generate a synthetic conversation-log dataset (log.jsonl, truth.csv, generalizations.csv, "
        "scenario.toml) from a preset or a scenario file. The same scenario and seed write the same bytes.",
        epilog=f"presets:\n{presets}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument("--preset", default=None, help="preset name (default: small)")
    src.add_argument("--scenario", default=None, metavar="FILE", help="scenario TOML file (e.g. a dataset's scenario.toml)")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: the scenario's)")
    p.add_argument("--personas", type=int, default=None, metavar="N",
                   help="number of personas (default: the scenario's; recorded in the written scenario.toml)")
    p.add_argument("--out", required=False, metavar="DIR", help="output folder (created; dataset files replaced)")
    p.add_argument("--list-presets", action="store_true", help="list the presets and exit")
    output_args(p)
    p.set_defaults(func=_run_generate)


def _run_generate(args: argparse.Namespace) -> int:
    from factmem.data.generate import generate, write
    from factmem.data.presets import PRESETS

    say = Output(args)
    if args.list_presets:
        for name, desc in PRESETS.items():
            say.say(f"{name:15s} {desc}")
        return say.result({"presets": dict(PRESETS)})
    if not args.out:
        raise InputError("--out DIR is required")
    t0 = time.perf_counter()
    if args.scenario:
        from factmem.data.scenario import Scenario

        spec: Scenario | str = Scenario.load(args.scenario)
    else:
        spec = args.preset or "small"
    ds = generate(spec, seed=args.seed, personas=args.personas)
    out = write(ds, args.out)
    info = ds.to_dict()
    say.say(
        f"wrote {out}: {info['mentions']} mentions in {info['messages']} messages, {info['sessions']} sessions, "
        f"{info['subjects']} subjects, {info['truth_rows']} truth rows, {info['generalizations']} generalizations "
        f"({time.perf_counter() - t0:.1f}s); sha256 {info['sha256'][:16]}"
    )
    return say.result(info, files_in(out))


def add_import_triples(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "import-triples",
        help="import a temporal-fact TSV (subject predicate object start end) as a dataset",
        description="Import real time-stamped facts as a dataset folder: truth with validity intervals, and a log "
        "with a mention at each fact's start plus optional repeated mentions inside its interval. Bounds may be "
        "years (1987), dates (1987-05-03), dates with unknown digits (1952-##-##), or unknown/open (None, empty, "
        "####-##-##). Skipped rows are reported with their count and first examples.",
    )
    p.add_argument("file", metavar="FILE", help="TSV file: subject, predicate, object, start, end (an optional header)")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder")
    p.add_argument("--rate", type=float, default=0.0, metavar="PER_YEAR",
                   help="extra mentions per year inside each fact's interval (default 0: start only)")
    p.add_argument("--seed", type=int, default=0, help="seed of the repeated mentions (default 0)")
    p.add_argument("--kind", default="explicit", choices=("explicit", "user_preference", "episodic"),
                   help="kind of every imported fact (default explicit)")
    p.add_argument("--open-start", default="skip", choices=("skip", "log_start"),
                   help="facts with an unknown start: skip them (reported) or let them hold from the log's start")
    p.add_argument("--max-mentions", type=int, default=None, metavar="N",
                   help="refuse an import that would make more mentions, naming the rows that make the most "
                        "(default 3,000,000: about 7 GB while building and saving)")
    p.add_argument("--end", metavar="BOUND",
                   help="the log's end, as a bound (2020, 2020-06-30): mentions stop there and facts starting later "
                        "are skipped (default: the last observed time, far-future outlier rows skipped and reported)")
    output_args(p)
    p.set_defaults(func=_run_import_triples)


def _run_import_triples(args: argparse.Namespace) -> int:
    from factmem.data.importer import DEFAULT_MAX_MENTIONS, import_triples, parse_bounds
    from factmem.data.logs import save
    from factmem.errors import InputError

    end = None
    if args.end is not None:
        bound = parse_bounds([args.end])
        if bound["status"].iloc[0] != "ok":
            raise InputError(f"--end {args.end!r}: not a bound (a year 2020, a month 2020-06-##, or a date 2020-06-30)")
        end = int(bound["hi"].iloc[0])  # through the end of that period
    ds, report = import_triples(args.file, mention_rate=args.rate, seed=args.seed, kind=args.kind,
                                open_start=args.open_start, end=end,
                                max_mentions=DEFAULT_MAX_MENTIONS if args.max_mentions is None else args.max_mentions)
    say = Output(args)
    out = save(ds, args.out)
    if report.skipped_total:
        print(str(report), file=sys.stderr)  # skipped input is a warning: it prints even under -q
    else:
        say.say(str(report))
    say.say(f"wrote {out}")
    return say.result({"report": report, "dataset": ds.to_dict()}, files_in(out))


def add_import_log(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "import-log",
        help="bring your own conversation log (JSONL, one message a line) as a dataset folder",
        description="Read a conversation log in the log.jsonl format (session_id, message_id, ts in Unix seconds, "
        "speaker, text, facts with subject, predicate, object, kind) and write it as a dataset folder that tune, "
        "sweep, simulate and fit read with --log. --default-kind gives a kind to every fact that has none. The "
        "file is validated first; an error names its line, field and value, and nothing is written.",
    )
    p.add_argument("file", metavar="FILE", help="JSONL conversation log")
    p.add_argument("--out", required=True, metavar="DIR", help="dataset folder to write (new or empty)")
    p.add_argument("--default-kind", choices=("explicit", "user_preference", "episodic"), default=None,
                   help="kind of every fact that carries none (default: a fact without a kind is an error)")
    p.add_argument("--force", action="store_true", help="replace the dataset in --out")
    output_args(p)
    p.set_defaults(func=_run_import_log)


def _run_import_log(args: argparse.Namespace) -> int:
    from factmem.data.import_log import import_log

    say = Output(args)
    ds = import_log(args.file, args.out, default_kind=args.default_kind, force=args.force)
    info = ds.to_dict()
    say.say(f"wrote {args.out}: {info['mentions']} mentions in {info['messages']} messages, {info['sessions']} "
            f"sessions, {info['subjects']} subjects (no truth: tune judges by the sessions that follow)")
    return say.result(info, files_in(args.out))

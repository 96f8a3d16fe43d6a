"""The ``factmem`` command: a thin layer over the library.

Each subcommand is one ``_add_<name>(subparsers)`` function that defines its arguments and sets
``func`` to the function that runs it; :data:`COMMANDS` lists them. ``main`` returns the exit
status: 0 on success, 2 on a usage or input error (the message names what is wrong).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

from factmem.errors import FactmemError, InputError


def _add_generate(sub: argparse._SubParsersAction) -> None:
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
    p.add_argument("--out", required=False, metavar="DIR", help="output folder (created; dataset files replaced)")
    p.add_argument("--list-presets", action="store_true", help="list the presets and exit")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    p.set_defaults(func=_run_generate)


def _run_generate(args: argparse.Namespace) -> int:
    from factmem.data.generate import generate, write
    from factmem.data.presets import PRESETS

    if args.list_presets:
        for name, desc in PRESETS.items():
            print(f"{name:15s} {desc}")
        return 0
    if not args.out:
        raise InputError("--out DIR is required")
    t0 = time.perf_counter()
    if args.scenario:
        from factmem.data.scenario import Scenario

        spec: Scenario | str = Scenario.load(args.scenario)
    else:
        spec = args.preset or "small"
    ds = generate(spec, seed=args.seed)
    out = write(ds, args.out)
    if not args.quiet:
        info = ds.to_dict()
        print(
            f"wrote {out}: {info['mentions']} mentions in {info['messages']} messages, {info['sessions']} sessions, "
            f"{info['subjects']} subjects, {info['truth_rows']} truth rows, {info['generalizations']} generalizations "
            f"({time.perf_counter() - t0:.1f}s); sha256 {info['sha256'][:16]}"
        )
    return 0


def _add_import_triples(sub: argparse._SubParsersAction) -> None:
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
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing on success (skips still go to stderr)")
    p.set_defaults(func=_run_import_triples)


def _run_import_triples(args: argparse.Namespace) -> int:
    from factmem.data.importer import import_triples
    from factmem.data.logs import save

    ds, report = import_triples(args.file, mention_rate=args.rate, seed=args.seed, kind=args.kind,
                                open_start=args.open_start)
    out = save(ds, args.out)
    if report.skipped_total:
        print(str(report), file=sys.stderr)
    elif not args.quiet:
        print(str(report))
    if not args.quiet:
        print(f"wrote {out}")
    return 0


def _add_abstract(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "abstract",
        help="run one abstraction pass over a store with an LLM provider",
        description="Group the store's active observed facts by subject; ask the provider once per new, changed or "
        "stale cluster of at least --min-cluster facts for at most --max-facts generalizations; remember them as "
        "derived facts linked to the cluster; then archive the children of derived facts reinforced at least "
        "prune_min_reinforcements times. Prints the pass's counters. A provider that fails skips its clusters: "
        "nothing is lost, and they are asked again on the next pass.",
    )
    p.add_argument("db", metavar="DB", help="store file (DuckDB), e.g. memory.duckdb; must exist")
    p.add_argument("--provider", required=True, choices=("openai", "ollama", "oracle"),
                   help="openai: any OpenAI-compatible server (llama.cpp, vLLM, LM Studio); ollama; oracle: a "
                   "dataset's ground truth with a seeded error model")
    p.add_argument("--base-url", metavar="URL", help="server URL, e.g. http://127.0.0.1:8080 (ollama default: "
                   "http://localhost:11434)")
    p.add_argument("--model", metavar="NAME", help="model name (required for openai and ollama)")
    p.add_argument("--api-key-env", metavar="VAR", help="environment variable holding a bearer key (openai)")
    p.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS", help="per-call timeout (default 30)")
    p.add_argument("--cassette", metavar="FILE", help="record/replay answers in this JSONL file")
    p.add_argument("--cassette-mode", choices=("record", "replay", "auto"), default="auto",
                   help="record: always call and append; replay: answer only from the file (offline); auto "
                   "(default): replay what is there, record the rest")
    p.add_argument("--dataset", metavar="DIR", help="dataset folder the oracle answers from (generalizations.csv)")
    p.add_argument("--oracle-seed", type=int, default=0, metavar="N", help="seed of the oracle's error model")
    p.add_argument("--oracle-errors", metavar="KIND=P,...", default=None,
                   help="oracle error rates, e.g. prose=0.1,fence=0.2,timeout=0.05")
    p.add_argument("--at", metavar="TIME", help="time of the pass: Unix seconds or ISO-8601 (default: now)")
    p.add_argument("--min-cluster", type=int, default=None, metavar="N", help="default: the store's parameters")
    p.add_argument("--max-facts", type=int, default=None, metavar="N", help="default: the store's parameters")
    p.add_argument("--temperature", type=float, default=None, help="default: the store's parameters (0)")
    p.add_argument("--pass-id", default=None, metavar="ID", help="names the pass in evidence (default: the time)")
    p.add_argument("--no-prune", action="store_true", help="do not archive the children of validated derived facts")
    p.add_argument("--json", action="store_true", help="print the result (counters and per-cluster outcomes) as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    p.set_defaults(func=_run_abstract)


def _parse_rates(text: str | None) -> dict[str, float] | None:
    if not text:
        return None
    rates = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        try:
            rates[key.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep:
            raise InputError(f"--oracle-errors: expected KIND=PROBABILITY, got {part!r}")
    return rates


def _run_abstract(args: argparse.Namespace) -> int:
    import json
    import re
    from pathlib import Path

    from factmem.abstraction.passes import PROMPT_VERSION, abstract
    from factmem.abstraction.providers import make_provider
    from factmem.core.timeutil import to_seconds
    from factmem.store.factstore import FactStore

    db = Path(args.db)
    if not db.is_file():
        raise InputError(f"{db}: no such store file")
    if args.provider in ("openai", "ollama") and not args.model:
        raise InputError(f"--model NAME is required with --provider {args.provider}")
    if args.provider == "oracle":
        if not args.dataset:
            raise InputError("--provider oracle needs --dataset DIR (a folder with generalizations.csv)")
        if not Path(args.dataset).exists():
            raise InputError(f"--dataset {args.dataset}: no such folder or file")
    at = None
    if args.at is not None:
        at = int(args.at) if re.fullmatch(r"-?[0-9]+", args.at.strip()) else to_seconds(args.at.strip(), name="--at")
    provider = make_provider(
        args.provider, base_url=args.base_url, model=args.model, cassette=args.cassette,
        cassette_mode=args.cassette_mode, prompt_version=PROMPT_VERSION, timeout=args.timeout,
        api_key_env=args.api_key_env, dataset=args.dataset, seed=args.oracle_seed,
        error_rates=_parse_rates(args.oracle_errors),
    )
    try:
        with FactStore(db) as store:
            result = abstract(store, provider, model=args.model, at=at, min_cluster=args.min_cluster,
                              max_facts=args.max_facts, prune=not args.no_prune, temperature=args.temperature,
                              pass_id=args.pass_id, quiet=args.quiet or args.json)
    finally:
        for obj in (provider, getattr(provider, "provider", None)):
            close = getattr(obj, "close", None)
            if callable(close):
                close()
    if args.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False))
        return 0
    trouble = [o for o in result.outcomes if o.outcome in ("skipped", "failed")]
    for o in trouble[:10]:
        print(f"{o.outcome} {o.subject}: {o.error}", file=sys.stderr)
    if len(trouble) > 10:
        print(f"... and {len(trouble) - 10} more skipped or failed clusters", file=sys.stderr)
    if not args.quiet:
        print(f"{db}: abstraction pass {result.pass_id} (model {result.model})")
        for name, value in result.counters().items():
            print(f"  {name:14s} {value}")
    return 0


def _add_export(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="export a params file for production: versioned TOML, JSON, or a Rust module",
        description="Validate a params file (a versioned factmem.params/1 document, e.g. a tuning run's params.toml, "
        "or a bare legacy parameter table) and write it as TOML or JSON with its provenance, or as a Rust module "
        "(FactKind::decay_rate/initial_confidence, pub consts, provenance doc comment, bit-exact #[cfg(test)] "
        "module). On any error nothing is written.",
    )
    p.add_argument("params", metavar="PARAMS", help="params file (.toml or .json)")
    p.add_argument("--format", choices=("toml", "json", "rust"), default=None,
                   help="output format (default: from --out's suffix: .toml, .json, .rs)")
    p.add_argument("--out", required=True, metavar="FILE", help="output file (replaced atomically)")
    p.add_argument("--no-enum", action="store_true",
                   help="rust: do not emit `enum FactKind` (your crate defines it); default emits it so the file "
                   "compiles standalone")
    p.add_argument("--enum-path", default="super::FactKind", metavar="PATH",
                   help="rust with --no-enum: path of your FactKind (default super::FactKind)")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    p.set_defaults(func=_run_export)


def _run_export(args: argparse.Namespace) -> int:
    from factmem.export import export_params

    fmt = args.format
    opts = {}
    if args.no_enum:
        opts = {"with_enum": False, "enum_path": args.enum_path}
    elif args.enum_path != "super::FactKind":
        raise InputError("--enum-path applies only with --no-enum")
    out = export_params(args.params, args.out, fmt, **opts)
    if not args.quiet:
        print(f"wrote {out}")
    return 0


def _add_params(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("params", help="inspect params files: diff two, or show and validate one",
                       description="Inspect params files (TOML or JSON, versioned or legacy).")
    psub = p.add_subparsers(dest="params_command", metavar="ACTION", required=True)
    d = psub.add_parser("diff", help="what a promotion from A to B changes, and both sides' held-out metrics",
                        description="List the parameters that differ from A to B (old -> new, relative change) and "
                        "each side's held-out metrics and defaults' metrics from its provenance.")
    d.add_argument("a", metavar="A", help="current params file")
    d.add_argument("b", metavar="B", help="proposed params file")
    d.add_argument("--all", action="store_true", help="list every parameter, changed or not")
    d.add_argument("--csv", metavar="FILE", help="also write the parameter table as CSV")
    d.set_defaults(func=_run_params_diff)
    s = psub.add_parser("show", help="validate a params file and print its parameters and provenance",
                        description="Validate a params file (exit 2 naming the key and value if invalid) and print it.")
    s.add_argument("file", metavar="FILE", help="params file (.toml or .json)")
    s.set_defaults(func=_run_params_show)


def _run_params_diff(args: argparse.Namespace) -> int:
    from factmem.export import diff_params, read_params_document, render_diff

    a, b = read_params_document(args.a), read_params_document(args.b)
    print(render_diff(a, b, all=args.all), end="")
    if args.csv:
        from pathlib import Path

        from factmem.export import atomic_write

        table = diff_params(a, b, all=args.all)
        atomic_write(Path(args.csv), lambda tmp: table.to_csv(tmp, index=False))
    return 0


def _run_params_show(args: argparse.Namespace) -> int:
    from factmem.export import params_fingerprint, read_params_document

    doc = read_params_document(args.file)
    print(f"{args.file}: valid {'legacy (no schema key)' if doc.legacy else doc.schema}; "
          f"fingerprint {params_fingerprint(doc.params)}")
    print(doc.to_toml(), end="")
    return 0


def _add_export_db(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export-db",
        help="write a store as a SQLite file in the seed's production schema",
        description="Write a FactStore file as SQLite: memory_facts and memory_fact_links exactly as the seed's DDL, "
        "memory_evidence, and factmem_fact_state/factmem_meta side tables a production crate ignores (they make "
        "`factmem import-db` lossless). Nothing is written on error.",
    )
    p.add_argument("db", metavar="DB", help="store file (DuckDB), e.g. memory.duckdb")
    p.add_argument("--out", required=True, metavar="FILE", help="SQLite file to write, e.g. prod.sqlite")
    p.add_argument("--force", action="store_true", help="replace --out if it exists")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    p.set_defaults(func=_run_export_db)


def _run_export_db(args: argparse.Namespace) -> int:
    from factmem.export.sqlite import export_db

    result = export_db(args.db, args.out, overwrite=args.force, progress=False if args.quiet else None)
    if not args.quiet:
        print(result)
    return 0


def _add_import_db(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "import-db",
        help="read a production SQLite memory into a new store file",
        description="Read a SQLite memory in the seed's schema (memory_facts, memory_fact_links, memory_evidence; "
        "factmem's side tables if present) into a new FactStore file, keeping every row and value. The file is "
        "validated first: a missing table, a missing or extra column, a wrong type or value, a broken invariant "
        "(a dangling reference, a confidence outside [0, 1], a time outside years 0001-9999, two active facts for a "
        "single-valued key, an unknown format) is an error naming the table, row and rule, and nothing is written.",
    )
    p.add_argument("sqlite", metavar="FILE", help="SQLite memory, e.g. prod.sqlite")
    p.add_argument("--out", required=True, metavar="DB", help="store file to create (DuckDB)")
    p.add_argument("--params", metavar="FILE", help="params file for the store (default: the file's factmem_meta, "
                   "else the seed's defaults)")
    p.add_argument("--force", action="store_true",
                   help="replace --out if it exists (refused while a process has that store open)")
    p.add_argument("--allow-multiple-active", action="store_true",
                   help="keep several active facts of one single-valued (subject, predicate) as stored instead of "
                   "refusing the file")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    p.set_defaults(func=_run_import_db)


def _run_import_db(args: argparse.Namespace) -> int:
    from factmem.export import load_params_file
    from factmem.export.sqlite import import_db

    params = load_params_file(args.params)[0] if args.params else None
    result = import_db(args.sqlite, args.out, params=params, overwrite=args.force,
                       progress=False if args.quiet else None, allow_multiple_active=args.allow_multiple_active)
    if not args.quiet:
        print(result)
    return 0


from factmem.cli import tune as _cli_tune  # noqa: E402

#: Subcommand registry: add yours here.
COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [
    _add_generate,
    _add_import_triples,
    _add_abstract,
    _add_export,
    _add_params,
    _add_export_db,
    _add_import_db,
    _cli_tune._add_tune,
    _cli_tune._add_simulate,
    _cli_tune._add_sweep,
    _cli_tune._add_cardinality,
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="factmem",
        description="Fact-based agent memory: replay conversation logs, tune and export memory parameters.",
    )
    from factmem import __version__

    parser.add_argument("--version", action="version", version=f"factmem {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in COMMANDS:
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except FactmemError as exc:  # anything else is a bug: let its traceback show
        print(f"factmem {args.command}: error: {exc}", file=sys.stderr)
        return 2

"""CLI commands for production: ``export`` (a params file as TOML/JSON/Rust), ``params diff|show``,
``export-db`` and ``import-db`` (memories in the seed's SQLite schema). Thin wrappers over
:mod:`factmem.export`."""

from __future__ import annotations

import argparse
from pathlib import Path

from factmem.cli.output import Output, output_args
from factmem.errors import InputError

__all__ = ["add_export", "add_params", "add_export_db", "add_import_db"]


def add_export(sub: argparse._SubParsersAction) -> None:
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
    output_args(p)
    p.set_defaults(func=_run_export)


def _run_export(args: argparse.Namespace) -> int:
    from factmem.export import export_params

    fmt = args.format
    opts = {}
    if args.no_enum:
        opts = {"with_enum": False, "enum_path": args.enum_path}
    elif args.enum_path != "super::FactKind":
        raise InputError("--enum-path applies only with --no-enum")
    say = Output(args)
    out = export_params(args.params, args.out, fmt, **opts)
    say.say(f"wrote {out}")
    return say.result({"params": args.params, "format": fmt or Path(out).suffix.lstrip("."), "out": str(out)}, [out])


def add_params(sub: argparse._SubParsersAction) -> None:
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
    output_args(d)
    d.set_defaults(func=_run_params_diff, command="params diff")
    s = psub.add_parser("show", help="validate a params file and print its parameters and provenance",
                        description="Validate a params file (exit 2 naming the key and value if invalid) and print it.")
    s.add_argument("file", metavar="FILE", help="params file (.toml or .json)")
    output_args(s)
    s.set_defaults(func=_run_params_show, command="params show")


def _run_params_diff(args: argparse.Namespace) -> int:
    from factmem.export import diff_params, read_params_document, render_diff

    say = Output(args)
    a, b = read_params_document(args.a), read_params_document(args.b)
    if not say.quiet:
        print(render_diff(a, b, all=args.all), end="")
    table = diff_params(a, b, all=args.all)
    if args.csv:
        from factmem.export import atomic_write

        atomic_write(Path(args.csv), lambda tmp: table.to_csv(tmp, index=False))
    return say.result({"a": args.a, "b": args.b, "parameters": table}, [args.csv] if args.csv else [])


def _run_params_show(args: argparse.Namespace) -> int:
    from factmem.export import params_fingerprint, read_params_document

    say = Output(args)
    doc = read_params_document(args.file)
    say.say(f"{args.file}: valid {'legacy (no schema key)' if doc.legacy else doc.schema}; "
            f"fingerprint {params_fingerprint(doc.params)}")
    if not say.quiet:
        print(doc.to_toml(), end="")
    return say.result({"file": args.file, "schema": None if doc.legacy else doc.schema,
                       "fingerprint": params_fingerprint(doc.params), "params": doc.params.to_dict(),
                       "provenance": getattr(doc, "provenance", None)})


def add_export_db(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export-db",
        help="write a store as a SQLite file in the seed's production schema",
        description="Write a FactStore file as SQLite: memory_facts and memory_fact_links exactly as the seed's DDL, "
        "memory_evidence, and factmem_fact_state/factmem_meta side tables a production crate ignores (they make "
        "`factmem import-db` lossless). Nothing is written on error.",
    )
    p.add_argument("db", metavar="DB", help="store file (DuckDB), e.g. memory.duckdb")
    p.add_argument("--out", required=True, metavar="FILE", help="SQLite file to write, e.g. prod.sqlite")
    p.add_argument("--consolidate-every", type=float, default=24.0, metavar="HOURS",
                   help="the consolidation period the memory was built with, recorded in factmem_meta (default 24: "
                        "daily at midnight UTC)")
    p.add_argument("--force", action="store_true", help="replace --out if it exists")
    output_args(p)
    p.set_defaults(func=_run_export_db)


def _run_export_db(args: argparse.Namespace) -> int:
    from factmem.export.sqlite import export_db

    say = Output(args)
    seconds = args.consolidate_every * 3600
    if not seconds >= 1 or seconds != round(seconds):
        raise InputError(f"--consolidate-every {args.consolidate_every!r}: a positive number of hours that is a whole "
                         "number of seconds")
    result = export_db(args.db, args.out, overwrite=args.force, progress=False if say.quiet else None,
                       consolidate_every_seconds=int(round(seconds)))
    say.say(str(result))
    return say.result(result, [args.out])


def add_import_db(sub: argparse._SubParsersAction) -> None:
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
    output_args(p)
    p.set_defaults(func=_run_import_db)


def _run_import_db(args: argparse.Namespace) -> int:
    from factmem.export import load_params_file
    from factmem.export.sqlite import import_db

    params = load_params_file(args.params)[0] if args.params else None
    say = Output(args)
    result = import_db(args.sqlite, args.out, params=params, overwrite=args.force,
                       progress=False if say.quiet else None, allow_multiple_active=args.allow_multiple_active)
    say.say(str(result))
    return say.result(result, [args.out])

"""The ``factmem`` command: a thin layer over the library.

Each subcommand is one ``add_<name>(subparsers)`` function (in :mod:`factmem.cli.data`,
:mod:`~factmem.cli.abstract`, :mod:`~factmem.cli.export`, :mod:`~factmem.cli.tune`,
:mod:`~factmem.cli.production`, ...) that defines
its arguments and sets ``func`` to the function that runs it — one library call; :data:`COMMANDS`
lists them. ``main`` returns the exit status: 0 on success, 2 on a usage or input error (one line
naming what is wrong: every :class:`~factmem.errors.FactmemError`); any other exception is a bug and
shows its traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from factmem.cli.abstract import add_abstract
from factmem.cli.data import add_generate, add_import_triples
from factmem.cli.export import add_export, add_export_db, add_import_db, add_params
from factmem.cli.fit import add_fit
from factmem.cli.production import add_whatif
from factmem.cli.tune import add_cardinality, add_simulate, add_sweep, add_tune
from factmem.errors import FactmemError

__all__ = ["COMMANDS", "build_parser", "main"]

#: Subcommand registry: add yours here.
COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [
    add_generate,
    add_import_triples,
    add_abstract,
    add_export,
    add_params,
    add_export_db,
    add_import_db,
    add_tune,
    add_simulate,
    add_sweep,
    add_cardinality,
    add_fit,
    add_whatif,
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

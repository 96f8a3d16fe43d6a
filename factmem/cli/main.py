"""The ``factmem`` command: a thin layer over the library.

Each subcommand is one ``add_<name>(subparsers)`` function (in :mod:`factmem.cli.data`,
:mod:`~factmem.cli.abstract`, :mod:`~factmem.cli.export`, :mod:`~factmem.cli.tune`,
:mod:`~factmem.cli.production`, ...) that defines
its arguments and sets ``func`` to the function that runs it — one library call; :data:`COMMANDS`
lists them. ``main`` returns the exit status of :mod:`factmem.cli.output` (the one rule for ``-q``,
``--json`` and exit codes): 0 on success; 2 on a usage or input error (one line naming what is wrong:
every :class:`~factmem.errors.FactmemError`; an unknown option prints the subcommand's usage and the
closest options it has); 1 on a runtime failure of the operating system (disk full: its words, no
traceback — also :class:`~factmem.errors.StoreWriteError`, a store's flush the file system refused); 3 when ``--fail-if-not-promoted`` was given and nothing was promoted; 4 when ``whatif`` or ``tune --log
PROD.sqlite`` completed but the current parameters' replay does not rebuild the production file
(:data:`factmem.production.current.EXIT_NOT_REPRODUCED`). A closed stdout
pipe ends the command quietly. Any other exception is a bug and shows its traceback.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Callable

from factmem.cli.abstract import add_abstract
from factmem.cli.data import add_generate, add_import_log, add_import_triples
from factmem.cli.export import add_export, add_export_db, add_import_db, add_params
from factmem.cli.fit import add_fit
from factmem.cli.output import EXIT_BAD_INPUT, EXIT_FAILURE, silence_stdout
from factmem.cli.production import add_whatif
from factmem.cli.runs import add_runs
from factmem.cli.store import add_store
from factmem.cli.tune import add_cardinality, add_simulate, add_sweep, add_tune
from factmem.errors import FactmemError

__all__ = ["COMMANDS", "build_parser", "main", "parse"]

#: Subcommand registry: add yours here.
COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [
    add_generate,
    add_import_triples,
    add_import_log,
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
    add_store,
    add_runs,
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


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser | None:
    action = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    return None if action is None else action.choices.get(name)


def _suggestions(sub: argparse.ArgumentParser, unknown: list[str]) -> str:
    """" (did you mean --x?)" for the unknown options with a close match among ``sub``'s."""
    known = [o for a in sub._actions for o in a.option_strings if o.startswith("--")]
    hints = []
    for arg in unknown:
        flag = arg.split("=", 1)[0]
        if flag.startswith("-"):
            hints += [m for m in difflib.get_close_matches(flag, known, n=1, cutoff=0.6) if m not in hints]
    return f" (did you mean {', '.join(hints)}?)" if hints else ""


def parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Parse like ``parse_args``, except that an unknown option is reported by its subcommand (with
    that subcommand's usage and the closest options it has), not by the top-level parser."""
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        sub = _subparser(parser, getattr(args, "command", "") or "")
        message = f"unrecognized arguments: {' '.join(unknown)}"
        (sub or parser).error(message + (_suggestions(sub, unknown) if sub is not None else ""))
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    args = parse(parser, argv)
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # inside the guard: a closed pipe shows up here, not at interpreter exit
        return code
    except BrokenPipeError:  # the reader went away (`factmem tune | head`): not an error of ours
        silence_stdout()
        return 0
    except FactmemError as exc:  # anything else is a bug: let its traceback show
        print(f"factmem {args.command}: error: {exc}", file=sys.stderr)
        # a write the file system refused (StoreWriteError: a full disk) is a runtime failure, not bad input
        return int(getattr(exc, "exit_status", EXIT_BAD_INPUT))
    except OSError as exc:  # the operating system failed a write or read (disk full, a file gone)
        print(f"factmem {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_FAILURE

"""CLI command ``store``: maintenance of a store file. ``factmem store recover DB`` applies the
calls a store that was not closed left in its journal (:func:`factmem.store.recover.recover`)."""

from __future__ import annotations

import argparse

from factmem.cli.output import Output, output_args

__all__ = ["add_store"]


def add_store(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("store", help="maintenance of a store file (recover: apply a pending journal)",
                       description="Maintenance of a factmem store file.")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    r = actions.add_parser(
        "recover", help="apply the calls a store that was not closed left in its journal",
        description="Open the store for writing once and close it: the calls its journal (DB.journal) holds are "
                    "written to the tables and the journal is removed, so other tools read every call that "
                    "returned. A damaged journal is named with its line and nothing is applied.")
    r.add_argument("db", metavar="DB", help="the store file (DuckDB)")
    output_args(r)
    r.set_defaults(func=_run_recover, command="store recover")


def _run_recover(args: argparse.Namespace) -> int:
    from factmem.store.recover import recover

    say = Output(args)
    result = recover(args.db)
    say.say(str(result))
    return say.result({"path": str(result.path), "applied": result.applied, "facts": result.facts}, [result.path])

"""What every command prints, and the exit status it returns: one rule for all of them.

* **Human output** is the default: a short report on stdout, progress bars on stderr.
* ``-q`` / ``--quiet`` means the same in every command: no progress bar and no report echo; errors
  (and warnings about skipped input) still go to stderr.
* ``--json`` prints exactly one JSON document on stdout and nothing else there (it implies ``-q``)::

      {"factmem": "<version>", "command": "<name>", "exit_code": 0, "files": ["<path>", ...],
       "result": {...}}

  ``files`` lists what the command wrote (empty when it wrote nothing); ``result`` is the command's
  result in its plain-dict form (the same numbers the human report shows; NaN is ``null``,
  infinities are ``"inf"``/``"-inf"``). ``tune`` adds ``"decision": {"promoted": bool, "budget": k,
  "text": "..."}``. The README lists each command's ``result`` keys; ``tests/test_cli_output.py``
  holds every command to that table.
* **Exit status** (:data:`EXIT_CODES`): 0 success; 1 a runtime failure (a disk full, a file that
  vanished: the OS's words are printed); 2 bad input — a usage error or any
  :class:`~factmem.errors.FactmemError`, one line naming what is wrong, nothing written;
  3 the command ran but promoted nothing, only with ``--fail-if-not-promoted`` (``tune``), so the
  default stays 0 and CI can gate on a decision; 4 ``whatif`` or ``tune --log PROD.sqlite`` ran but
  the current parameters' replay does not rebuild more than 5% of the production file's facts.
* A closed stdout (``factmem tune | head``) ends the command quietly with the status it would have
  returned, 0 if it had none yet: no ``BrokenPipeError`` traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from factmem.production.current import EXIT_NOT_REPRODUCED  # 4: defined with the check that returns it

__all__ = ["EXIT_OK", "EXIT_FAILURE", "EXIT_BAD_INPUT", "EXIT_NOT_PROMOTED", "EXIT_NOT_REPRODUCED", "EXIT_CODES", "output_args",
           "Output", "json_document", "silence_stdout"]

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2
EXIT_NOT_PROMOTED = 3

#: every exit status a command returns, and what it means (the README's CLI section says the same)
EXIT_CODES: dict[int, str] = {
    EXIT_OK: "success",
    EXIT_FAILURE: "a runtime failure (disk full, a file gone): the OS's words on stderr",
    EXIT_BAD_INPUT: "bad input: a usage error or a file, field or value the command refuses; nothing written",
    EXIT_NOT_PROMOTED: "ran, but nothing was promoted (only with --fail-if-not-promoted)",
    EXIT_NOT_REPRODUCED: "ran (whatif, tune --log PROD.sqlite), but the current parameters' replay does not rebuild "
                         "the production file: the comparison is not against what production did",
}


def output_args(p: argparse.ArgumentParser, *, json_output: bool = True) -> None:
    """``-q`` and ``--json``, with the same meaning in every command."""
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no progress bar and no report on stdout (errors still print)")
    if json_output:
        p.add_argument("--json", action="store_true",
                       help="print one JSON document on stdout (the result and the files written) and nothing else "
                            "there; implies -q")


def _plain(value: Any) -> Any:
    """A JSON-ready copy of ``value`` (dataclasses with ``to_dict``, DataFrames, numpy scalars)."""
    from factmem.tuning.runs import _jsonable

    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict) and not isinstance(value, Mapping):
        try:
            value = to_dict(orient="records") if hasattr(value, "columns") else to_dict()
        except TypeError:
            value = to_dict()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return _jsonable(value)


def json_document(command: str, result: Any, files: Iterable[Any] = (), *, exit_code: int = EXIT_OK,
                  **extra: Any) -> dict[str, Any]:
    """The one document ``--json`` prints (see the module docstring)."""
    from factmem import __version__

    doc: dict[str, Any] = {"factmem": __version__, "command": command, "exit_code": exit_code,
                           "files": [str(f) for f in files]}
    doc.update({k: _plain(v) for k, v in extra.items()})
    doc["result"] = _plain(result)
    return doc


class Output:
    """Where a command's words go, by its ``-q``/``--json`` flags."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.command = str(getattr(args, "command", ""))
        self.json = bool(getattr(args, "json", False))
        self.quiet = bool(getattr(args, "quiet", False)) or self.json

    @property
    def progress(self) -> bool:
        """Whether progress bars may draw (never under -q or --json)."""
        return not self.quiet

    def say(self, text: str = "") -> None:
        """A line of the human report (nothing under -q or --json)."""
        if not self.quiet:
            print(text)

    def status(self, text: str) -> None:
        """A progress line on stderr, for steps with no bar: shown to a person at a terminal, never
        under -q or --json nor when stderr is a file or pipe (so an error stays the one line there)."""
        if not self.quiet and sys.stderr.isatty():
            print(f"factmem {self.command}: {text}", file=sys.stderr, flush=True)

    def result(self, result: Any, files: Iterable[Any] = (), *, exit_code: int = EXIT_OK, **extra: Any) -> int:
        """Under --json, print the command's one document; return ``exit_code`` either way."""
        if self.json:
            doc = json_document(self.command, result, files, exit_code=exit_code, **extra)
            print(json.dumps(doc, ensure_ascii=False, allow_nan=False))
        return exit_code


def silence_stdout() -> None:
    """After a closed pipe: point stdout at /dev/null so the interpreter's final flush cannot fail
    again (the pattern the Python documentation gives for SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a real file (a test's capture): nothing to flush
        pass

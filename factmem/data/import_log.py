"""Bring your own conversation log: a JSONL file of messages in, a dataset folder out.

:func:`import_log` reads a file in the format of ``log.jsonl`` (datasets/README.md: one message a
line — ``session_id``, ``message_id``, ``ts`` in Unix seconds, ``speaker``, ``text``, ``facts``, each
fact a ``subject``, ``predicate``, ``object``, ``kind`` and optional ``note``) and writes a dataset
folder every command reads (``--log DIR``). Logs exported from other tools often carry no ``kind``:
``default_kind`` fills it in for every fact that has none (a missing key or ``null``); a fact that
names a kind keeps it. Without ``default_kind`` a fact with no kind is an error that says which flag
fixes it.

The folder has no ``truth.csv``: the tuning commands then judge with a no-truth definition of
"needed" (the sessions that follow). Every line keeps its line number, so an error names the line of
the *input* file, the field and the value, and nothing is written.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from factmem.core.codes import MENTION_KINDS
from factmem.data.format import LOG_FILE
from factmem.data.logs import Dataset, load
from factmem.errors import ExportError, InputError

__all__ = ["import_log"]


def import_log(path: str | os.PathLike[str], out: str | os.PathLike[str], *, default_kind: str | None = None,
               force: bool = False) -> Dataset:
    """Read the JSONL conversation log ``path`` and write it as the dataset folder ``out``.

    ``default_kind``: the kind of every fact that carries none (one of
    :data:`~factmem.core.codes.MENTION_KINDS`). ``force``: replace ``out`` if it holds a dataset.
    Returns the loaded :class:`~factmem.data.logs.Dataset` (validated exactly as ``load`` does).
    """
    src, dest = Path(path), Path(out)
    if default_kind is not None and default_kind not in MENTION_KINDS:
        raise InputError(f"default_kind {default_kind!r} is not a kind; expected one of {', '.join(MENTION_KINDS)}")
    try:
        data = src.read_bytes()
    except OSError as exc:
        raise InputError(f"{src}: cannot read the log: {exc.strerror or exc}") from None
    if dest.exists() and (not dest.is_dir() or (any(dest.iterdir()) and not force)):
        raise InputError(f"{dest}: exists and is not an empty folder; choose another, or pass --force to replace "
                         "the dataset there")
    lines = data.split(b"\n")
    filled = _fill_kinds(lines, src, default_kind) if default_kind is not None else data
    staging = Path(tempfile.mkdtemp(prefix=".import-log-", dir=dest.parent if dest.parent.is_dir() else None))
    try:
        (staging / LOG_FILE).write_bytes(filled)
        try:
            load(staging)  # every check the loader makes, before anything reaches `out`
        except InputError as exc:
            message = str(exc).replace(str(staging / LOG_FILE), str(src))
            if "field 'kind' is missing" in message and default_kind is None:
                message += " (pass --default-kind KIND for a log whose facts carry no kind)"
            raise InputError(message) from None
        dest.mkdir(parents=True, exist_ok=True)
        os.replace(staging / LOG_FILE, dest / LOG_FILE)
    except OSError as exc:
        raise ExportError(f"{exc.filename or dest}: cannot write the dataset: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return load(dest)


def _fill_kinds(lines: list[bytes], src: Path, default_kind: str) -> bytes:
    """The log with ``kind`` set on every fact that has none; line numbers unchanged. Lines that do
    not parse are left as they are, for the loader to report with its own words."""
    out = []
    for line in lines:
        if not line.strip():
            out.append(line)
            continue
        try:
            obj = json.loads(line.decode("utf-8").lstrip("\ufeff"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            out.append(line)
            continue
        facts = obj.get("facts") if isinstance(obj, dict) else None
        if not isinstance(facts, list) or not any(isinstance(f, dict) and f.get("kind") is None for f in facts):
            out.append(line)
            continue
        for fact in facts:
            if isinstance(fact, dict) and fact.get("kind") is None:
                fact["kind"] = default_kind
        out.append(json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    return b"\n".join(out)

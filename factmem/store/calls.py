"""The checks a store call makes of its arguments, spelled once: the call checks what a user hands
in, and reopening checks each journal entry with the same function before it replays anything
(:mod:`factmem.store.journal`), so an entry the call itself would refuse is never applied.

* ``subject`` and ``predicate`` — a fact's key — are non-empty text without NUL (``"\\0"``); the
  in-process state keys facts by them (:func:`state_key`), and NUL is refused the same way by
  ``remember``, ``ingest``, the log loaders, ``import-triples`` and ``import-db``. ``object`` is
  non-empty text;
* ``kind`` is one of :data:`~factmem.core.codes.KINDS`; ``note``, ``session_id`` and
  ``message_id`` are text or None; ``source`` is ``observation`` or ``abstraction``;
* every text is valid Unicode (no lone surrogate);
* ``at`` is a time in years 0001–9999 (:func:`~factmem.core.timeutil.resolve_at`); a journal
  entry holds it as an integer, so there it must be one exactly (not a float, a bool or text).

A count that would pass the largest 64-bit integer is :class:`CountOverflowError`, on both write
paths, before anything changes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from factmem.core.codes import KIND_CODES, KINDS, MAX_TIME, MIN_TIME
from factmem.core.text import is_unicode
from factmem.core.timeutil import out_of_range_message, resolve_at
from factmem.errors import InputError, StoreError

__all__ = ["check_remember", "check_identifier", "check_count", "state_key", "SOURCES", "MAX_COUNT",
           "CountOverflowError", "strict_time"]

#: the evidence sources a store records
SOURCES: tuple[str, ...] = ("observation", "abstraction")
#: the largest reinforcement count a fact can hold (BIGINT)
MAX_COUNT = int(np.iinfo(np.int64).max)


class CountOverflowError(StoreError):
    """A fact's reinforcement count is at the largest 64-bit integer: one more reinforcement cannot
    be stored. The message names the fact."""


def check_identifier(name: str, value: Any) -> None:
    """``value`` is a non-empty string without NUL (a subject or a predicate)."""
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{name} must be a non-empty string, got {value!r}")
    if "\0" in value:
        raise InputError(f"{name} must not contain NUL (\\0), got {value!r}")


def check_remember(subject: Any, predicate: Any, object: Any, kind: Any, at: Any, session_id: Any,
                   message_id: Any, source: Any, note: Any, *, strict_at: bool = False) -> int:
    """Refuse the arguments of a ``remember`` call it would not make (see the module docstring);
    returns ``at`` as Unix seconds. ``strict_at``: ``at`` must already be integer seconds."""
    check_identifier("subject", subject)
    check_identifier("predicate", predicate)
    if not isinstance(object, str) or not object.strip():
        raise InputError(f"object must be a non-empty string, got {object!r}")
    if not isinstance(kind, str) or kind not in KIND_CODES:
        raise InputError(f"unknown kind {kind!r}; kinds are {', '.join(KINDS)}")
    for name, value in (("note", note), ("session_id", session_id), ("message_id", message_id)):
        if value is not None and not isinstance(value, str):
            raise InputError(f"{name} must be a string or None, got {value!r}")
    if not isinstance(source, str) or source not in SOURCES:
        raise InputError(f"unknown evidence source {source!r}; sources are {', '.join(SOURCES)}")
    for name, text in (("subject", subject), ("predicate", predicate), ("object", object), ("note", note),
                       ("session_id", session_id), ("message_id", message_id)):
        if isinstance(text, str) and not is_unicode(text):
            raise InputError(f"{name} is not valid Unicode text (a lone surrogate): {text!r}")
    return strict_time("at", at) if strict_at else resolve_at(at)


def strict_time(name: str, value: Any) -> int:
    """``value`` as recorded in a journal: integer Unix seconds in years 0001–9999, nothing else."""
    if type(value) is not int:
        raise InputError(f"{name} must be integer Unix seconds, got {type(value).__name__} {value!r}")
    if not MIN_TIME <= value <= MAX_TIME:
        raise InputError(f"{name} = {out_of_range_message(value)}")
    return value


def check_count(counts: np.ndarray, ids: np.ndarray) -> None:
    """Refuse a reinforcement of a fact whose count is already :data:`MAX_COUNT` (``counts`` before
    the reinforcement, of the facts ``ids``)."""
    full = np.flatnonzero(np.asarray(counts, np.int64) >= MAX_COUNT)
    if full.size:
        fid = int(np.asarray(ids)[full[0]])
        raise CountOverflowError(f"fact {fid}: reinforcement_count is {MAX_COUNT} (the largest 64-bit integer); "
                                 "one more reinforcement cannot be counted — nothing was changed")


def state_key(subject: str, predicate: str) -> str:
    """The in-process key of (subject, predicate): length-prefixed, so that no two pairs share one
    even if a subject held NUL (an older store, a file written by another tool)."""
    return f"{len(subject)}\0{subject}\0{predicate}"

"""Time conventions: integer Unix seconds (UTC) everywhere; ages in days."""

from __future__ import annotations

import datetime as _dt
import math
import time
from typing import Any

import numpy as np

from factmem.errors import InputError

__all__ = ["to_seconds", "parse_time", "now_seconds", "resolve_at", "to_datetime"]


def to_seconds(at: Any, *, name: str = "at") -> int:
    """Integer Unix seconds from an int, an integral float, a ``datetime`` (naive = UTC),
    a pandas ``Timestamp``, a ``numpy.datetime64`` or an ISO-8601 string.

    >>> to_seconds("2026-01-01T00:00:00Z")
    1767225600
    """
    if isinstance(at, bool):
        raise InputError(f"{name} must be a time, got {at!r}")
    if isinstance(at, (int, np.integer)):
        return int(at)
    if isinstance(at, (float, np.floating)):
        if not math.isfinite(at) or not float(at).is_integer():
            raise InputError(f"{name} must be whole Unix seconds, got {at!r}")
        return int(at)
    if isinstance(at, np.datetime64):
        if np.isnat(at):
            raise InputError(f"{name} is NaT")
        return int(at.astype("datetime64[s]").astype(np.int64))
    if isinstance(at, str):
        try:
            at = _dt.datetime.fromisoformat(at.replace("Z", "+00:00"))
        except ValueError:
            raise InputError(f"{name} is not an ISO-8601 time: {at!r}") from None
    if isinstance(at, _dt.datetime):
        # pandas.Timestamp is a datetime subclass; NaT is not.
        if at.tzinfo is None:
            at = at.replace(tzinfo=_dt.UTC)
        return int(math.floor(at.timestamp()))
    if isinstance(at, _dt.date):
        return int(_dt.datetime(at.year, at.month, at.day, tzinfo=_dt.UTC).timestamp())
    raise InputError(f"{name} must be Unix seconds, a datetime or a Timestamp, got {type(at).__name__} {at!r}")


def parse_time(text: str, *, name: str = "--at") -> int:
    """A time written on a command line: whole Unix seconds (``-86400``) or ISO-8601 (``2026-01-01``).

    >>> parse_time("86400"), parse_time("1970-01-02")
    (86400, 86400)
    """
    stripped = text.strip()
    if stripped.lstrip("-").isdigit():
        return int(stripped)
    return to_seconds(stripped, name=name)


def now_seconds() -> int:
    """The wall clock, used only when a caller omits ``at=``."""
    return int(time.time())


def resolve_at(at: Any, *, name: str = "at") -> int:
    return now_seconds() if at is None else to_seconds(at, name=name)


def to_datetime(seconds: int) -> _dt.datetime:
    return _dt.datetime.fromtimestamp(int(seconds), tz=_dt.UTC)

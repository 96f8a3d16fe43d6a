"""Time conventions: integer Unix seconds (UTC) everywhere; ages in days.

The supported range is years 0001 to 9999 (:data:`~factmem.core.codes.MIN_TIME` ..
:data:`~factmem.core.codes.MAX_TIME`); times before 1970 are negative. Every time a user hands in
goes through :func:`to_seconds` (one value) or :func:`check_times` (a column), which refuse what
lies outside — a value beyond year 9999 as seconds is most likely milliseconds, and the message
says so.
"""

from __future__ import annotations

import datetime as _dt
import math
import time
from typing import Any, Literal

import numpy as np

from factmem.core.codes import MAX_TIME, MIN_TIME
from factmem.errors import InputError

__all__ = ["grid_index", "even_step", "to_seconds", "parse_time", "now_seconds", "resolve_at", "to_datetime", "check_times", "out_of_range_message",
           "MIN_TIME", "MAX_TIME"]


def out_of_range_message(value: Any) -> str:
    """Why ``value`` (Unix seconds) is refused: the range, and a hint when it looks like milliseconds."""
    hint = ""
    try:
        v = int(value)
    except (TypeError, ValueError, OverflowError):
        v = None
    # times since 1970 in milliseconds pass 1e12 in 2001 (year 33658 as seconds); in microseconds, 1e15;
    # in nanoseconds, 1e18 — each unit's decades around now
    if v is not None and v in (2**64 - 1, 2**63 - 1, -(2**63)):
        hint = " — an extreme 64-bit value: a placeholder or a wrapped-around -1, not a time"
    elif v is not None and 10**12 <= abs(v) < 10**14:
        hint = " — it looks like milliseconds; divide by 1000"
    elif v is not None and 10**15 <= abs(v) < 10**17:
        hint = " — it looks like microseconds; divide by 1,000,000"
    elif v is not None and 10**18 <= abs(v) < 10**20:
        hint = " — it looks like nanoseconds; divide by 1,000,000,000"
    return (f"{value} is outside the supported time range (Unix seconds of years 0001 to 9999: "
            f"{MIN_TIME} to {MAX_TIME}){hint}")


def check_times(values: Any, where: Any, field: str = "ts") -> None:
    """Refuse a column of Unix seconds with a value outside years 0001–9999.

    ``values``: integers (any numpy integer dtype, or floats already checked to be whole);
    ``where(row) -> str`` names a row for the message (file and line, or row). Vectorized."""
    arr = np.asarray(values)
    if arr.size == 0:
        return
    if arr.dtype.kind == "u":
        bad = arr > np.uint64(MAX_TIME)
    else:
        bad = (arr < MIN_TIME) | (arr > MAX_TIME)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        value = arr[row]
        value = value.item() if hasattr(value, "item") else value
        raise InputError(f"{where(row)}: field {field!r} = {out_of_range_message(value)}")


def to_seconds(at: Any, *, name: str = "at") -> int:
    """Integer Unix seconds from an int, an integral float, a ``datetime`` (naive = UTC),
    a pandas ``Timestamp``, a ``numpy.datetime64`` or an ISO-8601 string.

    >>> to_seconds("2026-01-01T00:00:00Z")
    1767225600
    """
    seconds = _to_seconds(at, name)
    if not MIN_TIME <= seconds <= MAX_TIME:
        raise InputError(f"{name} = {out_of_range_message(seconds)}")
    return seconds


def _to_seconds(at: Any, name: str) -> int:
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
        unit, _ = np.datetime_data(at.dtype)
        value = int(at.astype(np.int64))
        per_second = {"Y": None, "M": None, "W": 1 / 604800, "D": 1 / 86400, "h": 1 / 3600, "m": 1 / 60, "s": 1,
                      "ms": 1000, "us": 10**6, "ns": 10**9, "ps": 10**12, "fs": 10**15, "as": 10**18}.get(unit)
        if per_second is None or per_second < 1:
            return int(at.astype("datetime64[s]").astype(np.int64))
        return value // int(per_second)  # exact, without numpy's overflow on the cast
    if isinstance(at, str):
        try:
            at = _dt.datetime.fromisoformat(at.replace("Z", "+00:00"))
        except ValueError:
            raise InputError(f"{name} is not an ISO-8601 time: {at!r}") from None
    if isinstance(at, _dt.datetime):
        # pandas.Timestamp is a datetime subclass; NaT is not.
        if at.tzinfo is None:
            at = at.replace(tzinfo=_dt.UTC)
        try:
            return int(math.floor(at.timestamp()))
        except (OverflowError, ValueError):  # 0001-01-01 in a time zone east of UTC
            raise InputError(f"{name} = {at.isoformat()} is outside the supported time range "
                             f"(years 0001 to 9999 UTC)") from None
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
    """A UTC datetime for Unix seconds in the supported range (also before 1970)."""
    return _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC) + _dt.timedelta(seconds=int(seconds))


def even_step(grid: np.ndarray) -> int:
    """The spacing of an evenly spaced grid of int64 times (two or more), else 0."""
    n = grid.size
    if n < 2 or grid.dtype.kind != "i":
        return 0
    step = int(grid[1]) - int(grid[0])
    even = step > 0 and int(grid[-1]) - int(grid[0]) == step * (n - 1) and bool((np.diff(grid) == step).all())
    return step if even else 0


def grid_index(grid: np.ndarray, values: np.ndarray, side: Literal["left", "right"]) -> np.ndarray:
    """``np.searchsorted(grid, values, side)`` for sorted int64 times — by arithmetic when the grid is
    evenly spaced (a consolidation every day: the common schedule), which skips a binary search per
    value (millions of them per sweep chunk), compiled (:func:`factmem.core.compiled.even_grid_index`).
    Float values (or a float grid) take the binary search."""
    values = np.asarray(values)
    step = even_step(grid)
    if step and values.dtype.kind in "iu":
        from factmem.core.compiled import even_grid_index  # (Numba is imported where it is needed)

        return even_grid_index(np.ascontiguousarray(values, dtype=np.int64).ravel(), int(grid[0]), step, grid.size,
                               side == "left").reshape(values.shape)
    return np.searchsorted(grid, values, side=side)

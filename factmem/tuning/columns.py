"""Result tables as files: column names that need no quoting, times that read as times.

In the library a result table's columns are named as the metrics are — ``all.utility@20``,
``decay_rate.episodic`` — which in SQL and in pandas attribute access need quoting. The files of a
run folder (Parquet, ``results.duckdb``) therefore spell every column as a plain identifier
(:func:`file_name`: ``all_utility_at_20``, ``decay_rate_episodic``), and every integer time column
(Unix seconds: ``t``, ``ts``, ``*_at``, ``first_seen``, ...) gets a ``<name>_utc`` companion of
dtype ``datetime64[ns, UTC]`` beside it (NaT where a time lies outside that type's years
1678–2261, e.g. "never"); the integer seconds stay, for anything that reads them.

Each Parquet file records the library's names in its schema metadata (``factmem.columns``), so
:func:`factmem.tuning.runs.load_run` gives back exactly the table that was written — library names,
no companions — whichever way it is read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

import numpy as np
import pandas as pd

from factmem.errors import InputError

__all__ = ["file_name", "to_file", "from_file", "METADATA_KEY", "TIME_COLUMNS", "is_time_column"]

#: schema-metadata key of a Parquet file holding ``{file name: library name}``
METADATA_KEY = b"factmem.columns"
#: integer columns of Unix seconds, by name (also every ``*_at``)
TIME_COLUMNS = frozenset({"t", "ts", "first_seen", "last_reinforced", "valid_from", "valid_to", "relevant_until",
                          "split_at", "start", "end"})
_COMPANION = "_utc"
# datetime64[ns] holds 1677-09-21 .. 2262-04-11: seconds outside become NaT
_NS_LOW, _NS_HIGH = -9_223_372_036, 9_223_372_035


def file_name(name: str) -> str:
    """A column name as a plain identifier: ``@`` reads ``_at_``, anything else not a letter, digit
    or ``_`` becomes ``_`` (``all.utility@20`` -> ``all_utility_at_20``)."""
    plain = re.sub(r"[^0-9A-Za-z_]", "_", name.replace("@", "_at_"))
    return plain if plain and not plain[0].isdigit() else f"c_{plain}"


def is_time_column(name: str, values: pd.Series) -> bool:
    """Whether a column holds Unix seconds (by its name, and an integer dtype)."""
    return (name in TIME_COLUMNS or name.endswith("_at")) and pd.api.types.is_integer_dtype(values.dtype)


def to_file(frame: pd.DataFrame, what: str) -> tuple[pd.DataFrame, dict[str, str]]:
    """The frame as its files hold it, and ``{file name: library name}`` for the renamed columns."""
    names = {str(c): file_name(str(c)) for c in frame.columns}
    renamed = {new: old for old, new in names.items() if new != old}
    out = frame.rename(columns=names)
    for old, new in names.items():
        if is_time_column(old, frame[old]) and f"{new}{_COMPANION}" not in out.columns:
            seconds = frame[old].to_numpy(np.int64)
            ok = (seconds >= _NS_LOW) & (seconds <= _NS_HIGH)
            stamps = pd.to_datetime(np.where(ok, seconds, 0), unit="s", utc=True).astype("datetime64[ns, UTC]")
            out.insert(out.columns.get_loc(new) + 1, f"{new}{_COMPANION}", stamps.where(ok))
            renamed[f"{new}{_COMPANION}"] = ""  # a companion: dropped on reading
    if len(set(out.columns)) != len(out.columns):
        raise InputError(f"table {what!r}: two columns have the same file name: {sorted(map(str, frame.columns))}")
    return out, renamed


def from_file(frame: pd.DataFrame, metadata: Mapping[bytes, bytes] | None) -> pd.DataFrame:
    """A table read from a run's Parquet file, with the library's names (companions dropped)."""
    raw = (metadata or {}).get(METADATA_KEY)
    if raw is None:  # a run written before file names: already the library's
        return frame
    renamed: dict[str, str] = json.loads(raw)
    drop = [c for c, old in renamed.items() if old == "" and c in frame.columns]
    return frame.drop(columns=drop).rename(columns={c: old for c, old in renamed.items() if old})

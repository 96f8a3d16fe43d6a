"""The dataset folder format on the reading side: names, schemas, and validating parsers.

Each parser takes a file's bytes and returns DataFrames, or raises
:class:`~factmem.errors.InputError` naming the file, the line and the field. The fast path is
vectorized (pyarrow's JSON and CSV readers and compute functions); when it finds a problem, a
precise line-by-line pass locates it (that pass only runs once an error is known to exist).
:mod:`factmem.data.logs` builds datasets on top of these. Ground floor: imports only ``errors`` and
``params`` constants.
"""

from __future__ import annotations

import csv
import io
import json
import re
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.json as pajson

from factmem.core.codes import MAX_TIME, MENTION_KINDS, MIN_TIME
from factmem.core.timeutil import check_times, out_of_range_message
from factmem.errors import InputError

__all__ = ["LOG_FILE", "TRUTH_FILE", "GENERALIZATIONS_FILE", "SCENARIO_FILE", "DATASET_FILES", "NOISE_LABELS",
    "NEVER_TRUE_NOISE", "EVENT_COLUMNS", "MESSAGE_COLUMNS", "TRUTH_COLUMNS", "TRUTH_PERIOD_COLUMNS", "BOUND_PERIODS",
    "GENERALIZATION_COLUMNS", "default_scenario", "empty_events", "empty_messages", "empty_truth",
    "empty_generalizations"]

LOG_FILE = "log.jsonl"
TRUTH_FILE = "truth.csv"
GENERALIZATIONS_FILE = "generalizations.csv"
SCENARIO_FILE = "scenario.toml"
DATASET_FILES = (LOG_FILE, TRUTH_FILE, GENERALIZATIONS_FILE, SCENARIO_FILE)

#: Kinds a mention may carry: derived facts come from abstraction, never from a log.
#: Values of truth's ``noise`` column (empty = an ordinary fact).
NOISE_LABELS: tuple[str, ...] = ("misstatement", "irrelevant", "extraction")
#: Noise whose truth row is never true (``valid_from == valid_to`` = the instant it was said):
#: it explains a mention at exactly that instant.
NEVER_TRUE_NOISE: tuple[str, ...] = ("misstatement", "extraction")

EVENT_COLUMNS = ("ts", "subject", "predicate", "object", "kind", "session_id", "message_id", "note")
MESSAGE_COLUMNS = ("session_id", "message_id", "ts", "speaker", "text")
TRUTH_COLUMNS = ("subject", "predicate", "object", "kind", "valid_from", "valid_to", "relevant_until", "noise")
#: Optional truth columns (imported facts): the period a bound is known to — the value began
#: somewhere in [valid_from, valid_from + start_period) and last held in [valid_to - end_period,
#: valid_to). Empty or absent: the bound is exact to the second.
TRUTH_PERIOD_COLUMNS = ("start_period", "end_period")
BOUND_PERIODS: tuple[str, ...] = ("year", "month", "day")
GENERALIZATION_COLUMNS = ("gen_id", "subject", "predicate", "object", "note", "support_predicate", "support_object")

_FACT_FIELDS = ("subject", "predicate", "object", "kind")
_MESSAGE_FIELDS = ("session_id", "message_id", "ts", "speaker", "text", "facts")
_FACT_TYPE = pa.struct([(name, pa.string()) for name in (*_FACT_FIELDS, "note")])
_LOG_SCHEMA = pa.schema(
    [
        ("session_id", pa.string()),
        ("message_id", pa.string()),
        ("ts", pa.int64()),
        ("speaker", pa.string()),
        ("text", pa.string()),
        ("facts", pa.list_(_FACT_TYPE)),
    ]
)
_INT_RE = re.compile(r"^-?[0-9]+$")


def default_scenario(messages: pd.DataFrame) -> dict:
    """The minimal scenario of a log that came without one: its span."""
    if len(messages) == 0:
        return {"start": 0, "end": 0}
    return {"start": int(messages["ts"].min()), "end": int(messages["ts"].max())}


def _parse_log(data: bytes, path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fast typed read; any problem (parse error or failed vectorized check) → precise pass."""
    if not data.strip():
        return empty_messages(), empty_events()
    try:
        table = pajson.read_json(
            pa.BufferReader(data),
            read_options=pajson.ReadOptions(block_size=1 << 24),
            parse_options=pajson.ParseOptions(explicit_schema=_LOG_SCHEMA, unexpected_field_behavior="ignore"),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        _locate_log_error(data, path)
        raise InputError(f"{path}: cannot parse: {exc}") from None

    if not _log_table_ok(table):
        _locate_log_error(data, path)
        raise InputError(f"{path}: invalid log (a vectorized check failed but no line was located)")
    _check_log_times(table["ts"].to_numpy(), path, data)

    messages = table.select(list(MESSAGE_COLUMNS)).to_pandas()
    facts = table["facts"].combine_chunks()
    parent = pc.list_parent_indices(facts).to_numpy()
    flat = pc.list_flatten(facts)
    ts = table["ts"].to_numpy()[parent]
    # Stable sort on ts keeps line order, then position within the message.
    order = np.argsort(ts, kind="stable")
    take = pa.array(order)
    parent_take = pa.array(parent[order])
    events = pa.table(
        {
            "ts": pa.array(ts[order]),
            **{name: pc.take(flat.field(name), take) for name in _FACT_FIELDS},
            "session_id": pc.take(table["session_id"], parent_take),
            "message_id": pc.take(table["message_id"], parent_take),
            "note": pc.take(flat.field("note"), take),
        }
    ).to_pandas()
    return messages, events


def _check_log_times(ts: np.ndarray, path: Path, data: bytes) -> None:
    """Message times in the supported range (years 0001–9999 as seconds), and none that looks like
    milliseconds among seconds: |ts| beyond 1e11 s (year 5138) and ~1000× the log's typical |ts|.
    Long spans themselves are fine (historical data spans millennia)."""
    where = lambda row: f"{path}:{_nth_record_line(data, row)}"  # the line is looked up on error only
    check_times(ts, where)
    if len(ts) < 2:
        return
    magnitude = np.abs(ts.astype(np.float64))
    typical = float(np.median(magnitude))
    odd = np.flatnonzero((magnitude > 1e11) & (magnitude > 500 * max(typical, 1.0)))
    if odd.size:
        row = int(odd[0])
        raise InputError(f"{where(row)}: field 'ts' = {int(ts[row])} is about {magnitude[row] / max(typical, 1.0):,.0f}× "
                         f"the log's typical time ({int(typical)}): it looks like milliseconds among seconds; "
                         "give every time in Unix seconds")


def _log_table_ok(table: pa.Table) -> bool:
    for name in ("session_id", "message_id", "ts", "speaker", "text", "facts"):
        if table[name].null_count:
            return False
    for name in ("session_id", "message_id"):
        if pc.any(pc.equal(pc.utf8_length(table[name]), 0)).as_py():
            return False
    facts = table["facts"].combine_chunks()
    flat = pc.list_flatten(facts)
    if len(flat):
        if flat.null_count:
            return False
        for name in _FACT_FIELDS:
            col = flat.field(name)
            if col.null_count or pc.any(pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(col)), 0)).as_py():
                return False
            if name in ("subject", "predicate") and pc.any(pc.match_substring(col, "\0")).as_py():
                return False
        if not pc.all(pc.is_in(flat.field("kind"), value_set=pa.array(MENTION_KINDS))).as_py():
            return False
    distinct = table.select(["session_id", "message_id"]).group_by(["session_id", "message_id"]).aggregate([])
    return distinct.num_rows == table.num_rows


def _iter_lines(data: bytes) -> Iterator[tuple[int, bytes]]:
    for lineno, line in enumerate(data.split(b"\n"), start=1):
        if line.strip():
            yield lineno, line


def _locate_log_error(data: bytes, path: Path) -> None:
    """The precise pass: raise for the first bad line (only run once a problem is known)."""
    seen: dict[tuple[str, str], int] = {}
    for lineno, line in _iter_lines(data):
        where = f"{path}:{lineno}"
        try:
            text = line.decode("utf-8")
            if lineno == 1:
                text = text.lstrip("\ufeff")
            obj = json.loads(text)
        except UnicodeDecodeError as exc:
            raise InputError(f"{where}: not UTF-8 text ({exc.reason})") from None
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}: invalid JSON at column {exc.colno}: {exc.msg}") from None
        if not isinstance(obj, dict):
            raise InputError(f"{where}: expected a JSON object, got {type(obj).__name__}")
        for name in _MESSAGE_FIELDS:
            if name not in obj or obj[name] is None:
                raise InputError(f"{where}: field {name!r} is missing")
        for name in ("session_id", "message_id", "speaker", "text"):
            if not isinstance(obj[name], str):
                raise InputError(f"{where}: field {name!r} must be a string, got {obj[name]!r}")
        for name in ("session_id", "message_id"):
            if not obj[name]:
                raise InputError(f"{where}: field {name!r} must not be empty")
        ts = obj["ts"]
        if isinstance(ts, bool) or not isinstance(ts, int):
            raise InputError(f"{where}: field 'ts' must be an integer (Unix seconds), got {ts!r}")
        if not MIN_TIME <= ts <= MAX_TIME:
            raise InputError(f"{where}: field 'ts' = {out_of_range_message(ts)}")
        facts = obj["facts"]
        if not isinstance(facts, list):
            raise InputError(f"{where}: field 'facts' must be a list, got {facts!r}")
        for i, fact in enumerate(facts):
            fwhere = f"{where}: facts[{i}]"
            if not isinstance(fact, dict):
                raise InputError(f"{fwhere}: expected an object, got {fact!r}")
            for name in _FACT_FIELDS:
                if name not in fact or fact[name] is None:
                    raise InputError(f"{fwhere}: field {name!r} is missing")
                if not isinstance(fact[name], str) or not fact[name].strip():
                    raise InputError(f"{fwhere}: field {name!r} must be a non-empty string (not only whitespace), "
                                     f"got {fact[name]!r}")
                if name in ("subject", "predicate") and "\0" in fact[name]:  # a fact's key (factmem.store.calls)
                    raise InputError(f"{fwhere}: field {name!r} must not contain NUL (\\0), got {fact[name]!r}")
            if fact["kind"] not in MENTION_KINDS:
                raise InputError(
                    f"{fwhere}: field 'kind' has unknown kind {fact['kind']!r}; expected one of {', '.join(MENTION_KINDS)}"
                )
            note = fact.get("note")
            if note is not None and not isinstance(note, str):
                raise InputError(f"{fwhere}: field 'note' must be a string or null, got {note!r}")
        key = (obj["session_id"], obj["message_id"])
        if key in seen:
            raise InputError(
                f"{where}: field 'message_id': duplicate message id {obj['message_id']!r} in session "
                f"{obj['session_id']!r} (first on line {seen[key]})"
            )
        seen[key] = lineno


def _check_span(scenario: dict, messages: pd.DataFrame, log_path: Path, data: bytes) -> None:
    if not len(messages):
        return
    ts = messages["ts"].to_numpy()
    bad = np.flatnonzero((ts < scenario["start"]) | (ts > scenario["end"]))
    if len(bad):
        lineno = _nth_record_line(data, int(bad[0]))
        raise InputError(
            f"{log_path}:{lineno}: field 'ts' = {int(ts[bad[0]])} is outside the scenario's span "
            f"[start={scenario['start']}, end={scenario['end']}]"
        )


def _nth_record_line(data: bytes, n: int) -> int:
    for i, (lineno, _) in enumerate(_iter_lines(data)):
        if i == n:
            return lineno
    return -1


def _read_csv_strings(data: bytes, path: Path, columns: tuple[str, ...], required: tuple[str, ...]) -> pa.Table:
    """Read a CSV as all-string columns; check the header names every required column."""
    if not data.strip():
        raise InputError(f"{path}:1: empty file (expected a header: {','.join(columns)})")
    header = data.split(b"\n", 1)[0].decode("utf-8", "replace").lstrip("\ufeff").strip()
    names = [h.strip().strip('"') for h in header.split(",")]
    for name in required:
        if name not in names:
            raise InputError(f"{path}:1: field {name!r} is missing from the header")
    try:
        table = pacsv.read_csv(
            pa.BufferReader(data),
            read_options=pacsv.ReadOptions(block_size=1 << 24),
            convert_options=pacsv.ConvertOptions(
                column_types={n: pa.string() for n in names}, strings_can_be_null=False, quoted_strings_can_be_null=False
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        _locate_csv_error(data, path, len(names))
        raise InputError(f"{path}: cannot parse CSV: {exc}") from None
    return table


def _locate_csv_error(data: bytes, path: Path, ncols: int) -> None:
    """The precise pass for a CSV the fast reader rejected: name the line."""
    try:
        text = data.decode("utf-8").lstrip("\ufeff")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(f"{path}:{line}: not UTF-8 text ({exc.reason})") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        for record in reader:
            if record and len(record) != ncols:
                raise InputError(
                    f"{path}:{reader.line_num}: expected {ncols} fields (as in the header), got {len(record)}"
                )
    except csv.Error as exc:
        raise InputError(f"{path}:{reader.line_num}: {exc}") from None


def _str_col(table: pa.Table, name: str) -> pa.Array:
    if name not in table.column_names:
        return pa.array(np.full(table.num_rows, "", dtype=object), pa.string())
    return table[name].combine_chunks()


def _first(mask: pa.Array) -> int | None:
    """Index of the first true value, or None."""
    idx = pc.indices_nonzero(mask)
    return int(idx[0].as_py()) if len(idx) else None


class _CsvRows:
    """Names a data row of a CSV file as ``file:line`` — the physical line its record starts on,
    counting the header, blank lines (which the reader skips) and newlines inside quoted fields.
    Computed only when an error is raised."""

    def __init__(self, path: Path, data: bytes):
        self.path, self.data = path, data

    def line(self, row: int) -> int:
        text = self.data.decode("utf-8", "replace").lstrip("\ufeff")
        reader = csv.reader(io.StringIO(text, newline=""))
        records = -1  # the header is record -1, data rows count from 0
        start = 1
        try:
            for record in reader:
                if record:  # a blank line is no record
                    if records == row:
                        return start
                    records += 1
                start = reader.line_num + 1
        except csv.Error:
            pass
        return row + 2  # not found (cannot happen for a row the reader produced)

    def __call__(self, row: int) -> str:
        return f"{self.path}:{self.line(row)}"


def _int_col(values: pa.Array, at: _CsvRows, name: str, nullable: bool) -> pd.arrays.IntegerArray:
    """Parse an integer column of times; empty → NA when nullable; values outside the supported range
    (years 0001–9999) are refused; errors name the line."""
    empty = pc.equal(values, "")
    if not nullable and (i := _first(empty)) is not None:
        raise InputError(f"{at(i)}: field {name!r} is empty (an integer, Unix seconds, is required)")
    ok = pc.or_(pc.match_substring_regex(values, _INT_RE.pattern), empty)
    if (i := _first(pc.invert(ok))) is not None:
        raise InputError(f"{at(i)}: field {name!r} must be an integer (Unix seconds), got {values[i].as_py()!r}")
    # more than 12 digits is beyond year 9999 as seconds (and may not fit in 64 bits)
    long = pc.greater(pc.utf8_length(pc.utf8_ltrim(values, characters="-0")), 12)
    if (i := _first(long)) is not None:
        raise InputError(f"{at(i)}: field {name!r} = {out_of_range_message(values[i].as_py())}")
    ints = pc.cast(pc.if_else(empty, "0", values), pa.int64())
    check_times(ints.to_numpy(), at, field=name)
    return pd.arrays.IntegerArray(ints.to_numpy(), empty.to_numpy(zero_copy_only=False))


def _nonempty(values: pa.Array, at: _CsvRows, name: str) -> None:
    if (i := _first(pc.equal(pc.utf8_trim_whitespace(values), ""))) is not None:
        what = "is empty" if values[i].as_py() == "" else f"is only whitespace ({values[i].as_py()!r})"
        raise InputError(f"{at(i)}: field {name!r} {what}")


def _parse_truth(data: bytes, path: Path) -> pd.DataFrame:
    required = TRUTH_COLUMNS[:6]  # relevant_until and noise may be left out
    table = _read_csv_strings(data, path, TRUTH_COLUMNS, required)
    at = _CsvRows(path, data)
    cols = {n: _str_col(table, n) for n in TRUTH_COLUMNS}
    for name in ("subject", "predicate", "object", "kind"):
        _nonempty(cols[name], at, name)
    if (i := _first(pc.invert(pc.is_in(cols["kind"], value_set=pa.array(MENTION_KINDS))))) is not None:
        raise InputError(
            f"{at(i)}: field 'kind' has unknown kind {cols['kind'][i].as_py()!r}; "
            f"expected one of {', '.join(MENTION_KINDS)}"
        )
    valid_from = _int_col(cols["valid_from"], at, "valid_from", nullable=False)
    valid_to = _int_col(cols["valid_to"], at, "valid_to", nullable=True)
    relevant = _int_col(cols["relevant_until"], at, "relevant_until", nullable=True)
    vf = valid_from.to_numpy(dtype=np.int64)
    for name, col in (("valid_to", valid_to), ("relevant_until", relevant)):
        bad = (col < valid_from).fillna(False).to_numpy(dtype=bool)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InputError(f"{at(i)}: field {name!r} = {col[i]} is before valid_from = {vf[i]}")
    noise = cols["noise"]
    ok = pc.or_(pc.equal(noise, ""), pc.is_in(noise, value_set=pa.array(NOISE_LABELS)))
    if (i := _first(pc.invert(ok))) is not None:
        raise InputError(
            f"{at(i)}: field 'noise' = {noise[i].as_py()!r}; expected empty or one of {', '.join(NOISE_LABELS)}"
        )
    strs = pa.table({n: cols[n] for n in ("subject", "predicate", "object", "kind")}).to_pandas()
    periods = _parse_periods(table, at, valid_to)
    return _with_periods(_truth_frame(
        subject=strs["subject"],
        predicate=strs["predicate"],
        object=strs["object"],
        kind=strs["kind"],
        valid_from=vf,
        valid_to=valid_to,
        relevant_until=relevant,
        noise=pc.if_else(pc.equal(noise, ""), pa.scalar(None, pa.string()), noise).to_pandas(),
    ), periods)


def _parse_periods(table: pa.Table, at: _CsvRows, valid_to: pd.arrays.IntegerArray) -> dict[str, Any]:
    """The optional period columns present in the file: values checked, empty → missing."""
    out = {}
    for name in TRUTH_PERIOD_COLUMNS:
        if name not in table.column_names:
            continue
        col = _str_col(table, name)
        ok = pc.or_(pc.equal(col, ""), pc.is_in(col, value_set=pa.array(BOUND_PERIODS)))
        if (i := _first(pc.invert(ok))) is not None:
            raise InputError(f"{at(i)}: field {name!r} = {col[i].as_py()!r}; expected empty or one of "
                             f"{', '.join(BOUND_PERIODS)}")
        if name == "end_period":
            dangling = pc.and_(pc.not_equal(col, ""), pa.array(valid_to.isna()))
            if (i := _first(dangling)) is not None:
                raise InputError(f"{at(i)}: field 'end_period' = {col[i].as_py()!r} but valid_to is empty "
                                 "(an open end has no period)")
        out[name] = col.to_pandas()
    return out


def _with_periods(truth: pd.DataFrame, periods: Mapping[str, Any]) -> pd.DataFrame:
    """``truth`` with the optional period columns that are given (never added when absent)."""
    for name in TRUTH_PERIOD_COLUMNS:
        if name in periods:
            col = pd.Series(np.asarray(periods[name], dtype=object))
            truth[name] = col.where(col.notna() & (col != ""), None)
    return truth


def _parse_generalizations(data: bytes, path: Path) -> pd.DataFrame:
    required = tuple(c for c in GENERALIZATION_COLUMNS if c != "note")
    table = _read_csv_strings(data, path, GENERALIZATION_COLUMNS, required)
    at = _CsvRows(path, data)
    cols = {n: _str_col(table, n) for n in GENERALIZATION_COLUMNS}
    for name in required:
        _nonempty(cols[name], at, name)
    frame = pa.table(cols).to_pandas()
    # Every row of one generalization must agree on what it states.
    head = frame.groupby("gen_id", sort=False)[["subject", "predicate", "object"]].transform("first")
    bad = (head != frame[["subject", "predicate", "object"]]).any(axis=1).to_numpy()
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"{at(i)}: field 'gen_id': generalization {frame['gen_id'].iloc[i]!r} states different "
            "(subject, predicate, object) on different rows"
        )
    frame["note"] = frame["note"].where(frame["note"] != "", None)
    return frame


def _parse_scenario(data: bytes, path: Path) -> dict:
    try:
        scenario = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason})") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{path}: invalid TOML: {exc}") from None
    for name in ("start", "end"):
        value = scenario.get(name)
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(f"{path}: field {name!r} must be an integer (Unix seconds), got {value!r}")
        if not MIN_TIME <= value <= MAX_TIME:
            raise InputError(f"{path}: field {name!r} = {out_of_range_message(value)}")
    if scenario["end"] < scenario["start"]:
        raise InputError(f"{path}: field 'end' = {scenario['end']} is before start = {scenario['start']}")
    mvp = scenario.get("multi_valued_predicates", [])
    if not isinstance(mvp, list) or not all(isinstance(p, str) for p in mvp):
        raise InputError(f"{path}: field 'multi_valued_predicates' must be a list of predicate names")
    return scenario


# ------------------------------------------------------------------------------------------
# empty tables and constructors (shared with the generator and the importer)
# ------------------------------------------------------------------------------------------


def empty_events() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "ts": pd.Series([], dtype=np.int64),
            **{c: pd.Series([], dtype="str") for c in EVENT_COLUMNS[1:]},
        }
    )


def empty_messages() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "session_id": pd.Series([], dtype="str"),
            "message_id": pd.Series([], dtype="str"),
            "ts": pd.Series([], dtype=np.int64),
            "speaker": pd.Series([], dtype="str"),
            "text": pd.Series([], dtype="str"),
        }
    )


def empty_truth() -> pd.DataFrame:
    e = np.array([], dtype=object)
    return _truth_frame(e, e, e, e, np.array([], dtype=np.int64), [], [], [])


def empty_generalizations() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series([], dtype="str") for c in GENERALIZATION_COLUMNS})


def _truth_frame(subject, predicate, object, kind, valid_from, valid_to, relevant_until, noise) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "subject": pd.Series(subject, dtype="str"),
            "predicate": pd.Series(predicate, dtype="str"),
            "object": pd.Series(object, dtype="str"),
            "kind": pd.Series(kind, dtype="str"),
            "valid_from": pd.Series(valid_from, dtype=np.int64),
            "valid_to": pd.Series(valid_to, dtype="Int64"),
            "relevant_until": pd.Series(relevant_until, dtype="Int64"),
            "noise": pd.Series(noise, dtype="str"),
        }
    )

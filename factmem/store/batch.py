"""Loading and validating a batch of fact mentions for ``FactStore.ingest``.

A batch is a pandas DataFrame, a pyarrow Table, or a file (Parquet, CSV, JSON lines) with columns
``ts, subject, predicate, object, kind`` and optional ``session_id, message_id, note``. Everything
is checked over whole columns with pyarrow compute; the first bad value is reported with where it
is (file and line, or row), the field and the value. Times must lie in the supported range (years
0001–9999 as Unix seconds, :data:`~factmem.core.codes.MIN_TIME`..:data:`~factmem.core.codes.MAX_TIME`);
they are checked before any cast, so an unsigned or huge value is named, never wrapped around.
Strings must be valid Unicode (a lone surrogate is named with its row); ``subject`` and
``predicate`` must not contain NUL (a fact's key: see :mod:`factmem.store.calls`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from factmem.core.codes import KIND_CODES, KINDS, MAX_TIME, MIN_TIME
from factmem.core.text import is_unicode
from factmem.core.timeutil import check_times
from factmem.errors import InputError

__all__ = ["REQUIRED", "OPTIONAL", "STRING_FIELDS", "Batch", "load_batch", "empty_batch", "encode"]

REQUIRED = ("ts", "subject", "predicate", "object", "kind")
OPTIONAL = ("session_id", "message_id", "note")
STRING_FIELDS = ("subject", "predicate", "object", "kind")


@dataclass
class Batch:
    """A validated batch: ``table`` has exactly REQUIRED + OPTIONAL columns, typed."""

    table: pa.Table
    origin: str
    #: string columns dictionary-encoded once (validation encodes them; the writers reuse the codes)
    _encoded: dict[str, tuple[np.ndarray, pa.Array]] = field(default_factory=dict, repr=False, compare=False)

    def __len__(self) -> int:
        return self.table.num_rows

    def column(self, name: str) -> pa.Array:
        return _flat(self.table.column(name))

    def encoded(self, name: str) -> tuple[np.ndarray, pa.Array]:
        """A string column as (int32 codes, dictionary): ``dictionary[codes[i]]`` is row i's value."""
        if name not in self._encoded:
            self._encoded[name] = encode(self.column(name))
        return self._encoded[name]

    def kind_codes(self) -> np.ndarray:
        """The kind of every row as its code (:data:`~factmem.core.codes.KIND_CODES`)."""
        if "kind_code" not in self._encoded:
            codes, words = self.encoded("kind")
            lookup = np.array([KIND_CODES[k] for k in words.to_pylist()], dtype=np.int8)
            self._encoded["kind_code"] = (lookup[codes], words)
        return self._encoded["kind_code"][0]


def encode(values: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, pa.Array]:
    """Dictionary-encode a string column (no nulls): (int32 codes, dictionary), ``words[codes[i]]`` its
    i-th value — one dictionary for all chunks of a chunked column. Codes stay 32-bit (Arrow's own): a
    batch keeps them for its four string columns while it is written."""
    encoded = pc.dictionary_encode(values)
    if isinstance(encoded, pa.ChunkedArray):
        if encoded.num_chunks == 0:
            return np.empty(0, np.int32), pa.array([], values.type)
        first = encoded.chunk(0).dictionary
        if any(not _same_array(ch.dictionary, first) for ch in encoded.chunks[1:]):
            encoded = encoded.unify_dictionaries()
            first = encoded.chunk(0).dictionary
        codes = np.concatenate([ch.indices.to_numpy(zero_copy_only=False) for ch in encoded.chunks])
        return codes, first
    return encoded.indices.to_numpy(zero_copy_only=False), encoded.dictionary


def _same_array(a: pa.Array, b: pa.Array) -> bool:
    """Whether two arrays are the same memory (Arrow hands every chunk of an encoding one dictionary)."""
    return len(a) == len(b) and a.offset == b.offset and all(
        (x is None and y is None) or (x is not None and y is not None and x.address == y.address)
        for x, y in zip(a.buffers(), b.buffers()))


def _flat(col: pa.ChunkedArray | pa.Array) -> pa.Array:
    if isinstance(col, pa.ChunkedArray):
        return col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    return col


class _Locator:
    """Names a row for error messages: a file line, a Parquet row, or a DataFrame row."""

    def __init__(self, origin: str, *, line_of: Any = None, index: pd.Index | None = None):
        self.origin = origin
        self.line_of = line_of  # row -> physical line of a text file (blank lines, quoted newlines)
        self.index = index

    @property
    def text_file(self) -> bool:
        return self.line_of is not None

    def __call__(self, row: int) -> str:
        if self.line_of is not None:
            return f"{self.origin}: line {self.line_of(row)}"
        if self.index is not None and not isinstance(self.index, pd.RangeIndex):
            return f"{self.origin}: row {row} (index {self.index[row]!r})"
        return f"{self.origin}: row {row}"


def load_batch(events: Any) -> Batch:
    """Read and validate ``events``; raises :class:`InputError` naming the first problem."""
    if isinstance(events, (str, Path)):
        table, where = _read_file(Path(events))
    elif isinstance(events, pd.DataFrame):
        where = _Locator("batch", index=events.index)
        _check_columns(list(events.columns), where.origin)
        table = _frame_to_arrow(events, where)
    elif isinstance(events, pa.Table):
        where = _Locator("batch")
        _check_columns(events.column_names, where.origin)
        table = events
    elif isinstance(events, pa.RecordBatch):
        where = _Locator("batch")
        table = pa.Table.from_batches([events])
        _check_columns(table.column_names, where.origin)
    else:
        raise InputError(
            f"events must be a pandas DataFrame, a pyarrow Table or a file path, got {type(events).__name__}"
        )
    encoded: dict[str, tuple[np.ndarray, pa.Array]] = {}
    return Batch(_validate(table, where, encoded), where.origin, encoded)


def _check_columns(columns: list, origin: str) -> None:
    missing = [c for c in REQUIRED if c not in columns]
    if missing:
        raise InputError(
            f"{origin}: missing column{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}; "
            f"a batch needs {', '.join(REQUIRED)} (optional: {', '.join(OPTIONAL)})"
        )


def _read_file(path: Path) -> tuple[pa.Table, _Locator]:
    if not path.exists():
        raise InputError(f"{path}: no such file")
    suffix = path.suffix.lower()
    try:
        if suffix == ".parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(path)
            where = _Locator(str(path))
        elif suffix in (".csv", ".tsv"):
            import csv

            import pyarrow.csv as pacsv

            with path.open(newline="", encoding="utf-8") as fh:
                head = next(csv.reader(fh, delimiter="\t" if suffix == ".tsv" else ","), [])
            types = {c: pa.string() for c in head}
            table = pacsv.read_csv(
                path,
                parse_options=pacsv.ParseOptions(delimiter="\t" if suffix == ".tsv" else ","),
                convert_options=pacsv.ConvertOptions(column_types=types, strings_can_be_null=False,
                                                     null_values=[]),
            )
            where = _Locator(str(path), line_of=lambda row: _csv_line(path, row, "\t" if suffix == ".tsv" else ","))
        elif suffix in (".jsonl", ".ndjson", ".json"):
            import pyarrow.json as pajson

            table = pajson.read_json(path)
            where = _Locator(str(path), line_of=lambda row: _jsonl_line(path, row))
        else:
            raise InputError(f"{path}: unsupported file type {suffix!r}; use .parquet, .csv, .tsv or .jsonl")
    except pa.ArrowInvalid as exc:
        raise InputError(f"{path}: cannot read: {exc}") from None
    _check_columns(table.column_names, str(path))
    if where.text_file and "ts" in table.column_names and pa.types.is_string(table.schema.field("ts").type):
        table = table.set_column(table.schema.get_field_index("ts"), "ts", _parse_int_strings(table.column("ts"), where))
    if where.text_file and suffix in (".csv", ".tsv"):
        # CSV has no null: an empty optional field means "absent"
        for name in OPTIONAL:
            if name in table.column_names:
                col = _flat(table.column(name))
                table = table.set_column(table.schema.get_field_index(name), name,
                                         pc.if_else(pc.equal(col, ""), pa.scalar(None, pa.string()), col))
    return table, where


def _jsonl_line(path: Path, row: int) -> int:
    """The line of the ``row``-th record of a JSON-lines file (blank lines hold no record)."""
    with path.open("rb") as fh:
        seen = -1
        for lineno, line in enumerate(fh, start=1):
            if line.strip():
                seen += 1
                if seen == row:
                    return lineno
    return row + 1


def _csv_line(path: Path, row: int, delimiter: str) -> int:
    """The line a CSV data row starts on, counting the header, blank lines and quoted newlines."""
    import csv

    with path.open(newline="", encoding="utf-8", errors="replace") as fh:
        reader = csv.reader(fh, delimiter=delimiter)
        seen, start = -2, 1  # the header is record -1
        for record in reader:
            if record:
                seen += 1
                if seen == row:
                    return start
            start = reader.line_num + 1
    return row + 2


def _parse_int_strings(col: pa.ChunkedArray, where: _Locator) -> pa.Array:
    arr = _flat(col)
    stripped = pc.utf8_trim_whitespace(arr)
    ok = pc.match_substring_regex(stripped, r"^[+-]?[0-9]+$")
    bad = np.flatnonzero(~np.asarray(ok.fill_null(False)))
    if bad.size:
        row = int(bad[0])
        raise InputError(f"{where(row)}: field 'ts' must be integer Unix seconds, got {arr[row].as_py()!r}")
    # more than 12 digits is beyond year 9999 as seconds (and may not fit in 64 bits): name it first
    long = np.flatnonzero(np.asarray(pc.greater(pc.utf8_length(pc.utf8_ltrim(stripped, characters="+-0")), 12)
                                     .fill_null(False)))
    if long.size:
        row = int(long[0])
        text = stripped[row].as_py()
        check_times(np.array([int(text)], dtype=object), lambda _: where(row))
    return pc.cast(stripped, pa.int64())


def _frame_to_arrow(df: pd.DataFrame, where: _Locator) -> pa.Table:
    # every column in one pass (DataFrame.items: ~12 us a column, where df[name] costs ~28 us); a
    # name given twice is still looked up (df[name] is then a frame, refused as before)
    series = dict(df.items()) if df.columns.is_unique else {c: df[c] for c in df.columns}
    arrays = {}
    for name in REQUIRED + OPTIONAL:
        if name not in series:
            continue
        s = series[name]
        if name in STRING_FIELDS or name == "note":
            arrays[name] = _series_to_strings(s, name, where, allow_other=False)
        elif name in ("session_id", "message_id"):
            arrays[name] = _series_to_strings(s, name, where, allow_other=True)
        else:  # ts
            arrays[name] = _series_ts(s, where)
    return pa.table(arrays)


def _series_to_strings(s: pd.Series, name: str, where: _Locator, *, allow_other: bool) -> pa.Array:
    if s.dtype != object and pd.api.types.is_string_dtype(s.dtype):  # a string dtype: strings or missing
        # the pandas array itself (pyarrow then takes an Arrow-backed column's own arrays): handed the
        # Series, pyarrow first probes it for three protocol attributes, each a slow miss in pandas'
        # __getattr__ (~40 us a column, as much as the conversion)
        return pa.array(s.array, type=pa.string(), from_pandas=True)
    if len(s) and s.isna().all():
        return pa.nulls(len(s), pa.string())
    if s.dtype == object:
        if pd.api.types.infer_dtype(s, skipna=True) in ("string", "empty"):
            try:
                return pa.array(s.to_numpy(), type=pa.string(), from_pandas=True)
            except UnicodeEncodeError:
                values = s.to_numpy()
                row = next(i for i, v in enumerate(values) if isinstance(v, str) and not is_unicode(v))  # error path
                raise InputError(f"{where(row)}: field {name!r} is not valid Unicode text (a lone surrogate): "
                                 f"{values[row]!r}") from None
        if not allow_other:
            # error path only: find the first value that is not a string
            values = s.to_numpy()
            bad = np.flatnonzero(s.notna().to_numpy() & ~s.map(lambda v: isinstance(v, str)).to_numpy(dtype=bool))
            row = int(bad[0])
            raise InputError(f"{where(row)}: field {name!r} must be a string, got {values[row]!r} "
                             f"({type(values[row]).__name__})")
        texts = s.map(lambda v: None if pd.isna(v) else str(v)).to_numpy()
        try:
            return pa.array(texts, type=pa.string())
        except UnicodeEncodeError:
            row = next(i for i, v in enumerate(texts) if isinstance(v, str) and not is_unicode(v))  # error path
            raise InputError(f"{where(row)}: field {name!r} is not valid Unicode text (a lone surrogate): "
                             f"{texts[row]!r}") from None
    if not allow_other or not pd.api.types.is_integer_dtype(s.dtype):
        raise InputError(f"{where.origin}: column {name!r} must hold strings, got dtype {s.dtype}")
    # ids given as integers are fine: store their text
    return pc.cast(pa.array(s, from_pandas=True), pa.string())


def _series_ts(s: pd.Series, where: _Locator) -> pa.Array:
    dtype = s.dtype
    if pd.api.types.is_datetime64_any_dtype(dtype):
        if s.isna().any():
            row = int(np.flatnonzero(s.isna().to_numpy())[0])
            raise InputError(f"{where(row)}: field 'ts' is missing (NaT)")
        values = s.dt.tz_convert("UTC").dt.tz_localize(None) if getattr(dtype, "tz", None) else s
        return pa.array(values.to_numpy().astype("datetime64[s]").astype(np.int64))
    if pd.api.types.is_bool_dtype(dtype):
        raise InputError(f"{where.origin}: column 'ts' must be integer Unix seconds, got dtype bool")
    if pd.api.types.is_integer_dtype(dtype):
        if isinstance(dtype, pd.api.extensions.ExtensionDtype) and s.isna().any():  # (numpy ints have no NA)
            row = int(np.flatnonzero(s.isna().to_numpy())[0])
            raise InputError(f"{where(row)}: field 'ts' is missing")
        native = s.to_numpy(dtype=getattr(dtype, "numpy_dtype", dtype))
        check_times(native, where)  # before the cast: uint64 2**64-1 must not become -1
        return pa.array(native.astype(np.int64))
    if pd.api.types.is_float_dtype(dtype):
        v = s.to_numpy(dtype=np.float64, na_value=np.nan)
        return pa.array(_whole_float_seconds(v, where))
    raise InputError(f"{where.origin}: column 'ts' must be integer Unix seconds, got dtype {dtype}")


def _whole_float_seconds(v: np.ndarray, where: _Locator) -> np.ndarray:
    """Float seconds → int64, refusing NaN, fractions and values outside the range (before the cast,
    which would turn 1e19 into INT64_MIN)."""
    bad = np.flatnonzero(~np.isfinite(v) | (v != np.floor(v)))
    if bad.size:
        row = int(bad[0])
        raise InputError(f"{where(row)}: field 'ts' must be whole Unix seconds, got {float(v[row])!r}")
    out_of_range = np.flatnonzero((v < MIN_TIME) | (v > MAX_TIME))
    if out_of_range.size:
        row = int(out_of_range[0])
        check_times(np.array([int(v[row])], dtype=object), lambda _: where(row))
    return v.astype(np.int64)


_KIND_WORDS = pa.array(KINDS, pa.string())


def _first_null(col: pa.Array) -> int | None:
    """The first null row (a column's null count is known without a pass over it)."""
    return _first_true(pc.is_null(col)) if col.null_count else None


def _as_string(col: pa.Array) -> pa.Array:
    return col if col.type == pa.string() else pc.cast(col, pa.string())


def _first_true(mask: pa.Array | pa.ChunkedArray) -> int | None:
    hits = np.flatnonzero(np.asarray(_flat(mask).fill_null(True) if isinstance(mask, (pa.Array, pa.ChunkedArray)) else mask))
    return int(hits[0]) if hits.size else None


def _first_row_with(codes: np.ndarray, bad_word: np.ndarray) -> int | None:
    """The first row whose dictionary word is flagged in ``bad_word`` (booleans aligned with the dictionary)."""
    if not bad_word.any():
        return None
    return int(np.flatnonzero(bad_word[codes])[0])


def _flags(mask: pa.Array) -> np.ndarray:
    """A boolean array's values as numpy booleans, null as False."""
    return np.asarray(mask.fill_null(False) if mask.null_count else mask, dtype=bool)


def _validate(table: pa.Table, where: _Locator, encoded: dict[str, tuple[np.ndarray, pa.Array]]) -> pa.Table:
    """The batch's columns checked and typed; the string fields' encodings are left in ``encoded``
    (the checks run on the distinct values, then name the first row holding a bad one)."""
    n = table.num_rows
    out: dict[str, pa.Array] = {"ts": _valid_times(_flat(table.column("ts")), where)}

    # Each string field is checked for its type and nulls, then for empty and NUL words, field after
    # field; the word checks of all fields run as one pass over their dictionaries put end to end
    # (a few compute calls in all instead of a few per field), so a problem with a field's type or
    # nulls is held until the fields before it have had their word checks: the first problem is named.
    held: InputError | None = None
    for name in STRING_FIELDS:
        try:
            out[name] = _string_field(table.column(name), name, n, where)
        except InputError as problem:
            held = problem
            break
    checked = [name for name in STRING_FIELDS if name in out]
    for name in checked:
        encoded[name] = encode(out[name])
    if checked:
        all_words = pa.concat_arrays([encoded[name][1] for name in checked])
        blank = np.asarray(pc.utf8_length(pc.utf8_trim_whitespace(all_words))) == 0
        # subject and predicate come first (STRING_FIELDS): their words are the head of all_words
        keys = sum(len(encoded[name][1]) for name in checked if name in ("subject", "predicate"))
        has_nul = _flags(pc.match_substring(all_words.slice(0, keys), "\0"))
        start = 0
        for name in checked:
            codes, words = encoded[name]
            stop = start + len(words)
            row = _first_row_with(codes, blank[start:stop])
            if row is not None:
                raise InputError(f"{where(row)}: field {name!r} is empty")
            if name in ("subject", "predicate"):  # a fact's key: no NUL (factmem.store.calls)
                row = _first_row_with(codes, has_nul[start:stop])
                if row is not None:
                    raise InputError(f"{where(row)}: field {name!r} must not contain NUL (\\0), got "
                                     f"{out[name][row].as_py()!r}")
            start = stop
    if held is not None:
        raise held
    codes, words = encoded["kind"]
    row = _first_row_with(codes, ~_flags(pc.is_in(words, value_set=_KIND_WORDS)))
    if row is not None:
        raise InputError(
            f"{where(row)}: field 'kind' has unknown value {out['kind'][row].as_py()!r}; kinds are {', '.join(KINDS)}"
        )

    for name in OPTIONAL:
        if name in table.column_names:
            col = _flat(table.column(name))
            if pa.types.is_null(col.type):
                col = pa.nulls(n, pa.string())
            elif not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
                if name == "note" or not (pa.types.is_integer(col.type)):
                    raise InputError(f"{where.origin}: column {name!r} must hold strings, got type {col.type}")
            out[name] = _as_string(col)
        else:
            out[name] = pa.nulls(n, pa.string())
    return pa.table(out)


def _valid_times(ts: pa.Array, where: _Locator) -> pa.Array:
    """The ``ts`` column as int64 Unix seconds, every value checked to lie in the supported range."""
    t = ts.type
    if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_timestamp(t)):
        raise InputError(f"{where.origin}: column 'ts' must be integer Unix seconds, got type {t}")
    row = _first_null(ts)
    if row is not None:
        raise InputError(f"{where(row)}: field 'ts' is missing")
    if pa.types.is_integer(t):
        check_times(ts.to_numpy(zero_copy_only=False), where)  # before the cast (uint64)
        return ts if t == pa.int64() else pc.cast(ts, pa.int64())
    if pa.types.is_floating(t):
        return pa.array(_whole_float_seconds(ts.to_numpy(zero_copy_only=False), where))  # (checks the range)
    raw = ts.cast(pa.int64()).to_numpy(zero_copy_only=False)  # a timestamp, in the column's unit
    per_second = {"s": 1, "ms": 1000, "us": 10**6, "ns": 10**9}[t.unit]
    fraction = np.flatnonzero(raw % per_second != 0)
    if fraction.size:
        row = int(fraction[0])
        raise InputError(f"{where(row)}: field 'ts' must be whole seconds, got {ts[row].as_py()!r}")
    seconds = raw // per_second
    check_times(seconds, where)
    return pa.array(seconds)


def _string_field(column: pa.ChunkedArray, name: str, n: int, where: _Locator) -> pa.Array:
    """A required string field as one string array, refusing another type and nulls."""
    col = _flat(column)
    if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
        if pa.types.is_null(col.type) and n:
            raise InputError(f"{where(0)}: field {name!r} is missing")
        if n:
            raise InputError(f"{where.origin}: column {name!r} must hold strings, got type {col.type}")
        col = pa.array([], pa.string())
    col = _as_string(col)
    row = _first_null(col)
    if row is not None:
        raise InputError(f"{where(row)}: field {name!r} is missing")
    return col


def empty_batch() -> Batch:
    return Batch(pa.table({"ts": pa.array([], pa.int64()), **{c: pa.array([], pa.string()) for c in STRING_FIELDS + OPTIONAL}}), "batch")

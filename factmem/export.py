"""Parameter documents: the versioned TOML/JSON form in which chosen parameters travel to production,
with their provenance; loading with strict validation; and the diff a reviewer reads before a promotion.

A document (``schema = "factmem.params/1"``) is the :class:`~factmem.params.MemoryParams` plain dict
plus two keys::

    schema = "factmem.params/1"
    reinforce_gain = 0.3
    ...                                   # every parameter, always all of them
    [decay_rate]
    explicit = 0.05
    ...
    [provenance]
    run_id = "2026-05-01T12-00-00"
    dataset_sha256 = "9f86d0…"            # 64 hex digits (Dataset.sha256)
    objective = "log_loss"
    factmem_version = "0.1.0"
    created_at = "2026-05-01T12:00:00Z"   # ISO 8601, UTC
    [provenance.metrics]                  # held-out metrics of these parameters
    log_loss = 0.412
    [provenance.default_metrics]          # held-out metrics of the seed's defaults, same split
    log_loss = 0.455

Every provenance key is optional; the known ones are :data:`PROVENANCE_KEYS`. Metric values are
floats; NaN and ±inf are allowed (an undefined AUC, an infinite log loss): TOML writes them natively,
JSON as the strings ``"nan"``, ``"inf"``, ``"-inf"`` so that the file stays strict JSON.

**Legacy files.** A file without a ``schema`` key is a bare parameter table as written by
:meth:`MemoryParams.save`: it loads with the same checks of keys and types, missing parameters take
the seed's defaults (that is how such files were always read), and its provenance is empty. A
``provenance`` table in a file without ``schema`` is an error (it cannot be a legacy file). A
versioned document, in contrast, must list every parameter: a production export never fills in a
number silently.

**Validation** on load: the schema version, unknown keys (top level, per-kind tables, provenance),
wrong types (a string where a number is expected, a bool or a float where an integer is expected,
an integer outside 64 bits), duplicate JSON keys, out-of-range values (MemoryParams' own checks).
Every error is a :class:`~factmem.errors.ParamsFileError` naming the file, the key and the value.
Float parameters accept integers (``confidence_cap = 1``); integer parameters accept only integers.

Round trip: ``load_params_file(write_params_file(p, params, prov))`` returns ``params`` and ``prov``
exactly (floats are written with Python's shortest round-tripping repr).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import json
import math
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import pandas as pd

from . import __version__
from .errors import ExportError, ParamsFileError
from .params import KINDS, PER_KIND_FIELDS, MemoryParams, PerKind, dumps_toml

#: The schema this factmem writes and reads.
PARAMS_SCHEMA = "factmem.params/1"
_SCHEMA_FAMILY = "factmem.params/"

#: Provenance keys and their types, in the order they are written.
PROVENANCE_KEYS: dict[str, str] = {
    "run_id": "string",
    "dataset_sha256": "string",
    "objective": "string",
    "git_commit": "string",
    "factmem_version": "string",
    "created_at": "string",
    "notes": "string",
    "metrics": "table",
    "default_metrics": "table",
}
_METRIC_TABLES = ("metrics", "default_metrics")
_NONFINITE_TEXT = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
_INT64 = (-(2**63), 2**63 - 1)
_SHA256_RE = re.compile(r"[0-9a-fA-F]{64}")


def _field_types() -> dict[str, str]:
    """Each parameter's value type, read off the defaults: a new field of an unknown type fails here,
    loudly, rather than being written or validated wrongly."""
    out: dict[str, str] = {}
    defaults = MemoryParams()
    for f in dataclasses.fields(MemoryParams):
        v = getattr(defaults, f.name)
        if isinstance(v, PerKind):
            out[f.name] = "per_kind"
        elif isinstance(v, bool):
            out[f.name] = "bool"
        elif isinstance(v, int):
            out[f.name] = "int"
        elif isinstance(v, float):
            out[f.name] = "float"
        elif isinstance(v, str):
            out[f.name] = "str"
        elif isinstance(v, frozenset):
            out[f.name] = "str_set"
        else:  # pragma: no cover - guards future fields
            raise TypeError(f"MemoryParams.{f.name}: no document type for {type(v).__name__}")
    return out


FIELD_TYPES: dict[str, str] = _field_types()


# -- the document ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParamsDocument:
    """Parameters plus their provenance, as read from or written to a params file.

    ``schema`` is :data:`PARAMS_SCHEMA`, or ``None`` for a legacy bare parameter file; ``source``
    is the file it was read from, if any.
    """

    params: MemoryParams
    provenance: dict[str, Any] = field(default_factory=dict)
    schema: str | None = PARAMS_SCHEMA
    source: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.params, MemoryParams):
            raise ValueError(f"params must be MemoryParams, got {type(self.params).__name__}")
        object.__setattr__(self, "provenance", validate_provenance(self.provenance, where="provenance"))

    @property
    def legacy(self) -> bool:
        return self.schema is None

    @property
    def label(self) -> str:
        """A short name for tables: the file name, else the run id, else ``params``."""
        if self.source:
            return self.source
        return str(self.provenance.get("run_id", "params"))

    def to_dict(self, *, json_safe: bool = False) -> dict[str, Any]:
        """The plain-dict form written to files: schema, every parameter, provenance (if any)."""
        out: dict[str, Any] = {"schema": PARAMS_SCHEMA}
        out.update(self.params.to_dict())
        if self.provenance:
            prov = {k: (dict(v) if isinstance(v, dict) else v) for k, v in self.provenance.items()}
            if json_safe:
                for name in _METRIC_TABLES:
                    if name in prov:
                        prov[name] = {k: _json_metric(v) for k, v in prov[name].items()}
            out["provenance"] = prov
        return out

    def to_toml(self) -> str:
        return dumps_toml(self.to_dict()) + "\n"

    def to_json(self) -> str:
        return json.dumps(self.to_dict(json_safe=True), indent=2, ensure_ascii=False, allow_nan=False) + "\n"

    @classmethod
    def from_dict(cls, data: Any, *, where: str = "params") -> "ParamsDocument":
        """Validate a parsed document (see the module docstring); errors name ``where`` and the key."""
        return _parse_document(data, where)


def _json_metric(v: float) -> float | str:
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def _describe(value: Any) -> str:
    kind = {bool: "a boolean", str: "a string", int: "an integer", float: "a float", list: "an array",
            dict: "a table"}.get(type(value))
    if kind is None:
        kind = "a datetime" if isinstance(value, (_dt.date, _dt.time)) else f"a {type(value).__name__}"
    shown = ("true" if value else "false") if isinstance(value, bool) else repr(value)
    return f"{shown} ({kind})"


def _err(where: str, key: str, value: Any, why: str) -> ParamsFileError:
    return ParamsFileError(f"{where}: {key} = {_describe(value)}: {why}")


def _check_float(where: str, key: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise _err(where, key, v, "expected a number")
    out = float(v)
    if not math.isfinite(out):
        raise _err(where, key, v, "must be finite")
    return out


def _check_int(where: str, key: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise _err(where, key, v, "expected an integer")
    v = int(v)
    if not _INT64[0] <= v <= _INT64[1]:
        raise _err(where, key, v, "does not fit in a 64-bit integer")
    return v


def _parse_params(data: Mapping[str, Any], where: str, *, complete: bool) -> MemoryParams:
    clean: dict[str, Any] = {}
    for key, value in data.items():
        ftype = FIELD_TYPES.get(key)
        if ftype is None:
            raise _err(where, key, value, f"unknown key; parameters are {', '.join(FIELD_TYPES)}")
        if ftype == "per_kind":
            if not isinstance(value, Mapping):
                raise _err(where, key, value, f"expected a table of {', '.join(KINDS)}")
            table = {}
            for kind, v in value.items():
                name = f"{key}.{kind}"
                if kind not in KINDS:
                    raise _err(where, name, v, f"unknown kind; kinds are {', '.join(KINDS)}")
                table[kind] = _check_float(where, name, v)
            if complete:
                missing = [k for k in KINDS if k not in table]
                if missing:
                    raise ParamsFileError(f"{where}: missing key {key}.{missing[0]} (a versioned document lists every parameter)")
            clean[key] = table
        elif ftype == "float":
            clean[key] = _check_float(where, key, value)
        elif ftype == "int":
            clean[key] = _check_int(where, key, value)
        elif ftype == "str":
            if not isinstance(value, str):
                raise _err(where, key, value, "expected a string")
            clean[key] = value
        elif ftype == "str_set":
            if not isinstance(value, (list, tuple)):
                raise _err(where, key, value, "expected an array of strings")
            seen: set[str] = set()
            for item in value:
                if not isinstance(item, str) or not item:
                    raise _err(where, key, item, "each item must be a non-empty string")
                if item in seen:
                    raise _err(where, key, item, "listed twice")
                seen.add(item)
            clean[key] = list(value)
        else:  # pragma: no cover - FIELD_TYPES has no other type today
            raise _err(where, key, value, f"no validation for type {ftype}")
    if complete:
        missing = [k for k in FIELD_TYPES if k not in clean]
        if missing:
            raise ParamsFileError(f"{where}: missing key {missing[0]} (a versioned document lists every parameter)")
    try:
        return MemoryParams.from_dict(clean)
    except ValueError as exc:  # out of range: MemoryParams names the field and the value
        raise ParamsFileError(f"{where}: {exc}") from None


def _created_at(where: str, v: Any) -> str:
    """An ISO 8601 UTC time as a string; datetimes (TOML's native ones, pandas Timestamps) normalize
    to ``YYYY-MM-DDTHH:MM:SS[.ffffff]Z``."""
    if isinstance(v, _dt.datetime):
        dt = v
    elif isinstance(v, str):
        try:
            dt = _dt.datetime.fromisoformat(v.replace("Z", "+00:00") if v.endswith("Z") else v)
        except ValueError:
            raise _err(where, "provenance.created_at", v, "not an ISO 8601 time") from None
    else:
        raise _err(where, "provenance.created_at", v, "expected an ISO 8601 time string")
    if dt.tzinfo is None or dt.utcoffset() != _dt.timedelta(0):
        raise _err(where, "provenance.created_at", v, "must be in UTC (end with Z or +00:00)")
    if isinstance(v, str):
        return v
    text = dt.replace(tzinfo=None).isoformat()
    return text + "Z"


def validate_provenance(prov: Any, *, where: str = "provenance") -> dict[str, Any]:
    """Check a provenance table (keys, types, sha256 shape, UTC time, float metrics) and return a
    clean copy: known keys in :data:`PROVENANCE_KEYS` order, metric values as Python floats."""
    if prov is None:
        return {}
    if not isinstance(prov, Mapping):
        raise _err(where, "provenance", prov, "expected a table")
    for key, value in prov.items():
        if key not in PROVENANCE_KEYS:
            raise _err(where, f"provenance.{key}", value, f"unknown key; provenance keys are {', '.join(PROVENANCE_KEYS)}")
    out: dict[str, Any] = {}
    for key in PROVENANCE_KEYS:
        if key not in prov:
            continue
        value = prov[key]
        name = f"provenance.{key}"
        if key == "created_at":
            out[key] = _created_at(where, value)
        elif key in _METRIC_TABLES:
            if not isinstance(value, Mapping):
                raise _err(where, name, value, "expected a table of metric name = number")
            metrics: dict[str, float] = {}
            for m, mv in value.items():
                if not isinstance(m, str) or not m:
                    raise _err(where, name, m, "metric names must be non-empty strings")
                if isinstance(mv, str) and mv.lower() in _NONFINITE_TEXT:
                    metrics[m] = _NONFINITE_TEXT[mv.lower()]
                elif isinstance(mv, bool) or not isinstance(mv, (int, float, np.integer, np.floating)):
                    raise _err(where, f"{name}.{m}", mv, "expected a number")
                else:
                    metrics[m] = float(mv)
            out[key] = metrics
        else:
            if not isinstance(value, str):
                raise _err(where, name, value, "expected a string")
            if key == "dataset_sha256" and not _SHA256_RE.fullmatch(value):
                raise _err(where, name, value, "expected 64 hexadecimal digits")
            out[key] = value
    return out


def _parse_document(data: Any, where: str) -> ParamsDocument:
    if not isinstance(data, Mapping):
        raise ParamsFileError(f"{where}: expected a table at the top level, got {_describe(data)}")
    data = dict(data)
    if "schema" not in data:
        if "provenance" in data:
            raise _err(where, "provenance", data["provenance"],
                       f"a provenance table needs schema = {PARAMS_SCHEMA!r} at the top")
        return ParamsDocument(_parse_params(data, where, complete=False), {}, schema=None, source=where)
    schema = data.pop("schema")
    if not isinstance(schema, str):
        raise _err(where, "schema", schema, f"expected the string {PARAMS_SCHEMA!r}")
    if schema != PARAMS_SCHEMA:
        why = (f"unsupported schema version; this factmem {__version__} reads {PARAMS_SCHEMA!r}"
               if schema.startswith(_SCHEMA_FAMILY) else f"not a factmem params document (expected {PARAMS_SCHEMA!r})")
        raise _err(where, "schema", schema, why)
    prov = validate_provenance(data.pop("provenance", None), where=where)
    params = _parse_params(data, where, complete=True)
    return ParamsDocument(params, prov, schema=schema, source=where)


# -- files -----------------------------------------------------------------------------------------


def _format_of(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in (".toml", ".json"):
        return suffix[1:]
    raise ParamsFileError(f"{path}: a params file must end in .toml or .json, got {suffix or 'no suffix'!r}")


def atomic_write(path: str | os.PathLike, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp)`` on a temporary path beside ``path``, then rename it over ``path``.

    On any error the temporary file is removed and ``path`` is untouched: a failed export writes
    nothing. ``OSError`` becomes :class:`ExportError` naming the file."""
    path = Path(path)
    if path.is_dir():
        raise ExportError(f"{path}: is a directory")
    if not path.parent.exists():
        raise ExportError(f"{path}: the folder {path.parent} does not exist")
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    leftovers = (tmp, tmp.with_name(tmp.name + "-journal"), tmp.with_name(tmp.name + ".wal"))
    for stale in leftovers:  # from a crashed earlier run with the same pid
        if stale.exists():
            stale.unlink()
    try:
        write(tmp)
        os.replace(tmp, path)
    except OSError as exc:
        raise ExportError(f"{path}: cannot write: {exc.strerror or exc}") from None
    finally:
        for leftover in leftovers:
            if leftover.exists():
                leftover.unlink()
    return path


def _write_text(path: Path, text: str) -> Path:
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = exc.object[exc.start:exc.end]
        raise ExportError(f"{path}: cannot write {bad!r} as UTF-8 (a lone surrogate in a string value)") from None

    def write(tmp: Path) -> None:
        tmp.write_bytes(data)

    return atomic_write(path, write)


def stamp_provenance(provenance: Mapping[str, Any] | None) -> dict[str, Any]:
    """``provenance`` with ``factmem_version`` (this factmem) and ``created_at`` (now, UTC, whole
    seconds) filled in when absent."""
    prov = dict(provenance or {})
    prov.setdefault("factmem_version", __version__)
    if "created_at" not in prov:
        now = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0)
        prov["created_at"] = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    return prov


def write_params_file(path: str | os.PathLike, params: MemoryParams,
                      provenance: Mapping[str, Any] | None = None, *, stamp: bool = True) -> Path:
    """Write a versioned params document (TOML or JSON by the suffix), atomically.

    ``provenance`` keys are :data:`PROVENANCE_KEYS` (all optional); with ``stamp`` (default) the
    ``factmem_version`` and ``created_at`` keys are filled in when absent — pass ``created_at``
    yourself (a string or datetime) for byte-identical reruns. Invalid provenance raises
    :class:`ParamsFileError` naming the key; nothing is written.
    """
    path = Path(path)
    fmt = _format_of(path)
    prov = stamp_provenance(provenance) if stamp else dict(provenance or {})
    doc = ParamsDocument(params, validate_provenance(prov, where=str(path)))
    return _write_text(path, doc_text(doc, fmt))


def doc_text(doc: ParamsDocument, fmt: str) -> str:
    """The document as ``toml`` or ``json`` text."""
    if fmt == "toml":
        return doc.to_toml()
    if fmt == "json":
        return doc.to_json()
    raise ValueError(f"format must be toml or json, got {fmt!r}")


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ParamsFileError(f"duplicate key {k!r}")
        out[k] = v
    return out


def read_params_document(path: str | os.PathLike) -> ParamsDocument:
    """Read and validate a params file (TOML or JSON by the suffix; versioned or legacy)."""
    path = Path(path)
    fmt = _format_of(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ParamsFileError(f"{path}: no such params file") from None
    except UnicodeDecodeError as exc:
        raise ParamsFileError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise ParamsFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        if fmt == "json":
            data = json.loads(text, object_pairs_hook=_reject_duplicates)
        else:
            data = tomllib.loads(text)
    except ParamsFileError as exc:
        raise ParamsFileError(f"{path}: {exc}") from None
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ParamsFileError(f"{path}: invalid {fmt.upper()}: {exc}") from None
    return _parse_document(data, str(path))


def load_params_file(path: str | os.PathLike) -> tuple[MemoryParams, dict[str, Any]]:
    """``(params, provenance)`` from a params file; provenance is ``{}`` for a legacy file."""
    doc = read_params_document(path)
    return doc.params, doc.provenance


def params_fingerprint(params: MemoryParams) -> str:
    """sha256 of the canonical JSON of the parameters: equal fingerprints, equal parameters."""
    canon = json.dumps(params.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canon.encode("ascii")).hexdigest()


def export_params(source: str | os.PathLike | ParamsDocument | MemoryParams, out: str | os.PathLike,
                  fmt: str | None = None, **rust_options: Any) -> Path:
    """Export a params file (or document) as ``toml``, ``json`` or ``rust`` (default: by ``out``'s
    suffix: .toml, .json, .rs). Provenance is carried over unchanged, so the output is a pure
    function of the input. ``rust_options`` go to :func:`factmem.export_rust.render_rust`."""
    doc = as_document(source)
    out = Path(out)
    if fmt is None:
        fmt = {".toml": "toml", ".json": "json", ".rs": "rust"}.get(out.suffix.lower())
        if fmt is None:
            raise ValueError(f"{out}: cannot tell the format from the suffix; pass --format toml, json or rust")
    if fmt == "rust":
        from .export_rust import render_rust

        return _write_text(out, render_rust(doc, **rust_options))
    if rust_options:
        raise ValueError(f"options {', '.join(rust_options)} apply only to --format rust")
    return _write_text(out, doc_text(doc, fmt))


def as_document(x: str | os.PathLike | ParamsDocument | MemoryParams) -> ParamsDocument:
    """A :class:`ParamsDocument` from a path, a document or bare parameters (empty provenance)."""
    if isinstance(x, ParamsDocument):
        return x
    if isinstance(x, MemoryParams):
        return ParamsDocument(x, {})
    if isinstance(x, (str, os.PathLike)):
        return read_params_document(x)
    raise ValueError(f"expected a params file, ParamsDocument or MemoryParams, got {type(x).__name__}")


# -- diff ---------------------------------------------------------------------------------------------


def _fmt_value(v: Any) -> str:
    if isinstance(v, (list, tuple, frozenset, set)):
        return "[" + ", ".join(sorted(map(str, v))) + "]"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def diff_params(a: Any, b: Any, *, all: bool = False) -> pd.DataFrame:
    """What changes from ``a`` to ``b`` (params files, documents or MemoryParams): one row per flat
    parameter name (``decay_rate.episodic``) that differs, or every parameter with ``all=True``.

    Columns: ``parameter``, ``old``, ``new`` (the values), ``delta`` (new − old for numbers, else
    NaN), ``relative_change`` (delta / |old|; ±inf from 0; NaN for non-numbers), ``note`` (for
    predicate sets: ``+added -removed``).
    """
    pa_, pb = as_document(a).params.to_flat(), as_document(b).params.to_flat()
    rows = []
    for name in MemoryParams.field_names():  # 17 parameters, not facts: a loop is the clear form
        old, new = pa_[name], pb[name]
        numeric = isinstance(old, (int, float)) and isinstance(new, (int, float))
        same = old == new
        if numeric:
            # bit-exact: 0.0 and -0.0 differ in a file even if they compare equal
            same = same and math.copysign(1.0, old) == math.copysign(1.0, new)
        if same and not all:
            continue
        delta = rel = math.nan
        note = ""
        if numeric:
            delta = float(new) - float(old)
            rel = delta / abs(old) if old != 0 else (0.0 if delta == 0 else math.copysign(math.inf, delta))
        elif isinstance(old, list):
            added, removed = sorted(set(new) - set(old)), sorted(set(old) - set(new))
            note = " ".join([f"+{x}" for x in added] + [f"-{x}" for x in removed])
        rows.append({"parameter": name, "old": old, "new": new, "delta": delta, "relative_change": rel, "note": note})
    return pd.DataFrame(rows, columns=["parameter", "old", "new", "delta", "relative_change", "note"])


def diff_metrics(a: Any, b: Any) -> pd.DataFrame:
    """Each side's held-out metrics from its provenance, one row per metric name (indexed by it):
    ``a``, ``a_defaults``, ``b``, ``b_defaults`` and ``b_minus_a``; NaN where a side has none."""
    da, db = as_document(a), as_document(b)
    cols = {
        "a": da.provenance.get("metrics", {}),
        "a_defaults": da.provenance.get("default_metrics", {}),
        "b": db.provenance.get("metrics", {}),
        "b_defaults": db.provenance.get("default_metrics", {}),
    }
    names: list[str] = []
    for table in cols.values():
        names.extend(m for m in table if m not in names)
    df = pd.DataFrame({c: [t.get(m, math.nan) for m in names] for c, t in cols.items()},
                      index=pd.Index(names, name="metric"), dtype="float64")
    df["b_minus_a"] = df["b"] - df["a"]
    return df


def render_diff(a: Any, b: Any, *, all: bool = False) -> str:
    """The text a reviewer reads before promoting ``b`` over ``a``: changed parameters with their
    relative change, then both sides' held-out metrics and a warning when they are not comparable."""
    da, db = as_document(a), as_document(b)
    la, lb = da.label, db.label
    lines = [f"A: {la}{_prov_line(da)}", f"B: {lb}{_prov_line(db)}", ""]
    changes = diff_params(da, db, all=all)
    n_params = len(MemoryParams.field_names())
    if changes.empty:
        lines.append(f"parameters: identical (all {n_params}; fingerprint {params_fingerprint(da.params)[:16]})")
    else:
        n_changed = len(diff_params(da, db)) if all else len(changes)
        lines.append(f"parameters: {n_changed} of {n_params} changed")
        shown = pd.DataFrame({
            "parameter": changes["parameter"],
            "A": changes["old"].map(_fmt_value),
            "B": changes["new"].map(_fmt_value),
            "change": [_fmt_change(r, n) for r, n in zip(changes["relative_change"], changes["note"])],
        })
        lines.append(_indent(shown.to_string(index=False)))
    lines.append("")
    metrics = diff_metrics(da, db)
    if metrics.empty:
        lines.append("held-out metrics: none recorded in either provenance")
    else:
        shown = metrics.rename(columns={"a": "A", "a_defaults": "A defaults", "b": "B", "b_defaults": "B defaults",
                                        "b_minus_a": "B - A"})
        objective = db.provenance.get("objective") or da.provenance.get("objective")
        lines.append("held-out metrics (from provenance)" + (f"; objective: {objective}" if objective else "") + ":")
        lines.append(_indent(shown.reset_index().to_string(index=False, float_format=lambda v: f"{v:.6g}", na_rep="-")))
        sa, sb = da.provenance.get("dataset_sha256"), db.provenance.get("dataset_sha256")
        if sa and sb and sa != sb:
            lines.append(f"warning: A and B were evaluated on different datasets (sha256 {sa[:12]}… vs {sb[:12]}…); "
                         "compare each side with its own defaults, not A with B")
        elif not (sa and sb):
            lines.append("note: a side records no dataset_sha256; metrics may come from different data")
    return "\n".join(lines) + "\n"


def _prov_line(doc: ParamsDocument) -> str:
    p = doc.provenance
    bits = [f"{k} {p[k]}" for k in ("run_id", "created_at") if k in p]
    if doc.legacy:
        bits.append("legacy file, no provenance")
    return f" ({', '.join(bits)})" if bits else ""


def _fmt_change(rel: float, note: str) -> str:
    if note:
        return note
    if math.isnan(rel):
        return "changed"
    if math.isinf(rel):
        return "from 0"
    return f"{rel:+.1%}"


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())

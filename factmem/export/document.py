"""Parameter documents: the versioned TOML/JSON form in which chosen parameters travel to production,
with their provenance; loading with strict validation; and the diff a reviewer reads before a promotion.

A document (``schema = "factmem.params/1"``) is the :class:`~factmem.core.params.MemoryParams` plain dict
plus the ``schema`` key, the ``schedule`` table and the ``provenance`` table::

    schema = "factmem.params/1"
    reinforce_gain = 0.3
    ...                                   # every parameter, always all of them
    [decay_rate]
    explicit = 0.05
    ...
    [decay_rate_by_predicate]             # only when some predicate has its own rate
    works_on = 0.0103
    [schedule]                            # the consolidation schedule the values were tuned with
    consolidate_every_seconds = 86400     # (factmem.core.schedule; absent in older files: daily)
    anchor = "1970-01-01T00:00:00Z"       # at multiples of the period since the epoch: midnight UTC
    [provenance]
    run_id = "2026-05-01T12-00-00"
    dataset_sha256 = "9f86d0…"            # 64 hex digits (Dataset.sha256)
    objective = "log_loss"
    factmem_version = "0.1.0"
    created_at = "2026-05-01T12:00:00Z"   # ISO 8601, UTC
    [provenance.metrics]                  # held-out metrics of these parameters
    utility_at_20 = 0.822
    [provenance.baseline_metrics]         # held-out metrics of what the decision judged them against
    utility_at_20 = 0.769
    [provenance.judgement]                # the judged comparison: numbers and words
    against = "baseline"
    objective = "utility@20"
    difference = 0.0529
    low = 0.0451
    high = 0.0611

``default_metrics`` (held-out metrics of the seed's defaults) is still read, from files written
before the judged comparison replaced it; ``factmem tune`` no longer writes it — the decision never
compared with the pure seed defaults. ``judgement`` is a flat table of name = number or string.

Every provenance key is optional; the known ones are :data:`PROVENANCE_KEYS`. Metric values are
floats; NaN and ±inf are allowed (an undefined AUC, an infinite log loss): TOML writes them natively,
JSON as the strings ``"nan"``, ``"inf"``, ``"-inf"`` so that the file stays strict JSON.

**Legacy files.** A file without a ``schema`` key is a bare parameter table as written by
:meth:`MemoryParams.save`: it loads with the same checks of keys and types, missing parameters take
the seed's defaults (that is how such files were always read), and its provenance is empty. A
``provenance`` table in a file without ``schema`` is an error (it cannot be a legacy file). A
versioned document, in contrast, must list every parameter — a production export never fills in a
number silently — with two exceptions. The options of :data:`ADDED_FIELDS` (``link_scope``), added
after the schema's first files: absent, they take the seed's value, as the memory that wrote the file
behaved. And ``decay_rate_by_predicate`` (predicate = rate per day): it is written only when it has
entries, and its absence means "no per-predicate rates" — exactly what a document written before the
table existed meant — so no number is filled in.

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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from factmem import __version__
from factmem.core.codes import KINDS
from factmem.core.params import MemoryParams, PerKind, PerPredicate, dumps_toml
from factmem.core.schedule import CONSOLIDATE_EVERY_SECONDS, CONSOLIDATION_ANCHOR_TEXT, check_period
from factmem.errors import InputError, ParamsFileError
from factmem.export.atomic import write_text

__all__ = ["PARAMS_SCHEMA", "PROVENANCE_KEYS", "FIELD_TYPES", "ParamsDocument", "validate_provenance",
    "stamp_provenance", "write_params_file", "doc_text", "read_params_document", "load_params_file",
    "params_fingerprint", "as_document"]

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
    "baseline_metrics": "table",
    "judgement": "mixed_table",
    "default_metrics": "table",
}
_METRIC_TABLES = ("metrics", "baseline_metrics", "default_metrics")
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
        elif isinstance(v, PerPredicate):
            out[f.name] = "per_predicate"
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

#: Parameters added after ``factmem.params/1`` documents were first written. A versioned document
#: written before one existed does not list it; it loads with the seed's value, which is what the
#: memory that wrote the file did (a non-number option only: numbers are never filled in silently).
ADDED_FIELDS: frozenset[str] = frozenset({"link_scope"})


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
    consolidate_every_seconds: int = CONSOLIDATE_EVERY_SECONDS

    def __post_init__(self) -> None:
        if not isinstance(self.params, MemoryParams):
            raise InputError(f"params must be MemoryParams, got {type(self.params).__name__}")
        object.__setattr__(self, "provenance", validate_provenance(self.provenance, where="provenance"))
        check_period(self.consolidate_every_seconds)

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
        out["schedule"] = {"consolidate_every_seconds": self.consolidate_every_seconds,
                           "anchor": CONSOLIDATION_ANCHOR_TEXT}
        if self.provenance:
            prov = {k: (dict(v) if isinstance(v, dict) else v) for k, v in self.provenance.items()}
            if json_safe:
                for name in _METRIC_TABLES:
                    if name in prov:
                        prov[name] = {k: _json_metric(v) for k, v in prov[name].items()}
                if "judgement" in prov:
                    prov["judgement"] = {k: v if isinstance(v, str) else _json_metric(v)
                                         for k, v in prov["judgement"].items()}
            out["provenance"] = prov
        return out

    def to_toml(self) -> str:
        return dumps_toml(self.to_dict()) + "\n"

    def to_json(self) -> str:
        return json.dumps(self.to_dict(json_safe=True), indent=2, ensure_ascii=False, allow_nan=False) + "\n"

    @classmethod
    def from_dict(cls, data: Any, *, where: str = "params") -> ParamsDocument:
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
                missing_kinds = [k for k in KINDS if k not in table]
                if missing_kinds:
                    raise ParamsFileError(f"{where}: missing key {key}.{missing_kinds[0]} "
                                          "(a versioned document lists every parameter)")
            clean[key] = table
        elif ftype == "per_predicate":
            if not isinstance(value, Mapping):
                raise _err(where, key, value, "expected a table of predicate = rate per day")
            clean[key] = {predicate: _check_float(where, f"{key}.{predicate}", v) for predicate, v in value.items()}
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
    if complete:  # options added later default to the seed; an absent per-predicate table means none
        missing = [k for k in FIELD_TYPES if k not in clean and k not in ADDED_FIELDS
                   and FIELD_TYPES[k] != "per_predicate"]
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
        elif key == "judgement":
            if not isinstance(value, Mapping):
                raise _err(where, name, value, "expected a table of name = number or string")
            judged: dict[str, float | str] = {}
            for m, mv in value.items():
                if not isinstance(m, str) or not m:
                    raise _err(where, name, m, "names must be non-empty strings")
                if isinstance(mv, str):
                    judged[m] = _NONFINITE_TEXT[mv.lower()] if mv.lower() in _NONFINITE_TEXT else mv
                elif isinstance(mv, bool) or not isinstance(mv, (int, float, np.integer, np.floating)):
                    raise _err(where, f"{name}.{m}", mv, "expected a number or a string")
                else:
                    judged[m] = float(mv)
            out[key] = judged
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
    period = _parse_schedule(data.pop("schedule", None), where)
    params = _parse_params(data, where, complete=True)
    return ParamsDocument(params, prov, schema=schema, source=where, consolidate_every_seconds=period)


def _parse_schedule(table: Any, where: str) -> int:
    """The ``[schedule]`` table: the consolidation period (seconds) and its anchor. Absent (documents
    written before it): the daily schedule every tuning has assumed."""
    if table is None:
        return CONSOLIDATE_EVERY_SECONDS
    if not isinstance(table, Mapping):
        raise _err(where, "schedule", table, "expected a table")
    for key, value in table.items():
        if key not in ("consolidate_every_seconds", "anchor"):
            raise _err(where, f"schedule.{key}", value, "unknown key; schedule keys are consolidate_every_seconds, anchor")
    anchor = table.get("anchor", CONSOLIDATION_ANCHOR_TEXT)
    if anchor != CONSOLIDATION_ANCHOR_TEXT:
        raise _err(where, "schedule.anchor", anchor, f"the only supported anchor is {CONSOLIDATION_ANCHOR_TEXT!r} "
                                                      "(consolidations at multiples of the period since the epoch)")
    period = table.get("consolidate_every_seconds", CONSOLIDATE_EVERY_SECONDS)
    if isinstance(period, bool) or not isinstance(period, int) or period <= 0:
        raise _err(where, "schedule.consolidate_every_seconds", period, "expected a positive whole number of seconds")
    return _check_int(where, "schedule.consolidate_every_seconds", period)


# -- reading and writing --------------------------------------------------------------------------------------


def _format_of(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in (".toml", ".json"):
        return suffix[1:]
    raise ParamsFileError(f"{path}: a params file must end in .toml or .json, got {suffix or 'no suffix'!r}")


def stamp_provenance(provenance: Mapping[str, Any] | None) -> dict[str, Any]:
    """``provenance`` with ``factmem_version`` (this factmem) and ``created_at`` (now, UTC, whole
    seconds) filled in when absent."""
    prov = dict(provenance or {})
    prov.setdefault("factmem_version", __version__)
    if "created_at" not in prov:
        now = _dt.datetime.now(_dt.UTC).replace(microsecond=0)
        prov["created_at"] = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    return prov


def write_params_file(path: str | os.PathLike, params: MemoryParams,
                      provenance: Mapping[str, Any] | None = None, *, stamp: bool = True,
                      consolidate_every_seconds: int = CONSOLIDATE_EVERY_SECONDS) -> Path:
    """Write a versioned params document (TOML or JSON by the suffix), atomically.
    ``consolidate_every_seconds``: the consolidation period the parameters were chosen with (its
    ``[schedule]`` table).

    ``provenance`` keys are :data:`PROVENANCE_KEYS` (all optional); with ``stamp`` (default) the
    ``factmem_version`` and ``created_at`` keys are filled in when absent — pass ``created_at``
    yourself (a string or datetime) for byte-identical reruns. Invalid provenance raises
    :class:`ParamsFileError` naming the key; nothing is written.
    """
    path = Path(path)
    fmt = _format_of(path)
    prov = stamp_provenance(provenance) if stamp else dict(provenance or {})
    doc = ParamsDocument(params, validate_provenance(prov, where=str(path)),
                         consolidate_every_seconds=consolidate_every_seconds)
    return write_text(path, doc_text(doc, fmt))


def doc_text(doc: ParamsDocument, fmt: str) -> str:
    """The document as ``toml`` or ``json`` text."""
    if fmt == "toml":
        return doc.to_toml()
    if fmt == "json":
        return doc.to_json()
    raise InputError(f"format must be toml or json, got {fmt!r}")


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
        text = path.read_text(encoding="utf-8-sig")  # a byte-order mark (Windows editors write one) is skipped
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
    except RecursionError:
        raise ParamsFileError(f"{path}: invalid {fmt.upper()}: nested too deep to read") from None
    except ValueError as exc:  # e.g. an integer of thousands of digits (Python's int conversion limit)
        raise ParamsFileError(f"{path}: invalid {fmt.upper()}: {exc}") from None
    try:
        return _parse_document(data, str(path))
    except RecursionError:
        raise ParamsFileError(f"{path}: a value is nested too deep") from None


def load_params_file(path: str | os.PathLike) -> tuple[MemoryParams, dict[str, Any]]:
    """``(params, provenance)`` from a params file; provenance is ``{}`` for a legacy file."""
    doc = read_params_document(path)
    return doc.params, doc.provenance


def params_fingerprint(params: MemoryParams) -> str:
    """sha256 of the canonical JSON of the parameters: equal fingerprints, equal parameters.

    An option of :data:`ADDED_FIELDS` at its seed value is left out, so parameters that existed
    before it keep the fingerprint they always had."""
    seed = MemoryParams()
    data = {k: v for k, v in params.to_dict().items()
            if not (k in ADDED_FIELDS and getattr(params, k) == getattr(seed, k))}
    canon = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canon.encode("ascii")).hexdigest()


def as_document(x: str | os.PathLike | ParamsDocument | MemoryParams) -> ParamsDocument:
    """A :class:`ParamsDocument` from a path, a document or bare parameters (empty provenance)."""
    if isinstance(x, ParamsDocument):
        return x
    if isinstance(x, MemoryParams):
        return ParamsDocument(x, {})
    if isinstance(x, (str, os.PathLike)):
        return read_params_document(x)
    raise InputError(f"expected a params file, ParamsDocument or MemoryParams, got {type(x).__name__}")

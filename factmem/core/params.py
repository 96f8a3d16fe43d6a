"""Every tunable number of the memory, validated, immutable, serializable.

>>> p = MemoryParams()
>>> p.decay_rate.episodic
0.3
>>> q = p.replace(reinforce_gain=0.2, decay_rate={"episodic": 0.25})
>>> MemoryParams.from_toml(q.to_toml()) == q
True

**Per-predicate decay rates.** ``decay_rate_by_predicate`` maps a predicate to its own rate per day
(empty by default: the seed, where a fact's rate is its kind's). A fact inserted with a predicate in
the table takes that rate whatever its kind; any other takes its kind's rate
(:meth:`MemoryParams.decay_rate_for`). Like the kind rates, the rate is stored with the fact at insert
and kept by reinforcement.

>>> r = p.replace(**{"decay_rate_by_predicate.works_on": 0.01})
>>> r.decay_rate_for("explicit", "works_on"), r.decay_rate_for("explicit", "born_in")
(0.01, 0.05)
>>> r.to_flat()["decay_rate_by_predicate.works_on"]
0.01

An empty table is left out of :meth:`~MemoryParams.to_dict` (and so of TOML, JSON and the fingerprint
of a params document): parameters without per-predicate rates serialize exactly as before the table
existed.
"""

from __future__ import annotations

import dataclasses
import json
import math
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from factmem.core.codes import KIND_CODES, KINDS, LINK_SCOPES, REINFORCE_BASES, LinkScope, ReinforceBase
from factmem.errors import ParamsError, ParamsFileError

__all__ = ["SEED_DECAY_RATE", "SEED_INITIAL_CONFIDENCE", "PER_KIND_FIELDS", "PerKind", "MemoryParams",
    "DEFAULT_PARAMS", "toml_string", "toml_value", "dumps_toml"]

SEED_DECAY_RATE = {"explicit": 0.05, "user_preference": 0.02, "episodic": 0.30, "derived": 0.02}
SEED_INITIAL_CONFIDENCE = {"explicit": 0.4, "user_preference": 0.5, "episodic": 0.4, "derived": 0.5}

PER_KIND_FIELDS: tuple[str, ...] = ("decay_rate", "initial_confidence")
#: The predicate -> rate table; flat names are ``decay_rate_by_predicate.<predicate>``.
PER_PREDICATE_FIELD = "decay_rate_by_predicate"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


def _as_float(name: str, value: Any) -> float:
    if not _is_number(value):
        raise ParamsError(f"{name} must be a number, got {value!r}")
    out = float(value)
    if not math.isfinite(out):
        raise ParamsError(f"{name} must be finite, got {value!r}")
    return out


def _as_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        if isinstance(value, (float, np.floating)) and float(value).is_integer():
            return int(value)
        raise ParamsError(f"{name} must be an integer, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class PerKind:
    """One float per fact kind; indexable by kind name (``pk["episodic"]``) or attribute."""

    explicit: float
    user_preference: float
    episodic: float
    derived: float

    def __getitem__(self, kind: str) -> float:
        if kind not in KIND_CODES:
            raise KeyError(f"unknown kind {kind!r}; kinds are {', '.join(KINDS)}")
        return getattr(self, kind)

    def to_dict(self) -> dict[str, float]:
        return {k: getattr(self, k) for k in KINDS}

    def as_array(self) -> np.ndarray:
        """Values in KIND_CODES order, for lookups by integer kind code."""
        return np.array([getattr(self, k) for k in KINDS], dtype=np.float64)

    @classmethod
    def build(cls, name: str, values: Mapping[str, Any] | PerKind, base: PerKind | None = None) -> PerKind:
        if isinstance(values, PerKind):
            values = values.to_dict()
        if not isinstance(values, Mapping):
            raise ParamsError(f"{name} must be a table of kind -> number, got {values!r}")
        unknown = [k for k in values if k not in KIND_CODES]
        if unknown:
            raise ParamsError(f"{name}: unknown kind {unknown[0]!r}; kinds are {', '.join(KINDS)}")
        merged = base.to_dict() if base is not None else {}
        for k, v in values.items():
            merged[k] = _as_float(f"{name}.{k}", v)
        missing = [k for k in KINDS if k not in merged]
        if missing:
            raise ParamsError(f"{name}: missing kind {missing[0]!r}")
        return cls(**merged)


class PerPredicate(Mapping[str, float]):
    """An immutable, hashable table predicate -> rate per day (``decay_rate_by_predicate``), sorted by
    predicate. Each predicate is a non-empty string, each rate a finite number >= 0; errors name the
    predicate and the value (``decay_rate_by_predicate.works_on = -0.1 is invalid: must be >= 0``).

    >>> t = PerPredicate({"works_on": 0.01, "born_in": 0})
    >>> list(t), t["born_in"], t == {"born_in": 0.0, "works_on": 0.01}
    (['born_in', 'works_on'], 0.0, True)
    """

    __slots__ = ("_items",)
    _items: tuple[tuple[str, float], ...]

    def __init__(self, values: Mapping[str, Any] | None = None, *, name: str = PER_PREDICATE_FIELD):
        if values is None:
            values = {}
        if isinstance(values, PerPredicate):
            object.__setattr__(self, "_items", values._items)
            return
        if not isinstance(values, Mapping):
            raise ParamsError(f"{name} must be a table of predicate -> rate per day, got {values!r}")
        items = []
        for predicate, value in values.items():
            if not isinstance(predicate, str) or not predicate:
                raise ParamsError(f"{name}: each predicate must be a non-empty string, got {predicate!r}")
            rate = _as_float(f"{name}.{predicate}", value)
            if rate < 0:
                raise ParamsError(f"{name}.{predicate} = {value!r} is invalid: must be >= 0")
            items.append((predicate, rate))
        object.__setattr__(self, "_items", tuple(sorted(items)))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("PerPredicate is immutable")

    def __getitem__(self, predicate: str) -> float:
        for name, rate in self._items:  # a handful of predicates: a scan is the clear form
            if name == predicate:
                return rate
        raise KeyError(predicate)

    def __iter__(self):
        return (name for name, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PerPredicate):
            return self._items == other._items
        if isinstance(other, Mapping):
            return dict(self._items) == dict(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._items)

    def __repr__(self) -> str:
        return f"PerPredicate({dict(self._items)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (PerPredicate, (dict(self._items),))

    def to_dict(self) -> dict[str, float]:
        return dict(self._items)


@dataclass(frozen=True)
class MemoryParams:
    """The numbers that govern a fact memory. Defaults are the seed's.

    Immutable: use :meth:`replace` to derive a variant. Per-kind fields accept a partial
    mapping in ``replace`` (``decay_rate={"episodic": 0.2}``) or dotted names
    (``replace(**{"decay_rate.episodic": 0.2})``). ``decay_rate_by_predicate``: a mapping replaces
    the whole table; a dotted name sets one predicate's rate
    (``replace(**{"decay_rate_by_predicate.works_on": 0.01})``), ``None`` removes it.
    """

    decay_rate: PerKind = field(default_factory=lambda: PerKind(**SEED_DECAY_RATE))
    initial_confidence: PerKind = field(default_factory=lambda: PerKind(**SEED_INITIAL_CONFIDENCE))
    reinforce_gain: float = 0.3
    confidence_cap: float = 0.99
    archive_threshold: float = 0.05
    retrieval_threshold: float = 0.05
    prune_min_reinforcements: int = 2
    min_cluster: int = 3
    max_facts: int = 2
    temperature: float = 0.0
    reinforce_base: ReinforceBase = "stored"
    multi_valued_predicates: frozenset[str] = frozenset()
    link_scope: LinkScope = "cluster"
    decay_rate_by_predicate: PerPredicate = field(default_factory=PerPredicate)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        # a partial table fills in from the seed's values
        set_(self, "decay_rate", PerKind.build("decay_rate", self.decay_rate, base=PerKind(**SEED_DECAY_RATE)))
        set_(self, "initial_confidence", PerKind.build("initial_confidence", self.initial_confidence,
                                                       base=PerKind(**SEED_INITIAL_CONFIDENCE)))
        for name in ("reinforce_gain", "confidence_cap", "archive_threshold", "retrieval_threshold", "temperature"):
            set_(self, name, _as_float(name, getattr(self, name)))
        for name in ("prune_min_reinforcements", "min_cluster", "max_facts"):
            set_(self, name, _as_int(name, getattr(self, name)))
        mvp = self.multi_valued_predicates
        if isinstance(mvp, str) or not isinstance(mvp, Iterable):
            raise ParamsError(f"multi_valued_predicates must be a set of predicate names, got {mvp!r}")
        mvp = frozenset(mvp)
        for p in mvp:
            if not isinstance(p, str) or not p:
                raise ParamsError(f"multi_valued_predicates: each predicate must be a non-empty string, got {p!r}")
        set_(self, "multi_valued_predicates", mvp)
        set_(self, PER_PREDICATE_FIELD, PerPredicate(self.decay_rate_by_predicate))
        self._validate()

    def _validate(self) -> None:
        def bad(name: str, value: Any, why: str) -> ParamsError:
            return ParamsError(f"{name} = {value!r} is invalid: {why}")

        for k in KINDS:
            rate = self.decay_rate[k]
            if rate < 0:
                raise bad(f"decay_rate.{k}", rate, "must be >= 0")
        if not 0.0 < self.confidence_cap <= 1.0:
            raise bad("confidence_cap", self.confidence_cap, "must be in (0, 1]")
        for k in KINDS:
            c0 = self.initial_confidence[k]
            if not 0.0 < c0 <= self.confidence_cap:
                raise bad(f"initial_confidence.{k}", c0, f"must be in (0, confidence_cap={self.confidence_cap}]")
        if not 0.0 < self.reinforce_gain <= 1.0:
            raise bad("reinforce_gain", self.reinforce_gain, "must be in (0, 1]")
        if not 0.0 <= self.archive_threshold < self.confidence_cap:
            raise bad("archive_threshold", self.archive_threshold, f"must be in [0, confidence_cap={self.confidence_cap})")
        if not 0.0 <= self.retrieval_threshold <= self.confidence_cap:
            raise bad("retrieval_threshold", self.retrieval_threshold, f"must be in [0, confidence_cap={self.confidence_cap}]")
        if self.prune_min_reinforcements < 1:
            raise bad("prune_min_reinforcements", self.prune_min_reinforcements, "must be >= 1")
        if self.min_cluster < 1:
            raise bad("min_cluster", self.min_cluster, "must be >= 1")
        if self.max_facts < 1:
            raise bad("max_facts", self.max_facts, "must be >= 1")
        if self.temperature < 0:
            raise bad("temperature", self.temperature, "must be >= 0")
        if self.reinforce_base not in REINFORCE_BASES:
            raise bad("reinforce_base", self.reinforce_base, f"must be one of {', '.join(REINFORCE_BASES)}")
        if not isinstance(self.link_scope, str) or self.link_scope not in LINK_SCOPES:
            raise ParamsError(f"link_scope = {self.link_scope!r} is invalid: must be one of {', '.join(LINK_SCOPES)}")

    # -- derivation -------------------------------------------------------------------------

    def replace(self, **changes: Any) -> MemoryParams:
        """A copy with some fields changed; per-kind fields merge (see class docstring)."""
        nested: dict[str, Any] = {}
        table: Mapping[str, Any] | None = None  # a whole new decay_rate_by_predicate
        one_rate: dict[str, Any] = {}  # decay_rate_by_predicate.<predicate> changes, applied after it
        for name, value in changes.items():
            if name == PER_PREDICATE_FIELD:
                if not isinstance(value, Mapping):
                    raise ParamsError(f"{name} must be a table of predicate -> rate per day, got {value!r}")
                table = value
                continue
            if name.startswith(PER_PREDICATE_FIELD + "."):
                one_rate[name[len(PER_PREDICATE_FIELD) + 1:]] = value
                continue
            if "." in name:
                head, kind = name.split(".", 1)
                if head not in PER_KIND_FIELDS:
                    raise ParamsError(f"unknown parameter {name!r}; known: {', '.join(self.field_names())}")
                nested.setdefault(head, {})[kind] = value
            else:
                if name not in _FIELD_NAMES:
                    raise ParamsError(f"unknown parameter {name!r}; known: {', '.join(self.field_names())}")
                if name in PER_KIND_FIELDS and isinstance(value, (Mapping, PerKind)):
                    items = value.to_dict() if isinstance(value, PerKind) else dict(value)
                    nested.setdefault(name, {}).update(items)
                else:
                    nested[name] = value
        for name in PER_KIND_FIELDS:
            if name in nested:
                nested[name] = PerKind.build(name, nested[name], base=getattr(self, name))
        if table is not None or one_rate:
            rates = dict(table if table is not None else self.decay_rate_by_predicate)
            for predicate, value in one_rate.items():
                if value is None:
                    rates.pop(predicate, None)
                else:
                    rates[predicate] = value
            nested[PER_PREDICATE_FIELD] = PerPredicate(rates)
        return dataclasses.replace(self, **nested)

    @staticmethod
    def field_names() -> list[str]:
        """Flat names of the parameters every parameter set has, per-kind fields dotted:
        ``decay_rate.episodic``. The per-predicate table's names depend on its predicates
        (``decay_rate_by_predicate.works_on``): see :meth:`flat_names` and :meth:`is_flat_name`."""
        out: list[str] = []
        for f in dataclasses.fields(MemoryParams):
            if f.name in PER_KIND_FIELDS:
                out.extend(f"{f.name}.{k}" for k in KINDS)
            elif f.name != PER_PREDICATE_FIELD:
                out.append(f.name)
        return out

    def flat_names(self) -> list[str]:
        """This parameter set's flat names: :meth:`field_names`, then one
        ``decay_rate_by_predicate.<predicate>`` per entry of the table (sorted)."""
        return self.field_names() + [f"{PER_PREDICATE_FIELD}.{p}" for p in self.decay_rate_by_predicate]

    @staticmethod
    def is_flat_name(name: str) -> bool:
        """Whether ``name`` names a parameter: one of :meth:`field_names`, or
        ``decay_rate_by_predicate.<predicate>`` for any non-empty predicate."""
        prefix = PER_PREDICATE_FIELD + "."
        return name in _FLAT_NAMES or (name.startswith(prefix) and len(name) > len(prefix))

    def decay_rate_for(self, kind: str, predicate: str) -> float:
        """The decay rate a new fact of ``kind`` with ``predicate`` gets: the predicate's own rate when
        ``decay_rate_by_predicate`` has one, else the kind's."""
        table = self.decay_rate_by_predicate
        return table[predicate] if predicate in table else self.decay_rate[kind]

    def decay_rates_for(self, kind_codes: np.ndarray, predicate_codes: np.ndarray,
                        predicate_names: Sequence[str]) -> np.ndarray:
        """:meth:`decay_rate_for` over arrays: ``kind_codes`` (KIND_CODES) and ``predicate_codes``
        (positions in ``predicate_names``), aligned; float64, bit for bit the scalar lookup."""
        by_kind = self.decay_rate.as_array()[np.asarray(kind_codes, dtype=np.int64)]
        if not self.decay_rate_by_predicate:
            return by_kind
        table = self.decay_rate_by_predicate
        own = np.array([table.get(p, np.nan) for p in predicate_names], dtype=np.float64)  # per predicate
        per_event = own[np.asarray(predicate_codes, dtype=np.int64)] if len(own) else np.full(len(by_kind), np.nan)
        return np.where(np.isnan(per_event), by_kind, per_event)

    def get(self, flat_name: str) -> Any:
        """Value of a flat parameter name (``decay_rate.episodic``, ``reinforce_gain``,
        ``decay_rate_by_predicate.works_on``)."""
        if flat_name.startswith(PER_PREDICATE_FIELD + "."):
            predicate = flat_name[len(PER_PREDICATE_FIELD) + 1:]
            if predicate not in self.decay_rate_by_predicate:
                raise ParamsError(f"{flat_name}: no per-predicate decay rate for {predicate!r} "
                                  "(its facts take their kind's rate)")
            return self.decay_rate_by_predicate[predicate]
        if "." in flat_name:
            head, kind = flat_name.split(".", 1)
            if head in PER_KIND_FIELDS:
                return getattr(self, head)[kind]
        if flat_name not in _FIELD_NAMES:
            raise ParamsError(f"unknown parameter {flat_name!r}; known: {', '.join(self.field_names())}")
        return getattr(self, flat_name)

    def changes_from(self, other: MemoryParams) -> dict[str, tuple[Any, Any]]:
        """Flat parameters whose value differs from ``other``'s: ``{name: (other's, this one's)}``.

        >>> MemoryParams(reinforce_gain=0.5).changes_from(MemoryParams())
        {'reinforce_gain': (0.3, 0.5)}
        """
        mine, theirs = self.to_flat(), other.to_flat()
        return {name: (theirs[name], mine[name]) for name in mine if mine[name] != theirs[name]}

    # -- serialization ----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form: per-kind fields as tables, predicates as a sorted list, the per-predicate
        rates as a table sorted by predicate — left out when empty (see the module docstring)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, (PerKind, PerPredicate)):
                if isinstance(value, PerPredicate) and not value:
                    continue
                value = value.to_dict()
            elif isinstance(value, frozenset):
                value = sorted(value)
            out[f.name] = value
        return out

    def to_flat(self) -> dict[str, Any]:
        """Flat form (:meth:`flat_names` -> value); :meth:`from_flat` reads it back."""
        out: dict[str, Any] = {}
        for name, value in self.to_dict().items():
            if name in PER_KIND_FIELDS or name == PER_PREDICATE_FIELD:
                out.update({f"{name}.{k}": v for k, v in value.items()})
            else:
                out[name] = value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MemoryParams:
        """Build from a (possibly partial) plain dict; missing fields take the seed defaults.

        Unknown keys raise ``ValueError`` naming the key.
        """
        if not isinstance(data, Mapping):
            raise ParamsError(f"parameters must be a table, got {type(data).__name__}")
        unknown = [k for k in data if k not in _FIELD_NAMES]
        if unknown:
            raise ParamsError(f"unknown parameter {unknown[0]!r}; known: {', '.join(sorted(_FIELD_NAMES))}")
        default = cls()
        kwargs: dict[str, Any] = {}
        for name, value in data.items():
            if name in PER_KIND_FIELDS:
                kwargs[name] = PerKind.build(name, value, base=getattr(default, name))
            elif name == "multi_valued_predicates":
                if isinstance(value, str) or not isinstance(value, (list, tuple, set, frozenset)):
                    raise ParamsError(f"multi_valued_predicates must be a list of strings, got {value!r}")
                kwargs[name] = frozenset(value)
            elif name == PER_PREDICATE_FIELD:
                kwargs[name] = PerPredicate(value)
            elif name in ("reinforce_base", "link_scope"):
                if not isinstance(value, str):
                    raise ParamsError(f"{name} must be a string, got {value!r}")
                kwargs[name] = value
            else:
                kwargs[name] = value
        return cls(**kwargs)

    @classmethod
    def from_flat(cls, flat: Mapping[str, Any]) -> MemoryParams:
        return cls().replace(**dict(flat))

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False)

    @classmethod
    def from_json(cls, text: str) -> MemoryParams:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ParamsError(f"invalid JSON parameters: {exc}") from None
        except RecursionError:
            raise ParamsError("invalid JSON parameters: nested too deep to read") from None
        except ValueError as exc:  # an integer of thousands of digits
            raise ParamsError(f"invalid JSON parameters: {exc}") from None
        return cls.from_dict(data)

    def to_toml(self) -> str:
        return dumps_toml(self.to_dict())

    @classmethod
    def from_toml(cls, text: str) -> MemoryParams:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ParamsError(f"invalid TOML parameters: {exc}") from None
        except RecursionError:
            raise ParamsError("invalid TOML parameters: nested too deep to read") from None
        except ValueError as exc:
            raise ParamsError(f"invalid TOML parameters: {exc}") from None
        return cls.from_dict(data)

    def save(self, path: str | Path) -> Path:
        """Write TOML or JSON by the file's suffix."""
        path = Path(path)
        text = self.to_json() if path.suffix.lower() == ".json" else self.to_toml()
        path.write_text(text + ("\n" if not text.endswith("\n") else ""), encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path) -> MemoryParams:
        """Read TOML or JSON by the file's suffix; errors name the file."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ParamsFileError(f"{path}: no such parameters file") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ParamsFileError(f"{path}: cannot read: {exc}") from None
        try:
            if path.suffix.lower() == ".json":
                return cls.from_json(text)
            return cls.from_toml(text)
        except ValueError as exc:
            raise ParamsFileError(f"{path}: {exc}") from None


_FIELD_NAMES = frozenset(f.name for f in dataclasses.fields(MemoryParams))
_FLAT_NAMES = frozenset(MemoryParams.field_names())

DEFAULT_PARAMS = MemoryParams()


# -- a small TOML writer (tomllib reads; the standard library has no writer) ------------------

_TOML_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def toml_string(s: str) -> str:
    out = []
    for ch in s:
        if ch in _TOML_ESCAPES:
            out.append(_TOML_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        v = float(value)
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        text = repr(v)  # shortest repr round-trips exactly
        return text if any(c in text for c in ".en") else text + ".0"
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if value is None:
        raise ParamsError("TOML has no null; leave the key out instead")
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def _toml_key(key: str) -> str:
    if key and all(c.isalnum() or c in "_-" for c in key) and key.isascii():
        return key
    return toml_string(key)


def dumps_toml(data: Mapping[str, Any], _prefix: str = "") -> str:
    """Serialize nested dicts of scalars/lists to TOML (tables after plain keys)."""
    lines: list[str] = []
    tables: list[tuple[str, Mapping[str, Any]]] = []
    for key, value in data.items():
        if value is None:
            continue
        if isinstance(value, Mapping):
            tables.append((key, value))
        else:
            lines.append(f"{_toml_key(key)} = {toml_value(value)}")
    for key, table in tables:
        name = f"{_prefix}{_toml_key(key)}"
        if lines:
            lines.append("")
        lines.append(f"[{name}]")
        body = dumps_toml(table, _prefix=name + ".")
        if body:
            lines.append(body)
    return "\n".join(lines)

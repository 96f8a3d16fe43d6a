"""Scenarios of the synthetic log generator: settings, validation, the default catalogue, presets.

A :class:`Scenario` says who talks (personas), how often (session rhythm), about what (a
predicate catalogue: kind, cardinality, lifetime, salience, change-mention delay, episodes,
templates), with which noise (:class:`Noise`: corrected misstatements, irrelevant one-offs, and
uncorrected extraction errors), and which archetypes (planted generalizations) hold. Its plain-dict
form is what ``scenario.toml`` holds; ``Scenario.from_dict(s.to_dict()) == s``.

Changing settings: ``Scenario.replace`` changes top-level ones (``preset("drift").replace(personas=60)``;
:func:`factmem.data.generate.generate` also takes ``personas=``); nested ones go through the plain
dict (``d = s.to_dict(); d["noise"]["extraction_rate"] = 0.1; Scenario.from_dict(d)``).

Units: times in days unless the name says otherwise; ``salience`` is the probability that a true
fact comes up in a given session of its persona (beyond its first mention, which is forced for
changes and episodes); ``start`` is Unix seconds (UTC midnight recommended).
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from factmem.core.codes import MENTION_KINDS
from factmem.core.params import dumps_toml
from factmem.errors import ScenarioError

__all__ = ["CARDINALITIES", "EPISODES", "FORMAT_VERSION", "Sessions", "Messages", "Noise", "Predicate",
    "Archetype", "Scenario"]

CARDINALITIES = ("single", "multi")
EPISODES = ("event", "state")
FORMAT_VERSION = 1


def _num(path: str, value: Any, lo: float | None = None, hi: float | None = None, *, allow_inf: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ScenarioError(f"{path} must be a number, got {value!r}")
    v = float(value)
    if math.isnan(v) or (math.isinf(v) and not allow_inf):
        raise ScenarioError(f"{path} must be finite, got {value!r}")
    if lo is not None and v < lo:
        raise ScenarioError(f"{path} = {value!r} is invalid: must be >= {lo}")
    if hi is not None and v > hi:
        raise ScenarioError(f"{path} = {value!r} is invalid: must be <= {hi}")
    return v


def _int(path: str, value: Any, lo: int | None = None, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScenarioError(f"{path} must be an integer, got {value!r}")
    if lo is not None and value < lo:
        raise ScenarioError(f"{path} = {value!r} is invalid: must be >= {lo}")
    if hi is not None and value > hi:
        raise ScenarioError(f"{path} = {value!r} is invalid: must be <= {hi}")
    return value


def _strs(path: str, value: Any, *, min_len: int = 1) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise ScenarioError(f"{path} must be a list of strings, got {value!r}")
    for v in value:
        if not isinstance(v, str) or not v:
            raise ScenarioError(f"{path}: every item must be a non-empty string, got {v!r}")
    if len(value) < min_len:
        raise ScenarioError(f"{path} needs at least {min_len} item(s), got {len(value)}")
    if len(set(value)) != len(value):
        dup = next(v for v in value if list(value).count(v) > 1)
        raise ScenarioError(f"{path}: duplicate item {dup!r}")
    return tuple(value)


def _check_keys(path: str, data: Mapping[str, Any], allowed: set[str]) -> None:
    if not isinstance(data, Mapping):
        raise ScenarioError(f"{path} must be a table, got {data!r}")
    for k in data:
        if k not in allowed:
            raise ScenarioError(f"{path}: unknown setting {k!r}; known: {', '.join(sorted(allowed))}")


def _build(cls, path: str, data: Mapping[str, Any], checks: Mapping[str, Any]):
    """Instantiate a flat settings dataclass, each given value passed through its check."""
    names = {f.name for f in dataclasses.fields(cls)}
    _check_keys(path, data, names)
    kwargs = {k: checks[k](f"{path}.{k}", v) for k, v in data.items()}
    return cls(**kwargs)


def _people_per_session(path: str, value: Any) -> int:
    if isinstance(value, bool) or value not in (1, 2):
        raise ScenarioError(f"{path} must be 1 (sessions of one's own) or 2 (pairs share sessions), got {value!r}")
    return int(value)


@dataclass(frozen=True)
class Sessions:
    """When personas talk: a per-day Poisson rate shaped by weekday, hour, bursts and absences.

    ``shared_by`` 2: conversations of two — personas pair up in name order (the first with the second,
    the third with the fourth, ...) and each pair talks in the same sessions (the first's schedule;
    one session id, both people's facts mentioned in it); an odd one out talks alone. Default 1:
    everyone has sessions of their own (left out of the plain-dict form, so older scenario files stay
    byte-identical)."""

    rate_per_day: float = 1.0  # mean sessions per persona-day (before the factors below)
    rate_spread: float = 0.5  # lognormal sigma of the per-persona rate (mean kept)
    weekend_factor: float = 0.6  # rate multiplier on Saturdays and Sundays
    hour_weights: tuple[float, ...] = (
        0.2, 0.1, 0.05, 0.05, 0.05, 0.1, 0.4, 1.0, 1.6, 1.4, 1.2, 1.1,
        1.3, 1.2, 1.0, 1.0, 1.1, 1.3, 1.6, 1.9, 2.0, 1.6, 1.0, 0.5,
    )  # relative session-start weight of each UTC hour
    duration_minutes: float = 12.0  # mean session length (lognormal)
    min_gap_minutes: float = 20.0  # a persona's sessions never overlap and keep this gap
    bursts_per_year: float = 3.0  # bursts of activity per persona-year
    burst_days: float = 3.0  # mean burst length
    burst_factor: float = 3.0  # rate multiplier inside a burst
    absences_per_year: float = 1.0  # long absences (no sessions) per persona-year
    absence_days: float = 10.0  # mean absence length
    shared_by: int = 1  # people per conversation: 1 (sessions of one's own) or 2 (pairs share sessions)

    def to_dict(self) -> dict[str, Any]:
        d = {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(self).items()}
        if d["shared_by"] == 1:  # absent = 1: older scenario files stay byte-identical
            del d["shared_by"]
        return d

    @staticmethod
    def from_dict(data: Mapping[str, Any], path: str = "sessions") -> Sessions:
        def weights(p: str, v: Any) -> tuple[float, ...]:
            if isinstance(v, str) or not isinstance(v, (list, tuple)) or len(v) != 24:
                raise ScenarioError(f"{p} must be a list of 24 numbers (one per hour), got {v!r}")
            out = tuple(_num(f"{p}[{i}]", x, 0.0) for i, x in enumerate(v))
            if sum(out) <= 0:
                raise ScenarioError(f"{p} must have a positive weight somewhere")
            return out

        pos = lambda p, v: _num(p, v, 0.0)
        checks = {
            "rate_per_day": pos, "rate_spread": lambda p, v: _num(p, v, 0.0, 3.0),
            "weekend_factor": pos, "hour_weights": weights,
            "duration_minutes": lambda p, v: _num(p, v, 1.0, 24 * 60), "min_gap_minutes": pos,
            "bursts_per_year": pos, "burst_days": lambda p, v: _num(p, v, 0.0, 365.0),
            "burst_factor": pos, "absences_per_year": pos, "absence_days": lambda p, v: _num(p, v, 0.0, 3650.0),
            "shared_by": _people_per_session,
        }
        return _build(Sessions, path, data, checks)


@dataclass(frozen=True)
class Messages:
    """How mentions become messages and text."""

    facts_per_message: int = 2  # at most this many facts in one user message
    assistant_replies: bool = True  # an assistant line after each user message
    small_talk: tuple[str, ...] = (
        "Hi there!", "Morning.", "Hey, quick question.", "Hello again.", "Just checking in.",
        "Back for a bit.", "Hi, got a minute?", "Evening!",
    )  # text of a user message that carries no fact
    assistant_texts: tuple[str, ...] = (
        "Got it.", "Thanks for telling me.", "Noted.", "Good to know.", "I'll remember that.",
        "Understood.", "Thanks, that helps.", "Okay!",
    )
    correction_template: str = "Sorry, I got that wrong: it's {o}, not {w}."

    @staticmethod
    def from_dict(data: Mapping[str, Any], path: str = "messages") -> Messages:
        def boolean(p: str, v: Any) -> bool:
            if not isinstance(v, bool):
                raise ScenarioError(f"{p} must be true or false, got {v!r}")
            return v

        def corr(p: str, v: Any) -> str:
            if not isinstance(v, str) or "{o}" not in v or "{w}" not in v:
                raise ScenarioError(f"{p} must be a string containing {{o}} and {{w}}, got {v!r}")
            return v

        checks = {
            "facts_per_message": lambda p, v: _int(p, v, 1, 20), "assistant_replies": boolean,
            "small_talk": _strs, "assistant_texts": _strs, "correction_template": corr,
        }
        return _build(Messages, path, data, checks)


@dataclass(frozen=True)
class Noise:
    """Deliberate noise, identifiable in truth by its ``noise`` column.

    - ``misstatement_rate``: share of mentions of single-valued lasting facts said wrong first and
      corrected in the next user message (truth: ``noise = "misstatement"``, never true).
    - ``irrelevant_per_session``: mean one-off irrelevant facts per session (predicates marked
      ``irrelevant``; truth: ``noise = "irrelevant"``, true but never needed again).
    - ``extraction_rate``: share of mentions of world facts (every mention except misstatement pairs
      and irrelevant one-offs) whose object the extractor got wrong: the message text says the true
      object, the extracted fact carries a wrong one, and nothing ever corrects it. The wrong object
      comes from the predicate's vocabulary (not an archetype's planted object) and is one the persona
      never holds for that predicate anywhere in the log, so believing it is false, never stale
      (truth: ``noise = "extraction"``, ``valid_from == valid_to`` = the mention's instant). A mention
      whose predicate has no such value left stays correct. Default 0; written to ``scenario.toml``
      only when non-zero, so scenarios from before it existed keep their bytes.
    """

    misstatement_rate: float = 0.01  # share of mentions of single-valued lasting facts said wrong first, then corrected
    irrelevant_per_session: float = 0.15  # mean one-off irrelevant facts per session (predicates marked irrelevant)
    extraction_rate: float = 0.0  # share of world-fact mentions extracted with a wrong object, never corrected

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        if d["extraction_rate"] == 0.0:  # absent = 0: older scenario files stay byte-identical
            del d["extraction_rate"]
        return d

    @staticmethod
    def from_dict(data: Mapping[str, Any], path: str = "noise") -> Noise:
        checks = {
            "misstatement_rate": lambda p, v: _num(p, v, 0.0, 1.0),
            "irrelevant_per_session": lambda p, v: _num(p, v, 0.0, 50.0),
            "extraction_rate": lambda p, v: _num(p, v, 0.0, 1.0),
        }
        return _build(Noise, path, data, checks)


@dataclass(frozen=True)
class Predicate:
    """One predicate of the catalogue.

    Lasting facts (explicit, user_preference) have values that hold for ``lifetime_days`` on
    average (exponential; ``inf`` = never changes); a change is first mentioned after
    ``change_delay_days`` (exponential mean), or never with probability ``unmentioned_change``.
    Multi-valued predicates hold 1..``max_values`` values at once per persona. Episodic
    predicates happen ``rate_per_year`` times per persona-year and stay relevant for
    ``relevance_days`` (exponential mean): an ``event`` stays true afterwards, a ``state`` ends
    when its relevance does. ``irrelevant`` predicates are one-off noise, never needed again.
    Templates contain ``{o}``, replaced by the object.
    """

    name: str
    kind: str
    values: tuple[str, ...]
    templates: tuple[str, ...]
    cardinality: str = "single"
    salience: float = 0.05
    lifetime_days: float = math.inf
    change_delay_days: float = 1.0
    unmentioned_change: float = 0.0
    max_values: int = 1
    rate_per_year: float = 0.0
    relevance_days: float = 2.0
    episode: str = "event"
    irrelevant: bool = False

    @property
    def lasting(self) -> bool:
        return self.kind != "episodic" and not self.irrelevant

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d.pop("name")
        for k in ("values", "templates"):
            d[k] = list(d[k])
        return d

    @staticmethod
    def from_dict(name: str, data: Mapping[str, Any]) -> Predicate:
        path = f"predicates.{name}"
        allowed = {f.name for f in dataclasses.fields(Predicate)} - {"name"}
        _check_keys(path, data, allowed)
        for req in ("kind", "values", "templates"):
            if req not in data:
                raise ScenarioError(f"{path}: missing setting {req!r}")

        def choice(options):
            def check(p: str, v: Any) -> str:
                if v not in options:
                    raise ScenarioError(f"{p} = {v!r} is invalid: must be one of {', '.join(options)}")
                return v
            return check

        def templates(p: str, v: Any) -> tuple[str, ...]:
            out = _strs(p, v)
            for t in out:
                if t.count("{o}") != 1:
                    raise ScenarioError(f"{p}: template {t!r} must contain {{o}} exactly once")
            return out

        def boolean(p: str, v: Any) -> bool:
            if not isinstance(v, bool):
                raise ScenarioError(f"{p} must be true or false, got {v!r}")
            return v

        checks = {
            "kind": choice(MENTION_KINDS), "cardinality": choice(CARDINALITIES), "episode": choice(EPISODES),
            "values": _strs, "templates": templates,
            "salience": lambda p, v: _num(p, v, 0.0, 1.0),
            "lifetime_days": lambda p, v: _num(p, v, 1.0 / 24, allow_inf=True),
            "change_delay_days": lambda p, v: _num(p, v, 0.0),
            "unmentioned_change": lambda p, v: _num(p, v, 0.0, 1.0),
            "max_values": lambda p, v: _int(p, v, 1, 50),
            "rate_per_year": lambda p, v: _num(p, v, 0.0, 10000.0),
            "relevance_days": lambda p, v: _num(p, v, 1.0 / 24),
            "irrelevant": boolean,
        }
        kwargs = {k: checks[k](f"{path}.{k}", v) for k, v in data.items()}
        pred = Predicate(name=name, **kwargs)
        if pred.cardinality == "single" and pred.max_values != 1:
            raise ScenarioError(f"{path}.max_values = {pred.max_values} needs cardinality = \"multi\"")
        if pred.lasting and math.isfinite(pred.lifetime_days) and len(pred.values) < 2 * pred.max_values:
            raise ScenarioError(
                f"{path}.values: a changing predicate needs at least {2 * pred.max_values} values "
                f"(2 per concurrent value), got {len(pred.values)}"
            )
        if pred.lasting and len(pred.values) < pred.max_values:
            raise ScenarioError(f"{path}.values: fewer values than max_values = {pred.max_values}")
        return pred


@dataclass(frozen=True)
class Archetype:
    """A planted generalization: personas of this archetype hold every implied fact all along."""

    name: str
    share: float  # probability that a persona has this archetype (each persona has at most one)
    object: str
    implies: tuple[tuple[str, str], ...]  # (predicate, object) pairs
    predicate: str = "is_a"
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "share": self.share, "predicate": self.predicate, "object": self.object, "note": self.note,
            "implies": [list(p) for p in self.implies],
        }

    @staticmethod
    def from_dict(name: str, data: Mapping[str, Any]) -> Archetype:
        path = f"archetypes.{name}"
        _check_keys(path, data, {"share", "predicate", "object", "note", "implies"})
        for req in ("share", "object", "implies"):
            if req not in data:
                raise ScenarioError(f"{path}: missing setting {req!r}")
        implies = data["implies"]
        if isinstance(implies, str) or not isinstance(implies, (list, tuple)) or not implies:
            raise ScenarioError(f"{path}.implies must be a non-empty list of [predicate, object] pairs")
        pairs = []
        for i, pair in enumerate(implies):
            if (
                isinstance(pair, str) or not isinstance(pair, (list, tuple)) or len(pair) != 2
                or not all(isinstance(x, str) and x for x in pair)
            ):
                raise ScenarioError(f"{path}.implies[{i}] must be a [predicate, object] pair of strings, got {pair!r}")
            pairs.append((pair[0], pair[1]))
        if len(set(pairs)) != len(pairs):
            raise ScenarioError(f"{path}.implies: duplicate pair")
        for k in ("predicate", "object", "note"):
            if k in data and not isinstance(data[k], str):
                raise ScenarioError(f"{path}.{k} must be a string, got {data[k]!r}")
        return Archetype(
            name=name, share=_num(f"{path}.share", data["share"], 0.0, 1.0), object=data["object"],
            implies=tuple(pairs), predicate=data.get("predicate", "is_a"), note=data.get("note", ""),
        )


@dataclass(frozen=True)
class Scenario:
    """Every generator setting and the seed; see the module docstring.

    ``noise`` (:class:`Noise`) holds three kinds of deliberate noise, each marked in truth's
    ``noise`` column: ``misstatement_rate`` (a wrong value corrected in the next message: never
    true), ``irrelevant_per_session`` (true one-offs never needed again) and ``extraction_rate``
    (default 0: a share of world-fact mentions extracted with a wrong object the persona never
    holds, never corrected; truth row ``noise = "extraction"`` with ``valid_from == valid_to`` = the
    mention's instant, so believing it counts as false, not stale).
    """

    name: str = "custom"
    description: str = ""
    seed: int = 0
    start: int = 1704067200  # 2024-01-01 UTC
    days: int = 90
    personas: int = 8
    sessions: Sessions = field(default_factory=Sessions)
    messages: Messages = field(default_factory=Messages)
    noise: Noise = field(default_factory=Noise)
    predicates: tuple[Predicate, ...] = ()
    archetypes: tuple[Archetype, ...] = ()

    @property
    def end(self) -> int:
        return self.start + self.days * 86400

    @property
    def multi_valued_predicates(self) -> tuple[str, ...]:
        return tuple(sorted(p.name for p in self.predicates if p.cardinality == "multi"))

    def predicate(self, name: str) -> Predicate:
        for p in self.predicates:
            if p.name == name:
                return p
        raise KeyError(name)

    def replace(self, **changes: Any) -> Scenario:
        """A validated copy with top-level settings changed (``seed=3``, ``days=30``)."""
        d = self.to_dict()
        d.update(changes)
        return Scenario.from_dict(d)

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form, with the derived ``end`` and ``multi_valued_predicates`` for readers."""
        return {
            "format_version": FORMAT_VERSION,
            "generator": "factmem.generate",
            "name": self.name,
            "description": self.description,
            "seed": self.seed,
            "start": self.start,
            "end": self.end,
            "days": self.days,
            "personas": self.personas,
            "multi_valued_predicates": list(self.multi_valued_predicates),
            "sessions": self.sessions.to_dict(),
            "messages": {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(self.messages).items()},
            "noise": self.noise.to_dict(),
            "predicates": {p.name: p.to_dict() for p in self.predicates},
            "archetypes": {a.name: a.to_dict() for a in self.archetypes},
        }

    def to_toml(self) -> str:
        return dumps_toml(self.to_dict()) + "\n"

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> Scenario:
        """Build and validate; errors name the setting (``predicates.lives_in.salience``)."""
        allowed = {f.name for f in dataclasses.fields(Scenario)} | {"end", "multi_valued_predicates", "format_version", "generator"}
        _check_keys("scenario", data, allowed)
        d = dict(data)
        version = d.pop("format_version", FORMAT_VERSION)
        if version != FORMAT_VERSION:
            raise ScenarioError(f"scenario.format_version = {version!r} is not supported (expected {FORMAT_VERSION})")
        d.pop("generator", None)
        declared_end = d.pop("end", None)
        declared_mvp = d.pop("multi_valued_predicates", None)
        kwargs: dict[str, Any] = {}
        for k in ("name", "description"):
            if k in d:
                if not isinstance(d[k], str):
                    raise ScenarioError(f"scenario.{k} must be a string, got {d[k]!r}")
                kwargs[k] = d[k]
        if "seed" in d:
            kwargs["seed"] = _int("scenario.seed", d["seed"], 0, 2**63 - 1)
        if "start" in d:
            kwargs["start"] = _start("scenario.start", d["start"])
        if "days" in d:
            kwargs["days"] = _int("scenario.days", d["days"], 1, 36500)
        if "personas" in d:
            kwargs["personas"] = _int("scenario.personas", d["personas"], 1, 1_000_000)
        if "sessions" in d:
            kwargs["sessions"] = Sessions.from_dict(d["sessions"])
        if "messages" in d:
            kwargs["messages"] = Messages.from_dict(d["messages"])
        if "noise" in d:
            kwargs["noise"] = Noise.from_dict(d["noise"])
        preds = d.get("predicates", {})
        _check_keys("scenario.predicates", preds, set(preds))
        kwargs["predicates"] = tuple(Predicate.from_dict(n, preds[n]) for n in sorted(preds))
        archs = d.get("archetypes", {})
        _check_keys("scenario.archetypes", archs, set(archs))
        kwargs["archetypes"] = tuple(Archetype.from_dict(n, archs[n]) for n in sorted(archs))
        s = Scenario(**kwargs)
        s._validate()
        if declared_end is not None and declared_end != s.end:
            raise ScenarioError(f"scenario.end = {declared_end!r} disagrees with start + days = {s.end}")
        if declared_mvp is not None and list(declared_mvp) != list(s.multi_valued_predicates):
            raise ScenarioError(
                "scenario.multi_valued_predicates disagrees with the predicates' cardinality: "
                f"{declared_mvp!r} vs {list(s.multi_valued_predicates)!r}"
            )
        return s

    def _validate(self) -> None:
        if not any(p.lasting or p.kind == "episodic" and not p.irrelevant for p in self.predicates):
            raise ScenarioError("scenario.predicates: at least one predicate that is not irrelevant noise is needed")
        if self.noise.irrelevant_per_session > 0 and not any(p.irrelevant for p in self.predicates):
            raise ScenarioError("noise.irrelevant_per_session > 0 needs a predicate with irrelevant = true")
        total_share = sum(a.share for a in self.archetypes)
        if total_share > 1.0 + 1e-9:
            raise ScenarioError(f"archetypes: shares sum to {total_share}, more than 1")
        names = {p.name: p for p in self.predicates}
        for a in self.archetypes:
            singles: set[str] = set()
            for pred, _obj in a.implies:
                path = f"archetypes.{a.name}.implies"
                if pred not in names:
                    raise ScenarioError(f"{path}: unknown predicate {pred!r}")
                p = names[pred]
                if not p.lasting:
                    raise ScenarioError(f"{path}: predicate {pred!r} is {p.kind}; only lasting facts can be planted")
                if p.cardinality == "single":
                    if pred in singles:
                        raise ScenarioError(f"{path}: single-valued predicate {pred!r} implied twice")
                    singles.add(pred)
        # Planted objects leave the random vocabulary, which must stay large enough.
        for p in self.predicates:
            planted = {o for a in self.archetypes for (q, o) in a.implies if q == p.name}
            rest = [v for v in p.values if v not in planted]
            need = (2 if math.isfinite(p.lifetime_days) else 1) * p.max_values if p.lasting else 1
            if len(rest) < need:
                raise ScenarioError(
                    f"predicates.{p.name}.values: only {len(rest)} values remain besides the archetypes' "
                    f"planted objects; {need} needed"
                )

    @staticmethod
    def from_toml(text: str) -> Scenario:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ScenarioError(f"invalid TOML scenario: {exc}") from None
        return Scenario.from_dict(data)

    @staticmethod
    def load(path: str | Path) -> Scenario:
        """Read a scenario TOML file; errors name the file."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ScenarioError(f"{path}: no such scenario file") from None
        try:
            return Scenario.from_toml(text)
        except ValueError as exc:
            raise ScenarioError(f"{path}: {exc}") from None


def _start(path: str, value: Any) -> int:
    if isinstance(value, bool):
        raise ScenarioError(f"{path} must be Unix seconds or a date, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, datetime):
        dt = value if value.tzinfo else value.replace(tzinfo=UTC)
        return int(dt.timestamp())
    if isinstance(value, date):
        return int(datetime(value.year, value.month, value.day, tzinfo=UTC).timestamp())
    if isinstance(value, str):
        try:
            return _start(path, date.fromisoformat(value))
        except ValueError:
            pass
    raise ScenarioError(f"{path} must be Unix seconds or an ISO date (YYYY-MM-DD), got {value!r}")

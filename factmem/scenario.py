"""Scenarios of the synthetic log generator: settings, validation, the default catalogue, presets.

A :class:`Scenario` says who talks (personas), how often (session rhythm), about what (a
predicate catalogue: kind, cardinality, lifetime, salience, change-mention delay, episodes,
templates), with which noise, and which archetypes (planted generalizations) hold. Its plain-dict
form is what ``scenario.toml`` holds; ``Scenario.from_dict(s.to_dict()) == s``.

Units: times in days unless the name says otherwise; ``salience`` is the probability that a true
fact comes up in a given session of its persona (beyond its first mention, which is forced for
changes and episodes); ``start`` is Unix seconds (UTC midnight recommended).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import tomllib
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any, Mapping

from .params import dumps_toml

SCENARIO_KINDS = ("explicit", "user_preference", "episodic")
CARDINALITIES = ("single", "multi")
EPISODES = ("event", "state")
FORMAT_VERSION = 1


def _num(path: str, value: Any, lo: float | None = None, hi: float | None = None, *, allow_inf: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{path} must be a number, got {value!r}")
    v = float(value)
    if math.isnan(v) or (math.isinf(v) and not allow_inf):
        raise ValueError(f"{path} must be finite, got {value!r}")
    if lo is not None and v < lo:
        raise ValueError(f"{path} = {value!r} is invalid: must be >= {lo}")
    if hi is not None and v > hi:
        raise ValueError(f"{path} = {value!r} is invalid: must be <= {hi}")
    return v


def _int(path: str, value: Any, lo: int | None = None, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{path} must be an integer, got {value!r}")
    if lo is not None and value < lo:
        raise ValueError(f"{path} = {value!r} is invalid: must be >= {lo}")
    if hi is not None and value > hi:
        raise ValueError(f"{path} = {value!r} is invalid: must be <= {hi}")
    return value


def _strs(path: str, value: Any, *, min_len: int = 1) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise ValueError(f"{path} must be a list of strings, got {value!r}")
    for v in value:
        if not isinstance(v, str) or not v:
            raise ValueError(f"{path}: every item must be a non-empty string, got {v!r}")
    if len(value) < min_len:
        raise ValueError(f"{path} needs at least {min_len} item(s), got {len(value)}")
    if len(set(value)) != len(value):
        dup = next(v for v in value if list(value).count(v) > 1)
        raise ValueError(f"{path}: duplicate item {dup!r}")
    return tuple(value)


def _check_keys(path: str, data: Mapping[str, Any], allowed: set[str]) -> None:
    if not isinstance(data, Mapping):
        raise ValueError(f"{path} must be a table, got {data!r}")
    for k in data:
        if k not in allowed:
            raise ValueError(f"{path}: unknown setting {k!r}; known: {', '.join(sorted(allowed))}")


def _build(cls, path: str, data: Mapping[str, Any], checks: Mapping[str, Any]):
    """Instantiate a flat settings dataclass, each given value passed through its check."""
    names = {f.name for f in dataclasses.fields(cls)}
    _check_keys(path, data, names)
    kwargs = {k: checks[k](f"{path}.{k}", v) for k, v in data.items()}
    return cls(**kwargs)


@dataclass(frozen=True)
class Sessions:
    """When personas talk: a per-day Poisson rate shaped by weekday, hour, bursts and absences."""

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

    @staticmethod
    def from_dict(data: Mapping[str, Any], path: str = "sessions") -> "Sessions":
        def weights(p: str, v: Any) -> tuple[float, ...]:
            if isinstance(v, str) or not isinstance(v, (list, tuple)) or len(v) != 24:
                raise ValueError(f"{p} must be a list of 24 numbers (one per hour), got {v!r}")
            out = tuple(_num(f"{p}[{i}]", x, 0.0) for i, x in enumerate(v))
            if sum(out) <= 0:
                raise ValueError(f"{p} must have a positive weight somewhere")
            return out

        pos = lambda p, v: _num(p, v, 0.0)  # noqa: E731
        checks = {
            "rate_per_day": pos, "rate_spread": lambda p, v: _num(p, v, 0.0, 3.0),
            "weekend_factor": pos, "hour_weights": weights,
            "duration_minutes": lambda p, v: _num(p, v, 1.0, 24 * 60), "min_gap_minutes": pos,
            "bursts_per_year": pos, "burst_days": lambda p, v: _num(p, v, 0.0, 365.0),
            "burst_factor": pos, "absences_per_year": pos, "absence_days": lambda p, v: _num(p, v, 0.0, 3650.0),
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
    def from_dict(data: Mapping[str, Any], path: str = "messages") -> "Messages":
        def boolean(p: str, v: Any) -> bool:
            if not isinstance(v, bool):
                raise ValueError(f"{p} must be true or false, got {v!r}")
            return v

        def corr(p: str, v: Any) -> str:
            if not isinstance(v, str) or "{o}" not in v or "{w}" not in v:
                raise ValueError(f"{p} must be a string containing {{o}} and {{w}}, got {v!r}")
            return v

        checks = {
            "facts_per_message": lambda p, v: _int(p, v, 1, 20), "assistant_replies": boolean,
            "small_talk": _strs, "assistant_texts": _strs, "correction_template": corr,
        }
        return _build(Messages, path, data, checks)


@dataclass(frozen=True)
class Noise:
    """Deliberate noise, identifiable in truth by its ``noise`` column."""

    misstatement_rate: float = 0.01  # share of mentions of single-valued lasting facts said wrong first, then corrected
    irrelevant_per_session: float = 0.15  # mean one-off irrelevant facts per session (predicates marked irrelevant)

    @staticmethod
    def from_dict(data: Mapping[str, Any], path: str = "noise") -> "Noise":
        checks = {
            "misstatement_rate": lambda p, v: _num(p, v, 0.0, 1.0),
            "irrelevant_per_session": lambda p, v: _num(p, v, 0.0, 50.0),
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
    def from_dict(name: str, data: Mapping[str, Any]) -> "Predicate":
        path = f"predicates.{name}"
        allowed = {f.name for f in dataclasses.fields(Predicate)} - {"name"}
        _check_keys(path, data, allowed)
        for req in ("kind", "values", "templates"):
            if req not in data:
                raise ValueError(f"{path}: missing setting {req!r}")

        def choice(options):
            def check(p: str, v: Any) -> str:
                if v not in options:
                    raise ValueError(f"{p} = {v!r} is invalid: must be one of {', '.join(options)}")
                return v
            return check

        def templates(p: str, v: Any) -> tuple[str, ...]:
            out = _strs(p, v)
            for t in out:
                if t.count("{o}") != 1:
                    raise ValueError(f"{p}: template {t!r} must contain {{o}} exactly once")
            return out

        def boolean(p: str, v: Any) -> bool:
            if not isinstance(v, bool):
                raise ValueError(f"{p} must be true or false, got {v!r}")
            return v

        checks = {
            "kind": choice(SCENARIO_KINDS), "cardinality": choice(CARDINALITIES), "episode": choice(EPISODES),
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
            raise ValueError(f"{path}.max_values = {pred.max_values} needs cardinality = \"multi\"")
        if pred.lasting and math.isfinite(pred.lifetime_days) and len(pred.values) < 2 * pred.max_values:
            raise ValueError(
                f"{path}.values: a changing predicate needs at least {2 * pred.max_values} values "
                f"(2 per concurrent value), got {len(pred.values)}"
            )
        if pred.lasting and len(pred.values) < pred.max_values:
            raise ValueError(f"{path}.values: fewer values than max_values = {pred.max_values}")
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
    def from_dict(name: str, data: Mapping[str, Any]) -> "Archetype":
        path = f"archetypes.{name}"
        _check_keys(path, data, {"share", "predicate", "object", "note", "implies"})
        for req in ("share", "object", "implies"):
            if req not in data:
                raise ValueError(f"{path}: missing setting {req!r}")
        implies = data["implies"]
        if isinstance(implies, str) or not isinstance(implies, (list, tuple)) or not implies:
            raise ValueError(f"{path}.implies must be a non-empty list of [predicate, object] pairs")
        pairs = []
        for i, pair in enumerate(implies):
            if (
                isinstance(pair, str) or not isinstance(pair, (list, tuple)) or len(pair) != 2
                or not all(isinstance(x, str) and x for x in pair)
            ):
                raise ValueError(f"{path}.implies[{i}] must be a [predicate, object] pair of strings, got {pair!r}")
            pairs.append((pair[0], pair[1]))
        if len(set(pairs)) != len(pairs):
            raise ValueError(f"{path}.implies: duplicate pair")
        for k in ("predicate", "object", "note"):
            if k in data and not isinstance(data[k], str):
                raise ValueError(f"{path}.{k} must be a string, got {data[k]!r}")
        return Archetype(
            name=name, share=_num(f"{path}.share", data["share"], 0.0, 1.0), object=data["object"],
            implies=tuple(pairs), predicate=data.get("predicate", "is_a"), note=data.get("note", ""),
        )


@dataclass(frozen=True)
class Scenario:
    """Every generator setting and the seed; see the module docstring."""

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

    def replace(self, **changes: Any) -> "Scenario":
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
            "sessions": {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(self.sessions).items()},
            "messages": {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(self.messages).items()},
            "noise": dataclasses.asdict(self.noise),
            "predicates": {p.name: p.to_dict() for p in self.predicates},
            "archetypes": {a.name: a.to_dict() for a in self.archetypes},
        }

    def to_toml(self) -> str:
        return dumps_toml(self.to_dict()) + "\n"

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> "Scenario":
        """Build and validate; errors name the setting (``predicates.lives_in.salience``)."""
        allowed = {f.name for f in dataclasses.fields(Scenario)} | {"end", "multi_valued_predicates", "format_version", "generator"}
        _check_keys("scenario", data, allowed)
        d = dict(data)
        version = d.pop("format_version", FORMAT_VERSION)
        if version != FORMAT_VERSION:
            raise ValueError(f"scenario.format_version = {version!r} is not supported (expected {FORMAT_VERSION})")
        d.pop("generator", None)
        declared_end = d.pop("end", None)
        declared_mvp = d.pop("multi_valued_predicates", None)
        kwargs: dict[str, Any] = {}
        for k in ("name", "description"):
            if k in d:
                if not isinstance(d[k], str):
                    raise ValueError(f"scenario.{k} must be a string, got {d[k]!r}")
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
            raise ValueError(f"scenario.end = {declared_end!r} disagrees with start + days = {s.end}")
        if declared_mvp is not None and list(declared_mvp) != list(s.multi_valued_predicates):
            raise ValueError(
                "scenario.multi_valued_predicates disagrees with the predicates' cardinality: "
                f"{declared_mvp!r} vs {list(s.multi_valued_predicates)!r}"
            )
        return s

    def _validate(self) -> None:
        if not any(p.lasting or p.kind == "episodic" and not p.irrelevant for p in self.predicates):
            raise ValueError("scenario.predicates: at least one predicate that is not irrelevant noise is needed")
        if self.noise.irrelevant_per_session > 0 and not any(p.irrelevant for p in self.predicates):
            raise ValueError("noise.irrelevant_per_session > 0 needs a predicate with irrelevant = true")
        total_share = sum(a.share for a in self.archetypes)
        if total_share > 1.0 + 1e-9:
            raise ValueError(f"archetypes: shares sum to {total_share}, more than 1")
        names = {p.name: p for p in self.predicates}
        for a in self.archetypes:
            singles: set[str] = set()
            for pred, obj in a.implies:
                path = f"archetypes.{a.name}.implies"
                if pred not in names:
                    raise ValueError(f"{path}: unknown predicate {pred!r}")
                p = names[pred]
                if not p.lasting:
                    raise ValueError(f"{path}: predicate {pred!r} is {p.kind}; only lasting facts can be planted")
                if p.cardinality == "single":
                    if pred in singles:
                        raise ValueError(f"{path}: single-valued predicate {pred!r} implied twice")
                    singles.add(pred)
        # Planted objects leave the random vocabulary, which must stay large enough.
        for p in self.predicates:
            planted = {o for a in self.archetypes for (q, o) in a.implies if q == p.name}
            rest = [v for v in p.values if v not in planted]
            need = (2 if math.isfinite(p.lifetime_days) else 1) * p.max_values if p.lasting else 1
            if len(rest) < need:
                raise ValueError(
                    f"predicates.{p.name}.values: only {len(rest)} values remain besides the archetypes' "
                    f"planted objects; {need} needed"
                )

    @staticmethod
    def from_toml(text: str) -> "Scenario":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"invalid TOML scenario: {exc}") from None
        return Scenario.from_dict(data)

    @staticmethod
    def load(path: str | Path) -> "Scenario":
        """Read a scenario TOML file; errors name the file."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ValueError(f"{path}: no such scenario file") from None
        try:
            return Scenario.from_toml(text)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None


def _start(path: str, value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{path} must be Unix seconds or a date, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, datetime):
        dt = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        return int(dt.timestamp())
    if isinstance(value, date):
        return int(datetime(value.year, value.month, value.day, tzinfo=timezone.utc).timestamp())
    if isinstance(value, str):
        try:
            return _start(path, date.fromisoformat(value))
        except ValueError:
            pass
    raise ValueError(f"{path} must be Unix seconds or an ISO date (YYYY-MM-DD), got {value!r}")


# ------------------------------------------------------------------------------------------
# the default catalogue
# ------------------------------------------------------------------------------------------

CITIES = [
    "Lisbon", "Berlin", "Toronto", "Osaka", "Nairobi", "Austin", "Lyon", "Krakow", "Melbourne", "Seoul",
    "Bogota", "Oslo", "Dublin", "Porto", "Denver", "Mumbai", "Cape Town", "Vienna", "Montreal", "Taipei",
    "Glasgow", "Valencia", "Helsinki", "Athens", "Prague", "Quito", "Hanoi", "Zurich", "Seattle", "Edinburgh",
]
JOBS = [
    "nurse", "software engineer", "teacher", "architect", "accountant", "graphic designer", "chef",
    "data analyst", "pharmacist", "electrician", "journalist", "product manager", "lawyer", "physiotherapist",
    "translator", "civil engineer", "barista", "photographer", "veterinarian", "research scientist",
    "sales manager", "librarian", "pilot", "social worker",
]
COMPANIES = [
    "Northwind", "Acme Labs", "Bluefin Health", "Copperleaf", "Driftwood Media", "Evergreen Bank",
    "Fjord Logistics", "Granite Systems", "Harbor Foods", "Ironbark Studio", "Juniper Energy", "Kestrel Air",
    "Lumen Schools", "Maple Robotics", "Nimbus Cloud", "Orchid Pharma", "Pinecone Games", "Quarry Works",
    "Redwood Legal", "Saffron Hotels", "Tidewater Port", "Umbra Security", "Vantage Retail", "Willow Care",
]
LANGUAGES = [
    "English", "Spanish", "Portuguese", "French", "German", "Japanese", "Korean", "Mandarin", "Swahili",
    "Polish", "Italian", "Dutch", "Greek", "Hindi", "Vietnamese", "Norwegian",
]
PETS = [
    "a dog named Biscuit", "a cat named Miso", "a parrot named Kiwi", "two goldfish", "a rabbit named Clover",
    "a dog named Pepper", "a cat named Luna", "a tortoise named Sheldon", "a hamster named Nibbles",
    "a dog named Scout", "a cat named Tofu", "a gecko named Zap",
]
PROJECTS = [
    "the website redesign", "the billing migration", "a mobile app", "the warehouse audit", "a grant proposal",
    "the onboarding guide", "a data pipeline", "the spring campaign", "a kitchen renovation", "a podcast",
    "the annual budget", "a customer survey", "the office move", "a training course", "a research paper",
    "the garden shed", "a wedding plan", "a board game prototype", "the quarterly roadmap", "a novel draft",
]
CLUBS = [
    "a running club", "a book club", "a chess club", "a choir", "a climbing gym", "a rowing club",
    "a film society", "a volunteer fire brigade", "a pottery studio", "a board game group", "a swim team",
    "a community garden",
]
RELATIONSHIP = ["single", "dating someone", "engaged", "married", "separated", "in a long-distance relationship"]
CARS = [
    "a Toyota Corolla", "a Volkswagen Golf", "a Tesla Model 3", "a Ford Focus", "a Honda Civic", "a Kia Niro",
    "a Subaru Outback", "a Mini Cooper", "a Renault Zoe", "a Volvo XC40", "a cargo bike", "no car",
]
CUISINES = [
    "Japanese", "Mexican", "Thai", "Italian", "Ethiopian", "Lebanese", "Indian", "Peruvian", "Korean",
    "Greek", "Vietnamese", "French", "Georgian", "Turkish",
]
DRINKS = ["black coffee", "green tea", "oat flat white", "espresso", "chai", "sparkling water", "rooibos", "hot chocolate", "matcha", "cold brew"]
EDITORS = ["VS Code", "Neovim", "Emacs", "IntelliJ", "Sublime Text", "Helix", "Zed", "plain Notepad"]
GENRES = ["jazz", "techno", "classical", "indie rock", "hip hop", "folk", "metal", "bossa nova", "k-pop", "ambient", "blues", "reggae"]
WORKOUT = ["early morning", "lunchtime", "late evening", "weekends only", "right after work", "before bed"]
AUTHORS = [
    "Ursula K. Le Guin", "Haruki Murakami", "Toni Morrison", "Terry Pratchett", "Chimamanda Ngozi Adichie",
    "Kazuo Ishiguro", "Octavia Butler", "Italo Calvino", "Jane Austen", "Ted Chiang", "Elena Ferrante", "Gabriel Garcia Marquez",
]
HOBBIES = [
    "hiking", "rock climbing", "cooking", "playing guitar", "mechanical keyboards", "gardening", "photography",
    "knitting", "cycling", "board games", "baking bread", "birdwatching", "chess", "sketching", "yoga",
    "woodworking", "surfing", "salsa dancing", "video games", "running", "kayaking", "calligraphy",
]
DISLIKES = [
    "cilantro", "olives", "mushrooms", "spicy food", "fast food", "blue cheese", "licorice", "raw onions",
    "seafood", "coconut", "eggplant", "anchovies",
]
EVENTS = [
    "a jazz concert", "a team offsite", "a friend's wedding", "a football match", "a pottery class", "a tech meetup",
    "a birthday party", "a museum opening", "a charity run", "a job interview", "a parent-teacher meeting",
    "a dentist appointment", "a comedy show", "a farmers market", "a hackathon", "a wine tasting",
]
PEOPLE = [
    "my sister", "an old colleague", "my landlord", "a recruiter", "my mentor", "the neighbours", "my cousin",
    "a college friend", "my manager", "the new intern", "my doctor", "my grandmother", "a client", "my coach",
]
MOVIES = [
    "Dune", "Spirited Away", "Arrival", "Amelie", "Parasite", "The Matrix", "Paddington 2", "Moonlight",
    "Casablanca", "Inception", "Coco", "Whiplash", "Roma", "Her", "Alien", "Up",
]
TASKS = [
    "the quarterly report", "a conference talk", "a client pitch", "the tax return", "a job application",
    "an exam", "a product launch", "a half marathon", "a house move", "a grant deadline",
]
ILLNESSES = ["a cold", "the flu", "a sprained ankle", "a migraine", "a back injury", "food poisoning", "a sore throat"]
LUNCHES = [
    "a falafel wrap", "leftover pasta", "a poke bowl", "ramen", "a cheese sandwich", "lentil soup", "sushi",
    "a burrito", "a salad", "dumplings", "pizza", "a banh mi",
]
SIGHTS = [
    "a red kite over the park", "a street musician", "a double rainbow", "a very fluffy dog", "roadworks again",
    "a vintage car", "a huge queue at the bakery", "a film crew downtown", "a lost balloon", "a fox in the garden",
]
WEATHER = ["rainy", "sunny", "foggy", "windy", "freezing", "humid", "stormy", "mild"]


def _p(kind: str, values: list[str], templates: list[str], **kw: Any) -> dict[str, Any]:
    return {"kind": kind, "values": list(values), "templates": list(templates), **kw}


def default_catalogue() -> dict[str, dict[str, Any]]:
    """The default predicate catalogue (plain dicts, ready to override)."""
    inf = math.inf
    return {
        # explicit, single-valued: biography that changes now and then
        "lives_in": _p("explicit", CITIES, ["I live in {o}.", "We moved to {o}, by the way.", "Things are busy here in {o}."],
                       lifetime_days=900.0, salience=0.06, change_delay_days=2.0, unmentioned_change=0.1),
        "works_as": _p("explicit", JOBS, ["I work as a {o}.", "As a {o}, I get a lot of that.", "My job? I'm a {o}."],
                       lifetime_days=1200.0, salience=0.06, change_delay_days=3.0, unmentioned_change=0.1),
        "works_at": _p("explicit", COMPANIES, ["I work at {o}.", "I just started at {o}.", "Work at {o} is hectic."],
                       lifetime_days=700.0, salience=0.075, change_delay_days=2.0, unmentioned_change=0.15),
        "relationship_status": _p("explicit", RELATIONSHIP, ["I'm {o}.", "Right now I'm {o}."],
                                  lifetime_days=1100.0, salience=0.03, change_delay_days=7.0, unmentioned_change=0.2),
        "drives": _p("explicit", CARS, ["I drive {o}.", "I get around with {o}."],
                     lifetime_days=1400.0, salience=0.03, change_delay_days=5.0, unmentioned_change=0.2),
        "born_in": _p("explicit", CITIES, ["I was born in {o}.", "I grew up in {o}."], lifetime_days=inf, salience=0.015),
        # explicit, multi-valued
        "speaks": _p("explicit", LANGUAGES, ["I speak {o}.", "I can get by in {o}."], cardinality="multi",
                     max_values=3, lifetime_days=inf, salience=0.0225),
        "has_pet": _p("explicit", PETS, ["I have {o}.", "At home there's {o}."], cardinality="multi", max_values=2,
                      lifetime_days=1500.0, salience=0.06, change_delay_days=4.0, unmentioned_change=0.2),
        "works_on": _p("explicit", PROJECTS, ["I'm working on {o}.", "Most of my week goes into {o}."], cardinality="multi",
                       max_values=3, lifetime_days=90.0, salience=0.105, change_delay_days=1.0, unmentioned_change=0.1),
        "member_of": _p("explicit", CLUBS, ["I'm a member of {o}.", "I joined {o}."], cardinality="multi", max_values=2,
                        lifetime_days=600.0, salience=0.045, change_delay_days=3.0, unmentioned_change=0.15),
        # preferences: persist, change occasionally
        "favorite_cuisine": _p("user_preference", CUISINES, ["My favourite food is {o}.", "I could eat {o} every day."],
                               lifetime_days=400.0, salience=0.075, change_delay_days=3.0, unmentioned_change=0.1),
        "prefers_drink": _p("user_preference", DRINKS, ["I usually drink {o}.", "Nothing beats {o} in the morning."],
                            lifetime_days=300.0, salience=0.075, change_delay_days=2.0, unmentioned_change=0.1),
        "preferred_editor": _p("user_preference", EDITORS, ["I write everything in {o}.", "My editor of choice is {o}."],
                               lifetime_days=500.0, salience=0.06, change_delay_days=2.0, unmentioned_change=0.1),
        "favorite_music_genre": _p("user_preference", GENRES, ["I mostly listen to {o}.", "I'm really into {o} lately."],
                                   lifetime_days=350.0, salience=0.06, change_delay_days=3.0, unmentioned_change=0.15),
        "preferred_workout_time": _p("user_preference", WORKOUT, ["I like to work out {o}.", "My workouts are {o}."],
                                     lifetime_days=200.0, salience=0.045, change_delay_days=3.0, unmentioned_change=0.2),
        "favorite_author": _p("user_preference", AUTHORS, ["My favourite author is {o}.", "I keep rereading {o}."],
                              lifetime_days=500.0, salience=0.03, change_delay_days=5.0, unmentioned_change=0.2),
        "enjoys": _p("user_preference", HOBBIES, ["I enjoy {o}.", "I spent the weekend on {o}.", "I'm into {o}."],
                     cardinality="multi", max_values=4, lifetime_days=500.0, salience=0.075, change_delay_days=3.0,
                     unmentioned_change=0.15),
        "dislikes": _p("user_preference", DISLIKES, ["I can't stand {o}.", "Please, no {o}."], cardinality="multi",
                       max_values=3, lifetime_days=1000.0, salience=0.045, change_delay_days=3.0, unmentioned_change=0.2),
        # episodic: fade fast
        "attended": _p("episodic", EVENTS, ["I went to {o}.", "I was at {o} yesterday."], cardinality="multi",
                       rate_per_year=12.0, relevance_days=3.0, salience=0.3),
        "met_with": _p("episodic", PEOPLE, ["I met {o} today.", "Had coffee with {o}."], cardinality="multi",
                       rate_per_year=24.0, relevance_days=2.0, salience=0.3),
        "watched": _p("episodic", MOVIES, ["I watched {o} last night.", "Just saw {o}."], cardinality="multi",
                      rate_per_year=20.0, relevance_days=1.5, salience=0.25),
        "is_travelling_to": _p("episodic", CITIES, ["I'm travelling to {o} this week.", "I'm off to {o} soon."],
                               episode="state", rate_per_year=6.0, relevance_days=6.0, salience=0.5),
        "is_preparing": _p("episodic", TASKS, ["I'm preparing {o}.", "Still stressing about {o}."],
                           episode="state", rate_per_year=8.0, relevance_days=10.0, salience=0.4),
        "is_recovering_from": _p("episodic", ILLNESSES, ["I'm recovering from {o}.", "Still not over {o}."],
                                 episode="state", rate_per_year=3.0, relevance_days=5.0, salience=0.4),
        # one-off noise: true, never needed again
        "had_for_lunch": _p("episodic", LUNCHES, ["I had {o} for lunch.", "Lunch was {o}."], irrelevant=True,
                            cardinality="multi", salience=0.0),
        "noticed": _p("episodic", SIGHTS, ["On the way I saw {o}.", "Funny, I noticed {o}."], irrelevant=True,
                      cardinality="multi", salience=0.0),
        "weather_was": _p("episodic", WEATHER, ["It was {o} today.", "Ugh, so {o} out."], irrelevant=True,
                          cardinality="multi", salience=0.0),
    }


def default_archetypes() -> dict[str, dict[str, Any]]:
    return {
        "outdoors": {"share": 0.15, "object": "outdoors enthusiast", "note": "spends free time outside",
                     "implies": [["enjoys", "hiking"], ["enjoys", "rock climbing"], ["member_of", "a climbing gym"],
                                 ["preferred_workout_time", "early morning"]]},
        "coder": {"share": 0.15, "object": "software developer", "note": "writes code for a living",
                  "implies": [["works_as", "software engineer"], ["preferred_editor", "Neovim"],
                              ["enjoys", "mechanical keyboards"], ["prefers_drink", "espresso"]]},
        "foodie": {"share": 0.1, "object": "food lover", "note": "cooks and eats adventurously",
                   "implies": [["enjoys", "cooking"], ["favorite_cuisine", "Georgian"], ["dislikes", "fast food"]]},
        "musician": {"share": 0.1, "object": "amateur musician", "note": "plays and listens a lot",
                     "implies": [["enjoys", "playing guitar"], ["favorite_music_genre", "jazz"], ["member_of", "a choir"]]},
    }


def base_dict() -> dict[str, Any]:
    """The default scenario as a plain dict (before any preset)."""
    return {
        "name": "custom", "description": "", "seed": 0, "start": 1704067200, "days": 90, "personas": 8,
        "sessions": {}, "messages": {}, "noise": {},
        "predicates": default_catalogue(), "archetypes": default_archetypes(),
    }


def _merge(base: dict, over: Mapping[str, Any]) -> dict:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _scale(preds: dict, kind: str, key: str, factor: float, **only: Any) -> dict:
    """Overrides multiplying ``key`` of every predicate of ``kind`` (matching ``only``)."""
    return {
        n: {key: p[key] * factor}
        for n, p in preds.items()
        if p["kind"] == kind and not p.get("irrelevant") and key in p and all(p.get(a, None) == b for a, b in only.items())
    }


def _preset_dicts() -> dict[str, tuple[str, dict[str, Any]]]:
    cat = default_catalogue()
    return {
        "tiny": ("a few personas over six weeks: for tests, generates in well under a second",
                 {"days": 42, "personas": 6, "sessions": {"rate_per_day": 1.5}}),
        "small": ("the default tuning log: 40 personas over nine months, every mechanism at moderate strength",
                  {"days": 270, "personas": 40, "sessions": {"rate_per_day": 1.2},
                   "messages": {"assistant_replies": False, "facts_per_message": 3}}),
        "drift": ("preferences that change every few weeks: stresses supersession and how fast beliefs follow",
                  {"days": 180, "personas": 16, "sessions": {"rate_per_day": 1.2},
                   "predicates": {**_scale(cat, "user_preference", "lifetime_days", 0.08),
                                  **{n: {"change_delay_days": 1.0, "unmentioned_change": 0.1}
                                     for n, p in cat.items() if p["kind"] == "user_preference"}}}),
        "episodic-flood": ("many short-lived episodes and one-off chatter: stresses fast decay and context pressure",
                           {"days": 120, "personas": 16, "sessions": {"rate_per_day": 1.5},
                            "noise": {"irrelevant_per_session": 1.5},
                            "predicates": _scale(cat, "episodic", "rate_per_year", 8.0)}),
        "multi-valued": ("several true values at once (projects, hobbies, languages, clubs): stresses the cost of "
                         "single-valued supersession",
                         {"days": 180, "personas": 16, "sessions": {"rate_per_day": 1.2},
                          "predicates": {
                              "works_on": {"max_values": 5, "salience": 0.1},
                              "enjoys": {"max_values": 6},
                              "speaks": {"max_values": 4, "salience": 0.04},
                              "member_of": {"max_values": 4, "salience": 0.05},
                              "works_at": {"cardinality": "multi", "max_values": 2},
                              "lives_in": {"cardinality": "multi", "max_values": 2, "salience": 0.05},
                          }}),
        "long-absence": ("personas who vanish for months and come back: stresses decay over long gaps (forgetting regret)",
                         {"days": 365, "personas": 16, "sessions": {"rate_per_day": 1.2, "absences_per_year": 2.5,
                                                                    "absence_days": 45.0}}),
        "large": (">= 1M mentions for benchmarks (not committed; generate on demand)",
                  {"days": 365, "personas": 900, "sessions": {"rate_per_day": 2.0},
                   "messages": {"assistant_replies": False}}),
    }


PRESETS: dict[str, str] = {name: desc for name, (desc, _) in _preset_dicts().items()}
"""Preset names and the one line saying what each stresses."""


def preset(name: str, seed: int | None = None) -> Scenario:
    """The scenario of a named preset (see :data:`PRESETS`), optionally with another seed."""
    presets = _preset_dicts()
    if name not in presets:
        raise ValueError(f"unknown preset {name!r}; presets: {', '.join(presets)}")
    desc, over = presets[name]
    d = _merge(base_dict(), {"name": name, "description": desc, **over})
    if seed is not None:
        d["seed"] = seed
    return Scenario.from_dict(d)


def resolve(spec: "str | Path | Mapping[str, Any] | Scenario") -> Scenario:
    """A Scenario from a preset name, a scenario TOML path, a plain dict or a Scenario."""
    if isinstance(spec, Scenario):
        return spec
    if isinstance(spec, Mapping):
        return Scenario.from_dict(spec)
    if isinstance(spec, Path) or (isinstance(spec, str) and (spec.endswith(".toml") or "/" in spec)):
        return Scenario.load(spec)
    if isinstance(spec, str):
        return preset(spec)
    raise ValueError(f"expected a preset name, a scenario file, a dict or a Scenario, got {spec!r}")

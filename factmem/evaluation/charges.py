"""What a fact in a context is charged for: four disjoint kinds of context facts that are not needed,
each with its own cost in utility@k (:class:`ChargeCosts`).

With ground truth (``needed="truth"``), a context fact at time ``t`` that is not needed is exactly one of

* **stale** — true before ``t``, not at ``t``: the world changed, the memory did not;
* **expired** — still true at ``t`` but past its ``relevant_until``: an episode that is over;
* **false** — never true up to ``t``: a misstatement or an extraction error (truth's ``noise`` =
  ``misstatement`` / ``extraction``), or a triple truth never names (an invented derived fact);
* **unneeded** — true, but not needed: said in passing and never relevant (truth's ``noise`` =
  ``irrelevant``, which is true but relevant only at the instant it was said), or true and relevant
  but not mentioned since it became true.

Without truth (``needed="next-session"``), a context fact the session does not mention is *stale*
when the session mentions another object for its single-valued (subject, predicate), *unneeded*
otherwise; nothing is expired or false.

Utility@k charges ``S = Σ cost(kind) × count(kind)`` per point: ``(H − S) / max(1, N)``. The defaults
(stale 1, expired 1, false 1, unneeded 0) charge what misleads the model — a fact that is no longer so,
an episode that is over, a fact that never was — and not a true fact nobody needed: it already costs
the slot a needed fact could have had.

>>> ChargeCosts.parse("stale=2,unneeded=0.5")
ChargeCosts(stale=2.0, expired=1.0, false=1.0, unneeded=0.5)
>>> str(ChargeCosts())
'stale=1,expired=1,false=1,unneeded=0'
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Literal, get_args

from factmem.errors import InputError

__all__ = ["ChargeKind", "CHARGE_KINDS", "CHARGE_LABELS", "ChargeCosts"]

ChargeKind = Literal["stale", "expired", "false", "unneeded"]
CHARGE_KINDS: tuple[ChargeKind, ...] = get_args(ChargeKind)
#: each kind as a report's table row names it
CHARGE_LABELS: dict[ChargeKind, str] = {
    "stale": "stale facts in the context (true before, not now)",
    "expired": "expired facts in the context (true, relevance over)",
    "false": "false facts in the context (never true)",
    "unneeded": "unneeded facts in the context (true, not needed)",
}


@dataclass(frozen=True)
class ChargeCosts:
    """The cost of each kind of charged context fact in utility@k (numbers >= 0)."""

    stale: float = 1.0
    expired: float = 1.0
    false: float = 1.0
    unneeded: float = 0.0

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise InputError(f"cost {f.name} must be a number >= 0, got {v!r}")
            object.__setattr__(self, f.name, float(v))

    @classmethod
    def parse(cls, text: str) -> ChargeCosts:
        """``"stale=1,expired=1,false=1,unneeded=0"``; kinds left out keep their defaults."""
        values: dict[str, float] = {}
        for item in (s.strip() for s in str(text).split(",")):
            if not item:
                continue
            name, eq, value = item.partition("=")
            name = name.strip()
            if not eq or name not in CHARGE_KINDS:
                raise InputError(f"--cost: {item!r} is not KIND=NUMBER with KIND one of {', '.join(CHARGE_KINDS)}")
            if name in values:
                raise InputError(f"--cost: {name} given twice")
            try:
                values[name] = float(value)
            except ValueError:
                raise InputError(f"--cost: {name} = {value.strip()!r} is not a number") from None
        return cls(**values)

    @classmethod
    def of(cls, value: ChargeCosts | Mapping[str, float] | str | None) -> ChargeCosts:
        """Costs from costs, a mapping of kinds (others at their defaults), a ``parse`` string, or None
        (the defaults)."""
        if value is None:
            return cls()
        if isinstance(value, ChargeCosts):
            return value
        if isinstance(value, str):
            return cls.parse(value)
        if isinstance(value, Mapping):
            bad = sorted(set(value) - set(CHARGE_KINDS))
            if bad:
                raise InputError(f"costs: unknown kind {bad[0]!r}; expected {', '.join(CHARGE_KINDS)}")
            return cls(**{k: value[k] for k in value})
        raise InputError(f"costs must be ChargeCosts, a mapping or a string like {str(cls())!r}, got {value!r}")

    def to_dict(self) -> dict[str, float]:
        return asdict(self)

    def vector(self) -> tuple[float, float, float, float]:
        """The costs in :data:`CHARGE_KINDS` order."""
        return self.stale, self.expired, self.false, self.unneeded

    def describe(self) -> str:
        """The costs in words, for reports."""
        return ("a context fact that is not needed is charged by its kind — stale (true before, not now) "
                f"{self.stale:g}, expired (still true, its relevance over) {self.expired:g}, false (never true) "
                f"{self.false:g}, unneeded (true, not needed) {self.unneeded:g}")

    def __str__(self) -> str:
        return ",".join(f"{k}={v:g}" for k, v in zip(CHARGE_KINDS, self.vector()))

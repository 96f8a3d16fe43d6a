"""The promotion rule and the sentences of a tune's Decision section.

**The rule.** A recommendation replaces what runs today only if, on held-out data, it is better
than each of: the baseline, the current production parameters (when given), the empty memory and
keep-everything (:mod:`factmem.tuning.references`) — and better by at least the **minimum effect**
``min_effect`` (utility units by default, 0.01): the near end of every 95% interval of the
difference recommended − other (the low end when higher is better) must clear ``min_effect``
(``low > min_effect``; ``high < −min_effect`` when lower is better). With ``min_effect = 0`` this is
"the interval excludes 0". The first comparison that fails is named in the decision sentence; the
sentence always ends with the rule it applied. What is kept otherwise: the current parameters when
given, else the baseline.

**Restarts** (``restarts``, see :mod:`factmem.tuning.restarts`): the search is run ``restarts``
times in all, with the search seeds ``seed``, ``seed + 1``, …; a promotion stands only if every
run's decision is a promotion.

**Sentences** the Decision section adds, from the held-out numbers:

* :func:`below_empty` — the baseline scores worse than showing nothing;
* :func:`tradeoffs` — the recommendation puts fewer needed facts into the context (recall@k), loses
  more facts, or shrinks the context by more than :data:`SHRINK` of the baseline's: each with both
  numbers.

>>> from types import SimpleNamespace as C
>>> keep, why = judge({"baseline": C(a=0.5, b=0.4, difference=0.1, low=0.02, high=0.2),
...                    "empty": C(a=0.5, b=0.0, difference=0.5, low=0.4, high=0.6)},
...                   lower_is_better=False, min_effect=0.01, objective="utility@20")
>>> keep, why.startswith("Promoted")
('recommended', True)
>>> judge({"baseline": C(a=0.5, b=0.495, difference=0.005, low=0.001, high=0.01)}, lower_is_better=False,
...       min_effect=0.01, objective="utility@20")[0]
'baseline'
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import pandas as pd

from factmem.errors import InputError

__all__ = ["Promotion", "MIN_EFFECT", "SHRINK", "judge", "clears", "rule_text", "below_empty", "tradeoffs",
           "interval_text", "WHO"]

#: the default minimum effect, in the objective's units (utility@k)
MIN_EFFECT = 0.01
#: a context smaller than this share of the baseline's is named as a trade-off
SHRINK = 0.75

#: how each comparison's other side is named in sentences
WHO = {"baseline": "the baseline", "current": "the current parameters", "empty": "the empty memory",
       "keep-everything": "keep-everything"}


class _Comparison(Protocol):  # factmem.tuning.tune.Comparison
    a: float
    b: float
    difference: float
    low: float
    high: float


@dataclass(frozen=True)
class Promotion:
    """The promotion rule's settings: ``min_effect`` (see the module docstring), ``restarts`` (how
    many searches in all, each with another seed; 1: no restart) and ``restart_share`` (the share of
    the search budget — the shared random start and each study's own candidates — each restart after
    the first uses)."""

    min_effect: float = MIN_EFFECT
    restarts: int = 3
    restart_share: float = 0.5

    def __post_init__(self) -> None:
        if isinstance(self.min_effect, bool) or not isinstance(self.min_effect, (int, float)) or \
                not 0 <= self.min_effect < math.inf:
            raise InputError(f"min_effect must be a number >= 0, got {self.min_effect!r}")
        if isinstance(self.restarts, bool) or not isinstance(self.restarts, int) or self.restarts < 1:
            raise InputError(f"restarts must be an integer >= 1 (1: one search, no restart), got {self.restarts!r}")
        if isinstance(self.restart_share, bool) or not isinstance(self.restart_share, (int, float)) or \
                not 0 < self.restart_share <= 1:
            raise InputError(f"restart_share must be in (0, 1], got {self.restart_share!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"min_effect": self.min_effect, "restarts": self.restarts, "restart_share": self.restart_share}


def clears(c: _Comparison, lower_is_better: bool, min_effect: float) -> bool:
    """Whether the interval's near end clears ``min_effect`` in the better direction."""
    if not math.isfinite(c.low) or not math.isfinite(c.high):
        return False
    return c.high < -min_effect if lower_is_better else c.low > min_effect


def interval_text(c: _Comparison) -> str:
    return f"{c.difference:+.4g}, 95% interval [{c.low:+.4g}, {c.high:+.4g}]"


def rule_text(names: list[str], min_effect: float, lower_is_better: bool = False) -> str:
    """The rule, in one sentence, for the comparisons it was applied to."""
    who = [WHO.get(n, n) for n in names]
    listed = who[0] if len(who) == 1 else ", ".join(who[:-1]) + " and " + who[-1]
    end = "high end stays below" if lower_is_better else "low end clears"
    bound = f"−{min_effect:g}" if lower_is_better else f"+{min_effect:g}"
    return (f"Rule: promoted only if the 95% interval's {end} the minimum effect ({bound}) against "
            f"{listed}.")


def judge(comparisons: Mapping[str, _Comparison], *, lower_is_better: bool, min_effect: float,
          objective: str, same_as_baseline: bool = False) -> tuple[str, str]:
    """Apply the rule to held-out comparisons recommended − other, keyed ``baseline`` (required),
    ``current``, ``empty``, ``keep-everything`` (each optional). Returns (``recommended`` |
    ``baseline`` | ``current``, the decision sentence, ending with the rule)."""
    vb = comparisons["baseline"]
    fallback = "current" if "current" in comparisons else "baseline"
    stays = "the current parameters stay" if fallback == "current" else "the baseline stays"
    rule = rule_text(list(comparisons), min_effect, lower_is_better)
    if same_as_baseline:
        return "baseline", ("Not promoted: the recommendation is the baseline itself (the best candidate on the tuning "
                            f"data, or every parameter in which it differs is not identified by this log); it stays. {rule}")
    head = f"held-out {objective} {vb.a:.4g} against {vb.b:.4g} for the baseline ({interval_text(vb)})"
    for name, c in comparisons.items():
        if clears(c, lower_is_better, min_effect):
            continue
        if name == "baseline":
            why = ("the interval does not exclude 0, so the difference may be noise" if not _excludes_zero(c, lower_is_better)
                   else f"the interval's near end does not clear the minimum effect {min_effect:g}")
            return fallback, f"Not promoted: {head}: {why}; {stays}. {rule}"
        what = ("is not clearly better than" if not _excludes_zero(c, lower_is_better)
                else f"is not better by the minimum effect {min_effect:g} than")
        return fallback, (f"Not promoted: better than the baseline ({interval_text(vb)}) but it {what} {WHO.get(name, name)} "
                          f"({c.a:.4g} against {c.b:.4g}: {interval_text(c)}); {stays}. {rule}")
    others = "; ".join(f"against {WHO.get(n, n)} {interval_text(c)}" for n, c in comparisons.items() if n != "baseline")
    return "recommended", f"Promoted: {head}" + (f"; {others}" if others else "") + f". {rule}"


def _excludes_zero(c: _Comparison, lower_is_better: bool) -> bool:
    return clears(c, lower_is_better, 0.0)


def below_empty(baseline_minus_empty: _Comparison, objective: str, lower_is_better: bool) -> str | None:
    """A sentence when the baseline scores worse than the empty memory on held-out data, else None."""
    c = baseline_minus_empty
    worse = c.difference > 0 if lower_is_better else c.difference < 0
    if not worse:
        return None
    return (f"**The baseline scores below the empty memory**: held-out {objective} {c.a:.4g} for the baseline "
            f"against {c.b:.4g} for showing nothing at all (baseline − empty {interval_text(c)}) — the seed's numbers "
            "put more charged facts into the context than they earn with needed ones, so beating the baseline alone "
            "means little.")


def tradeoffs(heldout: pd.DataFrame, budget: int) -> list[str]:
    """Sentences naming what the recommendation gives up against the baseline, from a held-out table
    (:func:`factmem.tuning.tune` ``Recommendation.heldout``: columns ``key``, ``recommended``,
    ``baseline``): lower recall@k, more lost facts, a context smaller than :data:`SHRINK` of the
    baseline's."""
    h = heldout.set_index("key")
    out: list[str] = []

    def pair(key: str) -> tuple[float, float] | None:
        if key not in h.index or "recommended" not in h.columns or "baseline" not in h.columns:
            return None
        a, b = float(h.loc[key, "recommended"]), float(h.loc[key, "baseline"])
        return (a, b) if math.isfinite(a) and math.isfinite(b) else None

    recall, charged = pair(f"recall_at_{budget}"), pair(f"charged_at_{budget}")
    if recall and recall[0] < recall[1]:
        gain = ""
        if charged and charged[0] < charged[1]:
            gain = (f"; the gain is fewer charged ones (a charge of {charged[0]:.3g} per context against "
                    f"{charged[1]:.3g}: stale, expired and false facts at their costs)")
        out.append(f"**Trade-off:** it puts fewer needed facts in the context than the baseline — held-out "
                   f"recall@{budget} {recall[0]:.4g} against {recall[1]:.4g}{gain}.")
    lost = pair("lost")
    if lost and lost[0] > lost[1]:
        out.append(f"**Trade-off:** it loses more facts — {lost[0]:,.0f} archived while still true and mentioned "
                   f"again later, against {lost[1]:,.0f} for the baseline (whole memory).")
    size = pair(f"context_at_{budget}")
    if size and size[1] > 0 and size[0] < SHRINK * size[1]:
        out.append(f"**Trade-off:** it shrinks the context by more than a quarter — {size[0]:.3g} facts per context "
                   f"against {size[1]:.3g} for the baseline (room for {budget}).")
    return out


def comparison_lines(rec: Any, objective: str) -> list[str]:
    """Markdown lines of one budget's comparisons: a table of the held-out objective, recall@k, charged
    facts and context size of the recommendation, the baseline, the current parameters and the
    reference policies, with recommended − each and its interval (``rec``: a tune ``Recommendation``)."""
    h = rec.heldout.set_index("key")
    k = rec.budget
    comps: dict[str, Any] = {"baseline": rec.versus_baseline}
    if rec.versus_current is not None:
        comps["current"] = rec.versus_current
    comps.update(rec.versus_references)

    def cell(key: str, col: str) -> str:
        if key not in h.index or col not in h.columns:
            return "—"
        v = float(h.loc[key, col])
        return "n/a" if not math.isfinite(v) else f"{v:.4g}"

    lines = [f"| held out, k = {k} | {objective} | recall@{k} | charge per context (cost-weighted) | context size | "
             "recommended − this (95% interval) |", "|---|---|---|---|---|---|"]
    lines.append(f"| **recommended** | {rec.versus_baseline.a:.4g} | {cell(f'recall_at_{k}', 'recommended')} | "
                 f"{cell(f'charged_at_{k}', 'recommended')} | {cell(f'context_at_{k}', 'recommended')} | — |")
    for name, c in comps.items():
        lines.append(f"| {WHO.get(name, name)} | {c.b:.4g} | {cell(f'recall_at_{k}', name)} | "
                     f"{cell(f'charged_at_{k}', name)} | {cell(f'context_at_{k}', name)} | {interval_text(c)} |")
    return lines


def restart_lines(rec: Any, space: Any) -> list[str]:
    """Markdown lines: each run of the search at this budget — seed, candidates, decision, the
    held-out difference against the baseline and the recommended value of every searched name."""
    from factmem.tuning.restarts import searched_values

    runs = rec.restarts
    if len(runs) <= 1:
        return []
    k = rec.budget
    names = list(space)
    lines = [f"Every run of the search at k = {k} (the first, then the restarts with other seeds and a smaller budget; "
             "a promotion needs every run to promote):", "",
             "| seed | candidates | decision | vs baseline | " + " | ".join(f"`{n}`" for n in names) + " |",
             "|---" * (4 + len(names)) + "|"]
    for r in runs:
        vals = searched_values(space, r.params[k])
        shown = [f"{v:.4g}" if isinstance(v, float) else str(v) for v in vals.values()]
        decision = "promoted" if r.keep[k] == "recommended" else f"not promoted ({r.keep[k]} stays)"
        lines.append(f"| {r.seed} | {r.candidates} ({f'{r.startup} shared + {r.n} per study' if r.startup else r.n}) | {decision} | {r.difference[k]:+.4g} | "
                     + " | ".join(shown) + " |")
    return lines

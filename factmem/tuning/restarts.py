"""Restarts: the same search run again with other seeds, so that a decision that depends on the
search's luck is not shipped.

``Promotion.restarts = N`` runs the search ``N`` times in all: the first with the given
:class:`~factmem.tuning.settings.Search`, each later one (:func:`restart_searches`) a new set of
Optuna studies with the sampler seed ``seed + r`` and ``restart_share`` of its budget (the shared
random start and each study's own candidates, rounded, at least one of its own) — the same sampler,
space, objective, folds and bootstrap, the same decision rule (references, minimum effect). Grid
search is exhaustive and has no seed: it is not restarted. Each restart's decision per
budget and its recommended values are kept (:class:`RestartRun`) and shown in the report.

**Agreement** (:func:`apply_agreement`): a promotion stands only if every restart's decision at that
budget is a promotion too; otherwise the parameters kept are those the rule keeps without a
promotion, and the decision sentence says which restarts disagreed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from factmem.core.params import MemoryParams
from factmem.tuning.settings import Search
from factmem.tuning.space import ALIASES

if TYPE_CHECKING:
    from factmem.tuning.decision import Promotion
    from factmem.tuning.tune import Recommendation

__all__ = ["RestartRun", "restart_searches", "apply_agreement", "searched_values"]


@dataclass
class RestartRun:
    """One run of the search: its seed and budget, and per budget ``k`` the decision (``keep``:
    recommended, baseline or current) and the recommended parameters."""

    seed: int
    #: candidates each study proposed, after ``startup`` shared random draws (0: random or grid search)
    n: int
    startup: int
    candidates: int
    keep: dict[int, str] = field(default_factory=dict)
    params: dict[int, MemoryParams] = field(default_factory=dict)
    difference: dict[int, float] = field(default_factory=dict)

    def to_dict(self, space: Any) -> dict[str, Any]:
        return {"seed": self.seed, "n": self.n, "startup": self.startup, "candidates": self.candidates,
                "budgets": {str(k): {"keep": self.keep[k], "difference": self.difference[k],
                                     "values": searched_values(space, self.params[k])} for k in self.keep}}


def restart_searches(search: Search, promotion: Promotion) -> list[Search]:
    """The searches after the first (see the module docstring); none for a grid."""
    if search.method == "grid" or promotion.restarts <= 1:
        return []
    share = promotion.restart_share
    return [dataclasses.replace(search, seed=search.seed + r, n=max(1, round(search.n * share)),
                                startup=round(search.startup * share)) for r in range(1, promotion.restarts)]


def searched_values(space: Any, params: MemoryParams) -> dict[str, Any]:
    """The value of each searched name (an alias by the first parameter it sets) in ``params``."""
    return {name: params.get(ALIASES.get(name, (name,))[0]) for name in space}


def apply_agreement(rec: Recommendation, runs: list[RestartRun], kept: MemoryParams) -> None:
    """Demote ``rec`` (in place) when it is promoted but a restart at its budget is not; ``kept``:
    what stays then (the baseline or the current parameters)."""
    k = rec.budget
    if not rec.promoted or len(runs) <= 1:
        return
    others = [r for r in runs[1:] if r.keep.get(k) != "recommended"]
    if not others:
        return
    fallback = "current" if rec.versus_current is not None else "baseline"
    said = ", ".join(f"seed {r.seed}: {'not promoted' if r.keep[k] != 'recommended' else 'promoted'}" for r in others)
    rec.keep, rec.promoted = fallback, False
    rec._kept = kept
    rec.decision = (f"Not promoted: the restarts disagree ({said}; seed {runs[0].seed} promoted) — the decision depends "
                    f"on the search's luck, so the {'current parameters stay' if fallback == 'current' else 'baseline stays'}. "
                    f"The first search alone: {rec.decision}")

"""Notes on where a recommendation sits: at the edge of the searched range, or at a domain bound.

:func:`edge_notes` returns one sentence per searched parameter that is within 3% (in the search's
own coordinate, log ranges on the log scale) of an end of its range — "the optimum may lie beyond:
widen the range" — or, for a grid, at its smallest or largest value. A value at or next to a bound
of the parameter's **domain** gets what that bound means for the memory instead (gain 1: every
re-mention jumps to the cap; decay 0: never forgets; threshold 0: never archives; an initial
confidence at the cap), since nothing lies beyond it to widen to.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from factmem.core.params import MemoryParams
from factmem.tuning.space import ALIASES, Range, coordinate

__all__ = ["edge_notes"]


def edge_notes(space: Mapping[str, Any], rec: MemoryParams, method: str) -> list[str]:
    """Notes when the recommendation sits at the edge of the searched range (the optimum may lie
    beyond: widen it) or at — or next to — a bound of the parameter's domain, where nothing lies
    beyond and the note says instead what that bound means for the memory."""
    notes: list[str] = []
    coords = coordinate(space, rec)
    for name, values in space.items():
        target = ALIASES.get(name, (name,))[0]
        v = rec.get(target)
        meaning = _domain_meaning(name, v, rec)
        if meaning:
            notes.append(f"`{name}` = {v:.4g}: {meaning}")
            continue
        if isinstance(values, Range):
            pos = coords[name]
            if pos <= 0.03 or pos >= 0.97:
                side = "lower" if pos <= 0.03 else "upper"
                bound = values.low if side == "lower" else values.high
                meaning = _domain_meaning(name, bound, rec)
                if meaning:  # the range ends at the domain's bound: nothing to widen
                    notes.append(f"`{name}` = {v:.4g} is next to the {side} end of its domain "
                                 f"({bound:g}): {meaning.split(': ', 1)[-1]}")
                else:
                    notes.append(f"`{name}` = {v:.4g} is at the {side} edge of the searched range "
                                 f"({values.low:g}…{values.high:g}); the optimum may lie beyond: widen the range.")
        elif method == "grid":
            nums = [x for x in values if isinstance(x, (int, float)) and not isinstance(x, bool)]
            if len(nums) >= 2 and v in (min(nums), max(nums)):
                side = "lower" if v == min(nums) else "upper"
                notes.append(f"`{name}` = {v:g} is at the {side} edge of the searched values "
                             f"({min(nums):g}…{max(nums):g}); the optimum may lie beyond: widen the range.")
    return notes


def _domain_meaning(name: str, value: float, params: MemoryParams) -> str | None:
    head = name.split(".")[0]
    if head == "reinforce_gain" and value >= 0.98:
        return ("at or next to the domain bound 1.0, where every re-mention jumps to the cap "
                "(no gradual reinforcement).")
    if head in ("decay_rate", "decay_rate_by_predicate") and value <= 1e-6:
        return "at the domain bound 0: facts of this kind never decay, so they leave the memory only by contradiction."
    if head in ("archive_threshold", "threshold") and value <= 1e-6:
        return "at the domain bound 0: nothing is ever archived by decay; the memory only grows."
    if head == "initial_confidence" and value >= params.confidence_cap - 1e-3:
        return f"at the confidence cap ({params.confidence_cap:g}): a first mention is (almost) fully believed."
    return None

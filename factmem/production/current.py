"""The parameters a production memory runs with now — never assumed.

A comparison on a production file (``whatif``, ``tune --log PROD.sqlite``) is against what production
did: its *current* parameters. :func:`resolve_current` finds them, in this order:

1. the parameters the file records in ``factmem_meta`` (a file factmem wrote: ``export-db``);
2. else ``current`` — a params file (``--current FILE``) or :class:`~factmem.core.params.MemoryParams`;
3. else ``current="seed"`` (``--current seed``), said explicitly: the seed's defaults;
4. otherwise :class:`CurrentParamsMissing` (a :class:`~factmem.errors.InputError`: the CLI exits 2)
   naming the file and the flag. A file a production crate wrote has no ``factmem_meta``: taking the
   seed's defaults silently would compare against a memory production never ran (on a file written
   with other rates, half its facts do not reproduce and every difference is against a fiction).

When the file records parameters and ``current`` differs from them, the file's own are used and a
note says which parameters differ.

**The reproduction check.** The current parameters' replay should rebuild the file's facts
(:func:`~factmem.production.replay.check_reproduction`). When more than :data:`REPRODUCTION_TOLERANCE`
of the checked facts are not rebuilt, :func:`reproduction_warning` gives the sentence a report puts on
its first line — the comparison is not against what production did — with the likely causes from the
mismatches' causes, and the command exits with :data:`EXIT_NOT_REPRODUCED` (4) after writing its run
folder (the run is complete; its baseline is doubtful).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from factmem.core.params import MemoryParams
from factmem.errors import InputError

__all__ = ["SEED", "REPRODUCTION_TOLERANCE", "EXIT_NOT_REPRODUCED", "CurrentParamsMissing", "resolve_current",
           "reproduction_warning", "reproduction_share"]

#: the word that asks for the seed's defaults as the current parameters
SEED = "seed"
#: more than this share of checked facts not rebuilt: the comparison is not against production
REPRODUCTION_TOLERANCE = 0.05
#: exit status of a command whose run completed but whose current replay does not reproduce the file
EXIT_NOT_REPRODUCED = 4

_CAUSE_HINTS = {
    "other_decay_rate": "the file's facts carry other decay rates than the current parameters (wrong --current?)",
    "unexplained": "the current parameters differ from the ones production ran (thresholds, gain, initial "
                   "confidences, multi-valued predicates), or the consolidation schedule differs "
                   "(--consolidate-every)",
    "pruned": "production pruned facts under derived ones (abstraction is not replayed)",
    "abstraction_evidence": "facts reinforced by abstraction (not replayed)",
    "after_abstraction": "facts changed after an abstraction pass (not replayed)",
}


class CurrentParamsMissing(InputError):
    """The production file records no parameters and none were given (exit 2)."""


def resolve_current(path: str | os.PathLike, saved: MemoryParams | None, current: Any, *, command: str,
                    source_type: Callable[[MemoryParams, str], Any], read_source: Callable[[Any, str], Any]
                    ) -> tuple[Any, list[str]]:
    """The current parameters of the production file ``path`` (``saved``: what its ``factmem_meta``
    records, or None) and notes; see the module docstring. ``current``: None, :data:`SEED`, a params
    file path, :class:`MemoryParams` or a params document. ``command`` names the command in the error
    message. ``source_type`` (:class:`~factmem.production.whatif.ParamsSource`) and ``read_source``
    (:func:`~factmem.production.whatif.params_source`) make the result: passed in, as the what-if
    that defines them calls this module."""
    from factmem.export.diff import diff_params

    ParamsSource, params_source = source_type, read_source

    notes: list[str] = []
    is_seed = isinstance(current, str) and current == SEED
    given = ParamsSource(MemoryParams(), "seed defaults") if is_seed else (
        params_source(current, "current") if current is not None else None)
    if saved is not None:
        if given is not None and given.params != saved:
            changed = ", ".join(diff_params(given.params, saved)["parameter"])
            what = SEED if is_seed else (given.path or "(argument)")
            notes.append(f"--current {what} differs from the parameters the file records in factmem_meta "
                         f"({changed}); the file's own were used as the current parameters.")
        return ParamsSource(saved, "factmem_meta"), notes
    if given is None:
        raise CurrentParamsMissing(
            f"{Path(path)}: the file records no parameters (no factmem_meta table or no 'params' key in it), so "
            f"{command} does not know what production runs now; pass --current FILE (the parameters production "
            f"runs), or --current seed to compare against the seed's defaults explicitly")
    if is_seed:
        notes.append("The current parameters are the seed's defaults, as asked (--current seed): the file records "
                     "none. If production runs other numbers, pass them with --current FILE.")
    return given, notes


def reproduction_share(reproduction) -> float:
    """Share of the checked facts the current replay does not rebuild (0 when none were checked)."""
    return reproduction.failed / reproduction.checked if reproduction.checked else 0.0


def reproduction_warning(reproduction, current_source: str) -> str | None:
    """The report's first line when more than :data:`REPRODUCTION_TOLERANCE` of the checked facts are not
    rebuilt (None otherwise): the comparison is not against what production did, and why that may be."""
    share = reproduction_share(reproduction)
    if share <= REPRODUCTION_TOLERANCE:
        return None
    causes = sorted(reproduction.by_cause.items(), key=lambda kv: (-kv[1], kv[0]))
    hints = [f"{_CAUSE_HINTS.get(c, c)} ({n:,} facts)" for c, n in causes if n]
    if current_source == "seed defaults":
        hints.insert(0, "the current parameters are the seed's defaults (--current seed), which production may "
                        "not run")
    return (f"**Warning: this comparison is not against what production did** — the current parameters' replay "
            f"does not rebuild {reproduction.failed:,} of {reproduction.checked:,} production facts "
            f"({100 * share:.1f}% > {100 * REPRODUCTION_TOLERANCE:.0f}%). Likely causes: "
            + ("; ".join(hints) if hints else "unknown") + f". Exit status {EXIT_NOT_REPRODUCED}.")

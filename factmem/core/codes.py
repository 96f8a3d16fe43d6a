"""The vocabularies every layer shares: fact kinds, statuses, why states end, time units, options.

One definition each, so that the store's SQL, the set-based engines, the metrics and the plots
cannot drift apart.

* **Kinds** — the seed's four fact kinds, in the order of their integer codes (:data:`KIND_CODES`,
  used by the engines and the metrics); a log carries only :data:`MENTION_KINDS` (``derived`` facts
  come from abstraction).
* **Statuses** — a fact is ``active``, ``superseded`` (contradicted) or ``archived`` (decayed below
  the threshold, or pruned under a validated generalization). :class:`Status` holds the integer
  codes the engines compute with; :data:`STATUS_REASONS` names why a fact left ``active``.
* **End reasons** — a *belief state* is one stretch of time during which a fact kept one stored
  confidence; :class:`EndReason` says why it ended (the next observation reinforced or superseded
  it, a consolidation archived it, pruning archived it, or it is still open).
* **Time** — integer Unix seconds; :data:`OPEN` is "never" as an int64 time, :data:`NO_TIME` is "no
  time" (no status change yet); neither is a valid time (the supported range, years 0001–9999, is
  :data:`MIN_TIME`..:data:`MAX_TIME`). Times before 1970 are negative and valid: never use −1 or 0
  as a marker. Ages are in days.

>>> Status.SUPERSEDED.label
'superseded'
>>> KIND_CODES["episodic"], EndReason.PRUNED == 4
(2, True)
"""

from __future__ import annotations

from enum import IntEnum
from typing import Literal, get_args

import numpy as np

__all__ = [
    "Kind", "KINDS", "KIND_CODES", "MENTION_KINDS", "Status", "StatusName", "STATUSES", "StatusReason",
    "STATUS_REASONS", "EndReason", "OPEN", "NO_TIME", "MIN_TIME", "MAX_TIME", "DAY", "HOUR", "SECONDS_PER_DAY",
    "ReinforceBase", "REINFORCE_BASES", "SearchMode", "SEARCH_MODES", "LinkScope", "LINK_SCOPES",
]

# -- kinds ------------------------------------------------------------------------------------------

Kind = Literal["explicit", "user_preference", "episodic", "derived"]
#: The four fact kinds of the seed, in the order of their integer codes.
KINDS: tuple[Kind, ...] = get_args(Kind)
KIND_CODES: dict[str, int] = {k: i for i, k in enumerate(KINDS)}
#: The kinds a conversation log may carry (``derived`` facts come from abstraction, never from a log).
MENTION_KINDS: tuple[Kind, ...] = ("explicit", "user_preference", "episodic")

# -- statuses ---------------------------------------------------------------------------------------

StatusName = Literal["active", "archived", "superseded"]
#: Status names as the seed's ``status`` column spells them.
STATUSES: tuple[StatusName, ...] = get_args(StatusName)


class Status(IntEnum):
    """A fact's status as an integer code (the engines compute with these; SQL spells the names)."""

    ACTIVE = 0
    SUPERSEDED = 1
    ARCHIVED = 2

    @property
    def label(self) -> StatusName:
        """The name the ``status`` column stores."""
        return self.name.lower()  # type: ignore[return-value]


StatusReason = Literal["contradiction", "decay", "pruned"]
#: Why a fact left ``active`` (the ``status_reason`` column): superseded by contradiction, archived by
#: decay, archived by pruning under a validated derived fact.
STATUS_REASONS: tuple[StatusReason, ...] = get_args(StatusReason)


class EndReason(IntEnum):
    """Why a belief state (one stored confidence of one fact, between two changes) ended."""

    REINFORCED = 0  #: the next observation of the same fact
    SUPERSEDED = 1  #: a different object for a single-valued (subject, predicate)
    ARCHIVED = 2  #: a consolidation found it below the archive threshold
    OPEN = 3  #: still active at the end
    PRUNED = 4  #: archived under a validated derived fact


# -- time -------------------------------------------------------------------------------------------

#: "Never" as an int64 Unix time: the end of a state that has not ended.
OPEN: int = int(np.iinfo(np.int64).max)
#: "No time" as an int64: a status that has not changed, an absent bound. Not a valid time.
NO_TIME: int = int(np.iinfo(np.int64).min)
#: The supported range of times: 0001-01-01T00:00:00Z .. 9999-12-31T23:59:59Z in Unix seconds.
#: Everything a user hands in (arguments, batches, logs, imported files) is checked against it.
MIN_TIME: int = -62_135_596_800
MAX_TIME: int = 253_402_300_799
#: Whole seconds, for integer time arithmetic.
DAY: int = 86400
HOUR: int = 3600
#: Seconds per day as a float, for ages: ``(at - last_reinforced) / SECONDS_PER_DAY``.
SECONDS_PER_DAY: float = 86400.0

# -- options ----------------------------------------------------------------------------------------

ReinforceBase = Literal["stored", "effective"]
#: ``stored``: reinforcement applies to the stored confidence (the seed); ``effective``: to the decayed one.
REINFORCE_BASES: tuple[ReinforceBase, ...] = get_args(ReinforceBase)

LinkScope = Literal["cluster", "support"]
#: What an abstraction pass links a derived fact to: ``cluster``, every member of the cluster it was
#: derived from (the seed); ``support``, only the members the model cites as supporting it.
LINK_SCOPES: tuple[LinkScope, ...] = get_args(LinkScope)

SearchMode = Literal["tpe", "cmaes", "gp", "random", "grid"]
SEARCH_MODES: tuple[SearchMode, ...] = get_args(SearchMode)

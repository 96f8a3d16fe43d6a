"""Reference policies: two memories no tuning is needed to build, scored on the same points as
every candidate, so that "better than the baseline" can be read against what trivial rules achieve.

* **empty** — nothing is ever in the context. At every evaluation point it puts no fact in the
  context: no needed fact (recall 0), no charged fact, utility 0. Its per-subject sums are exact
  without a replay: the fields that describe the points themselves (:data:`POINT_FIELDS`: how many
  points, how many needed facts) are those of any scored row, every field that counts something in
  the context is 0. A baseline below it puts more charged facts into a context than it earns with
  needed ones.
* **keep-everything** — the base with every decay rate 0 (per kind and per predicate) and both
  thresholds at 1e-6: nothing is archived by decay, every fact is eligible for the context, which
  then holds the most confident (most reinforced) facts; only contradiction removes a fact. It is
  a real parameter set, replayed and scored like a candidate (:func:`keep_everything`), but never
  a candidate itself: a sweep keeps it apart (``SweepResult.references``) so that no choice picks it.

A recommendation is promoted only if it beats both by the interval rule
(:mod:`factmem.tuning.decision`).

>>> from factmem.core.params import MemoryParams
>>> p = keep_everything(MemoryParams(multi_valued_predicates=["likes"]))
>>> p.decay_rate["episodic"], p.archive_threshold, sorted(p.multi_valued_predicates)
(0.0, 1e-06, ['likes'])
"""

from __future__ import annotations

import numpy as np

from factmem.core.codes import KINDS
from factmem.core.params import MemoryParams
from factmem.evaluation.context_scores import FIELDS

__all__ = ["REFERENCES", "EMPTY", "KEEP_EVERYTHING", "POINT_FIELDS", "KEEP_THRESHOLD", "keep_everything",
           "empty_sums", "reference_labels"]

EMPTY = "empty"
KEEP_EVERYTHING = "keep-everything"
#: the reference policies, in the order reports show them
REFERENCES: tuple[str, ...] = (EMPTY, KEEP_EVERYTHING)
#: the thresholds of keep-everything: above 0 (a fact at confidence 0 is not believed), below anything
KEEP_THRESHOLD = 1e-6
#: context-sum fields that describe the evaluation points, not the context (kept by :func:`empty_sums`)
POINT_FIELDS: tuple[str, ...] = ("points", "needed")


def keep_everything(base: MemoryParams) -> MemoryParams:
    """``base`` with every decay rate 0 (each kind's and each per-predicate rate) and the archive and
    retrieval thresholds at :data:`KEEP_THRESHOLD`; everything else (the multi-valued predicates, the
    initial confidences, the gain) as in ``base``."""
    changes: dict[str, object] = {f"decay_rate.{k}": 0.0 for k in KINDS}
    changes.update({f"decay_rate_by_predicate.{p}": 0.0 for p in base.decay_rate_by_predicate})
    changes.update(archive_threshold=KEEP_THRESHOLD, retrieval_threshold=KEEP_THRESHOLD)
    return base.replace(**changes)


def empty_sums(sums: np.ndarray) -> np.ndarray:
    """The context sums of the empty memory on the points of ``sums`` (any array whose last axis is
    :data:`~factmem.evaluation.context_scores.FIELDS`): the point fields kept, every other field 0."""
    out = np.zeros_like(sums)
    for name in POINT_FIELDS:
        i = FIELDS.index(name)
        out[..., i] = sums[..., i]
    return out


def reference_labels() -> dict[str, str]:
    """What each reference is, in words (for reports and tables)."""
    return {EMPTY: "nothing in the context",
            KEEP_EVERYTHING: "no decay, thresholds at 1e-6: nothing archived, every fact eligible"}

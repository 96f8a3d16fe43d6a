"""Hold a memory to the reference model: replay a stream through it, replay the same stream through
:class:`~factmem.testing.reference.RefMemory`, and compare the fact tables.

The comparison is on the seed's columns plus factmem's (``FACT_COLUMNS``): every column exactly but
``confidence`` (to a relative tolerance: closed forms and loops may differ in the last bits), and
facts in id order. A memory that stores no ``status_changed_at``/``status_reason``/``stale`` can
compare on ``columns=SEED_COLUMNS``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from factmem.core.params import MemoryParams
from factmem.testing.reference import RefMemory
from factmem.testing.strategies import Row, Segment

__all__ = ["SEED_COLUMNS", "FACT_COLUMNS", "ordered", "frame", "reference_memory", "expected_facts",
           "assert_facts_equal"]

#: the seed's thirteen columns of memory_facts
SEED_COLUMNS: tuple[str, ...] = (
    "id", "subject", "predicate", "object", "note", "kind", "confidence", "reinforcement_count",
    "first_seen", "last_reinforced", "decay_rate", "status", "supersedes_id",
)
#: the seed's columns and factmem's three
FACT_COLUMNS: tuple[str, ...] = SEED_COLUMNS + ("status_changed_at", "status_reason", "stale")


def ordered(rows: Sequence[Row]) -> list[tuple[int, Row]]:
    """(row index, row) in (ts, row order): the order a memory must apply a segment's mentions in."""
    return sorted(enumerate(rows), key=lambda x: (x[1][0], x[0]))


def frame(rows: Sequence[Row]) -> pd.DataFrame:
    """A segment's rows as a batch (the columns ``FactStore.ingest`` takes), session and message ids
    numbered by row."""
    return pd.DataFrame({
        "ts": pd.array([r[0] for r in rows], dtype="int64"),
        "subject": pd.array([r[1] for r in rows], dtype=object),
        "predicate": pd.array([r[2] for r in rows], dtype=object),
        "object": pd.array([r[3] for r in rows], dtype=object),
        "kind": pd.array([r[4] for r in rows], dtype=object),
        "session_id": pd.array([f"s{i % 3}" for i in range(len(rows))], dtype=object),
        "message_id": pd.array([f"m{i}" for i in range(len(rows))], dtype=object),
        "note": pd.array([r[5] for r in rows], dtype=object),
    })


def reference_memory(params: MemoryParams, segments: Sequence[Segment],
                     switch: MemoryParams | None = None) -> RefMemory:
    """The reference model after ``segments`` (each segment's mentions in (ts, row) order, then a
    consolidation); ``switch``: parameters to change to before the second segment."""
    m = RefMemory(params)
    for i, (rows, at) in enumerate(segments):
        if switch is not None and i == 1:
            m.params = switch
        for j, (ts, subj, pred, obj, kind, note) in ordered(rows):
            m.remember(subj, pred, obj, kind, ts, f"s{j % 3}", f"m{j}", note)
        m.consolidate(at)
    return m


def expected_facts(params: MemoryParams, segments: Sequence[Segment], switch: MemoryParams | None = None
                   ) -> pd.DataFrame:
    """The fact table the semantics give for ``segments`` (columns :data:`FACT_COLUMNS`, id order)."""
    return pd.DataFrame(reference_memory(params, segments, switch).table(), columns=list(FACT_COLUMNS))


def assert_facts_equal(actual: pd.DataFrame, expected: pd.DataFrame, *, columns: Sequence[str] = FACT_COLUMNS,
                       rtol: float = 1e-12) -> None:
    """Raise ``AssertionError`` naming the first column and fact that differ (confidences to ``rtol``;
    ``None``, NaN and ``NA`` are all "no value")."""
    got = actual.sort_values("id", kind="stable").reset_index(drop=True)
    want = expected.sort_values("id", kind="stable").reset_index(drop=True)
    assert len(got) == len(want), f"{len(got)} facts, expected {len(want)}"
    if not len(want):
        return

    def norm(v: object) -> object:
        if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)):
            return None
        return v.item() if isinstance(v, np.generic) else v

    for col in columns:
        if col == "confidence":
            np.testing.assert_allclose(got[col].to_numpy(np.float64), want[col].to_numpy(np.float64),
                                       rtol=rtol, atol=0, err_msg="column 'confidence'")
            continue
        g, w = [norm(v) for v in got[col].tolist()], [norm(v) for v in want[col].tolist()]
        if g != w:
            i = next(i for i, (a, b) in enumerate(zip(g, w)) if a != b)
            raise AssertionError(f"column {col!r} differs at fact id {want.loc[i, 'id']}: {g[i]!r}, expected {w[i]!r}")

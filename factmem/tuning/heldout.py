"""The held-out metrics table of a recommendation: what ``tune`` writes to ``heldout.parquet`` and the
report shows beside its decision.

Context rows (:data:`HELDOUT_ROWS`) pool each policy's held-out sums (every person scored by the
choice made without their fold) into one ratio per metric (:func:`~factmem.tuning.uncertainty.pooled_ratio`);
whole-memory rows (:data:`CHECKPOINT_ROWS`) are read from the sweep's checkpoint columns of one part
and from the reference policies' (the empty memory has none: it is a context policy). Every row says
which direction is better (``higher`` / ``lower`` / ``—``) and its scope (held out, whole memory).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from factmem.evaluation.charges import CHARGE_KINDS, CHARGE_LABELS
from factmem.evaluation.context import FIELDS
from factmem.tuning.references import REFERENCES
from factmem.tuning.sweep import SweepResult
from factmem.tuning.uncertainty import pooled_ratio

__all__ = ["HELDOUT_ROWS", "CHECKPOINT_ROWS", "heldout_table"]

#: (label, context field, higher is better) of the held-out context rows
HELDOUT_ROWS = [
    ("utility@k", "utility", True), ("recall@k (needed facts in the context)", "recall", True),
    ("precision@k", "precision", True),
    *((CHARGE_LABELS[kind], kind, False) for kind in CHARGE_KINDS),
    ("charge (cost-weighted)", "charged", False), ("context size", "context", None),
    ("needed facts per point", "needed", None), ("log loss of context facts", "log_loss", False),
]
CHECKPOINT_ROWS = [("precision (believed set)", "precision", True), ("recall (believed set)", "recall", True),
                    ("believed-set size", "believed", None), ("stale beliefs", "stale", False),
                    ("lost facts", "lost", False), ("log loss, held facts", "held_log_loss", False),
                    ("log loss, every fact mentioned", "log_loss", False)]


def heldout_table(columns: dict[str, np.ndarray], res: SweepResult, part: str, best: int, i_base: int, i_def: int,
                  i_cur: int | None, k: int, i_start: int | None = None) -> pd.DataFrame:
    """The metrics table of one budget's recommendation (``heldout.parquet``, the report's table):
    ``columns`` — per policy (recommended, baseline, current, the references), the held-out point ×
    field sums of the context metrics at ``k`` — pooled per :data:`HELDOUT_ROWS`; then the
    whole-memory metrics of part ``part`` per :data:`CHECKPOINT_ROWS` at the rows given (``best``,
    ``i_base``, ``i_def``, ``i_cur``, ``i_start``: rows of ``res``) and the references'."""
    rows = []
    for label, fld, higher in HELDOUT_ROWS:
        if not columns:
            break
        row: dict[str, Any] = {"metric": label.replace("@k", f"@{k}"), "key": f"{fld}_at_{k}"}
        for name, sums in columns.items():
            if fld in ("precision",):
                row[name] = pooled_ratio(sums, fld)
            elif fld == "log_loss":
                t = sums.sum(axis=0)
                row[name] = float(t[FIELDS.index("log_loss")] / t[FIELDS.index("scored")]) \
                    if t[FIELDS.index("scored")] else float("nan")
            else:
                row[name] = pooled_ratio(sums, fld)
        row["better"] = "—" if higher is None else ("higher" if higher else "lower")
        row["scope"] = "held out"
        rows.append(row)
    tab = res.table
    idx = {"recommended": best, "baseline": i_base, "seed defaults": i_def}
    if i_cur is not None:
        idx["current"] = i_cur
    if i_start is not None:
        idx["start"] = i_start
    for label, col, higher in CHECKPOINT_ROWS:
        c = f"{part}.{col}"
        if c not in tab.columns:
            continue
        row = {"metric": label, "key": col, **{name: float(tab.loc[i, c]) for name, i in idx.items()}}
        refs = res.reference_table
        for name in REFERENCES:  # the empty memory is a context policy: its whole-memory metrics are NaN
            if columns and name in columns and len(refs) and c in refs.columns:
                row[name] = float(refs.set_index("reference").loc[name, c])
        row["better"] = "—" if higher is None else ("higher" if higher else "lower")
        row["scope"] = "whole memory" + (" (descriptive: the recommendation's own tuning data)" if part == "all" else "")
        rows.append(row)
    return pd.DataFrame(rows)

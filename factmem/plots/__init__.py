"""matplotlib figures of factmem: every function takes DataFrames and plain values, draws into
``ax`` (or ``axes``) when given, and returns the :class:`matplotlib.figure.Figure`.

Nothing here calls ``plt.show()`` or changes global matplotlib state; in Jupyter a returned figure
displays itself, in a script pass it to :func:`save`. Colours are fixed per fact kind
(:data:`KIND_COLORS`) across every figure. Time inputs are integer Unix seconds (UTC): axes show
UTC dates for real timestamps and days since the start for synthetic clocks (``time="date"`` or
``"days"`` forces one).

Memory: :func:`trajectories`, :func:`kind_trajectories`, :func:`decay_curves`, :func:`lineage`.
Evaluation: :func:`checkpoint_metrics`, :func:`abstraction_outcomes`, :func:`sweep_heatmap`,
:func:`pareto` (and :func:`pareto_front`), :func:`reliability`. Tuning: :func:`budget_curves`, :func:`slices`.
What-if on a production memory: :func:`believed_over_time`, :func:`subject_changes`.

>>> import pandas as pd
>>> table = pd.DataFrame({"label": "seed", "kind": ["explicit", "episodic"],
...                       "decay_rate": [0.05, 0.30], "initial_confidence": [0.4, 0.4]})
>>> fig = decay_curves(table, days=30, threshold=0.05)
>>> fig.axes[0].get_xlabel()
'days since last reinforcement'
"""

from __future__ import annotations

from factmem.plots.common import KIND_COLORS, KINDS, STATUS_COLORS, save, saving_aside
from factmem.plots.evaluation import (
    METRIC_LABELS,
    OUTCOME_COLORS,
    abstraction_outcomes,
    checkpoint_metrics,
    pareto,
    pareto_front,
    reliability,
    sweep_heatmap,
)
from factmem.plots.memory import decay_curves, kind_trajectories, lineage, trajectories
from factmem.plots.tuning import budget_curves, slices
from factmem.plots.whatif import believed_over_time, subject_changes

__all__ = [
    "KINDS", "KIND_COLORS", "STATUS_COLORS", "OUTCOME_COLORS", "METRIC_LABELS",
    "trajectories", "kind_trajectories", "decay_curves", "lineage",
    "checkpoint_metrics", "abstraction_outcomes", "sweep_heatmap", "pareto", "pareto_front", "reliability",
    "budget_curves", "slices", "believed_over_time", "subject_changes", "save", "saving_aside",
]

"""The notebook-facing options of factmem.plots: lineage with the ground truth overlaid, trajectories
coloured by a role instead of the kind, and checkpoint panels that say which count is cumulative.
Contents are checked against the inputs (positions, colours, labels)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_hex

from factmem import plots
from factmem.store.factstore import FactStore

D = 86400
T0 = 1_709_251_200  # 2024-03-01T00:00:00Z


@pytest.fixture
def mem():
    """ada's preference changes: rust (days 0-30), zig (30-50), rust again (50-); a work fact."""
    s = FactStore()
    for pred, obj, kind, day in [("prefers", "rust", "user_preference", 0), ("prefers", "rust", "user_preference", 5),
                                 ("prefers", "zig", "user_preference", 30), ("prefers", "rust", "user_preference", 50),
                                 ("works_at", "acme", "explicit", 1), ("works_at", "acme", "explicit", 20)]:
        s.remember("ada", pred, obj, kind=kind, at=T0 + day * D)
    yield s
    s.close()


def _truth_lines(ax):
    """The black overlay lines of ``lineage(truth=...)``: (row, x start, x end)."""
    return sorted((float(ln.get_ydata()[0]), *map(float, ln.get_xdata())) for ln in ax.get_lines()
                  if to_hex(ln.get_color()) == "#000000" and ln.get_linewidth() == pytest.approx(2.4)
                  and len(ln.get_xdata()) == 2)


def test_lineage_overlays_the_truth_under_each_version_of_its_object(mem):
    truth = pd.DataFrame({
        "subject": ["ada", "ada", "ada", "ada", "bob"],
        "predicate": ["prefers"] * 4 + ["prefers"],
        "object": ["rust", "zig", "rust", "go", "rust"],
        # rust true from day -10 (before the first mention) to 28; zig 28-52; rust again from 52 (open);
        # go never true (a misstatement: valid_to <= valid_from); bob's row is another subject
        "valid_from": [T0 - 10 * D, T0 + 28 * D, T0 + 52 * D, T0 + 40 * D, T0],
        "valid_to": [T0 + 28 * D, T0 + 52 * D, None, T0 + 40 * D, None],
    })
    fig = plots.lineage(mem.history("ada", "prefers"), end=T0 + 60 * D, time="days", truth=truth)
    ax = fig.axes[0]
    lines = _truth_lines(ax)
    origin = -10.0  # days are counted from the earliest time drawn: the truth's day -10
    # each 'rust' version (rows 0 and 2) gets both rust intervals; 'zig' (row 1) its own; 'go' nothing
    expected = sorted([(0.37, -10 - origin, 28 - origin), (0.37, 52 - origin, 60 - origin),
                       (2.37, -10 - origin, 28 - origin), (2.37, 52 - origin, 60 - origin),
                       (1.37, 28 - origin, 52 - origin)])
    np.testing.assert_allclose(lines, expected)
    assert ax.get_xlim()[0] < 0.0 + 1e-9  # the axis reaches back to when rust became true
    assert "object true (ground truth)" in [t.get_text() for t in ax.get_legend().get_texts()]


def test_lineage_without_truth_draws_no_overlay(mem):
    ax = plots.lineage(mem.history("ada", "prefers"), end=T0 + 60 * D, time="days").axes[0]
    assert _truth_lines(ax) == []
    assert "object true (ground truth)" not in [t.get_text() for t in ax.get_legend().get_texts()]


def test_lineage_truth_must_have_its_columns(mem):
    with pytest.raises(ValueError, match="valid_to"):
        plots.lineage(mem.history("ada", "prefers"), truth=pd.DataFrame({"object": ["rust"], "valid_from": [T0]}))


def test_trajectories_coloured_by_a_role_column(mem):
    facts = mem.facts()
    traj = mem.trajectories(facts["id"].tolist(), T0, T0 + 60 * D, D)
    role = {1: "supports it", 2: "unrelated", 3: "supports it", 4: "derived"}
    traj["role"] = traj["fact_id"].map(role)
    fig = plots.trajectories(traj, evidence=mem.evidence(), facts=facts, color_by="role",
                             colors={"derived": "#CC79A7"})
    ax = fig.axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {"supports it (2 facts)", "unrelated (1 fact)", "derived (1 fact)"} <= set(legend)
    assert not any(t.startswith(("explicit", "user_preference")) for t in legend)  # no kind entries
    handles = dict(zip(legend, ax.get_legend().legend_handles))
    colours = {name.split(" (")[0]: to_hex(h.get_color()) for name, h in handles.items() if "fact" in name}
    assert colours["derived"] == "#cc79a7"  # the colour asked for
    assert len(set(colours.values())) == 3  # the others get distinct palette colours
    # every solid segment of a fact is in its role's colour
    solid = ax.collections[0]
    drawn = {to_hex(c) for c in solid.get_colors()}
    assert drawn <= set(colours.values()) and len(drawn) == 3


def test_trajectories_colour_column_must_exist(mem):
    traj = mem.trajectories([1], T0, T0 + 10 * D, D)
    with pytest.raises(ValueError, match="role"):
        plots.trajectories(traj, color_by="role")


def test_checkpoint_metrics_say_stale_is_per_checkpoint_and_lost_cumulative():
    t = T0 + np.arange(5) * D
    m = pd.DataFrame({"t": t, "believed": [5, 6, 7, 8, 9], "precision": 0.9, "recall": 0.8,
                      "stale": [1, 0, 2, 1, 0], "lost": [0, 1, 1, 2, 3]})
    c = plots.checkpoint_metrics(m).axes[2]
    labels = [ln.get_label() for ln in c.get_lines()]
    assert any("stale" in lab and "at each checkpoint" in lab for lab in labels)
    assert any("lost" in lab and "cumulative" in lab for lab in labels)
    assert "cumulative" in c.get_title(loc="left")

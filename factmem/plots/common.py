"""Shared machinery of :mod:`factmem.plots`: colours, input checks, time axes, figure creation.

Ground floor: imports numpy, pandas and matplotlib only. Figures are built as
:class:`matplotlib.figure.Figure` objects, never through pyplot's global figure registry, so a
sweep that draws hundreds of figures leaks nothing and a notebook shows each figure once (the
inline backend displays a returned ``Figure``).
"""

from __future__ import annotations

import datetime as _dt
import io
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import matplotlib.dates as mdates
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

# Plots speak DataFrames and plain values; they take only the shared vocabularies from core.
from factmem.core import forked
from factmem.core.codes import KINDS, STATUSES  # noqa: F401 - re-exported for the figures
from factmem.errors import InputError

__all__ = ["KIND_COLORS", "OTHER_COLOR", "STATUS_COLORS", "STATUS_HATCH", "CONFIDENCE_LABEL",
    "THRESHOLD_STYLE", "kind_color", "kind_colors", "kind_order", "require", "seconds", "numbers",
    "PlotFigure", "root_figure", "new_axes", "new_panels", "legend_outside", "kind_handles", "threshold_line",
    "confidence_axis", "GRID_STYLE", "light_grid", "TimeAxis", "save", "saving_aside"]

#: One colour per fact kind, the same in every figure (Okabe–Ito palette: colour-blind safe).
KIND_COLORS: dict[str, str] = {
    "explicit": "#0072B2",         # blue
    "user_preference": "#009E73",  # bluish green
    "episodic": "#D55E00",         # vermillion
    "derived": "#CC79A7",          # reddish purple
}
#: Colour of a kind not in :data:`KIND_COLORS`.
OTHER_COLOR = "#555555"

#: Fill colour and hatch of each fact status (lineage timelines).
STATUS_COLORS: dict[str, str] = {"active": "#56B4E9", "superseded": "#E69F00", "archived": "#BBBBBB"}
STATUS_HATCH: dict[str, str] = {"active": "", "superseded": "///", "archived": "xxx"}

CONFIDENCE_LABEL = "effective confidence (0–1)"
THRESHOLD_STYLE: dict[str, Any] = {"color": "#444444", "linestyle": (0, (6, 3)), "linewidth": 1.1, "zorder": 1}

_Y2000 = 946_684_800  # 2000-01-01T00:00:00Z: earlier timestamps are taken for synthetic clocks
_UTC = _dt.UTC


def kind_color(kind: Any) -> str:
    """The colour of a fact kind (grey for an unknown kind)."""
    return KIND_COLORS.get(kind, OTHER_COLOR)


def kind_colors(kinds: Iterable[Any]) -> np.ndarray:
    """Colours of many kinds at once (object array of hex strings)."""
    return pd.Series(list(kinds), dtype=object).map(KIND_COLORS).fillna(OTHER_COLOR).to_numpy(dtype=object)


def kind_order(kinds: Iterable[Any]) -> list:
    """Distinct kinds present, factmem's kinds first in their fixed order, then others sorted."""
    present = pd.unique(pd.Series(list(kinds), dtype=object).dropna())
    known = [k for k in KINDS if k in set(present)]
    return known + sorted(str(k) for k in present if k not in KIND_COLORS)


# -- input checks ------------------------------------------------------------------------------------

def require(df: Any, columns: Sequence[str], what: str, *, allow_empty: bool = False) -> pd.DataFrame:
    """Check that ``df`` is a DataFrame with ``columns`` and (unless ``allow_empty``) some rows.

    Raises ``ValueError`` naming the argument and the missing column(s), so a user sees what to
    pass instead of a matplotlib traceback."""
    if not isinstance(df, pd.DataFrame):
        raise InputError(f"{what} must be a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        names = ", ".join(repr(c) for c in missing)
        have = ", ".join(repr(str(c)) for c in df.columns) or "none"
        raise InputError(f"{what} is missing column{'s' if len(missing) > 1 else ''} {names} (it has: {have})")
    if not allow_empty and len(df) == 0:
        raise InputError(f"{what} is empty: there is nothing to plot (expected rows with columns "
                         f"{', '.join(columns)})")
    return df


def seconds(values: Any, what: str) -> np.ndarray:
    """Integer Unix seconds (or datetimes) as float64 seconds; missing values become NaN."""
    s = pd.Series(values) if not isinstance(values, pd.Series) else values
    if pd.api.types.is_datetime64_any_dtype(s):
        if getattr(s.dt, "tz", None) is not None:
            s = s.dt.tz_convert("UTC").dt.tz_localize(None)
        out = s.astype("datetime64[ns]").to_numpy().astype("datetime64[s]").astype(np.int64).astype(np.float64)
        out[s.isna().to_numpy()] = np.nan
        return out
    try:
        return pd.to_numeric(s, errors="raise").to_numpy(dtype=np.float64, na_value=np.nan)
    except (ValueError, TypeError) as exc:
        raise InputError(f"{what} must hold integer Unix seconds (or datetimes): {exc}") from None


def numbers(df: pd.DataFrame, column: str, what: str) -> np.ndarray:
    """A numeric column as float64 (NaN for missing); a clear error for non-numbers."""
    try:
        return pd.to_numeric(df[column], errors="raise").to_numpy(dtype=np.float64, na_value=np.nan)
    except (ValueError, TypeError) as exc:
        raise InputError(f"{what} column {column!r} must be numeric: {exc}") from None


# -- figures ---------------------------------------------------------------------------------------

class PlotFigure(Figure):
    """A plain :class:`Figure` that renders itself as PNG in IPython/Jupyter.

    Figures here are not registered with pyplot (no global state; nothing to close in a loop of
    hundreds), and IPython's inline PNG printer for figures exists only once pyplot has drawn
    something; ``_repr_png_`` makes a returned figure display exactly once either way.
    """

    def _repr_png_(self) -> bytes:
        buf = io.BytesIO()
        self.savefig(buf, format="png", metadata={"Software": None})
        return buf.getvalue()


def root_figure(ax: Axes) -> Figure:
    try:
        fig: Any = ax.get_figure(root=True)
    except TypeError:  # matplotlib < 3.10 has no root=; its .figure is the root already
        fig = ax.figure
    assert isinstance(fig, Figure), "an Axes drawn on belongs to a Figure"
    return fig


def new_axes(ax: Axes | None, figsize: tuple[float, float]) -> tuple[Figure, Axes]:
    """The given axes and its figure, or a fresh constrained-layout figure with one axes."""
    if ax is not None:
        if not isinstance(ax, Axes):
            raise InputError(f"ax must be a matplotlib Axes, got {type(ax).__name__}")
        return root_figure(ax), ax
    fig = PlotFigure(figsize=figsize, layout="constrained")
    return fig, fig.add_subplot()


def new_panels(axes: Sequence[Axes] | None, n: int, figsize: tuple[float, float], *, what: str,
               height_ratios: Sequence[float] | None = None, sharex: bool = True,
               allowed: Sequence[int] | None = None) -> tuple[Figure, list[Axes]]:
    """``n`` stacked axes (shared x) on a fresh figure, or the caller's ``axes`` after a length check."""
    if axes is not None:
        axes = list(np.ravel(np.asarray(axes, dtype=object)))
        ok = allowed or (n,)
        if len(axes) not in ok or not all(isinstance(a, Axes) for a in axes):
            raise InputError(f"{what}: axes must be a sequence of {' or '.join(map(str, ok))} matplotlib Axes, "
                             f"got {len(axes)} item(s)")
        return root_figure(axes[0]), axes
    fig = PlotFigure(figsize=figsize, layout="constrained")
    made = fig.subplots(n, 1, sharex=sharex, squeeze=False,
                        gridspec_kw={"height_ratios": list(height_ratios)} if height_ratios else None)
    return fig, list(made[:, 0])


def legend_outside(ax: Axes, handles=None, labels=None, *, title: str | None = None, ncol: int = 1, **kw):
    """A legend to the right of the axes, so it never covers data (constrained layout makes room)."""
    if handles is None:
        handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return None
    return ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0,
                     frameon=False, title=title, ncol=ncol, fontsize="small", title_fontsize="small", **kw)


def kind_handles(kinds: Iterable[Any], counts: dict | None = None, lw: float = 2.2) -> tuple[list, list]:
    """Legend proxies: one coloured line per kind (with a fact count when given)."""
    hs, ls = [], []
    for k in kinds:
        hs.append(Line2D([], [], color=kind_color(k), lw=lw))
        ls.append(f"{k} ({counts[k]})" if counts and k in counts else str(k))
    return hs, ls


def threshold_line(ax: Axes, threshold: float | None, what: str = "archive threshold"):
    """A labelled horizontal dashed line at ``threshold`` (nothing when None)."""
    if threshold is None:
        return None
    thr = float(threshold)
    if not np.isfinite(thr):
        raise InputError(f"threshold must be a finite number, got {threshold!r}")
    return ax.axhline(thr, label=f"{what} ({thr:g})", **THRESHOLD_STYLE)


#: the light grid lines of every figure
#: How a named parameter set is drawn in every figure of a tuning run (slices, Pareto, budget
#: curves): the same role has the same marker and colour everywhere, whatever order it is passed in.
ROLE_STYLE: dict[str, dict[str, Any]] = {
    "recommended": {"marker": "*", "color": "#0072B2", "lw": 2.2, "ls": "-", "size": 170},
    "baseline": {"marker": "D", "color": "#555555", "lw": 1.8, "ls": "--", "size": 70},
    "seed defaults": {"marker": "P", "color": "#E69F00", "lw": 1.6, "ls": ":", "size": 80},
    "current": {"marker": "s", "color": "#009E73", "lw": 1.8, "ls": "-.", "size": 70},
    "empty": {"marker": "X", "color": "#CC3311", "lw": 1.4, "ls": (0, (1, 2)), "size": 80},
    "keep everything": {"marker": "v", "color": "#AA4499", "lw": 1.4, "ls": (0, (5, 2, 1, 2)), "size": 80},
}

_COLUMN_WORDS = {
    "utility": "utility", "recall": "recall: needed facts in the context (share)",
    "precision": "precision: context facts that are needed (share)", "stale": "stale facts in the context (share)",
    "expired": "expired facts in the context (share)", "false": "false facts in the context (share)",
    "unneeded": "unneeded facts in the context (share)", "charged": "charge of the context (cost-weighted)",
    "context": "facts in the context", "needed": "needed facts", "log_loss": "log loss (nats)",
}
_PART_WORDS = {"all": "", "train": ", tuning period", "test": ", held out"}


def column_label(column: str) -> str:
    """Words for a result column: ``all.utility@20`` -> ``utility of a 20-fact context``;
    anything else is returned as it is."""
    part, _, rest = column.partition(".")
    if not rest or part not in _PART_WORDS:
        part, rest = "all", column
    metric, at, k = rest.partition("@")
    if not at or metric not in _COLUMN_WORDS or not k.isdigit():
        return column
    return f"{_COLUMN_WORDS[metric]}, context of {k} facts{_PART_WORDS[part]}"


GRID_STYLE: dict[str, Any] = {"color": "#e6e6e6", "lw": 0.8}


def light_grid(ax: Axes, axis: Literal["both", "x", "y"] = "both") -> None:
    """Draw the figures' light grid on ``ax`` (one axis or both), behind the data."""
    ax.grid(True, axis=axis, **GRID_STYLE)
    ax.set_axisbelow(True)


def confidence_axis(ax: Axes, top: float = 1.0) -> None:
    ax.set_ylim(0.0, max(1.0, top) + 0.03)
    ax.set_ylabel(CONFIDENCE_LABEL)
    light_grid(ax, "y")


# -- time ------------------------------------------------------------------------------------------

class TimeAxis:
    """Maps integer Unix seconds to x positions: UTC dates, or days since an origin.

    ``mode="auto"`` shows dates when every time is after 2000-01-01 (real logs) and days since the
    first time otherwise (synthetic clocks starting at 0). Both are in days, so widths in days
    (bars, offsets) need no conversion.
    """

    def __init__(self, all_seconds: np.ndarray, mode: str = "auto", origin: Any = None):
        if mode not in ("auto", "date", "days"):
            raise InputError(f"time must be 'auto', 'date' or 'days', got {mode!r}")
        finite = np.asarray(all_seconds, dtype=np.float64)
        finite = finite[np.isfinite(finite)]
        tmin = float(finite.min()) if finite.size else 0.0
        self.dates = mode == "date" or (mode == "auto" and tmin >= _Y2000)
        self.origin = tmin if origin is None else float(seconds(pd.Series([origin]), "origin")[0])
        self._epoch = float(mdates.date2num(np.datetime64("1970-01-01T00:00:00")))

    def x(self, secs: Any) -> np.ndarray:
        s = np.asarray(secs, dtype=np.float64)
        if self.dates:
            return s / 86400.0 + self._epoch
        return (s - self.origin) / 86400.0

    @property
    def label(self) -> str:
        if self.dates:
            return "date (UTC)"
        if self.origin >= _Y2000:
            when = _dt.datetime.fromtimestamp(self.origin, _UTC).strftime("%Y-%m-%d %H:%M")
            return f"days since {when} UTC"
        return f"days since t = {self.origin:.0f} s"

    def tick_text(self, secs: Any) -> list[str]:
        """Short labels for categorical ticks (one per time)."""
        s = np.asarray(secs, dtype=np.float64)
        if self.dates:
            return [_dt.datetime.fromtimestamp(v, _UTC).strftime("%Y-%m-%d") for v in s]
        return [f"day {v:.3g}" for v in (s - self.origin) / 86400.0]

    def decorate(self, ax: Axes, label: bool = True) -> None:
        if self.dates:
            loc = mdates.AutoDateLocator(tz=_UTC, minticks=3, maxticks=8)
            ax.xaxis.set_major_locator(loc)
            ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(loc, tz=_UTC))
        if label:
            ax.set_xlabel(self.label)


# -- saving ----------------------------------------------------------------------------------------

def save(fig: Figure, path: str | Path, dpi: int = 120) -> Path:
    """Write ``fig`` to ``path`` (PNG unless the suffix names another matplotlib format; ``.png`` is
    appended when there is no suffix), creating parent folders; close it; return the path. Inside
    :func:`saving_aside` the file is written by a forked child, complete when the block ends."""
    if not isinstance(fig, Figure):
        raise InputError(f"fig must be a matplotlib Figure, got {type(fig).__name__}")
    p = Path(path)
    if not p.suffix:
        p = p.with_suffix(".png")
    p.parent.mkdir(parents=True, exist_ok=True)
    if _ASIDE is not None:
        pid = forked.start(lambda: _write(fig, p, dpi))
        if pid is not None:
            _ASIDE.append((pid, fig, p, dpi))
            return p
    _write(fig, p, dpi)
    _close(fig)
    return p


def _write(fig: Figure, p: Path, dpi: int) -> None:
    # no timestamp or software metadata: the same figure gives the same bytes
    meta = {"Software": None} if p.suffix.lower() == ".png" else None
    fig.savefig(p, dpi=dpi, metadata=meta)


def _close(fig: Figure) -> None:
    import matplotlib.pyplot as plt  # only to drop a pyplot-managed figure; no-op for plain Figures

    plt.close(fig)


#: figures being written by forked children inside :func:`saving_aside`: (pid, figure, path, dpi)
_ASIDE: list[tuple[int, Figure, Path, int]] | None = None


@contextmanager
def saving_aside() -> Iterator[None]:
    """Within the block, :func:`save` writes each figure from a forked child process and returns at
    once, so that rendering (most of a figure's cost: ~0.6 s each, matplotlib's layout and drawing)
    runs on another core while the caller goes on (``factmem tune`` writes six while it replays the
    recommendation and writes its results). Leaving the block waits for the children; a figure whose
    child failed is written here, so the files are those :func:`save` writes, byte for byte (the
    child renders the same figure). Where processes cannot fork (:mod:`factmem.core.forked`: not
    Linux), saving is as outside."""
    global _ASIDE
    if _ASIDE is not None or not forked.can_fork():
        yield
        return
    _ASIDE = []
    try:
        yield
    finally:
        pending, _ASIDE = _ASIDE, None
        try:
            for pid, fig, p, dpi in pending:
                if not forked.succeeded(pid):
                    _write(fig, p, dpi)  # here, where its error (if any) is raised
        finally:
            for _, fig, _, _ in pending:
                _close(fig)

"""The compiler of the scoring kernels: Numba's ``njit``, with its on-disk cache made to work anywhere.

The loops of the scorers (the per-point top-k of the context metrics, the checkpoint metrics'
per-sample sums) are compiled by Numba to machine code. Compiling costs about a second per kernel,
so every kernel is compiled with ``cache=True``: the machine code is written to disk the first time a
kernel runs and loaded (milliseconds) by every later process — test workers, sweep workers, the CLI.

Numba writes that cache beside the source (``__pycache__``) when it can, else in the user's cache
folder. An installation may allow neither (a read-only site-packages and no writable home, as in some
containers): then :func:`ensure_cache_dir` points ``NUMBA_CACHE_DIR`` at a private folder under the
system's temporary directory, so a kernel compiles once per machine instead of once per process. A
``NUMBA_CACHE_DIR`` set by the user is always kept.

The kernels share two binary searches over a sorted slice ``values[lo:hi]``, compiled into their
callers: :func:`search_left` (the first index whose value is ``>= x``) and :func:`search_right` (the
first whose value is ``> x``); ``hi`` when there is none — ``np.searchsorted`` within the slice, plus ``lo``.
On an evenly spaced grid of times (a consolidation or a checkpoint every day) :func:`grid_position` is
that search by arithmetic, and :func:`even_grid_index` applies it to an array
(:func:`factmem.core.timeutil.grid_index` decides when the grid is even).

>>> import os
>>> os.path.isdir(ensure_cache_dir() or ".")
True
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

__all__ = ["ensure_cache_dir", "caches_to_disk", "njit", "search_left", "search_right", "grid_position",
           "even_grid_index"]

_HERE = Path(__file__).resolve().parent.parent  # the factmem package: where Numba caches first


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".factmem-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
        return True
    except OSError:
        return False


def _user_cache() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "numba"


def ensure_cache_dir() -> str | None:
    """Make sure Numba has a writable cache folder; returns the folder set, or None when Numba's own
    choice (beside the sources, or the user's cache folder) is writable or the user chose one."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return None
    if _writable(_HERE / "__pycache__"):
        return None
    if _writable(_user_cache()):
        return None
    fallback = Path(tempfile.gettempdir()) / f"factmem-numba-{os.getuid() if hasattr(os, 'getuid') else 'user'}"
    if not _writable(fallback):
        return None  # nowhere to write: Numba compiles in memory, once per process
    os.environ["NUMBA_CACHE_DIR"] = str(fallback)
    return str(fallback)


def caches_to_disk() -> bool:
    """Whether compiled kernels are written to a cache on disk — so that a kernel another process
    compiles serves this one too."""
    chosen = os.environ.get("NUMBA_CACHE_DIR")
    if chosen:
        return _writable(Path(chosen))
    return _writable(_HERE / "__pycache__") or _writable(_user_cache())


ensure_cache_dir()  # before Numba reads its configuration

import numba  # noqa: E402
from numba.core import config as _numba_config  # noqa: E402

if os.environ.get("NUMBA_CACHE_DIR") and not getattr(_numba_config, "CACHE_DIR", ""):  # numba was imported first
    setattr(_numba_config, "CACHE_DIR", os.environ["NUMBA_CACHE_DIR"])  # noqa: B010 - untyped module


def njit(func=None, *, inline: bool = False):
    """``numba.njit(cache=True, nogil=True)``: compiled on first call, cached on disk. ``inline``: a
    small helper compiled into its callers (Numba's ``inline="always"``), not called."""
    def wrap(f):
        return numba.njit(cache=True, nogil=True, inline="always" if inline else "never")(f)

    return wrap if func is None else wrap(func)


@njit(inline=True)
def search_left(values, lo, hi, x):  # pragma: no cover - compiled
    """The first index in ``[lo, hi)`` of the sorted ``values`` whose value is at least ``x`` (else ``hi``)."""
    while lo < hi:
        mid = (lo + hi) // 2
        if values[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(inline=True)
def search_right(values, lo, hi, x):  # pragma: no cover - compiled
    """The first index in ``[lo, hi)`` of the sorted ``values`` whose value exceeds ``x`` (else ``hi``)."""
    while lo < hi:
        mid = (lo + hi) // 2
        if values[mid] <= x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(inline=True)
def grid_position(value, first, step, n, left):  # pragma: no cover - compiled
    """``np.searchsorted(grid, value, "left" if left else "right")`` for the ``n`` times
    ``first + i · step`` (``step > 0``), by arithmetic: clipped first to ``[first − step, first + n · step]``
    (outside it the answer is 0 or ``n`` anyway, and the subtraction cannot overflow); "right" counts
    the times ``<= value``, "left" those ``< value``, i.e. ``<= value − 1``."""
    v = min(max(value, first - step), first + n * step)
    index = (v - first - (1 if left else 0)) // step + 1
    return min(max(index, 0), n)


@njit
def even_grid_index(values, first, step, n, left):  # pragma: no cover - compiled
    """:func:`grid_position` of each of ``values`` (int64), in one pass (numpy took seven)."""
    out = np.empty(len(values), np.int64)
    for i in range(len(values)):
        out[i] = grid_position(values[i], first, step, n, left)
    return out

"""Search spaces: which parameters a sweep varies, over which values — parsed once, for the library
and the command line alike.

A space maps flat parameter names (``decay_rate.episodic``, ``reinforce_gain``; see
:meth:`MemoryParams.field_names`) to a list of values (grid search, or choices for random search) or
a :class:`Range` (random search: uniform, or log-uniform). Every name and value is validated against
:class:`MemoryParams` before any work starts.

Written forms (:func:`parse_space`):

* a TOML file: ``reinforce_gain = [0.2, 0.5]`` and nested tables for dotted names
  (``[decay_rate] episodic = [0.1, 0.3]``); a table with ``low``/``high`` (and ``log = true``) is a Range;
* ``NAME=V1,V2,...`` (values read as int, float or string) or ``NAME=LOW:HIGH[:log]`` (a Range).

>>> parse_space(params=["reinforce_gain=0.2,0.5", "decay_rate.episodic=0.1:1:log"])
{'reinforce_gain': [0.2, 0.5], 'decay_rate.episodic': Range(low=0.1, high=1.0, log=True)}
"""

from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from factmem.core.params import MemoryParams
from factmem.errors import InputError

__all__ = ["Range", "Space", "ALIASES", "assign", "check_space", "grid_points", "random_points", "refine_points",
           "coordinate", "parse_space", "parse_param", "load_space"]

#: flat parameter name -> list of values or a Range
Space = Mapping[str, Any]

#: Names that set several parameters at once. ``threshold`` ties the archive threshold (below which a
#: fact leaves the active set) to the retrieval threshold (above which it counts as believed and may
#: enter a context): a context draws on the stricter of the two, so moving one alone below the other
#: changes nothing.
ALIASES: dict[str, tuple[str, ...]] = {"threshold": ("archive_threshold", "retrieval_threshold")}


def assign(base: MemoryParams, values: Mapping[str, Any]) -> MemoryParams:
    """``base`` with the given flat names (or :data:`ALIASES`) set."""
    flat: dict[str, Any] = {}
    for name, v in values.items():
        for target in ALIASES.get(name, (name,)):
            flat[target] = v
    return base.replace(**flat)


@dataclass(frozen=True)
class Range:
    """A continuous range for random search: uniform, or log-uniform with ``log=True``."""

    low: float
    high: float
    log: bool = False

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.log:
            return np.exp(rng.uniform(math.log(self.low), math.log(self.high), n))
        return rng.uniform(self.low, self.high, n)


def check_space(space: Mapping[str, Any], base: MemoryParams) -> None:
    """Every name a parameter, every value valid — before any work starts."""
    if not isinstance(space, Mapping) or not space:
        raise InputError("a sweep space maps parameter names to lists of values (or Range)")
    names = MemoryParams.field_names() + list(ALIASES)
    for name, values in space.items():
        # a fixed name, an alias, or decay_rate_by_predicate.<predicate>
        if name not in ALIASES and not MemoryParams.is_flat_name(name):
            raise InputError(f"unknown parameter {name!r} in the sweep space; known: {', '.join(names)}")
        if isinstance(values, Range):
            if not values.low < values.high:
                raise InputError(f"{name}: Range low ({values.low}) must be below high ({values.high})")
            probe: list[Any] = [values.low, values.high]
        else:
            probe = list(values) if not isinstance(values, (str, bytes)) else [values]
            if not probe:
                raise InputError(f"{name}: no values to sweep")
        for v in probe:
            try:
                assign(base, {name: v})
            except ValueError as exc:
                raise InputError(f"sweep space: {exc}") from None


def grid_points(space: Mapping[str, Sequence], base: MemoryParams) -> list[MemoryParams]:
    """Every combination of the listed values, in a fixed order."""
    check_space(space, base)
    names = list(space)
    mesh = np.meshgrid(*[np.arange(len(space[n])) for n in names], indexing="ij")
    idx = np.stack([m.ravel() for m in mesh], axis=1)
    return [assign(base, {n: space[n][i] for n, i in zip(names, row)}) for row in idx]


def random_points(space: Mapping[str, Any], base: MemoryParams, n: int, seed: int) -> list[MemoryParams]:
    """``n`` draws: a Range is sampled, a list is chosen from; seeded."""
    check_space(space, base)
    rng = np.random.default_rng(seed)
    cols: dict[str, list[Any]] = {}
    for name, values in space.items():
        if isinstance(values, Range):
            cols[name] = list(values.draw(rng, n))
        else:
            vals = list(values)
            cols[name] = [vals[i] for i in rng.integers(0, len(vals), n)]
    return [assign(base, {k: (float(v[i]) if isinstance(v[i], (float, np.floating)) else v[i]) for k, v in cols.items()})
            for i in range(n)]


def coordinate(space: Mapping[str, Any], params: MemoryParams) -> dict[str, float]:
    """Where ``params`` sits in each Range of ``space``, as a share of its width in [0, 1] (in log
    coordinates for a log Range): 0 and 1 are the edges of the searched range."""
    out: dict[str, float] = {}
    for name, values in space.items():
        if not isinstance(values, Range):
            continue
        v = params.get(ALIASES.get(name, (name,))[0])
        if values.log:
            pos = (math.log(max(v, values.low)) - math.log(values.low)) / (math.log(values.high) - math.log(values.low))
        else:
            pos = (v - values.low) / (values.high - values.low)
        out[name] = float(pos)
    return out


def refine_points(space: Mapping[str, Any], centres: Sequence[MemoryParams], n: int, seed: int,
                  scale: float = 0.1) -> list[MemoryParams]:
    """``n`` draws around ``centres`` (in turn): each Range coordinate moves by a normal step of
    ``scale`` × its width (log width for a log Range), kept inside the range; a list keeps the
    centre's value or, with probability 0.2, takes another. Seeded."""
    if not centres or n <= 0:
        return []
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):  # n parameter sets, each built from a handful of named values
        centre = centres[i % len(centres)]
        values: dict[str, Any] = {}
        for name, spec in space.items():
            cur = centre.get(ALIASES.get(name, (name,))[0])
            if isinstance(spec, Range):
                if spec.log:
                    lo, hi = math.log(spec.low), math.log(spec.high)
                    x = math.log(max(cur, spec.low)) + rng.normal(0.0, scale * (hi - lo))
                    values[name] = float(math.exp(min(max(x, lo), hi)))
                else:
                    x = cur + rng.normal(0.0, scale * (spec.high - spec.low))
                    values[name] = float(min(max(x, spec.low), spec.high))
            else:
                choices = list(spec)
                values[name] = choices[int(rng.integers(len(choices)))] if rng.random() < 0.2 else cur
        out.append(assign(centre, values))
    return out


def parse_param(spec: str) -> tuple[str, Any]:
    """``NAME=V1,V2,...`` -> (name, [values]); ``NAME=LOW:HIGH[:log]`` -> (name, Range)."""
    if "=" not in spec:
        raise InputError(f"--param {spec!r}: expected name=v1,v2,... or name=low:high[:log]")
    name, values = spec.split("=", 1)
    if ":" in values:
        parts = values.split(":")
        try:
            return name, Range(float(parts[0]), float(parts[1]), len(parts) > 2 and parts[2] == "log")
        except (ValueError, IndexError):
            raise InputError(f"--param {spec!r}: a range is low:high[:log] with numbers") from None
    return name, [_value(x) for x in values.split(",")]


def load_space(path: str | os.PathLike) -> dict[str, Any]:
    """A space from a TOML file (see the module docstring); errors name the file."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8-sig"))  # a byte-order mark is skipped
    except FileNotFoundError:
        raise InputError(f"{path}: no such space file") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: invalid TOML: {exc}") from None
    space: dict[str, Any] = {}
    for name, v in _flatten(data).items():
        if isinstance(v, dict):
            try:
                space[name] = Range(float(v["low"]), float(v["high"]), bool(v.get("log", False)))
            except KeyError as exc:
                raise InputError(f"{path}: {name} needs 'low' and 'high', missing {exc}") from None
            except (TypeError, ValueError):
                raise InputError(f"{path}: {name}: low and high must be numbers, got {v!r}") from None
        else:
            space[name] = v if isinstance(v, list) else [v]
    return space


def parse_space(space_file: str | os.PathLike | None = None, params: Iterable[str] = ()) -> dict[str, Any]:
    """A space from a TOML file and/or ``NAME=...`` specs (specs override the file's entries)."""
    space = load_space(space_file) if space_file else {}
    for spec in params:
        name, values = parse_param(spec)
        space[name] = values
    return space


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict) and not ({"low", "high"} & set(v)):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _value(text: str) -> Any:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text

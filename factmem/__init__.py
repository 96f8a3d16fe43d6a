"""factmem: fact-based agent memory on DuckDB — decay, reinforcement, versioning, abstraction;
replay, tuning, fitting and export of its parameters.

What a user reaches for first is here: :class:`FactStore`, :class:`MemoryParams`, :class:`Evidence`,
:func:`load_log`, :func:`generate`, :func:`simulate` (with :class:`Schedule`), :func:`sweep`,
:func:`tune`, :func:`fit`, :func:`whatif`. The rest lives in the layer folders (``core``, ``engine``,
``store``, ``data``, ``abstraction``, ``evaluation``, ``fitting``, ``tuning``, ``production``, ``export``,
``plots``, ``cli``, ``testing``); see docs/design.md. Heavy parts (DuckDB, pandas, matplotlib) load on first use, so
``import factmem`` and ``factmem --help`` stay quick.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

from factmem.core.codes import KINDS
from factmem.core.params import MemoryParams
from factmem.errors import FactmemError, InputError, ParamsError, StoreError

if TYPE_CHECKING:  # what the lazy names below resolve to, for type checkers and readers
    from factmem.data.generate import generate
    from factmem.data.logs import load as load_log
    from factmem.evaluation.simulate import Schedule, simulate
    from factmem.fitting.fit import fit
    from factmem.production.whatif import whatif
    from factmem.store.factstore import Evidence, FactStore
    from factmem.store.reads import Fact
    from factmem.tuning.sweep import sweep
    from factmem.tuning.tune import tune

_LAZY: dict[str, tuple[str, str]] = {
    "FactStore": ("factmem.store.factstore", "FactStore"),
    "Evidence": ("factmem.store.factstore", "Evidence"),
    "Fact": ("factmem.store.reads", "Fact"),
    "load_log": ("factmem.data.logs", "load"),
    "generate": ("factmem.data.generate", "generate"),
    "simulate": ("factmem.evaluation.simulate", "simulate"),
    "Schedule": ("factmem.evaluation.simulate", "Schedule"),
    "sweep": ("factmem.tuning.sweep", "sweep"),
    "tune": ("factmem.tuning.tune", "tune"),
    "fit": ("factmem.fitting.fit", "fit"),
    "whatif": ("factmem.production.whatif", "whatif"),
}

__all__ = [
    "__version__", "FactmemError", "InputError", "ParamsError", "StoreError", "KINDS", "MemoryParams",
    "FactStore", "Evidence", "Fact", "load_log", "generate", "simulate", "Schedule", "sweep", "tune", "fit",
    "whatif",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(import_module(module), attr)
        globals()[name] = value  # once loaded, a plain attribute
        return value
    raise AttributeError(f"module 'factmem' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))

"""factmem: fact-based agent memory on DuckDB — decay, reinforcement, versioning, abstraction,
replay, tuning and export of its parameters."""

from __future__ import annotations

__version__ = "0.1.0"

from factmem.core.codes import KINDS
from factmem.core.params import MemoryParams
from factmem.errors import FactmemError, InputError, StoreError

__all__ = ["__version__", "FactmemError", "InputError", "StoreError", "KINDS", "MemoryParams"]


def __getattr__(name: str):
    # FactStore pulls in duckdb; keep `import factmem` light for ground-floor users.
    if name in ("FactStore", "Evidence", "Fact"):
        from factmem.store import factstore as store

        return getattr(store, name)
    if name == "fit":  # factmem.fit(...) is the function; it pulls in scipy, so it loads on first use
        from factmem.fitting.fit import fit

        return fit
    raise AttributeError(f"module 'factmem' has no attribute {name!r}")

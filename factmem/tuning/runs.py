"""Experiment records: a manifest beside the results, so any past run can be reloaded and plotted.

A run folder holds ``manifest.json`` (what ran: parameters, dataset sha256 and scenario, seeds,
factmem version, git commit if any, package versions), one Parquet file per results table, and
``results.duckdb`` with the same tables for SQL.

>>> import tempfile, pandas as pd
>>> d = write_run(tempfile.mkdtemp(), {"kind": "demo"}, {"t": pd.DataFrame({"x": [1, 2]})})
>>> load_run(d).table("t")["x"].tolist()
[1, 2]
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import pandas as pd

from factmem import __version__
from factmem.errors import FactmemError

__all__ = ["PACKAGES", "git_commit", "package_versions", "manifest", "default_run_dir", "write_run", "Run",
    "load_run"]

PACKAGES = ("numpy", "pandas", "duckdb", "pyarrow", "matplotlib", "httpx")


def git_commit() -> str | None:
    """The commit of the factmem source tree, when it is a git checkout."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    sha = out.stdout.strip()
    return sha if out.returncode == 0 and len(sha) == 40 else None


def package_versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "factmem": __version__}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "absent"
    return out


def manifest(kind: str, **info: Any) -> dict:
    """A manifest: ``kind`` (tune, sweep, simulate), the caller's facts, and the environment."""
    return {
        "kind": kind,
        "created_at": _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z"),
        "factmem_version": __version__,
        "git_commit": git_commit(),
        "packages": package_versions(),
        **info,
    }


def default_run_dir(root: str | os.PathLike = "runs") -> Path:
    """``runs/<UTC timestamp>/``, made unique."""
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    path = Path(root) / stamp
    i = 1
    while path.exists():
        path = Path(root) / f"{stamp}-{i}"
        i += 1
    return path


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value) if isinstance(value, (set, frozenset)) else value
        return [_jsonable(v) for v in items]
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return value.item()
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return "inf" if value > 0 else "-inf"  # JSON has no infinity (scenarios use it: "never changes")
    if isinstance(value, Path):
        return str(value)
    return value


def write_run(out: str | os.PathLike, manifest: Mapping[str, Any], tables: Mapping[str, pd.DataFrame]) -> Path:
    """Write a run folder: manifest.json, ``<table>.parquet`` each, and results.duckdb."""
    import duckdb

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    names = sorted(k for k, v in tables.items() if len(v.columns))  # a frame without columns holds nothing
    man = dict(manifest)
    man["tables"] = names
    (out / "manifest.json").write_text(json.dumps(_jsonable(man), indent=2, allow_nan=False) + "\n", encoding="utf-8")
    for name in names:
        tables[name].to_parquet(out / f"{name}.parquet", index=False)
    db = out / "results.duckdb"
    if db.exists():
        db.unlink()
    con = duckdb.connect(str(db))
    try:
        for name in names:
            frame = tables[name]  # noqa: F841 - read by DuckDB's replacement scan
            con.execute(f'CREATE TABLE "{name}" AS SELECT * FROM frame')
    finally:
        con.close()
    return out


@dataclass
class Run:
    """A run folder, read back: its manifest and its tables (loaded on demand)."""

    path: Path
    manifest: dict
    _tables: dict = field(default_factory=dict, repr=False)

    def table(self, name: str) -> pd.DataFrame:
        if name not in self.manifest.get("tables", []):
            raise FactmemError(f"{self.path}: no table {name!r}; tables: {', '.join(self.manifest.get('tables', []))}")
        if name not in self._tables:
            self._tables[name] = pd.read_parquet(self.path / f"{name}.parquet")
        return self._tables[name]

    @property
    def tables(self) -> list[str]:
        return list(self.manifest.get("tables", []))


def load_run(path: str | os.PathLike) -> Run:
    """Read a run folder written by :func:`write_run` (``factmem tune``, ``sweep``, ``simulate``)."""
    path = Path(path)
    try:
        man = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FactmemError(f"{path}: not a run folder (no manifest.json)") from None
    return Run(path, man)

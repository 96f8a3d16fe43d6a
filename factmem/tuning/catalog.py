"""The runs a user has made, side by side: ``factmem runs list [DIR]`` and ``factmem runs compare RUN...``.

:func:`list_runs` finds the run folders under a directory (``runs/`` by default; a folder with
``manifest.json``, or one still marked ``INCOMPLETE``), newest first, one row each: kind, time, log,
candidates and sampler, and — for a tune — its decision. :func:`compare_runs` puts tune runs side by
side: the decision, the search budget, the objective, the held-out utility of the recommendation with
its interval against the baseline, the parameters it changes from the baseline, and the log's
fingerprint (the first 12 hex digits of its sha256: two runs on the same log share it).

Both read only the manifests (nothing is replayed) and return DataFrames; the CLI prints them as a
table or, with ``--json``, as the records of its ``result["runs"]``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from factmem.core.params import MemoryParams
from factmem.errors import InputError
from factmem.tuning.runs import INCOMPLETE, load_run

__all__ = ["list_runs", "compare_runs", "changed_parameters", "LIST_COLUMNS", "COMPARE_COLUMNS"]

LIST_COLUMNS = ("run", "kind", "created_at", "log", "fingerprint", "candidates", "sampler", "decision")
#: ``utility``: held-out objective of the recommendation (as judged); ``difference`` against the
#: ``baseline``'s, with its 95% bootstrap interval ``low`` … ``high``
COMPARE_COLUMNS = ("run", "decision", "candidates", "sampler", "per_study", "objective", "utility", "baseline",
                   "difference", "low", "high", "changed", "fingerprint")


def _log_name(man: dict) -> str:
    ds = man.get("dataset") or {}
    scenario = ds.get("scenario") or {}
    name = scenario.get("name") if isinstance(scenario, dict) else None
    return str(name or (Path(ds["path"]).name if ds.get("path") else "—"))


def _primary(man: dict) -> tuple[str, dict]:
    recs = man.get("recommendations") or {}
    budgets = (man.get("objective") or {}).get("budgets") or [int(k) for k in recs]
    k = str(budgets[0]) if budgets else next(iter(recs), "")
    return k, recs.get(k, {})


def _decision(man: dict) -> str:
    if man.get("kind") != "tune":
        return "—"
    k, rec = _primary(man)
    return f"{rec.get('keep', '?')} (k = {k})" if rec else "—"


def list_runs(root: str | os.PathLike = "runs") -> pd.DataFrame:
    """Every run folder directly under ``root`` (or ``root`` itself if it is one), newest first."""
    root = Path(root)
    if not root.is_dir():
        raise InputError(f"{root}: no such folder of runs")
    folders = [root] if (root / "manifest.json").is_file() else sorted(p for p in root.iterdir() if p.is_dir())
    rows = []
    for path in folders:
        if (path / INCOMPLETE).exists():
            rows.append({"run": str(path), "kind": "incomplete", "created_at": "", "log": "—", "fingerprint": "",
                         "candidates": None, "sampler": "", "decision": "—"})
            continue
        if not (path / "manifest.json").is_file():
            continue
        man = load_run(path).manifest
        search = man.get("search") or {}
        rows.append({"run": str(path), "kind": man.get("kind", "?"), "created_at": man.get("created_at", ""),
                     "log": _log_name(man), "fingerprint": str((man.get("dataset") or {}).get("sha256") or "")[:12],
                     "candidates": man.get("n_params"), "sampler": search.get("method", ""),
                     "decision": _decision(man)})
    table = pd.DataFrame(rows, columns=list(LIST_COLUMNS))
    return table.sort_values(["created_at", "run"], ascending=[False, True], kind="stable").reset_index(drop=True)


def changed_parameters(params: MemoryParams, baseline: MemoryParams) -> dict[str, tuple[Any, Any]]:
    """The flat parameters where ``params`` differs from ``baseline``: name -> (baseline's, its)."""
    a, b = baseline.to_flat(), params.to_flat()
    return {k: (a.get(k), v) for k, v in b.items() if a.get(k) != v}


def _value(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def compare_runs(runs: Iterable[str | os.PathLike]) -> pd.DataFrame:
    """Tune runs side by side (see the module docstring); a folder that is not a tune run is an error
    naming it."""
    rows = []
    for path in runs:
        run = load_run(path)
        man = run.manifest
        if man.get("kind") != "tune":
            raise InputError(f"{path}: a {man.get('kind', 'unknown')} run, not a tune run: nothing to compare")
        k, rec = _primary(man)
        obj = man.get("objective") or {}
        vb = rec.get("versus_baseline") or {}
        search = man.get("search") or {}
        baseline = MemoryParams.from_dict(man["baseline"])
        recommended = MemoryParams.from_dict(rec["params"]) if rec.get("params") else baseline
        changed = changed_parameters(recommended, baseline)
        rows.append({
            "run": str(path), "decision": _decision(man), "candidates": man.get("n_params"),
            "sampler": search.get("method", ""), "per_study": search.get("n"),
            "objective": f"{obj.get('name', '?')}@{k}" if obj.get("name") in (None, "utility", "recall_at_k",
                                                                               "precision_at_k", "stale_at_k")
            else obj.get("name"),
            "utility": vb.get("a"), "baseline": vb.get("b"), "difference": vb.get("difference"),
            "low": vb.get("low"), "high": vb.get("high"),
            "changed": ", ".join(f"{n} {_value(a)} -> {_value(b)}" for n, (a, b) in changed.items()) or "none",
            "fingerprint": str((man.get("dataset") or {}).get("sha256") or "")[:12],
        })
    if not rows:
        raise InputError("runs compare: name at least one run folder")
    return pd.DataFrame(rows, columns=list(COMPARE_COLUMNS))


"""Studies in the run folder: every Optuna study of a search in ``study.db`` (Optuna's SQLite storage,
factmem's metrics as user attributes; ``optuna-dashboard runs/X/study.db`` opens it) and the search's
own state in ``search.npz`` (rounds, proposals, notes, the groups of people) — what ``tune --resume``
reads back to continue a run as one search with the total budget — and each searched parameter's
importance in them (:func:`parameter_importances`).
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from factmem.core.params import MemoryParams
from factmem.errors import InputError
from factmem.tuning.search import IDENTIFIED_SHARE, STATE_FILE, STUDY_FILE, SearchOutcome, _optuna, choice_rows
from factmem.tuning.settings import Holdout, Objective

if TYPE_CHECKING:
    from factmem.tuning.sweep import SweepResult

__all__ = ["save_studies", "load_studies", "save_search", "load_search", "parameter_importances"]


def save_studies(studies: Mapping[str, Any], path: str | os.PathLike) -> Path:
    """Write every study to Optuna's SQLite storage at ``path`` (replaced if it exists).

    The storage and each study are made through Optuna (its schema and version); the trials are then
    written in one transaction — Optuna's per-trial ORM writes cost ~0.1 s a trial, longer than the
    search itself. :func:`load_studies` and ``optuna.load_study`` read the file back."""
    import json
    import sqlite3

    optuna = _optuna()
    from optuna.distributions import distribution_to_json

    path = Path(path)
    path.unlink(missing_ok=True)
    url = f"sqlite:///{path}"
    storage = optuna.storages.RDBStorage(url)
    ids: dict[str, int] = {}
    try:
        for name, study in studies.items():
            made = optuna.create_study(study_name=name, storage=storage, directions=study.directions)
            for k, v in study.user_attrs.items():
                made.set_user_attr(k, v)
            ids[name] = made._study_id
    finally:
        storage.engine.dispose()

    def when(t: Any) -> str | None:
        return None if t is None else t.strftime("%Y-%m-%d %H:%M:%S.%f")

    def value_type(v: float) -> tuple[float | None, str]:
        return (None, "INF_POS") if v == math.inf else (None, "INF_NEG") if v == -math.inf else (v, "FINITE")

    con = sqlite3.connect(path)
    try:
        with con:
            trial_id = int(con.execute("SELECT COALESCE(MAX(trial_id), 0) FROM trials").fetchone()[0])
            trials, params, values, user, system = [], [], [], [], []
            for name, study in studies.items():
                for t in study.get_trials(deepcopy=False):
                    trial_id += 1
                    trials.append((trial_id, t.number, ids[name], t.state.name, when(t.datetime_start),
                                   when(t.datetime_complete)))
                    for p, v in t.params.items():
                        d = t.distributions[p]
                        params.append((trial_id, p, d.to_internal_repr(v), distribution_to_json(d)))
                    for o, v in enumerate(t.values or []):
                        values.append((trial_id, o, *value_type(v)))
                    user += [(trial_id, k, json.dumps(v)) for k, v in t.user_attrs.items()]
                    system += [(trial_id, k, json.dumps(v)) for k, v in t.system_attrs.items()]
            con.executemany("INSERT INTO trials (trial_id, number, study_id, state, datetime_start, datetime_complete)"
                            " VALUES (?, ?, ?, ?, ?, ?)", trials)
            con.executemany("INSERT INTO trial_params (trial_id, param_name, param_value, distribution_json) "
                            "VALUES (?, ?, ?, ?)", params)
            con.executemany("INSERT INTO trial_values (trial_id, objective, value, value_type) VALUES (?, ?, ?, ?)",
                            values)
            con.executemany('INSERT INTO trial_user_attributes (trial_id, "key", value_json) VALUES (?, ?, ?)', user)
            con.executemany('INSERT INTO trial_system_attributes (trial_id, "key", value_json) VALUES (?, ?, ?)',
                            system)
    finally:
        con.close()
    return path


def load_studies(path: str | os.PathLike) -> dict[str, Any]:
    """Every study of a ``study.db``, copied into memory (to continue without touching the file)."""
    optuna = _optuna()
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such study file (a tune run writes {STUDY_FILE})")
    storage = optuna.storages.RDBStorage(f"sqlite:///{path}")
    try:
        out = {}
        for summary in optuna.get_all_study_summaries(storage):
            stored = optuna.load_study(study_name=summary.study_name, storage=storage)
            mem = optuna.create_study(study_name=summary.study_name, directions=stored.directions,
                                      storage=optuna.storages.InMemoryStorage())
            for k, v in stored.user_attrs.items():
                mem.set_user_attr(k, v)
            mem.add_trials(stored.get_trials(deepcopy=False))
            out[summary.study_name] = mem
    finally:
        storage.engine.dispose()
    return out


def save_search(outcome: SearchOutcome, folder: str | os.PathLike, final: SweepResult | None = None,
                groups: Mapping[str, np.ndarray] | None = None) -> None:
    """Write ``study.db`` and :data:`STATE_FILE` into a run folder, so that the run can be resumed:
    the per-subject context sums of every candidate of ``final`` (default: the outcome's sweep; tune
    passes its sweep with the identification probes appended, the rows of ``sweep.parquet``), the
    reference policies' sums, the parameter sets, the groups of people per part, rounds and notes."""
    import json

    folder = Path(folder)
    save_studies(outcome.studies, folder / STUDY_FILE)
    res = final if final is not None else outcome.sweep
    arrays: dict[str, Any] = {f"context.{k}": v for k, v in res.context.items()}
    arrays |= {f"subjects.{k}": np.asarray(v, dtype=str) for k, v in res.subjects.items()}
    arrays |= {f"reference.{name}.{part}": v for name, by in res.references.items() for part, v in by.items()}
    arrays |= {f"groups.{k}": np.asarray(v, dtype=np.int64) for k, v in (groups or {}).items()}
    state = {"params": [p.to_dict() for p in res.params], "rounds": outcome.rounds, "proposed": outcome.proposed,
             "searched": len(outcome.sweep.params), "notes": outcome.notes, "points": res.points,
             "sampled_from": res.sampled_from, "split_at": res.split_at, "holdout_sha256": res.holdout_sha256,
             "calibration": res.calibration,
             "reference_params": {k: v.to_dict() for k, v in res.reference_params.items()}}
    arrays["state"] = np.frombuffer(json.dumps(state, default=list).encode(), dtype=np.uint8)
    with open(folder / STATE_FILE, "wb") as fh:
        np.savez_compressed(fh, **arrays)


def load_search(folder: str | os.PathLike, table: pd.DataFrame, reference_table: pd.DataFrame | None = None, *,
                schedule: Any, objective: Objective, holdout: Holdout, dataset_sha256: str
                ) -> tuple[SearchOutcome, dict[str, np.ndarray]]:
    """The :class:`SearchOutcome` a run folder holds (:func:`save_search`), with its sweep ``table``
    (``sweep.parquet``) cut back to the search's own rows (the probes tune appended after it are made
    again), and the groups of people per part."""
    import json

    from factmem.tuning.sweep import SweepResult

    folder = Path(folder)
    if not (folder / STATE_FILE).is_file():
        raise InputError(f"{folder}: no {STATE_FILE}: the run was not written by a tune that can be resumed")
    with np.load(folder / STATE_FILE, allow_pickle=False) as z:
        state = json.loads(z["state"].tobytes().decode())
        context = {k.split(".", 1)[1]: z[k] for k in z.files if k.startswith("context.")}
        subjects = {k.split(".", 1)[1]: z[k].astype(object) for k in z.files if k.startswith("subjects.")}
        groups = {k.split(".", 1)[1]: z[k] for k in z.files if k.startswith("groups.")}
        references: dict[str, dict[str, np.ndarray]] = {}
        for k in z.files:
            if k.startswith("reference."):
                _, name, part = k.split(".", 2)
                references.setdefault(name, {})[part] = z[k]
    params = [MemoryParams.from_dict(d) for d in state["params"]]
    if len(params) != len(table):
        raise InputError(f"{folder}: {STATE_FILE} holds {len(params)} candidates, sweep.parquet {len(table)}")
    n = int(state.get("searched", len(params)))
    table = table.iloc[:n].reset_index(drop=True)
    res = SweepResult(table=table, params=params[:n], schedule=schedule, objective=objective, holdout=holdout,
                      dataset_sha256=dataset_sha256, holdout_sha256=state["holdout_sha256"],
                      split_at=state["split_at"], context={k: v[:n] for k, v in context.items()}, subjects=subjects,
                      points=state["points"], sampled_from=state["sampled_from"],
                      calibration=bool(state["calibration"]), references=references,
                      reference_table=reference_table if reference_table is not None else pd.DataFrame(),
                      reference_params={k: MemoryParams.from_dict(v)
                                        for k, v in state.get("reference_params", {}).items()})
    studies = load_studies(folder / STUDY_FILE)
    eligible = choice_rows(table, list(studies), holdout.folds)
    return SearchOutcome(res, studies, eligible, int(state["rounds"]), int(state["proposed"]),
                         list(state["notes"])), groups


def parameter_importances(studies: Mapping[str, Any] | str | os.PathLike, params: Sequence[str] | None = None, *,
                          threshold: float = IDENTIFIED_SHARE) -> pd.DataFrame:
    """Each searched parameter's importance in each study (Optuna's PED-ANOVA, normalised to sum 1
    per study; deterministic), and whether it is identified: important (>= ``threshold``) in at
    least one study. ``studies``: studies by name, or a ``study.db`` path.

    Columns: ``parameter``, one column per study, ``max``, ``identified``. A study with too few
    completed trials (or a parameter it never varied) gives NaN."""
    optuna = _optuna()
    if not isinstance(studies, Mapping):
        studies = load_studies(studies)
    rows: dict[str, dict[str, float]] = {}
    names: list[str] = []
    for name, study in studies.items():
        trials = [t for t in study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.COMPLETE]
        varied = [p for p in (params or sorted({q for t in trials for q in t.params}))
                  if len({t.params.get(p) for t in trials}) > 1]
        names.append(name)
        imp: dict[str, float] = {}
        if len(trials) >= 4 and varied:
            evaluator = optuna.importance.PedAnovaImportanceEvaluator()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                imp = optuna.importance.get_param_importances(study, evaluator=evaluator, params=varied,
                                                              normalize=True)
        for p in params or sorted({q for t in trials for q in t.params}):
            rows.setdefault(p, {})[name] = float(imp.get(p, float("nan")))
    table = pd.DataFrame([{"parameter": p, **{n: v.get(n, float("nan")) for n in names}} for p, v in rows.items()])
    if table.empty:
        return pd.DataFrame(columns=["parameter", *names, "max", "identified"])
    table["max"] = table[names].max(axis=1, skipna=True)
    table["identified"] = table["max"].fillna(0.0) >= threshold
    return table

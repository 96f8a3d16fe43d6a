"""Groups of people who cannot be held out apart: people who share sessions.

Two people who talk in the same conversation are not independent evidence — what one says is said
in the other's session, and a choice made on one carries over to the other. Held-out judgements
(folds, bootstrap resamples) are therefore over **groups**: the connected components of subjects
linked by a shared ``session_id`` (a subject with mentions in a session is linked to every other
subject with mentions in it). A log where every subject has sessions of their own has one group per
person, and everything over groups is exactly what it was over people.

``group_by`` overrides the sessions: the name of another column of the log's mentions (components
over its values instead of ``session_id``), or a mapping of subject to group label (a dict, or a CSV
file with columns ``subject`` and ``group``; every subject of the log must be in it).

Groups are numbered in the order of their first subject (subjects sorted), so that one group per
person numbers group ``i`` as subject ``i``.

>>> import pandas as pd
>>> from factmem.data.logs import make_dataset, empty_truth, empty_generalizations
>>> ev = pd.DataFrame({"ts": [1, 2, 3], "session_id": ["a", "a", "b"], "subject": ["ann", "bo", "cy"],
...                    "predicate": "likes", "object": "tea", "kind": "explicit", "message_id": ["1", "2", "3"],
...                    "note": ""})
>>> msgs = ev[["session_id", "message_id", "ts"]].assign(speaker="user", text="")
>>> ds = make_dataset(msgs, ev, empty_truth(), empty_generalizations(), {"start": 0, "end": 10})
>>> subject_groups(ds, ["ann", "bo", "cy"]).tolist()
[0, 0, 1]
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from factmem.errors import InputError

__all__ = ["GroupBy", "subject_groups", "group_sizes", "describe_group_by"]

#: a mention column, a mapping subject → group, a CSV file of (subject, group), or None (sessions)
GroupBy = str | os.PathLike | Mapping[str, Any] | None


def subject_groups(log: Any, subjects: Sequence[str] | np.ndarray, group_by: GroupBy = None) -> np.ndarray:
    """Group index of each of ``subjects`` (a dataset or a prepared log's subjects, in any order):
    components of subjects sharing a ``session_id`` (or ``group_by``), numbered by first subject in
    sorted order. Subjects without mentions are groups of their own."""
    ds = getattr(log, "dataset", log)
    names = np.asarray(subjects, dtype=object)
    n = len(names)
    if n == 0:
        return np.zeros(0, np.int64)
    index = pd.Index(names)
    if isinstance(group_by, Mapping) or _is_file(group_by):
        labels = _mapping(group_by)
        label_of = pd.Series(labels, dtype=object)
        missing = index.difference(pd.Index(label_of.index))
        if len(missing):
            raise InputError(f"group_by: subject {missing[0]!r} has no group ({len(missing)} subjects missing)")
        codes = pd.factorize(label_of.reindex(index).to_numpy(object))[0]
        return _renumber(names, codes)
    column = "session_id" if group_by is None else str(group_by)
    ev = ds.events
    if column not in ev.columns:
        raise InputError(f"group_by: the log's mentions have no column {column!r} "
                         f"(columns: {', '.join(map(str, ev.columns))}); or give a CSV file subject,group")
    subj = index.get_indexer(pd.Index(ev["subject"].to_numpy(object)))
    values = ev[column]
    if values.isna().any():
        raise InputError(f"group_by: {int(values.isna().sum())} mentions have no {column!r}")
    link, _ = pd.factorize(values.astype(str))
    keep = subj >= 0
    subj, link = subj[keep], link[keep].astype(np.int64)
    # a bipartite graph of subjects and link values; its components are the groups
    n_links = int(link.max()) + 1 if len(link) else 0
    graph = coo_matrix((np.ones(len(subj), np.int8), (subj, n + link)), shape=(n + n_links, n + n_links))
    _, comp = connected_components(graph, directed=False)
    return _renumber(names, comp[:n])


def group_sizes(groups: np.ndarray) -> np.ndarray:
    """People per group."""
    return np.bincount(groups) if len(groups) else np.zeros(0, np.int64)


def describe_group_by(group_by: GroupBy) -> str | None:
    """How groups were formed, for a manifest."""
    if group_by is None:
        return None
    if isinstance(group_by, Mapping):
        return f"mapping of {len(group_by)} subjects"
    return os.fspath(group_by) if _is_file(group_by) else str(group_by)


def _is_file(group_by: GroupBy) -> bool:
    if group_by is None or isinstance(group_by, Mapping):
        return False
    text = os.fspath(group_by)
    return isinstance(group_by, os.PathLike) or text.endswith(".csv") or os.sep in text


def _mapping(group_by: Any) -> dict[str, Any]:
    if isinstance(group_by, Mapping):
        return {str(k): v for k, v in group_by.items()}
    path = Path(os.fspath(group_by))
    if not path.is_file():
        raise InputError(f"group_by: {path}: no such file")
    try:
        table = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as e:
        raise InputError(f"group_by: {path}: not a CSV file ({e})") from None
    if list(table.columns[:2]) != ["subject", "group"]:
        raise InputError(f"group_by: {path}: expected columns subject,group, got {','.join(table.columns)}")
    empty = table["group"] == ""
    if empty.any():
        raise InputError(f"group_by: {path}, line {int(np.flatnonzero(empty)[0]) + 2}: field 'group' is empty")
    dup = table["subject"].duplicated()
    if dup.any():
        i = int(np.flatnonzero(dup)[0])
        raise InputError(f"group_by: {path}, line {i + 2}: subject {table['subject'].iloc[i]!r} given twice")
    return dict(zip(table["subject"], table["group"]))


def _renumber(names: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Groups numbered in the order of their first subject, subjects sorted (then mapped back)."""
    order = np.argsort(names.astype(str), kind="stable")
    seen, first = np.unique(codes[order], return_index=True)
    rank = np.empty(len(seen), np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(seen))
    return rank[np.searchsorted(seen, codes)]

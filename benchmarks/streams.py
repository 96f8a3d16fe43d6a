"""Synthetic event streams for the benchmarks: Zipf-popular keys, values that change, all kinds."""

from __future__ import annotations

import numpy as np
import pandas as pd

KIND_NAMES = np.array(["explicit", "user_preference", "episodic"])


def synthetic_stream(n_events: int, n_days: int = 365, n_subjects: int = 2000, n_predicates: int = 40,
                     change_prob: float = 0.05, seed: int = 0, start: int = 1_767_225_600) -> pd.DataFrame:
    """Events sorted by ts: (ts, subject, predicate, object, kind, session_id, message_id).

    Keys (subject, predicate) are drawn Zipf-like, so a few are mentioned often; each mention keeps
    the key's current object or, with ``change_prob``, moves to another one.
    """
    rng = np.random.default_rng(seed)
    n_keys = n_subjects * n_predicates
    weights = 1.0 / np.arange(1, n_keys + 1) ** 0.8
    key = rng.choice(n_keys, size=n_events, p=weights / weights.sum())
    ts = np.sort(start + rng.integers(0, n_days * 86400, size=n_events))
    order = np.argsort(key, kind="stable")
    changes = rng.random(n_events) < change_prob
    ks = key[order]
    first = np.ones(n_events, bool)
    first[1:] = ks[1:] != ks[:-1]
    version = np.cumsum(changes[order] | first)
    # version restarts per key: subtract the key's first version
    first_version = np.maximum.accumulate(np.where(first, version, 0))
    obj_code = np.empty(n_events, np.int64)
    obj_code[order] = version - first_version
    subj = key // n_predicates
    pred = key % n_predicates
    kind = KIND_NAMES[pred % 3]
    return pd.DataFrame({
        "ts": ts.astype(np.int64),
        "subject": pd.Series(subj).map(lambda i: f"user{i}").to_numpy(dtype=object),
        "predicate": pd.Series(pred).map(lambda i: f"p{i}").to_numpy(dtype=object),
        "object": pd.Series(obj_code).map(lambda i: f"v{i}").to_numpy(dtype=object),
        "kind": kind,
        "session_id": pd.Series((ts - start) // 3600).map(lambda i: f"s{i}").to_numpy(dtype=object),
        "message_id": pd.Series(np.arange(n_events)).map(lambda i: f"m{i}").to_numpy(dtype=object),
    })

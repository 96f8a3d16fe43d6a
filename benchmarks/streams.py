"""Synthetic event streams for the benchmarks: Zipf-popular keys, values that change, all kinds."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

KIND_NAMES = pa.array(["explicit", "user_preference", "episodic"])


def _labels(prefix: str, codes: np.ndarray) -> pa.Array:
    return pc.binary_join_element_wise(pa.scalar(prefix), pc.cast(pa.array(codes), pa.string()), "")


def synthetic_stream(n_events: int, n_days: int = 365, n_subjects: int = 2000, n_predicates: int = 40,
                     change_prob: float = 0.05, seed: int = 0, start: int = 1_767_225_600,
                     as_arrow: bool = False) -> pd.DataFrame | pa.Table:
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
    first_version = np.maximum.accumulate(np.where(first, version, 0))
    obj_code = np.empty(n_events, np.int64)
    obj_code[order] = version - first_version
    subj = key // n_predicates
    pred = key % n_predicates
    table = pa.table({
        "ts": pa.array(ts.astype(np.int64)),
        "subject": _labels("user", subj),
        "predicate": _labels("p", pred),
        "object": _labels("v", obj_code),
        "kind": KIND_NAMES.take(pa.array(pred % 3)),
        "session_id": _labels("s", (ts - start) // 3600),
        "message_id": _labels("m", np.arange(n_events)),
    })
    return table if as_arrow else table.to_pandas()

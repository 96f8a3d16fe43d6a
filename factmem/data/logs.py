"""Conversation-log datasets: the folder format, validation, load and save.

A dataset is a folder (the format is documented in ``datasets/README.md``)::

    log.jsonl            one message a line, each with the facts extracted from it
    truth.csv            when each fact the generator knows of was true (and relevant)
    generalizations.csv  the higher-level facts that hold per subject, with their support
    scenario.toml        the settings that produced the folder (start and end of the log at least)

:func:`load` reads a folder into a :class:`Dataset` whose ``events`` table is exactly what
``FactStore.ingest`` takes. Loading is vectorized (pyarrow's JSON and CSV readers): a log of a
million mentions loads in seconds. Malformed input raises :class:`~factmem.errors.InputError`
naming the file, the line and the field; when the fast vectorized checks find a problem, a precise
line-by-line pass locates it. Nothing is returned half-loaded.

Ground floor: besides :mod:`factmem.data.format` (names and parsers of the format, split out of
this module), it imports no other factmem module but ``errors`` and the ``params`` constants.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from factmem.core.params import dumps_toml
from factmem.data.format import (
    _FACT_FIELDS,
    BOUND_PERIODS,
    DATASET_FILES,
    EVENT_COLUMNS,
    GENERALIZATION_COLUMNS,
    GENERALIZATIONS_FILE,
    LOG_FILE,
    MESSAGE_COLUMNS,
    NEVER_TRUE_NOISE,
    NOISE_LABELS,
    SCENARIO_FILE,
    TRUTH_COLUMNS,
    TRUTH_FILE,
    TRUTH_PERIOD_COLUMNS,
    _check_span,
    _parse_generalizations,
    _parse_log,
    _parse_scenario,
    _parse_truth,
    _truth_frame,
    _with_periods,
    default_scenario,
    empty_events,
    empty_generalizations,
    empty_messages,
    empty_truth,
)
from factmem.errors import ExportError, InputError

# ------------------------------------------------------------------------------------------
# the dataset
# ------------------------------------------------------------------------------------------


@dataclass(eq=False)
class Dataset:
    """A conversation log with its ground truth.

    ``events``: one row per fact mention (columns :data:`EVENT_COLUMNS`, sorted by ts, line order
    and position in the message) — what ``FactStore.ingest`` takes. ``messages``: one row per log
    line (:data:`MESSAGE_COLUMNS`), in line order. ``truth``: validity intervals
    (:data:`TRUTH_COLUMNS`; ``valid_to``/``relevant_until`` nullable; imported facts add the optional
    :data:`TRUTH_PERIOD_COLUMNS`, the periods their bounds are known to). ``generalizations``: long
    format, one row per (generalization, supporting fact). ``scenario``: the parsed scenario.toml,
    with ``start`` and ``end`` in Unix seconds. ``path``: the folder it was loaded from or saved to.
    """

    path: Path | None
    events: pd.DataFrame
    truth: pd.DataFrame
    generalizations: pd.DataFrame
    scenario: dict
    messages: pd.DataFrame
    _sha256: str | None = field(default=None, repr=False)

    @property
    def sha256(self) -> str:
        """Content hash of the folder's files (their bytes, so stable across machines).

        For a dataset built in memory, the hash of the folder :func:`save` would write.
        """
        if self._sha256 is None:
            self._sha256 = _hash_files(_serialize(self))
        return self._sha256

    @property
    def start(self) -> int:
        return int(self.scenario["start"])

    @property
    def end(self) -> int:
        return int(self.scenario["end"])

    @property
    def multi_valued_predicates(self) -> frozenset[str]:
        """Predicates the ground truth says may hold several objects at once."""
        return frozenset(self.scenario.get("multi_valued_predicates", ()))

    def equals(self, other: Dataset) -> bool:
        """Same events, messages, truth, generalizations and scenario (the path is ignored)."""
        if not isinstance(other, Dataset):
            return False
        frames = ("events", "messages", "truth", "generalizations")
        return all(_frames_equal(getattr(self, f), getattr(other, f)) for f in frames) and (
            self.scenario == other.scenario
        )

    def to_dict(self) -> dict[str, Any]:
        """A plain-dict summary (sizes, span, hash), for reports and JSON."""
        return {
            "path": str(self.path) if self.path is not None else None,
            "sha256": self.sha256,
            "start": self.start,
            "end": self.end,
            "messages": int(len(self.messages)),
            "sessions": int(self.messages["session_id"].nunique()) if len(self.messages) else 0,
            "mentions": int(len(self.events)),
            "subjects": int(self.events["subject"].nunique()) if len(self.events) else 0,
            "truth_rows": int(len(self.truth)),
            "generalizations": int(self.generalizations["gen_id"].nunique()) if len(self.generalizations) else 0,
        }


def _frames_equal(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    if list(a.columns) != list(b.columns) or len(a) != len(b):
        return False
    try:
        pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True), check_dtype=False)
    except AssertionError:
        return False
    return True


# ------------------------------------------------------------------------------------------
# load
# ------------------------------------------------------------------------------------------


def load(path: str | os.PathLike[str]) -> Dataset:
    """Read a dataset folder (or its ``log.jsonl``) into a :class:`Dataset`.

    ``log.jsonl`` is required; ``truth.csv``, ``generalizations.csv`` and ``scenario.toml`` are
    optional (empty tables; start and end taken from the log). Raises
    :class:`~factmem.errors.InputError` naming the file, the line and the field of the first
    problem found.
    """
    folder = Path(path)
    if folder.is_file() and folder.name == LOG_FILE:
        folder = folder.parent
    if not folder.is_dir():
        raise InputError(f"{folder}: no such dataset folder")
    log_path = folder / LOG_FILE
    if not log_path.is_file():
        raise InputError(f"{folder}: not a dataset folder (no {LOG_FILE})")

    raw: dict[str, bytes] = {LOG_FILE: log_path.read_bytes()}
    for name in (TRUTH_FILE, GENERALIZATIONS_FILE, SCENARIO_FILE):
        p = folder / name
        if p.is_file():
            raw[name] = p.read_bytes()

    messages, events = _parse_log(raw[LOG_FILE], log_path)
    truth = _parse_truth(raw[TRUTH_FILE], folder / TRUTH_FILE) if TRUTH_FILE in raw else empty_truth()
    gens = (
        _parse_generalizations(raw[GENERALIZATIONS_FILE], folder / GENERALIZATIONS_FILE)
        if GENERALIZATIONS_FILE in raw
        else empty_generalizations()
    )
    if SCENARIO_FILE in raw:
        scenario = _parse_scenario(raw[SCENARIO_FILE], folder / SCENARIO_FILE)
    else:
        scenario = default_scenario(messages)
    _check_span(scenario, messages, log_path, raw[LOG_FILE])
    return Dataset(
        path=folder,
        events=events,
        truth=truth,
        generalizations=gens,
        scenario=scenario,
        messages=messages,
        _sha256=_hash_files(raw),
    )




def unexplained_mentions(dataset: Dataset) -> pd.DataFrame:
    """Mentions that no truth row explains (an empty frame for a consistent dataset).

    A mention at ``ts`` is explained by the latest-starting truth row of its (subject, predicate,
    object) with ``valid_from <= ts`` when ``ts < valid_to`` (or valid_to is empty) and
    ``ts <= relevant_until`` (or that is empty); a never-true row (a misstatement or an extraction
    error, :data:`NEVER_TRUE_NOISE`) explains the mention at its own instant
    (``valid_from == valid_to == ts``).
    """
    ev = dataset.events.reset_index(drop=True)
    if not len(ev):
        return ev
    tr = dataset.truth
    key = ["subject", "predicate", "object"]
    left = ev[key + ["ts"]].astype({c: object for c in key}).assign(_row=np.arange(len(ev)))
    right = pd.DataFrame(
        {
            **{c: tr[c].astype(object) for c in key},
            "ts": tr["valid_from"].to_numpy(np.int64),
            "_to": tr["valid_to"].astype("float64").to_numpy(),
            "_rel": tr["relevant_until"].astype("float64").to_numpy(),
            "_mis": tr["noise"].isin(NEVER_TRUE_NOISE).to_numpy(bool),
        }
    )
    m = pd.merge_asof(left.sort_values("ts", kind="stable"), right.sort_values("ts", kind="stable"), on="ts", by=key,
                      direction="backward")
    ts = m["ts"].to_numpy(np.float64)
    to, rel, mis = m["_to"].to_numpy(), m["_rel"].to_numpy(), m["_mis"].fillna(False).to_numpy(bool)
    found = m["_mis"].notna().to_numpy()  # no earlier truth row of the triple: NaN
    inside = (np.isnan(to) | (ts < to) | (mis & (ts == to))) & (np.isnan(rel) | (ts <= rel))
    bad = m["_row"].to_numpy()[~(found & inside)]
    return ev.iloc[np.sort(bad)]




def make_dataset(
    messages: pd.DataFrame,
    events: pd.DataFrame,
    truth: pd.DataFrame,
    generalizations: pd.DataFrame,
    scenario: Mapping[str, Any],
    path: Path | None = None,
) -> Dataset:
    """Assemble a Dataset from tables, normalizing dtypes and the event order.

    ``events`` must list each message's facts in their order within the message; rows are
    stably sorted by ts here. Raises ``InputError`` if an event names no message.
    """
    messages = messages.loc[:, list(MESSAGE_COLUMNS)].reset_index(drop=True)
    messages = messages.astype({"session_id": "str", "message_id": "str", "speaker": "str", "text": "str"})
    messages["ts"] = messages["ts"].astype(np.int64)
    ev = events.loc[:, list(EVENT_COLUMNS)].copy()
    ev["ts"] = ev["ts"].astype(np.int64)
    for c in EVENT_COLUMNS[1:]:
        ev[c] = ev[c].astype("str")
    ev = ev.iloc[np.argsort(ev["ts"].to_numpy(), kind="stable")].reset_index(drop=True)
    t = truth.reset_index(drop=True)
    truth = _truth_frame(*(t[c] if c in t.columns else [None] * len(t) for c in TRUTH_COLUMNS))
    truth = _with_periods(truth, {c: t[c] for c in TRUTH_PERIOD_COLUMNS if c in t.columns})
    gens = generalizations.loc[:, list(GENERALIZATION_COLUMNS)].reset_index(drop=True).astype("str")
    return Dataset(path=path, events=ev, truth=truth, generalizations=gens, scenario=dict(scenario), messages=messages)


# ------------------------------------------------------------------------------------------
# save
# ------------------------------------------------------------------------------------------


def save(dataset: Dataset, path: str | os.PathLike[str]) -> Path:
    """Write ``dataset`` as a folder that :func:`load` reads back equal; returns the folder.

    The bytes depend only on the dataset (same dataset → same files). Existing dataset files in
    the folder are replaced; other files are left alone. Sets ``dataset.path`` and its hash. A folder
    that cannot be written is an :class:`~factmem.errors.ExportError` naming it.
    """
    folder = Path(path)
    files = _serialize(dataset)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            tmp = folder / f".{name}.tmp"
            tmp.write_bytes(data)
            os.replace(tmp, folder / name)
    except OSError as exc:
        raise ExportError(f"{exc.filename or folder}: cannot write the dataset: {exc.strerror or exc}") from None
    dataset.path = folder
    dataset._sha256 = _hash_files(files)
    return folder


def _hash_files(files: Mapping[str, bytes]) -> str:
    h = hashlib.sha256()
    for name in sorted(n for n in files if n in DATASET_FILES):
        h.update(name.encode() + b"\0" + hashlib.sha256(files[name]).hexdigest().encode() + b"\n")
    return h.hexdigest()


def _serialize(dataset: Dataset) -> dict[str, bytes]:
    scenario = dict(dataset.scenario)
    return {
        LOG_FILE: _log_bytes(dataset.messages, dataset.events),
        TRUTH_FILE: _csv_bytes(_truth_for_csv(dataset.truth)),
        GENERALIZATIONS_FILE: _csv_bytes(dataset.generalizations.loc[:, list(GENERALIZATION_COLUMNS)]),
        SCENARIO_FILE: (dumps_toml(scenario) + "\n").encode("utf-8"),
    }


def _truth_for_csv(truth: pd.DataFrame) -> pd.DataFrame:
    out = truth.loc[:, [c for c in TRUTH_COLUMNS + TRUTH_PERIOD_COLUMNS if c in truth.columns]].copy()
    if "noise" not in out.columns:
        out["noise"] = None
    return out


def _csv_bytes(frame: pd.DataFrame) -> bytes:
    return frame.to_csv(index=False, lineterminator="\n", na_rep="").encode("utf-8")


def _arrow_str(series: pd.Series) -> pa.Array:
    """A string column as Arrow, missing values (None or NaN) as nulls."""
    return pa.array(series.astype("str"), type=pa.string(), from_pandas=True)


def _log_bytes(messages: pd.DataFrame, events: pd.DataFrame) -> bytes:
    """Messages with their facts as JSON lines, written by DuckDB (fast, deterministic)."""
    import duckdb  # local: keeps `import factmem.data.logs` light for readers that never save

    if not len(messages):
        return b""
    msg = messages.loc[:, list(MESSAGE_COLUMNS)].reset_index(drop=True)
    keys = pd.MultiIndex.from_frame(msg[["session_id", "message_id"]].astype("str"))
    if keys.has_duplicates:
        dup = keys[keys.duplicated()][0]
        raise InputError(f"messages: duplicate message id {dup[1]!r} in session {dup[0]!r}")
    ev_keys = pd.MultiIndex.from_frame(events[["session_id", "message_id"]].astype("str"))
    mi = keys.get_indexer(ev_keys)
    if (mi < 0).any():
        i = int(np.flatnonzero(mi < 0)[0])
        raise InputError(
            f"events row {i}: message {events['message_id'].iloc[i]!r} of session {events['session_id'].iloc[i]!r} "
            "is not in messages"
        )
    msg_tbl = pa.table(
        {
            "mi": pa.array(np.arange(len(msg), dtype=np.int64)),
            **{c: _arrow_str(msg[c]) for c in ("session_id", "message_id")},
            "ts": pa.array(msg["ts"].to_numpy(dtype=np.int64)),
            **{c: _arrow_str(msg[c]) for c in ("speaker", "text")},
        }
    )
    fact_tbl = pa.table(
        {
            "mi": pa.array(mi.astype(np.int64)),
            "pos": pa.array(np.arange(len(events), dtype=np.int64)),
            **{c: _arrow_str(events[c]) for c in (*_FACT_FIELDS, "note")},
        }
    )
    con = duckdb.connect()
    try:
        con.register("msgs", msg_tbl)
        con.register("facts", fact_tbl)
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / LOG_FILE
            # Notes are optional: leave the key out when there is none.
            con.execute(
                """COPY (
                    WITH f AS (
                        SELECT mi, list(CASE WHEN note IS NULL
                            THEN json_object('subject', subject, 'predicate', predicate, 'object', object, 'kind', kind)
                            ELSE json_object('subject', subject, 'predicate', predicate, 'object', object, 'kind', kind,
                                             'note', note) END ORDER BY pos) AS facts
                        FROM facts GROUP BY mi)
                    SELECT session_id, message_id, ts, speaker, text, coalesce(f.facts, []::JSON[]) AS facts
                    FROM msgs LEFT JOIN f USING (mi) ORDER BY mi
                ) TO ? (FORMAT json)""",
                [out.as_posix()],  # bound, never formatted into the SQL (a TMPDIR may hold a quote)
            )
            return out.read_bytes()
    finally:
        con.close()


def bundled_dataset(name: str = "small") -> Path:
    """The folder of a dataset bundled with factmem (``small``: installed with the package as
    ``factmem.bundled``; others only in a source checkout's ``datasets/``)."""
    from importlib import resources

    try:
        p = resources.files("factmem.bundled") / name
        if p.is_dir():
            return Path(str(p))
    except ModuleNotFoundError:
        pass
    here = Path(__file__).resolve().parents[2] / "datasets" / name
    if here.is_dir():
        return here
    raise InputError(f"the bundled {name!r} dataset is not installed; pass the dataset folder (--log DIR)")


def resolve_dataset(path: str | os.PathLike | None) -> Path:
    """A dataset folder: ``path`` (which must exist), or the bundled ``small`` when None."""
    if path is None or str(path) == "":
        return bundled_dataset()
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such dataset folder")
    return p


__all__ = [
    "bundled_dataset",
    "resolve_dataset",
    "Dataset",
    "load",
    "unexplained_mentions",
    "save",
    "make_dataset",
    "default_scenario",
    "empty_events",
    "empty_messages",
    "empty_truth",
    "empty_generalizations",
    "DATASET_FILES",
    "LOG_FILE",
    "TRUTH_FILE",
    "GENERALIZATIONS_FILE",
    "SCENARIO_FILE",
    "EVENT_COLUMNS",
    "MESSAGE_COLUMNS",
    "TRUTH_COLUMNS",
    "TRUTH_PERIOD_COLUMNS",
    "BOUND_PERIODS",
    "GENERALIZATION_COLUMNS",
    "NOISE_LABELS",
    "NEVER_TRUE_NOISE",
]

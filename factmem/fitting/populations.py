"""The populations :mod:`factmem.fitting.fit` estimates from, built from a dataset with numpy and pandas.

**Lifetimes** (from ``truth.csv``; :func:`lifetimes`). Every truth row that is not noise
(misstatements and one-off irrelevant facts are left out) is the lifetime of one fact value: it
starts at ``valid_from`` and ends at ``valid_to`` for lasting kinds (a change), at
``min(valid_to, relevant_until)`` for episodic ones (its relevance horizon). Only the part inside
the log, ``[start, end]``, is observed: a value that became true before the log started enters
observation at ``start`` (left truncation — what it did before is not seen, and the generator
back-dates first values), and one still true at ``end`` is censored there. Exposure = days
observed; an event = the lifetime ended inside the log.

**Observed spans** (:func:`observed_spans`). A subject is observed only from its first to its last
message in the log (any session; a message counts when it mentions one of the subject's facts or
the subject speaks it). Every population below is censored at the subject's last message and
truncated at its first, not at the log's start and end: a person who stopped talking months before
the log ends says nothing about those months, and counting them as "held, silent, no longer true"
biases every decay estimate upwards. A subject with one message (or none) contributes no exposure.
Shifting a subject's whole timeline (its messages and its truth) by any offset leaves every
population unchanged.

**Silent spells** (from the log; :func:`silent_spells`). Mentions are first cleaned: for a
single-valued predicate only the last object said for a (subject, predicate) in a session counts
(a value said and replaced within the same session is a slip — the generator's misstatements are
corrected that way — not a held belief), and a triple said several times in one session counts
once (its last mention). A fact is *held* from a mention until a different object of the same
single-valued (subject, predicate) is mentioned (superseded); facts of multi-valued predicates are
held from their first mention to their subject's last message. A *silent spell* runs from a mention of a
held fact to whichever comes first: its next mention (re-mention), its supersession, its subject's last message
(censored). The *sessions* of a subject are the sessions in which it is mentioned at all, ordered
by their first mention of it; a spell's silent sessions are the subject's sessions after the one
of its starting mention and before the one that ends it (all the remaining ones if censored). The
"end of the log" of a spell is its subject's last message (the observed span): a fact whose last
mention is the subject's last message has no silent spell at all.

**Observations** (:func:`checkpoint_observations`): at checkpoints ``t`` every ``checkpoint_hours``
from each subject's first message (``first + k·every``, k >= 1: the subject's own clock, so that a
shifted timeline has the same checkpoints), every spell with ``start < t <= stop`` is a held fact
silent for ``t − start`` days — the population of the calibration metric
(:mod:`factmem.evaluation.metrics`), which a fact the memory holds contributes at each checkpoint until
it is mentioned again, superseded, or its subject's last message.

**Labels** (:func:`TruthLookup`): a triple is true and relevant at ``t`` when some truth row of it
has ``valid_from <= t < min(valid_to, relevant_until)`` (noise rows never are).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from factmem.data.logs import Dataset

__all__ = [
    "DAY",
    "Lifetimes",
    "Spells",
    "TruthLookup",
    "checkpoint_observations",
    "ObservedSpans",
    "encode_triples",
    "lifetimes",
    "observed_spans",
    "silent_spells",
]

DAY = 86400.0
OPEN = np.iinfo(np.int64).max
REMENTION, SUPERSEDED, CENSORED = 0, 1, 2


def encode_triples(*frames: pd.DataFrame) -> list[np.ndarray]:
    """Integer codes of (subject, predicate, object) shared across the frames."""
    cols = ("subject", "predicate", "object")
    arrays = [np.concatenate([f[c].to_numpy(object) for f in frames]) if frames else np.zeros(0, object)
              for c in cols]
    codes, _ = pd.MultiIndex.from_arrays(arrays).factorize()
    out, at = [], 0
    for f in frames:
        out.append(codes[at:at + len(f)].astype(np.int64))
        at += len(f)
    return out


# -- observed spans -----------------------------------------------------------------------------------


@dataclass
class ObservedSpans:
    """Per subject (sorted names), the first and last message in the log that is theirs."""

    subjects: pd.Index
    first: np.ndarray  # int64, Unix seconds
    last: np.ndarray

    def of(self, subject: np.ndarray | pd.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(known, first, last) per subject name; unknown subjects get an empty span (0, 0)."""
        at = self.subjects.get_indexer(pd.Index(np.asarray(subject, object)))
        known = at >= 0
        safe = np.where(known, at, 0)
        first = np.where(known, self.first[safe] if len(self.first) else 0, 0).astype(np.int64)
        last = np.where(known, self.last[safe] if len(self.last) else 0, 0).astype(np.int64)
        return known, first, last

    @property
    def days(self) -> np.ndarray:
        return (self.last - self.first) / DAY


def observed_spans(dataset: Dataset) -> ObservedSpans:
    """Each subject's observed span: from its first to its last message (module docstring). A
    message is the subject's when it mentions one of the subject's facts or the subject speaks it."""
    ev = dataset.events
    msg = dataset.messages
    subj = ev["subject"].to_numpy(object)
    ts = ev["ts"].to_numpy(np.int64)
    if len(msg) and "speaker" in msg.columns:
        speaks = msg["speaker"].isin(pd.unique(subj)).to_numpy()
        subj = np.concatenate([subj, msg["speaker"].to_numpy(object)[speaks]])
        ts = np.concatenate([ts, msg["ts"].to_numpy(np.int64)[speaks]])
    frame = pd.DataFrame({"s": subj, "ts": ts}).groupby("s", sort=True)["ts"].agg(["min", "max"])
    return ObservedSpans(subjects=pd.Index(frame.index.astype(object)), first=frame["min"].to_numpy(np.int64),
                         last=frame["max"].to_numpy(np.int64))


# -- lifetimes from truth ---------------------------------------------------------------------------


@dataclass
class Lifetimes:
    """One row per fact value observed inside the log (see the module docstring).

    Columns: subject, predicate, object, kind, ``entry``/``exit`` (days since the value became true when it
    entered and left observation), ``event`` (ended inside the log), ``exposure`` (days observed),
    ``episodic`` (the lifetime is a relevance horizon).
    """

    frame: pd.DataFrame


def lifetimes(truth: pd.DataFrame, start: int, end: int, spans: ObservedSpans | None = None) -> Lifetimes:
    """Lifetimes of the non-noise truth rows inside ``[start, end]`` — and, with ``spans``, inside
    each row's subject's observed span (a subject never observed contributes nothing)."""
    t = truth[truth["noise"].isna()] if "noise" in truth.columns else truth
    lo = np.full(len(t), int(start), np.int64)
    hi = np.full(len(t), int(end), np.int64)
    if spans is not None:
        known, first, last = spans.of(t["subject"].to_numpy(object))
        lo = np.where(known, np.maximum(lo, first), lo)
        hi = np.where(known, np.minimum(hi, last), lo)
    frm = t["valid_from"].to_numpy(np.int64)
    to = pd.array(t["valid_to"], dtype="Int64").fillna(OPEN).to_numpy(np.int64)
    rel = pd.array(t["relevant_until"], dtype="Int64").fillna(OPEN).to_numpy(np.int64)
    episodic = (t["kind"] == "episodic").to_numpy()
    stop = np.where(episodic, np.minimum(to, rel), to)
    enter = np.maximum(frm, lo)
    leave = np.minimum(stop, hi)
    keep = leave > enter
    frame = pd.DataFrame({
        "subject": t["subject"].to_numpy(object)[keep],
        "predicate": t["predicate"].to_numpy(object)[keep],
        "object": t["object"].to_numpy(object)[keep] if "object" in t.columns else None,
        "kind": t["kind"].to_numpy(object)[keep],
        "entry": (enter - frm)[keep] / DAY,
        "exit": (leave - frm)[keep] / DAY,
        "event": (stop <= hi)[keep],
        "exposure": (leave - enter)[keep] / DAY,
        "episodic": episodic[keep],
    })
    return Lifetimes(frame)


# -- silent spells from the log ---------------------------------------------------------------------


@dataclass
class Spells:
    """Silent spells (one row each) and the subjects' session times.

    ``frame`` columns: subject (name), subject_code, predicate, object, kind, triple (code),
    ``multi`` (multi-valued predicate), ``start``/``stop`` (Unix seconds), ``days`` (stop − start),
    ``outcome`` (0 re-mention, 1 superseded, 2 censored), ``silent`` (silent sessions).
    ``session_ts``: every subject's session times, sorted by (subject code, time), with
    ``session_offsets[s]:session_offsets[s+1]`` the slice of subject code ``s``. ``first``/``last``:
    per subject code, its observed span (:func:`observed_spans`); ``end``: the log's end.
    """

    frame: pd.DataFrame
    subjects: np.ndarray
    session_ts: np.ndarray
    session_offsets: np.ndarray
    end: int
    first: np.ndarray
    last: np.ndarray

    def sessions_between(self, subject_code: np.ndarray, after: np.ndarray, upto: np.ndarray) -> np.ndarray:
        """Sessions of each subject whose time is in ``(after, upto]``."""
        lo = self.session_offsets[subject_code]
        hi = self.session_offsets[subject_code + 1]
        # one global searchsorted: shift each subject's times into its own band of the key space
        base = int(self.session_ts.min(initial=0))
        span = int(max(int(self.session_ts.max(initial=0)), int(np.max(upto, initial=0))) - base) + 2
        key = self.session_ts - base + np.repeat(np.arange(len(self.subjects), dtype=np.int64),
                                                  np.diff(self.session_offsets)) * span
        band = subject_code * span - base
        a = np.searchsorted(key, np.clip(np.asarray(after, np.int64), base - 1, base + span - 2) + band, "right")
        b = np.searchsorted(key, np.clip(np.asarray(upto, np.int64), base - 1, base + span - 2) + band, "right")
        return np.clip(b, lo, hi) - np.clip(a, lo, hi)


def silent_spells(dataset: Dataset, multi_valued: frozenset[str]) -> Spells:
    """The silent spells of every held fact of the log (see the module docstring)."""
    ev = dataset.events
    end = int(dataset.end)
    spans = observed_spans(dataset)
    n = len(ev)
    e = pd.DataFrame({
        "ts": ev["ts"].to_numpy(np.int64), "subject": ev["subject"].to_numpy(object),
        "predicate": ev["predicate"].to_numpy(object), "object": ev["object"].to_numpy(object),
        "kind": ev["kind"].to_numpy(object), "session": ev["session_id"].to_numpy(object),
        "row": np.arange(n, dtype=np.int64),
    })
    e["multi"] = e["predicate"].isin(list(multi_valued)).to_numpy()
    subj_codes, subjects = pd.factorize(e["subject"], sort=True)
    e["subject_code"] = subj_codes.astype(np.int64)
    _, subject_first, subject_last = spans.of(np.asarray(subjects, object))

    # the subject's sessions, ordered by their first mention of the subject
    first = e.groupby(["subject_code", "session"], sort=False)["ts"].agg(["min"]).reset_index()
    first = first.sort_values(["subject_code", "min", "session"], kind="stable")
    first["ordinal"] = first.groupby("subject_code").cumcount().to_numpy(np.int64)
    per_subject = np.bincount(first["subject_code"].to_numpy(np.int64), minlength=len(subjects))
    offsets = np.concatenate([[0], np.cumsum(per_subject)]).astype(np.int64)

    # slips: for single-valued predicates only the session's last object of a (subject, predicate)
    last = e.groupby(["subject_code", "predicate", "session"], sort=False)["object"].transform("last")
    e = e[e["multi"].to_numpy() | (e["object"] == last).to_numpy()]
    e = e.drop_duplicates(["subject_code", "predicate", "object", "session"], keep="last")
    e = e.merge(first[["subject_code", "session", "ordinal"]], on=["subject_code", "session"], how="left")
    e["triple"] = encode_triples(e)[0]

    # next mention of the same (subject, predicate) [single-valued] or the same triple [multi-valued]
    e = e.sort_values(["subject_code", "predicate", "ts", "row"], kind="stable").reset_index(drop=True)
    same_sp = np.zeros(len(e), bool)
    if len(e):
        same_sp[:-1] = ((e["subject_code"].to_numpy()[1:] == e["subject_code"].to_numpy()[:-1])
                        & (e["predicate"].to_numpy()[1:] == e["predicate"].to_numpy()[:-1]))
    nxt = np.arange(1, len(e) + 1)
    by_triple = np.lexsort((e["row"].to_numpy(), e["ts"].to_numpy(), e["triple"].to_numpy()))
    trip_sorted = e["triple"].to_numpy()[by_triple]
    same_t = np.zeros(len(e), bool)
    if len(e):
        same_t[:-1] = trip_sorted[1:] == trip_sorted[:-1]
    nxt_t = np.full(len(e), -1, np.int64)
    nxt_t[by_triple[:-1][same_t[:-1]]] = by_triple[1:][same_t[:-1]]
    multi = e["multi"].to_numpy()
    nxt_idx = np.where(multi, nxt_t, np.where(same_sp, nxt, -1))
    has_next = nxt_idx >= 0
    safe = np.where(has_next, nxt_idx, 0)
    ts = e["ts"].to_numpy(np.int64)
    ordinal = e["ordinal"].to_numpy(np.int64)
    code = e["subject_code"].to_numpy(np.int64)
    same_obj = e["triple"].to_numpy()[safe] == e["triple"].to_numpy()
    outcome = np.where(~has_next, CENSORED, np.where(same_obj, REMENTION, SUPERSEDED))
    stop = np.where(has_next, ts[safe], subject_last[code])  # censored at the subject's last message
    silent = np.where(has_next, ordinal[safe] - ordinal - 1, per_subject[code] - 1 - ordinal)
    frame = pd.DataFrame({
        "subject": e["subject"].to_numpy(object), "subject_code": code, "predicate": e["predicate"].to_numpy(object),
        "object": e["object"].to_numpy(object), "kind": e["kind"].to_numpy(object),
        "triple": e["triple"].to_numpy(np.int64), "multi": multi, "start": ts, "stop": stop,
        "days": (stop - ts) / DAY, "outcome": outcome.astype(np.int8), "silent": silent.astype(np.int64),
    })
    frame = frame[frame["days"] > 0].reset_index(drop=True)
    return Spells(frame=frame, subjects=np.asarray(subjects, object),
                  session_ts=first["min"].to_numpy(np.int64), session_offsets=offsets, end=end,
                  first=subject_first, last=subject_last)


# -- truth labels --------------------------------------------------------------------------------------


class TruthLookup:
    """Is a triple true and relevant at ``t``? Vectorized over (triple, t) pairs.

    Built from the non-noise truth rows: per triple its intervals ``[valid_from, min(valid_to,
    relevant_until))``; ``t`` is covered when some interval starting at or before ``t`` lasts past it
    (a running maximum of interval ends per triple, so overlapping rows are handled exactly).
    """

    def __init__(self, truth: pd.DataFrame, triple: np.ndarray):
        keep = truth["noise"].isna().to_numpy() if "noise" in truth.columns else np.ones(len(truth), bool)
        frm = truth["valid_from"].to_numpy(np.int64)[keep]
        to = pd.array(truth["valid_to"], dtype="Int64").fillna(OPEN).to_numpy(np.int64)[keep]
        rel = pd.array(truth["relevant_until"], dtype="Int64").fillna(OPEN).to_numpy(np.int64)[keep]
        trip = np.asarray(triple, np.int64)[keep]
        order = np.lexsort((frm, trip))
        self.triple, self.start = trip[order], frm[order]
        stop = np.minimum(to, rel)[order]
        self.reach = pd.Series(stop).groupby(self.triple).cummax().to_numpy(np.int64) if len(stop) else stop

    def __call__(self, triple: np.ndarray, t: np.ndarray) -> np.ndarray:
        triple = np.asarray(triple, np.int64)
        t = np.asarray(t, np.int64)
        if not len(self.triple) or not len(t):
            return np.zeros(len(t), bool)
        # last interval with (triple, start) <= (triple, t): lexicographic search on two sorted keys
        lo = np.searchsorted(self.triple, triple, "left")
        hi = np.searchsorted(self.triple, triple, "right")
        out = np.zeros(len(t), bool)
        has = hi > lo
        if has.any():
            # within each triple's slice starts are sorted: offset them into one increasing key
            rank = np.cumsum(np.r_[True, self.triple[1:] != self.triple[:-1]]) - 1
            base = int(min(self.start.min(), t.min()))
            span = int(max(self.start.max(), t.max()) - base) + 2
            key = rank * span + (self.start - base)
            q = rank[np.minimum(lo, len(rank) - 1)] * span + (t - base)
            pos = np.searchsorted(key, q, "right") - 1
            ok = has & (pos >= lo) & (pos < hi)
            pos = np.clip(pos, 0, len(key) - 1)
            out = ok & (t < self.reach[pos])
        return out


def checkpoint_observations(spells: pd.DataFrame, origin: np.ndarray, every: int, *, max_observations: int = 5_000_000
                            ) -> tuple[np.ndarray, np.ndarray, int]:
    """(spell row, checkpoint time) of every held, silent fact at every checkpoint.

    Checkpoints run on each spell's subject's clock: ``origin[i] + k·every`` (k >= 1) for spell
    ``i`` (its subject's first message). A spell is observed at checkpoints ``t`` with ``start < t <=
    stop``. Beyond ``max_observations`` pairs every k-th checkpoint is used (the smallest k that
    fits; returned as the stride).
    """
    start = spells["start"].to_numpy(np.int64)
    stop = spells["stop"].to_numpy(np.int64)
    origin = np.asarray(origin, np.int64)
    stride = 1
    while True:
        step = int(every) * stride
        k0 = np.floor_divide(start - origin, step) + 1  # first checkpoint index after the start
        k1 = np.floor_divide(stop - origin, step)  # last one at or before the stop
        count = np.maximum(k1 - k0 + 1, 0)
        longest = int(np.max(stop - origin, initial=0)) // step
        if int(count.sum()) <= max_observations or longest <= 1:
            break
        stride += 1
    row = np.repeat(np.arange(len(start), dtype=np.int64), count)
    within = np.arange(len(row), dtype=np.int64) - np.repeat(np.cumsum(count) - count, count)
    t = origin[row] + (k0[row] + within) * step if len(row) else np.zeros(0, np.int64)
    return row, t, stride

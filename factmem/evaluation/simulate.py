"""Replay a conversation log through the memory on a schedule and score it against ground truth.

>>> from factmem.data.generate import generate
>>> run = simulate(generate("tiny", seed=3), schedule=Schedule(evaluate_every_hours=24))
>>> 0 <= run.summary["recall"] <= 1
True

Two engines give the same belief states, and so the same scores:

* :func:`simulate` drives a :class:`~factmem.store.FactStore` — ``replay`` between abstraction
  passes (set-based, never event by event), the abstraction pass with a provider, consolidation on
  the schedule — and then reads what the memory believed at every checkpoint back from the store's
  evidence log. It returns the store for inspection.
* :func:`kernel_beliefs` computes the belief states of many parameter sets at once with the
  vectorized kernel (:mod:`factmem.engine.waves`), without a database; sweeps use it. It has no
  abstraction (that needs a provider per cluster).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from tqdm.auto import tqdm

from factmem.abstraction.passes import abstract
from factmem.core.codes import DAY, HOUR, KIND_CODES, KINDS, OPEN, EndReason
from factmem.core.params import MemoryParams
from factmem.data.logs import Dataset, load
from factmem.engine import waves
from factmem.errors import InputError
from factmem.evaluation.arrays import session_starts
from factmem.evaluation.metrics import Evaluation, Evaluator
from factmem.store.factstore import FactStore

__all__ = ["Schedule", "PreparedLog", "prepare", "beliefs_from_store", "EncodedEvents", "encode_events",
    "kernel_beliefs", "kernel_belief_arrays", "SimulationResult", "simulate"]


@dataclass(frozen=True)
class Schedule:
    """When the replay consolidates, evaluates and abstracts (periods from the log's start)."""

    consolidate_every_hours: float = 24.0
    evaluate_every_hours: float = 24.0
    abstract_every_days: float | None = None

    def __post_init__(self) -> None:
        for name in ("consolidate_every_hours", "evaluate_every_hours"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not v > 0 or not np.isfinite(v):
                raise InputError(f"{name} must be a positive number of hours, got {v!r}")
        a = self.abstract_every_days
        if a is not None and (not isinstance(a, (int, float)) or not a > 0 or not np.isfinite(a)):
            raise InputError(f"abstract_every_days must be a positive number of days or None, got {a!r}")

    def consolidations(self, start: int, end: int) -> np.ndarray:
        return _capped_grid(start, end, int(round(self.consolidate_every_hours * HOUR)), "consolidations",
                            "consolidate_every_hours", "--consolidate-every HOURS")

    def checkpoints(self, start: int, end: int) -> np.ndarray:
        return _capped_grid(start, end, int(round(self.evaluate_every_hours * HOUR)), "checkpoints",
                            "evaluate_every_hours", "--evaluate-every HOURS")

    def abstractions(self, start: int, end: int) -> np.ndarray:
        if self.abstract_every_days is None:
            return np.zeros(0, np.int64)
        return _capped_grid(start, end, int(round(self.abstract_every_days * DAY)), "abstraction passes",
                            "abstract_every_days", "--abstract-every DAYS")

    def to_dict(self) -> dict:
        return asdict(self)


#: The most consolidations, checkpoints or abstraction passes a schedule may make over a log: beyond
#: this a run would spend its time and memory on the schedule, not the log (a daily schedule over
#: Wikidata's two thousand years is 730,000 consolidations).
MAX_SCHEDULE_POINTS = 100_000
#: The schedule of logs imported from temporal facts (``factmem import-triples``): bounds are years.
YEARLY_HOURS = 365 * 24.0


def _capped_grid(start: int, end: int, every: int, what: str, field: str, option: str) -> np.ndarray:
    if every <= 0:
        raise InputError(f"{field} must be at least one second, got {every} s")
    count = max(int(end) - int(start), 0) // every
    if count > MAX_SCHEDULE_POINTS:
        from factmem.core.timeutil import to_datetime

        span_days = (int(end) - int(start)) / DAY
        raise InputError(
            f"a schedule every {every / HOUR:g} h from {to_datetime(start):%Y-%m-%d} to {to_datetime(end):%Y-%m-%d} "
            f"({span_days:,.0f} days) would make {count:,} {what}, more than {MAX_SCHEDULE_POINTS:,}: choose a "
            f"longer period ({option}; Schedule({field}=...)) — a yearly one ({YEARLY_HOURS:g} h) suits historical "
            "data. If the span itself is wrong, look for a time in milliseconds in the log.")
    return waves.grid_between(start, end, every)


def default_schedule(dataset: Dataset | PreparedLog) -> Schedule:
    """The schedule used when none is given: daily, or yearly for a log imported from temporal facts
    (``factmem import-triples``: year-precision bounds over centuries)."""
    ds = dataset.dataset if isinstance(dataset, PreparedLog) else dataset
    if str(ds.scenario.get("generator", "")).endswith("importer"):
        return Schedule(consolidate_every_hours=YEARLY_HOURS, evaluate_every_hours=YEARLY_HOURS)
    return Schedule()


# -- the log, encoded once ---------------------------------------------------------------------------


@dataclass
class PreparedLog:
    """A dataset encoded for replay and scoring: triples as integer codes shared by truth, events
    and the memory's facts."""

    dataset: Dataset
    events: pd.DataFrame  # sorted by (ts, row order)
    triples: pd.MultiIndex
    ev_triple: np.ndarray
    truth: pd.DataFrame  # triple, kind, valid_from, valid_to, relevant_until (for metrics)
    mentions: pd.DataFrame  # triple, ts
    start: int
    end: int
    _evaluators: dict = field(default_factory=dict, repr=False)
    _extra: dict = field(default_factory=dict, repr=False)  # (s, p, o) the log never names -> code
    _sessions: list = field(default_factory=list, repr=False)  # session_starts() and what it read

    @property
    def sha256(self) -> str:
        return self.dataset.sha256

    def codes(self, subject, predicate, obj) -> np.ndarray:
        """Triple codes; triples the log never names (invented derived facts) get codes past the
        known ones, the same for the same triple across calls (:meth:`extra_triples` lists them)."""
        idx = pd.MultiIndex.from_arrays([np.asarray(subject, object), np.asarray(predicate, object),
                                         np.asarray(obj, object)])
        codes = self.triples.get_indexer(idx)
        unknown = np.flatnonzero(codes < 0)
        if unknown.size:
            new, uniq = pd.factorize(idx[unknown])  # in order of first appearance: deterministic
            assigned = np.empty(len(uniq), np.int64)
            for i, triple in enumerate(uniq):  # over distinct invented triples, not facts or events
                assigned[i] = self._extra.setdefault(triple, len(self.triples) + len(self._extra))
            codes[unknown] = assigned[new]
        return codes.astype(np.int64)

    def extra_triples(self) -> list[tuple[str, str, str]]:
        """The triples :meth:`codes` numbered past the log's own, in code order."""
        return list(self._extra)

    def session_starts(self) -> tuple[np.ndarray, pa.Array, np.ndarray]:
        """:func:`~factmem.evaluation.arrays.session_starts` of the mentions' sessions and the messages:
        each mention's session as a rank of the ids, the ids, each session's first message time.
        Computed once per log (each context evaluator built on it reads them; read-only arrays), again
        when its events or messages are other frames: a copy made with ``dataclasses.replace`` starts
        with the original's cache, and replaces it (never changes it) when its frames are others."""
        msg = self.dataset.messages
        if not (self._sessions and self._sessions[0] is self.events and self._sessions[1] is msg):
            ev_session, names, first = session_starts(self.events["session_id"], msg["session_id"], msg["ts"])
            ev_session.setflags(write=False)
            first.setflags(write=False)
            self._sessions = [self.events, msg, ev_session, names, first]
        _, _, ev_session, names, first = self._sessions
        return ev_session, names, first

    def evaluator(self, checkpoints: np.ndarray) -> Evaluator:
        key = (int(checkpoints[0]), int(checkpoints[-1]), len(checkpoints))
        if key not in self._evaluators:
            self._evaluators[key] = Evaluator(self.truth, self.mentions, checkpoints)
        return self._evaluators[key]


def prepare(log: PreparedLog | Dataset | str | os.PathLike) -> PreparedLog:
    """Load (if a path) and encode a dataset (a log already encoded is returned as it is: e.g. one
    rebuilt from a production file, :meth:`factmem.production.rebuild.ProductionLog.prepared`)."""
    if isinstance(log, PreparedLog):
        return log
    ds = log if isinstance(log, Dataset) else load(log)
    ev = ds.events
    if len(ev) and (np.diff(ev["ts"].to_numpy()) < 0).any():
        ev = ev.sort_values("ts", kind="stable").reset_index(drop=True)
    truth = ds.truth
    gen = ds.generalizations.drop_duplicates(["subject", "predicate", "object"])
    subj = np.concatenate([truth["subject"].to_numpy(object), gen["subject"].to_numpy(object), ev["subject"].to_numpy(object)])
    pred = np.concatenate([truth["predicate"].to_numpy(object), gen["predicate"].to_numpy(object), ev["predicate"].to_numpy(object)])
    obj = np.concatenate([truth["object"].to_numpy(object), gen["object"].to_numpy(object), ev["object"].to_numpy(object)])
    codes, triples = pd.MultiIndex.from_arrays([subj, pred, obj]).factorize()
    codes = codes.astype(np.int64)
    nt, ng = len(truth), len(gen)
    start, end = int(ds.start), int(ds.end)
    kinds = pd.Series(KIND_CODES)
    truth_m = pd.DataFrame({
        "triple": codes[:nt],
        "kind": truth["kind"].map(kinds).to_numpy(np.int64),
        "valid_from": truth["valid_from"].to_numpy(np.int64),
        "valid_to": truth["valid_to"].astype("Int64"),
        "relevant_until": truth["relevant_until"].astype("Int64"),
    })
    # the planted generalizations hold all through the log: derived facts matching them are true
    gen_m = pd.DataFrame({
        "triple": codes[nt:nt + ng], "kind": np.full(ng, KIND_CODES["derived"]),
        "valid_from": np.full(ng, min(start, int(truth["valid_from"].min()) if nt else start), np.int64),
        "valid_to": pd.array([pd.NA] * ng, dtype="Int64"), "relevant_until": pd.array([pd.NA] * ng, dtype="Int64"),
    })
    ev_triple = codes[nt + ng:]
    return PreparedLog(
        dataset=ds, events=ev, triples=triples, ev_triple=ev_triple,
        truth=pd.concat([truth_m, gen_m], ignore_index=True),
        mentions=pd.DataFrame({"triple": ev_triple, "ts": ev["ts"].to_numpy(np.int64)}),
        start=start, end=end,
    )


# -- belief states ----------------------------------------------------------------------------------


def beliefs_from_store(store: FactStore, prepared: PreparedLog) -> pd.DataFrame:
    """The memory's belief states, rebuilt from the store's evidence log: one row per observation
    (the confidence it left) until the next observation of the same fact or the fact's status change."""
    facts = store.facts(at=0)
    ev = store.evidence()
    ev = ev[ev["confidence"].notna()]
    f = facts.set_index("id")
    fid = ev["fact_id"].to_numpy(np.int64)
    order = np.lexsort((ev["id"].to_numpy(), ev["observed_at"].to_numpy(), fid))
    fid, obs, conf = fid[order], ev["observed_at"].to_numpy(np.int64)[order], ev["confidence"].to_numpy(float)[order]
    nxt_same = np.zeros(len(fid), bool)
    nxt_same[:-1] = fid[1:] == fid[:-1]
    end = np.full(len(fid), OPEN, np.int64)
    reason = np.full(len(fid), EndReason.OPEN, np.int64)
    end[:-1] = np.where(nxt_same[:-1], obs[1:], OPEN)
    reason[nxt_same] = EndReason.REINFORCED
    last = ~nxt_same
    fr = f.reindex(fid)  # each observation's fact
    status = fr["status"].to_numpy(object)
    changed = fr["status_changed_at"].to_numpy(dtype="float64")
    why = fr["status_reason"].to_numpy(object)
    gone = last & (status != "active")
    end[gone] = changed[gone].astype(np.int64)
    reason[gone & (status == "superseded")] = EndReason.SUPERSEDED
    reason[gone & (status == "archived") & (why == "pruned")] = EndReason.PRUNED
    reason[gone & (status == "archived") & (why != "pruned")] = EndReason.ARCHIVED
    return pd.DataFrame({
        "triple": prepared.codes(fr["subject"], fr["predicate"], fr["object"]),
        "kind": fr["kind"].map(pd.Series(KIND_CODES)).to_numpy(np.int64), "start": obs, "end": end,
        "reason": reason, "confidence": conf, "rate": fr["decay_rate"].to_numpy(float), "fact": fid,
    })


@dataclass
class EncodedEvents:
    """Events sorted by key (per a set of multi-valued predicates) for the kernel."""

    key: np.ndarray
    obj: np.ndarray
    ts: np.ndarray
    kind: np.ndarray
    triple: np.ndarray
    n_keys: int
    predicate: np.ndarray | None = None  # position in predicate_names (per-predicate decay rates)
    predicate_names: tuple[str, ...] = ()


def kind_codes(kinds: pd.Series) -> np.ndarray:
    """The integer code (:data:`~factmem.core.codes.KIND_CODES`, int8) of each kind name: the distinct
    names looked up once (a ``Series.map`` of a million strings cost 0.65 s, this 0.04 s)."""
    codes, names = pd.factorize(kinds)
    unknown = [str(k) for k in names if k not in KIND_CODES]
    if unknown or (codes < 0).any():
        raise InputError(f"unknown fact kind(s): {', '.join(unknown) or 'missing'} (known: {', '.join(KINDS)})")
    return np.array([KIND_CODES[k] for k in names], np.int8)[codes]


def encode_events(prepared: PreparedLog, multi_valued: Iterable[str]) -> EncodedEvents:
    ev = prepared.events
    s, _ = pd.factorize(ev["subject"])
    p, p_u = pd.factorize(ev["predicate"])
    o, _ = pd.factorize(ev["object"])
    multi = np.isin(np.asarray(p_u, object), list(multi_valued))[p]
    sp, _ = pd.factorize(s.astype(np.int64) * (p.max(initial=0) + 1) + p)
    kraw = sp.astype(np.int64) * (o.max(initial=0) + 2) + np.where(multi, o + 1, 0)
    key, ku = pd.factorize(kraw)
    order = np.argsort(key, kind="stable")  # events are in (ts, row) order already
    return EncodedEvents(key=key[order].astype(np.int64), obj=o[order].astype(np.int64),
                         ts=ev["ts"].to_numpy(np.int64)[order],
                         kind=kind_codes(ev["kind"])[order],
                         triple=prepared.ev_triple[order], n_keys=len(ku),
                         predicate=p[order].astype(np.int64), predicate_names=tuple(str(x) for x in p_u))


def kernel_beliefs(prepared: PreparedLog, params: Sequence[MemoryParams], grid: np.ndarray,
                   encoded: EncodedEvents | None = None) -> list[pd.DataFrame]:
    """Belief states of each parameter set (all sharing one set of multi-valued predicates),
    computed together by the vectorized kernel; equal to what :func:`simulate` reads from a store."""
    return [pd.DataFrame(b) for b in kernel_belief_arrays(prepared, params, grid, encoded)]


def kernel_belief_arrays(prepared: PreparedLog, params: Sequence[MemoryParams], grid: np.ndarray,
                         encoded: EncodedEvents | None = None) -> list[dict[str, np.ndarray]]:
    """:func:`kernel_beliefs` as plain columns (what the scorers read), without building DataFrames:
    the rows' triple and start are shared by every parameter set, the rest are views."""
    mvps = {p.multi_valued_predicates for p in params}
    if len(mvps) != 1:
        raise InputError("kernel_beliefs takes parameter sets that share multi_valued_predicates")
    enc = encoded or encode_events(prepared, next(iter(mvps)))
    res = waves.replay_waves(enc.key, enc.obj, enc.ts, enc.kind, enc.n_keys, waves.ParamArrays.of(params), grid,
                             horizon=int(grid[-1]) if len(grid) else None, predicate=enc.predicate,
                             predicate_names=enc.predicate_names)
    out = []
    triple, start = enc.triple[res.event], enc.ts[res.event]  # rows come in the kernel's wave order
    kind = enc.kind.astype(np.int64)
    for j in range(len(params)):
        origin = res.origin[j]
        out.append({
            "triple": triple, "kind": kind[origin], "start": start, "end": res.end[j],
            "reason": res.reason[j].astype(np.int64), "confidence": res.conf[j], "rate": res.rate[j], "fact": origin,
        })
    return out


# -- the store-driven simulation -----------------------------------------------------------------------


@dataclass
class SimulationResult:
    """What a replay did and how it scored. ``store`` holds the final memory (close it when done)."""

    params: MemoryParams
    schedule: Schedule
    dataset_sha256: str
    evaluation: Evaluation
    store: FactStore
    beliefs: pd.DataFrame
    passes: pd.DataFrame
    trajectories: pd.DataFrame
    cardinality: pd.DataFrame

    @property
    def checkpoints(self) -> pd.DataFrame:
        return self.evaluation.checkpoints

    @property
    def summary(self) -> dict:
        return self.evaluation.summary

    def to_dict(self) -> dict:
        return {"params": self.params.to_dict(), "schedule": self.schedule.to_dict(),
                "dataset_sha256": self.dataset_sha256, "summary": self.summary}


def simulate(log: Dataset | PreparedLog | str | os.PathLike, params: MemoryParams | None = None,
             schedule: Schedule | None = None, *, store_path: str | os.PathLike | None = None,
             provider: Any = None, model: str | None = None, track: Sequence[tuple] | int = 6,
             checkpoints: np.ndarray | None = None, quiet: bool = True,
             progress: bool = False) -> SimulationResult:
    """Replay ``log`` through a FactStore with ``params`` on ``schedule`` and score it.

    ``schedule`` defaults to :func:`default_schedule` (daily; yearly for imported temporal facts); a
    schedule of more than :data:`MAX_SCHEDULE_POINTS` consolidations or checkpoints is refused.

    ``provider`` (with ``schedule.abstract_every_days``): the abstraction pass runs at those times
    (after that time's consolidation). ``track``: (subject, predicate[, object]) tuples whose facts'
    confidence trajectories to return, or how many to pick automatically (the most reinforced fact of
    each kind, then the next). ``checkpoints``: evaluation times (default: the schedule's).
    ``progress``: a tqdm bar over the mentions replayed (it advances once per abstraction pass, with
    the passes done as its postfix; a widget in Jupyter). ``quiet=False`` adds each pass's own bar.
    """
    prepared = log if isinstance(log, PreparedLog) else prepare(log)
    params = params or MemoryParams()
    schedule = schedule or default_schedule(prepared)
    if schedule.abstract_every_days is not None and provider is None:
        raise InputError("schedule.abstract_every_days needs a provider (e.g. factmem.abstraction.providers.OracleProvider)")
    start, end = prepared.start, prepared.end
    grid = schedule.consolidations(start, end)
    cps = schedule.checkpoints(start, end) if checkpoints is None else np.asarray(checkpoints, np.int64)
    if len(cps) == 0:
        raise InputError(f"the log spans {(end - start) / HOUR:.1f} h, less than one evaluation period "
                         f"({schedule.evaluate_every_hours} h)")
    if store_path is not None and os.path.exists(store_path):
        raise InputError(f"{store_path}: already exists; a simulation replays the log into an empty store "
                         "(replaying it again would double its evidence) — remove it or choose another path")
    store = FactStore(store_path, params=params)
    events = prepared.events
    passes = []
    times = schedule.abstractions(start, end)
    ts = events["ts"].to_numpy()
    prev = None
    bar = tqdm(total=len(ts), desc="simulate", unit="mention", unit_scale=True, disable=not progress)
    for a in list(times) + [None]:  # one iteration per abstraction pass
        lo = 0 if prev is None else int(np.searchsorted(ts, prev, "left"))
        hi = len(ts) if a is None else int(np.searchsorted(ts, a, "left"))
        g = grid[(grid > (prev if prev is not None else np.iinfo(np.int64).min)) &
                 (grid <= (a if a is not None else np.iinfo(np.int64).max))]
        if hi > lo or len(g):
            store.replay(events.iloc[lo:hi], g)
        bar.update(hi - lo)
        if a is not None:
            before = _believed(store, a)
            r = abstract(store, provider, model=model, at=int(a), quiet=quiet)
            row = {"at": int(a), **r.counters(), "believed_before": before, "believed_after": _believed(store, a)}
            passes.append(row)
            bar.set_postfix(passes=len(passes), refresh=False)
            prev = a
    bar.close()
    beliefs = beliefs_from_store(store, prepared)
    evaluation = prepared.evaluator(cps).score(beliefs, params.retrieval_threshold)
    from factmem.evaluation.cardinality import supersession_costs

    return SimulationResult(
        params=params, schedule=schedule, dataset_sha256=prepared.sha256, evaluation=evaluation, store=store,
        beliefs=beliefs, passes=pd.DataFrame(passes),
        trajectories=_trajectories(store, track, start, end, cps),
        cardinality=supersession_costs(store.facts(at=0), prepared.dataset.truth, params.multi_valued_predicates),
    )


def _believed(store: FactStore, at: int) -> int:
    f = store.facts(at=at, status="active")
    return int((f["effective_confidence"] >= store.params.retrieval_threshold).sum())


def _trajectories(store: FactStore, track, start: int, end: int, cps: np.ndarray) -> pd.DataFrame:
    facts = store.facts(at=end)
    if isinstance(track, int):
        ids: list[int] = []
        ranked = facts.sort_values(["reinforcement_count", "id"], ascending=[False, True])
        per_kind = [ranked[ranked["kind"] == k]["id"].tolist() for k in KINDS]
        i = 0
        while len(ids) < track and any(i < len(x) for x in per_kind):
            ids += [x[i] for x in per_kind if i < len(x)]
            i += 1
        ids = ids[:track]
    else:
        want = pd.DataFrame([tuple(t) + (None,) * (3 - len(t)) for t in track],
                            columns=["subject", "predicate", "object"])
        m = facts.merge(want, on=["subject", "predicate"], suffixes=("", "_want"))
        m = m[m["object_want"].isna() | (m["object"] == m["object_want"])]
        ids = m["id"].tolist()
    step = int(cps[1] - cps[0]) if len(cps) > 1 else DAY
    if not ids:
        return store.trajectories([], start, end, step)
    return store.trajectories(ids, start, end, max(step, 3600))

"""Ground-truth metrics and calibration of a memory's beliefs over time.

Ground floor: numpy and pandas only. The simulator (a FactStore replay) and the sweep (the
vectorized kernel) both describe what the memory held as **belief states** — one row per stretch
of time during which a fact kept one stored confidence:

=============  ============================================================================
``triple``     integer code of (subject, predicate, object), shared with the truth table
``kind``       kind code of the fact (0 explicit, 1 user_preference, 2 episodic, 3 derived)
``start``      when the state began (the observation; ``last_reinforced``), Unix seconds
``end``        when it ended (next observation, supersession, archival) or ``OPEN``
``reason``     why it ended: 0 reinforced, 1 superseded, 2 archived by decay, 3 still open,
               4 archived by pruning
``confidence`` stored confidence during the state; ``rate``: decay rate per day
=============  ============================================================================

A checkpoint at time ``t`` sees every event with ``ts < t`` and every consolidation at ``T <= t``;
so a state is *held* at ``t`` when ``start < t`` and ``t <= end`` (ended by an event at ``end``) or
``t < end`` (archived at ``end``). It is *believed* when held with effective confidence
``confidence * exp(-rate * (t - start) / 86400) >= retrieval_threshold``.

Against the truth (per triple, intervals where it is **true and relevant**: ``valid_from`` up to
``valid_to``, and for episodic facts no later than ``relevant_until``; rows of one triple that
overlap make one interval, rows that only touch stay two — see :func:`true_intervals`):

* **precision**: believed and true / believed; **recall**: believed and needed / needed, where
  *needed* means true and relevant at ``t`` and mentioned since it became true, before ``t``;
* **stale**: believed, no longer true and relevant, though it was (the world changed, memory did not);
* **lost** (forgetting regret): archived while still true and relevant, and mentioned again later
  within the same truth interval — the conversation needed it back (cumulative, with the list). A
  mention at the archival instant is later: a consolidation at ``T`` runs before the events at ``T``;
* **calibration**, reading effective confidence as the probability that the triple is true and
  relevant at ``t``, over every triple mentioned before ``t``: a held triple predicts its effective
  confidence, one not held (archived, superseded) predicts 0. Probabilities are clipped to
  ``[eps, 1 - eps]`` (eps = 1e-4) so forgetting a true fact costs ``-ln(eps)`` = 9.2 nats. Log loss,
  Brier and AUC over all of them; RMSE(bins) over held states binned by kind × age since the last
  reinforcement; reliability bins over held states.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from factmem.core.codes import KINDS, OPEN, SECONDS_PER_DAY, EndReason
from factmem.core.timeutil import even_step, grid_index
from factmem.errors import InputError
from factmem.evaluation.arrays import cover_count
from factmem.evaluation.auc import auc_of_sorted, weighted_auc
from factmem.evaluation.metrics_kernels import (
    believed_until,
    by_label_and_kind,
    calibration_pass,
    coverage,
    held_until,
    merge_runs,
)

__all__ = ["EPS", "AGE_EDGES_DAYS", "BELIEF_COLUMNS", "CALIBRATION_METRICS", "packed_order", "settle_ties", "canonical_order", "true_intervals", "weighted_auc",
           "Evaluation", "Evaluator"]

EPS = 1e-4
AGE_EDGES_DAYS = np.array([0, 1, 3, 7, 14, 30, 60, 120, np.inf])

BELIEF_COLUMNS = ("triple", "kind", "start", "end", "reason", "confidence", "rate")
#: the summary entries of the calibration metrics (``score_parts(..., calibration=False)`` skips them)
CALIBRATION_METRICS = ("log_loss", "brier", "auc", "rmse_bins", "held_log_loss")



def packed_order(packed: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A stable argsort of int64 keys, before its ties are ordered: (the argsort, the positions in it of
    rows whose key is shared, and a run number for each of those positions) — what does not depend on
    the tie keys. :func:`settle_ties` then orders each run; together they give the order of a lexsort
    on (tie keys, then the packed key), sorting only the tied rows by the extra keys."""
    order = np.argsort(packed, kind="stable")
    ps = packed[order]
    dup = np.flatnonzero(ps[1:] == ps[:-1])
    if not dup.size:
        return order, np.zeros(0, np.int64), np.zeros(0, np.int64)
    pos = np.unique(np.concatenate([dup, dup + 1]))  # positions in runs of equal keys
    return order, pos, np.searchsorted(ps[pos], ps[pos], "left")


def settle_ties(order: np.ndarray, pos: np.ndarray, group: np.ndarray, tiebreak) -> np.ndarray:
    """``order`` (from :func:`packed_order`) with each run of equal keys ordered by ``tiebreak(rows)``
    (keys as for :func:`numpy.lexsort`, given the rows' indices); a new array, ``order`` is unchanged."""
    if not pos.size:
        return order
    out = order.copy()
    rows = order[pos]  # ascending within each run (stable)
    out[pos] = rows[np.lexsort(tuple(tiebreak(rows)) + (group,))]
    return out


def canonical_order(subject: np.ndarray, local: np.ndarray, start: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An order of belief states that depends only on their contents — by subject, start, ``local``
    (the triple's rank among its subject's), then end, confidence, rate — before its ties: as
    :func:`~factmem.evaluation.metrics.packed_order` returns it, for
    :func:`~factmem.evaluation.metrics.settle_ties` with the tie keys (rate, confidence, end). One int64
    key when it fits; equal (subject, start, triple) — zero-length states — are the ties."""
    n = len(subject)
    if not n:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    s0 = int(start.min())
    span = int(start.max()) - s0 + 1
    width = int(local.max()) + 1
    if (int(subject.max()) + 1) * span * width < 2**62:
        return packed_order((subject * span + (start - s0)) * width + local)
    # too wide to pack: rank (subject, start, local) by a lexsort, then the ranks are the packed key
    order = np.lexsort((local, start, subject))
    keys = np.stack([subject[order], start[order], local[order]])
    new = np.ones(n, bool)
    new[1:] = (keys[:, 1:] != keys[:, :-1]).any(axis=0)
    rank = np.empty(n, np.int64)
    rank[order] = np.cumsum(new) - 1
    return packed_order(rank)


@dataclass
class Evaluation:
    """The scores of one run: per checkpoint, a summary row, reliability bins, and the lost facts."""

    checkpoints: pd.DataFrame
    summary: dict
    reliability: pd.DataFrame
    lost: pd.DataFrame
    calibration_by_kind: pd.DataFrame = field(default_factory=pd.DataFrame)


@dataclass
class _SharedRows:
    """What scoring a parameter set computes from its rows' triple and start only (see
    ``Evaluator._shared_rows``): the canonical order before ties, the sorted triple and start, each
    state's first checkpoint, its (state, truth row) pairs and its triple's earliest end."""

    triple_in: Any
    start_in: Any
    order: np.ndarray
    pos: np.ndarray
    group: np.ndarray
    triple: np.ndarray
    start: np.ndarray
    first_held: np.ndarray
    pair_state: np.ndarray
    pair_truth: np.ndarray
    earliest_end: np.ndarray
    #: per part: calibration's inputs that depend on the rows and the part alone (``Evaluator._calibration_rows``)
    calibration: dict = field(default_factory=dict)


class Evaluator:
    """Scores belief states against ground truth at checkpoints.

    Everything that does not depend on the memory's parameters (truth intervals, what is needed
    when, mentions) is prepared once, so that scoring many parameter sets is cheap.

    ``truth``: columns triple, kind (code), valid_from, valid_to, relevant_until (``OPEN`` or NA for
    none). ``mentions``: columns triple, ts (every mention). ``checkpoints``: sorted Unix seconds.
    ``max_samples``: calibration scores every fact mentioned so far at each checkpoint; when that
    population, summed over a part's checkpoints, is larger, it scores every k-th checkpoint
    (``k = ceil(population / max_samples)``, counting from the part's last; reported as
    ``calibration_stride``). The population does not depend on the memory, so every parameter set
    is scored on the same checkpoints — a fixed sample, shared across the sets of a sweep.
    """

    def __init__(self, truth: pd.DataFrame, mentions: pd.DataFrame, checkpoints: Sequence[int] | np.ndarray, *,
                 eps: float = EPS, max_samples: int = 2_000_000):
        self.cp = np.asarray(checkpoints, dtype=np.int64)
        self._cp_step = even_step(self.cp)  # (0: not evenly spaced)
        if self.cp.ndim != 1 or self.cp.size == 0 or (np.diff(self.cp) <= 0).any():
            raise InputError("checkpoints must be a non-empty, strictly increasing sequence of Unix seconds")
        for name, df, cols in (("truth", truth, ("triple", "kind", "valid_from", "valid_to", "relevant_until")),
                               ("mentions", mentions, ("triple", "ts"))):
            missing = [c for c in cols if c not in df.columns]
            if missing:
                raise InputError(f"{name} lacks column {missing[0]!r}")
        self.eps = float(eps)
        self.max_samples = int(max_samples)
        self._shared: _SharedRows | None = None
        n = len(self.cp)

        def as_end(col) -> np.ndarray:
            return pd.array(col, dtype="Int64").fillna(OPEN).to_numpy(dtype=np.int64)

        t = truth.sort_values(["triple", "valid_from"], kind="stable")
        rows_triple, rows_kind = t["triple"].to_numpy(np.int64), t["kind"].to_numpy(np.int64)
        # the stretches of truth (rows of one triple that overlap joined; never-true rows dropped)
        self.t_triple, self.t_from, self.t_end = true_intervals(
            rows_triple, t["valid_from"].to_numpy(np.int64),
            np.minimum(as_end(t["valid_to"]), as_end(t["relevant_until"])))  # true and relevant until
        self.t_from_k = np.searchsorted(self.cp, self.t_from, "left")
        self.t_end_k = np.searchsorted(self.cp, self.t_end, "left")

        m = mentions.sort_values(["triple", "ts"], kind="stable")
        self.m_triple = m["triple"].to_numpy(np.int64)
        self.m_ts = m["ts"].to_numpy(np.int64)
        n_tr = int(max(rows_triple.max(initial=-1), self.m_triple.max(initial=-1))) + 1
        self.n_triples = n_tr

        # first mention of each triple, and the first mention inside each truth interval
        first_any = np.full(n_tr, OPEN, np.int64)
        np.minimum.at(first_any, self.m_triple, self.m_ts)
        self.first_mention = first_any
        # (triple, ts) packed into one sortable int64 so "next mention after" is one searchsorted
        self._m_base = int(self.m_ts.min(initial=0))
        self._m_span = int(self.m_ts.max(initial=0)) - self._m_base + 2
        self._m_key = self.m_triple * self._m_span + (self.m_ts - self._m_base + 1)
        mentioned_at = self._next_mention(self.t_triple, self.t_from - 1)
        mentioned_at = np.where(mentioned_at < self.t_end, mentioned_at, OPEN)
        self.t_needed_k = np.where(mentioned_at == OPEN, n,
                                   np.searchsorted(self.cp, np.where(mentioned_at == OPEN, 0, mentioned_at + 1), "left"))
        self.needed = cover_count(n, self.t_needed_k, self.t_end_k)

        # earliest end of a (non-empty) true-and-relevant interval, per triple, for "stale": a
        # misstatement was never true, so believing it is wrong but not stale
        min_end = np.full(n_tr, OPEN, np.int64)
        real = self.t_end > self.t_from
        np.minimum.at(min_end, self.t_triple[real], self.t_end[real])
        self.min_end_k = np.searchsorted(self.cp, min_end, "left")

        # calibration population: triples mentioned before t, and of them the true-and-relevant ones
        self.kind_of_triple = np.full(n_tr, -1, np.int64)
        self.kind_of_triple[rows_triple] = rows_kind  # never-true rows too: a misstatement has a kind
        self.t_kind = self.kind_of_triple[self.t_triple]
        mentioned_k = np.searchsorted(self.cp, np.where(first_any == OPEN, 0, first_any + 1), "left")
        mentioned_k = np.where(first_any == OPEN, n, mentioned_k)
        triple_first_mention = first_any[self.t_triple]
        self._mentioned_true_k = np.maximum(self.t_from_k,
                                            np.where(triple_first_mention == OPEN, n, mentioned_k[self.t_triple]))
        # per checkpoint (all, then by kind): triples mentioned so far, and those of them true then;
        # they do not depend on the memory's parameters, so they are counted once here
        self._mentioned = cover_count(n, mentioned_k, np.full(n_tr, n)) if n_tr else np.zeros(n)
        self._mentioned_true = cover_count(n, self._mentioned_true_k, self.t_end_k)
        self._mentioned_by_kind, self._mentioned_true_by_kind = [], []
        for k in range(len(KINDS)):
            trip_k = self.kind_of_triple == k
            tk = self.t_kind == k
            self._mentioned_by_kind.append(cover_count(n, mentioned_k[trip_k], np.full(int(trip_k.sum()), n)))
            self._mentioned_true_by_kind.append(cover_count(n, self._mentioned_true_k[tk], self.t_end_k[tk]))

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_shared": None}  # a cache of one run's rows: not worth shipping

    def _next_mention(self, triple: np.ndarray, after: np.ndarray) -> np.ndarray:
        """First mention of ``triple`` strictly after ``after`` (OPEN if none)."""
        if self.m_ts.size == 0:
            return np.full(len(triple), OPEN, np.int64)
        after = np.clip(np.asarray(after, np.int64), self._m_base - 1, self._m_base + self._m_span - 2)
        q = triple * self._m_span + (after - self._m_base + 1)
        pos = np.searchsorted(self._m_key, q, side="right")
        ok = pos < len(self.m_ts)
        pos_c = np.minimum(pos, len(self.m_ts) - 1)
        hit = ok & (self.m_triple[pos_c] == triple) & (self.m_ts[pos_c] > after)
        return np.where(hit, self.m_ts[pos_c], OPEN)

    # -- scoring -----------------------------------------------------------------------------------

    def score(self, beliefs: pd.DataFrame | dict, retrieval_threshold: float) -> Evaluation:
        """Score belief states at every checkpoint."""
        return self.score_parts(beliefs, retrieval_threshold, {"all": (0, len(self.cp))})["all"]

    def score_parts(self, beliefs: pd.DataFrame | dict, retrieval_threshold: float,
                    parts: dict[str, tuple[int, int]], *, calibration: bool = True) -> dict[str, Evaluation]:
        """Score belief states on several contiguous ranges of checkpoints (index ``[a, b)``), e.g. a
        tuning part and a held-out part, sharing the work that does not depend on the range. Each
        part's scores equal those of an Evaluator built on that part's checkpoints alone.

        ``calibration=False`` skips the calibration metrics (most of the cost): their summary entries
        (:data:`CALIBRATION_METRICS`), ``samples`` and ``calibration_stride`` are NaN, as is the per-checkpoint ``log_loss``,
        and the reliability and per-kind tables are empty."""
        b = {c: np.asarray(beliefs[c]) for c in BELIEF_COLUMNS}
        # a canonical order, so that sums (and so the scores) do not depend on how rows came in:
        # by (triple, start) packed in one int64, and by end where those tie. Parameter sets replayed
        # together share their rows' triple and start (the same arrays): what depends on those alone
        # is computed for the first set and reused (:class:`_SharedRows`).
        shared = self._shared_rows(beliefs, b)
        cp, n = self.cp, len(self.cp)
        if shared is not None:
            order = settle_ties(shared.order, shared.pos, shared.group, lambda rows: (b["end"][rows],))
            triple, start, first_held = shared.triple, shared.start, shared.first_held
            pair_state, pair_truth, earliest_end = shared.pair_state, shared.pair_truth, shared.earliest_end
        else:
            tri, st = b["triple"].astype(np.int64), b["start"].astype(np.int64)
            order = np.lexsort((b["end"], st, tri))
            triple, start = tri[order], st[order]
            first_held = grid_index(cp, start + 1, "left")
            pair_state, pair_truth = self._pairs(triple)
            # triples past the log's own (derived facts the log never names, e.g. invented by a
            # model) were never true, never needed and never mentioned
            earliest_end = _lookup(self.min_end_k, triple, n)
        # (gathered, then converted only where the type differs: astype copies a million rows again otherwise)
        end, reason = b["end"][order].astype(np.int64, copy=False), b["reason"][order].astype(np.int64, copy=False)
        conf, rate = b["confidence"][order].astype(float, copy=False), b["rate"][order].astype(float, copy=False)
        kind = b["kind"][order].astype(np.int64, copy=False)
        end_held = held_until(end, reason, cp, self._cp_step, OPEN, int(EndReason.REINFORCED),
                              int(EndReason.SUPERSEDED))  # (an event at `end` is seen only after `end`)
        end_believed = self._believed_until(conf, rate, start, first_held, end_held, retrieval_threshold)

        # per checkpoint: believed, and of it true, needed, stale — pairs (state, truth row) of the same
        # triple: pair_state, pair_truth (one compiled pass over states and pairs)
        believed, true_believed, hit_needed, stale = coverage(
            n, *(np.asarray(a, np.int64) for a in (first_held, end_believed, earliest_end, pair_state, pair_truth,
                                                    self.t_from_k, self.t_end_k, self.t_needed_k)))
        lost_all = self._lost(triple, kind, start, end, reason)
        lost_at = lost_all["archived_at"].to_numpy(np.int64)
        with np.errstate(invalid="ignore", divide="ignore"):
            precision = np.where(believed > 0, true_believed / np.maximum(believed, 1), np.nan)
            recall = np.where(self.needed > 0, hit_needed / np.maximum(self.needed, 1), np.nan)

        out = {}
        for name, (part_start, part_end) in parts.items():
            if not 0 <= part_start < part_end <= n:
                raise InputError(f"part {name!r}: checkpoint range [{part_start}, {part_end}) is empty or outside 0..{n}")
            window = slice(part_start, part_end)
            part_cp = cp[window]
            # lost facts archived in the part's window: from one checkpoint period before its first
            step = int(part_cp[1] - part_cp[0]) if len(part_cp) > 1 else int(SECONDS_PER_DAY)
            in_win = (lost_at > part_cp[0] - step) & (lost_at <= part_cp[-1])
            lost = lost_all[in_win].reset_index(drop=True)
            lost_cum = np.searchsorted(np.sort(lost_at[in_win]), part_cp, "right")
            ckpt = pd.DataFrame({
                "t": part_cp, "believed": believed[window].astype(np.int64),
                "true_believed": true_believed[window].astype(np.int64),
                "needed": self.needed[window].astype(np.int64), "precision": precision[window],
                "recall": recall[window],
                "stale": stale[window].astype(np.int64), "lost": lost_cum.astype(np.int64),
            })
            cal = self._calibration(shared, triple, kind, start, conf, rate, first_held, end_held, pair_state,
                                    pair_truth, (part_start, part_end)) if calibration else _no_calibration(n)
            ckpt["log_loss"] = cal.pop("per_checkpoint")[window]
            pr, rc = precision[window], recall[window]
            summary = {
                "precision": float(np.nanmean(pr)) if np.isfinite(pr).any() else float("nan"),
                "recall": float(np.nanmean(rc)) if np.isfinite(rc).any() else float("nan"),
                "believed": float(believed[window].mean()),
                "needed": float(self.needed[window].mean()),
                "stale": float(stale[window].mean()),
                "lost": int(len(lost)),
                "final_believed": int(believed[part_end - 1]),
                "final_recall": float(recall[part_end - 1]),
            }
            summary.update(cal.pop("summary"))
            out[name] = Evaluation(ckpt, summary, cal.pop("reliability"), lost, cal.pop("by_kind"))
        return out

    def _shared_rows(self, beliefs: pd.DataFrame | dict, b: dict[str, np.ndarray]) -> _SharedRows | None:
        """The part of scoring that depends only on the rows' triple and start, for the arrays given
        (kept while the same arrays come again: belief arrays are not modified once made); None
        when the packed key would overflow (the caller sorts by a lexsort instead)."""
        tri_in, st_in = beliefs["triple"], beliefs["start"]
        hit = self._shared
        if hit is not None and hit.triple_in is tri_in and hit.start_in is st_in:
            return hit
        tri, st = b["triple"].astype(np.int64), b["start"].astype(np.int64)
        span = int(st.max(initial=0)) - int(st.min(initial=0)) + 1
        if not (len(st) and int(tri.max()) < (2 ** 62) // span):
            return None
        order, pos, group = packed_order(tri * span + (st - st.min(initial=0)))
        triple, start = tri[order], st[order]  # rows that tie share both: the tie order changes neither
        pair_state, pair_truth = self._pairs(triple)
        self._shared = _SharedRows(tri_in, st_in, order, pos, group, triple, start, grid_index(self.cp, start + 1, "left"),
                                   pair_state, pair_truth, _lookup(self.min_end_k, triple, len(self.cp)))
        return self._shared

    def _pairs(self, triple: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """All (state index, truth row) pairs that share a triple."""
        lo = np.searchsorted(self.t_triple, triple, "left")
        hi = np.searchsorted(self.t_triple, triple, "right")
        cnt = hi - lo
        pair_state = np.repeat(np.arange(len(triple)), cnt)
        offs = np.arange(cnt.sum()) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        return pair_state, np.repeat(lo, cnt) + offs

    def _believed_until(self, conf, rate, start, first_held, end_held, thr) -> np.ndarray:
        """Index one past the last checkpoint in [first_held, end_held) where the state is believed (effective
        confidence at least ``thr``; rates are >= 0, so the checkpoints it is believed at are a prefix)."""
        return believed_until(self.cp.astype(np.int64, copy=False), conf, rate, start,
                              first_held.astype(np.int64, copy=False), end_held.astype(np.int64, copy=False), float(thr),
                              float(SECONDS_PER_DAY))

    def _lost(self, triple, kind, start, end, reason) -> pd.DataFrame:
        arch = np.flatnonzero((reason == EndReason.ARCHIVED) | (reason == EndReason.PRUNED))
        cols = ["triple", "kind", "archived_at", "needed_again_at", "why"]
        if arch.size == 0:
            return pd.DataFrame({c: pd.Series(dtype=np.int64 if c != "why" else object) for c in cols})
        tr, at = triple[arch], end[arch]
        pair_state, pair_truth = self._pairs(tr)
        inside = (self.t_from[pair_truth] <= at[pair_state]) & (at[pair_state] < self.t_end[pair_truth])
        pair_state, pair_truth = pair_state[inside], pair_truth[inside]
        # mentioned again: at or after the archival (consolidate(T) runs before the events at T), but
        # not the state's own observation when it began at that instant
        began = start[arch][pair_state]
        nxt = self._next_mention(tr[pair_state], np.where(began < at[pair_state], at[pair_state] - 1, at[pair_state]))
        again = nxt < self.t_end[pair_truth]
        pair_state, nxt = pair_state[again], nxt[again]
        sel = arch[pair_state]
        return pd.DataFrame({
            "triple": triple[sel], "kind": kind[sel], "archived_at": end[sel], "needed_again_at": nxt,
            "why": np.where(reason[sel] == EndReason.PRUNED, "pruned", "decay"),
        }).sort_values(["archived_at", "triple"], kind="stable").reset_index(drop=True)

    def calibration_checkpoints(self, part: tuple[int, int]) -> tuple[np.ndarray, int]:
        """The checkpoints (indices) calibration scores in ``part`` (``[a, b)``), and their stride: every
        ``stride``-th checkpoint counting from the part's last, ``stride = ceil(population /
        max_samples)`` with the population the facts mentioned before each checkpoint, summed over
        the part's — the same for every parameter set."""
        a, b = part
        population = int(self._mentioned[a:b].sum())
        stride = max(1, -(-population // self.max_samples))
        return np.arange(b - 1, a - 1, -stride)[::-1], stride

    def _calibration_rows(self, shared: _SharedRows | None, triple, first_held, pair_state, pair_truth,
                          part: tuple[int, int]) -> tuple:
        """What calibration reads that depends on the rows' triple and start and the part alone (kept in
        ``shared`` for the sets that share them): the calibration checkpoints and stride, each state's
        first calibration rank, its run of (state, truth row) pairs, their truth rows' ranges of
        calibration ranks, its triple's first mention and kind."""
        if shared is not None and part in shared.calibration:
            return shared.calibration[part]
        cal_idx, stride = self.calibration_checkpoints(part)
        cal_first = grid_index(cal_idx, first_held, "left")
        # each state's (state, truth row) pairs: a contiguous run of pair_state (it is sorted by state)
        pair_start = np.searchsorted(pair_state, np.arange(len(triple) + 1), "left")
        truth_cal_first = grid_index(cal_idx, self.t_from_k[pair_truth], "left")
        truth_cal_end = grid_index(cal_idx, self.t_end_k[pair_truth], "left")
        rows = (cal_idx, stride, cal_first, pair_start, truth_cal_first, truth_cal_end,
                _lookup(self.first_mention, triple, OPEN), _lookup(self.kind_of_triple, triple, -1))
        if shared is not None:
            shared.calibration[part] = rows
        return rows

    def _calibration(self, shared: _SharedRows | None, triple, kind, start, conf, rate, first_held, end_held,
                     pair_state, pair_truth, part: tuple[int, int]) -> dict:
        n = len(self.cp)
        (cal_idx, stride, cal_first, pair_start, truth_cal_first, truth_cal_end, first_mention,
         triple_kind) = self._calibration_rows(shared, triple, first_held, pair_state, pair_truth, part)
        cal_end = grid_index(cal_idx, end_held, "left")  # [first_held, end_held) as calibration ranks
        if len(kind) and not (0 <= int(kind.min()) and int(kind.max()) < len(KINDS)):
            raise InputError(f"belief states: kind codes must lie in 0..{len(KINDS) - 1}, got {int(kind.min())}.."
                             f"{int(kind.max())}")
        # every held sample (state, calibration checkpoint) in one compiled pass: its prediction, label,
        # loss and the sums the metrics read (see metrics_kernels.calibration_pass)
        sums = calibration_pass(cal_first, cal_end, pair_start, truth_cal_first, truth_cal_end, self.cp[cal_idx],
                                 start, conf, rate, kind.astype(np.int64, copy=False), triple_kind, first_mention, self.eps,
                                 float(SECONDS_PER_DAY), AGE_EDGES_DAYS, len(KINDS), _RELIABILITY_BINS)
        (pc, group, ck_loss, ck_n, held_n, held_true, held_n_k, held_true_k, kind_sums, bins, rel, rel_all) = sums
        n_held = len(pc)
        # held positives and negatives sorted, per kind and over all kinds (group = 2 * kind + label): the
        # predictions laid out by (label, kind) in one compiled pass, each (label, kind) slice sorted in
        # place, then each label's sorted slices merged (one pass: sorting each label's block again cost as
        # much as the slices' sorts) — no masks, no index sort (an argsort of every prediction then a split
        # cost 3x the ten sorts of masked copies it replaced)
        n_kinds = len(KINDS)
        parts, bounds = by_label_and_kind(pc, group, n_kinds)
        for slot in range(2 * n_kinds):
            parts[bounds[slot]:bounds[slot + 1]].sort()
        neg_all, pos_all = merge_runs(parts, bounds[:n_kinds + 1]), merge_runs(parts, bounds[n_kinds:])
        by_kind = [(parts[bounds[n_kinds + k]:bounds[n_kinds + k + 1]], parts[bounds[k]:bounds[k + 1]])
                   for k in range(n_kinds)]

        # triples mentioned before t but not held predict 0 (clipped to eps); held triples never
        # mentioned (derived facts) join the population while held
        ment = self._mentioned[cal_idx]
        ment_true = self._mentioned_true[cal_idx]
        off_true = np.maximum(ment_true - held_true, 0)
        off_false = np.maximum(ment - held_n - off_true, 0)
        l1, l0 = -np.log(self.eps), -np.log1p(-self.eps)
        per_ck_loss = ck_loss + off_true * l1 + off_false * l0
        per_ck_n = ck_n + off_true + off_false
        per_checkpoint = np.full(n, np.nan)
        with np.errstate(invalid="ignore", divide="ignore"):
            per_checkpoint[cal_idx] = per_ck_loss / per_ck_n
        n_samples = per_ck_n.sum()
        rmse_bins = _RmseBins(*bins)
        n_unheld_true, n_unheld_false = off_true.sum(), off_false.sum()
        loss_total, brier_total = kind_sums[:, 1].sum(), kind_sums[:, 2].sum()
        summary: dict[str, Any] = {
            "log_loss": float(per_ck_loss.sum() / n_samples) if n_samples else float("nan"),
            "brier": float((brier_total + n_unheld_true * (1 - self.eps) ** 2 + n_unheld_false * self.eps ** 2)
                           / n_samples) if n_samples else float("nan"),
            "auc": auc_of_sorted(pos_all, neg_all, n_unheld_true, n_unheld_false, self.eps),
            "rmse_bins": rmse_bins.rmse() if n_held else float("nan"),
            "held_log_loss": float(loss_total / n_held) if n_held else float("nan"),
            "samples": int(n_samples),
            "calibration_stride": stride,
        }
        # by kind: held samples by the fact's kind, unheld by the triple's kind
        rows: list[dict[str, Any]] = []
        # the unheld of a kind are its mentioned triples less the held ones *of that triple kind* (a
        # fact's kind can differ from its triple's: a derived fact restating an observation, a
        # triple the truth does not know)
        for k, name in enumerate(KINDS):
            held_k, loss_k, brier_k = int(kind_sums[k, 0]), kind_sums[k, 1], kind_sums[k, 2]
            # unheld split by kind needs per-kind population counts
            mt_k = self._mentioned_true_by_kind[k][cal_idx]
            ment_k = self._mentioned_by_kind[k][cal_idx]
            hn, ht = held_n_k[k], held_true_k[k]
            ot = np.maximum(mt_k - ht, 0).sum()
            of = np.maximum(ment_k - hn - np.maximum(mt_k - ht, 0), 0).sum()
            nk = held_k + ot + of
            if nk == 0:
                continue
            rows.append({
                "kind": name, "samples": int(nk), "held": held_k,
                "log_loss": float((loss_k + ot * l1 + of * l0) / nk),
                "brier": float((brier_k + ot * (1 - self.eps) ** 2 + of * self.eps ** 2) / nk),
                "rmse_bins": rmse_bins.rmse(k) if held_k else float("nan"),
                "auc": auc_of_sorted(by_kind[k][0], by_kind[k][1], ot, of, self.eps),
            })
        by_kind_table = pd.DataFrame(rows)
        for r in rows:
            summary[f"log_loss.{r['kind']}"] = r["log_loss"]
        return {"per_checkpoint": per_checkpoint, "summary": summary, "by_kind": by_kind_table,
                "reliability": _reliability(rel, rel_all)}


_RELIABILITY_BINS = 10


def _no_calibration(n_checkpoints: int) -> dict:
    """What ``_calibration`` returns, when calibration is not scored."""
    summary: dict[str, Any] = {m: float("nan") for m in CALIBRATION_METRICS}
    summary.update(samples=float("nan"), calibration_stride=float("nan"))  # not scored, not "none"
    return {"per_checkpoint": np.full(n_checkpoints, np.nan), "summary": summary,
            "by_kind": pd.DataFrame(columns=["kind", "samples", "held", "log_loss", "brier", "rmse_bins", "auc"]),
            "reliability": pd.DataFrame(columns=["kind", "bin", "p_mean", "y_mean", "n"])}


def true_intervals(triple: np.ndarray, valid_from: np.ndarray, end: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The stretches ``[from, end)`` in which each triple is true and relevant, sorted by (triple,
    from), from truth rows (``end`` = the earlier of valid_to and relevant_until). Rows of one triple
    that overlap describe one stretch and are joined — imported truth has them (Wikidata12k: 1,337
    rows), and counting each would count the fact twice; rows that only touch stay apart (an episode
    that recurs becomes true again at its start); empty rows (never true) hold nothing."""
    real = end > valid_from
    triple, valid_from, end = triple[real], valid_from[real], end[real]
    order = np.lexsort((valid_from, triple))
    triple, valid_from, end = triple[order], valid_from[order], end[order]
    if not len(triple):
        return triple, valid_from, end
    # a row opens a new stretch unless it starts before the latest end of its triple's earlier rows
    latest = pd.Series(end).groupby(triple).cummax().to_numpy()
    opens = np.ones(len(triple), bool)
    opens[1:] = (triple[1:] != triple[:-1]) | (valid_from[1:] >= latest[:-1])
    first = np.flatnonzero(opens)
    return triple[first], valid_from[first], np.maximum.reduceat(end, first)


def _lookup(per_triple: np.ndarray, triple: np.ndarray, missing: int) -> np.ndarray:
    """``per_triple[triple]``, with ``missing`` for codes past the array (triples the log never names)."""
    inside = triple < len(per_triple)
    return np.where(inside, per_triple[np.where(inside, triple, 0)] if len(per_triple) else missing, missing)


class _RmseBins:
    """FSRS-style RMSE(bins): predictions grouped by kind × age bucket (:data:`AGE_EDGES_DAYS`), each
    bin weighted by its size — from the bins' counts and sums of predictions and labels (kind-major,
    as :func:`~factmem.evaluation.metrics_kernels.calibration_pass` counts them): the RMSE over all kinds and the RMSE of one kind (its
    bins only)."""

    def __init__(self, n: np.ndarray, p: np.ndarray, y: np.ndarray):
        self.n, self.p, self.y = n, p, y

    def rmse(self, kind: int | None = None) -> float:
        kind_bins = slice(None) if kind is None else slice(kind * len(AGE_EDGES_DAYS), (kind + 1) * len(AGE_EDGES_DAYS))
        bin_n = self.n[kind_bins]
        used = bin_n > 0
        if not used.any():
            return float("nan")
        mean_p, mean_y = self.p[kind_bins][used] / bin_n[used], self.y[kind_bins][used] / bin_n[used]
        return float(np.sqrt((bin_n[used] * (mean_p - mean_y) ** 2).sum() / bin_n[used].sum()))


def _reliability(by_kind: np.ndarray, overall: np.ndarray) -> pd.DataFrame:
    """Reliability-diagram bins over held states: mean predicted vs observed frequency, over all kinds
    and per kind, from the bins' (count, prediction sum, label sum) as :func:`~factmem.evaluation.metrics_kernels.calibration_pass`
    counts them (``overall``: 3 × bins; ``by_kind``: 3 × kinds × bins)."""
    cols = ["kind", "bin", "p_mean", "y_mean", "n"]
    n_bins = overall.shape[1]
    counts = [(overall[0], overall[1], overall[2])] + [(by_kind[0, i], by_kind[1, i], by_kind[2, i])
                                                        for i in range(len(KINDS))]
    frames = []
    for name, (bin_n, p_sum, y_sum) in zip(("all",) + tuple(KINDS), counts):
        bin_n = bin_n.astype(np.int64)
        if not bin_n.any():
            continue
        keep = bin_n > 0
        frames.append(pd.DataFrame({
            "kind": name, "bin": np.arange(n_bins)[keep],
            "p_mean": (p_sum / np.maximum(bin_n, 1))[keep],
            "y_mean": (y_sum / np.maximum(bin_n, 1))[keep],
            "n": bin_n[keep],
        }))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=cols)

"""Budgeted context metrics: what an agent with room for ``k`` facts about a person would see.

A production memory does not show the model everything it holds. Each time a conversation with a
person starts, it assembles a **context**: the top ``k`` of that subject's active facts by effective
confidence. These metrics score exactly that — which is what decides whether forgetting helps.

**Evaluation points.** One per (session, subject) of the log: the session's start ``t`` (its first
message), for every subject the session mentions facts about. The memory seen there is the one a
checkpoint at ``t`` sees (every event with ``ts < t``, every consolidation at ``T <= t``): the
session's own mentions are not in it yet. A log with many sessions may be sampled (at most
``max_points_per_subject`` per subject, seeded; the report says so).

**The context** at point ``e`` = (subject ``s``, time ``t``) for a parameter set: the subject's held
belief states (see :mod:`factmem.evaluation.metrics`) with effective confidence at ``t`` at least
``max(archive_threshold, retrieval_threshold)``, ranked by effective confidence (higher first), ties
broken by later ``last_reinforced``, then later ``first_seen``, then (predicate, object) in
lexicographic order; the first ``k`` of them — the rule of :mod:`factmem.core.context_rule`,
which ``FactStore.context`` and the Rust export apply too. :meth:`ContextEvaluator.contexts` lists
the contexts themselves.

**Needed** facts at ``e`` — two definitions:

* ``needed="truth"`` (when the log has ground truth): triples of ``s`` true and relevant at ``t`` and
  mentioned since they became true, before ``t`` (the recall population of the checkpoint metrics).
  Every other fact in the context is one of four kinds (:mod:`factmem.evaluation.charges`): *stale*
  (true before ``t``, not at ``t``: the world changed, the memory did not), *expired* (still true,
  past its ``relevant_until``: an episode that is over), *false* (never true up to ``t``: a
  misstatement or an extraction error), *unneeded* (true and never needed — truth's ``noise =
  irrelevant`` — or true and relevant but not mentioned since). "True at ``t``" reads truth's
  ``[valid_from, valid_to)``, "relevant" also ``relevant_until``; overlapping rows of a triple are one
  stretch.
* ``needed="next-session"`` (no truth needed, so it runs on real logs): the triples of ``s`` the
  session starting at ``t`` mentions — the facts the conversation turned out to need. A fact in the
  context is *stale* when the session mentions another object for its (subject, predicate) and the
  predicate is single-valued (and does not mention the fact's own object); every other unmentioned
  one is *unneeded*.
* the other no-truth proxies — ``next-3-sessions``, ``hindsight``, ``later-mention`` — look further
  into the log's future: :mod:`factmem.evaluation.proxies` defines them.

**Per point**, with ``N`` needed facts, ``H`` of them in the context, ``C`` facts in it and the charge
``S = Σ cost(kind) · count(kind)`` (``costs``, a :class:`~factmem.evaluation.charges.ChargeCosts`;
defaults stale 1, expired 1, false 1, unneeded 0): ``recall@k = H / N``, ``precision@k = H / C``
(points with ``C > 0``), ``utility@k = (H − S) / max(1, N)``. The population is the points with at
least one needed fact (a context assembled for a purpose); every average is over those points,
pooled over subjects (``sum over points / number of points``), so a subject weighs by its sessions.
Sums are kept per subject, so folds and bootstrap resamples over subjects are sums of rows.

>>> import numpy as np, pandas as pd
>>> from factmem.data.generate import generate
>>> from factmem.evaluation.simulate import prepare, kernel_beliefs
>>> from factmem.core.params import MemoryParams
>>> prepared = prepare(generate("tiny", seed=3))
>>> ctx = ContextEvaluator(prepared, budgets=(5, 20))
>>> p = MemoryParams()
>>> days = np.arange(prepared.start + 86400, prepared.end + 1, 86400)
>>> scores = ctx.score(kernel_beliefs(prepared, [p], days)[0], p)
>>> s = scores.summary(budget=20)
>>> 0 <= s["recall"] <= 1 and s["points"] > 0
True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa

from factmem.core.codes import OPEN, EndReason
from factmem.core.context_rule import context_order, context_tie_columns, ranks_within
from factmem.core.params import MemoryParams
from factmem.errors import InputError
from factmem.evaluation.arrays import (
    cover_count,
    group_min,
    lexicographic_rank,
    member,
    sorted_unique,
    triple_ranks,
)
from factmem.evaluation.charges import ChargeCosts
from factmem.evaluation.context_kernels import (
    NO_BREAKS,
    SLOTS,
    context_sums,
    next_breaks,
    pack_flags,
    stop_keys,
    truth_flags,
    varying_pairs,
)
from factmem.evaluation.context_scores import (
    FIELDS,
    NEEDED_MODES,
    ContextScores,
    Needed,
    context_threshold,
)
from factmem.evaluation.metrics import canonical_order, settle_ties, true_intervals
from factmem.evaluation.proxies import PointIndex, Proxy, kind_inputs, make_proxy
from factmem.evaluation.topk import context_top_k

if TYPE_CHECKING:
    from factmem.evaluation.simulate import PreparedLog

__all__ = ["Needed", "NEEDED_MODES", "FIELDS", "ContextScores", "ContextEvaluator", "context_threshold"]

_EPS = 1e-4  # log-loss clip, as in the checkpoint metrics


@dataclass
class _SharedRows:
    """What scoring computes from the rows' triple and start only (``ContextEvaluator._shared_rows``):
    the canonical order before ties, the sorted subject, triple and start, each state's first point
    and (with truth) its flags there."""

    triple_in: Any
    start_in: Any
    order: np.ndarray
    pos: np.ndarray
    group: np.ndarray
    subject: np.ndarray
    triple: np.ndarray
    start: np.ndarray
    lo: np.ndarray
    #: with truth, each row's flags at its first scored point
    #: (:func:`~factmem.evaluation.context_kernels.truth_flag`), computed when first needed
    first_flags: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    #: with truth, the time of each row's triple's first breakpoint after that point
    #: (:func:`~factmem.evaluation.context_kernels.next_break`; its flags hold before it) as a key of
    #: the scored points (``ContextEvaluator._v_key``)
    first_break: np.ndarray | None = None
    #: each row's subject × span − tmin: its stop key less its visible end (:func:`~factmem.evaluation.context_kernels.stop_keys`)
    key_base: np.ndarray | None = None


class ContextEvaluator:
    """Scores belief states by the context an agent would assemble at each session start.

    Everything that does not depend on the memory's parameters — evaluation points, what is needed
    where, the order of ties — is prepared once, so that scoring many parameter sets is cheap.

    ``budgets``: the ``k`` values. ``needed``: ``"truth"`` (default when the log has truth) or
    ``"next-session"``. ``costs``: what each kind of charged fact costs (:class:`ChargeCosts`, a mapping
    of kinds, or a string like ``"stale=1,unneeded=0.5"``; default the defaults). ``parts``: names and time ranges ``[start, end)`` of
    evaluation points scored separately (default: one part, ``"all"``). ``max_points_per_subject``:
    sample at most this many points per subject (seeded by ``seed``). ``curve_k``: also sum utility@k
    for every k = 1 … ``curve_k`` (for a figure of utility against the budget).
    """

    def __init__(self, prepared: PreparedLog, *, budgets: Sequence[int] = (20,), needed: Needed | None = None,
                 costs: ChargeCosts | dict[str, float] | str | None = None, parts: dict[str, tuple[int, int]] | None = None,
                 max_points_per_subject: int | None = None, seed: int = 0, curve_k: int = 0):
        self.budgets = tuple(int(k) for k in budgets)
        if not self.budgets or any(k < 1 for k in self.budgets):
            raise InputError(f"budgets must be positive integers, got {list(budgets)!r}")
        has_truth = len(prepared.dataset.truth) > 0
        needed = needed or ("truth" if has_truth else "next-session")
        if needed not in NEEDED_MODES:
            raise InputError(f"needed must be one of {', '.join(NEEDED_MODES)}, got {needed!r}")
        if needed == "truth" and not has_truth:
            raise InputError(f"needed='truth' needs a truth.csv; {prepared.dataset.path or 'this log'} has none "
                             "(use needed='next-session')")
        self.costs = ChargeCosts.of(costs)
        self.prepared = prepared
        self.needed_mode: Needed = needed
        # the cost of each context fact by its code (see score): nothing, a hit, then the four kinds
        self._code_cost = np.array([0.0, 0.0, *self.costs.vector()])
        self.curve_k = int(curve_k)
        self.seed = int(seed)
        self.max_points_per_subject = max_points_per_subject

        trip_codes = np.arange(len(prepared.triples))
        self.subjects, self._triple_subject, self._po_rank = triple_ranks(prepared.triples)
        pred_codes, self._predicates = pd.factorize(prepared.triples.get_level_values(1))
        self._triple_pred = pred_codes.astype(np.int64)
        self._n_known = len(trip_codes)
        self._shared: _SharedRows | None = None
        self._topk_out: tuple[np.ndarray, np.ndarray] | None = None  # the selection's buffers, reused

        # -- evaluation points: (session, subject) at the session's first message -----------------
        # sessions as ranks in the lexicographic order of their ids: the (session, subject) pairs of
        # millions of mentions are found and ordered on integers, not on Python strings
        ev_session, session_names, session_start = prepared.session_starts()
        if np.isnan(session_start).any():
            missing = session_names[int(np.flatnonzero(np.isnan(session_start))[0])].as_py()
            raise InputError(f"session {missing!r} has mentions but no message")
        ev_subject = self._triple_subject[prepared.ev_triple]
        n_subj = max(len(self.subjects), 1)
        pair = sorted_unique(ev_session * n_subj + ev_subject)
        pt_session, pt_subject = pair // n_subj, pair % n_subj
        pt_t = session_start[pt_session].astype(np.int64)
        order = np.lexsort((pt_session, pt_t, pt_subject))  # by subject, start, session id
        # (the ids taken in Arrow: a column of Python strings converted costs 0.1 s at 500K points)
        pts = pd.DataFrame({"session": pd.array(session_names.take(pa.array(pt_session[order])), dtype="str"),
                            "subject": pt_subject[order], "t": pt_t[order]})
        pt_session = pt_session[order]
        self.sampled_from = len(pts)
        full_rows = np.arange(len(pts))
        full_points = (pair, order, pts["subject"].to_numpy(np.int64), pts["t"].to_numpy(np.int64))
        if max_points_per_subject is not None:
            if max_points_per_subject < 1:
                raise InputError(f"max_points_per_subject must be >= 1, got {max_points_per_subject!r}")
            rng = np.random.default_rng(seed)
            key = rng.random(len(pts))
            rank = pd.Series(key).groupby(pts["subject"].to_numpy()).rank(method="first").to_numpy()
            pts = pts[rank <= max_points_per_subject].reset_index(drop=True)
            pt_session = pt_session[rank <= max_points_per_subject]
            full_rows = full_rows[rank <= max_points_per_subject]
        self.points = pts
        self._ev_session, self._pt_session = ev_session, pt_session  # for _prepare_sessions
        self._pt_subject = pts["subject"].to_numpy(np.int64)
        self._pt_t = pts["t"].to_numpy(np.int64)
        self._n_points = len(pts)
        # parts
        parts = parts or {"all": (np.iinfo(np.int64).min, np.iinfo(np.int64).max)}
        self.parts = tuple(parts)
        self._pt_part = np.full(self._n_points, -1, np.int64)
        for i, (a, b) in enumerate(parts.values()):
            self._pt_part[(self._pt_t >= a) & (self._pt_t < b)] = i
        # points sorted by (subject, t): a packed key for range searches
        self._tmin = int(self._pt_t.min(initial=0))
        self._span = int(max(self._pt_t.max(initial=0), prepared.end) - self._tmin + 2)
        self._pt_key = self._pt_subject * self._span + (self._pt_t - self._tmin)
        if len(self.subjects) and len(self.subjects) * self._span >= 2**62:
            raise InputError("the log's time span times its subjects is too large to index points")

        self._proxy: Proxy | None = None
        if needed == "truth":
            self._prepare_truth()
        elif needed == "next-session":
            self._prepare_sessions()
        else:
            self._prepare_proxy(needed, full_points, full_rows, ev_session, n_subj)
        del self._ev_session, self._pt_session
        valid = self._pt_needed >= 1
        self._pt_valid = valid & (self._pt_part >= 0)
        self._prepare_scoring()

    def scored_points(self, part: str | None = None) -> int:
        """Evaluation points scored (with at least one needed fact), in a part or all."""
        sel = self._pt_valid if part is None else self._pt_valid & (self._pt_part == self.parts.index(part))
        return int(sel.sum())

    def points_per_subject(self, part: str | None = None) -> np.ndarray:
        """Scored points of each subject (in :attr:`subjects` order), in a part or all: the
        denominators of per-subject sums, for bootstrap resamples over people."""
        sel = self._pt_valid if part is None else self._pt_valid & (self._pt_part == self.parts.index(part))
        return np.bincount(self._pt_subject[sel], minlength=len(self.subjects)).astype(np.int64)

    def _prepare_scoring(self) -> None:
        """What the scorer reads: the scored points alone (valid, in a part), each triple's rank in
        (subject, triple) order, and with truth the times at which a triple's flags may change."""
        v = np.flatnonzero(self._pt_valid)
        self._v_index = v
        self._v_key = self._pt_key[v]
        self._v_t = self._pt_t[v]
        self._v_needed = self._pt_needed[v]
        self._v_cell = self._pt_part[v] * len(self.subjects) + self._pt_subject[v]  # the row of the sums
        self._set_triple_rank()
        if self.needed_mode == "truth" and len(v):
            self._prepare_breakpoints()

    def _set_triple_rank(self) -> None:
        """Each triple's rank among its subject's triples (a canonical tie order for states)."""
        subject = self._triple_subject
        order = np.argsort(subject, kind="stable")
        rank = np.empty(len(order), np.int64)
        rank[order] = np.arange(len(order))
        first = np.searchsorted(subject[order], subject, "left")
        self._tri_local = rank - first

    def _prepare_breakpoints(self) -> None:
        """The times at which :meth:`_flags` may change for a triple, sorted per triple (a range
        ``_bp_off[tr] … _bp_off[tr + 1]`` of ``_bp_t``): a true-and-relevant interval's start, end and
        needed-from, a true interval's start and end, and just after the triple first became true.
        Between two of them (and within the scored points' times) a triple's flags are constant."""
        ft = self._first_true
        has_ft = np.flatnonzero(ft != OPEN)
        tr = np.concatenate([self._tt_triple, self._tt_triple, self._tt_triple, self._tv_triple, self._tv_triple,
                             has_ft])
        at = np.concatenate([self._tt_from, self._tt_end, self._tt_nfrom, self._tv_from, self._tv_end,
                             ft[has_ft] + 1])
        t_lo, t_hi = int(self._v_t.min()), int(self._v_t.max())
        inside = (at > t_lo) & (at <= t_hi)  # others never fall strictly inside a state's points
        tr, at = tr[inside], at[inside]
        order = np.lexsort((at, tr))
        tr, self._bp_t = tr[order], at[order]
        self._bp_off = np.searchsorted(tr, np.arange(len(ft) + 1), "left")
        # the flags, packed (code | TRUE), from each breakpoint on and before a triple's first (any
        # scored time is at least t_lo): what the scoring kernel reads for a state whose flags vary
        _, code, true_now = truth_flags(tr, self._bp_t, *self._truth_arrays())
        self._bp_flag = pack_flags(code, true_now, np.zeros(len(tr), bool))
        _, code, true_now = truth_flags(np.arange(len(ft), dtype=np.int64), np.full(len(ft), t_lo, np.int64),
                                        *self._truth_arrays())
        self._bp_before = pack_flags(code, true_now, np.zeros(len(ft), bool))

    # -- what is needed where -----------------------------------------------------------------------

    def _prepare_truth(self) -> None:
        prepared = self.prepared
        t = prepared.truth.sort_values(["triple", "valid_from"], kind="stable")
        triple = t["triple"].to_numpy(np.int64)
        vfrom = t["valid_from"].to_numpy(np.int64)
        vto = pd.array(t["valid_to"], dtype="Int64").fillna(OPEN).to_numpy(np.int64)
        rel = pd.array(t["relevant_until"], dtype="Int64").fillna(OPEN).to_numpy(np.int64)
        # true and relevant until; overlapping rows of a triple joined, never-true rows dropped
        triple, vfrom, tend = true_intervals(triple, vfrom, np.minimum(vto, rel))
        # first mention inside each interval: the fact is needed from just after it
        m_tr, m_ts = prepared.mentions["triple"].to_numpy(np.int64), prepared.mentions["ts"].to_numpy(np.int64)
        base = int(min(m_ts.min(initial=0), vfrom.min(initial=0)))
        span = int(max(m_ts.max(initial=0), self.prepared.end) - base + 2)
        # the mentions in (triple, ts) order: the packed pairs sorted as numbers (a DataFrame's sort_values
        # by the two columns took 1.5x), then unpacked
        m_key = np.sort(m_tr * span + (m_ts - base))
        m_tr, m_ts = m_key // span, m_key % span + base
        q = triple * span + (np.maximum(vfrom, base) - base)
        pos = np.searchsorted(m_key, q, "left")
        posc = np.minimum(pos, len(m_key) - 1) if len(m_key) else pos
        hit = (pos < len(m_key)) & (m_tr[posc] == triple) if len(m_key) else np.zeros(len(q), bool)
        first = np.where(hit, m_ts[posc] if len(m_key) else 0, OPEN)
        nfrom = np.where(first < tend, first + 1, OPEN)  # needed at t when first < t (t >= first + 1)
        # the truth intervals, for "true at t" and "was true before t"
        order = np.lexsort((vfrom, triple))
        self._tt_triple, self._tt_from, self._tt_end = triple[order], vfrom[order], tend[order]
        self._tt_nfrom = nfrom[order]
        # the stretches in which a triple is true, relevant or not (stale: true before t, not at t;
        # expired: true at t, not relevant), and the triples truth marks as said in passing
        all_triple = t["triple"].to_numpy(np.int64)
        v_tr, v_from, v_end = true_intervals(all_triple, t["valid_from"].to_numpy(np.int64), vto)
        self._tv_triple, self._tv_from, self._tv_end = v_tr, v_from, v_end
        n_tr = max(self._n_known, int(all_triple.max(initial=-1)) + 1)
        first_true = np.full(n_tr, OPEN, np.int64)
        np.minimum.at(first_true, v_tr, v_from)
        self._first_true = first_true
        self._passing = np.zeros(n_tr, bool)
        if "noise" in prepared.dataset.truth.columns:
            noise = prepared.dataset.truth["noise"].to_numpy(object)
            self._passing[prepared.truth["triple"].to_numpy(np.int64)[: len(noise)][noise == "irrelevant"]] = True
        # each triple's intervals, a range of the sorted arrays (for the compiled flags)
        self._tt_off = np.searchsorted(self._tt_triple, np.arange(n_tr + 1), "left")
        self._tv_off = np.searchsorted(self._tv_triple, np.arange(n_tr + 1), "left")
        # needed count per point: intervals [nfrom, tend) of the subject's triples covering t
        subj = self._triple_subject[triple]
        ok = nfrom < tend
        # (a time past the subject's last point keys at its top: the range ends, or is empty, there)
        lo = np.searchsorted(self._pt_key, self._time_keys(subj[ok], nfrom[ok]), "left")
        hi = np.searchsorted(self._pt_key, self._time_keys(subj[ok], tend[ok]), "left")
        self._pt_needed = cover_count(self._n_points, lo, hi)

    def _prepare_sessions(self) -> None:
        prepared = self.prepared
        # point index of each mention: (session, subject of the mention)
        n_subj = max(len(self.subjects), 1)
        pt_key = self._pt_session * n_subj + self._pt_subject
        by_key = np.argsort(pt_key, kind="stable")
        sorted_key = pt_key[by_key]
        # a log may hold millions of mentions: temporaries are dropped as soon as they are used
        m_key = self._triple_subject[prepared.ev_triple]
        m_key += self._ev_session * n_subj
        where = np.full(len(m_key), -1, np.int64)
        if len(sorted_key):
            pos = np.searchsorted(sorted_key, m_key)
            np.minimum(pos, len(sorted_key) - 1, out=pos)
            found = sorted_key[pos] == m_key
            where[found] = by_key[pos[found]]
            del pos, found
        del m_key
        keep = where >= 0  # sampled-out points drop their mentions
        pe, tr = where[keep], prepared.ev_triple[keep]
        del where, keep
        n_tr = max(self._n_known, 1)
        key = np.unique(pe * n_tr + tr)
        self._sess_triple_key = key
        self._pt_needed = np.bincount(key // n_tr, minlength=self._n_points).astype(np.float64)
        n_pred = max(len(self._predicates), 1)
        self._sess_pred_key = np.unique(pe * n_pred + self._triple_pred[tr])

    def _prepare_proxy(self, name: str, full_points, full_rows: np.ndarray, ev_session: np.ndarray,
                       n_subj: int) -> None:
        """A proxy of :mod:`factmem.evaluation.proxies`, over every point before sampling."""
        prepared = self.prepared
        pair, order, full_subject, full_t = full_points
        rank_of_pair = np.empty(len(order), np.int64)
        rank_of_pair[order] = np.arange(len(order))
        code = ev_session * n_subj + self._triple_subject[prepared.ev_triple]
        pos = np.minimum(np.searchsorted(pair, code), max(len(pair) - 1, 0))
        mention_point = np.where(pair[pos] == code, rank_of_pair[pos], -1) if len(pair) else np.full(len(code), -1)
        index = PointIndex(full_subject=full_subject, full_t=full_t, point_full=full_rows, mention_point=mention_point,
                           mention_triple=np.asarray(prepared.ev_triple, np.int64),
                           mention_ts=np.asarray(prepared.events["ts"].to_numpy(), np.int64),
                           triple_subject=self._triple_subject.copy(), triple_pred=self._triple_pred.copy(),
                           n_pred=len(self._predicates), point_key=self._pt_key, tmin=self._tmin, span=self._span)
        if name == "kind-aware":  # which facts are episodes, which predicates multi-valued (the log's own word)
            index.triple_episodic, index.multi_pred = kind_inputs(prepared, self._n_known, self._predicates)
        self._proxy = make_proxy(name, index)
        self._pt_needed = self._proxy.needed_counts()

    # -- scoring ----------------------------------------------------------------------------------

    def score(self, beliefs: pd.DataFrame | dict, params: MemoryParams, *, curve: bool = False,
              collect: list | None = None) -> ContextScores:
        """Score one parameter set's belief states (columns triple, kind, start, end, reason,
        confidence, rate, fact). ``collect``: a list to append the contexts to, as tuples (budget
        index, point, belief row, effective confidence) of arrays — what :meth:`contexts` reads.

        How (the result does not depend on it): the states are put in a canonical order (subject,
        triple, start) so that sums do not depend on the order rows come in; the (state, point) pairs
        are enumerated and the top ``k`` of each point selected in one compiled pass,
        :func:`factmem.evaluation.topk.context_top_k` (exact ties; no pair array is built, memory is
        points × the widest budget); truth flags are computed once per state where they cannot change
        over the state's points, elsewhere per selected pair (with truth, in the kernel that sums the
        points, :func:`context_sums`, once per stretch between the triple's breakpoints)."""
        b = {c: np.asarray(beliefs[c]) for c in ("triple", "start", "end", "reason", "confidence", "rate", "fact")}
        # columns read from a file come read-only, and Numba compiles its kernels once more for those (0.5 s
        # on a machine's first run): a copy is milliseconds
        b = {c: v if v.flags.writeable else v.copy() for c, v in b.items()}
        # read only: columns already of these types are used as they are, not copied
        start, end = np.asarray(b["start"], np.int64), np.asarray(b["end"], np.int64)
        reason = np.asarray(b["reason"], np.int64)
        conf, rate = np.asarray(b["confidence"], np.float64), np.asarray(b["rate"], np.float64)
        fact = np.asarray(b["fact"], np.int64)
        thr = context_threshold(params)

        # a canonical order of the states (subject, start, triple, end, confidence, rate), so that sums
        # do not depend on the order rows come in; it also makes the point searches below sorted.
        # Parameter sets replayed together share their rows' triple and start (the same arrays): the
        # order before ties and what follows from it are computed once (``_shared_rows``).
        shared = self._shared_rows(beliefs, b)
        order = settle_ties(shared.order, shared.pos, shared.group, lambda rows: (rate[rows], conf[rows], end[rows]))
        # the scored points each state is held at: from its first, ``lo``, while the point's key
        # (subject, time) is below the state's ``stop`` (its subject, its visible end)
        if shared.key_base is None:
            shared.key_base = shared.subject * self._span - self._tmin  # a point's key less its time
        stop = stop_keys(order, end, reason, shared.key_base, self._tmin, self._tmin + self._span - 1,
                         int(EndReason.REINFORCED), int(EndReason.SUPERSEDED))
        # (gathered by numpy one column at a time: one compiled pass gathering all seven took 1.3x)
        tr, st, lo = shared.triple, shared.start, shared.lo
        cf, rt = conf[order], rate[order]
        first_seen = group_min(fact, start)[order]  # of each state's fact (a tie key)

        n_b = len(self.budgets)
        curve_k = self.curve_k if curve and self.curve_k else 0
        ks = list(self.budgets) + ([curve_k] if curve_k else [])
        n_parts, n_subj = len(self.parts), len(self.subjects)
        per_rank = np.zeros((n_parts, n_subj, curve_k)) if curve_k else None
        N = self._v_needed

        states_by_point = self.needed_mode != "truth"  # flags that depend on the point, not only its time
        # the top k of every point, in one compiled pass over the (state, point) pairs; the budgets are
        # prefixes of the widest one's ranks
        ranked = context_top_k(lo, stop, cf, rt, st, context_tie_columns(st, first_seen, self._po_rank[tr]),
                               self._v_t, thr, max(ks), self._topk_out, point_key=self._v_key)
        self._topk_out = (ranked.best, ranked.value)  # reused by the next set: touching fresh memory costs
        # the flags of the selected pairs: their state's where they cannot change over its points, else
        # computed per pair (the "varying" pairs, listed in the selection's order)
        state_flags, varying = self._state_flags(shared, stop)
        s_needed, s_code, s_true = state_flags
        inline = self.needed_mode == "truth"  # the varying pairs' flags computed in the kernel, from truth
        if not inline or collect is not None or per_rank is not None:
            vpe, vpb = varying_pairs(ranked.best, ranked.held, varying)
            v_needed, v_code, v_true = self._flags(self._v_index[vpe] if states_by_point else None, tr[vpb],
                                                   self._v_t[vpe], params)
        if inline:
            pair_code, pair_true = np.zeros(0, np.int64), np.zeros(0, bool)
        else:
            pair_code, pair_true = v_code, v_true
        by_cell = np.zeros((n_parts * n_subj, n_b, len(FIELDS)))
        context_sums(ranked.best, ranked.value, ranked.held, pack_flags(s_code, s_true, varying), tr, pair_code, pair_true,
                      inline, (self._bp_off, self._bp_t, self._bp_flag, self._bp_before) if inline and len(self._v_index)
                      else NO_BREAKS, self._v_t,
                      np.array(self.budgets, np.int64),
                      _EPS, self._v_needed, self._v_cell, np.array(self.costs.vector()), SLOTS, by_cell)
        sums = by_cell.reshape(n_parts, n_subj, n_b, len(FIELDS))
        if collect is not None or per_rank is not None:
            pe, rank, pb, eff = ranked.pairs()  # (scored point, rank, state, effective confidence)
            vary = varying[pb]  # the varying pairs come in this order too
            needed, code = s_needed[pb], s_code[pb]
            needed[vary], code[vary] = v_needed, v_code
            if collect is not None:  # the contexts themselves: (scored point, belief row) of each budget
                for bi in range(n_b):
                    m = rank < ks[bi]
                    collect.append((bi, self._v_index[pe[m]], order[pb[m]], eff[m]))
            if per_rank is not None:
                m = rank < curve_k
                vp = self._v_index[pe[m]]
                gain = (needed[m].astype(np.float64) - self._code_cost[code[m]]) / np.maximum(1.0, N[pe[m]])
                np.add.at(per_rank, (self._pt_part[vp], self._pt_subject[vp], rank[m]), gain)
        curve_arr = np.cumsum(per_rank, axis=2) if per_rank is not None else None
        return ContextScores(self.budgets, self.parts, self.subjects, sums, curve_arr)

    def contexts(self, beliefs: pd.DataFrame | dict, params: MemoryParams, budget: int | None = None) -> pd.DataFrame:
        """The contexts the metrics score, at every scored point: one row per (point, fact in its
        context of ``budget`` facts — default the first budget), with ``point`` (row of
        :attr:`points`), ``session``, ``subject`` (name), ``t``, ``row`` (of ``beliefs``), ``triple``,
        ``effective_confidence`` and ``rank`` (0 first, in the order of
        :mod:`factmem.core.context_rule`). Sorted by point and rank."""
        k = self.budgets[0] if budget is None else int(budget)
        if k not in self.budgets:
            raise InputError(f"budget {k} is not one of this evaluator's budgets {list(self.budgets)}")
        got: list = []
        self.score(beliefs, params, collect=got)
        bi = self.budgets.index(k)
        parts = [g for g in got if g[0] == bi]
        point = np.concatenate([g[1] for g in parts]) if parts else np.zeros(0, np.int64)
        row = np.concatenate([g[2] for g in parts]) if parts else np.zeros(0, np.int64)
        eff = np.concatenate([g[3] for g in parts]) if parts else np.zeros(0)
        triple = np.asarray(beliefs["triple"]).astype(np.int64)[row]
        start = np.asarray(beliefs["start"]).astype(np.int64)[row]
        fact = np.asarray(beliefs["fact"]).astype(np.int64)
        first_seen = group_min(fact, np.asarray(beliefs["start"]).astype(np.int64))[row]
        order = context_order(point, eff, start, first_seen, self._po_rank[triple])
        point, row, eff, triple = point[order], row[order], eff[order], triple[order]
        pts = self.points
        return pd.DataFrame({
            "point": point, "session": pts["session"].to_numpy()[point],
            "subject": np.asarray(self.subjects, dtype=object)[pts["subject"].to_numpy()[point]],
            "t": pts["t"].to_numpy()[point], "row": row, "triple": triple, "effective_confidence": eff,
            "rank": ranks_within(point)})

    def _time_keys(self, subject: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Times of subjects as keys of the scored points (``_pt_key``: subject × span + time − tmin), a
        time clipped to the subject's range: a point's key is below a time's key exactly when the point
        comes before the time, in that subject (:func:`~factmem.evaluation.context_kernels.stop_keys`
        computes the same, compiled, for the states' ends)."""
        return subject * self._span + (np.clip(t, self._tmin, self._tmin + self._span - 1) - self._tmin)

    def _state_flags(self, shared: _SharedRows, stop: np.ndarray):
        """Each state's flags (:meth:`_flags`) at its first scored point, and whether they may change
        over its points (``varying``: its pairs are flagged one by one). With truth a state varies only
        where one of its triple's truth boundaries falls among its points
        (:meth:`_prepare_breakpoints`); the other definitions of needed depend on the point itself, so
        every state varies. The flags at the first point depend on the rows' triple and start alone:
        they are computed once for the rows of ``shared``. ``stop``: the states' stop keys
        (:func:`~factmem.evaluation.context_kernels.stop_keys`)."""
        n = len(stop)
        if self.needed_mode != "truth" or not n or not len(self._v_t):  # (no scored points: none held)
            return (np.zeros(n, bool), np.zeros(n, np.int64), np.zeros(n, bool)), np.ones(n, bool)
        if shared.first_flags is None or shared.first_break is None:
            first_t = self._v_t[np.minimum(shared.lo, len(self._v_t) - 1)]  # rows past the last point: never held
            shared.first_flags = truth_flags(shared.triple, first_t, *self._truth_arrays())
            first_break = next_breaks(shared.triple, first_t, self._bp_off, self._bp_t)
            # as a key of the scored points: a state varies where the first point of its subject at or
            # after its triple's first breakpoint after its first point (none: the largest int64) is held
            shared.first_break = self._time_keys(shared.subject, first_break)
        at_break = shared.first_break
        varying = at_break < stop  # (a point's key is at least this; searched only where it could be held)
        maybe = np.flatnonzero(varying)
        found = np.searchsorted(self._v_key, at_break[maybe], "left")
        varying[maybe] = (found < len(self._v_key)) & (self._v_key[np.minimum(found, len(self._v_key) - 1)] < stop[maybe])
        return shared.first_flags, varying

    def _truth_arrays(self) -> tuple[np.ndarray, ...]:
        return (self._tt_off, self._tt_from, self._tt_end, self._tt_nfrom, self._tv_off, self._tv_from, self._tv_end,
                self._first_true, self._passing)

    def _flags(self, pe: np.ndarray | None, tr: np.ndarray, t: np.ndarray, params: MemoryParams):
        """Per (point, context fact): whether it is needed, its code (1 needed, else 2 + its kind's
        index in :data:`~factmem.evaluation.charges.CHARGE_KINDS`: 2 stale, 3 expired, 4 false,
        5 unneeded), and whether it is true and relevant now (the log loss's label). With truth, the
        rule is :func:`~factmem.evaluation.context_kernels.truth_flag`'s."""
        if self.needed_mode == "truth":
            return truth_flags(np.asarray(tr, np.int64), np.asarray(t, np.int64), *self._truth_arrays())
        assert pe is not None  # next-session flags depend on the point, not only on its time
        if self._proxy is not None:
            return self._proxy.flags(pe, tr, t, params, np.asarray(self._predicates, dtype=object))
        n_tr = max(self._n_known, 1)
        needed = member(self._sess_triple_key, pe * n_tr + tr) & (tr < self._n_known)
        multi = np.isin(np.asarray(self._predicates, dtype=object),
                        list(params.multi_valued_predicates)) if len(self._predicates) else np.zeros(0, bool)
        pred = self._triple_pred[tr]
        n_pred = max(len(self._predicates), 1)
        other = member(self._sess_pred_key, pe * n_pred + pred) & ~needed
        stale = other & ~multi[pred] if len(multi) else other
        return needed, np.where(needed, 1, np.where(stale, 2, 5)).astype(np.int64), needed

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_shared": None, "_topk_out": None}  # one run's caches: not worth shipping

    def _shared_rows(self, beliefs: pd.DataFrame | dict, b: dict[str, np.ndarray]) -> _SharedRows:
        """What :meth:`score` computes from the rows' triple and start alone, for the arrays given (kept
        while the same arrays come again: belief arrays are not modified once made)."""
        tri_in, st_in = beliefs["triple"], beliefs["start"]
        hit = self._shared
        if hit is not None and hit.triple_in is tri_in and hit.start_in is st_in:
            return hit
        triple, start = b["triple"].astype(np.int64), b["start"].astype(np.int64)
        known = triple < self._n_known
        if not known.all():
            # derived facts about triples the log never names: invented, so never true or needed;
            # they still take context slots (their subject and tie order come from their strings)
            self._extend(triple[~known])
        subj = self._triple_subject[triple]
        order, pos, group = canonical_order(subj, self._tri_local[triple], start)
        # rows that tie share subject, start and triple: the tie order changes none of these
        subj, tr, st = subj[order], triple[order], start[order]
        lo = np.searchsorted(self._v_key, self._time_keys(subj, st + 1), "left")
        self._shared = _SharedRows(tri_in, st_in, order, pos, group, subj, tr, st, lo)
        return self._shared

    def _extend(self, unknown: np.ndarray) -> None:
        """Subjects and tie order of triples the log never names (invented derived facts)."""
        prepared = self.prepared
        n = int(unknown.max()) + 1
        names = prepared.extra_triples()
        if len(names) < n - self._n_known:
            raise InputError("belief states name triples the prepared log has not encoded")
        subj = pd.Index(self.subjects).get_indexer(pd.Index([s for s, _, _ in names], dtype=object))
        all_pred = np.concatenate([np.asarray(prepared.triples.get_level_values(1), object),
                                   np.asarray([p for _, p, _ in names], object)])
        all_obj = np.concatenate([np.asarray(prepared.triples.get_level_values(2), object),
                                  np.asarray([o for _, _, o in names], object)])
        sub = np.concatenate([self._triple_subject[: self._n_known], np.where(subj >= 0, subj, 0)])
        self._triple_subject = sub.astype(np.int64)
        self._po_rank = lexicographic_rank(all_pred, all_obj)
        pred_codes = pd.Index(self._predicates).get_indexer(pd.Index(all_pred[self._n_known:], dtype=object))
        self._triple_pred = np.concatenate([self._triple_pred[: self._n_known],
                                            np.where(pred_codes >= 0, pred_codes, 0)]).astype(np.int64)
        self._set_triple_rank()

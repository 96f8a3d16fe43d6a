"""No-truth definitions of "needed" and "charged": what a context should have held, read from the log
alone (a production memory has no ground truth).

:class:`~factmem.evaluation.context.ContextEvaluator` scores a context at each evaluation point
``e`` = (subject ``s``, session start ``t``). With truth, a fact is *needed* when true and relevant
at ``t`` and mentioned before, *charged* when not true and relevant. Without truth, the log's own
future stands in for it. ``next-session`` (the first proxy; its rule lives in
:mod:`factmem.evaluation.context`) takes the triples the session starting at ``t`` mentions. The
proxies here look further ahead — which the truth also does, in effect: a fact true and relevant now
is one later sessions go on mentioning.

All four count as needed only facts **mentioned before** ``t`` (as the truth does: a memory cannot
hold what it was never told); ``next-session`` keeps its own rule (every triple the session mentions).

* ``next-3-sessions`` — needed: the triples of ``s`` mentioned before ``t`` that one of the subject's
  next :data:`WINDOW_SESSIONS` sessions mentions (the one starting at ``t`` and the two after it;
  sessions in the order of the subject's evaluation points). Charged (*stale*): a context fact of a
  single-valued predicate that the window does not mention while it mentions another object for its
  (subject, predicate) — the window contradicts it.
* ``hindsight`` — needed: the triples of ``s`` mentioned before ``t`` and mentioned again at or
  after ``t`` (any later session). Charged: every context fact the log never mentions again at or
  after ``t`` — *stale* when the log later mentions another object for its (subject, predicate) and
  the predicate is single-valued (contradicted), else *expired* (never mentioned again: the truth's
  episode that is over looks like this). With the default costs both cost 1.
* ``later-mention`` — needed as ``hindsight``; *stale* when contradicted, every other context fact
  *unneeded* (a fact merely never mentioned again costs, by default, nothing beyond the slot it takes).

* ``kind-aware`` — reads each fact by its kind, as the truth does. A **lasting** fact (every kind but
  ``episodic``) is needed from its first mention on while it is the log's latest word on its
  (subject, predicate): for a single-valued predicate, needed at ``t`` when the latest mention of its
  (subject, predicate) before ``t`` is of it (several objects said at that same instant are all
  current), *stale* once another object was said after it; for a multi-valued one, needed from its
  first mention on. It needs no later mention: a lasting fact said once is still true. An **episode**
  (``episodic``) is needed while recent: when one of the subject's previous
  :data:`EPISODE_SESSIONS` sessions (the sessions starting before ``t``) mentions it; otherwise
  *expired* (an episode that is over). It reads only the past, as production could.

In ``next-3-sessions`` the facts neither needed nor stale are *unneeded*. Derived facts about triples
the log never names are never needed; ``hindsight`` counts them expired (never mentioned), the others
unneeded.

Each proxy gives, per evaluation point, the number of needed facts (:meth:`Proxy.needed_counts`) and,
per (point, context fact) pair, whether it is needed, its charge code and the log loss's label
(:meth:`Proxy.flags`), all vectorized: sorted keys and binary searches, no loop over facts or points.
Which proxy agrees best with the truth is measured (:mod:`factmem.tuning.agreement`), not assumed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from factmem.core.params import MemoryParams
from factmem.errors import InputError
from factmem.evaluation.arrays import cover_count, sorted_unique

if TYPE_CHECKING:
    from factmem.evaluation.simulate import PreparedLog

__all__ = ["PROXIES", "WINDOW_SESSIONS", "EPISODE_SESSIONS", "PointIndex", "Proxy", "kind_inputs", "make_proxy"]

#: the sessions the window proxy looks at: the one starting at t and the next two
WINDOW_SESSIONS = 3
#: ``kind-aware``: an episode is needed while one of the subject's previous this-many sessions mentions it
EPISODE_SESSIONS = 2
#: the proxies of this module (``next-session`` is the evaluator's own)
PROXIES: tuple[str, ...] = ("next-3-sessions", "hindsight", "later-mention", "kind-aware")


@dataclass
class PointIndex:
    """What a proxy needs of the evaluator: the full list of evaluation points before any sampling
    (sorted by subject, start, session: ``full_subject``, ``full_t``), the scored points' rows in it
    (``point_full``), each mention's point in it (``mention_point``; -1 when it has none), the
    mentions' triples and times, each triple's subject and predicate codes, the number of
    predicates, and the packed (subject, t) keys of the scored points (``point_key``, with
    ``tmin``/``span`` as the evaluator packs them)."""

    full_subject: np.ndarray
    full_t: np.ndarray
    point_full: np.ndarray
    mention_point: np.ndarray
    mention_triple: np.ndarray
    mention_ts: np.ndarray
    triple_subject: np.ndarray
    triple_pred: np.ndarray
    n_pred: int
    point_key: np.ndarray
    tmin: int
    span: int
    #: whether each triple is an episode (its mentions' kind is ``episodic``); None: none is
    triple_episodic: np.ndarray | None = None
    #: whether each predicate (code) is multi-valued in the log's own registry (``kind-aware``: declared by
    #: the log, else measured from its mentions); None: none is
    multi_pred: np.ndarray | None = None


def _first_last(triple: np.ndarray, ts: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    first = np.full(n, np.iinfo(np.int64).max, np.int64)
    last = np.full(n, np.iinfo(np.int64).min, np.int64)
    np.minimum.at(first, triple, ts)
    np.maximum.at(last, triple, ts)
    return first, last


class Proxy:
    """A no-truth definition of needed and charged (see the module docstring)."""

    def __init__(self, name: str, index: PointIndex):
        if name not in PROXIES:
            raise InputError(f"unknown proxy {name!r}; one of {', '.join(PROXIES)}")
        self.name = name
        self.ix = index
        n = len(index.triple_subject)
        self.n_known = n
        self.first, self.last = _first_last(index.mention_triple, index.mention_ts, n)
        # (subject, predicate) of each triple, for contradictions
        sp_raw = index.triple_subject * np.int64(max(index.n_pred, 1)) + index.triple_pred
        sp, _ = pd.factorize(sp_raw)
        self.triple_sp = sp.astype(np.int64)
        if name == "next-3-sessions":
            self._prepare_window()
        elif name == "kind-aware":
            self._prepare_kinds()
        else:
            self.last_sp = np.full(int(self.triple_sp.max(initial=-1)) + 1, np.iinfo(np.int64).min, np.int64)
            np.maximum.at(self.last_sp, self.triple_sp, self.last)

    # -- the window of the next sessions -------------------------------------------------------------

    def _prepare_window(self) -> None:
        ix = self.ix
        has = ix.mention_point >= 0
        j, tr = ix.mention_point[has], ix.mention_triple[has]
        self.n_full = len(ix.full_t)
        width = np.int64(self.n_full + 1)
        # sorted (triple, point) and ((subject, predicate), point) keys of the mentions
        self.m_key = sorted_unique(tr * width + j)
        self.sp_key = sorted_unique(self.triple_sp[tr] * width + j)
        # a subject's first row in the full list, for each full row
        subj = ix.full_subject
        self.subject_first = np.searchsorted(subj, subj, "left")

    def _window_hit(self, keys: np.ndarray, code: np.ndarray, i: np.ndarray) -> np.ndarray:
        """Whether ``code`` (a triple or a (subject, predicate)) has a mention at a full point in
        ``[i, i + WINDOW_SESSIONS)``: the first mention at point ``>= i`` is before ``i + H``."""
        width = np.int64(self.n_full + 1)
        pos = np.searchsorted(keys, code * width + i, "left")
        ok = pos < len(keys)
        pos = np.minimum(pos, max(len(keys) - 1, 0))
        if not len(keys):
            return np.zeros(len(code), bool)
        found = keys[pos]
        return ok & (found // width == code) & (found % width < i + WINDOW_SESSIONS)

    # -- kinds: lasting facts while current, episodes while recent -------------------------------------

    def _prepare_kinds(self) -> None:
        self._prepare_window()  # the (triple, point) keys of the mentions, and each row's subject start
        ix = self.ix
        n = self.n_known
        ep = ix.triple_episodic
        self.episodic = np.zeros(n, bool) if ep is None else np.asarray(ep, bool)[:n]
        mp = ix.multi_pred
        self.multi_tr = np.zeros(n, bool) if mp is None or not len(mp) else np.asarray(mp, bool)[ix.triple_pred]
        # the mentions' instants, packed as (code, time) keys: the latest mention before t is a search away
        ts = ix.mention_ts
        self.k_base = int(min(ts.min(initial=0), ix.tmin))
        self.k_span = np.int64(int(max(ts.max(initial=0), ix.tmin + ix.span)) - self.k_base + 2)
        rel = ts - self.k_base
        self.tr_time = sorted_unique(ix.mention_triple * self.k_span + rel)
        self.sp_time = sorted_unique(self.triple_sp[ix.mention_triple] * self.k_span + rel)

    def _latest_before(self, keys: np.ndarray, code: np.ndarray, t: np.ndarray) -> np.ndarray:
        """The time of ``code``'s latest mention before ``t`` (int64 min when none)."""
        none = np.iinfo(np.int64).min
        if not len(keys):
            return np.full(len(code), none, np.int64)
        pos = np.searchsorted(keys, code * self.k_span + (t - self.k_base), "left") - 1
        ok = pos >= 0
        found = keys[np.maximum(pos, 0)]
        ok &= found // self.k_span == code
        return np.where(ok, found % self.k_span + self.k_base, none)

    def _recent_episode(self, tr: np.ndarray, i: np.ndarray) -> np.ndarray:
        """Whether triple ``tr`` is mentioned at one of the full points ``[i − EPISODE_SESSIONS, i)`` of
        the same subject (the subject's previous sessions)."""
        if not len(self.m_key):
            return np.zeros(len(tr), bool)
        width = np.int64(self.n_full + 1)
        pos = np.searchsorted(self.m_key, tr * width + i, "left") - 1
        found = self.m_key[np.maximum(pos, 0)]
        j = found % width
        return (pos >= 0) & (found // width == tr) & (j >= i - EPISODE_SESSIONS) & (j >= self.subject_first[i])

    def _kind_needed_counts(self, multi_sp: np.ndarray) -> np.ndarray:
        """Needed facts per scored point under ``kind-aware``: lasting facts over the stretches where they
        are current (ranges of the packed point keys), episodes at the full points after a mention."""
        ix = self.ix
        n_points = len(ix.point_full)
        top = ix.tmin + ix.span - 1
        width = self.k_span
        # lasting facts: each (triple, instant) of a mention holds from that instant (exclusive) to the next
        # instant its (subject, predicate) is mentioned at (inclusive); multi-valued ones from the first on
        tr = self.tr_time // width
        at = self.tr_time % width + self.k_base
        keep = ~self.episodic[tr]
        tr, at = tr[keep], at[keep]
        sp = self.triple_sp[tr]
        inst = self.sp_time  # (sp, instant), distinct and sorted
        nxt = np.full(len(inst), np.iinfo(np.int64).max, np.int64)
        same = inst[1:] // width == inst[:-1] // width
        nxt[:-1] = np.where(same, inst[1:] % width + self.k_base, nxt[:-1])
        where = np.searchsorted(inst, sp * width + (at - self.k_base))
        until = nxt[where]
        multi = multi_sp[sp]
        first_of = np.r_[True, tr[1:] != tr[:-1]] if len(tr) else np.zeros(0, bool)
        hold = ~multi | first_of  # a multi-valued fact: one stretch from its first mention on
        tr, at, until, multi = tr[hold], at[hold], until[hold], multi[hold]
        until = np.where(multi, np.iinfo(np.int64).max, until)
        subj = ix.triple_subject[tr]
        lo_t = np.clip(at + 1, ix.tmin, top)
        lo = np.searchsorted(ix.point_key, subj * ix.span + (lo_t - ix.tmin), "left")
        open_end = until >= top
        hi_t = np.clip(np.where(open_end, top, until + 1), ix.tmin, top)
        hi = np.where(open_end, np.searchsorted(ix.point_key, (subj + 1) * ix.span, "left"),
                      np.searchsorted(ix.point_key, subj * ix.span + (hi_t - ix.tmin), "left"))
        counts = cover_count(n_points, lo, hi)
        # episodes: full points i with a mention at [i − H, i), cut at the next mention's own stretch
        e_tr = self.m_key // np.int64(self.n_full + 1)
        e_j = self.m_key % np.int64(self.n_full + 1)
        on = self.episodic[e_tr]
        e_tr, e_j = e_tr[on], e_j[on]
        nxt_j = np.full(len(e_j), self.n_full, np.int64)  # none: past every point (no overflow below)
        if len(e_j) > 1:
            nxt_j[:-1] = np.where(e_tr[1:] == e_tr[:-1], e_j[1:], nxt_j[:-1])
        subject_end = np.searchsorted(ix.full_subject, ix.full_subject, "right")  # one past each row's subject
        lo_f = e_j + 1
        hi_f = np.minimum(np.minimum(e_j + 1 + EPISODE_SESSIONS, nxt_j + 1), subject_end[e_j])
        per_full = cover_count(self.n_full, lo_f, hi_f)
        return counts + (per_full[ix.point_full] if n_points else 0.0)

    # -- what the evaluator asks -----------------------------------------------------------------------

    def needed_counts(self) -> np.ndarray:
        """Needed facts at each scored point (float64)."""
        ix = self.ix
        n_points = len(ix.point_full)
        if self.name == "kind-aware":
            multi_sp = np.zeros(int(self.triple_sp.max(initial=-1)) + 1, bool)
            multi_sp[self.triple_sp] = self.multi_tr
            return self._kind_needed_counts(multi_sp)
        if self.name == "next-3-sessions":
            width = np.int64(self.n_full + 1)
            tr = self.m_key // width
            j = self.m_key % width
            parts = []
            for d in range(WINDOW_SESSIONS):  # a few shifts: each mention is needed at the H points before it
                i = j - d
                ok = i >= self.subject_first[j]
                parts.append(i[ok] * np.int64(max(self.n_known, 1)) + tr[ok])
            pairs = sorted_unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)
            i = pairs // np.int64(max(self.n_known, 1))
            t_of = pairs % np.int64(max(self.n_known, 1))
            ok = self.first[t_of] < ix.full_t[i]
            per_full = np.bincount(i[ok], minlength=self.n_full).astype(np.float64)
            return per_full[ix.point_full] if n_points else np.zeros(0)
        # hindsight / later-mention: triples with first < t <= last, as ranges of the packed point keys
        seen = self.first <= self.last
        subj = ix.triple_subject[seen]
        top = ix.tmin + ix.span - 1
        lo_t = np.clip(self.first[seen] + 1, ix.tmin, top)
        hi_t = np.clip(self.last[seen] + 1, ix.tmin, top)
        lo = np.searchsorted(ix.point_key, subj * ix.span + (lo_t - ix.tmin), "left")
        hi = np.searchsorted(ix.point_key, subj * ix.span + (hi_t - ix.tmin), "left")
        hi = np.where(self.last[seen] + 1 > top, np.searchsorted(ix.point_key, (subj + 1) * ix.span, "left"), hi)
        return cover_count(n_points, lo, hi)

    def flags(self, pe: np.ndarray, tr: np.ndarray, t: np.ndarray, params: MemoryParams, predicates: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per (scored point ``pe``, context triple ``tr``) at time ``t``: whether it is needed, its code
        as :meth:`~factmem.evaluation.context.ContextEvaluator._flags` gives it (1 needed, 2 stale,
        3 expired, 5 unneeded: :data:`~factmem.evaluation.charges.CHARGE_KINDS`), and the log-loss label
        (needed). ``predicates``: the evaluator's predicate names (for the multi-valued ones of
        ``params``)."""
        known = tr < self.n_known
        trk = np.where(known, tr, 0)
        multi = np.isin(np.asarray(predicates, dtype=object), list(params.multi_valued_predicates)) \
            if len(predicates) else np.zeros(0, bool)
        single = ~multi[self.ix.triple_pred[trk]] if len(multi) else np.ones(len(tr), bool)
        before = self.first[trk] < t
        if self.name == "kind-aware":
            ep = self.episodic[trk]
            latest_own = self._latest_before(self.tr_time, trk, t)
            latest_sp = self._latest_before(self.sp_time, self.triple_sp[trk], t)
            current = latest_own >= latest_sp
            # the log's own registry, not the candidate's: what is needed does not depend on the parameters
            lasting_needed = before & (current | self.multi_tr[trk])
            recent = self._recent_episode(trk, self.ix.point_full[pe])
            needed = known & np.where(ep, recent & before, lasting_needed)
            stale = known & ~ep & before & ~needed
            return needed, np.where(needed, 1, np.where(stale, 2, np.where(known & ep, 3, 5))).astype(np.int64), needed
        if self.name == "next-3-sessions":
            i = self.ix.point_full[pe]
            in_window = self._window_hit(self.m_key, trk, i)
            needed = known & before & in_window
            other = known & ~in_window & self._window_hit(self.sp_key, self.triple_sp[trk], i)
            stale = other & single
            return needed, _code(needed, stale, 5), needed
        again = self.last[trk] >= t
        needed = known & before & again
        contradicted = known & ~again & (self.last_sp[self.triple_sp[trk]] >= t) & single
        # hindsight: what the log never mentions again is charged like an episode that is over (expired)
        return needed, _code(needed, contradicted, 3 if self.name == "hindsight" else 5), needed


def _code(needed: np.ndarray, stale: np.ndarray, other: int) -> np.ndarray:
    """1 where needed, 2 where stale, ``other`` elsewhere (int64)."""
    return np.where(needed, 1, np.where(stale, 2, other)).astype(np.int64)


def kind_inputs(prepared: PreparedLog, n_known: int, predicates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What ``kind-aware`` reads of the log besides the points: whether each triple is an episode (the
    kind its mentions carry), and whether each predicate (in the evaluator's order, ``predicates``) is
    multi-valued — declared by the log, else measured from its mentions alone (never from truth)."""
    from factmem.evaluation.cardinality import measure_cardinality, suggest_multi_valued

    kind = prepared.events["kind"]
    if isinstance(kind.dtype, pd.CategoricalDtype):  # the codes, not a string per mention
        cats = kind.cat.categories
        is_ep = kind.cat.codes.to_numpy() == (cats.get_loc("episodic") if "episodic" in cats else -2)
    else:
        is_ep = (kind.astype(str) == "episodic").to_numpy(bool)
    episodic = np.zeros(n_known, bool)
    episodic[np.asarray(prepared.ev_triple, np.int64)[is_ep]] = True
    declared = prepared.dataset.multi_valued_predicates
    if declared or not len(prepared.events):
        multi = frozenset(declared)
    else:  # measured on integer codes of the triples (the same rule, without comparing strings per mention)
        tr = np.asarray(prepared.ev_triple, np.int64)
        codes = prepared.triples.codes
        coded = pd.DataFrame({"subject": np.asarray(codes[0])[tr], "predicate": np.asarray(codes[1])[tr],
                              "object": np.asarray(codes[2])[tr], "ts": prepared.events["ts"].to_numpy(np.int64)})
        names = prepared.triples.levels[1]
        multi = frozenset(str(names[c]) for c in suggest_multi_valued(measure_cardinality(None, coded)))
    return episodic, np.isin(np.asarray(predicates, dtype=object), list(multi))


def make_proxy(name: str, index: PointIndex) -> Proxy:
    """The proxy ``name`` (one of :data:`PROXIES`) over the evaluator's points."""
    return Proxy(name, index)

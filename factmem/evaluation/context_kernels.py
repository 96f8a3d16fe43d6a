"""The compiled passes of the budgeted context metrics (:mod:`factmem.evaluation.context`), over
states and selected (point, state) pairs:

* :func:`stop_keys` — until when each belief state is held, as a key of the scored points;
* the truth flags of a triple at a time (:func:`truth_flag`, the rule of "needed from truth":
  needed, the charge kind's code, true and relevant now) and :func:`next_break` (until when flags
  computed at a time hold; a state's flags may change over its points where a point at or after its
  first point's :func:`next_breaks` is one of them);
* :func:`context_sums` — the per-point metrics of the selected contexts, summed per (part, subject)
  row: counts by code, charge, utility, recall, precision and the log loss;
* :func:`varying_pairs` — the selected pairs whose flags are computed per pair, for the proxies of
  "needed" that depend on the point and for the contexts listed one by one.
"""

from __future__ import annotations

import numpy as np

from factmem.core.compiled import njit, search_right
from factmem.evaluation.charges import CHARGE_KINDS
from factmem.evaluation.context_scores import FIELD_INDEX

__all__ = ["stop_keys", "varying_pairs", "context_sums", "pack_flags", "truth_flag", "truth_flags", "next_breaks", "next_break",
           "SLOTS", "NO_BREAKS"]


@njit
def stop_keys(order, end, reason, base, tmin, top, reinforced, superseded):  # pragma: no cover - compiled
    """Each state's stop as a key of the scored points (``ContextEvaluator._v_key``: subject × span +
    time − tmin), state ``i`` being row ``order[i]``: ``base[i]`` (its subject × span − tmin) plus its
    visible end — its ``end``, or one second later when an event ended it (``reason`` reinforced or
    superseded: the event is seen only after its instant) — clipped to ``[tmin, top]``. A point of its
    subject is held while its key is below the stop: it comes before the visible end. Open states and
    those ending past the last scored time stop at the top of their subject's keys (``top − tmin`` =
    span − 1), below the next subject's: every point key of a subject is below subject × span + span − 1.
    One pass: the two gathers (``order`` is far from the rows' order) and the arithmetic (numpy took
    six passes over the states for it)."""
    n = len(order)
    out = np.empty(n, np.int64)
    for i in range(n):
        row = order[i]
        visible = end[row]
        why = reason[row]
        if why == reinforced or why == superseded:
            visible += 1  # (an event's end is a time, never OPEN: no overflow)
        out[i] = base[i] + min(max(visible, tmin), top)
    return out


@njit
def varying_pairs(best, held, varying):  # pragma: no cover - compiled
    """(point, state) of the selected pairs whose state's flags may change over its points, in the
    selection's order (point, then rank)."""
    n = 0
    for p in range(len(held)):
        for r in range(held[p]):
            n += varying[best[p, r]]
    point = np.empty(n, np.int64)
    state = np.empty(n, np.int64)
    i = 0
    for p in range(len(held)):
        for r in range(held[p]):
            s = best[p, r]
            if varying[s]:
                point[i] = p
                state[i] = s
                i += 1
    return point, state


#: a state's flags in one byte (:func:`pack_flags`): its code, true and relevant now, varying
CODE, TRUE, VARYING = 7, 8, 16


def pack_flags(code: np.ndarray, true_now: np.ndarray, varying: np.ndarray) -> np.ndarray:
    """Each state's code (0 … 5), whether it is true and relevant now and whether its flags vary over
    its points, in one byte: ``code | TRUE · true_now | VARYING · varying`` (what
    :func:`context_sums` reads per selected pair)."""
    flags = np.asarray(code).astype(np.int8)
    flags |= np.asarray(true_now, np.bool_).view(np.int8) * np.int8(TRUE)
    flags |= np.asarray(varying, np.bool_).view(np.int8) * np.int8(VARYING)
    return flags


#: the fields :func:`context_sums` writes, in its order (their places in FIELDS: ``SLOTS``)
SUM_FIELDS = ("points", "needed", "hits", "context", "charged", *CHARGE_KINDS, "utility", "recall", "precision",
               "precise", "log_loss", "scored")
SLOTS = np.array([FIELD_INDEX[f] for f in SUM_FIELDS], np.int64)
NO_BREAKS = (np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int8), np.zeros(0, np.int8))  # breakpoints' types, scored without truth


@njit
def context_sums(best, value, held, flags, tr, pair_code, pair_true, inline, breaks, t,
                  budgets, eps, needed, cell, costs, slots, sums):  # pragma: no cover - compiled
    """The per-point metrics of :meth:`ContextEvaluator.score`, summed into ``sums[cell, budget, field]``
    (``cell`` = part × subjects + subject of each scored point; points in order, so each cell's sums
    add its points in order). Per budget ``k`` and point (``N = needed[p]``): the first ``k`` selected
    facts counted by code (0 nothing, 1 hit, 2 + charge kind), ``H`` the hits, ``C`` the facts, the
    charge ``S = Σ costs[kind] · count(kind)``, ``utility = (H − S) / max(1, N)``, ``recall = H / N``
    (0 when ``N = 0``), ``precision = H / C`` and ``precise = 1`` when ``C > 0``, and the log loss
    ``-(y log p + (1 - y) log(1 - p))`` with ``p`` the effective confidence clipped to
    ``[eps, 1 - eps]`` and ``y`` true and relevant now, summed in rank order — a fact's loss is
    ``-log f`` (``f = p`` or ``1 - p``), and where ``f <= 0.989`` (a loss of at least 0.011) the ``f`` are
    multiplied and the product's log taken once per budget: a log is most of the cost of a fact, and
    the product's rounding (one ulp a factor) is then at most 1e-14 of the loss it carries, so the
    sums match a sum of logs to 1e-12 (relative), as the tests require. A selected fact's code
    and label are its state's (``flags``, :func:`pack_flags`) unless the state is ``varying``: then, with
    ``inline``, its triple's flags at the point's time — :func:`truth_flag` is constant between two of
    the triple's breakpoints, and ``breaks`` (``_bp_off``, ``_bp_t``, ``_bp_flag``, ``_bp_before``)
    holds them packed (code | ``TRUE``) from each breakpoint on and before the first — else the next
    of ``pair_code``/``pair_true`` (the varying pairs, in the selection's order)."""
    n_b, n_points = len(budgets), len(held)
    bp_off, bp_t, bp_flag, bp_before = breaks
    counts = np.zeros((n_b, 6))
    loss = np.zeros(n_b)
    # the budgets in the order a point's ranks reach them (a stable insertion sort of a few numbers;
    # np.argsort compiled costs 0.4 s of a first run)
    ascending = np.arange(n_b)
    for b in range(1, n_b):
        j = b
        while j > 0 and budgets[ascending[j - 1]] > budgets[ascending[j]]:
            ascending[j - 1], ascending[j] = ascending[j], ascending[j - 1]
            j -= 1
    running = np.zeros(6)  # the point's facts so far, by code
    i = 0
    for p in range(n_points):
        for j in range(6):
            running[j] = 0.0
        acc, prod = 0.0, 1.0  # the log loss of the facts so far: acc - log(prod)
        tp = t[p]
        reached = 0  # budgets (of ``ascending``) whose counts and loss are taken
        for r in range(held[p]):
            s = best[p, r]
            flag = flags[s]  # one byte per state read, not three arrays
            if flag < VARYING:
                c, y = flag & CODE, flag >= TRUE
            elif inline:  # the triple's flags from its last breakpoint at or before the point's time
                x = tr[s]
                j = search_right(bp_t, bp_off[x], bp_off[x + 1], tp) - 1
                flag = bp_flag[j] if j >= bp_off[x] else bp_before[x]
                c, y = flag & CODE, flag >= TRUE
            else:
                c, y = pair_code[i], pair_true[i]
                i += 1
            q = min(max(value[p, r], eps), 1.0 - eps)
            f = q if y else 1.0 - q  # the fact's loss is -log f
            if f <= 0.989:  # a loss of at least 0.011: into the product, its log taken once
                prod *= f
                if prod < 1e-280:  # factors are >= eps: the product stays a normal number
                    acc -= np.log(prod)
                    prod = 1.0
            else:
                acc += -np.log(q) if y else -np.log1p(-q)
            # one running count per code, copied to a budget's counts at its last rank (a loop over
            # the budgets at every rank, updating each one's counts, cost half the kernel); copied
            # element by element: an array assignment (``counts[b] = running``) took 2.5 s to compile
            running[c] += 1.0
            while reached < n_b and r + 1 == budgets[ascending[reached]]:
                for j in range(6):
                    counts[ascending[reached], j] = running[j]
                loss[ascending[reached]] = acc - np.log(prod)
                reached += 1
        while reached < n_b:  # budgets wider than the point's context: all of it
            for j in range(6):
                counts[ascending[reached], j] = running[j]
            loss[ascending[reached]] = acc - np.log(prod)
            reached += 1
        n = needed[p]
        row = cell[p]
        for b in range(n_b):
            h = counts[b, 1]
            ctx = counts[b, 0] + counts[b, 1] + counts[b, 2] + counts[b, 3] + counts[b, 4] + counts[b, 5]
            charged = costs[0] * counts[b, 2] + costs[1] * counts[b, 3] + costs[2] * counts[b, 4] + \
                costs[3] * counts[b, 5]
            out = sums[row, b]
            out[slots[0]] += 1.0
            out[slots[1]] += n
            out[slots[2]] += h
            out[slots[3]] += ctx
            out[slots[4]] += charged
            for j in range(4):
                out[slots[5 + j]] += counts[b, 2 + j]
            out[slots[9]] += (h - charged) / max(1.0, n)
            out[slots[10]] += h / max(n, 1.0) if n > 0 else 0.0
            out[slots[11]] += h / max(ctx, 1.0) if ctx > 0 else 0.0
            out[slots[12]] += 1.0 if ctx > 0 else 0.0
            out[slots[13]] += loss[b]
            out[slots[14]] += ctx


@njit
def last_from(off, frm, tr, t):  # pragma: no cover - compiled
    """Index of the last of triple ``tr``'s intervals (``off[tr] … off[tr + 1]`` of the sorted starts
    ``frm``) that starts at or before ``t``; -1 when none does (or the triple has none)."""
    if tr >= len(off) - 1:
        return -1
    first = off[tr]
    a = search_right(frm, first, off[tr + 1], t)
    return a - 1 if a > first else -1


@njit
def next_break(bp_off, bp_t, tr, t):  # pragma: no cover - compiled
    """The first of triple ``tr``'s breakpoints after ``t`` (:meth:`ContextEvaluator._prepare_breakpoints`;
    the largest int64 when none): its flags at ``t`` hold at every scored time before it."""
    if tr >= len(bp_off) - 1:
        return np.iinfo(np.int64).max
    j = search_right(bp_t, bp_off[tr], bp_off[tr + 1], t)
    return bp_t[j] if j < bp_off[tr + 1] else np.iinfo(np.int64).max


@njit
def truth_flag(tr, t, tt_off, tt_from, tt_end, tt_nfrom, tv_off, tv_from, tv_end, first_true, passing
                ):  # pragma: no cover - compiled
    """(needed, code, true and relevant now) of triple ``tr`` at ``t``, from truth: true and relevant
    when one of its true-and-relevant intervals ``[from, end)`` covers ``t``, needed when also past
    that interval's needed-from; otherwise its code is 5 (unneeded) when true and relevant or true and
    said in passing, 3 (expired) when true, 2 (stale) when it was true before ``t``, 4 (false) when
    never."""
    i = last_from(tt_off, tt_from, tr, t)
    true_now = i >= 0 and t < tt_end[i]
    needed = true_now and tt_nfrom[i] <= t
    if needed:
        return True, 1, True
    j = last_from(tv_off, tv_from, tr, t)
    known = tr < len(first_true)
    if j >= 0 and t < tv_end[j]:
        return False, 5 if (true_now or (known and passing[tr])) else 3, true_now
    return False, 2 if (known and first_true[tr] < t) else 4, true_now


@njit
def truth_flags(tr, t, tt_off, tt_from, tt_end, tt_nfrom, tv_off, tv_from, tv_end, first_true, passing
                 ):  # pragma: no cover - compiled
    """:func:`truth_flag` of each (``tr[i]``, ``t[i]``)."""
    n = len(tr)
    needed = np.empty(n, np.bool_)
    code = np.empty(n, np.int64)
    true_now = np.empty(n, np.bool_)
    for i in range(n):
        needed[i], code[i], true_now[i] = truth_flag(tr[i], t[i], tt_off, tt_from, tt_end, tt_nfrom, tv_off,
                                                      tv_from, tv_end, first_true, passing)
    return needed, code, true_now


@njit
def next_breaks(tr, t, bp_off, bp_t):  # pragma: no cover - compiled
    """:func:`next_break` of each (``tr[i]``, ``t[i]``): with ``t`` a state's first point's time, its
    flags there hold at each of its points before this time — they may change over its points
    (the state *varies*) where it is at or before its last point's time."""
    n = len(tr)
    out = np.empty(n, np.int64)
    for i in range(n):
        out[i] = next_break(bp_off, bp_t, tr[i], t[i])
    return out

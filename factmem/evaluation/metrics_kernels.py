"""The compiled passes of the checkpoint metrics (:class:`factmem.evaluation.metrics.Evaluator`).

Loops over checkpoints, states and calibration samples, compiled with the project's
:func:`~factmem.core.compiled.njit` (cached on disk): how long a state stays believed
(:func:`believed_until`), the per-checkpoint counts of believed, true, needed and stale facts in one
pass (:func:`coverage`), calibration's predictions laid out by (label, kind) for in-place sorts
(:func:`by_label_and_kind`), those sorted runs merged into one (:func:`merge_runs`) and the
calibration sums in one pass (:func:`calibration_pass`). The rules are documented where the
evaluator calls them; each lives only here. How long a state is held (:func:`held_until`) is one pass
too.
"""

from __future__ import annotations

import numpy as np

from factmem.core.compiled import grid_position, njit, search_left, search_right

__all__ = ["held_until", "believed_until", "coverage", "by_label_and_kind", "merge_runs", "calibration_pass"]


@njit
def held_until(end, reason, cp, step, open_end, reinforced, superseded):  # pragma: no cover - compiled
    """Per state: one past the last checkpoint it is held at — the first checkpoint at or after its
    visible end (its ``end``, or one second later when an event ended it, ``reason`` reinforced or
    superseded: the event is seen only after its instant); ``len(cp)`` when it is open (``open_end``).
    ``step``: the checkpoints' spacing when even (the search is then arithmetic,
    :func:`~factmem.core.compiled.grid_position`), else 0. One pass (numpy took ten)."""
    n = len(cp)
    out = np.empty(len(end), np.int64)
    for i in range(len(end)):
        visible = end[i]
        if visible == open_end:
            out[i] = n
            continue
        why = reason[i]
        if why == reinforced or why == superseded:
            visible += 1
        out[i] = grid_position(visible, cp[0], step, n, True) if step > 0 else search_left(cp, 0, n, visible)
    return out


@njit
def believed_until(cp, conf, rate, start, first_held, end_held, thr, day):  # pragma: no cover - compiled
    """Per state: one past the last checkpoint ``k`` in ``[first_held, end_held)`` with
    ``conf × exp(−rate × max(0, (cp[k] − start) / day)) >= thr`` (at least ``first_held``). The boundary is
    guessed from ``log(conf / thr) / rate`` and then moved checkpoint by checkpoint until exact."""
    n = len(conf)
    out = np.empty(n, np.int64)
    for s in range(n):
        first, end = first_held[s], end_held[s]
        conf_s, rate_s, start_s = conf[s], rate[s], start[s]
        if end <= first:
            out[s] = first
            continue
        if conf_s < thr:
            until = first
        elif rate_s > 0 and thr > 0:
            bound = start_s + min(np.log(conf_s / thr) / rate_s, 1e12) * day  # the boundary's time, roughly
            until = search_right(cp, first, end, bound)  # the first checkpoint past it, in [first, end]
        else:
            until = end
        while until > first and not conf_s * np.exp(-rate_s * max(0.0, (cp[until - 1] - start_s) / day)) >= thr:
            until -= 1
        while until < end and conf_s * np.exp(-rate_s * max(0.0, (cp[until] - start_s) / day)) >= thr:
            until += 1
        out[s] = until
    return out


@njit
def coverage(n, first_held, end_believed, earliest_end, pair_state, pair_truth, t_from_k, t_end_k,
             t_needed_k):  # pragma: no cover - compiled
    """Per checkpoint ``0 … n − 1`` (float64 counts): states believed (``[first_held, end_believed)``),
    and of them true (a truth row of the triple covers the checkpoint: ``[max(first_held, t_from_k),
    min(end_believed, t_end_k))`` over the (state, truth row) pairs ``pair_state``, ``pair_truth``), needed
    (from ``t_needed_k``) and stale (from ``earliest_end``, the triple's earliest truth end, and not true) —
    each :func:`~factmem.evaluation.arrays.cover_count` of those ranges."""
    d = np.zeros((5, n + 1), np.int64)  # believed, true, needed, stale (all), stale (true)

    def add(row, lo, hi):
        if hi > lo:
            if lo <= n:
                d[row, lo] += 1
            if hi <= n:
                d[row, hi] -= 1

    for s in range(len(first_held)):
        add(0, first_held[s], end_believed[s])
        add(3, max(first_held[s], earliest_end[s]), end_believed[s])
    for q in range(len(pair_state)):
        s, t = pair_state[q], pair_truth[q]
        lo, hi = max(first_held[s], t_from_k[t]), min(end_believed[s], t_end_k[t])
        add(1, lo, hi)
        add(2, max(first_held[s], t_needed_k[t]), hi)
        add(4, max(lo, earliest_end[s]), hi)
    out = np.zeros((5, n))
    for row in range(5):
        run = 0
        for k in range(n):
            run += d[row, k]
            out[row, k] = run
    return out[0], out[1], out[2], out[3] - out[4]


@njit
def by_label_and_kind(values, group, n_kinds):  # pragma: no cover - compiled
    """``values`` laid out by (label, kind), each block in input order — slot ``label × n_kinds + kind``
    for ``group = 2 × kind + label`` — and the slots' bounds: slot ``i`` is ``parts[bounds[i]:bounds[i + 1]]``
    (negatives first, then positives)."""
    bounds = np.zeros(2 * n_kinds + 1, np.int64)
    for i in range(len(group)):
        g = group[i]
        bounds[(g % 2) * n_kinds + g // 2 + 1] += 1
    for slot in range(2 * n_kinds):
        bounds[slot + 1] += bounds[slot]
    fill = bounds[:-1].copy()
    parts = np.empty(len(values))
    for i in range(len(values)):
        g = group[i]
        slot = (g % 2) * n_kinds + g // 2
        parts[fill[slot]] = values[i]
        fill[slot] += 1
    return parts, bounds


@njit
def merge_runs(values, bounds):  # pragma: no cover - compiled
    """The sorted runs ``values[bounds[i]:bounds[i + 1]]`` (each ascending) merged into one ascending
    array: at every step the least of the runs' heads (the first run's on a tie) — what ``np.sort`` of
    their concatenation gives, in one pass instead of a sort (the values hold no NaN)."""
    n_runs = len(bounds) - 1
    head = bounds[:-1].copy()
    out = np.empty(bounds[n_runs] - bounds[0])
    for i in range(len(out)):
        pick = -1
        for r in range(n_runs):
            if head[r] < bounds[r + 1] and (pick < 0 or values[head[r]] < values[head[pick]]):
                pick = r
        out[i] = values[head[pick]]
        head[pick] += 1
    return out


@njit
def calibration_pass(cal_first, cal_end, pair_start, truth_cal_first, truth_cal_end, t_cal, start, conf, rate, kind,
                      triple_kind, first_mention, eps, day, age_edges, n_kinds, n_rel):  # pragma: no cover - compiled
    """One pass over the held samples — state ``s`` at calibration checkpoints ``cal_first[s] … cal_end[s] − 1``
    (times ``t_cal``), in that order — and the sums calibration reads from them.

    Per sample: the prediction ``p = confidence × exp(−rate × max(0, age))`` clipped to ``[eps, 1 − eps]``
    (``pc``); the label ``y``: a true-and-relevant interval of the state's triple covers the checkpoint
    (its truth rows ``pair_start[s] …``, as calibration ranks
    ``[truth_cal_first, truth_cal_end)``); the loss
    ``−(y log pc + (1 − y) log(1 − pc))``; ``group`` = 2 × kind + y (for the AUC's sorts).
    Sums: per checkpoint the loss, the samples, those of mentioned triples and of them the true ones
    (also by the triple's kind); per kind (held samples, loss, Brier); RMSE(bins) counts, predictions
    and labels per (kind, age bucket); reliability per (kind, bin) and over all kinds."""
    n_states = len(cal_first)
    total = 0
    for s in range(n_states):
        if cal_end[s] > cal_first[s]:
            total += cal_end[s] - cal_first[s]
    m_cal = len(t_cal)
    n_edges = len(age_edges)
    pc = np.empty(total)
    group = np.empty(total, np.int8)
    ck_loss = np.zeros(m_cal)
    ck_n = np.zeros(m_cal)
    held_n = np.zeros(m_cal)
    held_true = np.zeros(m_cal)
    held_n_k = np.zeros((n_kinds, m_cal))
    held_true_k = np.zeros((n_kinds, m_cal))
    kind_sums = np.zeros((n_kinds, 3))  # held, loss, brier
    bin_n = np.zeros(n_kinds * n_edges, np.int64)
    bin_p = np.zeros(n_kinds * n_edges)
    bin_y = np.zeros(n_kinds * n_edges)
    rel = np.zeros((3, n_kinds, n_rel))  # n, p, y
    rel_all = np.zeros((3, n_rel))
    i = 0
    for s in range(n_states):
        k = kind[s]
        triple_k = triple_kind[s]
        for r in range(cal_first[s], cal_end[s]):
            t = t_cal[r]
            age = (t - start[s]) / day
            p = conf[s] * np.exp(-rate[s] * max(0.0, age))
            y = 0
            for j in range(pair_start[s], pair_start[s + 1]):
                if truth_cal_first[j] <= r < truth_cal_end[j]:
                    y = 1
                    break
            clipped = min(max(p, eps), 1.0 - eps)
            loss = -np.log(clipped) if y else -np.log1p(-clipped)
            pc[i] = clipped
            group[i] = 2 * k + y
            i += 1
            ck_loss[r] += loss
            ck_n[r] += 1.0
            if first_mention[s] < t:
                held_n[r] += 1.0
                held_true[r] += y
                if 0 <= triple_k < n_kinds:
                    held_n_k[triple_k, r] += 1.0
                    held_true_k[triple_k, r] += y
            kind_sums[k, 0] += 1.0
            kind_sums[k, 1] += loss
            kind_sums[k, 2] += (clipped - y) ** 2
            # RMSE(bins): the age bucket (edges[a] <= age < edges[a + 1]; the last one open)
            a = 0
            while a < n_edges - 2 and age >= age_edges[a + 1]:
                a += 1
            cell = k * n_edges + a
            bin_n[cell] += 1
            bin_p[cell] += clipped
            bin_y[cell] += y
            b = min(int(clipped * n_rel), n_rel - 1)
            rel[0, k, b] += 1.0
            rel[1, k, b] += clipped
            rel[2, k, b] += y
            rel_all[0, b] += 1.0
            rel_all[1, b] += clipped
            rel_all[2, b] += y
    return (pc, group, ck_loss, ck_n, held_n, held_true, held_n_k, held_true_k, kind_sums,
            (bin_n, bin_p, bin_y), rel, rel_all)

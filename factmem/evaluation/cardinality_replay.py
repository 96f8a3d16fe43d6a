"""Cardinality policies measured by replay: what the memory supersedes, counted against the truth.

A policy's *registry* — its multi-valued predicates, and for the richer policies the objects
exempt from supersession (:class:`~factmem.evaluation.cardinality_policy.ConcurrentObjects`) or
the time from which a subject's predicate is multi-valued (the restore policy) — decides which
facts a mention supersedes. :func:`replay_registry` replays a log's mentions in log order (ts,
then row order) through the memory's supersession rule with nothing forgotten (no decay, nothing
archived: the keep-everything reference, so that the registry alone decides), exactly what
``FactStore.replay`` writes as ``supersedes_id`` with those parameters:

* a single-valued (subject, predicate): a mention of an active object reinforces it; any other
  object is inserted and supersedes the active fact;
* a multi-valued predicate: one fact per (subject, predicate, object), never superseded;
* exempt objects (single-valued predicates): an object that *stays* is never superseded, one that
  *joins* supersedes nothing when it arrives; a new object that does not join supersedes every
  active fact of the key that does not stay;
* a switch time (restore): from then on nothing of the key is superseded.

**Counted against the truth** (:func:`replay_errors`), as a user counts from ``supersedes_id``:

* *false*: a still-valid value the memory superseded — a truth row of ``x`` by which ``x`` was
  still valid when some fact of ``x`` was superseded (counted once per value, however often
  alternating mentions drop and re-insert it; :func:`replay_errors` also returns every such
  supersession). A supersession of ``x`` by ``y`` at ``t`` drops a still-valid value when, under the
  ``"handover"`` rule ``x`` was still valid when, for some truth row of ``x`` begun at or before
  ``t``, the period that row last held in begins after the period of ``t`` ends (``t``'s period is
  the unit of ``y``'s start bound: an old value whose end year is the year of the supersession was
  handed over that year); under ``"inclusive"``, when such a row's ``valid_to`` is after ``t``. (The
  change counting judges a change by the previous row in start order only; where a value has
  several rows the two can differ even with one mention per fact.) A
  supersession of a value with no truth row begun by ``t`` is no error.
* *missed*: a value change of the truth (:func:`~factmem.evaluation.cardinality_choice.value_changes`)
  whose old value had ended by the same rule and was still held right after the new value's first
  mention at or after its start (a change whose new value is never mentioned is not counted).

On a log with one mention per fact at its start the replay's supersessions are the value changes
of :mod:`factmem.evaluation.cardinality_choice` for every binary registry (the counts differ only
where a value has several truth rows); repeated mentions of an old value re-insert it and supersede
the newer one, which the change counting never sees.

Speed: the plain keys (no exempt object) are replayed as runs over whole arrays; keys holding an
exempt object are replayed event by event (a loop over those keys' mentions only: few keys).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from factmem.core.codes import OPEN
from factmem.errors import InputError
from factmem.evaluation.cardinality_choice import (
    _check_rule,
    _end_period_start,
    _period_column,
    _start_period_end,
    value_changes,
)

__all__ = ["Replay", "replay_errors", "replay_registry"]

_NEVER = np.iinfo(np.int64).max


@dataclass
class Replay:
    """What a replay did. ``facts``: one row per fact (subject, predicate, object, ``insert`` and
    ``end`` as event positions in log order, ``end`` = never when still active). ``supersessions``:
    one row per ``supersedes_id`` (subject, predicate, ``old_object``, ``new_object``, ``ts``, ``at``
    = event position, ``old_inserted`` = when the superseded fact was inserted)."""

    facts: pd.DataFrame
    supersessions: pd.DataFrame


def _as_flags(values, n: int, name: str) -> np.ndarray:
    if values is None:
        return np.zeros(n, bool)
    out = np.asarray(values, bool)
    if out.shape != (n,):
        raise InputError(f"{name} must have one entry per event ({n}), got shape {out.shape}")
    return out


def replay_registry(events: pd.DataFrame, multi: np.ndarray, stay: np.ndarray | None = None,
                    join: np.ndarray | None = None, switch_at: np.ndarray | None = None) -> Replay:
    """Replay ``events`` (subject, predicate, object, ts; in log order) under a registry given per
    event: ``multi`` (its predicate is multi-valued for its subject), ``stay`` / ``join`` (its
    object is exempt in that role), ``switch_at`` (the time from which its subject's predicate
    supersedes nothing; ``OPEN`` for never). See the module docstring for the rule."""
    n = len(events)
    multi = _as_flags(multi, n, "multi")
    stay, join = _as_flags(stay, n, "stay"), _as_flags(join, n, "join")
    switch = np.full(n, OPEN, np.int64) if switch_at is None else np.asarray(switch_at, np.int64)
    ts = events["ts"].to_numpy(np.int64)
    if n and (np.diff(ts) < 0).any():
        raise InputError("events must be in log order (sorted by ts)")
    subj = events["subject"].to_numpy(object)
    pred = events["predicate"].to_numpy(object)
    obj = events["object"].to_numpy(object)
    gpos = np.arange(n, dtype=np.int64)
    sp = pd.MultiIndex.from_arrays([subj, pred]).factorize()[0].astype(np.int64)
    # a key with an exempt object (single-valued) takes the event-by-event path
    special_key = np.zeros(int(sp.max()) + 1 if n else 0, bool)
    special_key[sp[(stay | join) & ~multi]] = True
    special = special_key[sp] & ~multi
    facts, sups = [], []

    # multi-valued: one fact per triple from its first mention, never superseded
    m = np.flatnonzero(multi)
    if len(m):
        first = pd.DataFrame({"s": subj[m], "p": pred[m], "o": obj[m], "g": m}).drop_duplicates(["s", "p", "o"])
        facts.append(pd.DataFrame({"subject": first["s"].to_numpy(object), "predicate": first["p"].to_numpy(object),
                                   "object": first["o"].to_numpy(object), "insert": first["g"].to_numpy(np.int64),
                                   "end": _NEVER}))

    # plain single-valued keys: runs of equal objects; a run before the key's switch supersedes the
    # previous one; from the switch on, each object not yet active gets one fact, and nothing ends
    plain = np.flatnonzero(~multi & ~special)
    if len(plain):
        order = plain[np.lexsort((gpos[plain], sp[plain]))]
        k, o, g, sw = sp[order], obj[order], gpos[order], switch[order]
        after = ts[order] >= sw
        same_key = np.r_[False, k[1:] == k[:-1]]
        new_run = ~same_key | np.r_[True, o[1:] != o[:-1]]
        # before the switch: runs; a run starting after the switch does not supersede
        run_start = new_run & ~after
        sup = run_start & same_key  # supersedes the previous run (which started before the switch)
        idx_run = np.flatnonzero(run_start)
        run_key = k[idx_run]
        next_same = np.r_[run_key[1:] == run_key[:-1], False]
        # a run's fact ends at the next run start of its key that lies before the switch
        end = np.where(next_same, g[np.r_[idx_run[1:], 0]] if len(idx_run) else 0, _NEVER)
        facts.append(pd.DataFrame({"subject": subj[g[idx_run]], "predicate": pred[g[idx_run]], "object": o[idx_run],
                                   "insert": g[idx_run], "end": end.astype(np.int64)}))
        s_idx = np.flatnonzero(sup)
        prev_obj = o[np.maximum(s_idx - 1, 0)]
        # the fact superseded is the previous run's (a run ends where the next begins)
        run_id = np.cumsum(run_start) - 1
        prev_run = idx_run[np.maximum(run_id[s_idx] - 1, 0)] if len(idx_run) else s_idx
        sups.append(pd.DataFrame({"subject": subj[g[s_idx]], "predicate": pred[g[s_idx]], "old_object": prev_obj,
                                  "new_object": o[s_idx], "ts": ts[g[s_idx]], "at": g[s_idx],
                                  "old_inserted": ts[g[prev_run]]}))
        # after the switch: objects first mentioned there, other than the one active at the switch
        a_idx = np.flatnonzero(after)
        if len(a_idx):
            lb_key = k[idx_run]
            keep_last = np.r_[lb_key[1:] != lb_key[:-1], True] if len(lb_key) else np.zeros(0, bool)
            active_at_switch = pd.Series(o[idx_run][keep_last], index=lb_key[keep_last], dtype=object)
            frame = pd.DataFrame({"k": k[a_idx], "o": o[a_idx], "g": g[a_idx]}).drop_duplicates(["k", "o"])
            held = (active_at_switch.reindex(frame["k"].to_numpy()).to_numpy(object) == frame["o"].to_numpy(object))
            frame = frame[~held]
            gg = frame["g"].to_numpy(np.int64)
            facts.append(pd.DataFrame({"subject": subj[gg], "predicate": pred[gg], "object": frame["o"].to_numpy(object),
                                       "insert": gg, "end": _NEVER}))

    # keys with exempt objects: event by event (only their mentions)
    s_ev = np.flatnonzero(special)
    if len(s_ev):
        order = s_ev[np.lexsort((gpos[s_ev], sp[s_ev]))]
        f_rows: list[tuple] = []
        s_rows: list[tuple] = []
        key_now = -1
        active: dict[object, tuple[int, bool]] = {}  # object -> (inserting event, stays)
        for i in order:  # a loop over the mentions of keys holding an exempt object
            if sp[i] != key_now:
                for ob, (ins, _) in active.items():
                    f_rows.append((subj[ins], pred[ins], ob, ins, _NEVER))
                key_now, active = sp[i], {}
            o_i = obj[i]
            if o_i in active:
                continue
            if not join[i] and ts[i] < switch[i]:
                for ob in [ob for ob, (_, st) in active.items() if not st]:
                    ins, _ = active.pop(ob)
                    f_rows.append((subj[ins], pred[ins], ob, ins, int(i)))
                    s_rows.append((subj[i], pred[i], ob, o_i, int(ts[i]), int(i), int(ts[ins])))
            active[o_i] = (int(i), bool(stay[i]))
        for ob, (ins, _) in active.items():
            f_rows.append((subj[ins], pred[ins], ob, ins, _NEVER))
        facts.append(pd.DataFrame(f_rows, columns=["subject", "predicate", "object", "insert", "end"]))
        sups.append(pd.DataFrame(s_rows, columns=["subject", "predicate", "old_object", "new_object", "ts", "at",
                                                  "old_inserted"]))

    fact_cols = ["subject", "predicate", "object", "insert", "end"]
    sup_cols = ["subject", "predicate", "old_object", "new_object", "ts", "at", "old_inserted"]
    f = pd.concat([x for x in facts if len(x)], ignore_index=True) if any(len(x) for x in facts) else \
        pd.DataFrame(columns=fact_cols)
    s = pd.concat([x for x in sups if len(x)], ignore_index=True) if any(len(x) for x in sups) else \
        pd.DataFrame(columns=sup_cols)
    f = f.astype({"insert": np.int64, "end": np.int64}).sort_values("insert", kind="stable").reset_index(drop=True)
    s = s.astype({"ts": np.int64, "at": np.int64, "old_inserted": np.int64}).sort_values("at", kind="stable").reset_index(drop=True)
    return Replay(facts=f[fact_cols], supersessions=s[sup_cols])


def _truth_rows(truth: pd.DataFrame) -> pd.DataFrame:
    """The truth rows that were ever true, with integer bounds and their periods."""
    vf = truth["valid_from"].to_numpy(np.int64)
    vt = pd.array(truth["valid_to"], dtype="Int64").to_numpy(dtype=np.int64, na_value=OPEN)
    ever = vt > vf
    return pd.DataFrame({
        "subject": truth["subject"].to_numpy(object)[ever], "predicate": truth["predicate"].to_numpy(object)[ever],
        "object": truth["object"].to_numpy(object)[ever], "vf": vf[ever], "vt": vt[ever],
        "start_period": _period_column(truth, "start_period")[ever],
        "end_period": _period_column(truth, "end_period")[ever],
    })


def _latest_row(rows: pd.DataFrame, subject, predicate, obj, t: np.ndarray) -> pd.DataFrame:
    """Per query, the truth row of (subject, predicate, object) that began last at or before ``t``
    (NaN columns where none did), in query order."""
    q = pd.DataFrame({"subject": np.asarray(subject, object), "predicate": np.asarray(predicate, object),
                      "object": np.asarray(obj, object), "t": np.asarray(t, np.int64), "q": np.arange(len(t))})
    if not len(q):
        return q.assign(vf=np.zeros(0, np.int64), vt=np.zeros(0, np.int64), start_period=None, end_period=None,
                        found=np.zeros(0, bool))
    r = rows.sort_values("vf", kind="stable")
    got = pd.merge_asof(q.sort_values("t", kind="stable"), r, left_on="t", right_on="vf",
                        by=["subject", "predicate", "object"], direction="backward")
    got = got.sort_values("q").reset_index(drop=True)
    got["found"] = got["vf"].notna().to_numpy()
    return got


def _still_valid(rows: pd.DataFrame, sup: pd.DataFrame, rule: str) -> tuple[np.ndarray, np.ndarray]:
    """Per supersession, whether the superseded value was still valid at its time (module docstring):
    by some truth row of it begun at or before then (a running maximum of the rows' reach); and that
    row (the one reaching furthest; -1 when none is valid)."""
    t = sup["ts"].to_numpy(np.int64)
    reach = rows["vt"].to_numpy(np.int64) if rule == "inclusive" else \
        _end_period_start(rows["vt"].to_numpy(np.int64), rows["end_period"].to_numpy(object))
    r = rows.assign(reach=reach, rid=np.arange(len(rows))).sort_values(["subject", "predicate", "object", "vf"],
                                                                       kind="stable")
    groups = r.groupby(["subject", "predicate", "object"], sort=False)
    best = groups["reach"].cummax()
    # the row reaching furthest so far: the latest row that set the running maximum
    r["best_rid"] = r["rid"].where(r["reach"] == best).groupby([r["subject"], r["predicate"], r["object"]],
                                                              sort=False).ffill()
    r["reach"] = best
    r = r.reset_index(drop=True)
    old = _latest_row(r.assign(pos=np.arange(len(r))), sup["subject"], sup["predicate"], sup["old_object"], t)
    found = old["found"].to_numpy(bool)
    pos = old["pos"].fillna(0).to_numpy(np.float64).astype(np.int64)
    got = np.where(found, r["reach"].to_numpy(np.int64)[pos] if len(r) else 0, 0)
    row = np.where(found, r["best_rid"].to_numpy(np.float64)[pos] if len(r) else -1, -1).astype(np.int64)
    if rule == "inclusive":
        valid = found & (got > t)
    else:
        new = _latest_row(rows, sup["subject"], sup["predicate"], sup["new_object"], t)
        period = np.asarray(np.where(new["found"].to_numpy(bool), new["start_period"].to_numpy(object), None),
                            dtype=object)
        valid = found & (got >= _start_period_end(t.copy(), period))
    return valid, np.where(valid, row, -1)


def replay_errors(replay: Replay, truth: pd.DataFrame, events: pd.DataFrame, *, rule: str = "handover",
                  changes: pd.DataFrame | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The replay's false supersessions and missed changes (module docstring).

    Returns ``(supersessions, changes)``: the replay's supersessions with a boolean ``false`` (and
    ``value_row``, the truth value it dropped while valid: a value dropped several times, as
    alternating mentions do, is one false value), and
    the truth's value changes (``changes``, default :func:`value_changes` of ``truth``) with
    ``arrival`` (event position of the new value's first mention at or after its start, -1 if
    none), ``held`` (the old value still held right after it) and ``missed``.
    """
    _check_rule(rule)
    rows = _truth_rows(truth)
    sup = replay.supersessions.copy()
    valid, row = _still_valid(rows, sup, rule) if len(sup) else (np.zeros(0, bool), np.zeros(0, np.int64))
    sup["false"] = valid
    sup["value_row"] = row  # the truth row (of the ever-true rows, in truth order) it was still valid by
    ch = (value_changes(truth) if changes is None else changes).copy()
    label = f"still_valid_{rule}"
    # the new value's first mention at or after its start
    ev = pd.DataFrame({"subject": events["subject"].to_numpy(object), "predicate": events["predicate"].to_numpy(object),
                       "object": events["object"].to_numpy(object), "ts": events["ts"].to_numpy(np.int64),
                       "g": np.arange(len(events), dtype=np.int64)})
    q = pd.DataFrame({"subject": ch["subject"].to_numpy(object), "predicate": ch["predicate"].to_numpy(object),
                      "object": ch["new_object"].to_numpy(object), "t": ch["new_valid_from"].to_numpy(np.int64),
                      "q": np.arange(len(ch))})
    if len(q) and len(ev):
        got = pd.merge_asof(q.sort_values("t", kind="stable"), ev.sort_values("ts", kind="stable"), left_on="t",
                            right_on="ts", by=["subject", "predicate", "object"], direction="forward")
        got = got.sort_values("q")
        arrival = got["g"].fillna(-1).to_numpy(np.float64).astype(np.int64)
    else:
        arrival = np.full(len(ch), -1, np.int64)
    # the old value held right after the arrival: its latest fact inserted before, ending after it
    facts = replay.facts
    held = np.zeros(len(ch), bool)
    heard = arrival >= 0
    if heard.any() and len(facts):
        fq = pd.DataFrame({"subject": ch["subject"].to_numpy(object)[heard],
                           "predicate": ch["predicate"].to_numpy(object)[heard],
                           "object": ch["old_object"].to_numpy(object)[heard], "at": arrival[heard] - 1,
                           "q": np.flatnonzero(heard)})
        got = pd.merge_asof(fq.sort_values("at", kind="stable"), facts.sort_values("insert", kind="stable"),
                            left_on="at", right_on="insert", by=["subject", "predicate", "object"],
                            direction="backward").sort_values("q")
        end = got["end"].fillna(-1).to_numpy(np.float64)
        held[got["q"].to_numpy(np.int64)] = got["insert"].notna().to_numpy() & (end > arrival[heard])
    ch["arrival"] = arrival
    ch["held"] = held
    ch["missed"] = held & ~ch[label].to_numpy(bool)
    return sup, ch

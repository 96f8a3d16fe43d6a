"""An independent, plain-Python scorer of the metrics the reports use — no numpy tricks, no shared code
with ``factmem.evaluation``: loops over points and belief states, read against docs/design.md.

It is deliberately naive (quadratic loops), so that it can be checked by reading; the vectorized
evaluators are held to it on random small logs.
"""

from __future__ import annotations

import math
from collections import defaultdict

OPEN = 2**63 - 1
DAY = 86400.0


def _effective(state: dict, t: int) -> float:
    return state["confidence"] * math.exp(-state["rate"] * max(0.0, (t - state["start"]) / DAY))


def _held(state: dict, t: int) -> bool:
    """A checkpoint at t sees events with ts < t and consolidations at T <= t."""
    if not state["start"] < t:
        return False
    if state["reason"] in (0, 1):  # ended by an event at `end`: still held at t == end
        return t <= state["end"]
    return t < state["end"]


def session_points(events: list[dict], messages: list[dict]) -> list[tuple[str, str, int]]:
    """(session, subject, t): every session, for every subject it mentions, at its first message."""
    start: dict[str, int] = {}
    for m in messages:
        start[m["session_id"]] = min(start.get(m["session_id"], m["ts"]), m["ts"])
    pts = {(e["session_id"], e["subject"]) for e in events}
    return sorted((s, subj, start[s]) for s, subj in pts)


def context_scores(points, beliefs, truth, events, *, threshold: float, budget: int, stale_cost: float,
                   needed: str, multi_valued: frozenset = frozenset()) -> dict[str, float]:
    """Mean utility@k, recall@k, precision@k and per-point counts, over points with a needed fact.

    ``beliefs``: dicts with subject, predicate, object, start, end, reason, confidence, rate, fact.
    ``truth``: dicts with subject, predicate, object, valid_from, end (true and relevant until, OPEN).
    ``events``: dicts with ts, subject, predicate, object, session_id."""
    first_seen: dict = {}
    for b in beliefs:
        first_seen[b["fact"]] = min(first_seen.get(b["fact"], b["start"]), b["start"])
    totals = defaultdict(float)
    for session, subject, t in points:
        if needed == "truth":
            need = set()
            for r in truth:
                if r["subject"] != subject or not (r["valid_from"] <= t < r["end"]) or r["end"] <= r["valid_from"]:
                    continue
                tri = (r["subject"], r["predicate"], r["object"])
                if any((e["subject"], e["predicate"], e["object"]) == tri and r["valid_from"] <= e["ts"] < r["end"]
                       and e["ts"] < t for e in events):
                    need.add(tri)
        else:
            need = {(e["subject"], e["predicate"], e["object"]) for e in events
                    if e["session_id"] == session and e["subject"] == subject}
        if not need:
            continue
        cands = []
        for b in beliefs:
            if b["subject"] != subject or not _held(b, t):
                continue
            eff = _effective(b, t)
            if eff >= threshold:
                cands.append((-eff, -b["start"], -first_seen[b["fact"]], b["predicate"], b["object"], b))
        cands.sort(key=lambda c: c[:5])
        ctx = [c[5] for c in cands[:budget]]
        hits = charged = stale = false = 0
        ll = 0.0
        for b in ctx:
            tri = (b["subject"], b["predicate"], b["object"])
            if needed == "truth":
                rows = [r for r in truth if (r["subject"], r["predicate"], r["object"]) == tri and r["end"] > r["valid_from"]]
                true_now = any(r["valid_from"] <= t < r["end"] for r in rows)
                if tri in need:
                    hits += 1
                elif not true_now:
                    charged += 1
                    if any(r["valid_from"] < t for r in rows):
                        stale += 1
                    else:
                        false += 1
                p = min(max(_effective(b, t), 1e-4), 1 - 1e-4)
                ll += -math.log(p) if true_now else -math.log(1 - p)
            else:
                if tri in need:
                    hits += 1
                elif b["predicate"] not in multi_valued and any(
                        e["session_id"] == session and e["subject"] == subject and e["predicate"] == b["predicate"]
                        for e in events):
                    charged += 1
                    stale += 1
        n = len(need)
        totals["points"] += 1
        totals["utility"] += (hits - stale_cost * charged) / max(1, n)
        totals["recall"] += hits / n
        if ctx:
            totals["precision"] += hits / len(ctx)
            totals["precise"] += 1
        totals["hits"] += hits
        totals["charged"] += charged
        totals["stale"] += stale
        totals["false"] += false
        totals["context"] += len(ctx)
        totals["needed"] += n
        totals["log_loss"] += ll
    n = totals["points"]
    out = {k: totals[k] / n for k in ("utility", "recall", "hits", "charged", "stale", "false", "context", "needed")}
    out["precision"] = totals["precision"] / totals["precise"] if totals["precise"] else float("nan")
    out["log_loss"] = totals["log_loss"] / totals["context"] if needed == "truth" and totals["context"] else float("nan")
    out["points"] = n
    return out

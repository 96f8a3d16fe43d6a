"""An independent, plain-Python scorer of the metrics the reports use — no numpy tricks, no shared code
with ``factmem.evaluation``: loops over checkpoints, points and belief states, read against the
module docstrings of :mod:`factmem.evaluation.metrics` and :mod:`factmem.evaluation.context` and
docs/design.md.

* :func:`checkpoint_scores`: the checkpoint metrics (believed, precision, recall, needed, stale,
  lost with the list, calibration: log loss, Brier, AUC, held log loss, RMSE(bins) over kind × age,
  reliability bins, per-kind calibration, the calibration stride).
* :func:`context_scores`: the budgeted context metrics at session starts.

It is deliberately naive (loops, linear scans), so that it can be checked by reading; the vectorized
evaluators are held to it on random small logs (tests/test_scorer.py, tests/test_context.py).
"""

from __future__ import annotations

import math
from collections import defaultdict

OPEN = 2**63 - 1
DAY = 86400.0
EPS = 1e-4
KINDS = ("explicit", "user_preference", "episodic", "derived")
AGE_EDGES_DAYS = (0, 1, 3, 7, 14, 30, 60, 120)  # buckets [0, 1), [1, 3), ..., [120, inf) days


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


CHARGE_KINDS = ("stale", "expired", "false", "unneeded")


def context_scores(points, beliefs, truth, events, *, threshold: float, budget: int, costs: dict[str, float],
                   needed: str, multi_valued: frozenset = frozenset()) -> dict[str, float]:
    """Mean utility@k, recall@k, precision@k and per-point counts, over points with a needed fact.

    ``beliefs``: dicts with subject, predicate, object, start, end, reason, confidence, rate, fact.
    ``truth``: dicts with subject, predicate, object, valid_from, valid_to, relevant_until (None = open),
    noise. ``costs``: the cost of each of the four charge kinds. ``events``: dicts with ts, subject,
    predicate, object, session_id.

    A context fact that is not needed is, at t: *stale* if not true at t (valid_from <= t < valid_to)
    but true before; *false* if never true before t; *expired* if true at t but not relevant
    (past relevant_until) and not said in passing; *unneeded* if true and relevant (not mentioned
    since), or true and its triple has a truth row with noise = irrelevant. Next-session: *stale* if
    the session mentions another object of its single-valued predicate, else *unneeded*."""
    # overlapping rows of one triple are one stretch of truth (see true_intervals)
    spans = true_intervals([dict(triple=(r["subject"], r["predicate"], r["object"]), valid_from=r["valid_from"],
                                 valid_to=r["valid_to"], relevant_until=r["relevant_until"]) for r in truth])
    valid = true_intervals([dict(triple=(r["subject"], r["predicate"], r["object"]), valid_from=r["valid_from"],
                                 valid_to=r["valid_to"], relevant_until=None) for r in truth])
    passing = {(r["subject"], r["predicate"], r["object"]) for r in truth if r["noise"] == "irrelevant"}
    truth = [dict(subject=s, predicate=p, object=o, valid_from=a, end=b) for (s, p, o), runs in spans.items()
             for a, b in runs]
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
        hits = 0
        kinds = dict.fromkeys(CHARGE_KINDS, 0)
        ll = 0.0
        for b in ctx:
            tri = (b["subject"], b["predicate"], b["object"])
            if needed == "truth":
                rows = [r for r in truth if (r["subject"], r["predicate"], r["object"]) == tri and r["end"] > r["valid_from"]]
                true_now = any(r["valid_from"] <= t < r["end"] for r in rows)
                runs = valid.get(tri, [])
                true_at_t = any(a <= t < z for a, z in runs)
                if tri in need:
                    hits += 1
                elif true_at_t:
                    kinds["unneeded" if true_now or tri in passing else "expired"] += 1
                elif any(a < t for a, _ in runs):
                    kinds["stale"] += 1
                else:
                    kinds["false"] += 1
                p = min(max(_effective(b, t), 1e-4), 1 - 1e-4)
                ll += -math.log(p) if true_now else -math.log(1 - p)
            else:
                p = min(max(_effective(b, t), 1e-4), 1 - 1e-4)
                ll += -math.log(p) if tri in need else -math.log(1 - p)  # y: the session needs it
                if tri in need:
                    hits += 1
                elif b["predicate"] not in multi_valued and any(
                        e["session_id"] == session and e["subject"] == subject and e["predicate"] == b["predicate"]
                        for e in events):
                    kinds["stale"] += 1
                else:
                    kinds["unneeded"] += 1
        n = len(need)
        charged = sum(costs[k] * kinds[k] for k in CHARGE_KINDS)
        totals["points"] += 1
        totals["utility"] += (hits - charged) / max(1, n)
        totals["recall"] += hits / n
        if ctx:
            totals["precision"] += hits / len(ctx)
            totals["precise"] += 1
        totals["hits"] += hits
        totals["charged"] += charged
        for k in CHARGE_KINDS:
            totals[k] += kinds[k]
        totals["context"] += len(ctx)
        totals["needed"] += n
        totals["log_loss"] += ll
    n = totals["points"]
    out = {k: totals[k] / n if n else math.nan
           for k in ("utility", "recall", "hits", "charged", *CHARGE_KINDS, "context", "needed")}
    out["precision"] = totals["precision"] / totals["precise"] if totals["precise"] else float("nan")
    out["log_loss"] = totals["log_loss"] / totals["context"] if totals["context"] else float("nan")
    out["points"] = n
    return out


# -- the checkpoint metrics -----------------------------------------------------------------------------


def true_intervals(truth: list[dict]) -> dict[int, list[tuple[int, int]]]:
    """Per triple, the intervals [from, end) in which it is true and relevant (end = the earlier of
    valid_to and relevant_until). Rows of one triple that overlap describe one stretch of truth and
    are joined (a stretch "became true" at its earliest start); rows that only touch stay apart (an
    episode that recurs becomes true again); empty rows (never true) hold nothing."""
    rows: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for r in truth:
        end = min(OPEN if r["valid_to"] is None else r["valid_to"],
                  OPEN if r["relevant_until"] is None else r["relevant_until"])
        if end > r["valid_from"]:
            rows[r["triple"]].append((r["valid_from"], end))
    out: dict[int, list[tuple[int, int]]] = {}
    for triple, spans in rows.items():
        joined: list[tuple[int, int]] = []
        for a, b in sorted(spans):
            if joined and a < joined[-1][1]:
                joined[-1] = (joined[-1][0], max(joined[-1][1], b))
            else:
                joined.append((a, b))
        out[triple] = joined
    return out


def _bucket(age_days: float) -> int:
    return max(i for i, edge in enumerate(AGE_EDGES_DAYS) if edge <= age_days) if age_days >= 0 else 0


def _rmse_bins(samples: list[tuple[float, int, int, float]]) -> float:
    """(p, y, kind, age in days) -> sqrt of the bin-size-weighted mean of (mean p - mean y)^2 over
    kind × age buckets."""
    if not samples:
        return math.nan
    bins: dict = defaultdict(list)
    for p, y, kind, age in samples:
        bins[(kind, _bucket(age))].append((p, y))
    total = sum(len(v) for v in bins.values())
    acc = 0.0
    for members in bins.values():
        mp = sum(p for p, _ in members) / len(members)
        my = sum(y for _, y in members) / len(members)
        acc += len(members) * (mp - my) ** 2
    return math.sqrt(acc / total)


def _auc(samples: list[tuple[float, int]]) -> float:
    """Probability that a random positive scores above a random negative, ties half: walk the
    distinct values upwards, each positive winning against the negatives below it and half of
    those level with it."""
    pos: dict[float, int] = defaultdict(int)
    neg: dict[float, int] = defaultdict(int)
    for p, y in samples:
        (pos if y else neg)[p] += 1
    n_pos, n_neg = sum(pos.values()), sum(neg.values())
    if not n_pos or not n_neg:
        return math.nan
    wins, below = 0.0, 0
    for value in sorted(set(pos) | set(neg)):
        wins += pos[value] * (below + 0.5 * neg[value])
        below += neg[value]
    return wins / (n_pos * n_neg)


def _loss(p: float, y: int) -> float:
    return -math.log(p) if y else -math.log(1 - p)


def _summaries(samples: list[dict]) -> dict:
    n = len(samples)
    held = [s for s in samples if s["held"]]
    return {
        "samples": n, "held": len(held),
        "log_loss": sum(_loss(s["p"], s["y"]) for s in samples) / n if n else math.nan,
        "brier": sum((s["p"] - s["y"]) ** 2 for s in samples) / n if n else math.nan,
        "auc": _auc([(s["p"], s["y"]) for s in samples]),
        "rmse_bins": _rmse_bins([(s["p"], s["y"], s["kind"], s["age"]) for s in held]),
        "held_log_loss": sum(_loss(s["p"], s["y"]) for s in held) / len(held) if held else math.nan,
    }


def checkpoint_scores(beliefs: list[dict], truth: list[dict], mentions: list[tuple[int, int]],
                      checkpoints: list[int], threshold: float, *, max_samples: int = 2_000_000) -> dict:
    """The checkpoint metrics of :mod:`factmem.evaluation.metrics`, by brute force.

    ``beliefs``: dicts with triple, kind (code), start, end, reason, confidence, rate. ``truth``: dicts
    with triple, kind, valid_from, valid_to, relevant_until (None for open). ``mentions``: (triple, ts).
    Returns ``checkpoints`` (a list of per-checkpoint dicts), ``summary``, ``lost`` (a list of dicts),
    ``reliability`` (dicts kind, bin, p_mean, y_mean, n) and ``by_kind`` (dicts per kind)."""
    spans = true_intervals(truth)
    triple_kind = {r["triple"]: r["kind"] for r in truth}
    mentioned_at: dict[int, list[int]] = defaultdict(list)
    for triple, ts in mentions:
        mentioned_at[triple].append(ts)

    def covering(triple: int, t: int) -> tuple[int, int] | None:
        return next(((a, b) for a, b in spans.get(triple, []) if a <= t < b), None)

    def needed(triple: int, t: int) -> bool:
        """True and relevant at t, and mentioned since it became true, before t."""
        span = covering(triple, t)
        return span is not None and any(span[0] <= m < t for m in mentioned_at.get(triple, []))

    def was_true_before(triple: int, t: int) -> bool:
        return any(a < t for a, b in spans.get(triple, []))

    rows = []
    for t in checkpoints:
        held = [b for b in beliefs if _held(b, t)]
        believed = [b for b in held if _effective(b, t) >= threshold]
        true_believed = [b for b in believed if covering(b["triple"], t)]
        need = {tr for tr in set(spans) if needed(tr, t)}
        hit = [b for b in believed if b["triple"] in need]
        stale = [b for b in believed if not covering(b["triple"], t) and was_true_before(b["triple"], t)]
        rows.append({"t": t, "believed": len(believed), "true_believed": len(true_believed), "needed": len(need),
                     "precision": len(true_believed) / len(believed) if believed else math.nan,
                     "recall": len(hit) / len(need) if need else math.nan, "stale": len(stale)})

    # lost: archived (by decay or pruning) while true and relevant, and mentioned again later in the
    # same stretch of truth; counted in the window from one checkpoint period before the first
    step = checkpoints[1] - checkpoints[0] if len(checkpoints) > 1 else 86400
    lost = []
    for b in beliefs:
        if b["reason"] not in (2, 4):
            continue
        at = b["end"]
        if not checkpoints[0] - step < at <= checkpoints[-1]:
            continue
        span = covering(b["triple"], at)
        if span is None:
            continue
        # later: events at the archival instant come after it (consolidate(T) runs before the events
        # at T), unless that is the state's own observation
        again = [m for m in mentioned_at.get(b["triple"], []) if at <= m < span[1] and m > b["start"]]
        if again:
            lost.append({"triple": b["triple"], "kind": b["kind"], "archived_at": at, "needed_again_at": min(again),
                         "why": "pruned" if b["reason"] == 4 else "decay"})
    lost.sort(key=lambda r: (r["archived_at"], r["triple"]))
    for r in rows:
        r["lost"] = sum(1 for x in lost if x["archived_at"] <= r["t"])

    # calibration: at each calibration checkpoint, every held state predicts its effective confidence,
    # every triple mentioned before t and not held predicts 0; clipped to [eps, 1 - eps]
    # the sample: every stride-th checkpoint from the last, the stride from the population (the
    # triples mentioned before each checkpoint, summed), which does not depend on the beliefs
    population = sum(1 for t in checkpoints for stamps in mentioned_at.values() if min(stamps) < t)
    stride = max(1, -(-population // max_samples))
    cal = set(checkpoints[::-1][::stride])
    samples = []
    for t in checkpoints:
        here = []
        if t in cal:
            held_triples = set()
            for b in beliefs:
                if _held(b, t):
                    held_triples.add(b["triple"])
                    p = min(max(_effective(b, t), EPS), 1 - EPS)
                    here.append({"p": p, "y": int(covering(b["triple"], t) is not None), "kind": b["kind"],
                                 "age": (t - b["start"]) / DAY, "held": True})
            for triple, stamps in mentioned_at.items():
                if triple not in held_triples and min(stamps) < t:
                    here.append({"p": EPS, "y": int(covering(triple, t) is not None),
                                 "kind": triple_kind.get(triple, -1), "age": math.nan, "held": False})
        samples += here
        row = next(r for r in rows if r["t"] == t)
        row["log_loss"] = sum(_loss(s["p"], s["y"]) for s in here) / len(here) if here else math.nan

    def mean(key: str) -> float:
        vals = [r[key] for r in rows if not math.isnan(r[key])]
        return sum(vals) / len(vals) if vals else math.nan

    summary = {"precision": mean("precision"), "recall": mean("recall"),
               "believed": sum(r["believed"] for r in rows) / len(rows),
               "needed": sum(r["needed"] for r in rows) / len(rows),
               "stale": sum(r["stale"] for r in rows) / len(rows), "lost": len(lost),
               "final_believed": rows[-1]["believed"], "final_recall": rows[-1]["recall"],
               "calibration_stride": stride}
    overall = _summaries(samples)
    summary.update({k: overall[k] for k in ("log_loss", "brier", "auc", "rmse_bins", "held_log_loss", "samples")})
    by_kind = []
    for code, name in enumerate(KINDS):
        mine = [s for s in samples if s["kind"] == code]
        if mine:
            by_kind.append({"kind": name, **_summaries(mine)})
            summary[f"log_loss.{name}"] = by_kind[-1]["log_loss"]
    reliability = []
    held = [s for s in samples if s["held"]]
    for name, group in [("all", held)] + [(k, [s for s in held if s["kind"] == i]) for i, k in enumerate(KINDS)]:
        for b in range(10):
            members = [s for s in group if min(int(s["p"] * 10), 9) == b]
            if members:
                reliability.append({"kind": name, "bin": b, "n": len(members),
                                    "p_mean": sum(s["p"] for s in members) / len(members),
                                    "y_mean": sum(s["y"] for s in members) / len(members)})
    return {"checkpoints": rows, "summary": summary, "lost": lost, "reliability": reliability, "by_kind": by_kind}

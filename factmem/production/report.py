"""The run folder of a what-if, and its ``report.md`` — what the new parameters would change, first.

Files: ``report.md``; figures ``believed_over_time.png`` (believed and active set sizes over time under
both parameter sets) and ``subject_changes.png`` (distribution of the per-person change); tables as
Parquet and in ``results.duckdb`` — ``metrics``, ``subjects``, ``triples``, ``context_changes``,
``over_time``, ``param_changes``, ``reproduction`` (the production facts the current replay does not
rebuild); ``manifest.json`` (the production file's path, size and sha256, both parameter sets with
their source and file sha256, the settings, the summary; :func:`factmem.tuning.runs.manifest`).

Everything is written to a temporary folder beside ``out`` and moved into place only when complete:
an error leaves ``out`` as it was.

Every number in the report states its population (people, session starts, facts), its baseline
(the replay under the current parameters) and, for the context metrics, a 95% bootstrap interval
over people.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from factmem.errors import ExportError, InputError
from factmem.production.replay import CAUSES, CHECKS, RTOL
from factmem.tuning.runs import manifest, write_run

if TYPE_CHECKING:
    from factmem.production.whatif import WhatIfResult

__all__ = ["FIGURES", "TABLES", "render_report", "write_whatif"]

FIGURES = ("believed_over_time.png", "subject_changes.png")
TABLES = ("metrics", "subjects", "triples", "context_changes", "over_time", "param_changes", "reproduction")


def _date(ts: int) -> str:
    return _dt.datetime.fromtimestamp(int(ts), tz=_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _num(v: Any, digits: int = 4) -> str:
    if v is None:
        return "—"
    if isinstance(v, (float, np.floating)):
        return "n/a" if not math.isfinite(v) else f"{v:.{digits}g}"
    return str(v)


def _signed(v: float, digits: int = 3) -> str:
    return "n/a" if not math.isfinite(v) else f"{v:+.{digits}g}"


def _interval(low: float, high: float) -> str:
    if not (math.isfinite(low) and math.isfinite(high)):
        return "no interval"
    return f"[{low:+.3g}, {high:+.3g}]"


def _table(frame: pd.DataFrame) -> str:
    if not len(frame):
        return "(none)"
    cols = list(frame.columns)
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
    for row in frame.itertuples(index=False):  # report rows: a few dozen at most
        lines.append("| " + " | ".join(_num(v) if not isinstance(v, str) else v for v in row) + " |")
    return "\n".join(lines)


def _direction(row: dict[str, Any], lower_is_better: bool = False) -> str:
    """``better``/``worse`` when the 95% interval excludes 0, ``within noise`` when it does not."""
    low, high = row["low"], row["high"]
    if not (math.isfinite(low) and math.isfinite(high)):
        return "no interval"
    if low > 0 or high < 0:
        return "better" if ((high < 0) if lower_is_better else (low > 0)) else "worse"
    return "within noise"


def _verdict(row: dict[str, Any], lower_is_better: bool = False) -> str:
    d = _direction(row, lower_is_better)
    if d == "no interval":
        return "no interval (too few people with session starts)"
    if d == "within noise":
        return "within resampling noise (the interval includes 0)"
    return f"a change beyond resampling noise — {d} under the new parameters"


_NEEDED_TEXT = {
    "next-session": "a fact is needed when the session mentions it, and stale when the session mentions another "
                    "object for its single-valued (subject, predicate).",
    "next-3-sessions": "a fact mentioned before is needed when one of the person's next 3 sessions mentions it, and "
                       "stale when they mention another object for its single-valued (subject, predicate) instead.",
    "hindsight": "a fact mentioned before is needed when the log mentions it again at or after the session start; "
                 "a context fact the log never mentions again is charged (stale when another object of its "
                 "single-valued (subject, predicate) is mentioned later).",
    "later-mention": "a fact mentioned before is needed when the log mentions it again at or after the session "
                     "start; a context fact is charged (stale) when the log later mentions another object for its "
                     "single-valued (subject, predicate) and never its own again.",
    "kind-aware": "a lasting fact (every kind but episodic) is needed from its first mention on while it is the log's "
                  "latest word on its single-valued (subject, predicate) — stale once another object was said after "
                  "it; an episode is needed while one of the person's previous 2 sessions mentions it, expired "
                  "after.",
}


def render_report(result: WhatIfResult) -> str:
    """``report.md``: the headline first, then inputs, reproduction, the comparison at ``at``, the
    context metrics, the most affected people, notes."""
    s, prod, rep, st = result.summary, result.production, result.reproduction, result.settings
    k = st.budgets[0]
    util = result.comparison("utility", k)
    at_label = "the last observation" if st.at is None else "--at"
    from factmem.production.current import reproduction_warning
    from factmem.tuning.agreement import agreement_sentence

    warning = reproduction_warning(rep, result.current.source)
    lines = ([warning, ""] if warning else []) + [f"# What-if: {result.new.describe()} on {Path(prod['path']).name}", ""]
    lines += [
        f"**At {_date(result.at)}** ({at_label}), replaying the production file's {prod['counts']['observations']:,} "
        f"observations of {s['subjects']:,} people under the new parameters instead of the current ones: "
        f"**{s['forgotten']:,}** facts the current parameters keep active would be archived (forgotten) and "
        f"**{s['kept']:,}** facts they archive would be kept; {s['superseded_differently']:,} facts end superseded "
        f"under one and not the other, and {s['belief_changes']:,} more cross the retrieval threshold. "
        f"{s['subjects_changed']:,} of {s['subjects']:,} people are affected. Believed facts: "
        f"{s['believed_current']:,} → {s['believed_new']:,}.",
        "",
        f"**In the context of k = {k} facts** assembled at each session start (needed = the facts that session "
        f"mentions; {util['points']:,.0f} session starts of {util['subjects']} people), utility@{k} goes from "
        f"{_num(util['current'])} to {_num(util['new'])}: Δ = {_signed(util['difference'])}, 95% bootstrap "
        f"interval over people {_interval(util['low'], util['high'])} — {_verdict(util)}. At {_date(result.at)} the "
        f"contexts of {s['subjects_context_changed']:,} people change: {s['context_gained']:,} facts gained, "
        f"{s['context_lost']:,} lost.",
        "",
        f"**Baseline**: the replay of the same observations under the current parameters "
        f"({result.current.source}), which reproduces **{rep.reproduced:,} of {rep.checked:,}** production facts "
        f"with observations (ids, statuses, confidences; see *Reproduction*).",
        "",
        "## Inputs",
        "",
        f"- **Production file**: `{prod['path']}` ({prod['size_bytes']:,} bytes, sha256 `{prod['sha256']}`): "
        f"{prod['counts']['facts']:,} facts, {prod['counts']['evidence']:,} evidence rows "
        f"({prod['counts']['observations']:,} observations), {prod['counts']['sessions']:,} sessions, "
        f"{prod['counts']['subjects']:,} people; observations from {_date(prod['first_observation'])} to "
        f"{_date(prod['last_observation'])}.",
        f"- **Current parameters**: {result.current.describe()}.",
        f"- **New parameters**: {result.new.describe()}.",
        f"- **Schedule**: the seed's schema records no consolidation times; both replays consolidate every "
        f"{st.consolidate_every_hours:g} h at multiples of the period since the Unix epoch"
        f"{' (midnight UTC)' if st.period == 86400 else ''}, {result.consolidations:,} times, up to "
        f"{_date(result.horizon)} (the later of the compared time and the latest time the file records).",
        "",
        "What changes:",
        "",
        _table(_param_rows(result.param_changes)),
        "",
        "## Reproduction",
        "",
        f"The replay under the current parameters is checked against every production fact with observations "
        f"({rep.checked:,} of {rep.facts:,}; {rep.derived:,} derived facts are not replayed"
        + (f", {rep.without_observations:,} facts have no observation" if rep.without_observations else "")
        + f"): the same evidence rows attributed to the same fact id, status, confidence (relative tolerance "
        f"{RTOL:g}), reinforcement count, first seen, last reinforced, decay rate, supersedes_id"
        + (", status_changed_at" if "status_changed_at" not in rep.checks_skipped else "")
        + f". **{rep.reproduced:,} reproduce; {rep.failed:,} do not.** A mismatch is information, not an error: "
        "the comparison below covers every observation.",
        "",
    ]
    if rep.failed:
        lines += ["| check | facts failing |", "|---|---|"]
        lines += [f"| {c} | {n:,} |" for c, n in rep.by_check.items() if n]
        lines += ["", "| likely cause | facts |", "|---|---|"]
        lines += [f"| {CAUSES[c]} | {n:,} |" for c, n in rep.by_cause.items()]
        lines += ["", "The failing facts are in `reproduction.parquet` (checks failed, cause, both values)."]
    if rep.renumbered:
        lines += ["", f"{rep.renumbered:,} facts carry an id other than the one a replay of observations would "
                      "number them with (derived facts created between observations take ids); facts are matched "
                      "by the observation that inserted them."]
    lines += [
        "",
        f"## At {_date(result.at)}",
        "",
        "Each triple mentioned so far, in the state its latest mention left (the memory after every observation "
        "up to and including this time and every consolidation at or before it):",
        "",
        "| | current | new | difference |", "|---|---|---|---|",
        f"| active facts | {s['held_current']:,} | {s['held_new']:,} | {s['held_new'] - s['held_current']:+,} |",
        f"| believed (effective ≥ retrieval threshold) | {s['believed_current']:,} | {s['believed_new']:,} | "
        f"{s['believed_new'] - s['believed_current']:+,} |",
        f"| archivals so far | {s['archivals_current']:,} | {s['archivals_new']:,} | "
        f"{s['archivals_new'] - s['archivals_current']:+,} |",
        f"| supersessions so far | {s['supersessions_current']:,} | {s['supersessions_new']:,} | "
        f"{s['supersessions_new'] - s['supersessions_current']:+,} |",
        "",
        f"Population: {s['triples']:,} triples of {s['subjects']:,} people. Forgotten {s['forgotten']:,}, kept "
        f"{s['kept']:,}, superseded differently {s['superseded_differently']:,}, believed differently "
        f"{s['belief_changes']:,} (all in `triples.parquet`); supersessions that differ (one side superseded the "
        f"old value, the other had archived it already): {s['supersessions_differ']:,}.",
        "",
        "![believed-set size over time](believed_over_time.png)",
        "",
        f"## Budgeted context metrics (needed = {st.needed})",
        "",
        f"At each session start, each person's context holds the top k of their active facts by effective "
        f"confidence; {_NEEDED_TEXT.get(st.needed, st.needed)} {agreement_sentence(st.needed)} "
        f"Means over {s['session_starts']:,} session starts "
        f"(those with a needed fact; {s['session_starts_all']:,} in all), pooled over people; Δ = new − current, "
        f"95% percentile interval from {st.bootstrap:,} bootstrap resamples of people (seed {st.seed}).",
        "",
        "| k | metric | current | new | Δ | 95% interval | new parameters |", "|---|---|---|---|---|---|---|",
    ]
    for row in result.metrics.to_dict(orient="records"):
        lower = row["metric"] == "stale"
        lines.append(f"| {row['budget']} | {row['metric']}@k | {_num(row['current'])} | {_num(row['new'])} | "
                     f"{_signed(row['difference'])} | {_interval(row['low'], row['high'])} | "
                     f"{_direction(row, lower)} |")
    if "empty" in result.metrics.columns:
        lines += ["", "The same session starts under the reference policies — the *empty memory* (nothing in the "
                  "context) and *keep-everything* (the current parameters with no decay and both thresholds at "
                  "1e-6: nothing archived). New parameters that do not beat both buy nothing a trivial rule "
                  "would not.", "",
                  "| k | metric | empty | new − empty (95%) | keep-everything | new − keep-everything (95%) |",
                  "|---|---|---|---|---|---|"]
        below = []
        for row in result.metrics.to_dict(orient="records"):
            if row["metric"] == "utility" and row["current"] < row["empty"]:
                below.append(f"**The current parameters score below the empty memory at k = {row['budget']}**: "
                             f"utility@k {_num(row['current'])} against {_num(row['empty'])} for showing nothing.")
            if row["metric"] not in ("utility", "recall"):
                continue
            lines.append(f"| {row['budget']} | {row['metric']}@k | {_num(row['empty'])} | "
                         f"{_signed(row['new_minus_empty'])} {_interval(row['new_minus_empty_low'], row['new_minus_empty_high'])} | "
                         f"{_num(row['keep_everything'])} | {_signed(row['new_minus_keep_everything'])} "
                         f"{_interval(row['new_minus_keep_everything_low'], row['new_minus_keep_everything_high'])} |")
        if below:
            lines += [""] + below
    lines += ["", "![per-person change](subject_changes.png)", "",
              "## Most affected people", "",
              f"Ranked by facts whose state differs at {_date(result.at)}, then context changes (k = {k}), "
              f"then |Δ utility@{k}| (all people in `subjects.parquet`).", ""]
    top = result.most_affected
    shown = top[["subject", "triples", "held_current", "held_new", "forgotten", "kept", "superseded",
                 "context_gained", "context_lost", "points", "utility_current", "utility_new"]]
    lines += [_table(shown) if len(shown) else "No person's memory or context changes.", ""]
    ctx = result.context_changes
    for subject in top["subject"].head(st.show):
        mine = ctx[ctx["subject"] == subject]
        lines += [f"### {subject}", ""]
        if not len(mine):
            lines += [f"Their context of {k} facts at {_date(result.at)} is the same under both.", ""]
            continue
        for change, what in (("gained", "would gain"), ("lost", "would lose")):
            rows = mine[mine["change"] == change]
            if len(rows):
                facts = "; ".join(f"{r.predicate} = {r.object} ({_num(r.effective_current, 2)} → "
                                  f"{_num(r.effective_new, 2)})" for r in rows.head(12).itertuples())
                more = f" … and {len(rows) - 12} more" if len(rows) > 12 else ""
                lines += [f"- {what} ({len(rows)}): {facts}{more}"]
        lines += [""]
    lines += ["## Notes", ""]
    notes = list(result.notes) + [
        "Observations are replayed with their fact's kind (the seed's evidence does not record the kind a "
        "mention carried); this matters only where one side inserts a new fact where production reinforced one.",
        f"Checks: {', '.join(CHECKS)}.",
    ]
    lines += [f"- {n}" for n in notes]
    lines += ["", f"Computed in {result.seconds:.1f} s.", ""]
    return "\n".join(lines)


def _param_rows(changes: pd.DataFrame) -> pd.DataFrame:
    if not len(changes):
        return pd.DataFrame({"parameter": ["(none: the new parameters equal the current ones)"]})
    return pd.DataFrame({"parameter": changes["parameter"], "current": changes["old"].map(_plain),
                         "new": changes["new"].map(_plain)})


def _plain(v: Any) -> str:
    if isinstance(v, (list, tuple, set, frozenset)):
        return "[" + ", ".join(sorted(map(str, v))) + "]"
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return repr(v) if isinstance(v, float) else str(v)


def write_whatif(result: WhatIfResult, out: str | os.PathLike, *, figures: bool = True) -> Path:
    """Write the run folder (see the module docstring) to ``out``; returns it."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: exists and is not a folder")
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.exists():
        parent.mkdir(parents=True, exist_ok=True)
    tmp = parent / f".{out.name}.tmp-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    try:
        tables = {
            "metrics": result.metrics, "subjects": result.subjects, "triples": result.triples,
            "context_changes": result.context_changes, "over_time": result.over_time,
            "param_changes": _param_rows(result.param_changes) if len(result.param_changes) else pd.DataFrame(
                {"parameter": pd.Series([], dtype=str), "current": pd.Series([], dtype=str),
                 "new": pd.Series([], dtype=str)}),
            "reproduction": result.reproduction.failures,
        }
        info = manifest("whatif", production=result.production, current=result.current.to_dict(),
                        new=result.new.to_dict(), settings=result.settings.to_dict(), at=result.at,
                        horizon=result.horizon, consolidations=result.consolidations,
                        reproduction=result.reproduction.to_dict(), summary=result.summary, notes=result.notes,
                        seconds=result.seconds, figures=list(FIGURES) if figures else [])
        write_run(tmp, info, tables)
        (tmp / "report.md").write_text(render_report(result), encoding="utf-8")
        if figures:
            from factmem import plots

            labels = {"current": f"current ({result.current.source})", "new": "new"}
            plots.save(plots.believed_over_time(result.over_time, labels=labels), tmp / FIGURES[0])
            plots.save(plots.subject_changes(result.subjects, budget=result.settings.budgets[0]), tmp / FIGURES[1])
        out.mkdir(parents=True, exist_ok=True)
        for item in sorted(tmp.iterdir()):  # a handful of files
            os.replace(item, out / item.name)
    except OSError as exc:
        raise ExportError(f"{out}: cannot write the what-if: {exc.strerror or exc}") from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out

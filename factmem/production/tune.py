"""``factmem tune --log PROD.sqlite``: tune the memory you run, from its own file — no ground truth.

Usage::

    from factmem.production.tune import tune_production

    result = tune_production("prod.sqlite", current="seed", out="runs/prod-tune")
    result.decision, result.exit_status

:func:`tune_production` does, in order:

1. **Read** the production file (:func:`~factmem.production.rebuild.read_production`: a SQLite file in
   the seed's schema; a factmem store file is exported to a temporary SQLite first) and rebuild its
   mention log from the evidence, as ``whatif`` does. Columns a deployment added to the seed's tables
   are ignored (a note lists them). Bad input is a :class:`~factmem.errors.FactmemError`; nothing is
   written.
2. **Current parameters**, never assumed (:mod:`factmem.production.current`): the file's
   ``factmem_meta``, else ``current`` (``--current FILE``), else ``current="seed"`` (``--current
   seed``); otherwise exit 2 naming the flag. They are the **base** of the search (every candidate
   differs from them only in what is searched) and the **baseline** a recommendation must beat.
3. **Reproduction check**: the log replayed under the current parameters (consolidation every
   ``consolidate_every_hours`` at multiples since the epoch, as ``whatif``; default: the period the file
   records in ``factmem_meta``, else daily) must rebuild the file's
   facts; when more than 5% are not rebuilt the report's first line says the comparison is not
   against what production did, with the likely causes, and :attr:`ProductionTuneResult.exit_status`
   is 4.
4. **Tune** (:func:`factmem.tuning.tune.tune`, the same search, held-out judgement over folds of
   people and promotion rule) with a **no-truth definition of needed** — ``needed`` (default
   :data:`DEFAULT_PROXY`, the proxy that agreed best with the truth on synthetic logs: the measured
   :data:`PROXY_AGREEMENT` is printed in every report that uses a proxy; ``next-session``,
   ``next-3-sessions``, ``hindsight``, ``later-mention``, ``kind-aware`` are selectable; the choice is in
   the manifest). With more than ``max_search_subjects`` people or ``max_search_observations``
   observations, the **search** runs on a seeded sample of people (drawn in a seeded order: at most
   ``max_search_subjects`` of them, cut to the first whose observations add up to at most
   ``max_search_observations``, at least :data:`MIN_SEARCH_SUBJECTS`) and the recommendation is then
   **judged on all** people (and on those outside the sample alone: held out by construction) with
   ``bootstrap`` resamples; the report and the manifest (``sample``) say what was sampled. Nothing
   else is reduced: the search, its restarts and the selection stability run with their defaults on
   the sample.
5. **A flat proxy** — more than half the candidates tied at the same utility
   (:data:`~factmem.tuning.agreement.FLAT_SHARE`) — means "this log cannot rank the candidates":
   nothing is promoted, the current parameters stay.
6. **Write** the same run folder as ``tune`` (``report.md``, ``params.toml``, figures, tables,
   manifest), with the production file, the current parameters' source, the proxy and its measured
   agreement, the reproduction check and the sampling in the manifest and at the top of the report,
   which ends with the next commands: ``whatif`` on the same file with the new ``params.toml``, then
   ``export``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from factmem.core.params import MemoryParams
from factmem.errors import InputError
from factmem.evaluation.arrays import sorted_unique
from factmem.evaluation.context import NEEDED_MODES
from factmem.evaluation.simulate import PreparedLog, Schedule
from factmem.production.current import EXIT_NOT_REPRODUCED, reproduction_warning, resolve_current
from factmem.production.provenance import provenance_notes, resolve_period
from factmem.production.rebuild import ProductionLog, read_production, release_memory
from factmem.production.replay import Reproduction, check_reproduction, consolidation_grid, encode, replay_log
from factmem.tuning.agreement import (
    DEFAULT_PROXY,
    FLAT_SHARE,
    PROXY_AGREEMENT,
    agreement_sentence,
    flat_share,
    proxy_notes,
)

__all__ = ["DEFAULT_PROXY", "PROXY_AGREEMENT", "MAX_SEARCH_SUBJECTS", "MAX_SEARCH_OBSERVATIONS", "MIN_SEARCH_SUBJECTS",
           "ProductionTuneResult", "tune_production",
           "agreement_sentence", "sample_subjects"]

#: above this many people the search runs on a seeded sample of them (judged on all)
MAX_SEARCH_SUBJECTS = 2000
#: ... and the sample holds at most this many observations (a search's time grows with them)
MAX_SEARCH_OBSERVATIONS = 150_000
#: the fewest people a sample cut by observations keeps
MIN_SEARCH_SUBJECTS = 100


@dataclass
class ProductionTuneResult:
    """What :func:`tune_production` found. ``tune``: the :class:`~factmem.tuning.tune.TuneResult` of the
    search (``tune.primary.chosen`` is what ``params.toml`` holds); ``current``: the current
    parameters and their source; ``needed``: the proxy; ``reproduction``: the check of step 3;
    ``flat_share``: share of candidates at the most common utility; ``sample``: the search sample
    (``subjects``, ``searched``, ``seed``); ``judged``: the comparison on all people when the search
    was sampled (else None); ``warning``: the report's first line when the check fails."""

    tune: Any
    production: dict[str, Any]
    current: Any
    needed: str
    reproduction: Reproduction
    flat_share: float
    sample: dict[str, Any]
    judged: dict[str, Any] | None
    notes: list[str] = field(default_factory=list)
    warning: str | None = None
    seconds: float = 0.0
    out: Path | None = None
    #: wall seconds of each stage (read, reproduction, search, judged_on_all, write)
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def flat(self) -> bool:
        return self.flat_share > FLAT_SHARE

    @property
    def decision(self) -> str:
        return self.tune.primary.decision

    @property
    def promoted(self) -> bool:
        return self.tune.primary.promoted

    @property
    def chosen(self) -> MemoryParams:
        return self.tune.primary.chosen

    @property
    def exit_status(self) -> int:
        """0, or :data:`~factmem.production.current.EXIT_NOT_REPRODUCED` when the check failed."""
        return EXIT_NOT_REPRODUCED if self.warning else 0

    def next_commands(self) -> list[str]:
        out = self.out or Path("RUN")
        prod = self.production["path"]
        cur = "" if self.current.source == "factmem_meta" else (
            " --current seed" if self.current.source == "seed defaults" else f" --current {self.current.path}")
        return [f"factmem whatif {prod} --params {out / 'params.toml'}{cur} --out {out / 'whatif'}",
                f"factmem export {out / 'params.toml'} --format rust --out memory_params.rs"]

    def manifest_extra(self) -> dict[str, Any]:
        return {"production": self.production, "current": self.current.to_dict(), "needed": self.needed,
                "needed_default": DEFAULT_PROXY, "proxy_agreement": PROXY_AGREEMENT.get(self.needed),
                "reproduction": self.reproduction.to_dict(), "reproduction_warning": self.warning,
                "flat_share": self.flat_share, "flat": self.flat, "sample": self.sample, "judged": self.judged,
                "production_notes": list(self.notes), "timings": {k: round(v, 2) for k, v in self.timings.items()}}


def sample_subjects(prepared: PreparedLog, subjects: int, seed: int, max_observations: int | None = None
                    ) -> tuple[PreparedLog, np.ndarray]:
    """The log restricted to a seeded sample of ``subjects`` people (their mentions and messages, their
    triples numbered afresh); returns it and the sampled subjects' names (sorted). With
    ``max_observations``, the sample is cut to the people drawn first whose mentions add up to at most
    that many (at least :data:`MIN_SEARCH_SUBJECTS` people)."""
    names = prepared.triples.levels[0]
    # integer codes: no string compares
    ev_subject = np.asarray(prepared.triples.codes[0], np.int64)[prepared.ev_triple]
    people, mentions = np.unique(ev_subject, return_counts=True)
    rng = np.random.default_rng(seed)
    drawn = rng.choice(len(people), size=min(subjects, len(people)), replace=False)  # in the order drawn
    if max_observations is not None:
        fits = int(np.searchsorted(np.cumsum(mentions[drawn]), max_observations, "right"))
        drawn = drawn[:max(fits, min(MIN_SEARCH_SUBJECTS, len(drawn)))]
    chosen_codes = np.sort(people[drawn])
    keep = np.isin(ev_subject, chosen_codes)
    chosen = np.sort(np.asarray(names, dtype=object)[chosen_codes])
    events = prepared.events[keep].reset_index(drop=True)
    sessions = pd.unique(events["session_id"].dropna())
    msgs = prepared.dataset.messages
    messages = msgs[msgs["session_id"].isin(sessions)].reset_index(drop=True)
    ds = dataclasses.replace(prepared.dataset, events=events, messages=messages)
    # the sample's own triple codes: replays and evaluators size arrays by the number of triples, and the
    # whole file's (6.5M at 10M observations) would be held for every candidate of the search
    used = sorted_unique(prepared.ev_triple[keep])
    ev_triple = np.searchsorted(used, prepared.ev_triple[keep]).astype(np.int64)
    triples = prepared.triples[used].remove_unused_levels()
    truth = prepared.truth
    if len(truth):  # production logs have none; a dataset's truth follows its triples
        t_code = truth["triple"].to_numpy(np.int64)
        pos = np.minimum(np.searchsorted(used, t_code), max(len(used) - 1, 0))
        hit = (used[pos] == t_code) if len(used) else np.zeros(len(t_code), bool)
        truth = truth[hit].assign(triple=pos[hit]).reset_index(drop=True)
    sample_mentions = pd.DataFrame({"triple": ev_triple, "ts": events["ts"].to_numpy(np.int64)})
    sub = dataclasses.replace(prepared, dataset=ds, events=events, triples=triples, ev_triple=ev_triple, truth=truth,
                              mentions=sample_mentions, _evaluators={}, _extra={})
    return sub, chosen


def _is_duckdb(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            head = fh.read(16)
    except OSError:
        return False
    return head[8:12] == b"DUCK"


def _read(path: Path, tmp: Path) -> tuple[ProductionLog, list[str]]:
    """A production SQLite file, or a factmem store file exported to a temporary one first."""
    if _is_duckdb(path):
        from factmem.export.sqlite import export_db

        sqlite = tmp / (path.stem + ".sqlite")
        export_db(path, sqlite, progress=False)
        log = read_production(sqlite)
        log = dataclasses.replace(log, path=path)
        return log, [f"{path} is a factmem store file: it was exported to the seed's schema (export-db) and read "
                     "from there."]
    return read_production(path), []


def tune_production(production: str | os.PathLike, *, current: Any = None, needed: str | None = None,
                    out: str | os.PathLike | None = None, force: bool = False, search: Any = None,
                    budgets: tuple[int, ...] = (20,), costs: Any = None, folds: int = 3, bootstrap: int = 1000,
                    seed: int = 0, consolidate_every_hours: float | None = None, max_points_per_subject: int | None = None,
                    max_search_subjects: int | None = MAX_SEARCH_SUBJECTS,
                    max_search_observations: int | None = MAX_SEARCH_OBSERVATIONS, compute: Any = None,
                    write: bool = True) -> ProductionTuneResult:
    """Tune on a production file (see the module docstring). ``current``: a params file, MemoryParams or
    ``"seed"`` (needed when the file records none); ``costs``: of each kind of charged context fact
    (:class:`~factmem.evaluation.charges.ChargeCosts`; default the defaults); ``needed``: the proxy (default
    :data:`DEFAULT_PROXY`); ``search``/``compute``: :class:`~factmem.tuning.settings.Search` and
    ``Compute``; ``max_search_subjects``: search on a seeded sample of at most this many people, and
    ``max_search_observations``: of people holding at most this many observations (None: no bound)."""
    from factmem.tuning.runs import default_run_dir, run_folder
    from factmem.tuning.settings import Compute, Holdout, Objective, Search

    t0 = time.perf_counter()
    needed = needed or DEFAULT_PROXY
    if needed not in NEEDED_MODES or needed == "truth":
        raise InputError(f"--needed {needed!r}: a production file has no truth; choose one of "
                         f"{', '.join(m for m in NEEDED_MODES if m != 'truth')}")
    for name, flag, v in (("max_search_subjects", "--max-search-people", max_search_subjects),
                          ("max_search_observations", "--max-search-observations", max_search_observations)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise InputError(f"{name} ({flag}) must be a positive integer or None, got {v!r}")
    path = Path(production)
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if consolidate_every_hours is not None and (
            isinstance(consolidate_every_hours, bool) or not isinstance(consolidate_every_hours, (int, float))
            or not math.isfinite(consolidate_every_hours) or round(consolidate_every_hours * 3600) < 1):
        raise InputError(f"consolidate_every_hours must be a positive number of hours, got {consolidate_every_hours!r}")
    objective = Objective(budgets=tuple(budgets), costs=costs, needed=needed,
                          max_points_per_subject=max_points_per_subject)
    holdout = Holdout(folds=folds, bootstrap=bootstrap, seed=seed)
    search = search or Search(seed=seed)
    # in process by default: the rebuilt log has no dataset folder a worker could load, so every chunk
    # would ship it to a worker (measured 2.3x slower on 2 shared cores: 163 s against 70 s at 100k)
    compute = compute or Compute(workers=0, progress=False)
    timings: dict[str, float] = {}
    lap = time.perf_counter()

    def stage(name: str) -> None:
        nonlocal lap
        now = time.perf_counter()
        timings[name] = timings.get(name, 0.0) + now - lap
        lap = now

    with tempfile.TemporaryDirectory() as tmp:
        log, notes = _read(path, Path(tmp))
    from factmem.production.whatif import ParamsSource, params_source

    cur, cur_notes = resolve_current(path, log.saved_params, current, command="tune", source_type=ParamsSource,
                                     read_source=params_source)
    notes += cur_notes
    from factmem.export.sqlite_format import extra_columns_note

    if (note := extra_columns_note(log.extra_columns)):
        notes.append(note)
    # the file's own consolidation period unless one was asked for, as whatif replays it
    period, period_note = resolve_period(log.meta, consolidate_every_hours)
    consolidate_every_hours = period / 3600
    notes += [period_note] if period_note else []
    notes += provenance_notes(log.meta, cur.params, period)  # a fingerprint or period the file records otherwise

    # the reproduction check: the current parameters' replay against the file's facts
    grid = consolidation_grid(log.first, max(log.latest, log.last), period)
    encoded = encode(log, cur.params.multi_valued_predicates)
    replay_current: Any = replay_log(log, cur.params, grid, encoded)  # kept: the judgement on all people reuses it
    reproduction = check_reproduction(log, replay_current)
    del encoded
    release_memory()
    warning = reproduction_warning(reproduction, cur.source)
    stage("read_and_reproduction")

    sessions_only = log.counts["observations_without_session"] > 0
    if sessions_only:
        notes.append(f"{log.counts['observations_without_session']:,} observations have no session_id: they start no "
                     "session and are left out of the tuning replay (the reproduction check replays them).")
    prepared = log.prepared(sessions_only=sessions_only)
    notes += proxy_notes(needed, prepared.events["kind"])
    # consolidations at multiples of the period since the epoch (midnight UTC daily), as whatif replays
    prepared = dataclasses.replace(prepared, start=(prepared.start // period) * period, _evaluators={}, _extra={})
    schedule = Schedule(consolidate_every_hours=consolidate_every_hours, evaluate_every_hours=max(24.0, consolidate_every_hours))
    n_people = log.counts["subjects"]
    n_obs = len(prepared.events)
    sample: dict[str, Any] = {"subjects": int(n_people), "searched": int(n_people), "seed": seed,
                              "observations": int(n_obs), "searched_observations": int(n_obs),
                              "max_subjects": max_search_subjects, "max_observations": max_search_observations}
    prepared_for_search = prepared
    if (max_search_subjects is not None and n_people > max_search_subjects) or (
            max_search_observations is not None and n_obs > max_search_observations):
        prepared_for_search, chosen = sample_subjects(prepared, max_search_subjects or n_people, seed,
                                                      max_search_observations)
        if len(chosen) < n_people:
            sample["searched"] = int(len(chosen))
            sample["searched_observations"] = int(len(prepared_for_search.events))
        else:
            prepared_for_search = prepared
    if sample["searched"] == sample["subjects"]:
        replay_current = None  # no judgement on all people to reuse it for
        release_memory()

    from factmem.tuning.tune import tune

    def run(folder: Path | None, final: Path | None = None) -> ProductionTuneResult:
        stage("prepare")
        res = tune(prepared_for_search, write=False, search=search, objective=objective, holdout=holdout,
                   compute=compute, schedule=schedule, current=cur.params, base=cur.params)
        stage("search")
        k = objective.budgets[0]
        values = res.sweep.objective_values("all", k)
        share = flat_share(values)
        judged = None
        if share > FLAT_SHARE:
            for rec in res.recommendations.values():
                rec.promoted, rec.keep = False, "current"
                rec._kept = cur.params
                rec.decision = (f"Not promoted: this log cannot rank the candidates — {100 * share:.0f}% of the "
                                f"{len(values)} candidates tie at the same utility@{k} under needed = {needed}; "
                                "the current parameters stay.")
        elif sample["searched"] < sample["subjects"]:
            judged = _judge_on_all(log, prepared, res.primary.params, replay_current, objective, holdout, grid,
                                   np.asarray(chosen))
            rec = res.primary
            if rec.promoted and not judged["all"]["excludes_zero"]:
                rec.promoted, rec.keep = False, "current"
                rec._kept = cur.params
                rec.decision += (" Judged on all people, the interval includes 0 "
                                 f"({judged['all']['difference']:+.4g} [{judged['all']['low']:+.4g}, "
                                 f"{judged['all']['high']:+.4g}]): not promoted; the current parameters stay.")
        stage("judged_on_all")
        result = ProductionTuneResult(tune=res, production=log.to_dict(), current=cur, needed=needed,
                                      reproduction=reproduction, flat_share=share, sample=sample, judged=judged,
                                      notes=notes, warning=warning, seconds=time.perf_counter() - t0, out=final,
                                      timings=timings)
        if folder is not None:
            _write(result, prepared_for_search, folder)
        stage("write")
        result.seconds = time.perf_counter() - t0
        return result

    if not write:
        return run(None)
    final = Path(out) if out is not None else default_run_dir()
    with run_folder(final, force=force) as folder:  # written beside `final`, renamed into place when complete
        result = run(folder, final)
    return result


def _judge_on_all(log: ProductionLog, prepared: PreparedLog, recommended: MemoryParams, replay_current: Any,
                  objective: Any, holdout: Any, grid: np.ndarray, sampled: np.ndarray) -> dict[str, Any]:
    """The recommendation against the current parameters on every person, and on the people outside the
    search sample alone (held out by construction) — replayed and scored as ``whatif`` does (the whole
    file's evidence, the same consolidations, contexts scored in groups of people so that memory stays
    bounded), so ``whatif`` of the written ``params.toml`` reports the same difference. The current
    parameters' replay is the reproduction check's."""
    from factmem.evaluation.context import ContextEvaluator
    from factmem.production.compare import context_sums
    from factmem.tuning.uncertainty import bootstrap_difference

    k = objective.budgets[0]
    ctx = ContextEvaluator(prepared, budgets=(k,), needed=objective.needed, costs=objective.costs,
                           max_points_per_subject=objective.max_points_per_subject, seed=holdout.seed)
    release_memory()
    fact_triple, triples_index = log.triple_of_fact()
    triple_of_event = fact_triple[log.events["fact"].to_numpy()]
    subject_of_triple = np.asarray(triples_index.codes[0], np.int64)
    eval_subject = pd.Index(ctx.subjects).get_indexer(pd.Index(np.asarray(triples_index.levels[0], dtype=object)))
    state_subject = eval_subject[subject_of_triple[triple_of_event]]
    encoded = encode(log, recommended.multi_valued_predicates)
    replay_new = replay_log(log, recommended, grid, encoded)
    del encoded
    release_memory()
    sums = []
    for rep in (replay_new, replay_current):
        sums.append(context_sums(ctx, rep.beliefs(log, triple_of_event), rep, state_subject).sums[0, :, 0, :])
        release_memory()
    del replay_new
    outside = ~np.isin(np.asarray(ctx.subjects, dtype=object), sampled)
    out = {}
    for label, rows in (("all", slice(None)), ("not_sampled", outside)):
        c = bootstrap_difference(sums[0][rows], sums[1][rows], "utility", resamples=holdout.bootstrap,
                                 seed=holdout.seed + 7)
        out[label] = {**c.to_dict(), "excludes_zero": c.excludes_zero(False)}
    return out


def _bound(v: Any) -> str:
    return "any number of" if v is None else f"{v:,}"


def _num(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _fmt(v: float) -> str:
    return "n/a" if not isinstance(v, (int, float)) or not math.isfinite(v) else f"{v:+.4g}"


def header_lines(result: ProductionTuneResult) -> list[str]:
    """The production part of the report: warning first, then what was tuned, how, and the decision."""
    prod = result.production
    s = result.sample
    lines = [result.warning, ""] if result.warning else []
    lines += [f"# Tune on a production memory: {Path(prod['path']).name}", "",
              f"**{result.decision}**", "",
              f"- File: `{prod['path']}` (sha256 {prod['sha256'][:12]}…), {prod['counts']['observations']:,} "
              f"observations of {s['subjects']:,} people.",
              f"- Current parameters (the base and the baseline): {result.current.describe()}.",
              f"- Reproduction: the current parameters' replay rebuilds {result.reproduction.reproduced:,} of "
              f"{result.reproduction.checked:,} production facts.",
              f"- {agreement_sentence(result.needed)}",
              f"- Candidates tied at the most common utility: {100 * result.flat_share:.0f}%"
              + (" — **this log cannot rank the candidates**; nothing is promoted." if result.flat else "."),
              ]
    if s["searched"] < s["subjects"]:
        lines.append(f"- Sampled: the search ran on {s['searched']:,} of {s['subjects']:,} people "
                     f"({s['searched_observations']:,} of {s['observations']:,} observations; seeded, seed {s['seed']}; "
                     f"at most {_bound(s['max_subjects'])} people and {_bound(s['max_observations'])} observations); "
                     "the recommendation was then judged on all of them.")
        if result.judged:
            for label, what in (("all", "all people"), ("not_sampled", "the people outside the sample")):
                j = result.judged[label]
                lines.append(f"  - On {what}: utility@{result.tune.sweep.objective.budgets[0]} {j['a']:.4g} against "
                             f"{j['b']:.4g} for the current parameters, {_fmt(j['difference'])} "
                             f"[{_fmt(j['low'])}, {_fmt(j['high'])}] (95%, bootstrap over people).")
    for n in result.notes:
        lines.append(f"- Note: {n}")
    return lines + [""]


def next_lines(result: ProductionTuneResult) -> list[str]:
    """The report's last section: the commands to run next."""
    return ["## Next", "", "See what the new parameters would have done to the people in this file, then export "
            "them for the production crate:", "", "```", *result.next_commands(), "```", ""]


def _write(result: ProductionTuneResult, prepared: PreparedLog, folder: Path) -> None:
    """The run folder: ``report.md``, ``params.toml`` (``params-k<K>.toml`` per budget), the figures of
    the sweep (slices, Pareto), the tables (sweep, heldout) and the manifest. (``tune`` on a dataset also
    replays the choice through a FactStore for truth-scored figures; without truth they would show
    nothing, and on a large file they would cost minutes.)"""
    from factmem import plots
    from factmem.export import write_params_file
    from factmem.production.report import _table
    from factmem.tuning.report import _swept
    from factmem.tuning.runs import manifest, write_run

    res = result.tune.sweep
    obj = res.objective
    primary = result.tune.primary
    tab = res.table
    figures = []
    swept = [c for c in _swept(result.tune) if c in tab.columns and tab[c].nunique() > 1]
    col = obj.column("all", primary.budget)
    if swept and col in tab.columns:
        fig = plots.slices(tab, swept, col, highlight={"recommended": primary.index, "current": 0},
                           log_params=[c for c in swept if c.startswith("decay_rate")], lower_is_better=False)
        plots.save(fig, folder / "slices.png")
        figures.append("slices.png")
    px, py = f"all.charged@{primary.budget}", f"all.recall@{primary.budget}"
    if px in tab.columns:
        fig = plots.pareto(tab.rename(columns={px: "charged facts in context", py: "recall@k"}),
                           x="charged facts in context", y="recall@k",
                           highlight={"current": 0, "recommended": primary.index},
                           title=f"Every candidate under needed = {result.needed} (k = {primary.budget})")
        plots.save(fig, folder / "pareto.png")
        figures.append("pareto.png")
    heldout = pd.concat([r.heldout.assign(budget=k) for k, r in result.tune.recommendations.items()], ignore_index=True)
    info = dict(objective=obj.to_dict(), holdout=res.holdout.to_dict(), schedule=res.schedule.to_dict(),
                n_params=len(res.params), points=res.points, sampled_from=res.sampled_from,
                recommendations={str(k): {"params": r.params.to_dict(), "chosen": r.chosen.to_dict(),
                                          "promoted": r.promoted, "keep": r.keep, "decision": r.decision,
                                          "versus_baseline": r.versus_baseline.to_dict(), "notes": list(r.notes)}
                                 for k, r in result.tune.recommendations.items()},
                search=result.tune.search.to_dict(), seconds=round(result.seconds, 2), figures=figures,
                **result.manifest_extra())
    man = json.loads(json.dumps(manifest("tune-production", **info), default=_jsonable))
    write_run(folder, man, {"sweep": tab, "heldout": heldout}, finish=False)
    for k, rec in result.tune.recommendations.items():
        prov = {"dataset_sha256": result.production["sha256"], "objective": f"utility@{k} (needed = {result.needed})",
                "git_commit": man.get("git_commit") or "", "notes": rec.decision}
        write_params_file(folder / ("params.toml" if k == primary.budget else f"params-k{k}.toml"), rec.chosen, prov)
    lines = header_lines(result)
    for k, rec in result.tune.recommendations.items():
        # the baseline is the current parameters; rows scored against truth mean nothing here
        h = rec.heldout[rec.heldout["scope"] == "held out"]
        shown = h.drop(columns=[c for c in ("key", "scope", "current") if c in h.columns]).rename(
            columns={"baseline": "current"})
        if result.current.source == "seed defaults" and "seed defaults" in shown.columns:
            shown = shown.drop(columns=["seed defaults"])
        lines += [f"## Held out, k = {k} (needed = {result.needed})", "",
                  "Each person is scored by the choice made on the other folds of people.", "", _table(shown), ""]
        changed = rec.params.changes_from(result.current.params)
        lines += ["Recommended changes from the current parameters: " + (", ".join(
            f"`{n}` {_num(a)} → {_num(b)}" for n, (a, b) in changed.items()) or "none") + ".", ""]
        if rec.notes:
            lines += ["**Check the search range:**", ""] + [f"- {n}" for n in rec.notes] + [""]
    lines += [f"`params.toml` holds the {'recommended' if primary.keep == 'recommended' else 'current'} parameters; "
              f"{len(res.params)} candidates, {result.seconds:.0f} s. Figures: "
              + (", ".join(f"`{f}`" for f in figures) or "none") + ".", ""]
    lines += next_lines(result)
    (folder / "report.md").write_text("\n".join(lines), encoding="utf-8")


def _jsonable(v: Any) -> Any:
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        f = float(v)
        return f if math.isfinite(f) else None
    if isinstance(v, Path):
        return str(v)
    raise TypeError(f"not JSON: {type(v).__name__}")

"""The what-if's state and context at a time ``at`` (factmem.production.compare) against plain
definitions, on random production files: a triple is held at ``at`` while the state its latest mention
left has not ended (an event at ``at`` or a consolidation at ``at`` has happened); the context is the
first ``k`` of a subject's held facts with effective confidence ≥ the context threshold, ranked by
effective confidence, later ``last_reinforced``, later ``first_seen``, then (predicate, object).
Times are drawn on and next to observations and consolidations, confidences tie (rate-0 kinds)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from factmem.core.codes import DAY, Status
from factmem.core.decay import effective_confidence
from factmem.core.params import MemoryParams
from factmem.evaluation.context import context_threshold
from factmem.export.sqlite_format import EVIDENCE_DDL, SEED_FACTS_DDL, SEED_LINKS_DDL
from factmem.production.compare import contexts_at, latest_mentions, lexicographic_rank, triple_states
from factmem.production.rebuild import read_production
from factmem.production.replay import consolidation_grid, replay_log

T0 = 1_767_258_000  # 2026-01-01 09:00 UTC


def production_file(path: Path, observations: list[tuple[str, str, str, str, int]]) -> Path:
    """A file in the seed's schema holding ``observations`` (subject, predicate, object, kind, ts): one
    fact row per triple, one evidence row per observation (the what-if replays the evidence)."""
    con = sqlite3.connect(path)
    con.executescript(SEED_FACTS_DDL + SEED_LINKS_DDL + EVIDENCE_DDL)
    ids: dict[tuple[str, str, str], int] = {}
    facts, evidence = [], []
    for i, (subj, pred, obj, kind, ts) in enumerate(sorted(observations, key=lambda o: o[4])):
        tri = (subj, pred, obj)
        if tri not in ids:
            ids[tri] = len(ids) + 1
            facts.append([ids[tri], subj, pred, obj, None, kind, 0.5, 0, ts, ts, 0.0, "active", None])
        facts[ids[tri] - 1][9] = ts
        evidence.append((i + 1, ids[tri], f"s{ts // DAY}-{subj}", f"m{i}", ts))
    con.executemany(f"INSERT INTO memory_facts VALUES ({','.join('?' * 13)})", facts)
    con.executemany("INSERT INTO memory_evidence (id, fact_id, session_id, message_id, observed_at) "
                    "VALUES (?,?,?,?,?)", evidence)
    con.commit()
    con.close()
    return path


def at_time(path: Path, params: MemoryParams, at: int, budget: int):
    """(each mentioned triple's status, "+believed" when believed; the context) at ``at``, by
    factmem.production.compare."""
    log = read_production(path)
    grid = consolidation_grid(log.first, max(log.latest, at), DAY)
    replay = replay_log(log, params, grid)
    fact_triple, triples = log.triple_of_fact()
    triple_of_event = fact_triple[log.events["fact"].to_numpy()]
    mentioned, latest = latest_mentions(log, triple_of_event, at)
    states = triple_states(log, replay, mentioned, latest, at)
    inside = contexts_at(log, replay, states, budget, np.asarray(triples.codes[0], np.int64), lexicographic_rank(log))
    names = [tuple(triples[int(t)]) for t in states.triples]
    status = {names[i]: Status(int(states.status[i])).label + ("+believed" if states.believed[i] else "")
              for i in range(len(names))}
    return status, {names[i] for i in np.flatnonzero(inside)}, (log, replay, triple_of_event, triples)


def reference(log, replay, triple_of_event, triples, params: MemoryParams, at: int, budget: int):
    """The same, from the replay's belief states by the definitions (loops)."""
    ts = log.events["ts"].to_numpy()
    status: dict[tuple, str] = {}
    latest: dict[tuple, int] = {}
    for e in range(len(ts)):
        if ts[e] <= at:
            latest[tuple(triples[int(triple_of_event[e])])] = e
    cands = []
    for tri, e in latest.items():
        held = ts[e] <= at < replay.end[e]
        if held:
            eff = float(effective_confidence(replay.conf[e], replay.rate[e], (at - ts[e]) / float(DAY)))
            status[tri] = "active" + ("+believed" if eff >= params.retrieval_threshold else "")
            if eff >= context_threshold(params):
                cands.append((tri[0], -eff, -int(ts[e]), -int(ts[replay.origin[e]]), tri[1], tri[2], tri))
        else:
            status[tri] = "superseded" if replay.reason[e] == 1 else "archived"
    cands.sort()
    context = set()
    for subject in {c[0] for c in cands}:
        context |= {c[-1] for c in [c for c in cands if c[0] == subject][:budget]}
    return status, context


observations = st.lists(st.tuples(st.sampled_from(["ada", "bo"]), st.sampled_from(["likes", "lives_in", "uses"]),
                                  st.sampled_from(["x", "y", "z"]), st.sampled_from(["explicit", "episodic"]),
                                  st.integers(0, 6 * 24).map(lambda h: T0 + h * 3600)), min_size=1, max_size=18)


@settings(max_examples=30, deadline=None)
@given(obs=observations, budget=st.integers(1, 3), pick=st.integers(0, 10**6), rates=st.sampled_from(
    [{"episodic": 0.0, "explicit": 0.0}, {"episodic": 2.0, "explicit": 0.0}, {"episodic": 0.3, "explicit": 0.05}]),
    multi=st.booleans(), retrieval=st.sampled_from([0.05, 0.4]))
def test_states_and_contexts_at_equal_the_definitions(tmp_path_factory, obs, budget, pick, rates, multi, retrieval):
    # a retrieval threshold of 0.4, an explicit fact's first confidence: never-decaying facts sit on it
    params = MemoryParams(decay_rate=rates, multi_valued_predicates={"likes"} if multi else set(),
                          retrieval_threshold=retrieval)
    path = production_file(tmp_path_factory.mktemp("ctx") / "p.sqlite", obs)
    log = read_production(path)
    grid = consolidation_grid(log.first, log.latest + 2 * DAY, DAY)
    # on and next to every observation and consolidation
    times = sorted({t + d for t in [o[4] for o in obs] + grid.tolist() for d in (-1, 0, 1) if t + d >= log.first})
    at = times[pick % len(times)]
    status, context, (log, replay, toe, triples) = at_time(path, params, at, budget)
    want_status, want_context = reference(log, replay, toe, triples, params, at, budget)
    assert status == want_status
    assert context == want_context


def test_ties_in_confidence_go_to_the_later_reinforcement_then_the_later_first_mention(tmp_path):
    """Never-decaying facts with one reinforcement each tie in confidence: ``tea`` (first seen day 0,
    reinforced day 5) goes before ``jazz`` (first seen day 3, reinforced day 4) — last_reinforced
    decides before first_seen; ``zebra`` and ``apple``, reinforced in the same second, go by the later
    first mention; ``rain`` and ``snow`` tie on both and go by object."""
    params = MemoryParams(decay_rate={"user_preference": 0.0})
    obs = [("ada", "likes", "tea", "user_preference", T0), ("ada", "likes", "jazz", "user_preference", T0 + 3 * DAY),
           ("ada", "likes", "jazz", "user_preference", T0 + 4 * DAY),
           ("ada", "likes", "tea", "user_preference", T0 + 5 * DAY),
           ("bo", "likes", "snow", "user_preference", T0), ("bo", "likes", "rain", "user_preference", T0),
           # reinforced in the same second: the later first mention (zebra, day 3) goes first
           ("cy", "likes", "apple", "user_preference", T0), ("cy", "likes", "zebra", "user_preference", T0 + 3 * DAY),
           ("cy", "likes", "apple", "user_preference", T0 + 5 * DAY),
           ("cy", "likes", "zebra", "user_preference", T0 + 5 * DAY)]
    path = production_file(tmp_path / "p.sqlite", obs)
    multi = params.replace(multi_valued_predicates={"likes"})
    _, one, _ = at_time(path, multi, T0 + 6 * DAY, 1)
    assert one == {("ada", "likes", "tea"), ("bo", "likes", "rain"), ("cy", "likes", "zebra")}
    obs.append(("ada", "likes", "opera", "user_preference", T0 + 2 * DAY))  # first seen later than tea, never reinforced
    path = production_file(tmp_path / "q.sqlite", obs)
    _, two, _ = at_time(path, multi, T0 + 6 * DAY, 2)
    assert two == {("ada", "likes", "tea"), ("ada", "likes", "jazz"), ("bo", "likes", "rain"), ("bo", "likes", "snow"),
                   ("cy", "likes", "zebra"), ("cy", "likes", "apple")}


@pytest.mark.parametrize("offset, held", [(-1, True), (0, False), (1, False)])
def test_at_exactly_on_a_superseding_event_and_an_archiving_consolidation(tmp_path, offset, held):
    """At the second the superseding observation or the archiving consolidation happens, it has
    happened: the earlier fact is not held (and so not in the context) at ``at``."""
    params = MemoryParams(decay_rate={"episodic": 5.0})  # 0.4 → 0.018 by the first midnight: archived
    change = T0 + 2 * DAY
    obs = [("ada", "lives_in", "Oslo", "explicit", T0), ("ada", "lives_in", "Rome", "explicit", change),
           ("bo", "saw", "film", "episodic", T0)]
    path = production_file(tmp_path / "p.sqlite", obs)
    status, context, _ = at_time(path, params, change + offset, 3)
    assert status[("ada", "lives_in", "Oslo")].startswith("active") == held
    assert (("ada", "lives_in", "Oslo") in context) == held
    if not held:
        assert status[("ada", "lives_in", "Oslo")] == "superseded" and ("ada", "lives_in", "Rome") in context
    midnight = (T0 // DAY + 1) * DAY
    status, context, _ = at_time(path, params, midnight + offset, 3)
    assert status[("bo", "saw", "film")].startswith("active") == held
    if not held:
        assert status[("bo", "saw", "film")] == "archived"

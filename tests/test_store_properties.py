"""Property tests: random streams give identical fact tables through the reference model,
``remember`` row by row, one ``ingest`` per segment, and ``ingest`` in random splits.

Streams start anywhere in 1900–2100 (negative times included: pre-1970 data is ordinary), at a
few fixed points around 1970 (so that a stream crosses −1 and 0, which must never act as markers),
and at the edges of the supported range (years 0001 and 9999)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import example, given, settings
from hypothesis import strategies as st

from factmem.core.codes import MAX_TIME, MIN_TIME
from factmem.core.params import MemoryParams
from factmem.store.factstore import Evidence, FactStore
from factmem.testing import RefMemory
from factmem.testing.compare import FACT_COLUMNS, frame, ordered, reference_memory
from factmem.testing.strategies import param_sets, predicate_rates, streams

FACT_COLS = list(FACT_COLUMNS)
EXACT_COLS = [c for c in FACT_COLS if c != "confidence"]


def run_remember(params, segments, switch=None):
    s = FactStore(params=params)
    for i, (rows, at) in enumerate(segments):
        if switch is not None and i == 1:
            s.params = switch
        for j, (ts, subj, pred, obj, kind, note) in ordered(rows):
            s.remember(subj, pred, obj, kind, at=ts, evidence=Evidence(f"s{j % 3}", f"m{j}"), note=note)
        s.consolidate(at)
    return s


def run_ingest(params, segments, splits=None, switch=None):
    s = FactStore(params=params)
    for i, (rows, at) in enumerate(segments):
        if switch is not None and i == 1:
            s.params = switch
        df = frame(rows)
        if splits is None:
            s.ingest(df)
        else:
            order = np.lexsort((np.arange(len(rows)), df["ts"].to_numpy()))
            df = df.iloc[order].reset_index(drop=True)
            cuts = sorted({c % (len(df) + 1) for c in splits[i % len(splits)]})
            for a, b in zip([0] + cuts, cuts + [len(df)]):
                s.ingest(df.iloc[a:b])
        s.consolidate(at)
    return s


def run_reference(params, segments, switch=None):
    return reference_memory(params, segments, switch)


def store_table(s: FactStore) -> pd.DataFrame:
    return s.facts(at=0)[FACT_COLS]


def assert_same_store(a: FactStore, b: FactStore):
    pd.testing.assert_frame_equal(store_table(a), store_table(b), check_exact=True)
    pd.testing.assert_frame_equal(a.evidence(), b.evidence(), check_exact=True)


def assert_matches_reference(s: FactStore, m: RefMemory):
    got = store_table(s)
    want = pd.DataFrame(m.table(), columns=FACT_COLS)
    assert len(got) == len(want)
    if not len(want):
        return
    for col in EXACT_COLS:
        g, w = got[col].tolist(), want[col].tolist()
        norm = lambda v: None if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA else v
        assert [norm(v) for v in g] == [norm(v) for v in w], col
    np.testing.assert_allclose(got["confidence"].to_numpy(), want["confidence"].to_numpy(), rtol=1e-12, atol=0)
    ev = s.evidence()
    assert ev["fact_id"].tolist() == [e["fact_id"] for e in m.evidence]
    assert ev["action"].tolist() == [e["action"] for e in m.evidence]
    assert_effective_matches_reference(s, m)


def assert_effective_matches_reference(s: FactStore, m: RefMemory):
    """``effective_confidence`` read at several times, some before facts' last reinforcement (a
    negative age: the stored confidence, never more), equals the reference's."""
    facts = m.table()
    stamps = sorted({f["last_reinforced"] for f in facts})
    times = {stamps[0] - 86400, stamps[-1] + 3 * 86400} | {stamps[i] - 1 for i in range(0, len(stamps), max(1, len(stamps) // 3))}
    # streams may start at the edges of the supported range: probe only times a store accepts
    times = {min(max(t, MIN_TIME), MAX_TIME) for t in times}
    for at in sorted(times):
        got = s.facts(at=at)["effective_confidence"].to_numpy()
        want = np.array([m._effective(f, at) for f in facts])
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=0, err_msg=f"effective_confidence at {at}")


@settings(max_examples=200)
# a confidence exactly on the archive threshold (0.4, no decay) stays active; a read before the last
# reinforcement sees the stored confidence
@example(params=MemoryParams(archive_threshold=0.4, decay_rate={"episodic": 0.0}),
         segments=[([(1_700_000_000, "ada", "saw", "rust", "episodic", None),
                     (1_700_086_400, "ada", "likes", "go", "explicit", None)], 1_700_172_800)])
@given(params=param_sets(), segments=streams())
def test_remember_matches_reference(params, segments):
    assert_matches_reference(run_remember(params, segments), run_reference(params, segments))


@settings(max_examples=200)
@given(params=param_sets(), segments=streams())
def test_one_ingest_per_segment_equals_remember(params, segments):
    assert_same_store(run_ingest(params, segments), run_remember(params, segments))


@settings(max_examples=100)
@given(params=param_sets(), segments=streams())
def test_ingest_numbering_pairs_first_equals_remember(params, segments):
    """The fallback for dictionaries too large to pack a key in one int64 (numbering the
    (subject, predicate) pairs first), forced on small streams, gives the same store."""
    from factmem.store import writes

    saved = writes._PACKED_LIMIT
    writes._PACKED_LIMIT = 0
    try:
        unpacked = run_ingest(params, segments, splits=[[3, 7]])
    finally:
        writes._PACKED_LIMIT = saved
    assert_same_store(unpacked, run_remember(params, segments))


@settings(max_examples=200)
@given(params=param_sets(), segments=streams(),
       splits=st.lists(st.lists(st.integers(0, 30), max_size=4), min_size=1, max_size=4))
def test_ingest_in_random_splits_equals_remember(params, segments, splits):
    assert_same_store(run_ingest(params, segments, splits=splits), run_remember(params, segments))


@settings(max_examples=200)
# found under a mutant that picks the fact to supersede by id, not by (last_reinforced, id): two active
# 'likes' facts whose reinforcement order differs from their insertion order when 'likes' turns single-valued
@example(segments=[([(1_700_000_000, "ada", "likes", "rust", "explicit", None),
                     (1_700_000_000, "ada", "likes", "zig", "explicit", None),
                     (1_700_000_000, "ada", "likes", "rust", "explicit", None),
                     (1_700_000_001, "ada", "likes", "rust", "explicit", None)], 1_700_000_001),
                   ([], 1_700_000_001),
                   ([(1_700_000_001, "ada", "likes", "go", "explicit", None)], 1_700_000_001)], base="stored")
@given(segments=streams(), base=st.sampled_from(["stored", "effective"]))
def test_switching_multi_valued_to_single_valued(segments, base):
    """Keys holding several active facts (the general path) after a predicate stops being multi-valued."""
    before = MemoryParams(reinforce_base=base, multi_valued_predicates={"likes", "uses"})
    after = before.replace(multi_valued_predicates={"uses"})
    ref = run_reference(before, segments, switch=after)
    by_remember = run_remember(before, segments, switch=after)
    assert_matches_reference(by_remember, ref)
    assert_same_store(run_ingest(before, segments, switch=after), by_remember)


def test_general_path_is_exercised():
    """A deterministic case through the general path: two active 'likes' facts, then single-valued."""
    before = MemoryParams(multi_valued_predicates={"likes"})
    segs = [([(0, "a", "likes", "x", "explicit", None), (10, "a", "likes", "y", "explicit", None)], 20),
            ([(30, "a", "likes", "z", "explicit", None), (40, "a", "likes", "x", "explicit", None),
              (50, "a", "likes", "w", "explicit", None)], 60)]
    after = before.replace(multi_valued_predicates=set())
    ref = run_reference(before, segs, switch=after)
    s = run_ingest(before, segs, switch=after)
    assert_matches_reference(s, ref)
    t = store_table(s).set_index("id")
    # z supersedes the latest active (y); x, still active, is reinforced; w supersedes the latest (x)
    assert t.loc[3, "supersedes_id"] == 2 and t.loc[2, "status"] == "superseded"
    assert t.loc[1, "reinforcement_count"] == 1 and t.loc[1, "status"] == "superseded"
    assert t.loc[4, "supersedes_id"] == 1
    assert t.loc[3, "status"] == "active" and t.loc[4, "status"] == "active"


def loop_replay(store, rows, grid, prune=True):
    """The documented meaning of replay: ingest ts < T, consolidate(T), …, then the rest."""
    df = frame(rows)
    ts = df["ts"].to_numpy()
    prev = None
    for T in sorted(set(grid)):
        mask = ts < T if prev is None else (ts < T) & (ts >= prev)
        if mask.any():
            store.ingest(df[mask])
        store.consolidate(int(T), prune=prune)
        prev = T
    rest = np.ones(len(ts), bool) if prev is None else ts >= prev
    if rest.any():
        store.ingest(df[rest])


@settings(max_examples=200)
@given(params=param_sets(), before=streams(), after=streams(),
       extra=st.lists(st.integers(-3 * 86400, 40 * 86400), max_size=4))
def test_replay_equals_the_ingest_consolidate_loop(params, before, after, extra):
    a, b = FactStore(params=params), FactStore(params=params)
    for s in (a, b):  # some history first: replay starts from existing active facts
        for rows, at in before:
            s.ingest(frame(rows))
            s.consolidate(at)
    shift = max([at for _, at in before]) - after[0][1] + 3600
    earliest = min([r[0] for seg, _ in after for r in seg] + [after[0][1]])
    shift += max(0, MIN_TIME - (earliest + shift))  # at the range's lower edge, stay inside it
    rows = [(t + shift,) + r[1:] for seg, _ in after for r in seg for t in [r[0]]]
    # extra consolidations up to 3 days before the replayed events (kept inside the supported range)
    grid = [at + shift for _, at in after] + [max(MIN_TIME, after[0][1] + shift + e) for e in extra]
    a.replay(frame(rows), grid)
    loop_replay(b, rows, grid)
    assert_same_store(a, b)


@settings(max_examples=150)
@given(segments=streams(), first=predicate_rates, then=predicate_rates, base=st.sampled_from(["stored", "effective"]))
def test_per_predicate_rates_are_stored_at_insert_and_kept_by_reinforcement(segments, first, then, base):
    """Facts take their predicate's rate (else their kind's) when inserted; changing the table later
    changes only the facts inserted after, through every path (reference, remember, ingest, replay)."""
    before = MemoryParams(reinforce_base=base, decay_rate_by_predicate=first, archive_threshold=0.3)
    after = before.replace(decay_rate_by_predicate=then)
    ref = run_reference(before, segments, switch=after)
    by_remember = run_remember(before, segments, switch=after)
    assert_matches_reference(by_remember, ref)
    assert_same_store(run_ingest(before, segments, switch=after), by_remember)
    table = store_table(by_remember)
    for _, fact in table.iterrows():  # a handful of rows: the clear form
        own = [t[fact["predicate"]] for t in (first, then) if fact["predicate"] in t]
        assert fact["decay_rate"] in own + [before.decay_rate[fact["kind"]]], (fact["predicate"], fact["decay_rate"])


def test_per_predicate_rate_deterministic_case():
    """works_on decays fast, born_in never: the same kind, different rates, through replay."""
    p = MemoryParams(decay_rate_by_predicate={"works_on": 0.5, "born_in": 0.0})
    rows = [(0, "a", "works_on", "x", "explicit", None), (0, "a", "born_in", "y", "explicit", None),
            (0, "a", "lives_in", "z", "explicit", None), (86400, "a", "works_on", "x", "explicit", None)]
    s = FactStore(params=p)
    s.replay(frame(rows), [30 * 86400])
    t = store_table(s).set_index("predicate")
    assert t.loc["works_on", "decay_rate"] == 0.5 and t.loc["born_in", "decay_rate"] == 0.0
    assert t.loc["lives_in", "decay_rate"] == 0.05  # no rate of its own: the kind's
    # at day 30: works_on (0.58·e^(−0.5·29) ≈ 3e-7) archived; lives_in (0.4·e^(−0.05·30) ≈ 0.089) and
    # born_in (0.4, no decay) above the 0.05 threshold
    assert t.loc["works_on", "status"] == "archived"
    assert t.loc["lives_in", "status"] == "active" and t.loc["born_in", "status"] == "active"
    assert_matches_reference(s, run_reference(p, [(rows, 30 * 86400)]))

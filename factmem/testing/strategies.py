"""Hypothesis strategies for property tests of a fact memory: streams of mentions separated by
consolidations, and parameter sets that reach the semantics' corners.

A *stream* is a list of segments ``(rows, consolidate_at)``; each row is ``(ts, subject, predicate,
object, kind, note)``. Within a segment rows are shuffled (a memory must order them by (ts, row
order)); the segment ends with a consolidation at ``consolidate_at``. Times start anywhere in
1900–2100 or at the edges of the supported range, and move by gaps from 0 (ties) to 20 days.
Names include SQL metacharacters and non-ASCII text.
"""

from __future__ import annotations

from hypothesis import strategies as st

from factmem.core.codes import KINDS, MAX_TIME, MIN_TIME
from factmem.core.params import MemoryParams

__all__ = ["SUBJECTS", "PREDICATES", "OBJECTS", "GAPS", "MAX_SPAN", "events", "starts", "streams", "param_sets",
           "predicate_rates", "Row", "Segment"]

#: a mention: (ts, subject, predicate, object, kind, note)
Row = tuple[int, str, str, str, str, "str | None"]
#: rows, then the consolidation time that ends the segment
Segment = tuple[list[Row], int]

SUBJECTS = ["ada", "bob", "x'); DROP TABLE memory_facts; --"]
PREDICATES = ["likes", "lives_in", "uses"]
OBJECTS = ["rust", "zig", "go", "café ☕"]
GAPS = [0, 0, 1, 60, 3600, 86400, 3 * 86400, 20 * 86400]
#: The longest a stream (or two, back to back, plus extra consolidations) can span, in seconds.
MAX_SPAN = 2 * 4 * (20 * 20 * 86400 + 10 * 86400) + 45 * 86400
_YEAR_1900, _YEAR_2100 = -2_208_988_800, 4_102_444_800

#: Where a stream starts: anywhere in 1900–2100, or at a point chosen to cross 1970 or sit at a range edge.
starts = st.one_of(
    st.integers(_YEAR_1900, _YEAR_2100),
    st.sampled_from([MIN_TIME, MIN_TIME + 1, -86400 * 25, -3600, -2, -1, 0, 1_700_000_000, MAX_TIME - MAX_SPAN]),
)

#: One mention without its time: (gap since the previous one, subject, predicate, object, kind, note).
events = st.tuples(
    st.sampled_from(GAPS), st.sampled_from(SUBJECTS), st.sampled_from(PREDICATES),
    st.sampled_from(OBJECTS), st.sampled_from(list(KINDS)),
    st.one_of(st.none(), st.sampled_from(["n1", "n2"])),
)

#: Per-predicate decay rates: some predicates get their own rate (0 never decays, 2.0 fast), the rest
#: their kind's; "absent" is a predicate no stream mentions.
predicate_rates = st.dictionaries(st.sampled_from(PREDICATES + ["absent"]), st.sampled_from([0.0, 0.01, 0.3, 2.0]),
                                  max_size=3)


@st.composite
def streams(draw: st.DrawFn, max_segments: int = 4, max_rows: int = 20) -> list[Segment]:
    """Segments of mentions separated by consolidations; ts non-decreasing with ties, rows shuffled."""
    n_seg = draw(st.integers(1, max_segments))
    t = draw(starts)
    segments: list[Segment] = []
    for _ in range(n_seg):
        evs = draw(st.lists(events, min_size=0, max_size=max_rows))
        rows: list[Row] = []
        for gap, s, p, o, k, note in evs:
            t += gap
            rows.append((t, s, p, o, k, note))
        # shuffle rows inside the segment: a memory must order them by (ts, row order)
        perm = draw(st.permutations(range(len(rows))))
        rows = [rows[i] for i in perm]
        t += draw(st.sampled_from([0, 3600, 86400, 10 * 86400]))
        segments.append((rows, t))  # consolidate at t after the segment
    return segments


@st.composite
def param_sets(draw: st.DrawFn) -> MemoryParams:
    """Parameter sets that reach the corners: the effective reinforcement base, multi-valued
    predicates, a gain of 1 (straight to the cap), no decay, fast decay, a threshold that a
    confidence hits exactly (0.4 at rate 0), no threshold, per-predicate rates."""
    base = draw(st.sampled_from(["stored", "effective"]))
    mvp = draw(st.sets(st.sampled_from(PREDICATES), max_size=2))
    gain = draw(st.sampled_from([0.3, 0.05, 0.9, 1.0]))
    rate = draw(st.sampled_from([0.3, 0.0, 2.0]))
    thr = draw(st.sampled_from([0.05, 0.3, 0.0, 0.4]))  # 0.4: hit exactly at rate 0
    return MemoryParams().replace(reinforce_base=base, multi_valued_predicates=frozenset(mvp), reinforce_gain=gain,
                                  archive_threshold=thr, decay_rate={"episodic": rate},
                                  decay_rate_by_predicate=draw(predicate_rates))

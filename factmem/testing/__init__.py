"""Test your own memory against the same semantics factmem's store is held to.

``reference`` (:class:`RefMemory`: a plain-Python model of docs/design.md §4, a dict of facts and
linear scans, readable line by line), ``strategies`` (Hypothesis strategies: streams of mentions with
consolidations, parameter sets that reach the corners), ``compare`` (the reference's fact table for a
stream, and an assertion that names the first differing column and fact). Needs Hypothesis
(``pip install 'factmem[testing]'``).

A property test of another implementation — a port of the seed's crate, say — is a few lines::

    from hypothesis import given
    from factmem.testing import assert_facts_equal, expected_facts, ordered, param_sets, streams

    @given(params=param_sets(), segments=streams())
    def test_my_memory_follows_the_semantics(params, segments):
        mine = MyMemory(params)                      # your implementation
        for rows, consolidate_at in segments:
            for _, (ts, subject, predicate, obj, kind, note) in ordered(rows):
                mine.remember(subject, predicate, obj, kind, at=ts, note=note)
            mine.consolidate(consolidate_at)
        assert_facts_equal(mine.facts_table(), expected_facts(params, segments))

factmem's own store passes exactly this (tests/test_store_properties.py).
"""

from factmem.testing.compare import (
                                     FACT_COLUMNS,
                                     SEED_COLUMNS,
                                     assert_facts_equal,
                                     expected_facts,
                                     frame,
                                     ordered,
                                     reference_memory,
)
from factmem.testing.reference import RefMemory
from factmem.testing.strategies import param_sets, predicate_rates, streams

__all__ = ["RefMemory", "param_sets", "predicate_rates", "streams", "ordered", "frame", "reference_memory",
           "expected_facts", "assert_facts_equal", "FACT_COLUMNS", "SEED_COLUMNS"]

"""factmem.testing as a user would use it on their own memory: the recipe of its docstring passes for
factmem's store, and the assertion catches a memory that gets the semantics wrong."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from factmem import FactStore, MemoryParams
from factmem.testing import assert_facts_equal, expected_facts, ordered, param_sets, streams


class StoreAsUserMemory:
    """factmem's store behind the interface a user's memory would have."""

    def __init__(self, params: MemoryParams):
        self.store = FactStore(params=params)

    def remember(self, subject, predicate, obj, kind, *, at, note=None):
        self.store.remember(subject, predicate, obj, kind, at=at, note=note)

    def consolidate(self, at):
        self.store.consolidate(at)

    def facts_table(self):
        return self.store.facts(at=0)


class SloppyMemory(StoreAsUserMemory):
    """Gets one rule wrong: reinforcement does not count (a classic port slip)."""

    def facts_table(self):
        t = super().facts_table()
        return t.assign(reinforcement_count=0)


def replay(memory, segments):
    for rows, consolidate_at in segments:
        for _, (ts, subject, predicate, obj, kind, note) in ordered(rows):
            memory.remember(subject, predicate, obj, kind, at=ts, note=note)
        memory.consolidate(consolidate_at)
    return memory.facts_table()


@settings(max_examples=40)
@given(params=param_sets(), segments=streams())
def test_the_docstring_recipe_passes_for_the_store(params, segments):
    assert_facts_equal(replay(StoreAsUserMemory(params), segments), expected_facts(params, segments))


def test_the_assertion_names_the_column_and_fact_a_sloppy_memory_gets_wrong():
    segments = [([(0, "ada", "uses", "vim", "explicit", None), (60, "ada", "uses", "vim", "explicit", None)], 86400)]
    params = MemoryParams()
    expected = expected_facts(params, segments)
    assert_facts_equal(replay(StoreAsUserMemory(params), segments), expected)
    with pytest.raises(AssertionError, match="column 'reinforcement_count' differs at fact id 1: 0, expected 1"):
        assert_facts_equal(replay(SloppyMemory(params), segments), expected)

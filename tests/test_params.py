"""MemoryParams: seed defaults, validation naming field and value, exact round trips."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from factmem.core.codes import KINDS
from factmem.core.params import MemoryParams, PerKind


def test_seed_defaults():
    p = MemoryParams()
    assert p.decay_rate.to_dict() == {"explicit": 0.05, "user_preference": 0.02, "episodic": 0.30, "derived": 0.02}
    assert p.initial_confidence.to_dict() == {"explicit": 0.4, "user_preference": 0.5, "episodic": 0.4, "derived": 0.5}
    assert (p.reinforce_gain, p.confidence_cap, p.archive_threshold) == (0.3, 0.99, 0.05)
    assert (p.prune_min_reinforcements, p.min_cluster, p.max_facts, p.temperature) == (2, 3, 2, 0.0)
    assert p.reinforce_base == "stored" and p.multi_valued_predicates == frozenset()


def test_immutable_and_replace():
    p = MemoryParams()
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.reinforce_gain = 0.5  # type: ignore[misc]
    q = p.replace(reinforce_gain=0.2, decay_rate={"episodic": 0.1}, **{"initial_confidence.derived": 0.6})
    assert q.reinforce_gain == 0.2 and q.decay_rate.episodic == 0.1 and q.decay_rate.explicit == 0.05
    assert q.initial_confidence.derived == 0.6 and p.reinforce_gain == 0.3
    assert hash(q) != hash(p) and q == MemoryParams.from_flat(q.to_flat())


@pytest.mark.parametrize("changes, message", [
    ({"decay_rate": {"episodic": -0.1}}, "decay_rate.episodic = -0.1 is invalid: must be >= 0"),
    ({"decay_rate": {"episodic": math.nan}}, "decay_rate.episodic must be finite, got nan"),
    ({"reinforce_gain": 0.0}, "reinforce_gain = 0.0 is invalid: must be in (0, 1]"),
    ({"reinforce_gain": 1.5}, "reinforce_gain = 1.5 is invalid"),
    ({"confidence_cap": 1.2}, "confidence_cap = 1.2 is invalid: must be in (0, 1]"),
    ({"archive_threshold": 0.99}, "archive_threshold = 0.99 is invalid"),
    ({"decay_rate": {"mood": 0.1}}, "decay_rate: unknown kind 'mood'"),
    ({"reinforce_base": "sometimes"}, "reinforce_base = 'sometimes' is invalid"),
    ({"prune_min_reinforcements": 0}, "prune_min_reinforcements = 0 is invalid"),
    ({"max_facts": 1.5}, "max_facts must be an integer, got 1.5"),
    ({"reinforce_gain": "0.3"}, "reinforce_gain must be a number, got '0.3'"),
    ({"multi_valued_predicates": "speaks"}, "multi_valued_predicates must be a set"),
    ({"initial_confidence": {"explicit": 0.0}}, "initial_confidence.explicit = 0.0 is invalid"),
    ({"decay_rate_by_predicate": {"works_on": -0.01}}, "decay_rate_by_predicate.works_on = -0.01 is invalid: must be >= 0"),
    ({"decay_rate_by_predicate.works_on": math.inf}, "decay_rate_by_predicate.works_on must be finite, got inf"),
    ({"decay_rate_by_predicate.works_on": "fast"}, "decay_rate_by_predicate.works_on must be a number, got 'fast'"),
    ({"decay_rate_by_predicate": {"": 0.1}}, "decay_rate_by_predicate: each predicate must be a non-empty string"),
    ({"decay_rate_by_predicate": [("works_on", 0.1)]}, "decay_rate_by_predicate must be a table"),
])
def test_invalid_values_name_field_and_value(changes, message):
    with pytest.raises(ValueError) as exc:
        MemoryParams().replace(**changes)
    assert message in str(exc.value)


def test_unknown_field():
    with pytest.raises(ValueError, match="unknown parameter 'gain'"):
        MemoryParams().replace(gain=0.1)
    with pytest.raises(ValueError, match="unknown parameter 'colour'"):
        MemoryParams.from_dict({"colour": "red"})


def test_per_predicate_decay_rates():
    p = MemoryParams()
    assert p.decay_rate_by_predicate == {} and "decay_rate_by_predicate" not in p.to_dict()
    assert "decay_rate_by_predicate" not in p.to_toml()  # the seed's files are unchanged
    q = p.replace(**{"decay_rate_by_predicate.works_on": 0.0103, "decay_rate_by_predicate.born_in": 0})
    assert q.decay_rate_for("explicit", "works_on") == 0.0103 and q.decay_rate_for("explicit", "born_in") == 0.0
    assert q.decay_rate_for("explicit", "lives_in") == 0.05 and q.decay_rate_for("episodic", "works_on") == 0.0103
    assert list(q.decay_rate_by_predicate) == ["born_in", "works_on"]  # sorted
    assert q.get("decay_rate_by_predicate.works_on") == 0.0103
    assert q.flat_names()[-2:] == ["decay_rate_by_predicate.born_in", "decay_rate_by_predicate.works_on"]
    assert MemoryParams.is_flat_name("decay_rate_by_predicate.anything") and not MemoryParams.is_flat_name("decay_rate_by_predicate.")
    # a dotted name adds to the table, None removes, a mapping replaces it whole
    assert q.replace(**{"decay_rate_by_predicate.born_in": None}).decay_rate_by_predicate == {"works_on": 0.0103}
    assert q.replace(decay_rate_by_predicate={"lives_in": 0.1}).decay_rate_by_predicate == {"lives_in": 0.1}
    both = q.replace(**{"decay_rate_by_predicate.x": 0.2}, decay_rate_by_predicate={"y": 0.3})
    assert both.decay_rate_by_predicate == {"x": 0.2, "y": 0.3}  # the mapping first, then the dotted names
    assert hash(q) != hash(p) and q != p and q == MemoryParams(decay_rate_by_predicate={"works_on": 0.0103, "born_in": 0.0})
    with pytest.raises(ValueError, match="no per-predicate decay rate for 'lives_in'"):
        q.get("decay_rate_by_predicate.lives_in")
    rates = q.decay_rates_for(np.array([0, 0, 2, 1]), np.array([0, 1, 1, 2]), ["works_on", "born_in", "likes"])
    assert rates.tolist() == [0.0103, 0.0, 0.0, 0.02]
    assert MemoryParams.from_toml(q.to_toml()) == q and MemoryParams.from_json(q.to_json()) == q


def test_flat_names():
    names = MemoryParams.field_names()
    assert "decay_rate.episodic" in names and "reinforce_gain" in names and "decay_rate" not in names
    assert MemoryParams().get("decay_rate.episodic") == 0.3


def test_partial_toml_fills_defaults():
    p = MemoryParams.from_toml('reinforce_gain = 0.25\n[decay_rate]\nepisodic = 0.5\n')
    assert p == MemoryParams(reinforce_gain=0.25, decay_rate={"episodic": 0.5})


def test_load_errors_name_the_file(tmp_path):
    f = tmp_path / "p.toml"
    f.write_text("reinforce_gain = 2.0\n")
    with pytest.raises(ValueError, match=r"p.toml: reinforce_gain = 2.0 is invalid"):
        MemoryParams.load(f)


finite = st.floats(min_value=0.0, max_value=5.0, allow_nan=False)
unit = st.floats(min_value=1e-6, max_value=1.0, allow_nan=False)


@st.composite
def params(draw):
    cap = draw(st.floats(min_value=0.05, max_value=1.0))
    return MemoryParams(
        decay_rate={k: draw(finite) for k in KINDS},
        initial_confidence={k: draw(st.floats(min_value=1e-6, max_value=cap)) for k in KINDS},
        reinforce_gain=draw(unit),
        confidence_cap=cap,
        archive_threshold=draw(st.floats(min_value=0.0, max_value=cap, exclude_max=True)),
        retrieval_threshold=draw(st.floats(min_value=0.0, max_value=cap)),
        prune_min_reinforcements=draw(st.integers(1, 50)),
        min_cluster=draw(st.integers(1, 50)),
        max_facts=draw(st.integers(1, 10)),
        temperature=draw(st.floats(min_value=0.0, max_value=2.0)),
        reinforce_base=draw(st.sampled_from(["stored", "effective"])),
        multi_valued_predicates=draw(st.frozensets(st.text(min_size=1, max_size=8))),
        link_scope=draw(st.sampled_from(["cluster", "support"])),
        decay_rate_by_predicate=draw(st.dictionaries(st.text(min_size=1, max_size=8), finite, max_size=3)),
    )


@settings(max_examples=300)
@given(params())
def test_round_trips_are_exact(p):
    assert MemoryParams.from_toml(p.to_toml()) == p
    assert MemoryParams.from_json(p.to_json()) == p
    assert MemoryParams.from_dict(p.to_dict()) == p
    assert MemoryParams.from_flat(p.to_flat()) == p


def test_perkind_lookup():
    pk = PerKind(1.0, 2.0, 3.0, 4.0)
    assert pk["episodic"] == 3.0 and pk.as_array().tolist() == [1.0, 2.0, 3.0, 4.0]
    with pytest.raises(KeyError, match="unknown kind"):
        pk["nope"]

"""Golden values of the decay math (a wrong formula — MemoryBank's exp(-t / 5*S) — would fail these)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from factmem.core.decay import (
    age_days,
    days_to_threshold,
    effective_confidence,
    half_life_days,
    kind_table,
    reinforce,
    reinforce_closed_form,
    reinforce_sequence,
    reinforcements_to_cap,
)
from factmem.core.params import MemoryParams


def test_effective_confidence_golden():
    assert effective_confidence(0.4, 0.30, 0.0) == 0.4
    assert effective_confidence(0.4, 0.30, -3.0) == 0.4  # future timestamps do not grow confidence
    assert float(effective_confidence(0.4, 0.30, 1.0)) == pytest.approx(0.29632728827268716, rel=1e-15)
    assert float(effective_confidence(0.5, 0.02, 35.0)) == pytest.approx(0.24829265189570474, rel=1e-15)


def test_half_lives_of_the_seed():
    hl = half_life_days(np.array([0.05, 0.02, 0.30, 0.0]))
    assert hl[:3] == pytest.approx([13.862943611198906, 34.657359027997266, 2.3104906018664844], rel=1e-15)
    assert math.isinf(hl[3])


def test_reinforcement_golden_and_cap():
    seq = reinforce_sequence(0.4, 14)
    assert seq[:5] == pytest.approx([0.4, 0.58, 0.706, 0.7942, 0.85594], abs=1e-15)
    assert seq[12] == 0.99 and seq[-1] == 0.99 and seq[11] < 0.99
    assert reinforcements_to_cap(0.4, 0.3, 0.99) == 12
    assert reinforce(0.99, 0.3, 0.99) == 0.99


def test_closed_form_matches_iteration():
    n = np.arange(0, 30)
    it = np.array([reinforce_sequence(0.4, k)[-1] for k in n])
    np.testing.assert_allclose(reinforce_closed_form(0.4, n, 0.3, 0.99), it, rtol=1e-14)


def test_days_to_threshold():
    d = days_to_threshold(0.4, 0.3, 0.05)
    assert float(d) == pytest.approx(math.log(8) / 0.3)
    assert days_to_threshold(0.04, 0.3, 0.05) == 0 and math.isinf(days_to_threshold(0.4, 0.0, 0.05))


def test_age_days_is_seconds_over_86400():
    assert age_days(86400 * 3 + 43200, 0) == 3.5


def test_kind_table():
    t = kind_table(MemoryParams())
    assert t.loc["episodic", "half_life_days"] == pytest.approx(2.31, abs=0.01)
    assert t.loc["user_preference", "half_life_days"] == pytest.approx(34.66, abs=0.01)
    assert t.loc["episodic", "days_to_archive"] == pytest.approx(6.93, abs=0.01)

"""The whole-column helpers of the scorers (``factmem.evaluation.arrays``) that replace sorts of Python
strings: equal to the plain-Python orders they stand for, on ids that sort differently by byte,
by case and by code point, with their fallbacks."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from factmem.core.context_rule import lexicographic_rank
from factmem.errors import InputError
from factmem.evaluation.arrays import session_starts, sorted_level, triple_ranks

IDS = ["b", "B", "a", "é", "z", "ä", "10", "9", "A b"]


def test_session_starts_ranks_by_code_point_and_takes_each_sessions_first_message():
    rng = np.random.default_rng(4)
    mentions = list(rng.choice(IDS, 60))
    messages = pd.DataFrame({"session_id": list(rng.choice(IDS + ["only-messages"], 80)) + [None],
                             "ts": rng.integers(-10**9, 10**9, 81)})
    rank, names, start = session_starts(pd.Series(mentions, dtype="str"), messages["session_id"], messages["ts"])
    ordered = sorted(set(mentions))  # Python's order of str: code points
    assert names.to_pylist() == ordered
    assert rank.tolist() == [ordered.index(m) for m in mentions]
    first = messages.dropna().groupby("session_id")["ts"].min()
    want = [float(first[n]) if n in first.index else np.nan for n in ordered]
    assert np.array_equal(start, np.array(want), equal_nan=True)


def test_session_starts_names_mentions_without_a_session():
    with pytest.raises(InputError, match="1 mentions have no session_id"):
        session_starts(pd.Series(["a", None, "b"], dtype="str"))


def test_triple_ranks_from_sorted_levels_equal_the_sorts_they_replace():
    rng = np.random.default_rng(5)
    subj, pred, obj = (list(rng.choice(IDS, 40)) for _ in range(3))
    _, triples = pd.MultiIndex.from_arrays([subj, pred, obj]).factorize()
    names, subject, po_rank = triple_ranks(triples)
    assert sorted_level(triples, 0) is not None  # the levels path, not the fallback
    want_names, want_subject = np.unique(np.asarray(triples.get_level_values(0), dtype=object), return_inverse=True)
    assert names.tolist() == want_names.tolist() and subject.tolist() == want_subject.tolist()
    assert po_rank.tolist() == lexicographic_rank(triples.get_level_values(1), triples.get_level_values(2)).tolist()
    # levels not in order (an index built from its parts): the sorts themselves
    shuffled = pd.MultiIndex(levels=[list(reversed(sorted(set(subj)))), sorted(set(pred)), sorted(set(obj))],
                             codes=[[list(reversed(sorted(set(subj)))).index(s) for s in triples.get_level_values(0)],
                                    triples.codes[1], triples.codes[2]])
    assert sorted_level(shuffled, 0) is None
    again = triple_ranks(shuffled)
    assert again[0].tolist() == names.tolist() and again[1].tolist() == subject.tolist()
    assert again[2].tolist() == po_rank.tolist()

"""The no-truth proxies of "needed" (factmem.evaluation.proxies) against a brute-force reading of their
definitions, point by point and fact by fact; and the agreement measures (factmem.tuning.agreement)."""

from __future__ import annotations

import numpy as np
import pytest

from factmem.core.params import MemoryParams
from factmem.data.generate import generate
from factmem.evaluation.context import ContextEvaluator
from factmem.evaluation.proxies import EPISODE_SESSIONS, PROXIES, WINDOW_SESSIONS
from factmem.evaluation.simulate import prepare
from factmem.tuning.agreement import flat_share, measure_agreement, spearman


@pytest.fixture(scope="module")
def P():
    return prepare(generate("tiny", seed=5))


def _reference(P, ev: ContextEvaluator, name: str, params: MemoryParams):
    """Per scored point, per triple of its subject: (needed, charged, stale), read off the definitions
    with Python sets."""
    subj_of = np.asarray(ev.subjects, dtype=object)[ev._triple_subject]
    pred_of = np.asarray(P.triples.get_level_values(1), dtype=object)
    starts = P.dataset.messages.groupby("session_id", observed=True)["ts"].min().to_dict()
    by_subject: dict = {}
    episodes = set()
    for tr, ts, sess, kind in zip(P.ev_triple, P.events["ts"].to_numpy(), P.events["session_id"].astype(str),
                                  P.events["kind"].astype(str)):
        by_subject.setdefault(subj_of[tr], []).append((int(ts), int(tr), sess))
        if kind == "episodic":
            episodes.add(int(tr))
    log_multi = P.dataset.multi_valued_predicates  # kind-aware reads the log's registry, not the candidate's
    assert log_multi
    out = {}
    for row in ev.points.itertuples():
        s, t = ev.subjects[row.subject], row.t
        mine = by_subject[s]
        sess = sorted({(int(starts[x]), x) for _, _, x in mine})  # the subject's sessions in point order
        i = sess.index((t, row.session))
        window = {x for _, x in sess[i:i + WINDOW_SESSIONS]}
        before = {tr for ts, tr, _ in mine if ts < t}
        later = {tr for ts, tr, _ in mine if ts >= t}
        in_window = {tr for _, tr, x in mine if x in window}
        flags = {}
        for tr in {tr for _, tr, _ in mine}:
            others = {x for _, x, _ in mine if pred_of[x] == pred_of[tr] and x != tr}
            single = pred_of[tr] not in params.multi_valued_predicates
            if name == "kind-aware":
                if tr in episodes:  # needed while one of the previous sessions mentions it; else expired
                    recent = {x for _, x in sess[max(0, i - EPISODE_SESSIONS):i]}
                    needed = tr in before and any(y == tr and x in recent for _, y, x in mine)
                    stale, charged = False, not needed
                else:  # needed while the latest word on its (subject, predicate) before t
                    latest = max((ts for ts, y, _ in mine if ts < t and (y == tr or y in others)), default=None)
                    current = latest is not None and any(ts == latest and y == tr for ts, y, _ in mine)
                    needed = tr in before and (current or pred_of[tr] in log_multi)
                    stale = charged = tr in before and not needed
            elif name == "next-3-sessions":
                needed = tr in before and tr in in_window
                stale = tr not in in_window and bool(others & in_window) and single
                charged = stale
            else:
                needed = tr in before and tr in later
                stale = tr not in later and single and bool(others & later)
                charged = (not needed) if name == "hindsight" else stale
            flags[tr] = (needed, charged, stale)
        out[row.Index] = flags
    return out


def _episodes(P) -> set:
    return {int(tr) for tr, kind in zip(P.ev_triple, P.events["kind"].astype(str)) if kind == "episodic"}


@pytest.mark.parametrize("name", PROXIES)
@pytest.mark.parametrize("sample", [None, 3])
def test_each_proxy_is_its_definition(P, name, sample):
    params = MemoryParams(multi_valued_predicates={"enjoys", "met_with"})
    ev = ContextEvaluator(P, budgets=(20,), needed=name, max_points_per_subject=sample, seed=1)
    ref = _reference(P, ev, name, params)
    pe, tr = [], []
    for p, flags in ref.items():
        for x in flags:
            pe.append(p)
            tr.append(x)
    pe_a, tr_a = np.asarray(pe), np.asarray(tr)
    needed, code, label = ev._proxy.flags(pe_a, tr_a, ev._pt_t[pe_a], params, np.asarray(ev._predicates, dtype=object))
    want = np.array([ref[p][x] for p, x in zip(pe, tr)])
    other = 3 if name == "hindsight" else 5  # never mentioned again: expired (hindsight) or unneeded
    want_code = np.where(want[:, 0], 1, np.where(want[:, 2], 2, np.where(want[:, 1], 3, other)))
    if name == "kind-aware":  # a lasting fact not yet mentioned is unneeded; an episode not needed, expired
        ep = np.isin(tr, list(_episodes(P)))
        want_code = np.where(want[:, 0], 1, np.where(want[:, 2], 2, np.where(ep, 3, 5)))
    assert (needed == want[:, 0]).all() and (code == want_code).all() and (label == needed).all()
    counts = np.array([sum(f[0] for f in ref[p].values()) for p in range(len(ev.points))], float)
    assert (ev._pt_needed == counts).all()
    assert counts.sum() > 0 and want[:, 1].any()  # the log exercises both sides


def test_agreement_measures(P):
    assert flat_share(np.array([0.5, 0.5, 0.5, 0.1])) == 0.75 and flat_share(np.array([np.nan])) == 1.0
    assert spearman(np.array([1.0, 2.0, 3.0]), np.array([10.0, 30.0, 20.0])) == pytest.approx(0.5)
    assert np.isnan(spearman(np.array([1.0, 1.0]), np.array([1.0, 2.0])))
    r = measure_agreement(P.dataset, ("hindsight", "next-session"), n=6, bootstrap=20)
    t = r.table.set_index("proxy")
    assert list(t.index) == ["hindsight", "next-session"] and r.candidates == 7
    assert ((t["rho"] >= -1) & (t["rho"] <= 1)).all()
    # the truth-scored utility of a recommendation never beats the truth's own choice by more than fold noise,
    # and regret is its difference
    assert np.allclose(t["regret"], t["truth_best"] - t["truth_utility"])
    assert list(r.utilities.columns) == ["truth", "hindsight", "next-session"] and len(r.utilities) == 7

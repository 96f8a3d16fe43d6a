"""The decision rules of ``tune`` on hand-built logs: the reference policies (empty, keep-everything),
the minimum effect, the baseline-below-empty sentence, trade-offs, identification and restarts."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from factmem.core.params import MemoryParams
from factmem.data.format import empty_generalizations
from factmem.data.logs import make_dataset, save
from factmem.errors import InputError
from factmem.evaluation.context import FIELDS
from factmem.tuning.decision import Promotion, below_empty, clears, judge, tradeoffs
from factmem.tuning.references import EMPTY, KEEP_EVERYTHING, empty_sums, keep_everything
from factmem.tuning.settings import Compute, Holdout, Objective, Search
from factmem.tuning.sweep import sweep
from factmem.tuning.tune import tune

LOCAL = Compute(workers=0, progress=False)
DAY = 86400
T0 = 1_700_000_000


def _save_log(folder, name: str, msgs: list, events: list, truth: list, *, end: int):
    """A dataset folder of the hand-built rows (messages, fact mentions, truth)."""
    ds = make_dataset(pd.DataFrame(msgs, columns=["session_id", "message_id", "ts", "speaker", "text"]),
                      pd.DataFrame(events, columns=["ts", "subject", "predicate", "object", "kind", "session_id",
                                                    "message_id", "note"]),
                      pd.DataFrame(truth, columns=["subject", "predicate", "object", "kind", "valid_from", "valid_to",
                                                   "relevant_until", "noise"]),
                      empty_generalizations(), {"name": name, "start": T0, "end": end})
    return save(ds, folder)


def _junk_log(folder, *, people: int = 12, sessions: int = 10, junk: int = 4):
    """Each person, every two days: one true fact (needed from then on, never repeated) and ``junk``
    extraction errors (never true). The seed's numbers fill a context of 20 with junk: the baseline
    scores below the empty memory. No fact is ever mentioned twice: the gain has no effect."""
    msgs, events, truth = [], [], []
    for p in range(people):
        who = f"person{p:02d}"
        for s in range(sessions):
            ts = T0 + s * 2 * DAY + p * 60
            sid, mid = f"s{p:02d}_{s:02d}", f"m{p:02d}_{s:02d}"
            msgs.append((sid, mid, ts, who, "..."))
            facts = [(f"fact{s}", "yes", "")] + [(f"junk{s}_{j}", "x", "extraction") for j in range(junk)]
            for pred, obj, noise in facts:
                events.append((ts, who, pred, obj, "explicit", sid, mid, ""))
                truth.append((who, pred, obj, "explicit", ts, ts if noise else None, None, noise or None))
    return _save_log(folder, "junk", msgs, events, truth, end=T0 + sessions * 2 * DAY)


@pytest.fixture(scope="module")
def junk_dir(tmp_path_factory):
    return _junk_log(tmp_path_factory.mktemp("junk"))


def C(a, b, low, high):
    return SimpleNamespace(a=a, b=b, difference=a - b, low=low, high=high)


def test_keep_everything_and_empty_sums():
    base = MemoryParams(multi_valued_predicates=["likes"], decay_rate_by_predicate={"lives_in": 0.01})
    p = keep_everything(base)
    assert all(p.decay_rate[k] == 0 for k in ("explicit", "user_preference", "episodic", "derived"))
    assert p.decay_rate_by_predicate["lives_in"] == 0 and p.archive_threshold == p.retrieval_threshold == 1e-6
    assert p.multi_valued_predicates == base.multi_valued_predicates and p.reinforce_gain == base.reinforce_gain
    sums = np.arange(2 * 3 * len(FIELDS), dtype=float).reshape(2, 3, len(FIELDS)) + 1
    e = empty_sums(sums)
    for i, name in enumerate(FIELDS):
        assert (e[..., i] == (sums[..., i] if name in ("points", "needed") else 0)).all(), name


def test_the_rule_needs_the_minimum_effect_against_every_comparison():
    sure = C(0.8, 0.7, 0.05, 0.15)
    assert clears(sure, False, 0.01) and not clears(sure, False, 0.05) and not clears(sure, True, 0.0)
    assert clears(C(0.3, 0.5, -0.3, -0.1), True, 0.01)
    keep, why = judge({"baseline": sure, "empty": C(0.8, 0.0, 0.7, 0.9)}, lower_is_better=False, min_effect=0.01,
                      objective="utility@20")
    assert keep == "recommended" and "Rule: promoted only if" in why and "minimum effect (+0.01)" in why
    # better than the baseline, not than the empty memory: the baseline stays, and the sentence says why
    keep, why = judge({"baseline": sure, "empty": C(0.0, 0.0, 0.0, 0.0)}, lower_is_better=False, min_effect=0.01,
                      objective="utility@20")
    assert keep == "baseline" and "the empty memory" in why and why.startswith("Not promoted")
    keep, why = judge({"baseline": C(0.705, 0.7, 0.002, 0.008)}, lower_is_better=False, min_effect=0.01,
                      objective="utility@20")
    assert keep == "baseline" and "does not clear the minimum effect 0.01" in why
    keep, _ = judge({"baseline": C(0.705, 0.7, 0.002, 0.008)}, lower_is_better=False, min_effect=0.0,
                    objective="utility@20")
    assert keep == "recommended"  # min_effect 0: the interval only has to exclude 0
    keep, why = judge({"baseline": sure, "current": C(0.8, 0.79, -0.01, 0.03)}, lower_is_better=False,
                      min_effect=0.01, objective="utility@20")
    assert keep == "current" and "the current parameters stay" in why
    with pytest.raises(InputError):
        Promotion(min_effect=-1)
    with pytest.raises(InputError):
        Promotion(restarts=0)


def test_sentences_below_empty_and_tradeoffs():
    assert below_empty(C(-0.1, 0.0, -0.2, -0.05), "utility@20", False).startswith("**The baseline scores below")
    assert below_empty(C(0.1, 0.0, 0.05, 0.2), "utility@20", False) is None
    h = pd.DataFrame({"key": ["recall_at_20", "charged_at_20", "lost", "context_at_20"],
                      "recommended": [0.27, 0.5, 900.0, 10.0], "baseline": [0.33, 1.9, 400.0, 19.0]})
    text = " ".join(tradeoffs(h, 20))
    assert "recall@20 0.27 against 0.33" in text and "fewer charged ones (a charge of 0.5 per context" in text
    assert "900 archived" in text and "shrinks the context" in text
    same = h.assign(recommended=h["baseline"])
    assert tradeoffs(same, 20) == []


def test_a_sweep_scores_the_references_apart(junk_dir):
    res = sweep(junk_dir, {"threshold": [0.05, 0.98]}, compute=LOCAL)
    assert len(res.params) == 2 and set(res.references) == {EMPTY, KEEP_EVERYTHING}
    refs = res.reference_table.set_index("reference")
    assert refs.loc[EMPTY, "all.utility@20"] == 0 and refs.loc[EMPTY, "all.recall@20"] == 0
    assert np.isnan(refs.loc[EMPTY, "all.lost"])  # a context policy: no whole-memory metrics
    keep = sweep(junk_dir, [res.reference_params[KEEP_EVERYTHING]], compute=LOCAL, include_baseline=False)
    assert np.array_equal(keep.context["all"][0], res.references[KEEP_EVERYTHING]["all"])
    assert refs.loc[KEEP_EVERYTHING, "all.utility@20"] == keep.table.loc[0, "all.utility@20"]
    # threshold 0.98: nothing reaches the context, exactly the empty memory
    assert np.array_equal(res.context["all"][1], res.references[EMPTY]["all"])


def test_the_empty_memory_is_never_promoted_and_a_baseline_below_it_is_named(junk_dir, tmp_path):
    res = tune(junk_dir, out=tmp_path / "run", search=Search(space={"threshold": [0.98]}, method="grid"),
               objective=Objective(budgets=(20, 5)), holdout=Holdout(bootstrap=200), compute=LOCAL)
    for k, rec in res.recommendations.items():
        assert rec.params.archive_threshold == 0.98  # chosen: showing nothing beats the baseline here
        assert rec.versus_baseline.low > 0.01  # ... clearly
        assert rec.baseline_versus_empty is not None and rec.baseline_versus_empty.difference < 0
        assert not rec.promoted and rec.keep == "baseline", k
        assert "the empty memory" in rec.decision and "Rule:" in rec.decision
        assert rec.tradeoffs and "fewer needed facts" in rec.tradeoffs[0]
    report = (tmp_path / "run" / "report.md").read_text()
    assert "The baseline scores below the empty memory" in report and "keep-everything" in report
    assert "| the empty memory | 0 |" in report


def test_a_gain_without_effect_is_not_identified_kept_at_the_baseline_and_listed(junk_dir, tmp_path):
    from factmem.export import load_params_file
    from factmem.tuning.space import Range

    space = {"reinforce_gain": Range(0.05, 1.0), "threshold": Range(0.0, 0.3)}
    res = tune(junk_dir, out=tmp_path / "run", search=Search(space=space, n=1, startup=12, seed=3),
               objective=Objective(budgets=(20,)), holdout=Holdout(bootstrap=100), compute=LOCAL,
               promotion=Promotion(restarts=2))
    rec = res.primary
    ident = rec.identification
    assert ident is not None and ident.unidentified == ["reinforce_gain"]
    gain = ident.parameters[0]
    assert gain.effect == 0 and gain.support == "0 repeated mentions in the whole log"
    assert ident.parameters[1].effect >= 0.01  # the threshold matters here
    searched = res.sweep.params[rec.candidate]
    assert searched.reinforce_gain != 0.3 and rec.params.reinforce_gain == 0.3  # shipped: the baseline's
    assert rec.params.archive_threshold == searched.archive_threshold  # the identified value is kept
    # judged as shipped: every fold's row carries the baseline's gain too
    assert all(res.sweep.params[i].reinforce_gain == 0.3 for i in rec.fold_choices)
    assert bool(res.sweep.table.loc[rec.index, "probe"]) and not res.sweep.eligible()[rec.index]
    params, _ = load_params_file(tmp_path / "run" / "params.toml")
    assert params.reinforce_gain == 0.3
    report = (tmp_path / "run" / "report.md").read_text()
    assert "Not identified by this log" in report
    assert "`reinforce_gain`: no effect on this log — 0 repeated mentions" in report
    # restarts: two runs of the search, each decision printed
    assert [r.seed for r in rec.restarts] == [3, 4] and rec.restarts[1].candidates < rec.restarts[0].candidates
    assert report.count("| 3 | ") == 1 and report.count("| 4 | ") == 1


def _next_session_log(folder, *, people: int = 12, sessions: int = 8):
    """Each person, every ten days: one new explicit fact, needed at the next session start only
    (relevant for 12 days). With the archive threshold at 0.3, a fact survives the ten days when
    c0 · exp(−10 λ) ≥ 0.3: the seed's explicit numbers (c0 0.4, λ 0.05) lose it, a high c0 *or* no
    decay keeps it — neither matters alone at the other's searched value, both do together."""
    msgs, events, truth = [], [], []
    for p in range(people):
        who = f"person{p:02d}"
        for s in range(sessions):
            ts = T0 + s * 10 * DAY + p * 60
            sid, mid = f"s{p:02d}_{s:02d}", f"m{p:02d}_{s:02d}"
            msgs.append((sid, mid, ts, who, "..."))
            events.append((ts, who, f"fact{s}", "yes", "explicit", sid, mid, ""))
            truth.append((who, f"fact{s}", "yes", "explicit", ts, None, ts + 12 * DAY, None))
    return _save_log(folder, "next", msgs, events, truth, end=T0 + sessions * 10 * DAY)


def test_parameters_without_effect_alone_but_needed_together_are_kept_jointly(tmp_path):
    folder = _next_session_log(tmp_path / "log")
    base = MemoryParams(archive_threshold=0.3, retrieval_threshold=0.3)
    space = {"initial_confidence.explicit": [0.9], "decay_rate.explicit": [0.0]}
    res = tune(folder, out=tmp_path / "run", search=Search(space=space, method="grid"), base=base,
               objective=Objective(budgets=(20,), costs={"expired": 0.0}), holdout=Holdout(bootstrap=100),
               compute=LOCAL)
    rec = res.primary
    ident = rec.identification
    assert ident is not None
    # alone, neither moves the objective (the other keeps every fact above the threshold) ...
    assert [p.effect for p in ident.parameters] == [0.0, 0.0] and not any(p.identified for p in ident.parameters)
    # ... but resetting both loses every fact: the first in order (a tie in effect) is given back
    assert ident.kept_jointly == ["initial_confidence.explicit"] and ident.unidentified == ["decay_rate.explicit"]
    assert rec.params.initial_confidence["explicit"] == 0.9 and rec.params.decay_rate["explicit"] == 0.05
    values = res.sweep.objective_values("all", 20)
    assert values[rec.index] == pytest.approx(values[rec.candidate])  # shipped: as good as the best
    assert all(res.sweep.params[i].initial_confidence["explicit"] == 0.9 and
               res.sweep.params[i].decay_rate["explicit"] == 0.05 for i in rec.fold_choices)  # judged as shipped
    assert rec.versus_baseline.low > 0.5  # the seed's numbers lose every fact ...
    assert not rec.promoted and "keep-everything" in rec.decision  # ... keeping everything loses none either
    report = (tmp_path / "run" / "report.md").read_text()
    assert "**Kept jointly**" in report and "0.9 (kept jointly)" in report
    assert "`decay_rate.explicit`: no effect on this log" in report


def test_shipped_files_carry_the_judged_comparison(tmp_path):
    import math

    from factmem.export import load_params_file, write_params_file
    from factmem.export.diff import diff_metrics, render_diff
    from factmem.export.rust import render_rust

    judged = {"keep": "recommended", "promoted": "yes", "against": "baseline", "objective": "utility@20",
              "budget": 20.0, "recommended": 0.82, "baseline": 0.77, "difference": 0.05, "low": 0.04, "high": 0.06,
              "people": 40.0, "points": 9703.0, "holdout": "3-fold over people", "costs": "stale=1, false=1",
              "min_effect": 0.01, "empty_difference": 0.82, "keep_everything_difference": math.nan}
    prov = {"run_id": "r", "dataset_sha256": "a" * 64, "metrics": {"utility_at_20": 0.82},
            "baseline_metrics": {"utility_at_20": 0.77}, "judgement": judged}
    for name in ("p.toml", "p.json"):
        path = write_params_file(tmp_path / name, MemoryParams(), prov, stamp=False)
        _, back = load_params_file(path)
        assert back["judgement"]["difference"] == 0.05 and back["judgement"]["keep"] == "recommended"
        assert math.isnan(back["judgement"]["keep_everything_difference"])
    rust = render_rust(tmp_path / "p.toml")
    assert "judged against (baseline)" in rust and "seed defaults" not in rust and "/// - difference: 0.05" in rust
    m = diff_metrics(tmp_path / "p.toml", tmp_path / "p.json")
    assert m.loc["utility_at_20", "b_baseline"] == 0.77 and "b_defaults" not in m.columns
    text = render_diff(tmp_path / "p.toml", tmp_path / "p.json")
    assert "B judged: recommended kept (promoted); held-out utility@20 0.82 against 0.77" in text
    assert "[+0.04, +0.06]" in text and "40 people" in text and "costs stale=1, false=1" in text

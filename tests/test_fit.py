"""factmem.fitting.fit: closed forms on hand-built data, likelihoods on synthetic data, coverage and the
log-only model against truth on generated logs, the output folder, and bad input."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from factmem.core.params import MemoryParams
from factmem.data.generate import generate
from factmem.data.logs import make_dataset
from factmem.data.presets import preset
from factmem.data.scenario import Scenario
from factmem.errors import InputError
from factmem.export import load_params_file
from factmem.fitting.fit import ESTIMATE_COLUMNS, LOG_PARAM_KINDS, PREDICATE_RATE_COLUMNS, fit
from factmem.fitting.models import (
    SpellData,
    bin_ages,
    bootstrap_weights,
    exponential_rate,
    fit_seed_model,
    fit_two_state,
    kaplan_meier,
    p_true_silent,
    percentile_interval,
    poisson_rate_interval,
    two_state_nll,
)
from factmem.fitting.populations import TruthLookup, lifetimes, silent_spells
from factmem.fitting.report import OUTPUT_FILES

DAY = 86400
START = 1704067200


# -- closed forms ----------------------------------------------------------------------------------


def test_censored_exponential_mle_and_exact_interval_golden():
    # four lifetimes observed 10, 20, 30 and 40 days; the second censored: 3 changes in 100 days
    est = exponential_rate(np.array([1, 0, 1, 1]), np.array([10.0, 20.0, 30.0, 40.0]))
    assert est.rate == pytest.approx(0.03)
    assert (est.events, est.exposure) == (3, 100.0)
    # Garwood: 3 events -> [0.6187, 8.7673] events per exposure (the textbook table)
    assert est.low == pytest.approx(0.61867 / 100, rel=1e-4)
    assert est.high == pytest.approx(8.76727 / 100, rel=1e-4)
    # no event: the lower bound is 0 and the upper one −ln(0.025) / exposure
    low, high = poisson_rate_interval(0, 50.0)
    assert low == 0.0 and high == pytest.approx(-math.log(0.025) / 50.0)
    with pytest.raises(ValueError, match="exposure"):
        poisson_rate_interval(1, 0.0)


def test_lifetimes_truncate_at_the_start_and_censor_at_the_end():
    end = START + 100 * DAY
    truth = pd.DataFrame({
        "subject": ["a", "a", "a", "b", "b", "c"],
        "predicate": ["city", "city", "city", "trip", "city", "city"],
        "object": ["x", "y", "z", "t", "u", "w"],
        "kind": ["explicit", "explicit", "explicit", "episodic", "explicit", "explicit"],
        # x: true before the log, changes on day 10; y: days 10-60; z: day 60 to beyond the end;
        # t: an episode relevant 4 days; u: a misstatement (noise) left out; w: ended before the log
        "valid_from": [START - 30 * DAY, START + 10 * DAY, START + 60 * DAY, START + 5 * DAY, START + 7 * DAY,
                       START - 50 * DAY],
        "valid_to": pd.array([START + 10 * DAY, START + 60 * DAY, None, None, START + 7 * DAY, START - DAY],
                             dtype="Int64"),
        "relevant_until": pd.array([None, None, None, START + 9 * DAY, None, None], dtype="Int64"),
        "noise": [None, None, None, None, "misstatement", None],
    })
    rows = lifetimes(truth, START, end).frame
    assert len(rows) == 4  # the misstatement and the value that ended before the log are left out
    x = rows.iloc[0]
    assert (x["entry"], x["exit"], x["event"], x["exposure"]) == (30.0, 40.0, True, 10.0)
    z = rows[rows["exposure"] == 40.0].iloc[0]
    assert not z["event"] and z["entry"] == 0.0
    trip = rows[rows["episodic"]].iloc[0]
    assert (trip["exit"], trip["event"]) == (4.0, True)
    lasting = rows[~rows["episodic"]]
    est = exponential_rate(lasting["event"].to_numpy(), lasting["exposure"].to_numpy())
    assert est.rate == pytest.approx(2 / 100)  # changes on days 10 and 60 over 10 + 50 + 40 days


def test_kaplan_meier_with_delayed_entry_golden():
    # durations: (entry, exit, event): two enter at 0, one enters late at 2 (left-truncated)
    times, surv, at_risk = kaplan_meier(np.array([0.0, 0.0, 2.0]), np.array([1.0, 4.0, 3.0]),
                                        np.array([True, False, True]))
    assert list(times) == [1.0, 3.0]
    assert list(at_risk) == [2, 2]  # at 3: the censored one (to 4) and the late one (entered at 2)
    assert surv == pytest.approx([0.5, 0.25])


def test_truth_lookup_handles_overlaps_and_noise():
    truth = pd.DataFrame({
        "valid_from": [0, 5, 20, 30], "valid_to": pd.array([10, 8, None, 31], dtype="Int64"),
        "relevant_until": pd.array([None, None, 25, None], dtype="Int64"), "noise": [None, None, None, "misstatement"],
    })
    lookup = TruthLookup(truth, np.array([1, 1, 1, 2]))
    got = lookup(np.array([1, 1, 1, 1, 1, 2, 3]), np.array([9, 10, 19, 24, 25, 30, 0]))
    assert list(got) == [True, False, False, True, False, False, False]


# -- the seed model --------------------------------------------------------------------------------


@pytest.mark.parametrize("c0,lam", [(0.9, 0.02), (0.6, 0.2), (0.99, 0.005)])
def test_seed_model_mle_recovers_a_known_lambda(c0, lam):
    rng = np.random.default_rng(11)
    n = 40_000
    age = rng.uniform(0.0, 3.0 / lam, size=n)
    y = (rng.random(n) < c0 * np.exp(-lam * age)).astype(float)
    subject = rng.integers(0, 60, size=n)
    bins = bin_ages(subject, age, y, n_subjects=60)
    got_c0, got_lam = fit_seed_model(bins, cap=0.99)[0]
    assert got_lam == pytest.approx(lam, rel=0.05)
    assert got_c0 == pytest.approx(c0, abs=0.02)
    boot = fit_seed_model(bins, cap=0.99, subject_weights=bootstrap_weights(60, 60, np.random.default_rng(0)),
                          start=(got_c0, got_lam))
    low, high = percentile_interval(boot[:, 1])
    assert low <= lam <= high


def test_seed_model_lambda_at_a_fixed_initial_confidence():
    """The profile λ with c0 held: the true λ at the true c0, a smaller λ at a lower c0 (the curve must
    fall less to meet the data), equal to a one-dimensional optimiser on the raw likelihood."""
    from scipy.optimize import minimize_scalar

    rng = np.random.default_rng(4)
    n = 30_000
    age = rng.uniform(0.0, 60.0, size=n)
    y = (rng.random(n) < 0.8 * np.exp(-0.05 * age)).astype(float)
    bins = bin_ages(rng.integers(0, 40, size=n), age, y, n_subjects=40)
    c0, lam = fit_seed_model(bins, fixed_c0=0.8)[0]
    assert c0 == 0.8 and lam == pytest.approx(0.05, rel=0.03)
    low_c0 = fit_seed_model(bins, fixed_c0=0.5)[0][1]
    nll = lambda rate: -float(np.sum(y * np.log(0.5 * np.exp(-rate * age)) + (1 - y) * np.log(1 - 0.5 * np.exp(-rate * age))))
    assert low_c0 == pytest.approx(minimize_scalar(nll, bounds=(0.0, 1.0), method="bounded").x, rel=2e-3)
    assert low_c0 < lam
    boot = fit_seed_model(bins, fixed_c0=0.8, subject_weights=bootstrap_weights(40, 40, np.random.default_rng(1)),
                          start=(0.8, lam))
    assert (boot[:, 0] == 0.8).all() and percentile_interval(boot[:, 1])[0] <= 0.05 <= percentile_interval(boot[:, 1])[1]
    with pytest.raises(ValueError, match="fixed_c0"):
        fit_seed_model(bins, fixed_c0=1.0)


def test_seed_model_edge_cases():
    age = np.linspace(0, 100, 500)
    always = bin_ages(np.zeros(500, int), age, np.ones(500))
    c0, lam = fit_seed_model(always, cap=0.99)[0]
    assert c0 == pytest.approx(0.99) and lam == pytest.approx(0.0, abs=1e-8)
    never = bin_ages(np.zeros(500, int), age, np.zeros(500))
    assert np.isnan(fit_seed_model(never)[0]).all()  # λ is not identified
    with pytest.raises(ValueError, match="outcomes"):
        bin_ages(np.zeros(2, int), np.ones(2), np.array([0.0, 2.0]))


# -- the two-state model ---------------------------------------------------------------------------


def _simulate_spells(rng, n, q, h, u, sessions_per_day, multi=False, max_sessions=220):
    """Silent spells drawn from the two-state model itself (Poisson sessions; changes at rate h; a
    share u unannounced, superseded later at rate h·(1 − u); censoring uniform on 10..200 days)."""
    times = np.cumsum(rng.exponential(1 / sessions_per_day, size=(n, max_sessions)), axis=1)
    censor = rng.uniform(10.0, 200.0, size=n)
    assert (times[:, -1] > censor).all()
    change = rng.exponential(1 / h, size=n)
    said = (rng.random((n, max_sessions)) < q) & (times < change[:, None]) & (times <= censor[:, None])
    has = said.any(axis=1)
    first = np.where(has, said.argmax(axis=1), 0)
    t_mention = np.where(has, times[np.arange(n), first], np.inf)
    b = h * (1 - u)
    if multi:
        t_sup = np.full(n, np.inf)
    else:
        silent_change = rng.random(n) < u
        t_sup = np.where(silent_change, change + rng.exponential(1 / b, size=n) if b > 0 else np.inf, change)
    end = np.minimum(np.minimum(t_mention, t_sup), censor)
    outcome = np.where(end == t_mention, 0, np.where(end == t_sup, 1, 2))
    silent = np.where(outcome == 0, first, (times < end[:, None]).sum(axis=1))
    return rng.integers(0, 50, size=n), end, silent.astype(float), outcome, np.full(n, multi)


@pytest.mark.parametrize("q,h,u", [(0.1, 0.01, 0.3), (0.05, 0.005, 0.6), (0.2, 0.03, 0.1)])
def test_two_state_fit_recovers_simulated_parameters(q, h, u):
    data = SpellData.build(*_simulate_spells(np.random.default_rng(7), 20_000, q, h, u, 0.5))
    got = fit_two_state(data)[0]
    assert got.q == pytest.approx(q, rel=0.04)
    assert got.h == pytest.approx(h, rel=0.06)
    assert got.u == pytest.approx(u, abs=0.04)
    boot = fit_two_state(data, subject_weights=bootstrap_weights(50, 40, np.random.default_rng(1)), start=got)
    for name, true in (("q", q), ("h", h), ("u", u)):
        low, high = percentile_interval(np.array([getattr(b, name) for b in boot]))
        assert low <= true <= high, name


def test_two_state_multi_valued_has_no_share_and_gradient_is_exact():
    data = SpellData.build(*_simulate_spells(np.random.default_rng(3), 8000, 0.1, 0.01, 1.0, 0.5, multi=True))
    got = fit_two_state(data)[0]
    assert np.isnan(got.u) and got.h == pytest.approx(0.01, rel=0.1)
    single = SpellData.build(*_simulate_spells(np.random.default_rng(4), 3000, 0.1, 0.01, 0.3, 0.5))
    theta = np.array([-2.0, -4.5, -0.5])
    _, grad = two_state_nll(theta, single)
    step = 1e-6
    numeric = [(two_state_nll(theta + step * e, single)[0] - two_state_nll(theta - step * e, single)[0]) / (2 * step)
               for e in np.eye(3)]
    assert grad == pytest.approx(numeric, rel=1e-5)
    # a fact silent for 0 days is true; the longer the silence, the less likely
    p = p_true_silent(np.array([0.0, 10.0, 100.0]), np.array([0.0, 5.0, 50.0]), got)
    assert p[0] == 1.0 and p[0] >= p[1] >= p[2]


# -- on generated logs -------------------------------------------------------------------------------


def _scenario(name: str, *, archetypes: bool = True, **changes) -> Scenario:
    d = preset(name).to_dict()
    d.pop("end")  # derived from start + days
    if not archetypes:
        d["archetypes"] = {}
    d.update(changes)
    return Scenario.from_dict(d)


def test_change_rate_interval_covers_the_true_rate():
    """Without archetypes, each value of a lasting predicate ends at the next event of a Poisson
    process of rate 1/lifetime_days (a slot's changes are a Poisson count placed uniformly on the
    log), so inside the log the hazard of a held value is exactly 1/lifetime_days; back-dated first
    values enter observation at the log's start. Pooled over 6 seeds."""
    scenario = _scenario("small", archetypes=False)
    true = {p.name: 1.0 / p.lifetime_days for p in scenario.predicates if p.lasting and math.isfinite(p.lifetime_days)}
    covered = []
    for seed in range(6):
        result = fit(generate(scenario, seed=seed), source="truth", bootstrap=0)
        e = result.estimates
        rates = e[(e["quantity"] == "change_rate") & (e["scope"] == "predicate") & (e["n"] >= 50)]
        rates = rates[rates["name"].isin(list(true))]
        covered += [row.low <= true[row.name] <= row.high for row in rates.itertuples()]
    assert len(covered) >= 60
    assert np.mean(covered) >= 0.90, f"coverage {np.mean(covered):.3f} over {len(covered)} intervals"


@pytest.mark.slow
def test_log_only_model_matches_empirical_silence_curve():
    """P(true | silent d days) of the two-state model (log alone) within 0.05 of the empirical curve
    (truth) at 7, 30 and 90 days for the lasting kinds, on logs large enough for the empirical curve
    to be precise (160 personas, ≥ 400 spells silent 90 days per kind). Episodic: the model is not
    identified (one-off chatter, recurring episodes), so without truth those kinds keep the base."""
    for seed in (0, 1):
        result = fit(generate(preset("small").replace(personas=160), seed=seed), bootstrap=0)
        e = result.estimates
        for kind in ("explicit", "user_preference"):
            for d in (7, 30, 90):
                pick = e[(e["scope"] == "kind") & (e["name"] == kind) & (e["quantity"] == f"p_true_silent_{d}d")]
                model = pick.loc[pick["source"] == "log", "estimate"].item()
                empirical = pick.loc[pick["source"] == "truth", "estimate"].item()
                assert abs(model - empirical) <= 0.05, (seed, kind, d, model, empirical)
                assert pick["n"].min() >= 400
    assert "episodic" not in LOG_PARAM_KINDS


@pytest.fixture(scope="module")
def medium():
    ds = generate(_scenario("small", days=150), seed=3)
    return ds, fit(ds, bootstrap=20, seed=5)


def test_result_table_params_and_fallbacks(medium):
    _, result = medium
    e = result.estimates
    assert tuple(e.columns) == ESTIMATE_COLUMNS
    assert set(e["scope"]) == {"kind", "predicate"} and set(e["source"]) == {"truth", "log"}
    assert e[["estimate", "n"]].notna().all().all() and (e["n"] >= result.settings["min_observations"]).all()
    finite = e[np.isfinite(e["low"])]
    assert ((finite["low"] <= finite["estimate"] + 1e-12) & (finite["estimate"] <= finite["high"] + 1e-12)).mean() > 0.97
    assert not e.duplicated(["scope", "name", "quantity", "source"]).any()
    for kind in ("explicit", "user_preference", "episodic"):
        assert result.params.decay_rate[kind] == result.value("seed_lambda", kind, source="truth")
        assert result.params.initial_confidence[kind] == result.value("initial_confidence", kind, source="truth")
        assert 0 < result.params.initial_confidence[kind] <= result.params.confidence_cap
    assert result.params.decay_rate.derived == MemoryParams().decay_rate.derived  # no derived fact: the seed's
    assert ((result.fallbacks["name"] == "derived") & (result.fallbacks["quantity"] == "seed_lambda")).any()
    # a predicate without enough lifetimes takes its kind's change rate
    fb = result.fallbacks[(result.fallbacks["scope"] == "predicate") & (result.fallbacks["quantity"] == "change_rate")]
    assert len(fb)
    values = result.predicate_values("change_rate", source="truth")
    for name in fb["name"]:
        kind = result.predicate_kinds[name]
        assert values[name] == result.value("change_rate", kind, source="truth")
    # per-predicate seed λ stay in the table for later use
    assert (e[(e["scope"] == "predicate") & (e["quantity"] == "seed_lambda")]["n"] >= 50).all()
    assert len(e[(e["scope"] == "predicate") & (e["quantity"] == "seed_lambda")]) >= 10


def test_per_predicate_rates_follow_the_stated_rule(medium):
    """decay_rate_by_predicate holds exactly the predicates whose λ at their kind's c0 has a 95%
    interval excluding their kind's rate; fast changers decay faster than their kind, never-changing
    ones slower."""
    _, result = medium
    table, e = result.predicate_rates, result.estimates
    assert tuple(table.columns) == PREDICATE_RATE_COLUMNS
    assert set(table["predicate"]) == set(result.predicate_kinds)
    for _, row in table.iterrows():  # one row per predicate
        informative = (row["kind"] in ("explicit", "user_preference", "episodic") and np.isfinite(row["low"])
                       and not row["low"] <= row["kind_rate"] <= row["high"])
        assert row["exported"] == informative, row.to_dict()
        assert row["kind_rate"] == result.params.decay_rate[row["kind"]]
        if np.isfinite(row["estimate"]):
            assert row["estimate"] == result.value("seed_lambda_kind_c0", row["predicate"], source="truth")
            assert row["n"] >= result.settings["min_observations"]
    own = table[table["exported"]]
    assert result.params.decay_rate_by_predicate == dict(zip(own["predicate"], own["estimate"]))
    assert 3 <= len(own) < len(table)  # some predicates differ from their kind, not all
    rates = result.params.decay_rate_by_predicate
    assert rates["works_on"] > 2 * result.params.decay_rate.explicit  # changes every ~90 days
    never = [p for p in ("born_in", "speaks", "drives") if p in rates]
    assert never and all(rates[p] < result.params.decay_rate.explicit / 2 for p in never)
    # a candidate's c0 is its kind's, so the memory's model for it is exactly the one fitted
    assert "seed_lambda_kind_c0" in set(e["quantity"]) and (e.loc[e["quantity"] == "seed_lambda_kind_c0", "scope"]
                                                           == "predicate").all()


def test_fitted_per_predicate_rates_drive_both_engines(medium):
    """The fitted params.toml runs: the store replay and the kernel agree with per-predicate rates."""
    from factmem.evaluation.simulate import Schedule, kernel_beliefs, prepare, simulate

    ds, result = medium
    params = result.params.replace(multi_valued_predicates=ds.multi_valued_predicates)
    prepared = prepare(ds)
    run = simulate(prepared, params, Schedule())
    kernel = kernel_beliefs(prepared, [params], Schedule().consolidations(prepared.start, prepared.end))[0]
    cols = ["triple", "kind", "start", "end", "reason", "confidence", "rate"]
    canon = lambda b: b[cols].sort_values(["triple", "start", "end"], kind="stable").reset_index(drop=True)
    pd.testing.assert_frame_equal(canon(run.beliefs), canon(kernel), check_exact=True)
    facts = run.store.facts(at=0)
    works_on = facts[facts["predicate"] == "works_on"]
    assert len(works_on) and (works_on["decay_rate"] == params.decay_rate_by_predicate["works_on"]).all()
    run.store.close()


def test_fit_is_deterministic_and_writes_its_folder(medium, tmp_path):
    ds, result = medium
    again = fit(ds, bootstrap=20, seed=5)
    pd.testing.assert_frame_equal(result.estimates, again.estimates)
    a = result.write(tmp_path / "a", created_at="2026-01-01T00:00:00Z")
    b = again.write(tmp_path / "b", created_at="2026-01-01T00:00:00Z", figures=False)
    for name in OUTPUT_FILES:
        assert (a / name).is_file(), name
        if not name.endswith(".png"):
            assert (a / name).read_bytes() == (b / name).read_bytes(), name
        else:
            assert not (b / name).exists()
    params, provenance = load_params_file(a / "params.toml")
    assert params == result.params
    assert provenance["dataset_sha256"] == ds.sha256
    table = pd.read_csv(a / "estimates.csv")
    assert tuple(table.columns) == ESTIMATE_COLUMNS and len(table) == len(result.estimates)
    report = (a / "report.md").read_text()
    for needle in ("Fallback rule", "P(true | held and silent", "two-state", "Populations and rules", "95%"):
        assert needle in report


def test_log_only_fit_without_truth(medium):
    ds, _ = medium
    no_truth = make_dataset(ds.messages, ds.events, ds.truth.iloc[:0], ds.generalizations, ds.scenario)
    result = fit(no_truth, bootstrap=0)
    assert result.params.decay_rate_by_predicate == {}  # no intervals: no per-predicate rate
    assert (result.predicate_rates["reason"].str.contains("bootstrap = 0") | ~result.predicate_rates["kind"]
            .isin(LOG_PARAM_KINDS)).all()
    assert result.sources == ("log",)
    assert set(result.estimates["source"]) == {"log"}
    for kind in LOG_PARAM_KINDS:
        assert result.params.decay_rate[kind] == result.value("seed_lambda", kind, source="log")
    assert result.params.decay_rate.episodic == MemoryParams().decay_rate.episodic
    assert result.params.initial_confidence.episodic == MemoryParams().initial_confidence.episodic
    assert result.silent_curves["empirical"].isna().all() and result.silent_curves["model"].notna().any()
    with pytest.raises(InputError, match="source='truth' needs ground truth"):
        fit(no_truth, source="truth")


def test_spells_treat_a_slip_in_one_session_as_no_change():
    events = pd.DataFrame({
        "ts": [START + DAY, START + 5 * DAY, START + 5 * DAY + 60, START + 9 * DAY, START + 20 * DAY],
        "subject": ["ada"] * 5, "predicate": ["lives_in"] * 5,
        "object": ["paris", "rome", "paris", "paris", "oslo"], "kind": ["explicit"] * 5,
        "session_id": ["s1", "s2", "s2", "s3", "s4"], "message_id": ["m1", "m2", "m3", "m4", "m5"], "note": [None] * 5,
    })
    messages = events[["session_id", "message_id", "ts"]].assign(speaker="ada", text="...")
    ds = make_dataset(messages, events, pd.DataFrame(), pd.DataFrame(columns=["gen_id", "subject", "predicate", "object",
                                                                              "note", "support_predicate",
                                                                              "support_object"]),
                      {"start": START, "end": START + 30 * DAY})
    sp = silent_spells(ds, frozenset()).frame
    # "rome" was taken back in session s2; oslo, said in ada's last message, has no silent spell: ada is
    # not observed after it (the log's end, ten days later, is not ada's)
    assert list(sp["object"]) == ["paris", "paris", "paris"]
    assert list(sp["outcome"]) == [0, 0, 1]  # re-mention, re-mention, superseded by oslo
    assert list(sp["silent"]) == [0, 0, 0]


# -- censoring at each subject's last message -------------------------------------------------------


def _two_people(last_day_of_bo: int) -> object:
    """ada talks on days 1..40 and keeps paris; bo says oslo on day 1 and London on day 3, then talks
    until ``last_day_of_bo``; the log runs 100 days; truth: both values open-ended."""
    days = [1, 10, 20, 30, 40]
    bo_days = [1, 3, *range(4, last_day_of_bo + 1, 3)]
    events = pd.DataFrame({
        "ts": [START + d * DAY for d in days] + [START + d * DAY + 7 for d in bo_days],
        "subject": ["ada"] * len(days) + ["bo"] * len(bo_days),
        "predicate": ["lives_in"] * (len(days) + len(bo_days)),
        "object": ["paris"] * len(days) + ["oslo"] + ["london"] * (len(bo_days) - 1), "kind": "explicit",
        "session_id": [f"a{i}" for i in range(len(days))] + [f"b{i}" for i in range(len(bo_days))],
        "message_id": [f"ma{i}" for i in range(len(days))] + [f"mb{i}" for i in range(len(bo_days))], "note": None,
    })
    messages = events[["session_id", "message_id", "ts"]].assign(speaker=events["subject"], text="...")
    truth = pd.DataFrame({"subject": ["ada", "bo", "bo"], "predicate": ["lives_in"] * 3,
                          "object": ["paris", "oslo", "london"], "kind": "explicit",
                          "valid_from": [START, START, START + 3 * DAY],
                          "valid_to": pd.array([None, START + 3 * DAY, None], dtype="Int64"),
                          "relevant_until": pd.array([None] * 3, dtype="Int64"), "noise": None})
    gens = pd.DataFrame(columns=["gen_id", "subject", "predicate", "object", "note", "support_predicate",
                                 "support_object"])
    return make_dataset(messages, events, truth, gens, {"start": START, "end": START + 100 * DAY})


def test_a_subject_who_stops_talking_contributes_no_exposure_after_the_last_message():
    from factmem.fitting.populations import observed_spans

    ds = _two_people(last_day_of_bo=13)
    spans = observed_spans(ds)
    assert list(spans.subjects) == ["ada", "bo"] and list(spans.days) == pytest.approx([39.0, 12.0])
    life = lifetimes(ds.truth, ds.start, ds.end, spans).frame.set_index("object")
    # paris is observed from ada's first to her last message (39 days), not to the log's end (99 more);
    # london from its start to bo's last message
    assert life.loc["paris", "exposure"] == pytest.approx(39.0) and not life.loc["paris", "event"]
    assert life.loc["london", "exposure"] == pytest.approx(10.0 + 7 / DAY)
    assert life.loc["oslo", "event"]  # ended inside bo's span
    sp = silent_spells(ds, frozenset()).frame
    # every spell stops at the subject's last message at the latest; the last mentions start none
    last = {"ada": START + 40 * DAY, "bo": START + 13 * DAY + 7}
    assert (sp["stop"] <= sp["subject"].map(last)).all()
    assert not (sp["start"] == sp["subject"].map(last)).any()
    # talking longer adds exposure only for the person who talks longer
    longer = lifetimes(ds.truth, ds.start, ds.end, observed_spans(_two_people(last_day_of_bo=70))).frame
    assert longer.set_index("object").loc["paris", "exposure"] == pytest.approx(39.0)
    # one message: no exposure at all
    one = _two_people(last_day_of_bo=3)
    first_of_bo = one.events[one.events["subject"] == "bo"].iloc[:1]
    one = make_dataset(one.messages[one.messages["message_id"].isin(first_of_bo["message_id"])], first_of_bo,
                       one.truth, one.generalizations, one.scenario)
    assert observed_spans(one).days.tolist() == [0.0]
    assert len(lifetimes(one.truth, one.start, one.end, observed_spans(one)).frame) == 0
    assert len(silent_spells(one, frozenset()).frame) == 0


def _shift_subjects(ds, offsets: dict[str, int]):
    """The dataset with each subject's messages, mentions and truth moved by its own offset (seconds)."""
    ev, msg, truth = ds.events.copy(), ds.messages.copy(), ds.truth.copy()
    ev["ts"] = ev["ts"] + ev["subject"].map(offsets).to_numpy(np.int64)
    speaker_shift = msg["speaker"].map(offsets).fillna(0).astype(np.int64)
    owner = ev.drop_duplicates("message_id").set_index("message_id")["subject"].map(offsets)
    msg["ts"] = msg["ts"] + msg["message_id"].map(owner).fillna(speaker_shift).astype(np.int64).to_numpy()
    shift = truth["subject"].map(offsets).to_numpy(np.int64)
    for col in ("valid_from", "valid_to", "relevant_until"):
        truth[col] = truth[col] + (shift if col == "valid_from" else pd.array(shift, dtype="Int64"))
    scenario = dict(ds.scenario)
    times = np.concatenate([ev["ts"].to_numpy(), msg["ts"].to_numpy()])
    scenario["start"], scenario["end"] = int(min(times.min(), ds.start)), int(max(times.max(), ds.end)) + 400 * DAY
    return make_dataset(msg, ev, truth, ds.generalizations, scenario)


def test_every_fit_estimate_is_unchanged_when_each_subject_is_shifted_in_time():
    ds = generate(_scenario("small", days=120, personas=12), seed=4)
    subjects = sorted(ds.events["subject"].unique())
    rng = np.random.default_rng(0)
    # different offsets, not whole days (checkpoints run on each subject's own clock), up to a year later
    offsets = {s: int(rng.integers(0, 365 * DAY)) for s in subjects}
    shifted = _shift_subjects(ds, offsets)
    assert shifted.end - shifted.start > ds.end - ds.start + 300 * DAY  # the log's end moved far away
    kwargs = {"bootstrap": 8, "seed": 1, "min_observations": 20}
    a, b = fit(ds, **kwargs), fit(shifted, **kwargs)
    key = ["scope", "name", "quantity", "source"]
    ea, eb = a.estimates.set_index(key).sort_index(), b.estimates.set_index(key).sort_index()
    assert list(ea.index) == list(eb.index) and len(ea) > 50
    assert set(ea.index.get_level_values("quantity")) >= {"change_rate", "seed_lambda", "initial_confidence",
                                                          "remention_probability", "p_true_silent_7d"}
    for col in ("estimate", "low", "high"):
        np.testing.assert_allclose(eb[col].to_numpy(), ea[col].to_numpy(), rtol=1e-7, atol=1e-12, equal_nan=True,
                                   err_msg=col)
    assert (eb["n"] == ea["n"]).all()
    for field_name in ("decay_rate", "initial_confidence"):
        assert getattr(a.params, field_name).to_dict() == pytest.approx(getattr(b.params, field_name).to_dict())


# -- bad input ---------------------------------------------------------------------------------------


def test_bad_input_is_refused(medium, tmp_path):
    ds, _ = medium
    with pytest.raises(InputError, match="no such dataset folder"):
        fit(tmp_path / "missing")
    empty = make_dataset(ds.messages.iloc[:0], ds.events.iloc[:0], ds.truth.iloc[:0], ds.generalizations.iloc[:0],
                         ds.scenario)
    with pytest.raises(InputError, match="no fact mentions"):
        fit(empty)
    with pytest.raises(InputError, match="too few observations"):
        fit(ds, min_observations=10**9, bootstrap=0)
    for kwargs, match in (({"source": "oracle"}, "source"), ({"bootstrap": -1}, "bootstrap"),
                          ({"silent_days": [0]}, "silent_days"), ({"min_observations": 0}, "min_observations"),
                          ({"checkpoint_hours": 0}, "checkpoint_hours")):
        with pytest.raises(InputError, match=match):
            fit(ds, **kwargs)



# -- the command ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def medium_dir(medium, tmp_path_factory):
    from factmem.data.generate import write

    ds, _ = medium
    return write(ds, tmp_path_factory.mktemp("medium") / "ds")


def test_fit_command_writes_the_folder_and_prints_a_summary(medium, medium_dir, tmp_path, capsys):
    from factmem.cli.main import main

    out = tmp_path / "fit"
    assert main(["fit", "--log", str(medium_dir), "--out", str(out), "--bootstrap", "20", "--seed", "5",
                 "--created-at", "2026-01-01T00:00:00Z", "--no-figures"]) == 0
    printed = capsys.readouterr().out
    assert "explicit" in printed and "fit (truth)" in printed and "works_on" in printed
    assert "predicates get their own decay rate" in printed
    params, provenance = load_params_file(out / "params.toml")
    _, result = medium
    assert params == result.params and params.decay_rate_by_predicate == result.params.decay_rate_by_predicate
    assert "decay_rate_by_predicate" in provenance["notes"]
    # the same bytes as the library writes (report.md names the dataset's folder, the library's is in memory)
    lib = result.write(tmp_path / "lib", created_at="2026-01-01T00:00:00Z", figures=False)
    for name in ("estimates.csv", "predicate_rates.csv", "fallbacks.csv", "params.toml"):
        assert (out / name).read_bytes() == (lib / name).read_bytes(), name
    assert "Per-predicate decay rates" in (out / "report.md").read_text()


@pytest.mark.parametrize("extra, message", [
    (["--min-observations", "1000000000"], "too few observations"),
    (["--min-observations", "0"], "min_observations = 0 is invalid"),
    (["--bootstrap", "-1"], "bootstrap = -1 is invalid"),
    (["--base", "nope.toml"], "no such params file"),
])
def test_fit_command_bad_input_exits_2_with_one_line(medium_dir, tmp_path, capsys, extra, message):
    from factmem.cli.main import main

    out = tmp_path / "fit"
    assert main(["fit", "--log", str(medium_dir), "--out", str(out), "--bootstrap", "0", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and err.startswith("factmem fit: error:")
    assert not out.exists()


def test_fit_command_refuses_missing_folders_and_truth_without_truth(medium, tmp_path, capsys):
    from factmem.cli.main import main
    from factmem.data.generate import write

    assert main(["fit", "--log", str(tmp_path / "missing"), "--out", str(tmp_path / "o")]) == 2
    assert "no such dataset folder" in capsys.readouterr().err
    ds, _ = medium
    no_truth = write(make_dataset(ds.messages, ds.events, ds.truth.iloc[:0], ds.generalizations, ds.scenario),
                     tmp_path / "no_truth")
    assert main(["fit", "--log", str(no_truth), "--out", str(tmp_path / "o"), "--source", "truth"]) == 2
    assert "source='truth' needs ground truth" in capsys.readouterr().err
    (tmp_path / "file").write_text("x")
    assert main(["fit", "--log", str(no_truth), "--out", str(tmp_path / "file")]) == 2
    assert "is not a folder" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


# -- identification ---------------------------------------------------------------------------------


def test_bounds_and_underflow_are_not_identified_and_edges_are_said():
    from factmem.fitting.estimates import seed_identification, two_state_identification
    from factmem.fitting.models import SEED_BOUNDS, TWO_STATE_BOUNDS, TwoStateParams

    # the case: q at its lower bound, h at its upper one: P(still true after 7 silent days) ~ 1e-152
    why, _ = two_state_identification(TwoStateParams(TWO_STATE_BOUNDS[0][0], 50.0, 0.5), 0.5, 7.0)
    assert why is not None and "q" in why
    why, _ = two_state_identification(TwoStateParams(0.3, TWO_STATE_BOUNDS[1][1], 0.5), 0.5, 7.0)
    assert why is not None and "h" in why
    why, _ = two_state_identification(TwoStateParams(0.3, 9.0, 0.5), 0.5, 7.0)  # inside the bounds, but e^-63
    assert why is not None and "underflows" in why
    why, edges = two_state_identification(TwoStateParams(0.3, TWO_STATE_BOUNDS[1][0], TWO_STATE_BOUNDS[2][0]), 0.5, 7.0)
    assert why is None and len(edges) == 2  # no change seen, every change announced: fitted, and said
    assert seed_identification(0.5, SEED_BOUNDS["max_rate"], 0.99, SEED_BOUNDS["max_rate"])[0] is not None
    assert seed_identification(SEED_BOUNDS["c0_low"], 0.01, 0.99, SEED_BOUNDS["max_rate"])[0] is not None
    why, edges = seed_identification(0.99, 0.0, 0.99, SEED_BOUNDS["max_rate"])
    assert why is None and len(edges) == 2


def _said_once_log(subjects: int = 60, sessions: int = 25):
    """Every person says where they live in each of their sessions, and their ``said_once`` value once,
    in the first session, never again: the two-state model of ``said_once`` runs into q's bound."""
    rows = []
    for i in range(subjects):
        for j in range(sessions):
            ts = START + i * 3600 + j * 2 * DAY
            rows.append((ts, f"p{i:03d}", "lives_in", "oslo", f"s{i}-{j}", f"m{i}-{j}-0"))
            if j == 0:
                rows.append((ts, f"p{i:03d}", "said_once", f"thing{i}", f"s{i}-{j}", f"m{i}-{j}-1"))
    events = pd.DataFrame(rows, columns=["ts", "subject", "predicate", "object", "session_id", "message_id"])
    events = events.assign(kind="explicit", note=None)
    messages = events[["session_id", "message_id", "ts"]].assign(speaker=events["subject"], text="...")
    gens = pd.DataFrame(columns=["gen_id", "subject", "predicate", "object", "note", "support_predicate",
                                 "support_object"])
    return make_dataset(messages, events, pd.DataFrame(), gens, {"start": START, "end": START + 80 * DAY})


def test_a_fit_at_a_bound_is_not_reported_as_fitted():
    result = fit(_said_once_log(), bootstrap=0, min_observations=20)
    e = result.estimates
    said = e[(e["name"] == "said_once") & (e["quantity"].isin(["remention_probability", "change_rate"]))]
    assert said.empty  # not identified: no row
    fb = result.fallbacks[result.fallbacks["name"] == "said_once"]
    assert fb["falls_back_to"].str.contains("not identified").any()
    assert fb["falls_back_to"].str.startswith("kind explicit").all()
    assert any(n.startswith("not identified: predicate said_once") for n in result.notes)
    assert "not identified: predicate said_once" in result.report()
    assert any("said_once" in n for n in result.to_dict()["notes"])


def test_fit_params_keep_the_logs_registry(tmp_path):
    from factmem.data.logs import bundled_dataset, load
    from factmem.evaluation.cardinality import log_registry

    ds = load(bundled_dataset())
    assert ds.multi_valued_predicates  # declared by the scenario
    result = fit(ds, bootstrap=0)
    assert result.params.multi_valued_predicates == ds.multi_valued_predicates
    # undeclared: measured, the same registry tune's base has
    undeclared = make_dataset(ds.messages, ds.events, ds.truth, ds.generalizations,
                              {k: v for k, v in ds.scenario.items() if k != "multi_valued_predicates"})
    measured = log_registry(undeclared)
    assert measured and fit(undeclared, bootstrap=0).params.multi_valued_predicates == measured
    from factmem.evaluation.simulate import prepare
    from factmem.tuning.tune import base_params

    assert base_params(prepare(undeclared)).multi_valued_predicates == measured
    # only what was fitted changes: every other field is the base's
    base, got = result.base.to_dict(), result.params.to_dict()
    changed = {k for k in got if got[k] != base[k]}
    assert changed <= {"decay_rate", "initial_confidence", "decay_rate_by_predicate"}
    result.write(tmp_path / "out", figures=False)
    assert load_params_file(tmp_path / "out" / "params.toml")[0].multi_valued_predicates == ds.multi_valued_predicates

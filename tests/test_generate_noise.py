"""Extraction noise, fast-churn predicates, the ``realistic`` preset and more personas for a preset."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from factmem.cli.main import main
from factmem.core.codes import OPEN, EndReason
from factmem.data import logs
from factmem.data.generate import generate, write
from factmem.data.presets import PRESETS, churn_catalogue, preset
from factmem.data.scenario import Scenario
from factmem.errors import InputError, ScenarioError
from factmem.evaluation.metrics import Evaluator

DAY = 86400


def _noise_scenario(rate: float = 0.15) -> dict:
    """Large, disjoint vocabularies: every mention has a never-held wrong value, and a wrong object
    never appears in its message's text by accident."""
    return {
        "name": "noise", "seed": 11, "start": "2024-01-01", "days": 240, "personas": 40,
        "sessions": {"rate_per_day": 2.0, "bursts_per_year": 0.0, "absences_per_year": 0.0},
        "messages": {"facts_per_message": 2, "assistant_replies": False},
        "noise": {"misstatement_rate": 0.05, "irrelevant_per_session": 0.2, "extraction_rate": rate},
        "predicates": {
            "home": {"kind": "explicit", "values": [f"city{i:02d}" for i in range(40)], "templates": ["I live in {o}."],
                     "lifetime_days": 60.0, "salience": 0.4, "change_delay_days": 1.0},
            "likes": {"kind": "user_preference", "cardinality": "multi", "max_values": 3,
                      "values": [f"hobby{i:02d}" for i in range(60)], "templates": ["I like {o}."],
                      "lifetime_days": 90.0, "salience": 0.3},
            "event": {"kind": "episodic", "cardinality": "multi", "values": [f"party{i:02d}" for i in range(80)],
                      "templates": ["I went to {o}."], "rate_per_year": 30.0, "relevance_days": 3.0, "salience": 0.5},
            "lunch": {"kind": "episodic", "cardinality": "multi", "irrelevant": True, "values": ["soup", "rice", "pie"],
                      "templates": ["Lunch: {o}."], "salience": 0.0},
        },
    }


@pytest.fixture(scope="module")
def noisy():
    return generate(_noise_scenario())


def _world_mentions(ds) -> int:
    """Mentions of world facts: all but misstatement pairs (wrong value + correction) and irrelevant one-offs."""
    noise = ds.truth["noise"]
    return len(ds.events) - 2 * int((noise == "misstatement").sum()) - int((noise == "irrelevant").sum())


def _extraction_events(ds) -> pd.DataFrame:
    rows = ds.truth[ds.truth["noise"] == "extraction"]
    key = ["subject", "predicate", "object"]
    return ds.events.merge(rows[key + ["valid_from"]].drop_duplicates().rename(columns={"valid_from": "ts"}),
                           on=key + ["ts"])


# -- extraction noise -----------------------------------------------------------------------------


def test_extraction_rate_is_the_share_of_world_fact_mentions(noisy):
    n_world = _world_mentions(noisy)
    n_ext = int((noisy.truth["noise"] == "extraction").sum())
    se = math.sqrt(0.15 * 0.85 / n_world)
    assert n_world > 15_000
    assert abs(n_ext / n_world - 0.15) < 4 * se, n_ext / n_world
    # every kind of world fact gets it, at the same rate (within 4 standard errors per predicate)
    ext = _extraction_events(noisy)
    assert len(ext) == n_ext
    world = noisy.events[noisy.events["note"].isna() & (noisy.events["predicate"] != "lunch")]
    mis_wrong = noisy.truth[noisy.truth["noise"] == "misstatement"].groupby("predicate").size()
    for predicate in ("home", "likes", "event"):
        n_p = int((world["predicate"] == predicate).sum()) - int(mis_wrong.get(predicate, 0))
        share = (ext["predicate"] == predicate).sum() / n_p
        assert abs(share - 0.15) < 4 * math.sqrt(0.15 * 0.85 / n_p), (predicate, share)
    assert not (ext["predicate"] == "lunch").any()


def test_extraction_errors_are_never_true_and_never_corrected(noisy):
    t = noisy.truth
    ext_rows = t[t["noise"] == "extraction"]
    assert len(ext_rows) > 1000
    assert (ext_rows["valid_from"] == ext_rows["valid_to"]).all()
    assert ext_rows["relevant_until"].isna().all()
    # the wrong triple is never true for its persona, at any time in the log
    real = t[t["noise"].isna()][["subject", "predicate", "object"]].drop_duplicates()
    clash = ext_rows.merge(real, on=["subject", "predicate", "object"])
    assert len(clash) == 0
    assert len(logs.unexplained_mentions(noisy)) == 0
    ext = _extraction_events(noisy)
    assert ext["note"].isna().all()  # nothing marks or corrects them
    # the message says the true object; only the extracted fact is wrong
    text = noisy.messages.set_index("message_id")["text"]
    assert not any(o in text[m] for o, m in zip(ext["object"], ext["message_id"]))
    ok = noisy.events[~noisy.events.index.isin(
        noisy.events.reset_index().merge(ext[["message_id", "subject", "predicate", "object"]])["index"])]
    sample = ok.sample(500, random_state=0)
    assert all(o in text[m] for o, m in zip(sample["object"], sample["message_id"]))


def test_a_predicate_without_a_never_held_value_gets_no_extraction_noise():
    d = _noise_scenario(rate=0.5)
    # two values and a short lifetime: nearly every persona holds both, so almost no mention can be wrong
    d["predicates"]["mood"] = {"kind": "explicit", "values": ["calm", "busy"], "templates": ["I'm {o}."],
                               "lifetime_days": 5.0, "salience": 0.3}
    ds = generate(d)
    t = ds.truth
    held = t[t["noise"].isna() & (t["predicate"] == "mood")].groupby("subject")["object"].nunique()
    both = set(held[held == 2].index)
    assert len(both) >= 35
    ext = t[(t["noise"] == "extraction") & (t["predicate"] == "mood")]
    assert not set(ext["subject"]) & both
    assert len(logs.unexplained_mentions(ds)) == 0


def test_believing_an_extraction_error_is_false_not_stale(noisy):
    """The metrics' view: a belief in an extraction error is never true and never stale."""
    t, ev = noisy.truth, noisy.events
    key = ["subject", "predicate", "object"]
    codes, _ = pd.factorize(pd.concat([t[key], ev[key]]).astype(str).agg("\x1f".join, axis=1))
    truth = pd.DataFrame({"triple": codes[:len(t)], "kind": 0, "valid_from": t["valid_from"].to_numpy(),
                          "valid_to": t["valid_to"], "relevant_until": t["relevant_until"]})
    mentions = pd.DataFrame({"triple": codes[len(t):], "ts": ev["ts"].to_numpy()})
    checkpoints = noisy.start + DAY * np.arange(1, noisy.scenario["days"] + 1)
    ext = (t["noise"] == "extraction").to_numpy()
    # beliefs: every extraction error held from its first mention on, never forgotten
    first = pd.DataFrame({"triple": codes[:len(t)][ext], "start": t["valid_from"].to_numpy()[ext]})
    first = first.groupby("triple", as_index=False)["start"].min()
    beliefs = first.assign(kind=0, end=OPEN, reason=int(EndReason.OPEN), confidence=1.0, rate=0.0)
    scores = Evaluator(truth, mentions, checkpoints).score(beliefs, retrieval_threshold=0.05).checkpoints
    assert scores["believed"].iloc[-1] == len(beliefs) > 1000
    assert (scores["true_believed"] == 0).all()
    assert (scores["stale"] == 0).all()


def test_rate_zero_draws_nothing_and_writes_no_setting(tmp_path):
    base = preset("tiny")
    d = base.to_dict()
    assert "extraction_rate" not in d["noise"]  # absent = 0: older scenario files keep their bytes
    d["noise"]["extraction_rate"] = 0.0
    a = write(generate(base, seed=4), tmp_path / "a")
    b = write(generate(d, seed=4), tmp_path / "b")
    for name in logs.DATASET_FILES:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    d["noise"]["extraction_rate"] = 0.2
    c = write(generate(d, seed=4), tmp_path / "c")
    assert "extraction_rate = 0.2" in (c / "scenario.toml").read_text()
    assert (a / "log.jsonl").read_bytes() != (c / "log.jsonl").read_bytes()
    # with the noise on, the same scenario and seed give the same bytes, and the folder regenerates itself
    e = write(generate(Scenario.load(c / "scenario.toml")), tmp_path / "e")
    for name in logs.DATASET_FILES:
        assert (c / name).read_bytes() == (e / name).read_bytes(), name
    assert logs.load(c).sha256 == logs.load(e).sha256


def test_existing_presets_have_no_extraction_noise_and_no_churn_predicates():
    churn = set(churn_catalogue())
    for name in PRESETS:
        s = preset(name)
        if name == "realistic":
            continue
        assert s.noise.extraction_rate == 0.0, name
        assert not churn & {p.name for p in s.predicates}, name


@pytest.mark.parametrize("value", [-0.1, 1.5, "ten percent", True, float("nan"), float("inf")])
def test_bad_extraction_rate_names_the_key_and_the_value(value):
    d = _noise_scenario()
    d["noise"]["extraction_rate"] = value
    with pytest.raises(ScenarioError, match=r"noise\.extraction_rate") as info:
        generate(d)
    assert repr(value) in str(info.value)


# -- fast churn and the realistic preset -------------------------------------------------------------


@pytest.fixture(scope="module")
def realistic():
    return generate("realistic", seed=1)


def test_realistic_preset_generates_and_loads(tmp_path, realistic):
    assert "budgeted context" in PRESETS["realistic"]
    s = Scenario.from_dict(realistic.scenario)
    assert s.noise.extraction_rate == pytest.approx(0.1)
    assert set(churn_catalogue()) <= {p.name for p in s.predicates}
    out = write(realistic, tmp_path / "realistic")
    ds = logs.load(out)
    assert ds.sha256 == logs.load(write(generate("realistic", seed=1), tmp_path / "again")).sha256
    assert len(ds.events) > 20_000 and ds.events["subject"].nunique() == 40
    assert len(logs.unexplained_mentions(ds)) == 0
    n_world = _world_mentions(ds)
    share = (ds.truth["noise"] == "extraction").sum() / n_world
    assert abs(share - 0.1) < 4 * math.sqrt(0.1 * 0.9 / n_world) + 0.002, share
    assert set(ds.truth["noise"].dropna()) == {"misstatement", "irrelevant", "extraction"}


@pytest.mark.parametrize("predicate", sorted(churn_catalogue()))
def test_churn_predicates_change_every_few_weeks(realistic, predicate):
    mean_days = churn_catalogue()[predicate]["lifetime_days"]
    assert 14.0 <= mean_days <= 21.0
    t = realistic.truth
    rows = t[t["noise"].isna() & (t["predicate"] == predicate)]
    vf = np.maximum(rows["valid_from"].to_numpy(), realistic.start)
    vt = rows["valid_to"].to_numpy(dtype="float64", na_value=np.inf)
    exposure = (np.minimum(vt, realistic.end) - vf).sum() / DAY
    ended = int(((vt > realistic.start) & (vt <= realistic.end)).sum())
    assert ended > 300
    assert exposure / ended == pytest.approx(mean_days, rel=4 / math.sqrt(ended))  # exponential MLE, censored
    # they come up while they hold: most values that start inside the log are mentioned
    m = realistic.events[realistic.events["predicate"] == predicate]
    assert len(m) > 10 * realistic.scenario["personas"]


# -- more personas ------------------------------------------------------------------------------------


def test_presets_generate_with_more_personas(tmp_path, capsys):
    ds = generate("tiny", seed=1, personas=60)
    assert ds.scenario["personas"] == 60 and ds.scenario["name"] == "tiny"
    assert ds.events["subject"].nunique() == 60
    same = generate(preset("tiny").replace(personas=60), seed=1)
    assert ds.sha256 == same.sha256
    # the written scenario records it, so the folder regenerates itself
    out = write(ds, tmp_path / "tiny60")
    assert logs.load(write(generate(out / "scenario.toml"), tmp_path / "again")).sha256 == logs.load(out).sha256
    assert main(["generate", "--preset", "tiny", "--seed", "1", "--personas", "60", "--out", str(tmp_path / "cli"),
                 "-q"]) == 0
    assert (tmp_path / "cli" / "log.jsonl").read_bytes() == (out / "log.jsonl").read_bytes()
    with pytest.raises(ScenarioError, match=r"scenario\.personas = 0"):
        generate("tiny", personas=0)
    with pytest.raises(InputError, match="personas"):
        generate("tiny", personas=2.5)  # type: ignore[arg-type]

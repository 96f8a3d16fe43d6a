"""The synthetic generator: determinism, consistency with truth, and statistics that match the scenario."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from factmem.cli.main import main
from factmem.data import logs
from factmem.data.generate import CORRECTION_NOTE, generate, write
from factmem.data.presets import PRESETS, base_dict, preset
from factmem.data.scenario import Scenario

DAY = 86400
REPO = Path(__file__).resolve().parents[1]


# -- a scenario built for measuring ------------------------------------------------------------

def _stats_scenario() -> dict:
    cities = [f"city{i:02d}" for i in range(20)]
    return {
        "name": "stats", "seed": 42, "start": "2024-01-01", "days": 365, "personas": 60,
        "sessions": {"rate_per_day": 3.0, "rate_spread": 0.0, "weekend_factor": 0.5, "bursts_per_year": 0.0,
                     "absences_per_year": 0.0, "duration_minutes": 10.0, "min_gap_minutes": 20.0},
        "messages": {"facts_per_message": 2, "assistant_replies": True},
        "noise": {"misstatement_rate": 0.05, "irrelevant_per_session": 0.3},
        "predicates": {
            "home": {"kind": "explicit", "values": cities, "templates": ["I live in {o}."], "lifetime_days": 60.0,
                     "salience": 0.2, "change_delay_days": 3.0, "unmentioned_change": 0.25},
            "office": {"kind": "explicit", "values": cities, "templates": ["I work in {o}."], "lifetime_days": 60.0,
                       "salience": 0.2, "change_delay_days": 0.0, "unmentioned_change": 0.0},
            "likes": {"kind": "user_preference", "cardinality": "multi", "max_values": 3,
                      "values": [f"hobby{i:02d}" for i in range(18)], "templates": ["I like {o}."],
                      "lifetime_days": 90.0, "salience": 0.1, "change_delay_days": 1.0},
            "born": {"kind": "explicit", "values": cities, "templates": ["Born in {o}."], "salience": 0.05},
            "event": {"kind": "episodic", "cardinality": "multi", "values": [f"party{i:02d}" for i in range(16)],
                      "templates": ["I went to {o}."], "rate_per_year": 50.0, "relevance_days": 2.0, "salience": 0.3},
            "trip": {"kind": "episodic", "episode": "state", "values": cities, "templates": ["Off to {o}."],
                     "rate_per_year": 10.0, "relevance_days": 5.0, "salience": 0.5},
            "lunch": {"kind": "episodic", "cardinality": "multi", "irrelevant": True, "values": ["soup", "rice", "pie"],
                      "templates": ["Lunch: {o}."], "salience": 0.0},
        },
        "archetypes": {
            "athlete": {"share": 0.3, "object": "athlete", "note": "trains a lot",
                        "implies": [["likes", "running"], ["born", "Sparta"]]},
        },
    }


@pytest.fixture(scope="module")
def stats():
    d = _stats_scenario()
    d["predicates"]["likes"]["values"].append("running")
    d["predicates"]["born"]["values"].append("Sparta")
    ds = generate(d)
    return ds


@pytest.fixture(scope="module")
def sessions(stats):
    m = stats.messages
    user = m[m["speaker"] != "assistant"]
    persona = user.groupby("session_id")["speaker"].first()
    g = m.groupby("session_id")["ts"]
    out = pd.DataFrame({"persona": persona, "start": g.min(), "end": g.max()}).dropna()
    return out.sort_values(["persona", "start"]).reset_index()


def _rows(ds, predicate, noise=False):
    t = ds.truth
    sel = (t["predicate"] == predicate) & (t["noise"].notna() if noise else t["noise"].isna())
    return t[sel].reset_index(drop=True)


def _mentions_in(ds, rows, lo, hi):
    """Mentions of each row's triple with lo_i <= ts < hi_i (vectorized via a merge)."""
    ev = ds.events
    key = ["subject", "predicate", "object"]
    r = rows[key].assign(_i=np.arange(len(rows)), _lo=lo, _hi=hi)
    m = r.merge(ev[key + ["ts"]], on=key, how="left")
    inside = (m["ts"] >= m["_lo"]) & (m["ts"] < m["_hi"])
    counts = inside.groupby(m["_i"]).sum().reindex(range(len(rows)), fill_value=0).to_numpy()
    first = m["ts"].where(inside).groupby(m["_i"]).min().reindex(range(len(rows))).to_numpy()
    return counts, first


def _eligible_sessions(sessions, subjects, lo, hi):
    """How many sessions of each subject start at or after lo and end before hi."""
    key_s = sessions["persona"].astype(str).to_numpy()
    order = np.lexsort((sessions["start"].to_numpy(), key_s))
    names = key_s[order]
    starts = sessions["start"].to_numpy()[order]
    ends = sessions["end"].to_numpy()[order]
    uniq, first = np.unique(names, return_index=True)
    last = np.r_[first[1:], len(names)]
    pos = np.searchsorted(uniq, subjects)
    out = np.zeros(len(subjects), dtype=np.int64)
    for k in range(len(uniq)):  # a loop over personas (60), vectorized within each
        sel = pos == k
        a = np.searchsorted(starts[first[k]:last[k]], lo[sel], side="left")
        b = np.searchsorted(ends[first[k]:last[k]], hi[sel], side="left")
        out[sel] = np.maximum(0, b - a)
    return out


# -- determinism ----------------------------------------------------------------------------------


def test_same_scenario_and_seed_give_identical_bytes(tmp_path):
    a = write(generate("tiny", seed=7), tmp_path / "a")
    b = write(generate("tiny", seed=7), tmp_path / "b")
    c = write(generate("tiny", seed=8), tmp_path / "c")
    for name in logs.DATASET_FILES:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    assert (a / "log.jsonl").read_bytes() != (c / "log.jsonl").read_bytes()
    # the folder's own scenario.toml regenerates it
    d = write(generate(Scenario.load(a / "scenario.toml")), tmp_path / "d")
    assert all((a / n).read_bytes() == (d / n).read_bytes() for n in logs.DATASET_FILES)
    assert logs.load(a).sha256 == logs.load(d).sha256 != logs.load(c).sha256


def test_cli_generate_writes_the_same_folder(tmp_path, capsys):
    assert main(["generate", "--preset", "tiny", "--seed", "3", "--out", str(tmp_path / "cli")]) == 0
    assert "mentions" in capsys.readouterr().out
    write(generate("tiny", seed=3), tmp_path / "lib")
    for name in logs.DATASET_FILES:
        assert (tmp_path / "cli" / name).read_bytes() == (tmp_path / "lib" / name).read_bytes()
    assert main(["generate", "--scenario", str(tmp_path / "lib" / "scenario.toml"), "--out", str(tmp_path / "s"), "-q"]) == 0
    assert (tmp_path / "s" / "log.jsonl").read_bytes() == (tmp_path / "lib" / "log.jsonl").read_bytes()
    assert main(["generate", "--preset", "nope", "--out", str(tmp_path / "x")]) == 2
    assert "unknown preset" in capsys.readouterr().err
    assert main(["generate", "--list-presets"]) == 0
    listing = capsys.readouterr().out
    assert all(name in listing for name in PRESETS)


def test_committed_small_dataset_regenerates_byte_for_byte(tmp_path):
    folder = REPO / "datasets" / "small"
    ds = logs.load(folder)
    size = sum((folder / n).stat().st_size for n in logs.DATASET_FILES)
    assert size < 6_000_000
    assert 20_000 <= len(ds.events) <= 60_000
    assert ds.scenario["name"] == "small"
    again = write(generate(Scenario.load(folder / "scenario.toml")), tmp_path / "small")
    for name in logs.DATASET_FILES:
        assert (again / name).read_bytes() == (folder / name).read_bytes(), name
    # and it is the preset with the seed it records
    assert Scenario.load(folder / "scenario.toml") == preset("small", seed=ds.scenario["seed"])


# -- every preset -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [p for p in PRESETS if p != "large"])
def test_presets_are_consistent_with_their_truth(name):
    ds = generate(name, seed=1)
    assert PRESETS[name]
    assert len(ds.events) > 300
    assert len(logs.unexplained_mentions(ds)) == 0
    assert set(ds.events["kind"]) == {"explicit", "user_preference", "episodic"}
    assert ds.scenario["multi_valued_predicates"] == sorted(
        n for n, p in ds.scenario["predicates"].items() if p["cardinality"] == "multi")
    # every lasting fact of a single-valued predicate holds alone (no overlapping values)
    t = ds.truth[ds.truth["noise"].isna() & ~ds.truth["predicate"].isin(ds.multi_valued_predicates)]
    t = t[t["kind"] != "episodic"].sort_values(["subject", "predicate", "valid_from"])
    same = (t["subject"].to_numpy()[1:] == t["subject"].to_numpy()[:-1]) & (
        t["predicate"].to_numpy()[1:] == t["predicate"].to_numpy()[:-1])
    prev_to = t["valid_to"].to_numpy(dtype="float64", na_value=np.inf)[:-1]
    assert (t["valid_from"].to_numpy()[1:][same] >= prev_to[same]).all()


def test_large_preset_is_declared_not_generated():
    s = preset("large")
    assert s.personas * s.days * s.sessions.rate_per_day > 250_000  # generated on demand, see benchmarks


def test_multi_valued_preset_has_concurrent_values():
    ds = generate("multi-valued", seed=2)
    t = ds.truth[ds.truth["noise"].isna() & (ds.truth["predicate"] == "works_on")]
    at = ds.start + 30 * DAY
    live = t[(t["valid_from"] <= at) & (t["valid_to"].fillna(np.iinfo(np.int64).max) > at)]
    per = live.groupby("subject").size()
    assert per.max() >= 3 and "works_on" in ds.multi_valued_predicates


# -- statistics: the log matches its scenario -----------------------------------------------------


def test_sessions_follow_the_rhythm(stats, sessions):
    s = Scenario.from_dict(stats.scenario)
    starts = sessions["start"].to_numpy()
    dow = (starts // DAY + 3) % 7
    weekend = dow >= 5
    n_days = s.days
    n_weekend_days = int(((((s.start + np.arange(n_days) * DAY) // DAY) + 3) % 7 >= 5).sum())
    per_weekday = (~weekend).sum() / (n_days - n_weekend_days)
    per_weekend = weekend.sum() / n_weekend_days
    assert per_weekend / per_weekday == pytest.approx(0.5, abs=0.06)
    assert per_weekday / s.personas == pytest.approx(3.0, rel=0.05)
    # a persona's sessions never overlap and keep the minimum gap
    same = sessions["persona"].to_numpy()[1:] == sessions["persona"].to_numpy()[:-1]
    gap = starts[1:] - sessions["end"].to_numpy()[:-1]
    assert (gap[same] >= 20 * 60).all()
    hours = (starts % DAY) // 3600
    w = np.asarray(s.sessions.hour_weights)
    assert np.corrcoef(np.bincount(hours, minlength=24), w)[0, 1] > 0.9


def test_absences_silence_personas():
    d = base_dict()
    d.update(name="absent", days=365, personas=30, seed=4)
    d["sessions"] = {"rate_per_day": 2.0, "absences_per_year": 3.0, "absence_days": 30.0, "bursts_per_year": 0.0}
    ds = generate(d)
    m = ds.messages[ds.messages["speaker"] != "assistant"].sort_values(["speaker", "ts"])
    same = m["speaker"].to_numpy()[1:] == m["speaker"].to_numpy()[:-1]
    gaps = np.diff(m["ts"].to_numpy())[same] / DAY
    # with ~2 sessions a day, gaps beyond 10 days only come from absences: about 3 per persona-year
    long_gaps = (gaps > 10).sum()
    assert 30 * 3 * 0.5 < long_gaps < 30 * 3 * 1.3


def test_lifetimes_match_the_catalogue(stats):
    for predicate, mean_days in (("home", 60.0), ("office", 60.0), ("likes", 90.0)):
        t = _rows(stats, predicate)
        t = t[~((t["predicate"] == "likes") & (t["object"] == "running"))]  # planted: true all along
        vf = np.maximum(t["valid_from"].to_numpy(), stats.start)
        vt = t["valid_to"].to_numpy(dtype="float64", na_value=np.inf)
        exposure = (np.minimum(vt, stats.end) - vf).sum() / DAY
        ended = ((vt > stats.start) & (vt <= stats.end)).sum()
        estimate = exposure / ended  # exponential MLE with censoring
        assert estimate == pytest.approx(mean_days, rel=4 / math.sqrt(ended)), predicate
    assert (_rows(stats, "born")["valid_to"].isna()).all()  # lifetime inf: never changes


def test_mention_rate_is_the_salience(stats, sessions):
    for predicate, salience in (("home", 0.2), ("office", 0.2), ("likes", 0.1), ("born", 0.05)):
        t = _rows(stats, predicate)
        t = t[t["valid_from"] < stats.start].reset_index(drop=True)  # initial values: no forced mention
        hi = t["valid_to"].fillna(stats.end + 1).to_numpy(dtype=np.int64)
        lo = np.full(len(t), stats.start)
        counts, _ = _mentions_in(stats, t, lo, hi)
        eligible = _eligible_sessions(sessions, t["subject"].to_numpy(), lo, hi)
        rate = counts.sum() / eligible.sum()
        se = math.sqrt(salience * (1 - salience) / eligible.sum())
        assert abs(rate - salience) < 4 * se + 0.005, (predicate, rate)


def test_change_delays_and_unmentioned_changes(stats):
    lags, silent = {}, {}
    for predicate in ("home", "office"):
        t = _rows(stats, predicate)
        t = t[(t["valid_from"] > stats.start) & (t["valid_to"].isna() | (t["valid_to"] - t["valid_from"] > 20 * DAY))]
        t = t.reset_index(drop=True)
        hi = t["valid_to"].fillna(stats.end + 1).to_numpy(dtype=np.int64)
        counts, first = _mentions_in(stats, t, t["valid_from"].to_numpy(), hi)
        silent[predicate] = (counts == 0).mean()
        lags[predicate] = np.nanmean(first - t["valid_from"].to_numpy()) / DAY
        n = len(t)
    # same session rhythm for both: the difference of lags is the mean mention delay (3 days)
    assert lags["home"] - lags["office"] == pytest.approx(3.0, abs=4 * 3.0 / math.sqrt(n * 0.75))
    assert lags["office"] < 1.0  # the wait for the next session only
    assert silent["home"] == pytest.approx(0.25, abs=4 * math.sqrt(0.25 * 0.75 / n) + 0.02)
    assert silent["office"] < 0.03


def test_episodes_rate_and_relevance(stats):
    personas = stats.scenario["personas"]
    ev = _rows(stats, "event")
    assert len(ev) / personas == pytest.approx(50.0, rel=0.08)
    rel = (ev["relevant_until"] - ev["valid_from"]).to_numpy(dtype=np.float64) / DAY
    assert rel.mean() == pytest.approx(2.0, abs=4 * 2.0 / math.sqrt(len(ev)))
    assert ev["valid_to"].isna().all()  # events stay true; only their relevance ends
    trips = _rows(stats, "trip")
    assert (trips["valid_to"] == trips["relevant_until"]).all()  # a state ends with its relevance
    assert len(trips) / personas == pytest.approx(10.0, rel=0.15)
    # an episode is mentioned at its first session inside its window
    counts, first = _mentions_in(stats, ev, ev["valid_from"].to_numpy(), ev["relevant_until"].to_numpy(dtype=np.int64))
    assert (counts > 0).mean() > 0.7
    assert (np.nanmedian(first - ev["valid_from"].to_numpy()) / DAY) < 1.0


def test_misstatements_are_corrected_next_message(stats):
    mis = _rows(stats, "home", noise=True)
    mis = pd.concat([mis, _rows(stats, "office", noise=True)])
    assert (mis["noise"] == "misstatement").all()
    assert (mis["valid_from"] == mis["valid_to"]).all()
    ev = stats.events.reset_index(drop=True)
    lasting_single = ev["predicate"].isin(["home", "office", "born"])
    corrections = ev[ev["note"] == CORRECTION_NOTE]
    share = len(corrections) / (lasting_single.sum() - len(corrections))
    assert share == pytest.approx(0.05, abs=4 * math.sqrt(0.05 * 0.95 / lasting_single.sum()))
    assert len(corrections) == (stats.truth["noise"] == "misstatement").sum()
    # each misstatement's message is followed, in its session, by the correction of the same predicate
    msgs = stats.messages.reset_index(drop=True)
    line = pd.Series(np.arange(len(msgs)), index=msgs["message_id"])
    m = ev.merge(mis[["subject", "predicate", "object", "valid_from"]].rename(columns={"valid_from": "ts"}),
                 on=["subject", "predicate", "object", "ts"])
    assert len(m) == len(mis)
    for col in ("session_id",):
        nxt = corrections.set_index(["session_id", "subject", "predicate"])
        k = list(zip(m[col], m["subject"], m["predicate"]))
        assert all(key in nxt.index for key in k)
    fixed = corrections.merge(m, on=["session_id", "subject", "predicate"], suffixes=("", "_wrong"))
    assert (fixed["object"] != fixed["object_wrong"]).all()
    assert (line[fixed["message_id"]].to_numpy() > line[fixed["message_id_wrong"]].to_numpy()).all()
    assert (fixed["ts"] >= fixed["ts_wrong"]).all()


def test_irrelevant_facts_are_one_offs(stats, sessions):
    irr = stats.truth[stats.truth["noise"] == "irrelevant"]
    assert (irr["predicate"] == "lunch").all()
    assert (irr["relevant_until"] == irr["valid_from"]).all()
    assert len(irr) / len(sessions) == pytest.approx(0.3, rel=0.08)
    lunches = stats.events[stats.events["predicate"] == "lunch"]
    assert len(lunches) == len(irr)


def test_generalizations_are_planted(stats):
    g = stats.generalizations
    personas = stats.scenario["personas"]
    assert g["gen_id"].nunique() == pytest.approx(0.3 * personas, abs=4 * math.sqrt(0.3 * 0.7 * personas))
    assert set(g["support_predicate"]) == {"likes", "born"}
    t = stats.truth[stats.truth["noise"].isna()]
    held = g.merge(t, left_on=["subject", "support_predicate", "support_object"],
                   right_on=["subject", "predicate", "object"], suffixes=("", "_t"))
    assert len(held) == len(g)
    assert (held["valid_from"] < stats.start).all() and held["valid_to"].isna().all()
    # archetype objects are reserved for archetype personas
    holders = set(g["subject"])
    running = t[(t["predicate"] == "likes") & (t["object"] == "running")]
    assert set(running["subject"]) == holders


def test_text_carries_the_facts(stats):
    ev = stats.events
    txt = stats.messages.set_index("message_id")["text"]
    sample = ev.sample(300, random_state=0)
    assert all(o in txt[m] for o, m in zip(sample["object"], sample["message_id"]))
    assert (stats.messages["speaker"] == "assistant").sum() == (stats.messages["speaker"] != "assistant").sum()


# -- scenario validation ---------------------------------------------------------------------------


def test_scenario_round_trips():
    s = preset("drift", seed=5)
    assert Scenario.from_dict(s.to_dict()) == s
    assert Scenario.from_toml(s.to_toml()) == s
    assert s.seed == 5 and s.end == s.start + s.days * DAY


@pytest.mark.parametrize(
    "change,match",
    [
        ({"personas": 0}, "personas"),
        ({"colour": 1}, "unknown setting 'colour'"),
        ({"predicates": {"home": {"salience": 1.5}}}, r"predicates.home.salience"),
        ({"predicates": {"home": {"templates": ["no object here"]}}}, r"predicates.home.templates"),
        ({"predicates": {"home": {"kind": "derived"}}}, r"predicates.home.kind"),
        ({"predicates": {"home": {"max_values": 2}}}, r"max_values"),
        ({"predicates": {"home": {"values": ["a"]}}}, r"predicates.home.values"),
        ({"archetypes": {"athlete": {"implies": [["nope", "x"]]}}}, r"unknown predicate 'nope'"),
        ({"archetypes": {"athlete": {"implies": [["event", "party01"]]}}}, r"only lasting facts"),
        ({"archetypes": {"athlete": {"share": 1.5}}}, r"share"),
        ({"sessions": {"hour_weights": [1.0] * 23}}, r"hour_weights"),
        ({"messages": {"correction_template": "oops {o}"}}, r"correction_template"),
        ({"start": "yesterday"}, r"start"),
        ({"end": 5}, r"scenario.end"),
    ],
)
def test_scenario_errors_name_the_setting(change, match):
    d = _stats_scenario()
    for k, v in change.items():
        if isinstance(v, dict) and isinstance(d.get(k), dict):
            for kk, vv in v.items():
                if isinstance(vv, dict) and kk in d[k]:
                    d[k][kk].update(vv)
                else:
                    d[k][kk] = vv
        else:
            d[k] = v
    with pytest.raises(ValueError, match=match):
        generate(d)


def test_generate_argument_errors(tmp_path):
    with pytest.raises(ValueError, match="unknown preset"):
        generate("nope")
    with pytest.raises(ValueError, match="seed"):
        generate("tiny", seed=-1)
    (tmp_path / "bad.toml").write_text("days = [")
    with pytest.raises(ValueError, match="bad.toml"):
        generate(tmp_path / "bad.toml")


def test_drift_preset_preferences_change_every_few_weeks():
    """`drift` scales every preference's lifetime by 0.08 *and* announces changes faster; both
    overrides reach the scenario (they once lived in two dicts of which the second replaced the first),
    and the generated truth changes preferences at about that pace."""
    base = {p.name: p for p in preset("small").predicates}
    drift = preset("drift")
    prefs = [p for p in drift.predicates if p.kind == "user_preference"]
    assert prefs
    for p in prefs:
        assert p.lifetime_days == pytest.approx(0.08 * base[p.name].lifetime_days)
        assert (p.change_delay_days, p.unmentioned_change) == (1.0, 0.1)
    truth = generate(drift, seed=1).truth
    pref = truth[(truth["kind"] == "user_preference") & truth["noise"].isna()]
    inside = pref["valid_from"] >= drift.start
    # values that began inside the 180-day log: lifetimes of 16-80 days give several per slot
    assert inside.sum() > 2 * (~inside).sum()

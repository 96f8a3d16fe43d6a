"""The dataset folder format: load, save, round trips, and every malformed-input case."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from factmem.core.codes import MENTION_KINDS
from factmem.data import logs
from factmem.data.generate import generate
from factmem.errors import FactmemError, InputError


@pytest.fixture(scope="module")
def tiny():
    return generate("tiny", seed=11)


@pytest.fixture
def folder(tmp_path, tiny):
    logs.save(tiny, tmp_path / "ds")
    return tmp_path / "ds"


def _msg(mid="m1", sid="s1", ts=100, facts=None, **extra):
    rec = {"session_id": sid, "message_id": mid, "ts": ts, "speaker": "ava", "text": "hi",
           "facts": facts if facts is not None else [{"subject": "ava", "predicate": "lives_in", "object": "Oslo",
                                                      "kind": "explicit"}]}
    rec.update(extra)
    return rec


def _write_log(folder: Path, lines: list) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    text = "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n"
    (folder / "log.jsonl").write_text(text, encoding="utf-8")
    return folder


def _expect(folder: Path, file: str, line: int, field: str | None):
    with pytest.raises(InputError) as info:
        logs.load(folder)
    msg = str(info.value)
    assert file in msg and f":{line}:" in msg, msg
    if field is not None:
        assert repr(field) in msg or field in msg, msg
    assert isinstance(info.value, FactmemError)
    return msg


# -- shape of what load returns ----------------------------------------------------------------


def test_events_table_is_ready_for_ingest(folder, tiny):
    ds = logs.load(folder)
    ev = ds.events
    assert list(ev.columns) == list(logs.EVENT_COLUMNS)
    assert ev["ts"].dtype == np.int64
    assert ev["ts"].is_monotonic_increasing
    assert set(ev["kind"]) <= set(MENTION_KINDS) and "derived" not in set(ev["kind"])
    for c in ("subject", "predicate", "object", "kind", "session_id", "message_id"):
        assert ev[c].notna().all(), c
    # every mention points at a message whose timestamp it carries
    msg = ds.messages.set_index(["session_id", "message_id"])["ts"]
    assert (msg.loc[list(zip(ev["session_id"], ev["message_id"]))].to_numpy() == ev["ts"].to_numpy()).all()
    assert list(ds.truth.columns)[:7] == ["subject", "predicate", "object", "kind", "valid_from", "valid_to", "relevant_until"]
    assert str(ds.truth["valid_to"].dtype) == "Int64" and str(ds.truth["relevant_until"].dtype) == "Int64"
    assert list(ds.generalizations.columns) == list(logs.GENERALIZATION_COLUMNS)
    assert ds.scenario["start"] <= ev["ts"].min() and ev["ts"].max() <= ds.scenario["end"]
    assert ds.start == ds.scenario["start"] and ds.end == ds.scenario["end"]
    assert ds.multi_valued_predicates == frozenset(ds.scenario["multi_valued_predicates"])
    assert list(ds.messages.columns) == list(logs.MESSAGE_COLUMNS)


def test_event_order_is_ts_then_line_then_position(tmp_path):
    f1 = {"subject": "a", "predicate": "p", "object": "x", "kind": "explicit"}
    f2 = {"subject": "a", "predicate": "p", "object": "y", "kind": "explicit", "note": "second"}
    f3 = {"subject": "b", "predicate": "q", "object": "z", "kind": "episodic"}
    folder = _write_log(tmp_path / "d", [
        _msg("m1", ts=200, facts=[f1, f2]),
        _msg("m2", ts=100, facts=[f3]),
        _msg("m3", ts=200, facts=[f3, f1]),
        _msg("m4", ts=150, facts=[]),
    ])
    ds = logs.load(folder)
    assert ds.events["message_id"].tolist() == ["m2", "m1", "m1", "m3", "m3"]
    assert ds.events["object"].tolist() == ["z", "x", "y", "z", "x"]
    assert ds.events["note"].isna().tolist() == [True, True, False, True, True]
    # no scenario file: the span of the log; no truth: empty tables with the right columns
    assert ds.scenario == {"start": 100, "end": 200}
    assert len(ds.truth) == 0 and list(ds.truth.columns) == list(logs.TRUTH_COLUMNS)
    assert len(ds.messages) == 4


def test_round_trip_is_equal_and_byte_identical(folder, tiny, tmp_path):
    ds = logs.load(folder)
    assert ds.equals(tiny)
    assert ds.sha256 == tiny.sha256  # the in-memory hash is the hash of the folder save writes
    logs.save(ds, tmp_path / "again")
    for name in logs.DATASET_FILES:
        assert (tmp_path / "again" / name).read_bytes() == (folder / name).read_bytes(), name
    again = logs.load(tmp_path / "again")
    assert again.equals(ds) and again.sha256 == ds.sha256
    # loading by the log file's path works too
    assert logs.load(folder / "log.jsonl").equals(ds)


def test_round_trip_of_a_hand_written_log(tmp_path):
    folder = _write_log(tmp_path / "d", [
        '{"session_id": "s1", "message_id": "m1", "ts": 5, "speaker": "u", "text": "caf\\u00e9 \\"x\\"",'
        ' "facts": [{"subject": "ü", "predicate": "p,q", "object": "line\\nbreak", "kind": "user_preference", "note": null}]}',
        "",
        '{"session_id": "s1", "message_id": "m2", "ts": 6, "speaker": "u", "text": "", "facts": [], "extra": 1}',
    ])
    ds = logs.load(folder)
    logs.save(ds, tmp_path / "out")
    back = logs.load(tmp_path / "out")
    assert back.equals(ds)
    assert back.events["object"].iloc[0] == "line\nbreak" and back.messages["text"].iloc[0] == 'café "x"'


def test_sha256_changes_with_content(folder, tmp_path, tiny):
    ds = logs.load(folder)
    other = generate("tiny", seed=12)
    assert other.sha256 != ds.sha256
    (folder / "README.txt").write_text("not part of the dataset")
    assert logs.load(folder).sha256 == ds.sha256


def test_unexplained_mentions_finds_broken_truth(tiny):
    assert len(logs.unexplained_mentions(tiny)) == 0
    truth = tiny.truth.copy()
    first = tiny.events.iloc[0]
    mask = (truth["subject"] == first["subject"]) & (truth["predicate"] == first["predicate"]) & (
        truth["object"] == first["object"])
    truth.loc[mask, "valid_from"] = int(first["ts"]) + 1
    broken = logs.make_dataset(tiny.messages, tiny.events, truth, tiny.generalizations, tiny.scenario)
    bad = logs.unexplained_mentions(broken)
    assert len(bad) >= 1 and (bad["subject"] == first["subject"]).all()


# -- malformed log.jsonl ----------------------------------------------------------------------


def test_bad_json_line(tmp_path):
    folder = _write_log(tmp_path / "d", [_msg("m1"), _msg("m2"), '{"session_id": "s1", "message_id": "m3", "ts": 7,'])
    msg = _expect(folder, "log.jsonl", 3, None)
    assert "invalid JSON" in msg


def test_line_numbers_count_blank_lines(tmp_path):
    folder = _write_log(tmp_path / "d", [_msg("m1"), "", "", _msg("m2", facts=[{"subject": "a"}])])
    _expect(folder, "log.jsonl", 4, "predicate")


def test_missing_message_field(tmp_path):
    rec = _msg("m2")
    del rec["message_id"]
    folder = _write_log(tmp_path / "d", [_msg("m1"), rec])
    msg = _expect(folder, "log.jsonl", 2, "message_id")
    assert "missing" in msg


def test_missing_fact_field(tmp_path):
    folder = _write_log(tmp_path / "d", [_msg("m1", facts=[{"subject": "a", "predicate": "p", "object": "o"}])])
    msg = _expect(folder, "log.jsonl", 1, "kind")
    assert "facts[0]" in msg


@pytest.mark.parametrize("kind", ["derived", "Explicit", "belief"])
def test_unknown_kind(tmp_path, kind):
    facts = [{"subject": "a", "predicate": "p", "object": "o", "kind": "explicit"},
             {"subject": "a", "predicate": "p", "object": "o", "kind": kind}]
    folder = _write_log(tmp_path / "d", [_msg("m1"), _msg("m2", facts=facts)])
    msg = _expect(folder, "log.jsonl", 2, "kind")
    assert repr(kind) in msg and "facts[1]" in msg


@pytest.mark.parametrize("ts", [1.5, 2.0, "100", True, None, 2**64])
def test_non_integer_ts(tmp_path, ts):
    folder = _write_log(tmp_path / "d", [_msg("m1"), _msg("m2"), _msg("m3", ts=ts)])
    _expect(folder, "log.jsonl", 3, "ts")


def test_duplicate_message_ids(tmp_path):
    folder = _write_log(tmp_path / "d", [_msg("m1"), _msg("m2"), _msg("m1")])
    msg = _expect(folder, "log.jsonl", 3, "message_id")
    assert "duplicate" in msg and "line 1" in msg
    # the same message id in another session is a different message
    folder2 = _write_log(tmp_path / "e", [_msg("m1", sid="s1"), _msg("m1", sid="s2")])
    assert len(logs.load(folder2).messages) == 2


@pytest.mark.parametrize(
    "facts,field",
    [("not a list", "facts"), ([["a", "p", "o"]], "facts[0]"), ([{"subject": 3, "predicate": "p", "object": "o",
                                                                 "kind": "explicit"}], "subject"),
     ([{"subject": "", "predicate": "p", "object": "o", "kind": "explicit"}], "subject"),
     ([{"subject": "a", "predicate": "p", "object": "o", "kind": "explicit", "note": 5}], "note")],
)
def test_wrong_types_in_facts(tmp_path, facts, field):
    folder = _write_log(tmp_path / "d", [_msg("m1"), _msg("m2", facts=facts)])
    _expect(folder, "log.jsonl", 2, field)


def test_not_an_object_and_wrong_field_types(tmp_path):
    _expect(_write_log(tmp_path / "a", [_msg("m1"), "[1, 2]"]), "log.jsonl", 2, None)
    _expect(_write_log(tmp_path / "b", [_msg("m1", sid=7)]), "log.jsonl", 1, "session_id")
    _expect(_write_log(tmp_path / "c", [_msg("")]), "log.jsonl", 1, "message_id")


def test_ts_outside_scenario_span(folder):
    text = (folder / "scenario.toml").read_text()
    ds = logs.load(folder)
    last = int(ds.messages["ts"].max())
    lines = [ln for ln in text.splitlines() if not ln.startswith("end = ")]
    lines.insert(1, f"end = {last - 1}")
    (folder / "scenario.toml").write_text("\n".join(lines) + "\n")
    msg = _expect(folder, "log.jsonl", int(np.flatnonzero(ds.messages["ts"].to_numpy() > last - 1)[0]) + 1, "ts")
    assert "span" in msg


# -- malformed truth, generalizations, scenario --------------------------------------------------


def _truth_csv(folder: Path, rows: list[str], header="subject,predicate,object,kind,valid_from,valid_to,relevant_until,noise"):
    (folder / "truth.csv").write_text(header + "\n" + "\n".join(rows) + "\n")


def test_truth_valid_to_before_valid_from(folder):
    _truth_csv(folder, ["ava,lives_in,Oslo,explicit,100,200,,", "ava,lives_in,Rome,explicit,300,250,,"])
    msg = _expect(folder, "truth.csv", 3, "valid_to")
    assert "250" in msg and "300" in msg


def test_truth_bad_values(folder):
    _truth_csv(folder, ["ava,lives_in,Oslo,explicit,1.5,,,"])
    _expect(folder, "truth.csv", 2, "valid_from")
    _truth_csv(folder, ["ava,lives_in,Oslo,explicit,10,,,", "ava,lives_in,Oslo,explicit,,,,"])
    _expect(folder, "truth.csv", 3, "valid_from")
    _truth_csv(folder, ["ava,lives_in,Oslo,derived,10,,,"])
    _expect(folder, "truth.csv", 2, "kind")
    _truth_csv(folder, ["ava,lives_in,Oslo,episodic,10,,5,"])
    _expect(folder, "truth.csv", 2, "relevant_until")
    _truth_csv(folder, ["ava,lives_in,Oslo,explicit,10,,,typo"])
    _expect(folder, "truth.csv", 2, "noise")
    _truth_csv(folder, ["ava,,Oslo,explicit,10,,,"])
    _expect(folder, "truth.csv", 2, "predicate")
    _truth_csv(folder, ["ava,lives_in,Oslo,explicit,10,"], header="subject,predicate,object,kind,valid_from,relevant_until")
    _expect(folder, "truth.csv", 1, "valid_to")
    _truth_csv(folder, ["ava,lives_in,Oslo,explicit,10,,,", "ava,lives_in,Oslo,explicit,10,,"])
    msg = _expect(folder, "truth.csv", 3, None)
    assert "expected 8 fields" in msg


def test_truth_quoted_fields_and_optional_noise(folder):
    _truth_csv(folder, ['ava,has_pet,"a dog, named ""Rex""",explicit,-5,10,,'])
    ds = logs.load(folder)
    assert ds.truth["object"].iloc[0] == 'a dog, named "Rex"'
    assert ds.truth["valid_from"].iloc[0] == -5 and pd.isna(ds.truth["noise"].iloc[0])


def test_generalizations_errors(folder):
    (folder / "generalizations.csv").write_text(
        "gen_id,subject,predicate,object,note,support_predicate,support_object\n"
        "g1,ava,is_a,coder,,enjoys,\n")
    _expect(folder, "generalizations.csv", 2, "support_object")
    (folder / "generalizations.csv").write_text(
        "gen_id,subject,predicate,object,note,support_predicate,support_object\n"
        "g1,ava,is_a,coder,,enjoys,vim\n"
        "g1,ava,is_a,cook,,enjoys,cooking\n")
    _expect(folder, "generalizations.csv", 3, "gen_id")


def test_scenario_errors(folder):
    (folder / "scenario.toml").write_text("start = 0\nend = [\n")
    with pytest.raises(InputError, match="scenario.toml.*invalid TOML"):
        logs.load(folder)
    (folder / "scenario.toml").write_text("start = 10\nend = 5\n")
    with pytest.raises(InputError, match="scenario.toml.*'end'"):
        logs.load(folder)
    (folder / "scenario.toml").write_text('start = "2024-01-01"\nend = 5\n')
    with pytest.raises(InputError, match="scenario.toml.*'start'"):
        logs.load(folder)


def test_missing_folder_or_log(tmp_path):
    with pytest.raises(InputError, match="no such dataset folder"):
        logs.load(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no log.jsonl"):
        logs.load(tmp_path / "empty")


def test_a_failed_load_leaves_the_folder_untouched(folder):
    before = {n: (folder / n).read_bytes() for n in logs.DATASET_FILES}
    with open(folder / "log.jsonl", "ab") as fh:
        fh.write(b'{"broken": \n')
    with pytest.raises(InputError):
        logs.load(folder)
    assert {n: (folder / n).read_bytes() for n in logs.DATASET_FILES if n != "log.jsonl"} == {
        n: b for n, b in before.items() if n != "log.jsonl"}


def test_save_rejects_events_without_message(tiny, tmp_path):
    ev = tiny.events.copy()
    ev.loc[0, "message_id"] = "no-such-message"
    bad = logs.make_dataset(tiny.messages, ev, tiny.truth, tiny.generalizations, tiny.scenario)
    with pytest.raises(InputError, match="not in messages"):
        logs.save(bad, tmp_path / "x")
    assert not (tmp_path / "x").exists()

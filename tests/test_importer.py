"""The importer of real temporal facts (subject predicate object start end TSV)."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pandas as pd
import pytest

from factmem.cli.main import main
from factmem.data import logs
from factmem.data.importer import import_triples, parse_bounds
from factmem.errors import InputError

TSV = """subject\tpredicate\tobject\tstart\tend
Q1\tmemberOf\tFC Porto\t1987\t1990
Q1\tmemberOf\tPortugal\t1988-05-03\t1994-##-##
Q2\tspouse\tQ3\t1952-##-##\tNone
Q2\tposition\tmayor\t1960-02-##\t
Q4\taward\tPrize X\t1999-01-01\t####-##-##
Q5\tposition\tclerk\t2001\t1999
Q5\tposition\tking\t19x1\t2000
Q5\tposition\tjudge\t2001-02-30\t2003

Q6\tbad\trow
Q7\tposition\tclerk\tNone\tNone
Q8\tposition\tsenator\t####-##-##\t1970
Q9\tposition\tpharaoh\t-0500\t-0450
Q1\tmemberOf\tFC Porto\t1987\t1990
Q10\tposition\tclerk\t1990-##-05\t1991
"""


def ts(*args) -> int:
    return int(datetime(*args, tzinfo=UTC).timestamp())


@pytest.fixture
def tsv(tmp_path):
    path = tmp_path / "facts.tsv"
    path.write_text(TSV, encoding="utf-8")
    return path


def test_parse_bounds_every_format():
    b = parse_bounds(["1987", "1987-05-03", "1952-##-##", "1952-05-##", "None", "", "####-##-##", "1952-##-05",
                      "2001-02-29", "2000-02-29", "1987-13-01", "19x1", "-0500", "  1990  "])
    assert b["status"].tolist() == ["ok", "ok", "ok", "ok", "unknown", "unknown", "unknown", "invalid",
                                    "invalid", "ok", "invalid", "invalid", "out_of_range", "ok"]
    assert (b["lo"][0], b["hi"][0]) == (ts(1987, 1, 1), ts(1988, 1, 1))
    assert (b["lo"][1], b["hi"][1]) == (ts(1987, 5, 3), ts(1987, 5, 4))
    assert (b["lo"][2], b["hi"][2]) == (ts(1952, 1, 1), ts(1953, 1, 1))
    assert (b["lo"][3], b["hi"][3]) == (ts(1952, 5, 1), ts(1952, 6, 1))
    assert (b["lo"][9], b["hi"][9]) == (ts(2000, 2, 29), ts(2000, 3, 1))
    # 500 BC lies outside the supported range (years 0001-9999 as Unix seconds): not a time factmem keeps
    # (year 9999 starts in range, but its end, 10000-01-01, is past the last supported second)
    assert parse_bounds(["0001", "9998", "0000", "9999"])["status"].tolist() == ["ok", "ok", "out_of_range",
                                                                                "ends_past_range"]
    assert b["lo"][13] == ts(1990, 1, 1)


def test_import_truth_and_report(tsv):
    ds, report = import_triples(tsv)
    t = ds.truth.set_index(["subject", "predicate", "object"])
    assert t.loc[("Q1", "memberOf", "FC Porto"), "valid_from"] == ts(1987, 1, 1)
    assert t.loc[("Q1", "memberOf", "FC Porto"), "valid_to"] == ts(1991, 1, 1)  # the end year is included
    assert t.loc[("Q1", "memberOf", "Portugal"), "valid_from"] == ts(1988, 5, 3)
    assert t.loc[("Q1", "memberOf", "Portugal"), "valid_to"] == ts(1995, 1, 1)
    assert t.loc[("Q2", "spouse", "Q3"), "valid_from"] == ts(1952, 1, 1)
    assert pd.isna(t.loc[("Q2", "spouse", "Q3"), "valid_to"])  # None: open
    assert t.loc[("Q2", "position", "mayor"), "valid_from"] == ts(1960, 2, 1)  # empty end: open
    assert pd.isna(t.loc[("Q4", "award", "Prize X"), "valid_to"])  # ####-##-##: open
    assert ("Q9", "position", "pharaoh") not in t.index  # 500 BC: outside the supported range, reported
    assert len(ds.truth) == 5 and (ds.truth["kind"] == "explicit").all() and ds.truth["noise"].isna().all()

    assert report.rows == 14 and report.imported == 5 and report.skipped_total == 9
    assert report.skipped == {
        "start after end": 1,
        "unparseable start": 3,  # 19x1, 2001-02-30, 1990-##-05
        "expected 5 tab-separated fields (subject predicate object start end)": 1,
        "no known bound": 1,
        "unknown start": 1,
        "duplicate of an earlier row": 1,
        "start outside the supported years 0001-9999": 1,
    }
    assert [e[0] for e in report.examples] == [7, 8, 9, 11, 12]  # first examples, with file line numbers
    assert report.examples[0][1] == "start after end" and "clerk" in report.examples[0][2]
    text = str(report)
    assert "9 skipped" in text and "line 7" in text
    assert ds.scenario["import"]["skipped"] == report.skipped


def test_mentions_and_messages(tsv, tmp_path):
    ds, report = import_triples(tsv)
    # one mention at each fact's start, nothing else
    assert len(ds.events) == 5 == report.mentions
    starts = ds.truth.set_index(["subject", "predicate", "object"])["valid_from"]
    ev = ds.events.set_index(["subject", "predicate", "object"])["ts"]
    assert (ev.sort_index() == starts.sort_index()).all()
    assert len(logs.unexplained_mentions(ds)) == 0
    assert ds.start == ds.truth["valid_from"].min()
    assert ds.end >= ds.events["ts"].max()
    # two facts of one subject at one instant share a message
    two = tmp_path / "two.tsv"
    two.write_text("a\tp\tx\t2000\t2001\na\tq\ty\t2000\t2002\nb\tp\tx\t2000\t2001\n")
    d2, _ = import_triples(two)
    assert d2.messages["message_id"].nunique() == 2 and len(d2.events) == 3
    assert d2.messages["text"].tolist()[0] == "a p x. a q y."


def test_repeated_mentions_at_a_rate(tmp_path):
    rows = "\n".join(f"s{i}\tp\to{i}\t1900\t1950" for i in range(200))
    path = tmp_path / "many.tsv"
    path.write_text(rows + "\n")
    ds, report = import_triples(path, mention_rate=2.0, seed=3)
    years = (ds.truth["valid_to"] - ds.truth["valid_from"]).astype("float64").to_numpy() / (365.25 * 86400)
    expected = 200 + 2.0 * years.sum()
    assert report.mentions == len(ds.events)
    assert len(ds.events) == pytest.approx(expected, rel=4 / np.sqrt(expected))
    assert len(logs.unexplained_mentions(ds)) == 0  # every repeat falls inside its interval
    again, _ = import_triples(path, mention_rate=2.0, seed=3)
    other, _ = import_triples(path, mention_rate=2.0, seed=4)
    assert again.sha256 == ds.sha256 != other.sha256


def test_cardinality_is_inferred(tsv):
    ds, _ = import_triples(tsv)
    preds = ds.scenario["predicates"]
    assert preds["memberOf"]["cardinality"] == "multi" and preds["memberOf"]["overlapping"] == 1
    assert preds["position"]["cardinality"] == "single"
    assert ds.multi_valued_predicates == frozenset({"memberOf"})


def test_open_start_option(tsv):
    ds, report = import_triples(tsv, open_start="log_start")
    assert "unknown start" not in report.skipped
    senator = ds.truth[ds.truth["object"] == "senator"]
    assert len(senator) == 1 and senator["valid_from"].iloc[0] == ds.start


def test_round_trip_and_cli(tsv, tmp_path, capsys):
    ds, _ = import_triples(tsv, mention_rate=0.5, seed=1)
    logs.save(ds, tmp_path / "a")
    assert logs.load(tmp_path / "a").equals(ds)
    assert main(["import-triples", str(tsv), "--out", str(tmp_path / "b"), "--rate", "0.5", "--seed", "1"]) == 0
    err = capsys.readouterr().err
    assert "9 skipped" in err and "line 7" in err
    for name in logs.DATASET_FILES:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_errors(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        import_triples(tmp_path / "missing.tsv")
    bad = tmp_path / "bad.tsv"
    bad.write_bytes(b"a\tb\tc\t1990\t1991\n\xff\xfe\n")
    with pytest.raises(InputError, match=r"bad.tsv:2: not UTF-8"):
        import_triples(bad)
    none = tmp_path / "none.tsv"
    none.write_text("a\tb\tc\tNone\tNone\n")
    with pytest.raises(InputError, match="no fact could be imported"):
        import_triples(none)
    with pytest.raises(ValueError, match="kind"):
        import_triples(none, kind="derived")
    with pytest.raises(ValueError, match="mention_rate"):
        import_triples(none, mention_rate=-1)
    with pytest.raises(ValueError, match="open_start"):
        import_triples(none, open_start="guess")
    assert main(["import-triples", str(tmp_path / "missing.tsv"), "--out", str(tmp_path / "o")]) == 2


def _with_far_future_row(tmp_path, rows: int = 150):
    lines = [f"E{i}\tmember_of\tclub{i % 7}\t{1900 + i % 100}\t" + ("" if i % 3 else f"{1901 + i % 100}")
             for i in range(rows)]
    lines.insert(40, "E999\tposition\tking\t2844\t")  # line 41 of the file: a typo centuries ahead
    path = tmp_path / "future.tsv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_far_future_row_is_reported_by_line_and_does_not_set_the_logs_end(tmp_path):
    path = _with_far_future_row(tmp_path)
    ds, report = import_triples(path, mention_rate=2.0, seed=1)
    assert [ln for ln, _, _ in report.outliers] == [41]
    assert "2844" in report.outliers[0][1] and "line 41" in str(report)
    assert "E999" not in set(ds.truth["subject"])
    assert ds.end == ts(2001, 1, 1)  # the last observed time: the latest bound of the other rows
    assert ds.events["ts"].max() < ds.end
    # about 2 mentions a year for at most a century per fact: nothing near 2 x 844 years per open fact
    assert report.mentions < 150 * (1 + 2 * 101 * 1.3)
    assert ds.scenario["import"]["outlier_lines"] == [41]


def test_an_import_beyond_max_mentions_is_refused_naming_the_rows(tmp_path):
    path = _with_far_future_row(tmp_path)
    with pytest.raises(InputError, match=r"more than max_mentions = 1,000.*line \d+ \(\d+ mentions"):
        import_triples(path, mention_rate=2.0, seed=1, max_mentions=1000)
    # a given end: mentions stop there, later starts are skipped and reported
    ds, report = import_triples(path, mention_rate=2.0, seed=1, end=ts(1950, 1, 1))
    assert ds.end == ts(1950, 1, 1) and ds.events["ts"].max() <= ds.end
    assert report.skipped["starts after the given end"] > 0
    out = tmp_path / "out"
    assert main(["import-triples", str(path), "--out", str(out), "--rate", "2", "--max-mentions", "1000"]) == 2
    assert not out.exists()
    assert main(["import-triples", str(path), "--out", str(out), "--rate", "2", "--end", "1949", "-q"]) == 0
    assert logs.load(out).end == ts(1950, 1, 1)

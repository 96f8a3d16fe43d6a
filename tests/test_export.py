"""Params documents (TOML/JSON round trips, validation of every bad-file case), the Rust module
(compiled and tested with rustc), the params diff, and the `export` / `params` commands."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from factmem.cli.main import main
from factmem.core.codes import KINDS
from factmem.core.params import MemoryParams
from factmem.errors import ExportError, FactmemError, ParamsFileError
from factmem.export import (
    PARAMS_SCHEMA,
    ParamsDocument,
    diff_metrics,
    diff_params,
    export_params,
    load_params_file,
    params_fingerprint,
    read_params_document,
    render_diff,
    write_params_file,
)
from factmem.export.rust import render_rust, rust_f64, rust_str

# -- strategies ---------------------------------------------------------------------------------------------

nonneg = st.one_of(st.floats(min_value=0.0, max_value=1e300, allow_nan=False, allow_infinity=False),
                   st.sampled_from([0.0, -0.0, 5e-324, 2.2250738585072014e-308, 1e16, 0.1, 1.0, 123456789.0]))
unit = st.floats(min_value=0.0, max_value=1.0, exclude_min=True, allow_nan=False)
predicate = st.text(min_size=1, max_size=10)


@st.composite
def param_sets(draw, int_max=2**63 - 1):
    cap = draw(unit)
    below_cap = st.floats(min_value=0.0, max_value=cap, exclude_min=True, allow_nan=False)
    return MemoryParams(
        decay_rate={k: draw(nonneg) for k in KINDS},
        initial_confidence={k: draw(below_cap) for k in KINDS},
        reinforce_gain=draw(unit),
        confidence_cap=cap,
        archive_threshold=draw(st.one_of(st.just(-0.0), st.floats(0.0, cap, exclude_max=True))),
        retrieval_threshold=draw(st.floats(0.0, cap)),
        prune_min_reinforcements=draw(st.integers(1, int_max)),
        min_cluster=draw(st.integers(1, int_max)),
        max_facts=draw(st.integers(1, int_max)),
        temperature=draw(nonneg),
        reinforce_base=draw(st.sampled_from(["stored", "effective"])),
        multi_valued_predicates=draw(st.sets(predicate, max_size=4)),
        link_scope=draw(st.sampled_from(["cluster", "support"])),
        decay_rate_by_predicate=draw(st.dictionaries(predicate, nonneg, max_size=3)),
    )


metric_value = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**6, 10**6).map(float))
provenances = st.fixed_dictionaries({}, optional={
    "run_id": st.text(max_size=20),
    "dataset_sha256": st.text("0123456789abcdef", min_size=64, max_size=64),
    "objective": st.sampled_from(["log_loss", "brier", "recall"]),
    "git_commit": st.text("0123456789abcdef", min_size=7, max_size=40),
    "factmem_version": st.just("0.1.0"),
    "created_at": st.datetimes(min_value=__import__("datetime").datetime(1970, 1, 2)).map(
        lambda d: d.strftime("%Y-%m-%dT%H:%M:%S") + "Z"),
    "notes": st.text(max_size=40),
    "metrics": st.dictionaries(st.text(min_size=1, max_size=12), metric_value, max_size=4),
    "default_metrics": st.dictionaries(st.text(min_size=1, max_size=12), metric_value, max_size=4),
})


def bits(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def exact(params: MemoryParams) -> dict:
    """Flat parameters with floats as their bit patterns: equality here is bit-for-bit."""
    return {k: (("f", bits(v)) if isinstance(v, float) else v) for k, v in params.to_flat().items()}


def exact_prov(prov: dict) -> dict:
    # a NaN's sign and payload carry no meaning and TOML/JSON keep neither: every NaN is "nan"
    return {k: ({m: (bits(x) if x == x else "nan") for m, x in v.items()} if isinstance(v, dict) else v)
            for k, v in prov.items()}


# -- round trips ---------------------------------------------------------------------------------------------


@settings(max_examples=60)
@given(params=param_sets(), prov=provenances, fmt=st.sampled_from(["toml", "json"]))
def test_params_file_round_trips_exactly(tmp_path_factory, params, prov, fmt):
    path = tmp_path_factory.mktemp("rt") / f"params.{fmt}"
    write_params_file(path, params, prov, stamp=False)
    got, got_prov = load_params_file(path)
    assert got == params
    assert exact(got) == exact(params)
    assert exact_prov(got_prov) == exact_prov({k: v for k, v in prov.items()})
    # and the text itself is a fixed point: loading and writing again gives the same bytes
    again = path.with_name(f"again.{fmt}")
    write_params_file(again, got, got_prov, stamp=False)
    assert again.read_bytes() == path.read_bytes()


def test_stamp_fills_version_and_time_and_keeps_given_ones(tmp_path):
    p = write_params_file(tmp_path / "p.toml", MemoryParams(), {"run_id": "r"})
    _, prov = load_params_file(p)
    assert prov["factmem_version"] and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", prov["created_at"])
    import datetime as dt

    p2 = write_params_file(tmp_path / "p2.json", MemoryParams(),
                           {"created_at": dt.datetime(2026, 5, 1, 12, tzinfo=dt.UTC)})
    assert load_params_file(p2)[1]["created_at"] == "2026-05-01T12:00:00Z"
    # same inputs, same bytes
    a = write_params_file(tmp_path / "a.toml", MemoryParams(), {"created_at": "2026-05-01T12:00:00Z"})
    b = write_params_file(tmp_path / "b.toml", MemoryParams(), {"created_at": "2026-05-01T12:00:00Z"})
    assert a.read_bytes() == b.read_bytes()


def test_json_nonfinite_metrics_are_strict_json(tmp_path):
    p = write_params_file(tmp_path / "p.json", MemoryParams(),
                          {"metrics": {"auc": math.nan, "log_loss": math.inf, "x": -math.inf}}, stamp=False)
    text = p.read_text()
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
    m = load_params_file(p)[1]["metrics"]
    assert math.isnan(m["auc"]) and m["log_loss"] == math.inf and m["x"] == -math.inf


def test_legacy_bare_file_loads_with_defaults_filled(tmp_path):
    legacy = tmp_path / "old.toml"
    MemoryParams(reinforce_gain=0.25).save(legacy)
    params, prov = load_params_file(legacy)
    assert params == MemoryParams(reinforce_gain=0.25) and prov == {}
    partial = tmp_path / "partial.toml"
    partial.write_text("reinforce_gain = 0.2\n[decay_rate]\nepisodic = 0.5\n")
    doc = read_params_document(partial)
    assert doc.legacy and doc.params == MemoryParams(reinforce_gain=0.2, decay_rate={"episodic": 0.5})
    # exporting a legacy file gives a versioned document that lists everything
    out = export_params(partial, tmp_path / "new.json")
    data = json.loads(out.read_text())
    assert data["schema"] == PARAMS_SCHEMA and data["decay_rate"]["explicit"] == 0.05 and "provenance" not in data


# -- bad files ------------------------------------------------------------------------------------------------

GOOD = MemoryParams().to_dict()


def doc_with(**changes) -> dict:
    d = {"schema": PARAMS_SCHEMA, **json.loads(json.dumps(GOOD))}
    for k, v in changes.items():
        if "." in k:
            head, sub = k.split(".")
            d[head][sub] = v
        else:
            d[k] = v
    return d


BAD_DOCS = [
    (doc_with(schema="factmem.params/2"), "schema", "unsupported schema version"),
    (doc_with(schema="something/1"), "schema", "not a factmem params document"),
    (doc_with(schema=1), "schema", "expected the string"),
    (doc_with(decay_typo=0.3), "decay_typo", "unknown key"),
    (doc_with(**{"decay_rate.semantic": 0.1}), "decay_rate.semantic", "unknown kind"),
    (doc_with(provenance={"run": "x"}), "provenance.run", "unknown key"),
    (doc_with(provenance={"metrics": {"auc": "high"}}), "provenance.metrics.auc", "expected a number"),
    (doc_with(provenance={"metrics": {"auc": True}}), "provenance.metrics.auc", "expected a number"),
    (doc_with(provenance={"dataset_sha256": "abc"}), "provenance.dataset_sha256", "64 hexadecimal"),
    (doc_with(provenance={"created_at": "yesterday"}), "provenance.created_at", "ISO 8601"),
    (doc_with(provenance={"created_at": "2026-01-01T00:00:00+02:00"}), "provenance.created_at", "UTC"),
    (doc_with(provenance={"run_id": 7}), "provenance.run_id", "expected a string"),
    (doc_with(provenance="x"), "provenance", "expected a table"),
    (doc_with(reinforce_gain="0.3"), "reinforce_gain", "expected a number"),
    (doc_with(**{"decay_rate.episodic": "fast"}), "decay_rate.episodic", "expected a number"),
    (doc_with(decay_rate=0.3), "decay_rate", "expected a table"),
    (doc_with(prune_min_reinforcements=True), "prune_min_reinforcements", "expected an integer"),
    (doc_with(min_cluster=2.0), "min_cluster", "expected an integer"),
    (doc_with(max_facts=2**70), "max_facts", "64-bit"),
    (doc_with(reinforce_base=1), "reinforce_base", "expected a string"),
    (doc_with(multi_valued_predicates="a"), "multi_valued_predicates", "expected an array"),
    (doc_with(multi_valued_predicates=["a", 3]), "multi_valued_predicates", "non-empty string"),
    (doc_with(multi_valued_predicates=["a", "a"]), "multi_valued_predicates", "listed twice"),
    (doc_with(reinforce_gain=1.5), "reinforce_gain", "(0, 1]"),
    (doc_with(**{"decay_rate.episodic": -0.1}), "decay_rate.episodic", ">= 0"),
    (doc_with(archive_threshold=0.99), "archive_threshold", "confidence_cap"),
    (doc_with(**{"initial_confidence.derived": 0.0}), "initial_confidence.derived", "must be in"),
    (doc_with(reinforce_base="decayed"), "reinforce_base", "stored, effective"),
    (doc_with(min_cluster=0), "min_cluster", ">= 1"),
    ({"reinforce_gain": 0.3, "provenance": {"run_id": "x"}}, "provenance", "needs schema"),
    ([1, 2], "top level", "expected a table"),
]


def _drop(d: dict, key: str) -> dict:
    d = json.loads(json.dumps(d))
    head, _, sub = key.partition(".")
    if sub:
        del d[head][sub]
    else:
        del d[head]
    return d


BAD_DOCS += [
    (doc_with(decay_rate_by_predicate={"works_on": -0.01}), "decay_rate_by_predicate.works_on", ">= 0"),
    (doc_with(decay_rate_by_predicate={"works_on": "slow"}), "decay_rate_by_predicate.works_on", "expected a number"),
    (doc_with(decay_rate_by_predicate=0.01), "decay_rate_by_predicate", "expected a table"),
    (_drop(doc_with(), "temperature"), "missing key temperature", "versioned document"),
    (_drop(doc_with(), "decay_rate.derived"), "missing key decay_rate.derived", "versioned document"),
]


def _toml_expressible(data) -> bool:
    """TOML has no top-level array and no integer beyond 64 bits: those cases are JSON-only."""
    return isinstance(data, dict) and not any(isinstance(v, int) and abs(v) >= 2**63 for v in data.values())


BAD_CASES = [(fmt, *case) for case in BAD_DOCS for fmt in ("json", "toml") if fmt == "json" or _toml_expressible(case[0])]


@pytest.mark.parametrize("fmt,data,key,why", BAD_CASES, ids=[f"{c[0]}-{c[2]}" for c in BAD_CASES])
def test_bad_documents_raise_naming_key_and_value(tmp_path, fmt, data, key, why):
    from factmem.core.params import dumps_toml

    path = tmp_path / f"bad.{fmt}"
    path.write_text(json.dumps(data) if fmt == "json" else dumps_toml(data))
    with pytest.raises(ParamsFileError) as info:
        load_params_file(path)
    msg = str(info.value)
    assert str(path) in msg and key in msg and why in msg, msg
    assert isinstance(info.value, ValueError) and isinstance(info.value, FactmemError)
    # the CLI exits 2 with the same one-line message and writes nothing
    out = tmp_path / "out.rs"
    assert main(["export", str(path), "--out", str(out)]) == 2
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_bad_syntax_and_files(tmp_path):
    cases = {
        "dup.json": ('{"schema": "factmem.params/1", "schema": "factmem.params/1"}', "duplicate key 'schema'"),
        "broken.json": ('{"schema": ', "invalid JSON"),
        "broken.toml": ("reinforce_gain = = 1", "invalid TOML"),
        "nan.json": (json.dumps(doc_with()).replace('"temperature": 0.0', '"temperature": NaN'), "must be finite"),
        "latin1.toml": (None, "not UTF-8"),
        "params.yaml": ("a: 1", "must end in .toml or .json"),
    }
    for name, (text, why) in cases.items():
        p = tmp_path / name
        if text is None:
            p.write_bytes(b"notes = '\xe9'\n")
        else:
            p.write_text(text)
        with pytest.raises(ParamsFileError, match=re.escape(why)):
            load_params_file(p)
    with pytest.raises(ParamsFileError, match="no such params file"):
        load_params_file(tmp_path / "missing.toml")


def test_write_rejects_bad_provenance_and_writes_nothing(tmp_path):
    for prov, key in [({"run": 1}, "provenance.run"), ({"metrics": {"x": "y"}}, "provenance.metrics.x"),
                      ({"created_at": "2026-01-01T00:00:00"}, "provenance.created_at")]:
        with pytest.raises(ParamsFileError, match=re.escape(key)):
            write_params_file(tmp_path / "p.toml", MemoryParams(), prov)
    with pytest.raises(ExportError, match="surrogate"):
        write_params_file(tmp_path / "p.toml", MemoryParams(multi_valued_predicates={"a\ud800"}))
    with pytest.raises(ParamsFileError, match=r"\.toml or \.json"):
        write_params_file(tmp_path / "p.txt", MemoryParams())
    with pytest.raises(ExportError, match="does not exist"):
        write_params_file(tmp_path / "nope" / "p.toml", MemoryParams())
    assert list(tmp_path.iterdir()) == []


# -- Rust ----------------------------------------------------------------------------------------------------


def _rustc() -> str | None:
    found = shutil.which("rustc")
    if found:
        return found
    fallback = Path("/root/.cargo/bin/rustc")
    return str(fallback) if fallback.exists() and os.access(fallback, os.X_OK) else None


RUSTC = _rustc()
needs_rustc = pytest.mark.skipif(RUSTC is None, reason="rustc not found on PATH or at /root/.cargo/bin/rustc")


def run_rust_tests(src: Path, tmp_path: Path) -> str:
    exe = tmp_path / (src.stem + "_bin")
    build = subprocess.run([RUSTC, "--edition", "2021", "--test", str(src), "-o", str(exe)],
                           capture_output=True, text=True, timeout=180)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    return run.returncode, run.stdout + run.stderr


def test_rust_literals():
    assert rust_f64(1.0) == "1.0" and rust_f64(0.3) == "0.3" and rust_f64(-0.0) == "-0.0"
    assert rust_f64(1e16) == "1.0e16" and rust_f64(5e-324) == "5.0e-324" and rust_f64(1.5e300) == "1.5e300"
    assert rust_f64(2.5e-05) == "2.5e-5"
    with pytest.raises(ValueError):
        rust_f64(math.inf)
    assert rust_str('a"b\\c\n\r\t\x00\x7f é') == '"a\\"b\\\\c\\n\\r\\t\\u{0}\\u{7f} é"'


EDGE_PARAMS = [
    MemoryParams(),
    MemoryParams(decay_rate={"explicit": 1e16, "episodic": 5e-324, "user_preference": -0.0, "derived": 1.7976931348623157e308},
                 initial_confidence={"explicit": 5e-324, "derived": 1.0}, confidence_cap=1.0, reinforce_gain=1.0,
                 archive_threshold=-0.0, retrieval_threshold=1.0, temperature=0.7,
                 prune_min_reinforcements=2**32 - 1, min_cluster=1, max_facts=7, reinforce_base="effective",
                 multi_valued_predicates={'quote"back\\slash', "new\nline\r\tcr", "nul\x00del\x7f", "café ☕", "*/ //"},
                 decay_rate_by_predicate={"works_on": 0.0103, "born_in": 0.0, "neg_zero": -0.0, "tiny": 5e-324,
                                          'q"{x}\\': 1.7976931348623157e308, "nul\x00 ☕\n": 1e16, "_": 0.3}),
]


@needs_rustc
def test_rust_module_compiles_and_its_tests_pass_standalone(tmp_path):
    """The CLI's default output compiles alone with rustc --test and its bit-exact tests pass."""
    rng = np.random.default_rng(6)
    docs = [ParamsDocument(p, {"run_id": 'r"1\n', "metrics": {"log_loss": 0.41, "a|b": math.nan},
                               "default_metrics": {"log_loss": 0.45}, "created_at": "2026-01-01T00:00:00Z",
                               "notes": "line1\r\nline2 */"}) for p in EDGE_PARAMS]
    for _ in range(3):  # seeded random parameter sets beside the hand-picked edges
        cap = float(rng.uniform(0.05, 1.0))
        docs.append(ParamsDocument(MemoryParams(
            decay_rate={k: float(rng.exponential(0.1)) for k in KINDS},
            initial_confidence={k: float(rng.uniform(0.001, cap)) for k in KINDS},
            reinforce_gain=float(rng.uniform(0.001, 1.0)), confidence_cap=cap,
            archive_threshold=float(rng.uniform(0, cap * 0.99)), retrieval_threshold=float(rng.uniform(0, cap)),
            prune_min_reinforcements=int(rng.integers(1, 10)),
            decay_rate_by_predicate={f"p{i}": float(rng.exponential(0.05)) for i in range(int(rng.integers(0, 4)))})))
    src = tmp_path / "params_0.toml"
    write_params_file(src, docs[0].params, docs[0].provenance, stamp=False)
    rs = tmp_path / "memory_params.rs"
    assert main(["export", str(src), "--format", "rust", "--out", str(rs), "-q"]) == 0
    code, out = run_rust_tests(rs, tmp_path)
    assert code == 0 and "test result: ok. 4 passed" in out, out
    # the others in one crate: each module under its own name, plus a --no-enum module using a crate's own enum
    mods = []
    for i, d in enumerate(docs):
        f = tmp_path / f"m{i}.rs"
        f.write_text(render_rust(d))
        mods.append(f'#[path = "{f}"] mod m{i};')
    noenum = tmp_path / "noenum.rs"
    noenum.write_text(render_rust(docs[1], with_enum=False))
    crate = tmp_path / "crate_root.rs"
    crate.write_text("\n".join(mods) + f"""
mod fact {{
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum FactKind {{ Explicit, UserPreference, Episodic, Derived }}
    #[path = "{noenum}"] pub mod params;
}}
""")
    code, out = run_rust_tests(crate, tmp_path)
    assert code == 0 and f"test result: ok. {4 * (len(docs) + 1)} passed" in out, out


@needs_rustc
def test_rust_module_is_included_into_a_binary_crate_without_warnings(tmp_path):
    """`include!` works (no inner doc comments or attributes) and a binary crate using a few items
    compiles with -D warnings: standalone (with the enum) and inside a module of a crate with its own
    enum (--no-enum); the program's context, schedule and kinds are factmem's."""
    p = MemoryParams(decay_rate_by_predicate={"works_on": 0.01}, reinforce_base="effective", retrieval_threshold=0.3)
    (tmp_path / "with_enum.rs").write_text(render_rust(p))
    (tmp_path / "no_enum.rs").write_text(render_rust(p, with_enum=False, enum_path="crate::FactKind"))
    assert "//!" not in (tmp_path / "with_enum.rs").read_text()
    main_a = tmp_path / "a.rs"
    main_a.write_text('''include!("with_enum.rs");
fn main() {
    let kind: FactKind = "episodic".parse().unwrap();
    let facts = vec![
        ContextFact { id: 1, predicate: "likes".into(), object: "tea".into(), confidence: 0.5, decay_rate: 0.0,
                      first_seen: 0, last_reinforced: 0 },
        ContextFact { id: 2, predicate: "likes".into(), object: "go".into(), confidence: 0.5, decay_rate: 0.0,
                      first_seen: 0, last_reinforced: 10 },
        ContextFact { id: 3, predicate: "uses".into(), object: "vim".into(), confidence: 0.29, decay_rate: 0.0,
                      first_seen: 0, last_reinforced: 20 },
    ];
    let ids: Vec<i64> = rank_context(facts, 5, 86_400).iter().map(|(f, _)| f.id).collect();
    println!("{} {:?} {} {} {}", kind.as_str(), ids, next_consolidation(1_704_067_201), MAX_FACTS + 1,
             PARAMS_FINGERPRINT);
}
''')
    main_b = tmp_path / "b.rs"
    main_b.write_text('''#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FactKind { Explicit, UserPreference, Episodic, Derived }
mod memory_params { include!("no_enum.rs"); }
fn main() {
    let now: i64 = 86_400;
    let c = memory_params::reinforce(FactKind::Episodic.initial_confidence(), FactKind::Episodic.decay_rate_for("works_on"), 0, now);
    println!("{} {}", c > 0.0, memory_params::CONSOLIDATE_EVERY_SECONDS);
}
''')
    for src in (main_a, main_b):
        exe = tmp_path / (src.stem + "_bin")
        build = subprocess.run([RUSTC, "--edition", "2021", "-D", "warnings", str(src), "-o", str(exe)],
                               capture_output=True, text=True, timeout=180, cwd=tmp_path)
        assert build.returncode == 0, build.stderr
        assert "warning" not in build.stderr, build.stderr
        run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stderr
        if src is main_a:
            assert run.stdout.split() == ["episodic", "[2,", "1]", str(1_704_067_200 + 86_400), "3",
                                          params_fingerprint(p)]
        else:
            assert run.stdout.split() == ["true", "86400"]


@needs_rustc
def test_rust_bit_assertions_can_fail(tmp_path):
    """Flip one literal by one ulp: the generated test must catch it."""
    text = render_rust(MemoryParams())
    assert "FactKind::Episodic => 0.3," in text
    bad = tmp_path / "bad.rs"
    bad.write_text(text.replace("FactKind::Episodic => 0.3,", "FactKind::Episodic => 0.30000000000000004,"))
    code, out = run_rust_tests(bad, tmp_path)
    assert code != 0 and "decay_rate(Episodic)" in out


def test_rust_rejects_what_rust_cannot_hold(tmp_path):
    with pytest.raises(ExportError, match="max_facts = 9223372036854775808 does not fit the Rust type i64"):
        render_rust(MemoryParams(max_facts=2**63))
    with pytest.raises(ValueError, match="enum_path"):
        render_rust(MemoryParams(), with_enum=False, enum_path="crate::fact::FactKind; fn x()")
    text = render_rust(MemoryParams(), with_enum=False, enum_path="crate::fact::FactKind")
    assert "use crate::fact::FactKind;" in text and "pub enum FactKind" not in text
    assert render_rust(MemoryParams()) == render_rust(MemoryParams())  # deterministic
    # the doc comment cannot be broken out of by a provenance string
    doc = ParamsDocument(MemoryParams(), {"notes": "a\nfn evil() {}\r"})
    body = render_rust(doc)
    assert "\nfn evil" not in body and "\r" not in body


# -- diff ----------------------------------------------------------------------------------------------------


def test_diff_lists_changes_and_metrics(tmp_path):
    a = write_params_file(tmp_path / "a.toml", MemoryParams(), {
        "run_id": "base", "dataset_sha256": "a" * 64, "metrics": {"log_loss": 0.45}, "default_metrics": {"log_loss": 0.45}})
    b = write_params_file(tmp_path / "b.json", MemoryParams(
        decay_rate={"episodic": 0.25}, reinforce_gain=0.2, archive_threshold=0.0,
        multi_valued_predicates={"member_of"}, reinforce_base="effective", link_scope="support"), {
        "run_id": "tuned", "dataset_sha256": "a" * 64, "objective": "log_loss",
        "metrics": {"log_loss": 0.41, "recall": 0.9}, "default_metrics": {"log_loss": 0.45, "recall": 0.8}})
    d = diff_params(a, b).set_index("parameter")
    assert list(d.index) == ["decay_rate.episodic", "reinforce_gain", "archive_threshold", "reinforce_base",
                             "multi_valued_predicates", "link_scope"]
    assert d.loc["link_scope", "old"] == "cluster" and d.loc["link_scope", "new"] == "support"
    assert d.loc["decay_rate.episodic", "old"] == 0.3 and d.loc["decay_rate.episodic", "new"] == 0.25
    assert d.loc["decay_rate.episodic", "relative_change"] == pytest.approx(-1 / 6)
    assert d.loc["archive_threshold", "relative_change"] == -1.0
    assert d.loc["multi_valued_predicates", "note"] == "+member_of"
    assert math.isnan(d.loc["reinforce_base", "relative_change"])
    assert len(diff_params(a, b, all=True)) == len(MemoryParams.field_names())
    assert diff_params(a, a).empty
    m = diff_metrics(a, b)
    assert m.loc["log_loss", "a"] == 0.45 and m.loc["log_loss", "b"] == 0.41
    assert m.loc["log_loss", "b_minus_a"] == pytest.approx(-0.04)
    assert math.isnan(m.loc["recall", "a"]) and m.loc["recall", "b_defaults"] == 0.8
    text = render_diff(a, b)
    assert "6 of 19 changed" in text and "link_scope" in text and "-16.7%" in text and "objective: log_loss" in text
    assert "different datasets" not in text
    # zero to nonzero, and a sign flip on zero
    z = diff_params(MemoryParams(temperature=0.0), MemoryParams(temperature=0.5)).iloc[0]
    assert z["relative_change"] == math.inf
    assert list(diff_params(MemoryParams(archive_threshold=0.0), MemoryParams(archive_threshold=-0.0))["parameter"]) \
        == ["archive_threshold"]


def test_per_predicate_rates_in_documents_rust_and_diff(tmp_path, capsys):
    """The table is written only when it has entries (old documents and fingerprints unchanged), read
    back exactly, rendered as a match before the kind, and diffed per predicate."""
    plain = write_params_file(tmp_path / "plain.toml", MemoryParams(), stamp=False)
    assert "decay_rate_by_predicate" not in plain.read_text()
    assert params_fingerprint(MemoryParams()) == params_fingerprint(MemoryParams(decay_rate_by_predicate={}))
    fitted = MemoryParams(decay_rate_by_predicate={"works_on": 0.0103, "born_in": 0.0})
    for fmt in ("toml", "json"):
        path = write_params_file(tmp_path / f"fitted.{fmt}", fitted, stamp=False)
        assert load_params_file(path)[0] == fitted
    assert "[decay_rate_by_predicate]\nborn_in = 0.0\nworks_on = 0.0103\n" in (tmp_path / "fitted.toml").read_text()
    assert params_fingerprint(fitted) != params_fingerprint(MemoryParams())
    text = render_rust(fitted)
    match = text[text.index("pub fn decay_rate_for"):]
    assert match.index('"born_in" => 0.0,') < match.index('"works_on" => 0.0103,') < match.index("_ => self.decay_rate(),")
    assert 'pub const DECAY_RATE_BY_PREDICATE: &[(&str, f64)] = &[("born_in", 0.0), ("works_on", 0.0103)];' in text
    d = diff_params(MemoryParams(decay_rate_by_predicate={"born_in": 0.0, "lives_in": 0.01}), fitted).set_index("parameter")
    assert list(d.index) == ["decay_rate_by_predicate.lives_in", "decay_rate_by_predicate.works_on"]
    assert d.loc["decay_rate_by_predicate.works_on", "note"].startswith("added")
    assert d.loc["decay_rate_by_predicate.lives_in", "note"].startswith("removed")
    assert main(["params", "diff", str(plain), str(tmp_path / "fitted.toml")]) == 0
    out = capsys.readouterr().out
    n = len(MemoryParams.field_names()) + 2  # the fixed parameters and the two predicates with a rate
    assert f"2 of {n} changed" in out and "decay_rate_by_predicate.works_on" in out and "added" in out


def test_params_diff_cli(tmp_path, capsys):
    a = write_params_file(tmp_path / "a.toml", MemoryParams(), {"dataset_sha256": "a" * 64, "metrics": {"auc": 0.7}})
    b = write_params_file(tmp_path / "b.toml", MemoryParams(reinforce_gain=0.4),
                          {"dataset_sha256": "b" * 64, "metrics": {"auc": 0.75}})
    csv = tmp_path / "diff.csv"
    assert main(["params", "diff", str(a), str(b), "--csv", str(csv)]) == 0
    out = capsys.readouterr().out
    assert "reinforce_gain" in out and "+33.3%" in out and "different datasets" in out and "0.75" in out
    assert csv.read_text().splitlines()[1].startswith("reinforce_gain,0.3,0.4")
    bad = tmp_path / "bad.toml"
    bad.write_text('schema = "factmem.params/1"\nreinforce_gain = "high"\n')
    assert main(["params", "diff", str(a), str(bad)]) == 2
    err = capsys.readouterr().err
    assert "reinforce_gain = 'high'" in err and str(bad) in err and len(err.strip().splitlines()) == 1
    assert main(["params", "show", str(a)]) == 0 and "valid factmem.params/1" in capsys.readouterr().out
    assert main(["params", "show", str(bad)]) == 2


def test_export_cli_formats_and_errors(tmp_path, capsys):
    src = write_params_file(tmp_path / "src.toml", MemoryParams(reinforce_gain=0.25), {"run_id": "r"}, stamp=False)
    for fmt, name in [("toml", "o.toml"), ("json", "o.json"), ("rust", "o.rs")]:
        assert main(["export", str(src), "--format", fmt, "--out", str(tmp_path / name), "-q"]) == 0
    assert load_params_file(tmp_path / "o.json") == (MemoryParams(reinforce_gain=0.25), {"run_id": "r"})
    assert (tmp_path / "o.toml").read_bytes() == src.read_bytes()  # provenance carried, no new stamp
    assert f"fingerprint (sha256 of canonical JSON): {params_fingerprint(MemoryParams(reinforce_gain=0.25))}" \
        in (tmp_path / "o.rs").read_text()
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["export", str(src), "--out", str(tmp_path / "o.txt")]) == 2  # no format from suffix
    assert main(["export", str(src), "--out", str(tmp_path / "missing" / "o.rs")]) == 2
    assert main(["export", str(tmp_path / "nope.toml"), "--out", str(tmp_path / "x.rs")]) == 2
    assert main(["export", str(src), "--format", "rust", "--enum-path", "x::Y", "--out", str(tmp_path / "y.rs")]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    err = capsys.readouterr().err
    assert "cannot tell the format" in err and "does not exist" in err and "no such params file" in err
    with pytest.raises(SystemExit) as info:
        main(["export", "--help"])
    assert info.value.code == 0 and "--no-enum" in capsys.readouterr().out

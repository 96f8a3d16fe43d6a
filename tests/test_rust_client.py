"""What you tune is what you ship: a seed-style production client in Rust (rusqlite, the seed's
``remember_with_evidence`` row by row, ``include!`` of the exported parameters module, its schedule and
its context rule; ``tests/rust_client/main.rs``) continues a memory exported with ``export-db`` for the
second half of the bundled log, and ends equal to factmem's one-pass replay of the whole log — every
column of every fact, every evidence row, every person's context — for the seed's, a tuned and a
per-predicate parameter set. ``whatif`` on the client's file (which has no factmem_fact_state rows for
what the client archived or superseded) reproduces every fact, and names why it cannot check their
times.

The client builds with cargo offline against Debian's packaged crates (``librust-rusqlite-dev``, which
``.ci/run`` installs when absent); confidences may differ by one ulp where an effective base runs
through ``exp`` (numpy's against the C library's), everything else is compared exactly."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from factmem.core.params import MemoryParams
from factmem.data.logs import load
from factmem.export.rust import render_rust
from factmem.export.sqlite import export_db
from factmem.production.whatif import whatif
from factmem.store.factstore import FactStore

ROOT = Path(__file__).resolve().parent.parent
DEBIAN_REGISTRY = Path("/usr/share/cargo/registry")
DAY = 86400
K = 10


def _cargo() -> str | None:
    found = shutil.which("cargo")
    if found:
        return found
    fallback = Path.home() / ".cargo" / "bin" / "cargo"
    return str(fallback) if fallback.exists() else None


CARGO = _cargo()
HAS_RUSQLITE = DEBIAN_REGISTRY.is_dir() and any(DEBIAN_REGISTRY.glob("rusqlite-*"))
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CARGO is None or not HAS_RUSQLITE,
                       reason="needs cargo and Debian's librust-rusqlite-dev (.ci/run installs it)"),
]

PARAMS = {
    "seed": MemoryParams(),
    "tuned": MemoryParams(decay_rate={"episodic": 1.08, "explicit": 0.03}, reinforce_gain=0.45,
                          archive_threshold=0.08, retrieval_threshold=0.2, reinforce_base="effective",
                          multi_valued_predicates=frozenset({"enjoys", "member_of"})),
    "per_predicate": MemoryParams(decay_rate_by_predicate={"works_on": 0.0103, "lives_in": 0.0, "enjoys": 0.17}),
}


@pytest.fixture(scope="module")
def crate(tmp_path_factory):
    """The client's cargo project, built offline against the Debian registry; ``build(params_rs)``
    rebuilds it with another parameters module (only the client recompiles) and returns the binary."""
    d = tmp_path_factory.mktemp("rust_client")
    (d / "src").mkdir()
    shutil.copy(ROOT / "tests" / "rust_client" / "main.rs", d / "src" / "main.rs")
    (d / "Cargo.toml").write_text('[package]\nname = "client"\nversion = "0.1.0"\nedition = "2021"\n\n'
                                  '[dependencies]\nrusqlite = "0.28"\n')
    (d / ".cargo").mkdir()
    (d / ".cargo" / "config.toml").write_text(
        f'[source.crates-io]\nreplace-with = "debian"\n[source.debian]\ndirectory = "{DEBIAN_REGISTRY}"\n'
        '[net]\noffline = true\n')

    def build(params_rs: Path) -> Path:
        env = {**os.environ, "FACTMEM_PARAMS_RS": str(params_rs), "CARGO_TARGET_DIR": str(d / "target"),
               "RUSTFLAGS": "-D warnings"}
        run = subprocess.run([CARGO, "build", "--offline", "--quiet"], cwd=d, env=env, capture_output=True,
                             text=True, timeout=600)
        assert run.returncode == 0, run.stderr
        assert "warning" not in run.stderr, run.stderr
        return d / "target" / "debug" / "client"

    return build


@pytest.fixture(scope="module")
def log():
    """The bundled log, its split (a midnight half-way) and the last consolidation (the last midnight
    at or before the last observation: every consolidation is then before an observation whatif sees)."""
    ds = load(ROOT / "datasets" / "small")
    ev = ds.events.sort_values("ts", kind="stable").reset_index(drop=True)
    ts = ev["ts"].to_numpy()
    split = ds.start + ((int(ts[-1]) - ds.start) // DAY // 2) * DAY
    until = (int(ts[-1]) // DAY) * DAY
    grid = np.arange(ds.start + DAY, until + 1, DAY, dtype=np.int64)
    return ev, split, until, grid


def _events_file(path: Path, ev: pd.DataFrame) -> Path:
    null = "\x1e"
    cols = ["ts", "session_id", "message_id", "subject", "predicate", "object", "kind", "note"]
    lines = ["\x1f".join(null if pd.isna(v) else str(v) for v in row) for row in ev[cols].itertuples(index=False)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.abs(np.asarray(a, np.float64).view(np.int64) - np.asarray(b, np.float64).view(np.int64))


FACT_COLUMNS = ["id", "subject", "predicate", "object", "note", "kind", "confidence", "reinforcement_count",
                "first_seen", "last_reinforced", "decay_rate", "status", "supersedes_id"]


@pytest.mark.parametrize("name", list(PARAMS))
def test_client_continues_an_exported_memory_to_factmem_s_one_pass_replay(name, crate, log, tmp_path):
    params = PARAMS[name]
    ev, split, until, grid = log
    first = ev[ev["ts"] < split]
    # the first half in factmem, consolidated through the split, exported as the client's file
    with FactStore(tmp_path / "first.duckdb", params=params) as store:
        store.replay(first, grid[grid <= split])
        export_db(store, tmp_path / "prod.sqlite", progress=False)
    (tmp_path / "memory_params.rs").write_text(render_rust(params))
    exe = crate(tmp_path / "memory_params.rs")
    events = _events_file(tmp_path / "events.txt", ev[ev["ts"] >= split])
    run = subprocess.run([str(exe), str(tmp_path / "prod.sqlite"), str(events), str(split), str(until), str(K)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr

    # factmem's one-pass replay of the whole log, on the same schedule
    one = FactStore(params=params)
    one.replay(ev, grid)
    with sqlite3.connect(tmp_path / "prod.sqlite") as sq:
        facts = pd.read_sql_query(f"SELECT {', '.join(FACT_COLUMNS)} FROM memory_facts ORDER BY id", sq)
        evidence = pd.read_sql_query("SELECT id, fact_id, session_id, message_id, observed_at FROM memory_evidence "
                                     "ORDER BY id", sq)
        state_rows = sq.execute("SELECT count(*) FROM factmem_fact_state").fetchone()[0]
    theirs = one.facts()[FACT_COLUMNS]
    assert len(facts) == len(theirs) > 1000
    assert (facts["status"] != "active").sum() > state_rows  # the client kept no state rows of its own
    ulps = _ulps(facts["confidence"], theirs["confidence"])
    assert ulps.max() <= 1, facts[ulps > 1]
    if params.reinforce_base == "stored":  # no exp in the confidence: bit for bit
        assert ulps.max() == 0
    exact = [c for c in FACT_COLUMNS if c != "confidence"]
    pd.testing.assert_frame_equal(facts[exact].reset_index(drop=True).astype(object).where(facts[exact].notna(), None),
                                  theirs[exact].reset_index(drop=True).astype(object).where(theirs[exact].notna(), None),
                                  check_dtype=False)
    ours_ev = one.evidence()[["id", "fact_id", "session_id", "message_id", "observed_at"]]
    pd.testing.assert_frame_equal(evidence.astype(object), ours_ev.reset_index(drop=True).astype(object),
                                  check_dtype=False)

    # every person's context at the end: the module's rank_context against FactStore.contexts
    rows = [line.split("\x1f") for line in run.stdout.splitlines()]
    client_ctx = pd.DataFrame(rows, columns=["subject", "rank", "id", "bits"])
    ctx = one.contexts(K, at=until)
    assert len(client_ctx) == len(ctx) > 0
    assert list(client_ctx["subject"]) == list(ctx["subject"])
    assert client_ctx["rank"].astype(int).tolist() == ctx["rank"].tolist()
    assert client_ctx["id"].astype(int).tolist() == ctx["id"].tolist()
    client_eff = client_ctx["bits"].astype(np.uint64).to_numpy().view(np.float64)
    assert _ulps(client_eff, ctx["effective_confidence"]).max() <= 1
    one.close()

    # whatif on the client's file: every fact reproduced; the missing state rows named as the cause
    result = whatif(tmp_path / "prod.sqlite", params, budgets=(K,), bootstrap=10, figures=False)
    rep = result.reproduction
    assert rep.reproduced == rep.checked == len(facts), rep.by_cause
    assert rep.without_state == (facts["status"] != "active").sum() - state_rows > 0
    assert any(f"no factmem_fact_state for {rep.without_state} facts: written by a client that does not keep it"
               in n for n in result.notes), result.notes
    assert not any("built with other parameters" in n for n in result.notes)


def test_client_refuses_a_file_built_with_other_parameters(crate, log, tmp_path):
    """The module's PARAMS_FINGERPRINT against factmem_meta's params_fingerprint: a mismatched module
    stops before writing (it diverged silently before)."""
    ev, split, until, grid = log
    with FactStore(params=PARAMS["seed"]) as store:
        store.replay(ev[ev["ts"] < split].head(500), grid[grid <= split])
        export_db(store, tmp_path / "prod.sqlite", progress=False)
    (tmp_path / "tuned.rs").write_text(render_rust(PARAMS["tuned"]))
    exe = crate(tmp_path / "tuned.rs")
    before = (tmp_path / "prod.sqlite").read_bytes()
    events = _events_file(tmp_path / "events.txt", ev[ev["ts"] >= split].head(10))
    run = subprocess.run([str(exe), str(tmp_path / "prod.sqlite"), str(events), str(split), str(until), "5"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 3 and "was built with parameters" in run.stderr
    assert (tmp_path / "prod.sqlite").read_bytes() == before

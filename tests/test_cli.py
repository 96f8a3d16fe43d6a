"""The command line: every command has help; the tuning commands run end to end; bad input exits 2."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pandas as pd
import pytest

from factmem.cli.main import build_parser, main
from tests.conftest import write_tiny


def subcommands():
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action, parser


def test_every_command_has_help_text():
    action, _ = subcommands()
    helps = {c.dest: c.help for c in action._choices_actions}
    assert {"tune", "simulate", "sweep", "cardinality", "generate", "import-triples", "abstract", "export",
            "params", "export-db", "import-db", "fit"} <= set(action.choices)
    for name, sub in action.choices.items():
        assert helps.get(name), f"{name} has no one-line help"
        assert sub.description, f"{name} has no description"
        for a in sub._actions:
            if a.dest != "help" and not isinstance(a, argparse._SubParsersAction):
                assert a.help, f"{name}: option {a.option_strings or a.dest} has no help"


def test_readme_command_table_lists_every_command():
    import re
    from pathlib import Path

    action, _ = subcommands()
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## The command line"):]
    section = section[:section.index("\n## ", 1)]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    listed = {m for row in rows for m in re.findall(r"`(?:factmem )?([a-z][a-z-]*)[ `]", row.split(" | ")[0])}
    assert set(action.choices) <= listed, f"missing from the README's command table: {set(action.choices) - listed}"


def test_module_entry_point_prints_help():
    out = subprocess.run([sys.executable, "-m", "factmem", "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "tune" in out.stdout


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return write_tiny(tmp_path_factory, seed=31)


def test_simulate_command(tiny_dir, tmp_path, capsys):
    """The printed scores are the library's: simulate() on the same log with the same defaults."""
    import json

    from factmem.evaluation.simulate import Schedule, prepare, simulate
    from factmem.tuning.tune import base_params

    assert main(["simulate", "--log", str(tiny_dir), "--out", str(tmp_path / "sim")]) == 0
    out = capsys.readouterr().out
    printed = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in ("log_loss", "brier", "auc", "rmse_bins", "precision", "recall",
                                            "believed", "stale", "lost"):
            printed[parts[0]] = float(parts[1])
    P = prepare(tiny_dir)
    run = simulate(P, base_params(P), Schedule())
    want = run.summary
    run.store.close()
    assert set(printed) == {"log_loss", "brier", "auc", "rmse_bins", "precision", "recall", "believed", "stale", "lost"}
    for key, value in printed.items():
        assert value == pytest.approx(want[key], rel=1e-5, abs=1e-9), key  # printed to 6 significant digits
    assert 0 < want["recall"] < 1 and want["believed"] > 0  # numbers that could be wrong
    manifest = json.loads((tmp_path / "sim" / "manifest.json").read_text())
    assert manifest["summary"]["log_loss"] == want["log_loss"] and manifest["summary"]["lost"] == want["lost"]
    assert (tmp_path / "sim" / "memory.duckdb").exists()


def test_simulate_command_with_abstraction(tiny_dir, capsys):
    assert main(["simulate", "--log", str(tiny_dir), "--abstract-every", "7"]) == 0
    assert "abstraction passes" in capsys.readouterr().out


def test_sweep_command(tiny_dir, tmp_path, capsys):
    code = main(["sweep", "--log", str(tiny_dir), "--param", "decay_rate.episodic=0.1,0.5", "--workers", "0",
                 "--out", str(tmp_path / "sw")])
    assert code == 0 and (tmp_path / "sw" / "sweep.parquet").exists()
    assert "all.utility@20" in capsys.readouterr().out


def test_tune_command(tiny_dir, tmp_path, capsys):
    code = main(["tune", "--log", str(tiny_dir), "--param", "decay_rate.explicit=0.005:0.3:log", "--n", "6",
                 "--sampler", "random", "--budget", "5,10", "--bootstrap", "50", "--workers", "0",
                 "--out", str(tmp_path / "t")])
    assert code == 0
    out = capsys.readouterr().out
    assert "budget k = 5: held-out metrics" in out and "budget k = 10: held-out metrics" in out
    assert "Promoted" in out or "Not promoted" in out
    assert (tmp_path / "t" / "report.md").exists() and (tmp_path / "t" / "params.toml").exists()
    # --calibrate-all: calibration for every candidate (by default only for the rows the report shows)
    assert main(["tune", "--log", str(tiny_dir), "--param", "decay_rate.explicit=0.005:0.3:log", "--n", "2", "--startup", "2",
                 "--bootstrap", "20", "--workers", "0", "-q", "--calibrate-all",
                 "--out", str(tmp_path / "all")]) == 0
    every = pd.read_parquet(tmp_path / "all" / "sweep.parquet")
    some = pd.read_parquet(tmp_path / "t" / "sweep.parquet")
    assert every["all_log_loss"].notna().all() and some["all_log_loss"].isna().any()  # the files' plain names


def test_cardinality_command(tiny_dir, capsys):
    assert main(["cardinality", str(tiny_dir), "--compare"]) == 0
    out = capsys.readouterr().out
    assert "suggested multi_valued_predicates" in out and "best static per-predicate choice" in out


@pytest.mark.parametrize("argv, message", [
    (["sweep", "--param", "decay_rate.mood=0.1"], "unknown parameter 'decay_rate.mood'"),
    (["sweep", "--param", "reinforce_gain=2"], "reinforce_gain = 2.0 is invalid"),
    (["sweep", "--param", "reinforce_gain=0.2", "--objective", "vibes"], "unknown objective 'vibes'"),
    (["tune", "--objective", "vibes"], "unknown objective 'vibes'"),
    (["tune", "--budget", "ten"], "--budget 'ten'"),
    (["tune", "--holdout", "x", "--split", "0.5"], "not both"),
    (["tune", "--objective", "log_loss"], "cannot be held out by subject"),
    (["simulate", "--params", "nope.toml"], "nope.toml"),
])
def test_bad_input_exits_2_and_writes_nothing(tiny_dir, tmp_path, capsys, argv, message):
    out = tmp_path / "out"
    args = argv + ["--log", str(tiny_dir), "--out", str(out)]
    assert main(args) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_missing_dataset_folder(tmp_path, capsys):
    assert main(["simulate", "--log", str(tmp_path / "missing")]) == 2
    assert "missing: no such dataset folder" in capsys.readouterr().err

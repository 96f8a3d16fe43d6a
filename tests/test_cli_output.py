"""The command line's shared rules (factmem.cli.output): --json on every command, held to the README's
table of result keys; exit codes 0/1/2/3; -q; a closed pipe; unknown flags; "Bring your own data"
run exactly as the README prints it."""

from __future__ import annotations

import errno
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from factmem.cli.main import build_parser, main
from factmem.cli.output import EXIT_CODES

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def documented_result_keys() -> dict[str, set[str]]:
    """The README's table: command -> the keys its --json `result` holds."""
    section = README[README.index("### Output and exit codes"):]
    section = section[:section.index("\n## ")]
    table = section[section.index("| command | `result` keys |"):]
    rows = {}
    for line in table.splitlines()[2:]:
        if not line.startswith("| `"):
            break
        command, keys = line.split(" | ")[:2]
        rows[command.strip("| `")] = set(re.findall(r"`([a-z_]+)`", keys))
    return rows


def run_json(capsys, argv: list[str], command: str, expect_code: int = 0) -> dict:
    code = main(argv + ["--json"])
    out = capsys.readouterr().out
    assert code == expect_code, out
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1, f"{command}: --json printed more than one document: {out[:500]}"
    doc = json.loads(lines[0])
    assert set(doc) >= {"factmem", "command", "exit_code", "files", "result"}
    assert doc["command"] == command and doc["exit_code"] == code
    for f in doc["files"]:
        assert Path(f).exists(), f"{command}: lists {f}, which does not exist"
    return doc


def test_every_command_has_a_documented_json_result(tmp_path, capsys):
    documented = documented_result_keys()
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    commands = {name for name in sub.choices if name not in ("params", "store", "runs")} | {
        "params diff", "params show", "store recover", "runs list", "runs compare"}
    assert commands == set(documented), f"README table and commands differ: {commands ^ set(documented)}"

    docs = {}
    d, s, t = tmp_path / "d", tmp_path / "s", tmp_path / "t"
    docs["generate"] = run_json(capsys, ["generate", "--preset", "tiny", "--seed", "31", "--out", str(d)], "generate")
    docs["import-log"] = run_json(capsys, ["import-log", str(d / "log.jsonl"), "--out", str(tmp_path / "mine")],
                                  "import-log")
    tsv = tmp_path / "facts.tsv"
    tsv.write_text("ada\tlives_in\tRome\t1990\t2000\nada\tlives_in\tOslo\t2000\t\n", encoding="utf-8")
    docs["import-triples"] = run_json(capsys, ["import-triples", str(tsv), "--out", str(tmp_path / "imp")],
                                      "import-triples")
    docs["simulate"] = run_json(capsys, ["simulate", "--log", str(d), "--out", str(s)], "simulate")
    docs["sweep"] = run_json(capsys, ["sweep", "--log", str(d), "--param", "decay_rate.episodic=0.1,0.5",
                                      "--workers", "0"], "sweep")
    # the only candidate is the baseline: nothing is promoted, and the exit status stays 0 without
    # --fail-if-not-promoted
    docs["tune"] = run_json(capsys, ["tune", "--log", str(d), "--search", "grid", "--param", "reinforce_gain=0.3",
                                     "--bootstrap", "20", "--workers", "0", "--out", str(t)], "tune")
    assert docs["tune"]["decision"]["promoted"] is False
    docs["cardinality"] = run_json(capsys, ["cardinality", str(d)], "cardinality")
    docs["runs list"] = run_json(capsys, ["runs", "list", str(tmp_path)], "runs list")
    docs["runs compare"] = run_json(capsys, ["runs", "compare", str(t)], "runs compare")
    docs["fit"] = run_json(capsys, ["fit", "--log", str(d), "--out", str(tmp_path / "f"), "--bootstrap", "0",
                                    "--min-observations", "5", "--no-figures"], "fit")
    docs["export"] = run_json(capsys, ["export", str(t / "params.toml"), "--out", str(tmp_path / "p.json")], "export")
    docs["params diff"] = run_json(capsys, ["params", "diff", str(t / "params.toml"), str(tmp_path / "p.json")],
                                   "params diff")
    docs["params show"] = run_json(capsys, ["params", "show", str(t / "params.toml")], "params show")
    prod = tmp_path / "prod.sqlite"
    docs["export-db"] = run_json(capsys, ["export-db", str(s / "memory.duckdb"), "--out", str(prod)], "export-db")
    docs["import-db"] = run_json(capsys, ["import-db", str(prod), "--out", str(tmp_path / "back.duckdb")], "import-db")
    docs["whatif"] = run_json(capsys, ["whatif", str(prod), "--params", str(t / "params.toml"), "--bootstrap", "20",
                                       "--no-figures", "--out", str(tmp_path / "w")], "whatif")
    docs["store recover"] = run_json(capsys, ["store", "recover", str(tmp_path / "back.duckdb")], "store recover")
    docs["abstract"] = run_json(capsys, ["abstract", str(tmp_path / "back.duckdb"), "--provider", "oracle",
                                         "--dataset", str(d), "--at", "2024-03-01"], "abstract")
    assert set(docs) == set(documented)
    for command, doc in docs.items():
        missing = documented[command] - set(doc["result"])
        assert not missing, f"{command} --json: result lacks the documented keys {missing}"
    # the numbers are the run's: tune's decision is the report's, the files it lists are its run folder
    assert docs["tune"]["decision"]["text"] == docs["tune"]["result"]["decision"]
    assert docs["tune"]["decision"]["text"].split("\n")[0] in (t / "report.md").read_text(encoding="utf-8")
    assert str(t / "params.toml") in docs["tune"]["files"]
    assert docs["generate"]["result"]["subjects"] > 0 and docs["simulate"]["result"]["context"]["20"]["recall"] > 0


def test_exit_codes_are_documented_and_distinct():
    section = README[README.index("| exit status | meaning |"):]
    documented = {int(m) for m in re.findall(r"^\| (\d) \|", section[:section.index("\n\n")], re.M)}
    assert documented == set(EXIT_CODES) == {0, 1, 2, 3, 4}


def test_fail_if_not_promoted_exits_3(tmp_path, capsys):
    """(The same run without the flag exits 0: test_every_command_has_a_documented_json_result.)"""
    from factmem.data.generate import generate, write

    d = write(generate("tiny", seed=31), tmp_path / "d")
    # the only candidate is the baseline itself: nothing can be promoted
    argv = ["tune", "--log", str(d), "--search", "grid", "--param", "reinforce_gain=0.3", "--bootstrap", "20",
            "--workers", "0", "-q"]
    assert main(argv + ["--out", str(tmp_path / "b"), "--fail-if-not-promoted"]) == 3
    assert "Not promoted" in (tmp_path / "b" / "report.md").read_text(encoding="utf-8")
    assert capsys.readouterr().out == ""  # -q: no report echo


def test_system_failure_exits_1_with_the_os_words(tmp_path, capsys, monkeypatch):
    import factmem.data.generate as generate_module

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp_path / "d" / "log.jsonl"))

    monkeypatch.setattr(generate_module, "write", full)
    assert main(["generate", "--preset", "tiny", "--out", str(tmp_path / "d")]) == 1
    err = capsys.readouterr().err
    assert "No space left on device" in err and "Traceback" not in err and err.count("\n") == 1


def test_bad_input_exits_2(tmp_path, capsys):
    assert main(["export", str(tmp_path / "none.toml"), "--out", str(tmp_path / "x.json"), "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("factmem export: error:")


def entry_point(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "factmem", *args], capture_output=True, text=True, timeout=120,
                          **kwargs)


def test_unknown_flag_shows_the_subcommand_usage_and_a_suggestion():
    res = entry_point("tune", "--bugdet", "5")
    assert res.returncode == 2
    assert "usage: factmem tune" in res.stderr and "did you mean --budget?" in res.stderr
    assert "unrecognized arguments: --bugdet 5" in res.stderr


def test_quiet_prints_nothing_on_stdout(tmp_path):
    res = entry_point("generate", "--preset", "tiny", "--out", str(tmp_path / "d"), "-q")
    assert res.returncode == 0 and res.stdout == "" and (tmp_path / "d" / "log.jsonl").exists()
    loud = entry_point("generate", "--preset", "tiny", "--out", str(tmp_path / "e"))
    assert loud.returncode == 0 and "wrote" in loud.stdout


def test_closed_pipe_ends_quietly():
    """The reader goes away before the command writes (`factmem ... | head -0`): no traceback."""
    proc = subprocess.Popen([sys.executable, "-m", "factmem", "generate", "--list-presets"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # before the interpreter has even imported factmem
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0
    assert "Traceback" not in err and "BrokenPipeError" not in err


def readme_block(title: str, index: int) -> list[str]:
    section = README[README.index(title):]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.S)
    return [line for line in blocks[index].splitlines() if line.strip()]


@pytest.mark.slow
def test_bring_your_own_data_runs_as_printed(tmp_path):
    """The README's two blocks, line by line, in a fresh folder (the example file copied in)."""
    import shutil

    shutil.copytree(ROOT / "datasets" / "examples", tmp_path / "datasets" / "examples")
    lines = readme_block("## Bring your own data", 0) + readme_block("## Bring your own data", 1)
    assert lines[0].startswith("factmem import-log") and any(line.startswith("factmem whatif") for line in lines)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    for line in lines:
        argv = shlex.split(line)
        assert argv[0] == "factmem"
        res = entry_point(*argv[1:], "-q", cwd=tmp_path, env=env)
        assert res.returncode == 0, f"{line}\n{res.stderr}"
    assert (tmp_path / "runs" / "mylog-tune" / "params.toml").exists()
    assert (tmp_path / "runs" / "whatif" / "report.md").exists()
    assert (tmp_path / "runs" / "prod.duckdb").exists()


def test_result_files_need_no_quoting_and_read_back_exactly(tmp_path):
    import duckdb
    import numpy as np
    import pandas as pd

    from factmem.tuning.runs import load_run, write_run

    frame = pd.DataFrame({"run_id": ["a", "b"], "decay_rate.episodic": [0.1, 0.3], "all.utility@20": [0.5, np.nan],
                          "t": np.array([1_704_067_200, 2**63 - 1], dtype=np.int64)})
    write_run(tmp_path / "r", {"kind": "demo"}, {"sweep": frame})
    on_file = pd.read_parquet(tmp_path / "r" / "sweep.parquet")
    assert list(on_file.columns) == ["run_id", "decay_rate_episodic", "all_utility_at_20", "t", "t_utc"]
    assert str(on_file["t_utc"].dtype) == "datetime64[ns, UTC]"
    assert on_file["t_utc"][0] == pd.Timestamp("2024-01-01", tz="UTC") and pd.isna(on_file["t_utc"][1])  # "never"
    con = duckdb.connect(str(tmp_path / "r" / "results.duckdb"), read_only=True)
    assert con.execute("SELECT all_utility_at_20 FROM sweep WHERE run_id = 'a'").fetchone() == (0.5,)
    con.close()
    pd.testing.assert_frame_equal(load_run(tmp_path / "r").table("sweep"), frame)

"""The notebooks: committed without outputs, one parameters cell first, public API only, and each one
executed headlessly by a real Jupyter kernel in quick mode (``FACTMEM_NOTEBOOK_QUICK=1``, Agg backend)
without a cell error. The notebooks assert their own conclusions, so a run without errors means every
conclusion they state held on this run's numbers. A notebook writes to its output folder under the
kernel's temporary directory, and either leaves it there or removes it at the end, saying so
(``removed <folder>``); the notebooks in :data:`REMOVES_ITS_FOLDER` must remove it. Notebook 04 also
keeps its tuning run (``RUN_DIR``, relative to the kernel's working directory) for notebook 05, which
exports that run's recommendation, and notebooks 06 and 07 compare their decay with it;
:func:`test_tuning_run_flows_from_04_into_05` runs 04, then 05, 06 and 07 against its run folder, so
that the hand-off cannot break."""

from __future__ import annotations

import ast
import os
import re
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbformat import v4

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = ROOT / "notebooks"
NAMES = [
    "01_decay_and_reinforcement",
    "02_contradiction_versioning",
    "03_abstraction_outcomes",
    "04_sweep_and_tuning",
    "05_export_to_production",
    "06_fit_decay_from_data",
    "07_real_temporal_facts",
]
#: notebooks that remove their output folder at the end (issue: notebooks a researcher can trust)
REMOVES_ITS_FOLDER = set(NAMES)
NOTEBOOKS = [NOTEBOOK_DIR / f"{name}.ipynb" for name in NAMES]
# nbclient's per-cell timeout: a hung cell fails the test instead of blocking the suite
CELL_TIMEOUT_S = 60
# quick mode takes 10-30 s per notebook on 2 cores (kernel start included); the budget is a
# minute, and this bound only catches a notebook that has become several times slower
NOTEBOOK_BUDGET_S = 120


def kernel_env(tmp: Path) -> dict[str, str]:
    """The kernel's environment: quick mode, a non-interactive backend, temporary files under ``tmp``,
    and factmem imported from this checkout (as the tests import it)."""
    env = dict(os.environ)
    env.update(FACTMEM_NOTEBOOK_QUICK="1", MPLBACKEND="Agg", TMPDIR=str(tmp))
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def execute(nb: nbformat.NotebookNode, tmp: Path) -> float:
    """Run every cell of ``nb`` in a fresh ``python3`` kernel started in ``tmp``; returns the seconds taken.
    A cell error raises ``nbclient.exceptions.CellExecutionError``."""
    client = NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp)}})
    t0 = time.perf_counter()
    client.execute(env=kernel_env(tmp))
    return time.perf_counter() - t0


def code_cells(nb: nbformat.NotebookNode) -> list:
    return [c for c in nb.cells if c.cell_type == "code"]


def test_the_notebooks_are_those_of_the_readmes():
    assert sorted(p.stem for p in NOTEBOOK_DIR.glob("*.ipynb")) == NAMES
    readme = (NOTEBOOK_DIR / "README.md").read_text(encoding="utf-8")
    for name in NAMES:
        assert f"{name}.ipynb" in readme
    assert "jupyter lab notebooks/" in readme
    top = (ROOT / "README.md").read_text(encoding="utf-8")
    notebooks_section = top.split("## Notebooks", 1)[1].split("\n## ", 1)[0]
    for name in REMOVES_ITS_FOLDER:  # the newer notebooks are listed in the README's notebooks section too
        assert name in notebooks_section, name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NAMES)
def test_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    for i, cell in enumerate(code_cells(nb)):
        assert cell.outputs == [], f"{path.name}: code cell {i} was committed with outputs"
        assert cell.execution_count is None, f"{path.name}: code cell {i} has an execution count"
    assert "widgets" not in nb.metadata, f"{path.name}: saved widget state (progress bars read 0% offline)"


def test_the_clean_filter_strips_what_jupyterlab_writes():
    """notebooks/strip_outputs.py (git's clean filter, .gitattributes) leaves a committed notebook
    byte for byte and strips outputs, counts and widget state from an executed one."""
    import json
    import subprocess

    script = NOTEBOOK_DIR / "strip_outputs.py"
    assert "filter=strip-notebook-outputs" in (ROOT / ".gitattributes").read_text(encoding="utf-8")
    committed = NOTEBOOKS[0].read_text(encoding="utf-8")
    run = lambda text: subprocess.run([sys.executable, str(script)], input=text, capture_output=True, text=True,
                                      check=True, timeout=60).stdout
    assert run(committed) == committed
    executed = json.loads(committed)
    executed["metadata"]["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    code = next(c for c in executed["cells"] if c["cell_type"] == "code")
    code["execution_count"] = 3
    code["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["0%|          | 0/10\n"]}]
    assert run(json.dumps(executed)) == committed


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NAMES)
def test_one_parameters_cell_first(path):
    cells = code_cells(nbformat.read(path, as_version=4))
    first = cells[0]
    assert "parameters" in first.metadata.get("tags", [])
    for name in ("QUICK", "SEED", "PRESET", "OUT"):
        assert f"\n{name} = " in f"\n{first.source}", f"{path.name}: the parameters cell does not set {name}"
    assert "FACTMEM_NOTEBOOK_QUICK" in first.source and "tempfile.mkdtemp" in first.source
    # the switch and the output folder are set there and nowhere else
    for cell in cells[1:]:
        assert "FACTMEM_NOTEBOOK_QUICK" not in cell.source and "mkdtemp" not in cell.source


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NAMES)
def test_only_public_api(path):
    """No private name of factmem (or of anything else) is imported or touched."""
    for i, cell in enumerate(code_cells(nbformat.read(path, as_version=4))):
        source = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith("%"))
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom):
                assert not any(part.startswith("_") for part in (node.module or "").split(".")), (path.name, i)
                assert not any(a.name.startswith("_") for a in node.names), (path.name, i, ast.dump(node))
            elif isinstance(node, ast.Import):
                assert not any(p.startswith("_") for a in node.names for p in a.name.split(".")), (path.name, i)
            elif isinstance(node, ast.Attribute):
                private = node.attr.startswith("_") and not (node.attr.startswith("__") and node.attr.endswith("__"))
                assert not private, f"{path.name}: code cell {i} uses the private attribute {node.attr!r}"


def test_kernel_runs_this_python_with_the_quick_environment(tmp_path):
    """The ``python3`` kernel is the interpreter running the tests, and it sees the quick switch."""
    nb = v4.new_notebook()
    nb.cells.append(v4.new_code_cell(
        "import os, sys, factmem\n"
        "print(sys.executable)\n"
        "print(os.environ['FACTMEM_NOTEBOOK_QUICK'], os.environ['MPLBACKEND'])\n"
        "print(factmem.__file__)"))
    execute(nb, tmp_path)
    executable, switches, package = nb.cells[0].outputs[0]["text"].splitlines()
    assert executable == sys.executable or Path(executable).resolve() == Path(sys.executable).resolve()
    assert switches == "1 Agg"
    assert Path(package).resolve().parent == ROOT / "factmem"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=NAMES)
def test_notebook_executes_in_quick_mode(path, tmp_path, record_property):
    nb = nbformat.read(path, as_version=4)
    seconds = execute(nb, tmp_path)
    record_property("seconds", round(seconds, 1))
    print(f"{path.name}: {seconds:.1f} s")
    errors = [o for c in code_cells(nb) for o in c.outputs if o.output_type == "error"]
    assert not errors
    assert all(c.execution_count is not None for c in code_cells(nb))
    figures = sum("image/png" in o.get("data", {}) for c in code_cells(nb) for o in c.outputs)
    assert figures >= (0 if path.stem.startswith("05_") else 3), f"{path.name} drew {figures} figures"
    # the notebook's output folder was made under the kernel's TMPDIR, i.e. inside tmp_path: either it is
    # still there with the files written, or the notebook removed it at the end and said which one
    prefix = f"factmem-nb{path.stem[:2]}-"
    text = "".join(o.get("text", "") for c in code_cells(nb) for o in c.outputs if o.output_type == "stream")
    removed = [Path(m) for m in re.findall(rf"^removed (\S*{prefix}\S+)$", text, flags=re.MULTILINE)]
    if path.stem in REMOVES_ITS_FOLDER:
        assert removed, f"{path.name} did not remove its output folder"
    if removed:
        assert all(r.parent.resolve() == tmp_path.resolve() and not r.exists() for r in removed), removed
        assert not list(tmp_path.glob(f"{prefix}*"))
    else:
        assert list(tmp_path.glob(f"{prefix}*/*"))
    assert seconds < NOTEBOOK_BUDGET_S, f"{path.name} took {seconds:.0f} s in quick mode"


def _parameters(nb: nbformat.NotebookNode, **values: str) -> None:
    """Set parameters the way papermill does: a cell right after the parameters cell (same kernel)."""
    first = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    nb.cells.insert(first + 1, v4.new_code_cell("\n".join(f"{k} = {v}" for k, v in values.items())))


def _stdout(nb: nbformat.NotebookNode) -> str:
    return "".join(o.get("text", "") for c in code_cells(nb) for o in c.outputs if o.output_type == "stream")


@pytest.mark.slow
def test_tuning_run_flows_from_04_into_05(tmp_path):
    """Notebook 04 keeps its run folder; notebook 05, pointed at it, exports exactly that recommendation
    (the same params.toml fingerprint) instead of tuning again; notebooks 06 and 07 find it by default and
    put their decay beside it."""
    tuning = nbformat.read(NOTEBOOK_DIR / "04_sweep_and_tuning.ipynb", as_version=4)
    execute(tuning, tmp_path)
    run = tmp_path / "runs" / "04_sweep_and_tuning-quick" / "run"
    assert (run / "params.toml").is_file() and (run / "manifest.json").is_file() and not (run / "INCOMPLETE").exists()
    printed = re.search(r"fingerprint ([0-9a-f]{64})", _stdout(tuning))
    assert printed, "notebook 04 did not print the fingerprint of params.toml"

    export = nbformat.read(NOTEBOOK_DIR / "05_export_to_production.ipynb", as_version=4)
    _parameters(export, TUNING_RUN=repr(str(run)))
    execute(export, tmp_path)
    text = _stdout(export)
    assert f"exporting notebook 4's run folder: {run.resolve()}" in text
    assert "running notebook 4's tune here" not in text
    assert f"fingerprint {printed.group(1)}" in text
    assert not list(tmp_path.glob("factmem-nb0[45]-*"))  # both removed their output folders

    # the fit notebook and the real-data notebook compare with the same run: their default TUNING_RUN is
    # notebook 04's RUN_DIR (both relative to the notebooks' folder, here the kernel's working directory)
    for name in ("06_fit_decay_from_data", "07_real_temporal_facts"):
        other = nbformat.read(NOTEBOOK_DIR / f"{name}.ipynb", as_version=4)
        execute(other, tmp_path)
        text = _stdout(other)
        assert f"comparing with notebook 4's run folder: {run.resolve()}" in text, name
        assert "no run folder" not in text, name
        assert not list(tmp_path.glob(f"factmem-nb{name[:2]}-*")), name

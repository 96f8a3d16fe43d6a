"""The architecture, checked: layers as folders with one-way imports, no import cycles, one error
hierarchy, every module's public names declared, and every CLI command documented.

The layer contract (top to bottom; a module may import its own folder and any folder below it,
never a folder beside or above it)::

    cli, testing
    production
    tuning
    fitting
    evaluation
    abstraction | export | data | plots      (independent of each other)
    store
    engine
    core
    errors

Plots may import ``core`` for the shared vocabularies (kinds, statuses): that is "below" anyway.
The top-level ``factmem/__init__.py`` is the façade (it re-exports what users reach for first) and
``__main__`` runs the CLI; both are exempt.
"""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

import pytest

import factmem
from factmem.cli.main import build_parser, main

PACKAGE = Path(factmem.__file__).resolve().parent
ROOT = PACKAGE.parent
LAYERS: list[tuple[str, ...]] = [
    ("cli", "testing"),
    ("production",),
    ("tuning",),
    ("fitting",),
    ("evaluation",),
    ("abstraction", "export", "data", "plots"),
    ("store",),
    ("engine",),
    ("core",),
    ("errors",),
]
RANK = {name: len(LAYERS) - i for i, names in enumerate(LAYERS) for name in names}


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def _imports(path: Path, *, runtime_only: bool = False) -> list[tuple[int, str, list[str]]]:
    """(line, imported module, names) for every factmem import, at any depth (function-level too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip: set[int] = set()
    if runtime_only:  # `if TYPE_CHECKING:` blocks do not run
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                skip.update(id(n) for n in ast.walk(node))
    out = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}:{node.lineno}: relative import (factmem uses absolute imports)"
            if node.module and (node.module == "factmem" or node.module.startswith("factmem.")):
                out.append((node.lineno, node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("factmem"):
                    out.append((node.lineno, a.name, []))
    return out


def _target(module: str, names: list[str]) -> list[str]:
    """The modules an import statement loads (``from factmem.store import reads`` loads store.reads)."""
    targets = []
    for n in names or [""]:
        sub = f"{module}.{n}"
        targets.append(sub if sub in MODULES else module)
    return targets


def test_every_folder_is_a_known_layer():
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    folders.discard("bundled")
    assert folders <= set(RANK), f"folders outside the layer contract: {sorted(folders - set(RANK))}"


def test_every_package_ships():
    """A subpackage missing from pyproject's list would be left out of `pip install .` (tests run from
    the source tree would not notice)."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"])
    packages = {".".join(p.relative_to(ROOT).parts[:-1]) for p in PACKAGE.rglob("__init__.py")}
    assert packages - listed == set(), f"packages missing from pyproject.toml: {sorted(packages - listed)}"
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    module, _, func = scripts["factmem"].partition(":")
    assert callable(getattr(__import__(module, fromlist=[func]), func)), scripts["factmem"]


def test_imports_go_one_way_down():
    violations = []
    for module, path in MODULES.items():
        layer = _layer(module)
        if layer is None or module == "factmem.__main__":
            continue  # the façade and the entry point
        for line, imported, names in _imports(path):
            if imported == "factmem" and not all(f"factmem.{n}" in MODULES for n in names):
                if names != ["__version__"]:
                    violations.append(f"{module}:{line}: imports {names} from the top-level façade")
                continue
            for target in _target(imported, names):
                other = _layer(target)
                if other == layer:
                    continue
                if other not in RANK or RANK[other] >= RANK[layer]:
                    violations.append(f"{module}:{line}: {layer} imports {target} ({other}: not below {layer})")
    assert not violations, "\n".join(violations)


def test_no_import_cycles():
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for module, path in MODULES.items():
        for _, imported, names in _imports(path, runtime_only=True):
            for target in _target(imported, names):
                if target in MODULES and target != module and not module.startswith(target + "."):
                    # a package's __init__ running its submodules is not a cycle with them
                    if not target.startswith(module + ".") or module.count(".") == 0:
                        graph[module].add(target)
    graph["factmem"] = set()  # the façade imports lazily
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles = []
    counter = [0]

    def strong(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    assert not cycles, f"import cycles: {cycles}"


def test_user_errors_derive_from_factmem_error():
    """No bare built-in exception is raised by the package: a user's mistake must reach them as a
    FactmemError (InputError, ParamsError, ... are also ValueError for callers that expect one)."""
    # TypeError (a JSON encoder's default hook) and KeyError (a mapping's __getitem__) keep their
    # protocol meaning where they are raised; everything a user can cause is a FactmemError
    builtin = re.compile(r"raise (ValueError|RuntimeError|Exception|OSError)\(")
    found = []
    for module, path in MODULES.items():
        if module == "factmem.errors":
            continue  # ProviderError's own argument check guards programming errors only
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if builtin.search(line):
                found.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not found, "\n".join(found)


def test_the_cli_reports_factmem_errors_in_one_line_and_lets_bugs_show(capsys, monkeypatch):
    assert main(["params", "show", "/nonexistent/params.toml"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such params file" in err

    def boom(args):
        raise ValueError("a bug, not a user error")

    parser = build_parser()
    monkeypatch.setattr("factmem.cli.main.build_parser", lambda: _with_func(parser, "generate", boom))
    with pytest.raises(ValueError, match="a bug"):
        main(["generate", "--out", "x"])


def _with_func(parser: argparse.ArgumentParser, command: str, func) -> argparse.ArgumentParser:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sub.choices[command].set_defaults(func=func)
    return parser


def test_every_module_declares_its_public_names():
    missing, unknown = [], []
    for module, path in MODULES.items():
        if path.name in ("__init__.py", "__main__.py"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        decl = [n for n in tree.body if isinstance(n, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets)]
        if not decl:
            missing.append(module)
            continue
        names = ast.literal_eval(decl[0].value)
        defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        for n in tree.body:
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, ast.AnnAssign) else []):
                if isinstance(t, ast.Name):
                    defined.add(t.id)
            if isinstance(n, ast.ImportFrom):
                defined.update(a.asname or a.name for a in n.names)
        unknown += [f"{module}.{n}" for n in names if n not in defined]
    assert not missing, f"modules without __all__: {missing}"
    assert not unknown, f"__all__ names that do not exist: {unknown}"


def test_the_readme_documents_every_command():
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    commands = set(sub.choices)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = set(re.findall(r"^\| `factmem ([a-z][a-z-]*)", readme, flags=re.M))
    assert commands - table == set(), f"commands missing from the README's command table: {commands - table}"
    assert table - commands == set(), f"README lists commands that do not exist: {table - commands}"
    for name, p in sub.choices.items():  # and every command explains itself
        assert p.description, f"`factmem {name}` has no description"


def test_the_facade_offers_what_users_reach_for_first():
    for name in ("FactStore", "MemoryParams", "Evidence", "simulate", "sweep", "tune", "load_log", "fit"):
        assert name in factmem.__all__, name
        assert getattr(factmem, name) is not None
    assert callable(factmem.fit) and callable(factmem.simulate) and callable(factmem.tune)


def test_no_reference_to_a_design_file_outside_the_repository():
    for path in MODULES.values():
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"DESIGN\.md|design\.md", text):
            line = text[: m.start()].count("\n") + 1
            assert "docs/design.md" in text.splitlines()[line - 1], \
                f"{path.relative_to(ROOT)}:{line}: cite docs/design.md (the repository's copy)"
    assert (ROOT / "docs" / "design.md").is_file()

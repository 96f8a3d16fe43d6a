"""Strip a notebook's outputs, execution counts and saved widget state (git's clean filter).

Running a notebook in JupyterLab writes its outputs into the ``.ipynb``; committed, they make diffs
unreadable and saved widget progress bars read "0%" outside a live kernel. This script is the
repository's clean filter (``.gitattributes`` names it for ``notebooks/*.ipynb``); enable it once
per clone::

    git config filter.strip-notebook-outputs.clean "python3 notebooks/strip_outputs.py"

Then ``git add`` stores every notebook stripped while your working copy keeps its outputs. With
file arguments it strips those files in place (``python3 notebooks/strip_outputs.py notebooks/*.ipynb``);
with none it filters standard input to standard output. Standard library only: it runs with any
python3. ``tests/test_notebooks.py`` checks that the committed notebooks are stripped.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def strip(notebook: dict[str, Any]) -> dict[str, Any]:
    """The notebook without outputs, execution counts or widget state (a new dict)."""
    stripped = json.loads(json.dumps(notebook))
    for cell in stripped.get("cells", []):
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
        cell.get("metadata", {}).pop("execution", None)
    stripped.get("metadata", {}).pop("widgets", None)
    return stripped


def dumps(notebook: dict[str, Any]) -> str:
    """As Jupyter writes notebooks: one-space indent, UTF-8 text, a final newline."""
    return json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    if not argv:
        sys.stdout.write(dumps(strip(json.loads(sys.stdin.read()))))
        return 0
    for name in argv:
        path = Path(name)
        path.write_text(dumps(strip(json.loads(path.read_text(encoding="utf-8")))), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""Experiment records: a manifest beside the results, so any past run can be reloaded and plotted.

A run folder holds ``manifest.json`` (what ran: parameters, dataset sha256 and scenario, seeds,
factmem version, git commit if any, package versions), one Parquet file per results table, and
``results.duckdb`` with the same tables for SQL. In the files every column is a plain identifier
(``all_utility_at_20``) and every time column has a ``datetime64[ns, UTC]`` companion
(:mod:`factmem.tuning.columns`); :meth:`Run.table` gives the table back as the library wrote it.

**The run-folder rule.** A run starts in an empty folder (:func:`start_run`, :func:`run_folder`):
a folder that holds anything is refused — replaying a log into a previous run's ``memory.duckdb``
would double its evidence — unless ``force`` (``--force``) asks to replace it, which is done only
for a folder that is a factmem run (it has ``manifest.json`` or the ``INCOMPLETE`` marker), never
for other files. While a run writes, the folder holds ``INCOMPLETE``; the marker is removed last,
after ``manifest.json``, so a folder without it is complete. :func:`load_run` refuses an incomplete
folder (a killed run, or one still running). :func:`run_folder` writes a run beside ``out`` and
renames it into place when it is complete, so replacing a run (``--force``) is atomic: two at once,
or one killed midway, leave the old run or a new one, never neither.

>>> import tempfile, pandas as pd
>>> d = write_run(tempfile.mkdtemp(), {"kind": "demo"}, {"t": pd.DataFrame({"x": [1, 2]})})
>>> load_run(d).table("t")["x"].tolist()
[1, 2]
"""

from __future__ import annotations

import ctypes
import datetime as _dt
import errno
import json
import os
import platform
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from factmem import __version__
from factmem.errors import ExportError, FactmemError, InputError
from factmem.tuning.columns import METADATA_KEY, from_file, to_file

__all__ = ["write_run", "load_run", "Run", "manifest", "start_run", "finish_run", "run_folder", "default_run_dir",
           "INCOMPLETE", "git_commit", "package_versions"]

#: The marker a run folder holds while it is being written (removed last: its absence means complete).
INCOMPLETE = "INCOMPLETE"
_INCOMPLETE_TEXT = ("This factmem run did not finish (or is still running): its results are partial.\n"
                    "Run it again into an empty folder, or pass --force (force=True) to replace this one.\n")

__all__ = ["PACKAGES", "git_commit", "package_versions", "manifest", "default_run_dir", "write_run", "Run",
    "load_run"]

PACKAGES = ("numpy", "pandas", "duckdb", "pyarrow", "matplotlib", "httpx")


def git_commit() -> str | None:
    """The commit of the factmem source tree, when it is a git checkout."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    sha = out.stdout.strip()
    return sha if out.returncode == 0 and len(sha) == 40 else None


def package_versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "factmem": __version__}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "absent"
    return out


def manifest(kind: str, **info: Any) -> dict:
    """A manifest: ``kind`` (tune, sweep, simulate), the caller's facts, and the environment."""
    return {
        "kind": kind,
        "created_at": _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z"),
        "factmem_version": __version__,
        "git_commit": git_commit(),
        "packages": package_versions(),
        **info,
    }


def default_run_dir(root: str | os.PathLike = "runs") -> Path:
    """``runs/<UTC timestamp>/``, made unique."""
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    path = Path(root) / stamp
    i = 1
    while path.exists():
        path = Path(root) / f"{stamp}-{i}"
        i += 1
    return path


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value) if isinstance(value, (set, frozenset)) else value
        return [_jsonable(v) for v in items]
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return value.item()
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return "inf" if value > 0 else "-inf"  # JSON has no infinity (scenarios use it: "never changes")
    if isinstance(value, Path):
        return str(value)
    return value


def _is_run_folder(path: Path) -> bool:
    return (path / "manifest.json").is_file() or (path / INCOMPLETE).is_file()


def start_run(out: str | os.PathLike, *, force: bool = False) -> Path:
    """Make ``out`` an empty run folder marked ``INCOMPLETE`` (see the module docstring).

    A folder that holds anything is refused (:class:`~factmem.errors.InputError`) unless ``force``
    and it is a factmem run folder, which is then removed first. An unwritable place is an
    :class:`~factmem.errors.ExportError` naming it."""
    out = Path(out)
    _check_out(out, force)
    try:
        if out.is_dir() and any(out.iterdir()):
            shutil.rmtree(out)
        out.mkdir(parents=True, exist_ok=True)
        (out / INCOMPLETE).write_text(_INCOMPLETE_TEXT, encoding="utf-8")
    except OSError as exc:
        raise ExportError(f"{out}: cannot write the run folder: {exc.strerror or exc}") from None
    return out


def finish_run(out: str | os.PathLike) -> None:
    """Mark a run folder complete (remove ``INCOMPLETE``): the last step of every run."""
    marker = Path(out) / INCOMPLETE
    try:
        marker.unlink(missing_ok=True)
    except OSError as exc:
        raise ExportError(f"{out}: cannot finish the run folder: {exc.strerror or exc}") from None


@contextmanager
def run_folder(out: str | os.PathLike, *, force: bool = False) -> Iterator[Path]:
    """``with run_folder(out) as path:`` — the run is written into ``path``, a new sibling folder of
    ``out`` (``.<name>.partial-<token>``, marked ``INCOMPLETE``), and put in place at ``out`` in one
    rename when it succeeds: replacing a previous run (``force``) swaps the two folders atomically
    (Linux ``renameat2(RENAME_EXCHANGE)``; elsewhere two renames), so a crashed or concurrent
    replacement leaves the old run or the new one at ``out``, never neither and never a mix. ``out``
    is checked first (the run-folder rule: :func:`start_run`). On an error the partial folder is
    removed; a killed process leaves it, marked ``INCOMPLETE``, beside ``out``."""
    out = Path(out)
    _check_out(out, force)
    token = uuid.uuid4().hex[:12]
    work = out.parent / f".{out.name}.partial-{token}"
    try:
        work.mkdir(parents=True)
        (work / INCOMPLETE).write_text(_INCOMPLETE_TEXT, encoding="utf-8")
    except OSError as exc:
        shutil.rmtree(work, ignore_errors=True)
        raise ExportError(f"{out}: cannot write the run folder: {exc.strerror or exc}") from None
    try:
        yield work
        finish_run(work)
        _put_in_place(work, out, force)
    except OSError as exc:  # the disk filled up, a file became unwritable: a user's problem, not a bug
        shutil.rmtree(work, ignore_errors=True)
        where = exc.filename or out
        raise ExportError(f"{where}: cannot write the run: {exc.strerror or exc}") from None
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def _check_out(out: Path, force: bool) -> None:
    """The run-folder rule, checked before any work (nothing is removed here)."""
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: exists and is not a folder; choose another output folder")
    try:
        used = out.is_dir() and any(out.iterdir())
    except OSError as exc:
        raise ExportError(f"{out}: cannot read the run folder: {exc.strerror or exc}") from None
    if used:
        if not force:
            what = "a previous run" if _is_run_folder(out) else "files that are not a factmem run"
            raise InputError(f"{out}: the folder is not empty ({what}); a run starts from an empty folder — "
                             "choose another one, or pass --force (force=True) to replace a previous run")
        if not _is_run_folder(out):
            raise InputError(f"{out}: not a factmem run folder (no manifest.json or {INCOMPLETE}); --force "
                             "replaces only a previous run — choose an empty or new folder")


def _put_in_place(work: Path, out: Path, force: bool) -> None:
    """Move the finished run ``work`` to ``out``: a rename onto a missing or empty folder, else (a
    previous run, ``force``) an exchange of the two folders, after which the old run is removed."""
    try:
        os.rename(work, out)  # atomic; succeeds onto a missing or an empty folder
        return
    except OSError as exc:
        if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.EISDIR, errno.ENOTDIR):
            raise
    _check_out(out, force)  # filled meanwhile (a concurrent run): the same rule as at the start
    if _exchange(work, out):
        shutil.rmtree(work, ignore_errors=True)  # the old run, now under the partial name
        return
    aside = out.parent / f".{out.name}.replaced-{work.name.rsplit('-', 1)[-1]}"
    os.rename(out, aside)
    try:
        os.rename(work, out)
    except OSError:
        os.rename(aside, out)  # put the old run back
        raise
    shutil.rmtree(aside, ignore_errors=True)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two folders atomically (Linux ``renameat2`` with ``RENAME_EXCHANGE``); False where the
    system or the file system cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise ExportError(f"{b}: cannot put the run in place: {os.strerror(err)}")


def write_run(out: str | os.PathLike, manifest: Mapping[str, Any], tables: Mapping[str, pd.DataFrame], *,
              finish: bool = True) -> Path:
    """Write a run's results: ``<table>.parquet`` each, results.duckdb, then manifest.json last.

    ``out`` is a folder from :func:`start_run` (or a new or empty one). ``finish``: mark the folder
    complete afterwards (a caller that writes more files passes False and calls :func:`finish_run`).
    An unwritable folder is an :class:`~factmem.errors.ExportError` naming the file."""
    import duckdb

    out = Path(out)
    names = sorted(k for k, v in tables.items() if len(v.columns))  # a frame without columns holds nothing
    man = dict(manifest)
    man["tables"] = names
    try:
        out.mkdir(parents=True, exist_ok=True)
        files = {name: to_file(tables[name], name) for name in names}  # names that need no quoting
        for name, (on_file, renamed) in files.items():
            arrow = pa.Table.from_pandas(on_file, preserve_index=False)
            meta = {**(arrow.schema.metadata or {}), METADATA_KEY: json.dumps(renamed, sort_keys=True).encode()}
            pq.write_table(arrow.replace_schema_metadata(meta), out / f"{name}.parquet")
        db = out / "results.duckdb"
        if db.exists():
            db.unlink()
        con = duckdb.connect(str(db))
        try:
            for name in names:
                frame = files[name][0]  # noqa: F841 - read by DuckDB's replacement scan
                con.execute(f'CREATE TABLE "{name}" AS SELECT * FROM frame')
        finally:
            con.close()
        tmp = out / ".manifest.json.tmp"
        tmp.write_text(json.dumps(_jsonable(man), indent=2, allow_nan=False) + "\n", encoding="utf-8")
        os.replace(tmp, out / "manifest.json")
    except (OSError, duckdb.IOException) as exc:
        raise ExportError(f"{out}: cannot write the run: {getattr(exc, 'strerror', None) or exc}") from None
    if finish:
        finish_run(out)
    return out


@dataclass
class Run:
    """A run folder, read back: its manifest and its tables (loaded on demand)."""

    path: Path
    manifest: dict
    _tables: dict = field(default_factory=dict, repr=False)

    def table(self, name: str) -> pd.DataFrame:
        if name not in self.manifest.get("tables", []):
            raise FactmemError(f"{self.path}: no table {name!r}; tables: {', '.join(self.manifest.get('tables', []))}")
        if name not in self._tables:
            arrow = pq.read_table(self.path / f"{name}.parquet")
            self._tables[name] = from_file(arrow.to_pandas(), arrow.schema.metadata)
        return self._tables[name]

    @property
    def tables(self) -> list[str]:
        return list(self.manifest.get("tables", []))


def load_run(path: str | os.PathLike) -> Run:
    """Read a run folder written by :func:`write_run` (``factmem tune``, ``sweep``, ``simulate``)."""
    path = Path(path)
    if (path / INCOMPLETE).exists():
        raise FactmemError(f"{path}: an incomplete run (it holds {INCOMPLETE}: killed, failed or still running)")
    try:
        man = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FactmemError(f"{path}: not a run folder (no manifest.json)") from None
    return Run(path, man)

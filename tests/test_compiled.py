"""The compile cache of the scoring kernels works where the package and the home folder are read-only."""

from __future__ import annotations

import os

import pytest

from factmem.core import compiled, forked


def test_a_cache_folder_is_found_when_the_package_and_home_are_not_writable(tmp_path, monkeypatch):
    blocked = tmp_path / "a-file"
    blocked.write_text("")  # nothing can be created under a file, not even by root
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setattr(compiled, "_HERE", blocked / "factmem")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked / "cache"))
    monkeypatch.setattr(compiled.tempfile, "gettempdir", lambda: str(tmp_path / "tmp"))
    got = compiled.ensure_cache_dir()
    assert got is not None and got.startswith(str(tmp_path / "tmp" / "factmem-numba-"))
    assert os.environ["NUMBA_CACHE_DIR"] == got and os.path.isdir(got)


def test_a_writable_place_or_the_users_choice_is_left_to_numba(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "mine"))
    assert compiled.ensure_cache_dir() is None and os.environ["NUMBA_CACHE_DIR"] == str(tmp_path / "mine")
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    monkeypatch.setattr(compiled, "_HERE", tmp_path / "factmem")  # writable: numba caches beside the sources
    assert compiled.ensure_cache_dir() is None and "NUMBA_CACHE_DIR" not in os.environ


def test_whether_kernels_are_cached_on_disk_follows_the_folders_numba_would_write(tmp_path, monkeypatch):
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "mine"))
    assert compiled.caches_to_disk()
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(blocked / "cache"))  # the user's choice, not writable
    assert not compiled.caches_to_disk()
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    monkeypatch.setattr(compiled, "_HERE", blocked / "factmem")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked / "cache"))
    assert not compiled.caches_to_disk()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert compiled.caches_to_disk()


def _mark(path):
    def work():
        path.write_text(str(os.getpid()))
    return work


def _fail():
    raise RuntimeError("a compile that fails")


@pytest.mark.skipif(not forked.can_fork(), reason="work is set aside in forked children on Linux only")
def test_work_set_aside_runs_in_a_forked_child_and_its_failure_stays_there(tmp_path):
    child = forked.start(_mark(tmp_path / "ran"))
    assert child is not None and forked.succeeded(child)
    assert int((tmp_path / "ran").read_text()) not in (0, os.getpid())
    child = forked.start(_fail)
    assert child is not None and not forked.succeeded(child)  # and nothing raised here


def test_no_child_where_processes_do_not_fork(tmp_path, monkeypatch):
    monkeypatch.setattr(forked.sys, "platform", "darwin")
    assert forked.start(_mark(tmp_path / "not")) is None and not (tmp_path / "not").exists()


_COMPILES = """
import json, sys, time
from numba.core import event

class Top(event.Listener):  # the kernels this process compiled (not those it loaded from the cache)
    def __init__(self):
        self.depth, self.names = 0, []
    def on_start(self, ev):
        self.depth += 1
    def on_end(self, ev):
        self.depth -= 1
        if not self.depth and "dispatcher" in ev.data:
            self.names.append(ev.data["dispatcher"].py_func.__qualname__)

top = Top()
event.register("numba:compile", top)
from factmem.tuning.sweep import load_kernels
load_kernels()
json.dump(top.names, sys.stdout)
"""


@pytest.mark.slow
def test_a_first_run_compiles_the_context_kernels_in_a_child_and_loads_them(tmp_path):
    """On an empty compile cache, load_kernels compiles the checkpoint metrics' kernels here and the
    context metrics' in a forked child, then loads the child's from the cache: the two halves in
    parallel. It fails if the child's kernels do not match the calls made here (then this process
    compiles them again)."""
    import json
    import subprocess
    import sys

    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    out = subprocess.run([sys.executable, "-c", _COMPILES], env=env, capture_output=True, text=True, timeout=600,
                         check=True).stdout
    compiled_here = set(json.loads(out))
    assert {"calibration_pass", "coverage", "_scan"} <= compiled_here  # the checkpoint metrics and the replay
    assert not compiled_here & {"_select_states", "context_sums", "truth_flags"}, compiled_here
    assert list((tmp_path / "numba").rglob("topk._select_states*.nbc"))  # the child's, in the cache

"""The compile cache of the scoring kernels works where the package and the home folder are read-only."""

from __future__ import annotations

import os

from factmem.core import compiled


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

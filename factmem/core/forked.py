"""Work set aside in a forked child process, waited for later: the one way factmem runs a piece of
work on the other core while it goes on (figures rendered while a run is written, kernels compiled
while others compile).

:func:`start` forks a child that runs ``work()`` and exits — status 0 when it returned, 1 when it
raised — without the parent's exit handlers or buffered output (``os._exit``); it returns the
child's pid, or None where no child can be forked (not Linux, where forking a process that may hold
threads is not known to be safe; or the system refused). :func:`succeeded` waits for a child and says
whether it exited with 0. A caller keeps what it needs to do the work itself when the child failed:
the child's effects (files it wrote) are all it leaves.

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "done")
>>> pid = start(lambda: open(path, "w").close())
>>> pid is None or (succeeded(pid) and os.path.exists(path))
True
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

__all__ = ["can_fork", "start", "succeeded"]


def can_fork() -> bool:
    """Whether :func:`start` forks here (Linux)."""
    return hasattr(os, "fork") and sys.platform.startswith("linux")


def start(work: Callable[[], object]) -> int | None:
    """Fork a child that runs ``work()`` and exits (0 when it returned, 1 when it raised); its pid, or
    None when no child could be forked."""
    if not can_fork():
        return None
    try:
        pid = os.fork()
    except OSError:
        return None
    if pid == 0:  # the child: the work, then leave without the parent's exit handlers or buffers
        code = 1
        try:
            work()
            code = 0
        finally:
            os._exit(code)
    return pid


def succeeded(pid: int) -> bool:
    """Wait for the child ``pid`` (from :func:`start`) to end; whether it exited with status 0."""
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0

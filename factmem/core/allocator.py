"""Scoring workers keep the memory they free: large arrays reused, not faulted in again.

A sweep worker replays a chunk of parameter sets and scores each (:mod:`factmem.tuning.sweep`): every
chunk allocates the same arrays again — the kernel's outputs, hundreds of MB per chunk on a log of a
million mentions, and thousands of temporaries of a few MB. glibc's ``malloc`` serves a block larger
than its mmap threshold (at most 32 MB) from a fresh ``mmap`` and unmaps it when freed, so each
chunk faults its memory in again from the kernel: zeroed pages, and with transparent huge pages
(numpy asks for them on large arrays) a compaction of physical memory when none is free. On a shared
2-core machine that kernel time varied from 0.2 to 2.7 s a chunk of ~10 s of computing.

:func:`retain_freed_memory` tells ``malloc`` to serve every block from its heap (``M_MMAP_MAX = 0``)
and never to give freed memory back to the system (``M_TRIM_THRESHOLD``): the next chunk reuses the
pages the last one touched. The process keeps its peak resident size until it exits, which is why
only the worker processes a sweep starts call it (they end with the sweep), never a process that
imports factmem. Elsewhere than glibc (macOS, musl) it does nothing and says so.

>>> isinstance(retain_freed_memory(), bool)
True
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

__all__ = ["retain_freed_memory"]

# mallopt's parameter numbers (glibc's malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4

_DONE = False


def retain_freed_memory() -> bool:
    """Make this process's ``malloc`` keep and reuse freed memory (see the module docstring); True
    when it took effect (glibc on Linux), False where there is no such allocator. Idempotent."""
    global _DONE
    if _DONE:
        return True
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # (each returns 1 on success; the trim threshold is an int: 2**31 - 1 bytes is "never" here)
    _DONE = bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))
    return _DONE

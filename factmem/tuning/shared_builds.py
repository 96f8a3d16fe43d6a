"""What a sweep builds once and its worker processes share: the prepared logs (by path), the context
evaluators (by log, objective, parts and seed), the kernel's encodings of a log's events (by log and
set of multi-valued predicates), and :func:`build_shared`, which builds those a sweep's chunks will
ask for in the parent before its workers fork (side by side, in threads). Also :func:`plan_parts`:
the logs a holdout scores and their parts. The caches live for the process; a sweep removes what it
added once it is done (:func:`factmem.tuning.sweep.sweep`)."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from factmem.errors import InputError
from factmem.evaluation.context import ContextEvaluator
from factmem.evaluation.simulate import EncodedEvents, PreparedLog, Schedule, encode_events, prepare
from factmem.tuning.settings import Holdout, Objective

__all__ = ["PREPARED_LOGS", "CONTEXT_EVALUATORS", "ENCODINGS", "resolve_log", "context_key", "cached_context_evaluator",
           "encoded_events", "build_shared", "plan_parts"]

PREPARED_LOGS: dict[str, PreparedLog] = {}
CONTEXT_EVALUATORS: dict[tuple, ContextEvaluator] = {}
#: the kernel's encoding of a log's events per set of multi-valued predicates: (log, its encoding)
ENCODINGS: dict[tuple, tuple[PreparedLog, EncodedEvents]] = {}


def resolve_log(log: Any) -> PreparedLog:
    """A PreparedLog from a path (cached per process: workers load each log once) or an object."""
    if isinstance(log, PreparedLog):
        return log
    key = os.fspath(log)
    if key not in PREPARED_LOGS:
        PREPARED_LOGS[key] = prepare(key)
    return PREPARED_LOGS[key]


def context_key(prepared: PreparedLog, objective: dict, parts: dict[str, tuple[int, int]], seed: int) -> tuple:
    # the log's id is unique while the entry lives: the evaluator holds the log. (Not its sha256: hashing a 1M-mention
    # log costs ~5 s, which every worker process paid before scoring its first set.)
    return (id(prepared), json.dumps(objective, sort_keys=True), tuple(parts.items()), seed)


def cached_context_evaluator(prepared: PreparedLog, objective: dict, parts: dict[str, tuple[int, int]],
                             seed: int) -> ContextEvaluator:
    """The context evaluator of a log, objective, parts and seed: built once a process, then kept."""
    key = context_key(prepared, objective, parts, seed)
    if key not in CONTEXT_EVALUATORS:
        CONTEXT_EVALUATORS[key] = ContextEvaluator(prepared, budgets=objective["budgets"], needed=objective["needed"],
                                                   costs=objective["costs"], parts=parts,
                                                   max_points_per_subject=objective["max_points_per_subject"],
                                                   seed=seed)
    return CONTEXT_EVALUATORS[key]


def encoded_events(prepared: PreparedLog, multi_valued: frozenset[str], keep: bool = False) -> EncodedEvents:
    """The events of ``prepared`` encoded for the kernel (:func:`encode_events`) for a set of multi-valued
    predicates: the one in ``ENCODINGS`` if built (``keep``: build and keep it there). A sweep builds
    those its chunks share before its workers start: the chunks replay one encoding (each encoded it
    again: ~0.7 s a chunk on `large`) and forked workers inherit it."""
    key = (id(prepared), frozenset(multi_valued))
    hit = ENCODINGS.get(key)
    if hit is not None and hit[0] is prepared:  # (the entry holds the log: its id is not reused while it lives)
        return hit[1]
    enc = encode_events(prepared, multi_valued)
    if keep:
        ENCODINGS[key] = (prepared, enc)
    return enc


def build_shared(log_ref: Any, hold_ref: Any, schedule: Schedule, objective: Objective,
                 holdout: Holdout, multi_valued: Sequence[frozenset[str]] = ()
                 ) -> tuple[list[tuple], list[tuple]]:
    """Build the checkpoint and context evaluators :func:`factmem.tuning.sweep.score_chunk` will ask for, and the events'
    encodings for the sets of multi-valued predicates given (those several chunks share), in this process (cached: on the
    prepared log, in ``CONTEXT_EVALUATORS`` and ``ENCODINGS``); returns the ``CONTEXT_EVALUATORS`` and ``ENCODINGS`` keys it added.

    The builds are independent (each reads the prepared logs, none writes them) and run side by side
    in threads: most of their time is in numpy, pandas and compiled code that let go of the GIL, and
    workers fork only once they are done — built one after the other they took ~1.7 s on `large`
    with one core idle, side by side ~0.5–0.8 s less."""
    prepared = resolve_log(log_ref)
    held_out = None if hold_ref is None else resolve_log(hold_ref)
    plan, _ = plan_parts(prepared, held_out, schedule, holdout)
    added, encoded = [], []
    obj = objective.to_dict()
    builds: list[Callable[[], object]] = []  # the longest first: the context evaluators
    # each build listed once, also when one log is both the log and the held-out one (built one after
    # the other, the second found the first's in the caches; listed twice, both would be built at once)
    checkpoint_logs: set[int] = set()
    for prep, _, time_ranges in plan:
        key = context_key(prep, obj, time_ranges, holdout.seed)
        if key not in CONTEXT_EVALUATORS and key not in added:
            added.append(key)
            builds.insert(0, functools.partial(cached_context_evaluator, prep, obj, time_ranges, holdout.seed))
        if id(prep) not in checkpoint_logs:
            checkpoint_logs.add(id(prep))
            builds.append(functools.partial(prep.evaluator, schedule.checkpoints(prep.start, prep.end)))
        for mv in dict.fromkeys(multi_valued):
            if (id(prep), mv) not in ENCODINGS and (id(prep), mv) not in encoded:
                encoded.append((id(prep), mv))
                builds.append(functools.partial(encoded_events, prep, mv, keep=True))
    with ThreadPoolExecutor(max_workers=max(1, min(len(builds), os.cpu_count() or 1))) as pool:
        for done in [pool.submit(build) for build in builds]:
            done.result()  # (an error is raised here, as it was when built in this thread)
    return added, encoded


def plan_parts(prepared: PreparedLog, held_out: PreparedLog | None, schedule: Schedule, holdout: Holdout
               ) -> tuple[list[tuple[PreparedLog, dict[str, tuple[int, int]], dict[str, tuple[int, int]]]], int | None]:
    """Per log: (log, checkpoint index ranges by part, time ranges by part), and the split time."""
    checkpoints = schedule.checkpoints(prepared.start, prepared.end)
    everything = (np.iinfo(np.int64).min, np.iinfo(np.int64).max)
    if holdout.mode == "log":
        assert held_out is not None
        held_out_checkpoints = schedule.checkpoints(held_out.start, held_out.end)
        return [(prepared, {"train": (0, len(checkpoints))}, {"train": everything}),
                (held_out, {"test": (0, len(held_out_checkpoints))}, {"test": everything})], None
    if holdout.mode == "time":
        split = holdout.split
        split_at = int(split) if split > 1 else int(prepared.start + split * (prepared.end - prepared.start))
        if not prepared.start < split_at < prepared.end:
            raise InputError(f"split at {split_at} is outside the log ({prepared.start}..{prepared.end})")
        cut = int(np.searchsorted(checkpoints, split_at, "left"))
        for label, (a, b) in (("train", (0, cut)), ("test", (cut, len(checkpoints)))):
            if b <= a:
                raise InputError(f"the {label} part has no checkpoints; change the split or the schedule")
        return [(prepared, {"train": (0, cut), "test": (cut, len(checkpoints))},
                 {"train": (everything[0], split_at), "test": (split_at, everything[1])})], split_at
    return [(prepared, {"all": (0, len(checkpoints))}, {"all": everything})], None

"""Mutation check: apply each mutant of :data:`MUTANTS` — a realistic slip a developer could make,
as exact text replacements in one file — to a copy of the tree, run the tests named for it, and
print KILLED (a test failed) or SURVIVED (every named test passed: no test sees the slip).

Usage (from the repository root; not part of the default test run)::

    .venv/bin/python tests/mutation/run.py              # every mutant
    .venv/bin/python tests/mutation/run.py WB5 J1 T4    # some of them
    .venv/bin/python tests/mutation/run.py --list       # names, files and what each changes
    .venv/bin/python tests/mutation/run.py --baseline   # first check the named tests pass unmutated
    .venv/bin/python tests/mutation/run.py --check      # only check every original text is still there

The working tree is never changed: the package, tests and data are copied to a temporary folder once
(``.venv``, ``.git`` and caches left out), each mutant is applied there, its tests run there with
``python -m pytest -x`` (the copy's ``factmem`` is the one imported: checked before the first mutant),
and the file is restored before the next one; the folder is removed at the end, on Ctrl-C too.

A mutant whose original text is no longer found exactly once is reported STALE (the code changed:
update the mutant); tests that cannot run (a collection error, a time-out) are ERROR or TIMEOUT.
The exit status is 1 when any mutant survived or could not be checked.

Each mutant names the tests that cover its module — only those run, so a whole run takes minutes,
not the suite's time for each mutant. A new mutant: add a :class:`Mutant` with the exact original
text (a unique snippet of one line, or a few edits of one file for one conceptual slip), its
replacement, and the tests that should catch it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Mutant", "MUTANTS", "main"]

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_SECONDS = 600
_COPIED = ("factmem", "tests", "datasets", "notebooks", "benchmarks", "docs", "pyproject.toml", "README.md")
_IGNORED = shutil.ignore_patterns("__pycache__", ".hypothesis", ".pytest_cache", "*.pyc", "runs")


@dataclass(frozen=True)
class Mutant:
    """One slip: in ``file``, each ``(original, replacement)`` of ``edits`` (each original found
    exactly once); caught, we expect, by the pytest node ids or files of ``tests``."""

    name: str
    file: str
    edits: tuple[tuple[str, str], ...]
    tests: tuple[str, ...]
    what: str


def M(name: str, file: str, original: str, replacement: str, tests: str | tuple[str, ...], what: str,
      *more: tuple[str, str]) -> Mutant:
    return Mutant(name, file, ((original, replacement), *more), (tests,) if isinstance(tests, str) else tests, what)


WB = "tests/test_writebehind.py::"
JC = "tests/test_journal_crashes.py::"
WC = "tests/test_whatif_contexts.py::"
WI = "tests/test_whatif.py::"
DE = "tests/test_decision_edges.py::"
ST = "tests/test_sweep_tune.py::"
CX = "tests/test_context.py::"
WV = "tests/test_waves.py::"
CA = "tests/test_cardinality.py::"
FT = "tests/test_fit.py::"
SC = "tests/test_scorer.py::"
JE = "tests/test_journal_edges.py::"
TD = "tests/test_tune_decisions.py::"

#: the 13 survivors of the first mutation run (issue "Tests that catch"), then more of the same kinds
MUTANTS: tuple[Mutant, ...] = (
    # -- the 13 survivors ------------------------------------------------------------------------------
    M("WB5", "factmem/store/active.py",
      "for r in rows if status[r] == Status.ACTIVE and keys[r] == key]", "for r in rows if status[r] == Status.ACTIVE]",
      JC + "test_colliding_key_hashes_in_the_written_behind_state", "active_of: no check of the key after the hash matched"),
    M("WB2", "factmem/store/writebehind.py",
      "if todo and (todo[0].seq != self._journal_seq + 1 or any(", "if todo and (any(",
      JC + "test_a_journal_whose_first_pending_entry_skips_a_number_is_refused",
      "reopening: the first pending entry may skip a number"),
    M("J1", "factmem/store/journal.py", "if pos + args[0] + 1 > len(raw):", "if pos + args[0] + 1 >= len(raw):",
      JC + "test_every_framing_of_the_last_entry_survives_a_crash", "a journal ending with a complete batch read as cut short"),
    M("J2", "factmem/store/journal.py", "                line_no += 1\n", "                pass\n",
      JC + "test_a_damaged_entry_after_a_batch_is_named_by_its_line", "line numbers after a batch are one short"),
    M("C6", "factmem/evaluation/context.py",
      "pts = pts[rank <= max_points_per_subject].reset_index(drop=True)",
      "pts = pts[rank < max_points_per_subject].reset_index(drop=True)",
      DE + "test_sampling_keeps_exactly_the_bound_where_a_subject_has_more", "sampling keeps one point fewer than the bound",
      ("pt_session = pt_session[rank <= max_points_per_subject]", "pt_session = pt_session[rank < max_points_per_subject]")),
    M("E3", "factmem/engine/waves.py", "done = ok and below_g and (g[i] == lo[i] or not below_before)",
      "done = ok and below_g",
      (DE + "test_the_archive_time_guess_one_consolidation_late_is_corrected",
       DE + "test_archive_time_at_tiny_rates_on_dense_grids"),
      "the closed-form archive time is accepted without checking the slot before"),
    M("K4", "factmem/evaluation/cardinality_policy.py",
      'training["truth"] = (changes[change_fold != k], label)', 'training["truth"] = (changes, label)',
      DE + "test_a_fold_that_flips_the_decision_is_scored_by_the_other_folds_choice",
      "truth-trained choices learn from the held-out fold too"),
    M("K5", "factmem/evaluation/cardinality_policy.py",
      'verdict = "kept: beats" if r["vs_best_static_high"] < 0 else', 'verdict = "kept: beats" if r["vs_best_static"] < 0 else',
      DE + "test_the_richer_policy_is_kept_on_its_interval_not_its_point_estimate",
      "kept/dropped on the point estimate, not the interval"),
    M("W2", "factmem/core/context_rule.py",
      "return (-np.asarray(last_reinforced, np.int64), -np.asarray(first_seen, np.int64), np.asarray(po_rank, np.int64))",
      "return (-np.asarray(first_seen, np.int64), -np.asarray(last_reinforced, np.int64), np.asarray(po_rank, np.int64))",
      (WC + "test_ties_in_confidence_go_to_the_later_reinforcement_then_the_later_first_mention",
       WC + "test_states_and_contexts_at_equal_the_definitions"), "context ties: first_seen before last_reinforced (the rule is shared in core/context_rule.py since the "
      "shipped-context issue)"),
    M("W3", "factmem/production/compare.py", "held = at < replay.end[latest]", "held = at <= replay.end[latest]",
      (WC + "test_at_exactly_on_a_superseding_event_and_an_archiving_consolidation",
       WC + "test_states_and_contexts_at_equal_the_definitions"), "a state ending exactly at `at` still held"),
    M("T2", "factmem/tuning/decision.py", "return c.high < -min_effect if lower_is_better else c.low > min_effect",
      "return c.low < -min_effect if lower_is_better else c.low > min_effect", DE + "test_promotion_when_lower_is_better",
      "lower is better: checks the wrong end (the rule lives in tuning/decision.py since the decisions issue)"),
    M("T4", "factmem/tuning/uncertainty.py", "_LEVEL = 0.95", "_LEVEL = 0.90", DE + "test_bootstrap_interval_golden_values",
      "a 90% interval instead of 95%"),
    M("F4", "factmem/fitting/models.py",
      'entered = np.searchsorted(np.sort(entry), times, side="left")  # entry < τ',
      'entered = np.searchsorted(np.sort(entry), times, side="right")  # entry < τ',
      (DE + "test_kaplan_meier_an_entry_at_an_event_time_is_not_at_risk_then",
       DE + "test_kaplan_meier_equals_its_definition"), "Kaplan–Meier: an entry at τ counted at risk at τ"),
    # -- more: the write-behind and the journal ------------------------------------------------------
    M("WB10", "factmem/store/writebehind.py",
      "journal_applied\n            todo = [e for e in entries if e.seq > self._journal_seq]",
      "journal_applied\n            todo = [e for e in entries if e.seq >= self._journal_seq]",
      (WB + "test_killed_between_the_flush_commit_and_the_journal_truncation",),
      "reopening re-applies the last entry the store already holds"),
    M("WB11", "factmem/store/writebehind.py", "if state is None or e.next_fact_id != self._next_fact_id:",
      "if state is None:", JC + "test_a_journal_that_does_not_continue_the_file_is_refused",
      "a journal that does not continue the file's ids is applied"),
    M("WB12", "factmem/store/writebehind.py", "Evidence(session, message, source), note) == fid",
      "Evidence(session, message, source), note) is not None",
      JC + "test_a_journal_that_does_not_continue_the_file_is_refused", "a replayed remember's id is not checked"),
    M("WB13", "factmem/store/writebehind.py", "if len(rows):  # (nothing archived: nothing to write, nothing to journal)",
      "if len(rows) > 1:  # (nothing archived: nothing to write, nothing to journal)",
      JC + "test_a_consolidation_archiving_one_fact_is_made_and_journaled",
      "a consolidation archiving one fact is neither journaled nor applied"),
    M("WB14", "factmem/store/writebehind.py", "seq = self._journal_seq + 1", "seq = self._journal_seq",
      (JC + "test_the_crash_property_reopens_pending_journals",), "journal numbers repeat"),
    M("WB15", "factmem/store/writebehind.py", "self._next_evidence_id += 1", "pass",
      (JC + "test_crashes_between_calls_lose_nothing_and_repeat_nothing",), "evidence ids repeat in the write-behind path"),
    M("J3", "factmem/store/journal.py", "pos += args[0] + 1", "pos += args[0]",
      JC + "test_every_framing_of_the_last_entry_survives_a_crash", "the reader does not skip the batch's newline"),
    M("J4", "factmem/store/journal.py", "if written != len(data):", "if written < 0:",
      JC + "test_a_failed_journal_append_leaves_nothing_of_the_call", "a short write to the journal is taken for a whole one"),
    M("J5", "factmem/store/journal.py", "            self.truncate(before)\n", "\n",
      JC + "test_a_failed_journal_append_leaves_nothing_of_the_call",
      "a failed append leaves its partial bytes in the journal"),
    M("A1", "factmem/store/active.py",
      "self.chains.add(np.array([row], np.int64), np.array([key_hash], np.int64))  # (one row: no compiled code)",
      "pass", (JC + "test_crashes_between_calls_lose_nothing_and_repeat_nothing",),
      "a fact a single call created is not chained: later calls do not find it"),
    # -- landed this round: journal checks (reliability issue) ------------------------------------------
    M("JE1", "factmem/store/journal.py", 'if checksum is not None and checksum != _crc(line, payload).encode("ascii"):',
      "if False:", JE + "test_a_flipped_digit_fails_the_checksum", "the entry's checksum is not checked"),
    M("JE2", "factmem/store/calls.py", "if type(value) is not int:", "if not isinstance(value, int):",
      JE + "test_a_journal_entry_the_call_would_refuse_is_named_and_nothing_applied",
      "a journaled time may be a bool"),
    M("JE3", "factmem/store/calls.py", "if not MIN_TIME <= value <= MAX_TIME:", "if not MIN_TIME <= value:",
      JE + "test_a_journal_entry_the_call_would_refuse_is_named_and_nothing_applied",
      "a journaled time past year 9999 is applied"),
    M("JE4", "factmem/store/calls.py", 'return f"{len(subject)}\\0{subject}\\0{predicate}"',
      'return f"{subject}\\0{predicate}"', JE + "test_keys_with_nul_from_elsewhere_cannot_collide",
      "state keys that collide when a subject holds NUL"),
    M("JE5", "factmem/store/writebehind.py",
      'elif header.get("base") == self._journal_seq:  # started from the tables as they are: none flushed',
      "elif True:", JE + "test_a_journal_whose_calls_are_not_in_the_file_is_never_removed",
      "a journal started from another state of the file is applied"),
    M("JE6", "factmem/store/calls.py", "full = np.flatnonzero(np.asarray(counts, np.int64) >= MAX_COUNT)",
      "full = np.flatnonzero(np.asarray(counts, np.int64) > MAX_COUNT)",
      JE + "test_a_count_overflow_names_the_fact_on_both_paths", "a count at the top is reinforced (wraps)"),
    # -- landed this round: charges (decisions issue) -------------------------------------------------
    M("CH1", "factmem/evaluation/context_kernels.py",
      "return False, 2 if (known and first_true[tr] < t) else 4, true_now",
      "return False, 4 if (known and first_true[tr] < t) else 2, true_now",
      (DE + "test_stale_and_false_facts_are_told_apart_and_costed_apart",
       CX + "test_the_four_charge_kinds_are_counted_apart_and_costed_apart"), "stale and false swapped"),
    M("CS1", "factmem/evaluation/context_kernels.py",
      "while j > 0 and budgets[ascending[j - 1]] > budgets[ascending[j]]:",
      "while j > 0 and budgets[ascending[j - 1]] < budgets[ascending[j]]:",
      CX + "test_each_budget_scores_the_same_whatever_the_others_and_their_order",
      "the budgets walked widest first: a narrower budget gets the whole context"),
    M("CS2", "factmem/evaluation/context_kernels.py",
      "flag = bp_flag[j] if j >= bp_off[x] else bp_before[x]",
      "flag = bp_flag[j] if j > bp_off[x] else bp_before[x]",
      CX + "test_evaluator_equals_the_independent_scorer",
      "a varying state between its triple's first and second breakpoints read with the flags before the first"),
    M("CS3", "factmem/evaluation/context.py",
      'found = np.searchsorted(self._v_key, at_break[maybe], "left")',
      'found = np.searchsorted(self._v_key, at_break[maybe], "right")',
      (CX + "test_a_fact_whose_truth_ends_at_its_last_point_is_stale_there",
       CX + "test_evaluator_equals_the_independent_scorer"),
      "a state whose last point falls on its triple's breakpoint not seen to vary"),
    M("CS6", "factmem/evaluation/context.py",
      'lo = np.searchsorted(self._pt_key, self._time_keys(subj[ok], nfrom[ok]), "left")',
      'lo = np.searchsorted(self._pt_key, self._time_keys(subj[ok], nfrom[ok] + 1), "left")',
      CX + "test_a_fact_is_needed_from_the_second_after_its_first_mention",
      "a fact needed from two seconds after its first mention, not one"),
    M("CS5", "factmem/evaluation/context_kernels.py",
      "                if prod < 1e-280:  # factors are", "                if prod < 0.0:  # factors are",
      CX + "test_the_context_log_loss_equals_a_sum_of_logs",
      "the context's product of large losses never renormalized: it underflows on a wide budget"),
    M("HU1", "factmem/evaluation/metrics_kernels.py",
      "        if why == reinforced or why == superseded:\n            visible += 1\n        out[i] = grid_position",
      "        out[i] = grid_position",
      "tests/test_metrics.py::test_held_until_is_the_first_checkpoint_at_or_after_the_visible_end",
      "the checkpoint metrics see an event's end at its instant (a state reinforced on a checkpoint not held there)"),
    M("CS4", "factmem/evaluation/context_kernels.py",
      "            visible += 1  # (an event's end is a time, never OPEN: no overflow)", "            pass",
      CX + "test_evaluator_equals_the_independent_scorer",
      "a state ended by an event (reinforced, superseded) not held at a point on the event's instant"),
    M("LK1", "factmem/tuning/sweep.py",
      "child = forked.start(lambda: context_part(_stand_in_beliefs(prepared))) if caches_to_disk() else None",
      "child = None",
      "tests/test_compiled.py::test_a_first_run_compiles_the_context_kernels_in_a_child_and_loads_them",
      "load_kernels compiles everything in one process: a first run's compiling no longer in parallel"),
    M("CH2", "factmem/evaluation/context_kernels.py", "5 if (true_now or (known and passing[tr])) else 3",
      "5 if true_now else 3",
      CX + "test_the_four_charge_kinds_are_counted_apart_and_costed_apart",
      "a remark said in passing is charged as expired"),
    M("CH3", "factmem/evaluation/context.py", "stale = other & ~multi[pred] if len(multi) else other",
      "stale = other", (CX + "test_hand_worked_next_session_case", CX + "test_evaluator_equals_the_independent_scorer"),
      "next-session: another object of a multi-valued predicate charged as stale"),
    M("CH4", "factmem/evaluation/charges.py", "if name in values:", "if False:",
      CX + "test_charge_costs_parse_and_reject", "--cost accepts a kind given twice"),
    # -- the what-if ---------------------------------------------------------------------------------
    M("W4", "factmem/production/compare.py",
      "candidate = states.held & (states.effective >= context_threshold(replay.params))",
      "candidate = states.held & (states.effective > context_threshold(replay.params))",
      WC + "test_states_and_contexts_at_equal_the_definitions", "the context threshold is strict"),
    M("W5", "factmem/production/compare.py", "inside[idx[order[rank < budget]]] = True",
      "inside[idx[order[rank <= budget]]] = True", WC + "test_states_and_contexts_at_equal_the_definitions",
      "a context of k + 1 facts"),
    M("W6", "factmem/production/compare.py", "first_seen = ts[replay.origin[e[idx]]]", "first_seen = ts[e[idx]]",
      WC + "test_ties_in_confidence_go_to_the_later_reinforcement_then_the_later_first_mention",
      "first_seen taken as the latest mention"),
    M("W7", "factmem/production/compare.py",
      'n_at = int(np.searchsorted(log.events["ts"].to_numpy(), at, side="right"))\n    reversed_triples',
      'n_at = int(np.searchsorted(log.events["ts"].to_numpy(), at, side="left"))\n    reversed_triples',
      (WC + "test_at_exactly_on_a_superseding_event_and_an_archiving_consolidation",),
      "observations at exactly `at` are not in the memory at `at`"),
    M("W8", "factmem/production/compare.py", "believed = held & (eff >= replay.params.retrieval_threshold)",
      "believed = held & (eff > replay.params.retrieval_threshold)", WC + "test_states_and_contexts_at_equal_the_definitions",
      "believed needs more than the threshold"),
    # -- decisions and estimates ---------------------------------------------------------------------
    M("T5", "factmem/tuning/decision.py", "return c.high < -min_effect if lower_is_better else c.low > min_effect",
      "return c.high < -min_effect if lower_is_better else c.high > min_effect", DE + "test_promotion_when_lower_is_better",
      "higher is better: checks the wrong end"),
    M("T6", "factmem/tuning/uncertainty.py", "db = b[idx, i_num].sum(axis=1) / b[idx, i_den].sum(axis=1)",
      "db = b[idx[::-1], i_num].sum(axis=1) / b[idx[::-1], i_den].sum(axis=1)", DE + "test_bootstrap_interval_golden_values",
      "the bootstrap is not paired (each side its own subjects)"),
    M("T7", "factmem/tuning/decision.py", "    for name, c in comparisons.items():\n        if clears(",
      "    for name, c in list(comparisons.items())[:1]:\n        if clears(",
      (ST + "test_promotion_rule", TD + "test_the_rule_needs_the_minimum_effect_against_every_comparison"),
      "only the baseline is a bar to promotion (not the current parameters, not the references)"),
    # -- landed this round: decision rules (decisions issue) ------------------------------------------
    M("D1", "factmem/tuning/decision.py", "return c.high < -min_effect if lower_is_better else c.low > min_effect",
      "return c.high < min_effect if lower_is_better else c.low > min_effect",
      (DE + "test_the_minimum_effect_when_lower_is_better",
       TD + "test_the_rule_needs_the_minimum_effect_against_every_comparison"),
      "lower is better: the minimum effect on the wrong side of 0"),
    M("D2", "factmem/tuning/decision.py", "return c.high < -min_effect if lower_is_better else c.low > min_effect",
      "return c.high < -min_effect if lower_is_better else c.low > 0",
      TD + "test_the_rule_needs_the_minimum_effect_against_every_comparison", "the minimum effect is ignored"),
    M("D3", "factmem/tuning/decision.py", "worse = c.difference > 0 if lower_is_better else c.difference < 0",
      "worse = c.difference < 0", (DE + "test_below_the_empty_memory_when_lower_is_better",
                                   TD + "test_sentences_below_empty_and_tradeoffs"),
      "'below the empty memory' said the wrong way round when lower is better"),
    M("F5", "factmem/fitting/models.py", 'exits_before = np.searchsorted(np.sort(exit), times, side="left")',
      'exits_before = np.searchsorted(np.sort(exit), times, side="right")', DE + "test_kaplan_meier_equals_its_definition",
      "Kaplan–Meier: a lifetime ending at τ is not at risk at τ"),
    M("F6", "factmem/fitting/models.py", "lo, hi = np.quantile(v, [alpha / 2, 1 - alpha / 2])",
      "lo, hi = np.quantile(v, [alpha, 1 - alpha])", DE + "test_percentile_interval_golden_values",
      "the fit's percentile interval at the wrong level"),
    M("K6", "factmem/evaluation/cardinality_policy.py", "tail = (1 - confidence) / 2", "tail = 1 - confidence",
      DE + "test_the_comparison_interval_is_at_its_stated_level", "the comparison's interval at the wrong level"),
    M("K7", "factmem/evaluation/cardinality_policy.py",
      "counted_missed = np.stack([np.bincount(change_code, weights=~flags & ~still,",
      "counted_missed = np.stack([np.bincount(change_code, weights=~flags & still,",
      DE + "test_a_fold_that_flips_the_decision_is_scored_by_the_other_folds_choice",
      "the change-counting pass miscounts missed changes (the replay's counts are the table's since the "
      "estimates issue)"),
    # -- the engine and the context metrics ----------------------------------------------------------
    M("E4", "factmem/engine/waves.py", 'lo = grid_index(grid, last, "right")  # first T > last',
      'lo = grid_index(grid, last, "left")  # first T > last', WV + "test_first_archive_time_is_the_first_consolidation_below_threshold",
      "a consolidation at the reinforcement's own second archives it"),
    M("C7", "factmem/evaluation/topk.py", "if not e >= threshold:\n                if rate[s] >= 0:\n                    continue\n                e = -1.0  # below",
      "if not e > threshold:\n                if rate[s] >= 0:\n                    continue\n                e = -1.0  # below",
      CX + "test_evaluator_equals_the_independent_scorer", "the context threshold is strict in the metrics",
      ("if not e >= threshold:\n                if rate[s] >= 0:\n                    continue\n                e = -1.0\n",
       "if not e > threshold:\n                if rate[s] >= 0:\n                    continue\n                e = -1.0\n")),
    M("C8", "factmem/evaluation/topk.py",
      "            if kp >= stop[s]:  # held at none of its points\n                continue\n", "",
      ("tests/test_topk_states.py::test_equals_a_full_sort_of_each_point", CX + "test_evaluator_equals_the_independent_scorer"),
      "a state held at none of its points (it ends before its first) is a candidate at its first"),
    # -- the compiled keys of a batch (performance issue) ----------------------------------------------
    M("WB6", "factmem/store/active.py",
      "keep = self.col[\"key\"].equal(rows, keys, query)  # the key itself: hashes may collide",
      "keep = np.ones(len(rows), bool)",
      JC + "test_colliding_key_hashes_of_batches_in_the_written_behind_state",
      "lookup (a batch's): no check of the key after the hash matched"),
    M("KH1", "factmem/store/keyhash.py", "if (s_data[j] & 0xC0) != 0x80:", "if True:",
      "tests/test_state_hash.py::test_every_way_of_hashing_a_key_agrees",
      "a batch's compiled keys count a subject's bytes, not its code points, in the length prefix"),
    M("TX1", "factmem/store/texts.py", "    if w1 - w0 != digits + 1 + (s1 - s0) + 1 + (p1 - p0):\n        return False\n",
      "", "tests/test_texts.py::test_key_rows_from_the_table_compare_with_keys_unspelled",
      "a key row from the table matches a longer key with its prefix, subject and predicate in place"),
    M("TX2", "factmem/store/texts.py", "            j = order[r] if len(order) else r\n            data = b_data",
      "            j = r\n            data = b_data",
      "tests/test_texts.py::test_positions_find_each_rows_string_among_distinct_ones",
      "positions read a base row at its own index, not at its place in the table's order"),
)


def _copy_tree(dest: Path) -> None:
    for name in _COPIED:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=_IGNORED)
        elif src.exists():
            shutil.copy2(src, dest / name)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["HYPOTHESIS_PROFILE"] = "mutation"  # derandomized, no shrinking (tests/conftest.py)
    return env


def _interrupted(signum, frame):  # SIGTERM: stop like Ctrl-C, so that the copy is removed
    raise KeyboardInterrupt


def _pytest(tree: Path, tests: tuple[str, ...], timeout: float) -> tuple[int | None, float, str]:
    """(pytest's exit status or None on a time-out, seconds, the last lines of its output)."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-o", "addopts=", *tests]
    t0 = time.perf_counter()
    try:
        done = subprocess.run(cmd, cwd=tree, env=_env(), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, time.perf_counter() - t0, ""
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    return done.returncode, time.perf_counter() - t0, lines[-1] if lines else ""


def _apply(text: str, m: Mutant) -> str | None:
    """The mutated text, or None when an original is not found exactly once."""
    for original, replacement in m.edits:
        if text.count(original) != 1:
            return None
        text = text.replace(original, replacement)
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("names", nargs="*", help="mutants to run (default: all)")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--check", action="store_true", help="only check that every mutant's original text is found")
    ap.add_argument("--baseline", action="store_true", help="first run every named test file unmutated")
    ap.add_argument("--tests", nargs="+", metavar="TEST", help="run these tests for every mutant instead of its own")
    ap.add_argument("--timeout", type=float, default=TIMEOUT_SECONDS, help="seconds per mutant (default %(default)s)")
    args = ap.parse_args(argv)
    by_name = {m.name: m for m in MUTANTS}
    unknown = [n for n in args.names if n not in by_name]
    if unknown:
        ap.error(f"unknown mutants: {', '.join(unknown)} (see --list)")
    chosen = [by_name[n] for n in args.names] if args.names else list(MUTANTS)
    if args.list:
        for m in chosen:
            print(f"{m.name:6} {m.file:45} {m.what}")
        return 0
    if args.check:
        stale = [m.name for m in chosen if _apply((ROOT / m.file).read_text(encoding="utf-8"), m) is None]
        print(f"stale: {' '.join(stale)}" if stale else f"all {len(chosen)} mutants apply")
        return 1 if stale else 0

    signal.signal(signal.SIGTERM, _interrupted)
    results: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="factmem-mutants-") as tmp:
        tree = Path(tmp)
        _copy_tree(tree)
        where = subprocess.run([sys.executable, "-c", "import factmem; print(factmem.__file__)"], cwd=tree, env=_env(),
                               capture_output=True, text=True, check=True).stdout.strip()
        if not Path(where).resolve().is_relative_to(tree.resolve()):
            print(f"the copy imports factmem from {where}, not from the copy: cannot run", file=sys.stderr)
            return 2
        if args.baseline:
            files = tuple(sorted({t for m in chosen for t in m.tests}))
            status, seconds, last = _pytest(tree, files, args.timeout)
            print(f"baseline: {' '.join(files)}: {'passed' if status == 0 else 'FAILED'} ({seconds:.0f} s) {last}")
            if status != 0:
                return 2
        t_all = time.perf_counter()
        for m in chosen:
            path = tree / m.file
            original = path.read_text(encoding="utf-8")
            mutated = _apply(original, m)
            if mutated is None:
                verdict, seconds, last = "STALE", 0.0, "original text not found exactly once"
            else:
                path.write_text(mutated, encoding="utf-8")
                try:
                    status, seconds, last = _pytest(tree, tuple(args.tests or m.tests), args.timeout)
                finally:
                    path.write_text(original, encoding="utf-8")
                verdict = {0: "SURVIVED", 1: "KILLED", None: "TIMEOUT"}.get(status, "ERROR")
            results.append((m.name, verdict))
            print(f"{verdict:8} {m.name:6} {seconds:5.0f} s  {m.file}: {m.what}"
                  + (f"  [{last}]" if verdict not in ("KILLED",) else ""), flush=True)
        counts = {v: sum(1 for _, r in results if r == v) for v in ("KILLED", "SURVIVED", "STALE", "ERROR", "TIMEOUT")}
        others = ", ".join(f"{n} {v.lower()}" for v, n in counts.items() if n and v != "KILLED")
        print(f"\n{counts['KILLED']} of {len(results)} killed{'; ' + others if others else ''} "
              f"({time.perf_counter() - t_all:.0f} s)")
    return 0 if counts["KILLED"] == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())

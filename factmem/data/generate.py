"""Synthetic conversation logs with ground truth, generated from a :class:`~factmem.data.scenario.Scenario`.

>>> import tempfile
>>> ds = generate("tiny", seed=1)
>>> ds.sha256 == generate("tiny", seed=1).sha256          # the same scenario and seed, the same bytes
True
>>> out = write(ds, tempfile.mkdtemp())                   # log.jsonl, truth.csv, generalizations.csv, scenario.toml
>>> sorted(p.name for p in out.iterdir())
['generalizations.csv', 'log.jsonl', 'scenario.toml', 'truth.csv']

The world: each persona holds, for every lasting predicate, a timeline of values (exponential
lifetimes; multi-valued predicates run several timelines at once over disjoint vocabularies),
episodes (events and states with a relevance horizon) and possibly an archetype whose implied
facts hold all along (the planted generalizations). Personas talk in sessions (daily and weekly
rhythm, bursts, long absences). In every session of a persona, each fact true for the whole
session comes up with probability ``salience``; a change of value or a new episode is first
mentioned at the first session after its (exponential) mention delay, unless the change is one of
the ``unmentioned_change`` share. Noise: misstatements (a wrong value, corrected in the next user
message of the same session; truth row with an empty interval and ``noise = "misstatement"``),
one-off irrelevant facts (``noise = "irrelevant"``, relevant until the instant they were said) and
extraction errors (``noise.extraction_rate``: a mention of a world fact whose extracted object is a
value the persona never holds for that predicate, never corrected; the text still says the true
object; truth row ``[ts, ts]`` with ``noise = "extraction"``).

Every mention falls inside a truth interval of its fact (``valid_from <= ts < valid_to``; for
episodes also ``ts < relevant_until``), except misstatements and extraction errors, whose interval
is ``[ts, ts]``.
Everything is vectorized over personas, facts, sessions and mentions; the only loops run over
predicates, archetypes, and batches of geometric draws.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from factmem.core.codes import DAY
from factmem.data.draws import (
    NA,
    bernoulli_hits,
    coverage,
    exp_int,
    group_starts,
    join_strings,
    nullable_int,
    numbered_ids,
    split_template,
    string_column,
)
from factmem.data.logs import Dataset, make_dataset, save
from factmem.data.names import FIRST_NAMES, LAST_NAMES
from factmem.data.presets import PRESETS, preset, resolve
from factmem.data.scenario import Scenario
from factmem.errors import InputError

__all__ = ["generate", "write", "PRESETS", "preset", "Scenario"]

_BIG = 1 << 42  # separates personas (or groups) in one sorted int64 key; >> any relative time
_NA = NA  # "no end" sentinel for relative times
# One random stream per stage (SeedSequence children by position): a new stage goes at the end, so
# the streams of the others, and the bytes of scenarios that do not use it, stay as they were.
_STAGES = ("personas", "sessions", "timelines", "episodes", "mentions", "noise", "layout", "text", "extraction")

CORRECTION_NOTE = "corrects an earlier misstatement"


def generate(
    preset_or_scenario: str | Path | Mapping[str, Any] | Scenario, seed: int | None = None, *, personas: int | None = None
) -> Dataset:
    """Generate a dataset in memory from a preset name, a scenario (file, dict or object) and a seed.

    ``seed`` (if given) replaces the scenario's; ``personas`` (if given) replaces its number of
    personas (``generate("drift", seed=1, personas=60)``, the same as
    ``generate(preset("drift").replace(personas=60), seed=1)``); both are recorded in the dataset's
    scenario, which regenerates it. The same scenario and seed give the same bytes when written.
    The dataset's ``path`` is None until :func:`write`.
    """
    scenario = resolve(preset_or_scenario)
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise InputError(f"seed must be a non-negative integer, got {seed!r}")
        scenario = scenario.replace(seed=int(seed))
    if personas is not None:
        if isinstance(personas, bool) or not isinstance(personas, (int, np.integer)):
            raise InputError(f"personas must be a positive integer, got {personas!r}")
        scenario = scenario.replace(personas=int(personas))
    return _Generator(scenario).run()


def write(dataset: Dataset, out_dir: str | os.PathLike[str]) -> Path:
    """Write a dataset folder (log.jsonl, truth.csv, generalizations.csv, scenario.toml)."""
    return save(dataset, out_dir)


# ------------------------------------------------------------------------------------------
# the generator
# ------------------------------------------------------------------------------------------


class _Generator:
    def __init__(self, scenario: Scenario) -> None:
        self.sc = scenario
        seqs = np.random.SeedSequence(scenario.seed).spawn(len(_STAGES))
        self.rng = {name: np.random.default_rng(s) for name, s in zip(_STAGES, seqs)}
        self.T = scenario.days * DAY
        self.preds = list(scenario.predicates)
        self._vocabulary()

    # -- catalogue arrays ------------------------------------------------------------------

    def _vocabulary(self) -> None:
        preds = self.preds
        planted: dict[str, list[str]] = {p.name: [] for p in preds}
        for a in self.sc.archetypes:
            for q, o in a.implies:
                if o not in planted[q]:
                    planted[q].append(o)
        vocab: list[str] = []
        self.voff = np.zeros(len(preds), dtype=np.int64)
        self.nrand = np.zeros(len(preds), dtype=np.int64)  # random-draw part of each vocabulary
        self.local_of: list[dict[str, int]] = []
        for j, p in enumerate(preds):
            rand = [v for v in p.values if v not in planted[p.name]]
            words = rand + planted[p.name]
            self.voff[j] = len(vocab)
            self.nrand[j] = len(rand)
            self.local_of.append({w: i for i, w in enumerate(words)})
            vocab.extend(words)
        self.vocab = np.array(vocab, dtype=object)
        self.kind = np.array([p.kind for p in preds], dtype=object)
        self.pname = np.array([p.name for p in preds], dtype=object)
        self.salience = np.array([p.salience for p in preds])
        self.multi = np.array([p.cardinality == "multi" for p in preds])
        self.maxv = np.array([p.max_values for p in preds], dtype=np.int64)
        self.lifetime = np.array([p.lifetime_days for p in preds])
        self.delay = np.array([p.change_delay_days for p in preds])
        self.unmentioned = np.array([p.unmentioned_change for p in preds])
        self.state = np.array([p.episode == "state" for p in preds])
        tmpl_pre, tmpl_suf, n_t = [], [], []
        for p in preds:
            for t in p.templates:
                before, after = split_template(t)
                tmpl_pre.append(before)
                tmpl_suf.append(after)
            n_t.append(len(p.templates))
        self.tmpl_pre = np.array(tmpl_pre, dtype=object)
        self.tmpl_suf = np.array(tmpl_suf, dtype=object)
        self.n_tmpl = np.array(n_t, dtype=np.int64)
        self.tmpl_off = np.concatenate([[0], np.cumsum(self.n_tmpl)[:-1]]).astype(np.int64)

    # -- stages -----------------------------------------------------------------------------

    def run(self) -> Dataset:
        self._personas()
        self._sessions()
        facts = [self._timelines(), self._episodes()]
        f = {k: np.concatenate([x[k] for x in facts]) for k in facts[0]}
        self.f = f
        items = self._mentions(f)
        items = self._noise(items)
        items = self._extraction(items)
        return self._assemble(items)

    def _personas(self) -> None:
        rng, personas = self.rng["personas"], self.sc.personas
        combos = len(FIRST_NAMES) * len(LAST_NAMES)
        pick = rng.choice(combos, size=min(personas, combos), replace=False)
        names = np.array([f"{FIRST_NAMES[i // len(LAST_NAMES)]}_{LAST_NAMES[i % len(LAST_NAMES)]}" for i in pick], dtype=object)
        if personas > combos:  # more personas than name pairs: number the rest
            extra = np.array([f"{names[i % combos]}_{i // combos + 1}" for i in range(combos, personas)], dtype=object)
            names = np.concatenate([names, extra])
        self.names = np.sort(names)
        shares = np.array([a.share for a in self.sc.archetypes])
        u = rng.random(personas)
        self.arch = np.searchsorted(np.cumsum(shares), u, side="right") if len(shares) else np.zeros(personas, np.int64)

    def _sessions(self) -> None:
        rng, s, personas, days = self.rng["sessions"], self.sc.sessions, self.sc.personas, self.sc.days
        z = rng.standard_normal(personas)
        rate = s.rate_per_day * np.exp(s.rate_spread * z - s.rate_spread**2 / 2)
        dow = ((self.sc.start + np.arange(days) * DAY) // DAY + 3) % 7  # Monday = 0
        day_factor = np.where(dow >= 5, s.weekend_factor, 1.0)
        burst = coverage(rng, personas, days, s.bursts_per_year, s.burst_days)
        absent = coverage(rng, personas, days, s.absences_per_year, s.absence_days)
        lam = rate[:, None] * day_factor[None, :] * np.where(burst, s.burst_factor, 1.0) * ~absent
        counts = rng.poisson(lam).ravel()
        cell = np.repeat(np.arange(personas * days), counts)
        sp, sd = cell // days, cell % days
        n = len(cell)
        w = np.asarray(s.hour_weights)
        hour = rng.choice(24, size=n, p=w / w.sum())
        start = sd * DAY + hour * 3600 + rng.integers(0, 3600, size=n)
        dur = np.maximum(300, s.duration_minutes * 60 * np.exp(0.5 * rng.standard_normal(n) - 0.125)).astype(np.int64)
        order = np.lexsort((start, sp))
        sp, start, dur = sp[order], start[order], dur[order]
        # A persona's sessions never overlap: s'_i = max(s_i, s'_{i-1} + dur_{i-1} + gap), solved
        # in closed form with a per-persona cumulative max.
        step = dur + int(s.min_gap_minutes * 60)
        cs = np.cumsum(step) - step
        first = group_starts(sp)
        c = cs - cs[first]
        start = c + np.maximum.accumulate(start - c + sp * _BIG) - sp * _BIG
        keep = start + dur <= self.T
        sp, start, dur = sp[keep], start[keep], dur[keep]
        if s.shared_by == 2:
            sp, start, dur = self._pair_sessions(sp, start, dur)
        self.s_p, self.s_start, self.s_dur = sp, start, dur
        self.s_end = self.s_start + self.s_dur
        self.key_start = self.s_p * _BIG + self.s_start
        self.key_end = self.s_p * _BIG + self.s_end

    def _pair_sessions(self, sp: np.ndarray, start: np.ndarray, dur: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Conversations of two: persona 2i+1 talks in persona 2i's sessions (its own drawn ones are
        dropped); an unpaired last persona keeps its own. Sorted by (persona, start), as before."""
        personas = self.sc.personas
        partner = (sp % 2 == 1) & (sp < personas - (personas % 2))  # sessions of a second of a pair: replaced
        lead = (sp % 2 == 0) & (sp + 1 < personas)  # sessions of a first of a pair: shared
        sp = np.concatenate([sp[~partner], sp[lead] + 1])
        start = np.concatenate([start[~partner], start[lead]])
        dur = np.concatenate([dur[~partner], dur[lead]])
        order = np.lexsort((start, sp))
        return sp[order], start[order], dur[order]

    def _window(self, p: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Sessions of persona p starting at or after a and ending before b: [lo, hi)."""
        lo = np.searchsorted(self.key_start, p * _BIG + np.maximum(a, 0), side="left")
        hi = np.searchsorted(self.key_end, p * _BIG + np.minimum(b, self.T + 1), side="left")
        return lo, np.maximum(lo, hi)

    def _timelines(self) -> dict[str, np.ndarray]:
        """Validity intervals of lasting facts: random slots plus the archetypes' planted facts."""
        rng, personas, T = self.rng["timelines"], self.sc.personas, self.T
        lasting = np.flatnonzero([p.lasting for p in self.preds])
        n_arch = len(self.sc.archetypes)
        planted_single = np.full((n_arch + 1, len(self.preds)), -1, dtype=np.int64)
        pa_a_list: list[int] = []
        pa_j_list: list[int] = []
        pa_o_list: list[int] = []
        for ai, a in enumerate(self.sc.archetypes):
            for q, o in a.implies:
                j = next(i for i, p in enumerate(self.preds) if p.name == q)
                pa_a_list.append(ai)
                pa_j_list.append(j)
                pa_o_list.append(self.local_of[j][o])
                if not self.multi[j]:
                    planted_single[ai, j] = self.local_of[j][o]
        pa_a, pa_j, pa_o = (np.array(x, dtype=np.int64) for x in (pa_a_list, pa_j_list, pa_o_list))

        # random slots: one per (persona, single-valued predicate), 1..max_values per multi-valued one
        pp = np.repeat(np.arange(personas), len(lasting))
        jj = np.tile(lasting, personas)
        k = np.where(self.multi[jj], rng.integers(1, self.maxv[jj] + 1), 1)
        k = np.where(planted_single[self.arch[pp], jj] >= 0, 0, k)
        slot_p, slot_j = np.repeat(pp, k), np.repeat(jj, k)
        slot_s = np.arange(len(slot_p)) - np.repeat(np.cumsum(k) - k, k)
        life = self.lifetime[slot_j] * DAY
        n_change = np.where(np.isfinite(life), rng.poisson(T / np.where(np.isfinite(life), life, 1.0)), 0)
        n_int = 1 + n_change
        slot = np.repeat(np.arange(len(slot_p)), n_int)
        times = rng.integers(0, T, size=len(slot))
        first = np.ones(len(slot), dtype=bool)
        first[1:] = slot[1:] != slot[:-1]
        back_mean = np.where(np.isfinite(life), np.minimum(life, 3650 * DAY), 1825 * DAY)[slot]
        times = np.where(first, -1 - exp_int(rng, back_mean, len(slot)), times)
        order = np.lexsort((times, slot))
        times = times[order]  # slot stays sorted; the first row of each slot stays first
        r_p, r_j, r_s = slot_p[slot], slot_j[slot], slot_s[slot]
        # values: a walk over the slot's share of the vocabulary, never repeating the previous value
        m = np.where(self.multi[r_j], self.maxv[r_j], 1)
        share = (self.nrand[r_j] - r_s + m - 1) // m
        u = rng.random(len(slot))
        inc = np.where(first, np.floor(u * share), 1 + np.floor(u * (share - 1))).astype(np.int64)
        cum = np.cumsum(inc)
        walk = (cum - (cum - inc)[group_starts(slot)]) % share
        r_obj = r_s + m * walk
        r_to = np.full(len(slot), _NA, dtype=np.int64)
        r_to[:-1] = np.where(first[1:], _NA, times[1:])

        # planted slots: every implied fact of the persona's archetype, true all along
        has = self.arch < n_arch
        per_arch = np.bincount(pa_a, minlength=n_arch + 1) if len(pa_a) else np.zeros(n_arch + 1, np.int64)
        arch_off = np.concatenate([[0], np.cumsum(per_arch)[:-1]])
        persons = np.flatnonzero(has)
        cnt = per_arch[self.arch[persons]]
        q_p = np.repeat(persons, cnt)
        q_i = np.repeat(arch_off[self.arch[persons]], cnt) + (np.arange(cnt.sum()) - np.repeat(np.cumsum(cnt) - cnt, cnt))
        q_j, q_obj = pa_j[q_i], pa_o[q_i]
        q_from = -1 - exp_int(rng, 1825 * DAY, len(q_p))

        p_all = np.concatenate([r_p, q_p])
        j_all = np.concatenate([r_j, q_j])
        fr = np.concatenate([times, q_from])
        change = np.concatenate([~first, np.zeros(len(q_p), dtype=bool)])
        return {
            "p": p_all, "j": j_all, "obj": np.concatenate([r_obj, q_obj]) + self.voff[j_all],
            "from": fr, "to": np.concatenate([r_to, np.full(len(q_p), _NA, dtype=np.int64)]),
            "rel": np.full(len(p_all), _NA, dtype=np.int64), "change": change,
        }

    def _episodes(self) -> dict[str, np.ndarray]:
        rng, personas, T = self.rng["episodes"], self.sc.personas, self.T
        episodic = np.array([j for j, p in enumerate(self.preds) if p.kind == "episodic" and not p.irrelevant],
                            dtype=np.int64)
        rate = np.array([self.preds[j].rate_per_year for j in episodic]) * self.sc.days / 365.0
        pp = np.repeat(np.arange(personas), len(episodic))
        jj = np.tile(episodic, personas)
        n = rng.poisson(np.tile(rate, personas)) if len(episodic) else np.zeros(0, np.int64)
        e_p, e_j = np.repeat(pp, n), np.repeat(jj, n)
        t0 = rng.integers(0, T, size=len(e_p))
        rel_mean = np.array([p.relevance_days for p in self.preds])[e_j] * DAY
        until = t0 + np.maximum(600, exp_int(rng, rel_mean, len(e_p)))
        obj = np.floor(rng.random(len(e_p)) * self.nrand[e_j]).astype(np.int64)
        keep = np.ones(len(e_p), dtype=bool)
        # single-valued (states): a new episode ends the previous one
        o = np.lexsort((t0, e_j, e_p))
        e_p, e_j, t0, until, obj = e_p[o], e_j[o], t0[o], until[o], obj[o]
        same_next = np.zeros(len(e_p), dtype=bool)
        same_next[:-1] = (e_p[1:] == e_p[:-1]) & (e_j[1:] == e_j[:-1])
        nxt = np.full(len(e_p), _NA, dtype=np.int64)
        nxt[:-1] = t0[1:]
        single = ~self.multi[e_j]
        until = np.where(single & same_next, np.minimum(until, nxt), until)
        keep &= until > t0
        # multi-valued: the same triple never runs twice at once (drop the later one)
        o = np.lexsort((t0, obj, e_j, e_p))
        e_p, e_j, t0, until, obj, keep = e_p[o], e_j[o], t0[o], until[o], obj[o], keep[o]
        g = (e_p * len(self.preds) + e_j) * (int(self.nrand.max()) + 1) + obj
        gs = group_starts(g)
        gid = np.cumsum(np.r_[True, g[1:] != g[:-1]]) if len(g) else g
        run = np.maximum.accumulate(until + gid * _BIG) - gid * _BIG
        prev = np.full(len(g), -1, dtype=np.int64)
        prev[1:] = run[:-1]
        prev[gs == np.arange(len(g))] = -1
        keep &= ~(self.multi[e_j] & (t0 < prev))
        e_p, e_j, t0, until, obj = e_p[keep], e_j[keep], t0[keep], until[keep], obj[keep]
        return {
            "p": e_p, "j": e_j, "obj": obj + self.voff[e_j], "from": t0,
            "to": np.where(self.state[e_j], until, _NA), "rel": until, "change": np.ones(len(e_p), dtype=bool),
        }

    def _mentions(self, f: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Sessions in which each fact comes up: forced first mention, then Bernoulli(salience)."""
        rng = self.rng["mentions"]
        n = len(f["p"])
        episodic = self.kind[f["j"]] == "episodic"
        delay = np.where(episodic, 0, exp_int(rng, self.delay[f["j"]] * DAY, n))
        said = ~(rng.random(n) < np.where(episodic, 0.0, self.unmentioned[f["j"]]))
        a = np.where(f["change"], f["from"] + delay, f["from"])
        b = np.minimum(f["to"], f["rel"])
        lo, hi = self._window(f["p"], a, b)
        forced = f["change"] & said & (lo < hi)
        lo_b = np.where(forced, lo + 1, lo)
        hi_b = np.where(f["change"] & ~said, lo_b, hi)
        bi, bx = bernoulli_hits(lo_b, hi_b, self.salience[f["j"]], rng)
        fi = np.concatenate([np.flatnonzero(forced), bi])
        sess = np.concatenate([lo[forced], bx])
        return {"fact": fi, "sess": sess, "type": np.zeros(len(fi), dtype=np.int8)}

    def _noise(self, items: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Misstatement pairs (type 2 wrong value, type 3 its correction) and irrelevant one-offs (type 1)."""
        rng, f = self.rng["noise"], self.f
        j = f["j"][items["fact"]]
        lasting_single = (self.kind[j] != "episodic") & ~self.multi[j]
        pick = np.flatnonzero(lasting_single & (rng.random(len(j)) < self.sc.noise.misstatement_rate))
        pj = j[pick]
        true_local = f["obj"][items["fact"][pick]] - self.voff[pj]
        u = rng.random(len(pick))
        R = self.nrand[pj]
        wrong = np.where(true_local < R, (true_local + 1 + np.floor(u * (R - 1)).astype(np.int64)) % R, np.floor(u * R).astype(np.int64))
        items["type"][pick] = 3
        items["wrong"] = np.full(len(items["fact"]), -1, dtype=np.int64)
        items["wrong"][pick] = wrong + self.voff[pj]
        items["pair"] = np.full(len(items["fact"]), -1, dtype=np.int64)
        items["pair"][pick] = np.arange(len(pick))
        # the misstatement items themselves: facts not in truth yet (index -1), objects explicit
        n_mis = len(pick)
        irr = np.flatnonzero([p.irrelevant for p in self.preds])
        n_per = rng.poisson(self.sc.noise.irrelevant_per_session, size=len(self.s_p)) if len(irr) else np.zeros(len(self.s_p), np.int64)
        i_sess = np.repeat(np.arange(len(self.s_p)), n_per)
        i_j = irr[np.floor(rng.random(len(i_sess)) * len(irr)).astype(np.int64)] if len(irr) else np.zeros(0, np.int64)
        i_obj = np.floor(rng.random(len(i_sess)) * self.nrand[i_j]).astype(np.int64) + self.voff[i_j]
        out = {
            "fact": np.concatenate([items["fact"], np.full(n_mis + len(i_sess), -1, dtype=np.int64)]),
            "sess": np.concatenate([items["sess"], items["sess"][pick], i_sess]),
            "type": np.concatenate([items["type"], np.full(n_mis, 2, np.int8), np.full(len(i_sess), 1, np.int8)]),
            "j": np.concatenate([j, pj, i_j]),
            "obj": np.concatenate([f["obj"][items["fact"]], wrong + self.voff[pj], i_obj]),
            "wrong": np.concatenate([items["wrong"], np.full(n_mis + len(i_sess), -1, dtype=np.int64)]),
            "pair": np.concatenate([items["pair"], np.arange(n_mis), np.full(len(i_sess), -1, dtype=np.int64)]),
        }
        out["p"] = self.s_p[out["sess"]]
        return out

    def _extraction(self, it: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Extraction errors (type 4): a share of world-fact mentions (type 0) get a wrong object.

        ``said`` keeps the object the message text says (the true one). The wrong object is drawn
        uniformly from the predicate's random vocabulary minus every value the persona holds for
        that predicate at any time (facts and episodes of the whole log), so the extracted triple is
        never true for the persona; mentions with no such value left stay correct.
        """
        it["said"] = it["obj"].copy()
        rate = self.sc.noise.extraction_rate
        if rate <= 0:  # no draws at all: scenarios without extraction noise keep their bytes
            return it
        rng, f = self.rng["extraction"], self.f
        eligible = np.flatnonzero(it["type"] == 0)
        pick = eligible[rng.random(len(eligible)) < rate]
        u = rng.random(len(pick))
        n_pred, width = len(self.preds), int(self.nrand.max())
        # (persona, predicate, value) keys the persona ever holds, in the random vocabulary
        local = f["obj"] - self.voff[f["j"]]
        in_rand = local < self.nrand[f["j"]]
        held = np.unique(((f["p"] * n_pred + f["j"]) * width + local)[in_rand])
        pj = it["j"][pick]
        cand = ((it["p"][pick] * n_pred + pj) * width)[:, None] + np.arange(width)[None, :]
        pos = np.minimum(np.searchsorted(held, cand), max(len(held) - 1, 0))
        taken = held[pos] == cand if len(held) else np.zeros(cand.shape, dtype=bool)
        allowed = ~taken & (np.arange(width)[None, :] < self.nrand[pj][:, None])
        size = allowed.sum(axis=1)
        rank = np.floor(u * size).astype(np.int64)  # the rank-th allowed value, 0-based
        choice = np.argmax(np.cumsum(allowed, axis=1) > rank[:, None], axis=1)
        ok = size > 0
        pick, choice = pick[ok], choice[ok]
        it["obj"][pick] = choice + self.voff[it["j"][pick]]
        it["type"][pick] = 4
        return it

    def _assemble(self, it: dict[str, np.ndarray]) -> Dataset:
        sc, rng = self.sc, self.rng["layout"]
        S = len(self.s_p)
        fpm = sc.messages.facts_per_message
        mult = 2 if sc.messages.assistant_replies else 1
        # -- which user message each item goes in -------------------------------------------
        group = (it["pair"] >= 0).astype(np.int64)  # 1: misstatement pairs, after the regular items
        key = rng.random(len(it["sess"]))
        pair_key = rng.random(int(it["pair"].max()) + 1 if len(it["pair"]) else 0)
        key = np.where(group == 1, pair_key[np.maximum(it["pair"], 0)] if len(pair_key) else 0.0, key)
        sub = (it["type"] == 3).astype(np.int64)  # misstatement (2) before its correction (3)
        order = np.lexsort((sub, key, group, it["sess"]))
        it = {k: v[order] for k, v in it.items()}
        group, sub = group[order], sub[order]
        gkey = it["sess"] * 2 + group
        rank = np.arange(len(gkey)) - group_starts(gkey)
        n0 = np.bincount(it["sess"][group == 0], minlength=S)
        n1 = np.bincount(it["sess"][group == 1], minlength=S)
        nreg = -(-n0 // fpm)
        slot = np.where(group == 0, rank // fpm, nreg[it["sess"]] + rank)
        pos = np.where(group == 0, rank % fpm, 0)
        users = np.maximum(nreg + n1, 1)
        M = users * mult
        # -- messages: timestamps, line order, ids --------------------------------------------
        m_sess = np.repeat(np.arange(S), M)
        m_off = np.cumsum(M) - M
        m_j = np.arange(len(m_sess)) - m_off[m_sess]
        m_ts = sc.start + self.s_start[m_sess] + (m_j * self.s_dur[m_sess]) // M[m_sess]
        chrono = np.empty(S, dtype=np.int64)
        chrono[np.lexsort((self.s_p, self.s_start))] = np.arange(S)
        line_order = np.lexsort((m_j, chrono[m_sess], m_ts))
        line_of = np.empty(len(m_sess), dtype=np.int64)
        line_of[line_order] = np.arange(len(m_sess))
        session_ids = numbered_ids("s", S)[chrono]
        if sc.sessions.shared_by == 2:  # a pair's two copies of a session are one conversation: one id
            conv, conv_of = np.unique(np.stack([self.s_p // 2, self.s_start]), axis=1, return_inverse=True)
            conv_chrono = np.empty(conv.shape[1], dtype=np.int64)
            conv_chrono[np.lexsort((conv[0], conv[1]))] = np.arange(conv.shape[1])
            session_ids = numbered_ids("s", conv.shape[1])[conv_chrono[conv_of.ravel()]]
        message_ids = numbered_ids("m", len(m_sess))[line_of]
        item_msg = m_off[it["sess"]] + slot * mult
        # -- text ---------------------------------------------------------------------------------
        text = self._texts(it, item_msg, pos, m_sess, m_j, mult, fpm)
        # -- events (line order, then position in the message) ---------------------------------
        ev_order = np.lexsort((pos, line_of[item_msg]))
        e_msg = item_msg[ev_order]
        e = {k: v[ev_order] for k, v in it.items()}
        e_ts = m_ts[e_msg]
        note = np.where(e["type"] == 3, np.array(CORRECTION_NOTE, dtype=object), np.array(None, dtype=object))
        events = pd.DataFrame(
            {
                "ts": e_ts, "subject": self.names[e["p"]], "predicate": self.pname[e["j"]],
                "object": self.vocab[e["obj"]], "kind": self.kind[e["j"]],
                "session_id": session_ids[m_sess[e_msg]], "message_id": message_ids[e_msg], "note": note,
            }
        )
        msgs = pd.DataFrame(
            {
                "session_id": session_ids[m_sess[line_order]], "message_id": message_ids[line_order],
                "ts": m_ts[line_order],
                "speaker": np.where(m_j % mult == 0, self.names[self.s_p[m_sess]], "assistant")[line_order],
                "text": text[line_order],
            }
        )
        truth = self._truth(e, e_ts)
        return make_dataset(msgs, events, truth, self._generalizations(), sc.to_dict())

    def _texts(self, it, item_msg, pos, m_sess, m_j, mult, fpm) -> np.ndarray:
        rng, sc = self.rng["text"], self.sc
        n_msg = len(m_sess)
        t = self.tmpl_off[it["j"]] + np.floor(rng.random(len(it["j"])) * self.n_tmpl[it["j"]]).astype(np.int64)
        obj = string_column(self.vocab[it["said"]])  # what was said (an extraction error changes only the fact)
        sentence = join_strings(string_column(self.tmpl_pre[t]), obj, string_column(self.tmpl_suf[t]))
        corr = np.flatnonzero(it["type"] == 3)
        if len(corr):
            tmpl = sc.messages.correction_template
            a, rest = tmpl.split("{o}", 1) if tmpl.index("{o}") < tmpl.index("{w}") else (None, None)
            right, wrong = string_column(self.vocab[it["obj"][corr]]), string_column(self.vocab[it["wrong"][corr]])
            if a is not None and rest is not None:
                b, c = rest.split("{w}", 1)
                fixed = join_strings(pa.scalar(a), right, pa.scalar(b), wrong, pa.scalar(c))
            else:
                a, rest = tmpl.split("{w}", 1)
                b, c = rest.split("{o}", 1)
                fixed = join_strings(pa.scalar(a), wrong, pa.scalar(b), right, pa.scalar(c))
            sent = np.asarray(sentence.to_numpy(zero_copy_only=False), dtype=object)
            sent[corr] = np.asarray(fixed.to_numpy(zero_copy_only=False), dtype=object)
            sentence = string_column(sent)
        # slot matrix of sentences, joined with spaces; skipping empty cells
        grid = np.full((n_msg, fpm), None, dtype=object)
        grid[item_msg, pos] = np.asarray(sentence.to_numpy(zero_copy_only=False), dtype=object)
        out = string_column(grid[:, 0])
        for k in range(1, fpm):
            cell = string_column(grid[:, k])
            out = pc.if_else(pc.is_null(cell), out, pc.binary_join_element_wise(out, cell, " "))
        text = np.asarray(out.to_numpy(zero_copy_only=False), dtype=object)
        small = np.array(sc.messages.small_talk, dtype=object)
        reply = np.array(sc.messages.assistant_texts, dtype=object)
        pick_s = small[np.floor(rng.random(n_msg) * len(small)).astype(np.int64)]
        pick_r = reply[np.floor(rng.random(n_msg) * len(reply)).astype(np.int64)]
        text = np.where(pd.isna(text), pick_s, text)
        return np.where(m_j % mult == 0, text, pick_r)

    def _truth(self, e: dict[str, np.ndarray], e_ts: np.ndarray) -> pd.DataFrame:
        f, start = self.f, self.sc.start
        mis = e["type"] == 2
        irr = e["type"] == 1
        ext = e["type"] == 4  # extraction errors: never true, like misstatements, but never corrected
        n_f = len(f["p"])
        p = np.concatenate([f["p"], e["p"][mis], e["p"][irr], e["p"][ext]])
        j = np.concatenate([f["j"], e["j"][mis], e["j"][irr], e["j"][ext]])
        obj = np.concatenate([f["obj"], e["obj"][mis], e["obj"][irr], e["obj"][ext]])
        frm = np.concatenate([f["from"] + start, e_ts[mis], e_ts[irr], e_ts[ext]])
        to = np.concatenate([np.where(f["to"] == _NA, _NA, f["to"] + start), e_ts[mis], np.full(irr.sum(), _NA),
                             e_ts[ext]])
        rel = np.concatenate([np.where(f["rel"] == _NA, _NA, f["rel"] + start), np.full(mis.sum(), _NA), e_ts[irr],
                              np.full(ext.sum(), _NA)])
        noise = np.concatenate([np.full(n_f, None, dtype=object), np.full(mis.sum(), "misstatement", dtype=object),
                                np.full(irr.sum(), "irrelevant", dtype=object),
                                np.full(ext.sum(), "extraction", dtype=object)])
        o = np.lexsort((obj, j, p, frm))
        return pd.DataFrame(
            {
                "subject": self.names[p[o]], "predicate": self.pname[j[o]], "object": self.vocab[obj[o]],
                "kind": self.kind[j[o]], "valid_from": frm[o],
                "valid_to": nullable_int(to[o]),
                "relevant_until": nullable_int(rel[o]),
                "noise": noise[o],
            }
        )

    def _generalizations(self) -> pd.DataFrame:
        """One row per (persona with an archetype, implied fact)."""
        archs = self.sc.archetypes
        cols = ("gen_id", "subject", "predicate", "object", "note", "support_predicate", "support_object")
        persons = np.flatnonzero(self.arch < len(archs))
        if not len(persons):
            return pd.DataFrame({c: pd.Series([], dtype="str") for c in cols})
        n_imp = np.array([len(a.implies) for a in archs], dtype=np.int64)
        imp_off = np.cumsum(n_imp) - n_imp
        sup_p = np.array([q for a in archs for q, _ in a.implies], dtype=object)
        sup_o = np.array([o for a in archs for _, o in a.implies], dtype=object)
        a_of = self.arch[persons]
        cnt = n_imp[a_of]
        gen = np.repeat(np.arange(len(persons)), cnt)
        k = np.arange(cnt.sum()) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        imp = imp_off[a_of][gen] + k
        arch = a_of[gen]
        return pd.DataFrame(
            {
                "gen_id": numbered_ids("g", len(persons), width=5)[gen],
                "subject": self.names[persons][gen],
                "predicate": np.array([a.predicate for a in archs], dtype=object)[arch],
                "object": np.array([a.object for a in archs], dtype=object)[arch],
                "note": np.array([a.note for a in archs], dtype=object)[arch],
                "support_predicate": sup_p[imp],
                "support_object": sup_o[imp],
            }
        )

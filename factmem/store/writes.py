"""Set-based writes of a FactStore: ``ingest`` (a batch, through :mod:`factmem.engine.kernel`) and
``replay`` (a log with consolidations, through :mod:`factmem.engine.waves`), and the bulk writes they share.

A mixin of :class:`factmem.store.FactStore`; it uses the store's connection, id counters and
transactions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from factmem.core.codes import NO_TIME, OPEN, EndReason, Status
from factmem.core.timeutil import check_times, to_seconds
from factmem.engine import kernel
from factmem.store.base import StoreBase
from factmem.store.batch import Batch, load_batch
from factmem.store.calls import MAX_COUNT, check_count
from factmem.store.keyhash import keys_and_hashes
from factmem.store.schema import ACTION_LABELS, KIND_LABELS, REASON_LABELS, SOURCE_LABELS, STATUS_LABELS, text_column

if TYPE_CHECKING:
    from factmem.store.writebehind import ActiveState

#: a batch larger than this is written set-based at once, not behind (its own statements amortize
#: DuckDB's fixed costs; held behind, millions of rows would sit in memory as Python strings)
BEHIND_MAX_EVENTS = 65_536

__all__ = ["IngestResult", "ReplayResult", "BatchWrites"]

#: keys are packed as (subject, predicate, object) codes in one int64 while the product of the
#: dictionaries' sizes stays below this; beyond it the (subject, predicate) pairs are numbered first
_PACKED_LIMIT = 2 ** 62


@dataclass(frozen=True)
class IngestResult:
    """What one ``ingest`` did. ``fact_ids`` is aligned with the input rows."""

    events: int
    inserted: int
    reinforced: int
    superseded: int
    fact_ids: np.ndarray

    def __repr__(self) -> str:
        return (f"IngestResult(events={self.events}, inserted={self.inserted}, "
                f"reinforced={self.reinforced}, superseded={self.superseded})")


@dataclass(frozen=True)
class ReplayResult:
    """What one ``replay`` did."""

    events: int
    inserted: int
    reinforced: int
    superseded: int
    archived: int
    consolidations: int


class BatchWrites(StoreBase):
    """``ingest`` and ``replay`` (mixed into FactStore)."""

    def ingest(self, events: Any) -> IngestResult:
        """Remember a whole batch at once, set-based.

        ``events``: a DataFrame, an Arrow table or a file (.parquet, .csv, .jsonl) with columns ts,
        subject, predicate, object, kind and optional session_id, message_id, note. The result is
        identical to calling :meth:`remember` for each row in order of (ts, row order). A rejected
        batch changes nothing.
        """
        self._writable()
        batch = events if isinstance(events, Batch) else load_batch(events)
        with self._lock:
            state = self._behind_state() if len(batch) <= BEHIND_MAX_EVENTS else None
            if state is not None:  # written behind (factmem.store.writebehind)
                return self._ingest_behind(state, batch)
        with self._transaction():
            return self._ingest(batch)

    def _ingest_behind(self, state: ActiveState, batch: Batch) -> IngestResult:
        result = self._ingest(batch, state)
        if result.events:
            self._called(state)
        return result

    def _prepare(self, batch: Batch, state: ActiveState | None = None) -> _Prepared:
        """Encode a batch (keys, objects, global order) and fetch the active facts of its keys (from
        the table, or from the write-behind ``state``)."""
        n = len(batch)
        p = self._params
        ts = batch.column("ts").to_numpy()
        rows = np.arange(n, dtype=np.int64)
        if n and (np.diff(ts) >= 0).all():
            gpos = rows  # already in (ts, row) order: the common case of logs
        else:
            gorder = np.lexsort((rows, ts))  # global (ts, row) order
            gpos = np.empty(n, np.int64)
            gpos[gorder] = rows

        s_codes, s_dict = batch.encoded("subject")
        p_codes, p_dict = batch.encoded("predicate")
        o_codes, o_dict = batch.encoded("object")
        s_codes, o_codes = s_codes.astype(np.int64), o_codes.astype(np.int64)  # packed into int64 keys below
        n_p, n_o = np.int64(len(p_dict)), np.int64(len(o_dict) + 1)
        p_multi = np.asarray(pc.is_in(p_dict, value_set=pa.array(sorted(p.multi_valued_predicates), pa.string())))
        multi_ev = p_multi[p_codes]
        # a key is (subject, predicate), and the object too for a multi-valued predicate, packed in one
        # int64: k_raw = (subject * n_p + predicate) * n_o + (object + 1 or 0). Sorting the events by it
        # (stably: global order within a key) numbers the keys as a side effect, in one sort.
        sp_raw = s_codes * n_p + p_codes
        if len(s_dict) * int(n_p) * int(n_o) >= _PACKED_LIMIT:  # huge dictionaries: number the pairs first
            sp_codes, sp_first = pd.factorize(sp_raw, sort=True)
            sp_raw = sp_codes.astype(np.int64)
        else:
            sp_first = None
        k_raw = sp_raw * n_o + np.where(multi_ev, o_codes + 1, 0)
        order, k_sorted = _stable_order(k_raw, gpos if gpos is not rows else None)
        new_key = np.ones(n, bool)
        new_key[1:] = k_sorted[1:] != k_sorted[:-1]
        key_sorted = np.cumsum(new_key) - 1
        k_uniq = k_sorted[new_key]  # ascending: key i is k_uniq[i]
        n_keys = len(k_uniq)
        sp_of_key = k_uniq // n_o
        sp_new = np.ones(n_keys, bool)
        sp_new[1:] = sp_of_key[1:] != sp_of_key[:-1]
        sp_uniq = sp_of_key[sp_new]  # ascending (subject, predicate) pairs, packed
        pair = sp_uniq if sp_first is None else sp_first[sp_uniq]
        kind = batch.kind_codes()

        # active facts of the touched (subject, predicate) pairs
        if state is None:
            _fm_pairs = pa.table({
                "sp": pa.array(np.arange(len(sp_uniq), dtype=np.int64)),
                "subject": s_dict.take(pa.array(pair // n_p)),
                "predicate": p_dict.take(pa.array(pair % n_p)),
            })
            ex = self._db.sql(
                "SELECT q.sp, f.id, f.object, f.confidence, f.reinforcement_count, f.last_reinforced, f.decay_rate "
                "FROM memory_facts f JOIN _fm_pairs q ON f.subject = q.subject AND f.predicate = q.predicate "
                "WHERE f.status = 'active'").to_arrow_table()
            pair_keys = pair_hash = pair_of_row = None
            ex_sp, ex_id, ex_conf, ex_cnt, ex_last, ex_rate = (ex.column(name).to_numpy() for name in (
                "sp", "id", "confidence", "reinforcement_count", "last_reinforced", "decay_rate"))
            ex_obj = np.asarray(pc.index_in(ex.column("object"), value_set=o_dict).fill_null(-1), dtype=np.int64)
        else:
            # the pairs' keys and hashes serve the lookup here and the new facts' rows in the state later
            pair_keys, pair_hash = keys_and_hashes(s_dict, p_dict, pair // n_p, pair % n_p)
            pair_of_row = np.empty(n, np.int64)
            pair_of_row[order] = (np.cumsum(sp_new) - 1)[key_sorted]
            ex_sp, rows = state.lookup(pair_keys, pair_hash)
            c = state.col
            ex_id, ex_obj = c["id"][rows], c["object"].positions(rows, o_dict)
            ex_conf, ex_cnt, ex_last, ex_rate = c["confidence"][rows], c["count"][rows], c["last"][rows], c["rate"][rows]
        ex_multi = p_multi[pair[ex_sp] % n_p] if len(ex_sp) else np.zeros(0, bool)
        ex_kraw = sp_uniq[ex_sp] * n_o + np.where(ex_multi, ex_obj + 1, 0)
        at = np.minimum(np.searchsorted(k_uniq, ex_kraw), max(n_keys - 1, 0))
        # multi-valued facts whose object is not in the batch are untouched
        keep = (k_uniq[at] == ex_kraw) if n_keys else np.zeros(len(ex_kraw), bool)
        ex_key = at.astype(np.int64)
        key_multi = np.zeros(n_keys, bool)
        key_multi[key_sorted] = multi_ev[order]
        predicate_names = p_dict.to_pylist()
        kind_sorted, predicate_sorted = kind[order], p_codes[order]  # gathers cost: once each
        return _Prepared(
            n=n, n_keys=n_keys, order=order, key=key_sorted, gpos=gpos[order], obj=o_codes[order],
            ts=ts[order], kind=kind_sorted, key_multi=key_multi,
            predicate=predicate_sorted, predicate_names=predicate_names,
            new_rate=p.decay_rates_for(kind_sorted, predicate_sorted, predicate_names),
            ex_key=ex_key[keep], ex_obj=ex_obj[keep], ex_id=ex_id[keep], ex_conf=ex_conf[keep], ex_cnt=ex_cnt[keep],
            ex_last=ex_last[keep], ex_rate=ex_rate[keep],
            pair_keys=pair_keys, pair_hash=pair_hash, pair_of_row=pair_of_row,
        )

    def _ingest(self, batch: Batch, behind: ActiveState | None = None) -> IngestResult:
        n = len(batch)
        if n == 0:
            return IngestResult(0, 0, 0, 0, np.empty(0, np.int64))
        p = self._params
        prepared = self._prepare(batch, behind)
        n_keys, order = prepared.n_keys, prepared.order
        # the events in key order: their key, global (ts, row) position, object, time and kind
        event_key, event_gpos, event_object, event_ts, event_kind = (
            prepared.key, prepared.gpos, prepared.obj, prepared.ts, prepared.kind)
        ex_key, ex_obj, ex_id, ex_conf, ex_cnt, ex_last, ex_rate = (
            prepared.ex_key, prepared.ex_obj, prepared.ex_id, prepared.ex_conf, prepared.ex_cnt, prepared.ex_last,
            prepared.ex_rate)
        general_key = prepared.general_keys()
        outcomes: list[tuple[np.ndarray, kernel.BatchOutcome]] = []
        fast_ev = ~general_key[event_key]
        if fast_ev.any():
            state = kernel.KeyState.empty(n_keys)
            single = ~general_key[ex_key]
            single_key = ex_key[single]
            state.has[single_key] = True
            state.obj[single_key] = ex_obj[single]
            state.id[single_key] = ex_id[single]
            state.confidence[single_key] = ex_conf[single]
            state.count[single_key] = ex_cnt[single]
            state.last_reinforced[single_key] = ex_last[single]
            state.decay_rate[single_key] = ex_rate[single]
            idx = np.flatnonzero(fast_ev)
            outcomes.append((idx, kernel.replay_fast(event_key[idx], event_object[idx], event_ts[idx],
                                                     event_kind[idx], event_gpos[idx], state, p,
                                                     new_rate=prepared.new_rate[idx])))
        if (~fast_ev).any():
            idx = np.flatnonzero(~fast_ev)
            gen = general_key[ex_key]
            existing = pd.DataFrame({
                "key": ex_key[gen], "obj": ex_obj[gen], "id": ex_id[gen], "confidence": ex_conf[gen],
                "count": ex_cnt[gen], "last_reinforced": ex_last[gen], "decay_rate": ex_rate[gen],
            })
            outcomes.append((idx, kernel.replay_general(event_key[idx], event_object[idx], event_ts[idx],
                                                        event_kind[idx], event_gpos[idx], prepared.key_multi,
                                                        existing, p, new_rate=prepared.new_rate[idx])))

        ev_ref = np.empty(n, np.int64)
        ev_ins = np.empty(n, bool)
        ev_conf = np.empty(n)
        parts = []
        for idx, out in outcomes:
            ev_ref[idx], ev_ins[idx], ev_conf[idx] = out.ref, out.inserted, out.confidence
            f = dict(out.facts)
            f["row"] = np.where(f["ref"] < 0, order[idx[np.maximum(f["first_event"], 0)]], -1)
            parts.append(f)
        facts = {c: np.concatenate([f[c] for f in parts]) for c in parts[0]}
        ev_id = self._write_batch(batch, order, ev_ref, ev_ins, ev_conf, event_gpos, facts, behind, prepared)

        fact_ids = np.empty(n, np.int64)
        fact_ids[order] = ev_id
        superseded = int((facts["status"] == Status.SUPERSEDED).sum())
        return IngestResult(n, int(ev_ins.sum()), int(n - ev_ins.sum()), superseded, fact_ids)

    def _write_batch(self, batch: Batch, order, ev_ref, ev_ins, ev_conf, event_gpos, facts: dict[str, np.ndarray],
                     state: ActiveState | None = None, prepared: _Prepared | None = None) -> np.ndarray:
        """Number the new facts, insert them, update touched ones, append evidence — inside the
        caller's transaction, or (``state``) journaled and held behind — and advance the id counters.
        Returns each event's fact id.

        Status and action strings are spelled by SQL from integer codes: building millions of
        Python strings would cost more than the inserts themselves."""
        prov, ids = kernel.assign_ids(ev_ref, self._next_fact_id)
        ev_id = kernel.resolve(ev_ref, prov, ids)
        facts["id"] = kernel.resolve(facts["ref"], prov, ids)
        facts["supersedes_id"] = kernel.resolve(facts["supersedes"], prov, ids)
        t = batch.table
        is_new = facts["ref"] < 0
        new_ids = facts["id"][is_new]
        new_tbl = upd = gone = None
        if len(new_ids):
            by_id = np.flatnonzero(is_new)[_dense_order(new_ids)]  # one gather a column below
            new = {c: facts[c][by_id] for c in
                   ("id", "row", "confidence", "count", "last_reinforced", "decay_rate", "status",
                    "status_changed_at", "supersedes_id")}
            rows = pa.array(new["row"])
            changed = new["status_changed_at"]
            sup = new["supersedes_id"]
            codes = new["status"].astype(np.int8)
            new_tbl = pa.table({
                "id": pa.array(new["id"]),
                "subject": t.column("subject").take(rows),
                "predicate": t.column("predicate").take(rows),
                "object": t.column("object").take(rows),
                "note": t.column("note").take(rows),
                "kind": text_column(batch.kind_codes()[new["row"]], KIND_LABELS),
                "confidence": pa.array(new["confidence"]),
                "reinforcement_count": pa.array(new["count"]),
                "first_seen": t.column("ts").take(rows),
                "last_reinforced": pa.array(new["last_reinforced"]),
                "decay_rate": pa.array(new["decay_rate"]),
                "status": text_column(codes, STATUS_LABELS),
                "supersedes_id": pa.array(sup, mask=sup == kernel.NO_REF),
                "status_changed_at": pa.array(changed, mask=changed == NO_TIME),
                "status_reason": text_column(codes - 1, REASON_LABELS, null=codes == Status.ACTIVE),
            })
        was = ~is_new
        old = {c: v[was] for c, v in facts.items()}
        old_id = old["id"]
        codes = old["status"]
        again = old["reinforced"].astype(bool)
        left = codes != Status.ACTIVE
        if again.any() and (old["count"][again] < 0).any():  # a count past BIGINT's largest wrapped around
            check_count(np.full(int(again.sum()), MAX_COUNT) * (old["count"][again] < 0), old_id[again])
        if was.any():
            # two narrow updates instead of one over six columns: most touched facts were only
            # reinforced, a few changed status (DuckDB's cost grows with the columns updated)
            if again.any():
                upd = pa.table({
                    "id": pa.array(old_id[again]),
                    "confidence": pa.array(old["confidence"][again]),
                    "reinforcement_count": pa.array(old["count"][again]),
                    "last_reinforced": pa.array(old["last_reinforced"][again]),
                })
            if left.any():
                changed = old["status_changed_at"][left]
                gone = pa.table({
                    "id": pa.array(old_id[left]),
                    "status": text_column(codes[left], STATUS_LABELS),
                    "status_changed_at": pa.array(changed, mask=changed == NO_TIME),
                    "status_reason": text_column(codes[left] - 1, REASON_LABELS),
                })
        # evidence: one row per event, numbered in global order (event_gpos is a permutation: invert it)
        by_global = np.empty(len(event_gpos), np.int64)
        by_global[event_gpos] = np.arange(len(event_gpos))
        in_rows = order[by_global]
        if (in_rows == np.arange(len(in_rows))).all():
            sess, msg, obs = t.column("session_id"), t.column("message_id"), t.column("ts")
        else:
            ev_rows = pa.array(in_rows)
            sess, msg, obs = (t.column(c).take(ev_rows) for c in ("session_id", "message_id", "ts"))
        ev_tbl = pa.table({
            "id": pa.array(np.arange(self._next_evidence_id, self._next_evidence_id + len(event_gpos),
                                     dtype=np.int64)),
            "fact_id": pa.array(ev_id[by_global]),
            "session_id": sess,
            "message_id": msg,
            "observed_at": obs,
            # insert 0, reinforce 1
            "action": text_column((~ev_ins[by_global].astype(bool, copy=False)).view(np.int8), ACTION_LABELS),
            "confidence": pa.array(ev_conf[by_global]),
            "source": text_column(np.zeros(len(by_global), np.int8), SOURCE_LABELS),
        })
        if state is None:
            self._write_tables(new_tbl, upd, gone, ev_tbl)
            if gone is not None:
                self._mark_stale_parents_of(old_id[left])
        else:
            # everything that can fail comes before the journal: then the changes, numpy assignments
            rows_again = state.rows_of(old_id[again]) if upd is not None else None
            rows_left = state.rows_of(old_id[left]) if gone is not None else None
            self._journaled("ingest", (), batch=t)  # durable before anything changes
            if new_tbl is not None:
                assert prepared is not None and prepared.pair_keys is not None and prepared.pair_of_row is not None \
                    and prepared.pair_hash is not None
                new_pair = prepared.pair_of_row[new["row"]]
                state.append({
                    "id": new["id"], "key": prepared.pair_keys.take(pa.array(new_pair)),
                    "object": new_tbl.column("object"),
                    "confidence": new["confidence"], "count": new["count"], "last": new["last_reinforced"],
                    "rate": new["decay_rate"], "status": new["status"].astype(np.int8),
                    "changed_at": new["status_changed_at"],
                }, chunk=new_tbl, hashes=prepared.pair_hash[new_pair])
            if rows_again is not None:
                state.update(rows_again, confidence=old["confidence"][again],
                             count=old["count"][again], last=old["last_reinforced"][again])
            if rows_left is not None:
                changed = old["status_changed_at"][left]
                state.update(rows_left, status=codes[left].astype(np.int8),
                             changed_at=np.where(changed == NO_TIME, state.col["changed_at"][rows_left], changed))
            state.add_evidence(ev_tbl)
        self._next_fact_id += len(ids)
        self._next_evidence_id += len(ev_id)
        return ev_id

    def _write_tables(self, new_tbl: pa.Table | None, upd: pa.Table | None, gone: pa.Table | None,
                      ev_tbl: pa.Table) -> None:
        """The set-based statements of :meth:`_write_batch` (the tables are read by DuckDB's
        replacement scans, by their names here)."""
        if new_tbl is not None:
            self._db.execute(
                "INSERT INTO memory_facts SELECT id, subject, predicate, object, note, kind, confidence, "
                "reinforcement_count, first_seen, last_reinforced, decay_rate, status, supersedes_id, "
                "status_changed_at, status_reason, false FROM new_tbl")
        if upd is not None:
            self._db.execute(
                "UPDATE memory_facts SET confidence = u.confidence, reinforcement_count = u.reinforcement_count, "
                "last_reinforced = u.last_reinforced FROM upd u WHERE memory_facts.id = u.id")
        if gone is not None:
            self._db.execute(
                "UPDATE memory_facts SET status = u.status, "
                "status_changed_at = coalesce(u.status_changed_at, memory_facts.status_changed_at), "
                "status_reason = u.status_reason FROM gone u WHERE memory_facts.id = u.id")
        self._db.execute(
            "INSERT INTO memory_evidence SELECT id, fact_id, session_id, message_id, observed_at, action, confidence, "
            "source FROM ev_tbl")

    def replay(self, events: Any, consolidate_at: Any, prune: bool = True) -> ReplayResult:
        """Ingest a log with consolidations at the given times, set-based across the whole span.

        Identical to ``for T in sorted(consolidate_at): ingest(events with ts < T not yet
        ingested); consolidate(T, prune)`` followed by ``ingest(the rest)`` — but computed in one
        pass (:mod:`factmem.engine.waves`) and written at once. When the memory has derived facts with
        links (pruning) or keys holding several active facts, it runs exactly that loop instead.
        """
        self._writable()
        grid = _consolidation_times(consolidate_at)
        batch = events if isinstance(events, Batch) else load_batch(events)
        with self._transaction():
            prepared = self._prepare(batch) if len(batch) else None
            if self._has_links or (prepared is not None and prepared.general_keys().any()) or prepared is None:
                return self._replay_loop(batch, grid, prune)
            return self._replay_waves(batch, prepared, grid)

    def _replay_loop(self, batch: Batch, grid: np.ndarray, prune: bool) -> ReplayResult:
        ts = batch.column("ts").to_numpy()
        totals = np.zeros(4, np.int64)
        archived = 0
        prev = None
        for T in list(grid) + [None]:  # one iteration per consolidation, not per event
            mask = np.ones(len(ts), bool) if T is None else ts < T
            if prev is not None:
                mask &= ts >= prev
            if mask.any():
                r = self._ingest(Batch(batch.table.filter(pa.array(mask)), batch.origin))
                totals += [r.events, r.inserted, r.reinforced, r.superseded]
            if T is not None:
                archived += sum(self.consolidate(int(T), prune=prune))
                prev = T
        return ReplayResult(int(totals[0]), int(totals[1]), int(totals[2]), int(totals[3]), int(archived), len(grid))

    def _replay_waves(self, batch: Batch, prepared: _Prepared, grid: np.ndarray) -> ReplayResult:
        from factmem.engine import waves

        p = self._params
        n, n_keys = prepared.n, prepared.n_keys
        init = waves.InitialState.empty(n_keys)
        init.has[prepared.ex_key] = True
        init.obj[prepared.ex_key] = prepared.ex_obj
        init.confidence[prepared.ex_key] = prepared.ex_conf
        init.last_reinforced[prepared.ex_key] = prepared.ex_last
        init.decay_rate[prepared.ex_key] = prepared.ex_rate
        init_id = np.full(n_keys, kernel.NO_REF, np.int64)
        init_id[prepared.ex_key] = prepared.ex_id
        init_cnt = np.zeros(n_keys, np.int64)
        init_cnt[prepared.ex_key] = prepared.ex_cnt
        horizon = int(grid[-1]) if grid.size else None
        res = waves.replay_waves(prepared.key, prepared.obj, prepared.ts, prepared.kind, n_keys,
                                 waves.ParamArrays.of([p]), grid, init, horizon=horizon,
                                 predicate=prepared.predicate, predicate_names=prepared.predicate_names)
        conf, ins, origin, end, reason = (res.in_event_order(a)[0] for a in ("conf", "inserted", "origin", "end", "reason"))
        ev_ref = np.where(origin >= 0, kernel.provisional_ref(prepared.gpos[np.maximum(origin, 0)]),
                          init_id[-1 - np.minimum(origin, -1)])

        # one fact per run of equal origins (a fact's events are contiguous in key order)
        start = np.ones(n, bool)
        start[1:] = origin[1:] != origin[:-1]
        run_first = np.flatnonzero(start)
        run_last = np.append(run_first[1:], n) - 1
        size = run_last - run_first + 1
        g_origin = origin[run_first]
        is_new = g_origin >= 0
        status = np.select([reason[run_last] == EndReason.SUPERSEDED, reason[run_last] == EndReason.ARCHIVED],
                           [Status.SUPERSEDED, Status.ARCHIVED], Status.ACTIVE)
        changed = np.where(status != Status.ACTIVE, end[run_last], NO_TIME)
        # a new fact supersedes the state before it when that state ended by contradiction
        first_of_key = np.ones(n, bool)
        first_of_key[1:] = prepared.key[1:] != prepared.key[:-1]
        sup = np.full(len(run_first), kernel.NO_REF, np.int64)
        inner = is_new & ~first_of_key[run_first]
        prev = run_first[inner] - 1
        sup[inner] = np.where(reason[prev] == EndReason.SUPERSEDED, ev_ref[prev], kernel.NO_REF)
        at_key_start = is_new & first_of_key[run_first]
        start_key = prepared.key[run_first[at_key_start]]
        sup[at_key_start] = np.where(init.has[start_key] & (res.init_reason[0][start_key] == EndReason.SUPERSEDED),
                                     init_id[start_key], kernel.NO_REF)
        gkey = -1 - np.minimum(g_origin, -1)
        cols = {
            "ref": ev_ref[run_first],
            "confidence": conf[run_last],
            "count": np.where(is_new, size - 1, init_cnt[gkey] + size),
            "last_reinforced": prepared.ts[run_last],
            "decay_rate": np.where(is_new, prepared.new_rate[run_first], init.decay_rate[gkey]),
            "status": status,
            "status_changed_at": changed,
            "supersedes": sup,
            "reinforced": np.ones(len(run_first), bool),
            "first_event": run_first,
        }
        # initial facts of touched keys that ended before being reinforced
        init_reason = res.init_reason[0]
        gone_k = np.flatnonzero(init.has & ((init_reason == EndReason.SUPERSEDED)
                                            | (init_reason == EndReason.ARCHIVED)))
        # active facts no event touches: archived by a consolidation or left alone
        others = self._db.execute(
            "SELECT id, confidence, reinforcement_count, last_reinforced, decay_rate FROM memory_facts "
            "WHERE status = 'active'").fetchnumpy()
        keep = ~np.isin(others["id"], prepared.ex_id)
        archive_at = waves.first_archive_time(others["confidence"][keep], others["decay_rate"][keep],
                                              others["last_reinforced"][keep], p.archive_threshold, grid,
                                              horizon if horizon is not None else np.iinfo(np.int64).min)
        hit = archive_at != OPEN
        extra = {
            "ref": np.concatenate([init_id[gone_k], others["id"][keep][hit]]),
            "confidence": np.concatenate([init.confidence[gone_k], others["confidence"][keep][hit]]),
            "count": np.concatenate([init_cnt[gone_k], others["reinforcement_count"][keep][hit]]),
            "last_reinforced": np.concatenate([init.last_reinforced[gone_k], others["last_reinforced"][keep][hit]]),
            "decay_rate": np.concatenate([init.decay_rate[gone_k], others["decay_rate"][keep][hit]]),
            "status": np.concatenate([np.where(init_reason[gone_k] == EndReason.SUPERSEDED, Status.SUPERSEDED,
                                               Status.ARCHIVED),
                                      np.full(int(hit.sum()), Status.ARCHIVED)]),
            "status_changed_at": np.concatenate([res.init_end[0][gone_k], archive_at[hit]]),
            "supersedes": np.full(len(gone_k) + int(hit.sum()), kernel.NO_REF, np.int64),
            "reinforced": np.zeros(len(gone_k) + int(hit.sum()), bool),
            "first_event": np.full(len(gone_k) + int(hit.sum()), -1, np.int64),
        }
        facts = {k: np.concatenate([cols[k], extra[k]]) for k in cols}
        facts["row"] = np.where(facts["ref"] < 0, prepared.order[np.maximum(facts["first_event"], 0)], -1)
        self._write_batch(batch, prepared.order, ev_ref, ins, conf, prepared.gpos, facts)
        st = facts["status"]
        return ReplayResult(n, int(ins.sum()), int(n - ins.sum()), int((st == Status.SUPERSEDED).sum()),
                            int((st == Status.ARCHIVED).sum()), len(grid))


@dataclass
class _Prepared:
    """A batch encoded for the kernels: events sorted by (key, global order), plus the active facts
    (``ex_*``) of the keys it touches."""

    n: int
    n_keys: int
    order: np.ndarray  # sorted position -> input row
    key: np.ndarray
    gpos: np.ndarray
    obj: np.ndarray
    ts: np.ndarray
    kind: np.ndarray
    key_multi: np.ndarray
    predicate: np.ndarray  # position in predicate_names
    predicate_names: list[str]
    new_rate: np.ndarray  # the decay rate of a fact each event would insert (predicate's, else kind's)
    ex_key: np.ndarray
    ex_obj: np.ndarray
    ex_id: np.ndarray
    ex_conf: np.ndarray
    ex_cnt: np.ndarray
    ex_last: np.ndarray
    ex_rate: np.ndarray
    # (written behind) the touched (subject, predicate) pairs' state keys and key hashes, and each input
    # row's pair: the state's rows of the facts the batch creates are made from them, not spelled again
    pair_keys: pa.Array | None = None
    pair_hash: np.ndarray | None = None
    pair_of_row: np.ndarray | None = None

    def general_keys(self) -> np.ndarray:
        """Keys holding two or more active facts (only after multi_valued_predicates changed)."""
        return np.bincount(self.ex_key, minlength=self.n_keys) >= 2


def _stable_order(values: np.ndarray, tiebreak: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The order of non-negative int64 ``values`` by (value, ``tiebreak`` or position), and the values
    in it. When value and position fit one int64 together, the packed pairs are sorted as plain
    numbers (a SIMD sort: ~3x faster than numpy's stable argsort, which is a timsort for 64-bit
    integers); else the stable argsort / lexsort."""
    n = len(values)
    second = np.arange(n, dtype=np.int64) if tiebreak is None else tiebreak
    bits = max(int(n - 1).bit_length(), 1)
    if n and int(values.min()) >= 0 and int(values.max()) < (1 << (62 - bits)) and \
            (tiebreak is None or (int(tiebreak.min()) >= 0 and int(tiebreak.max()) < n)):
        packed = np.sort((values << bits) | second)
        low = packed & ((1 << bits) - 1)
        if tiebreak is None:
            return low, packed >> bits
        rank = np.empty(n, np.int64)  # tiebreak is a permutation of 0..n-1 (global positions): back to rows
        rank[tiebreak] = np.arange(n, dtype=np.int64)
        return rank[low], packed >> bits
    order = np.argsort(values, kind="stable") if tiebreak is None else np.lexsort((tiebreak, values))
    return order, values[order]


def _dense_order(ids: np.ndarray) -> np.ndarray:
    """The order that sorts distinct ids; a scatter when they are a run of consecutive numbers (the
    new facts of a batch), else a sort."""
    if len(ids) and int(ids.max()) - int(ids.min()) + 1 == len(ids):
        order = np.full(len(ids), -1, np.int64)
        order[ids - ids.min()] = np.arange(len(ids), dtype=np.int64)
        if (order >= 0).all():
            return order
    return np.argsort(ids, kind="stable")


def _consolidation_times(consolidate_at: Any) -> np.ndarray:
    """Sorted unique int64 consolidation times; each checked like any ``at=`` (range, whole seconds)."""
    given = np.asarray(consolidate_at)
    if given.dtype.kind in "iu":
        check_times(given.ravel(), lambda i: f"consolidate_at[{i}]", field="time")
        return np.unique(given.ravel().astype(np.int64))
    return np.unique(np.asarray([to_seconds(t, name="consolidate_at") for t in given.ravel()], dtype=np.int64))

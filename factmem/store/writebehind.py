"""Write-behind: ``remember``, ``ingest`` and ``consolidate`` decided in process, made durable in a
journal, and written to DuckDB set-based, many calls at once, at the next flush.

Why: DuckDB charges every statement a fixed cost (~0.2–0.6 ms) and every statement on
``memory_facts`` a scan of its columns. Written row by row, ``remember`` is four statements (look
up, update or insert the fact, insert its evidence, commit): ~3 ms a call at a million facts. A
day of ``ingest`` plus a ``consolidate`` is eight (a join for the batch's keys' state, inserts,
two updates, consolidate's decay pass over every active fact, two commits): ~40 ms, as slow as the
seed's algorithm row by row on SQLite. Written behind, a call costs its decision in numpy and one
append to the journal with ``fdatasync``, and a flush writes thousands of calls in four statements.

**The contract is unchanged.** What a call does is decided by the same code as the row-by-row
path — :func:`remember_outcome` for ``remember``, the batch kernel for ``ingest``
(:mod:`factmem.engine.kernel`), the engine's decay expression for ``consolidate`` — from the same
numbers (the active facts' rows, as DuckDB returned them, as the calls since left them). The tables
hold the same bytes either way: property-tested against the row-by-row path and the reference
model. Every call is durable when it returns: on a file store it is in the journal, synced, before
it returns; a store that was not closed (a crash, a killed process) applies its journal when it is
next opened, through the same code, from the state the last flush left.

**Consistency.** Whatever reads or writes the tables sees every call made before it:

* every access to the connection — the store's own reads and other writes, ``store.db``,
  ``store.con`` — flushes first, and so do ``close()`` and the start of every write transaction; a
  file store the program never closed is closed (flushed) at a normal interpreter exit, so that
  other tools reading the DuckDB file find every call in its tables;
* the in-process state (:class:`ActiveState`: every active fact's key, object, confidence, count,
  last reinforcement and decay rate, in numpy columns, ~270 bytes a fact) is built from the table
  at the first call and dropped by every write that does not go through it (``replay``, an
  abstraction pass, an explicit ``transaction()``, a non-SELECT ``query()``) and by any use of
  ``store.db`` / ``store.con`` (the caller may write through them); the next call rebuilds it (one
  scan of the active facts' Arrow columns, no Python object per fact: ~0.2 s of CPU at a million).
  A flush keeps it: it writes what the state holds.

**Where it does not apply** (the call is written directly, in its own transaction, as before):
inside an explicit ``store.transaction()`` (the caller asked for its calls to commit or roll back
together); in a store with abstraction links (a supersession must mark derived parents stale, and a
consolidation prunes, in the order the calls come); for a batch of more than
:data:`~factmem.store.writes.BEHIND_MAX_EVENTS` events (its own statements amortize DuckDB's fixed
costs, and held behind its rows would sit in memory); in a read-only store; in a store whose ids are
too sparse for a dense id → row map (an imported production file with ids far beyond its row
count); and when the store is opened with ``write_behind=False``.

**The journal** (:mod:`factmem.store.journal`) is ``<store file>.journal``, beside the DuckDB file:
a header line naming the store (``store_id`` in ``factmem_meta``), then one entry per call, each a
JSON array on one line that starts with its sequence number and operation — ``remember`` (its
arguments and the fact id it returned), ``consolidate`` (time, prune, the count it returned) or
``ingest`` (the byte length of the batch that follows it as an Arrow IPC stream, then a newline) —
and the next fact id the call started from. A flush records the last sequence number it wrote
(``journal_applied`` in ``factmem_meta``) in the same transaction as the rows, then empties the
journal of those calls: a crash between the two leaves calls the store already holds, and reopening
skips them by number. An entry cut short by a crash is a call that never returned, and is dropped.
An in-memory store keeps no journal (nothing of it survives a crash).

**The flush the calls' count triggers runs in the background**: its rows are taken from the state
(copies) by the call that reaches the count, and written in a thread of their own while the next
calls are made — DuckDB compresses and writes them with the GIL released, on one thread (the
database's ``threads`` set to 1 for the flush and put back after it), on a core the calls do not
use; on a file store the thread then checkpoints, so that ``close()`` folds into the file only
what the flushes after it wrote (an A/B of a year of daily ingests: close 0.62 -> 0.48 s, the whole
loop ~5 % faster by the clock, at a little more CPU). Whatever next needs the tables (a read,
another write, the next flush, ``store.db``, ``close()``) waits for it first. Once it is written,
the journal keeps the calls made since: a new file holding the header and them, synced, renamed
over the journal, the folder synced before the next append (at every instant the journal's name
holds a file that lists every call the tables lack). A flush that fails in the background is written again by whatever next waits for it, and if
that fails too :class:`~factmem.errors.StoreWriteError` is raised there, the rows kept for the next
try and the calls in the journal.
"""

from __future__ import annotations

import atexit
import threading
import uuid
import weakref
from collections.abc import Sequence
from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa

from factmem.core.codes import KIND_CODES, NO_TIME, Status
from factmem.core.decay import age_days, effective_confidence, reinforce
from factmem.core.params import MemoryParams
from factmem.errors import FactmemError, StoreError, StoreWriteError
from factmem.store.active import ActiveState, PendingWrite
from factmem.store.base import ConsolidateResult, Evidence, StoreBase
from factmem.store.calls import check_count, state_key
from factmem.store.journal import Journal, JournalEntry, JournalError, journal_path

__all__ = ["remember_outcome", "Outcome", "WriteBehind", "FLUSH_CALLS", "FLUSH_ROWS", "forget_unclosed"]

#: flush once this many calls are pending (bounds the work a reopening may redo) ...
FLUSH_CALLS = 4096
#: ... or this many evidence rows (bounds the memory pending writes hold and the journal's size)
FLUSH_ROWS = 262_144


@dataclass(frozen=True)
class Outcome:
    """What one ``remember`` call does: ``action`` is ``reinforce`` (of ``fact_id``) or ``insert`` (a new
    fact, superseding ``superseded`` when not None); ``confidence`` is the fact's afterwards."""

    action: str
    fact_id: int | None
    confidence: float
    superseded: int | None


def remember_outcome(rows: Sequence[tuple], object: str, predicate: str, kind: str, at: int,
                     params: MemoryParams) -> Outcome:
    """The seed's rule for one call, given ``rows`` = (id, object, confidence, last_reinforced,
    decay_rate) of every active fact of the call's (subject, predicate): the identical fact is
    reinforced; else (unless the predicate is multi-valued) the latest other one, by
    (last_reinforced, id), is superseded by a new fact. One rule for both write paths."""
    same = max((r for r in rows if r[1] == object), key=lambda r: (r[3], r[0]), default=None)
    if same is not None:
        fid, _, conf, last, rate = same
        base = conf if params.reinforce_base == "stored" else effective_confidence(conf, rate, age_days(at, last))
        return Outcome("reinforce", int(fid), float(reinforce(base, params.reinforce_gain, params.confidence_cap)),
                       None)
    conflict = None
    if predicate not in params.multi_valued_predicates:
        hit = max((r for r in rows if r[1] != object), key=lambda r: (r[3], r[0]), default=None)
        conflict = int(hit[0]) if hit else None
    return Outcome("insert", None, float(params.initial_confidence[kind]), conflict)


class _Flush:
    """One flush's rows and where its calls end in the journal; written by :meth:`run` in a
    transaction of its own, in the caller's thread or (:meth:`start`) in one of its own."""

    def __init__(self, pending: PendingWrite, journal_id: str | None, journal_size: int | None):
        self.pending = pending
        self.journal_id = journal_id  # the journal whose calls these rows hold (recorded with them)
        self.journal_size = journal_size  # where its last call's entry ends (None: no journal)
        self.thread: threading.Thread | None = None
        self.written = False
        self.error: BaseException | None = None
        # (a file store's flush written in the background) checkpoint once written: DuckDB then folds
        # these rows into the file off the caller's path, and close() is left only what came after
        self.checkpoint = False

    def start(self, con: duckdb.DuckDBPyConnection) -> None:
        self.thread = threading.Thread(target=self.run, args=(con,), name="factmem-flush")
        self.thread.start()

    def finished(self) -> bool:
        return self.thread is None or not self.thread.is_alive()

    def wait(self) -> None:
        if self.thread is not None:
            self.thread.join()
            self.thread = None

    def run(self, con: duckdb.DuckDBPyConnection) -> None:
        # written in the background: DuckDB on one thread while it writes, so that the calls made
        # meanwhile keep the other core (with its default of a thread a core, the flush's threads and
        # the caller's took turns on both: a year of daily ingests ~2 % slower by the clock and the CPU)
        threads = _one_thread(con) if self.thread is not None else None
        try:
            self._write(con)
        finally:
            if threads is not None:
                try:
                    con.execute(f"SET threads = {threads}")
                except duckdb.Error:
                    pass  # left at one: the flush's own outcome is what its waiter needs to hear

    def _write(self, con: duckdb.DuckDBPyConnection) -> None:
        try:
            con.begin()
            self.pending.write(con)
            if self.journal_id is not None:
                # whose numbers journal_applied counts: reopening tells this journal's calls from another's
                con.execute("INSERT OR REPLACE INTO factmem_meta VALUES ('journal_id', ?)", [self.journal_id])
            con.commit()
            self.written = True
        except BaseException as exc:  # kept for the thread that waits for it (raised there)
            try:
                con.rollback()
            except duckdb.Error:
                pass  # DuckDB already rolled it back
            self.error = exc
            return
        if self.checkpoint:
            try:
                con.execute("CHECKPOINT")
            except duckdb.Error:
                pass  # the rows are committed (in the write-ahead log): close() checkpoints, and says what fails


def _one_thread(con: duckdb.DuckDBPyConnection) -> int | None:
    """Set the database's DuckDB threads to one; the number it had (None: left as it was)."""
    try:
        row = con.execute("SELECT current_setting('threads')").fetchone()
        threads = int(row[0]) if row is not None else 1
        if threads > 1:
            con.execute("SET threads = 1")
            return threads
    except duckdb.Error:
        pass  # a flush that cannot set it writes with the threads it has
    return None


class WriteBehind(StoreBase):
    """The write-behind paths of a FactStore (mixed into it): the state, the journal, the flush."""

    def _behind_state(self) -> ActiveState | None:
        """The in-process state when this call may be written behind (built if need be), else None."""
        if not self.write_behind or self._tx_depth or self._has_links or self._con is None or self.read_only:
            return None
        if self._active is None:
            if self._sparse_ids:
                return None
            self._active = ActiveState.build(self._db, self._next_fact_id)
            if self._active is None:
                self._sparse_ids = True  # row by row until reopened
                return None
        return self._active

    def _journaled(self, op: str, args: tuple, batch: pa.Table | None = None) -> None:
        """Make one call durable before it changes anything (a file store), or note the journal
        number of the call being re-applied at opening."""
        state = self._active
        assert state is not None
        if self._replaying is not None:
            state.last_seq = self._replaying
            return
        if self._journal is None:
            return
        if not self._journal.is_open:
            self._open_journal()
            _UNCLOSED.add(self)  # flushed at interpreter exit if never closed (the journal has it anyway)
        seq = self._journal_seq + 1
        self._journal.append(seq, op, self._next_fact_id, args, batch)
        self._journal_seq = state.last_seq = seq

    def _called(self, state: ActiveState) -> None:
        """One more call held behind: flush when enough are."""
        state.calls += 1
        if state.calls >= FLUSH_CALLS or state.pending_rows() >= FLUSH_ROWS:
            self._flush(background=True)
        elif self._flushing is not None and self._flushing.finished():
            self._finish_flush()  # (empties the journal of what it wrote as soon as it can)

    def _remember_behind(self, state: ActiveState, subject: str, predicate: str, object: str, kind: str, at: int,
                         ev: Evidence, note: str | None) -> int:
        """One call decided in process, journaled (a file store), and held for the next flush."""
        key_hash, rows = state.active_of(subject, predicate)
        out = remember_outcome(rows, object, predicate, kind, at, self._params)
        fid = out.fact_id if out.fact_id is not None else self._next_fact_id
        changed_id = fid if out.action == "reinforce" else out.superseded  # the existing fact it changes
        target = state.rows_of([changed_id]) if changed_id is not None else np.empty(0, np.int64)
        if out.action == "reinforce":
            check_count(state.col["count"][target], np.array([fid]))  # as the row-by-row UPDATE refuses it
        self._journaled("remember", (subject, predicate, object, kind, at, ev.session_id, ev.message_id, ev.source,
                                     note, fid))  # durable before anything changes
        if out.action == "reinforce":
            state.update(target, confidence=out.confidence, count=state.col["count"][target] + 1, last=at)
        else:
            if out.superseded is not None:
                state.update(target, status=Status.SUPERSEDED, changed_at=at)
                self._keys.removed(out.superseded)
            state.append_one(
                key_hash, id=fid, key=state_key(subject, predicate), object=object, confidence=out.confidence, count=0,
                last=at, rate=self._params.decay_rate_for(kind, predicate), status=Status.ACTIVE, changed_at=NO_TIME,
                subject=subject, predicate=predicate, note=note, kind=KIND_CODES[kind], first_seen=at,
                supersedes=NO_TIME if out.superseded is None else out.superseded)
            self._next_fact_id += 1
            self._keys.added(subject, predicate, fid)
        state.evidence_rows.append((self._next_evidence_id, fid, ev.session_id, ev.message_id, at, out.action,
                                    out.confidence, ev.source))
        self._next_evidence_id += 1
        self._called(state)
        return int(fid)

    def _consolidate_behind(self, state: ActiveState, at: int, prune: bool) -> ConsolidateResult:
        rows = state.due(at, self._params.archive_threshold)
        if len(rows):  # (nothing archived: nothing to write, nothing to journal)
            self._journaled("consolidate", (at, bool(prune), len(rows)))
            state.update(rows, status=Status.ARCHIVED, changed_at=at)
            self._called(state)
        return ConsolidateResult(len(rows), 0)  # no links: nothing to prune

    def _flush(self, background: bool = False) -> None:
        """Write the calls held behind, in one transaction; then empty the journal of them.

        ``background`` (the flush the count of pending calls triggers): the rows are taken from the
        state here (:meth:`ActiveState.take_pending`: copies) and written by a thread of their own
        while the next calls are made, DuckDB compressing and writing them with the GIL released; on a
        file store the thread then checkpoints (the write-ahead log folded into the file: the store's
        checkpoint_threshold is set high so that this never happens on the caller's path, and close()
        only checkpoints what came after). Whatever next uses the connection — another flush, a read,
        a write transaction, ``close()`` — waits for it first (:meth:`_finish_flush`)."""
        with self._lock:
            self._finish_flush()
            state = self._active
            con = self._con
            if state is None or not state.calls or con is None:
                return
            journal = self._journal if self._journal is not None and state.last_seq > 0 else None
            write = _Flush(state.take_pending(state.last_seq if journal is not None else None),
                           None if journal is None else journal.journal_id, None if journal is None else journal.size)
            self._flushing = write
            if background:
                write.checkpoint = self.path is not None
                write.start(con)
            else:
                self._finish_flush()

    def _finish_flush(self) -> None:
        """Wait for the flush in progress, if any, then empty the journal of the calls it wrote.
        A flush not written yet — a synchronous one, or one that failed in the background — is
        written here; if that fails it stays pending (its rows, and its calls in the journal) and
        :class:`StoreWriteError` is raised: the next use of the store tries it again first, and a
        store closed without it keeps its journal, applied when the store is next opened."""
        write = self._flushing
        if write is None:
            return
        write.wait()
        if not write.written:
            con = self._con
            if con is None:
                raise StoreError("the store is closed")
            write.run(con)
            if not write.written:
                exc, write.error = write.error, None
                assert exc is not None
                if isinstance(exc, (duckdb.IOException, duckdb.TransactionException, OSError)):
                    raise StoreWriteError(self._write_failed(exc)) from None
                raise exc
        self._flushing = None
        if write.journal_size is not None and self._journal is not None:
            self._journal.emptied(through=write.journal_size)

    def _write_failed(self, exc: BaseException) -> str:
        """What to tell a user whose flush the file system refused: the file, the system's words, and
        where the calls are kept."""
        words = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc).splitlines()[0]
        if "No space left on device" in str(exc) and "No space left on device" not in words:
            words += " (No space left on device)"
        kept = f"; the calls are kept in {self._journal.path}, applied when the store is next opened" \
            if self._journal is not None and self._journal.path.exists() else ""
        where = self.path if self.path is not None else "the in-memory store"
        return f"{where}: cannot write the pending calls to the tables: {words}{kept}"

    def _open_journal(self) -> None:
        assert self._journal is not None
        store_id = self._scalar("SELECT max(value) FROM factmem_meta WHERE key = 'store_id'")
        if store_id is None:
            store_id = uuid.uuid4().hex
            self._set_meta("store_id", store_id)
        self._journal.open(store_id, base=self._journal_seq)

    def _apply_journal(self, store_id: str | None, journal_id: str | None) -> None:
        """At opening: make the calls of a journal left by a store that was not closed (see
        :mod:`factmem.store.writebehind`) — or, read-only, refuse a store that has some. The journal
        is the real file's (another name's was renamed to it at opening:
        :func:`~factmem.store.journal.adopt_other_names`); one whose calls are not in the tables is
        never removed."""
        if self.real_path is None or not journal_path(self.real_path).exists():
            return
        journal = Journal(journal_path(self.real_path))
        header, entries = journal.read()  # every entry checked before any is applied
        todo = self._unapplied(journal, header, entries, store_id, journal_id)
        if not todo:
            if not self.read_only:
                journal.close(remove=True)  # its calls are all in the tables
            return
        if self.read_only:
            raise StoreError(f"{self.path}: {len(todo)} calls are in {journal.path.name} and not yet in the file "
                             "(the store was not closed); open it once for writing, or run "
                             "`factmem store recover`, to apply them")
        behind, self.write_behind = self.write_behind, True
        try:
            for e in todo:
                state = self._behind_state()
                if state is None or e.next_fact_id != self._next_fact_id:
                    raise JournalError(f"{journal.path}, line {e.line}: entry {e.seq} began at fact id "
                                       f"{e.next_fact_id}, the store is at {self._next_fact_id}: the journal does "
                                       "not continue this file")
                self._replaying = e.seq
                try:
                    ok = self._replay_entry(state, e)
                except FactmemError as exc:
                    raise JournalError(f"{journal.path}, line {e.line}: entry {e.seq} ({e.op}) cannot be applied: "
                                       f"{exc}") from None
                if not ok:
                    raise JournalError(f"{journal.path}, line {e.line}: entry {e.seq} ({e.op}) gave another result "
                                       "than the call returned: the journal does not continue this file")
            self._replaying = None
            self._journal_seq = todo[-1].seq
            self._flush_replayed(journal, header.get("journal_id"))
        finally:
            self._replaying = None
            self.write_behind = behind
        self.recovered_calls = len(todo)
        journal.close(remove=True)

    def _unapplied(self, journal: Journal, header: dict, entries: list[JournalEntry], store_id: str | None,
                   journal_id: str | None) -> list[JournalEntry]:
        """The entries of a journal that the tables do not hold yet (see the module docstring)."""
        if not entries:
            return []
        if header.get("store_id") != store_id:
            raise JournalError(f"{journal.path}: a journal of another store (store_id {header.get('store_id')!r}, "
                               f"this store's is {store_id!r}); move it away to open {self.path}")
        if "journal_id" not in header:  # format 2: numbers alone tell what is applied
            todo = [e for e in entries if e.seq > self._journal_seq]
        elif header["journal_id"] == journal_id:  # this journal's calls were flushed up to journal_applied
            todo = [e for e in entries if e.seq > self._journal_seq]
        elif header.get("base") == self._journal_seq:  # started from the tables as they are: none flushed
            todo = entries
        else:
            raise JournalError(
                f"{journal.path}: holds {len(entries)} calls (entries {entries[0].seq}..{entries[-1].seq}) made from "
                f"journal number {header.get('base')!r}, but the file has moved on to {self._journal_seq} without "
                "them (it was written under another name meanwhile); they were not applied and the journal is "
                "kept — move it away to open the store")
        if todo and (todo[0].seq != self._journal_seq + 1 or any(b.seq != a.seq + 1 for a, b in zip(todo, todo[1:]))):
            raise JournalError(f"{journal.path}: entries {todo[0].seq}..{todo[-1].seq} do not follow the last one the "
                               f"store holds ({self._journal_seq}): the journal is damaged")
        return todo

    def _replay_entry(self, state: ActiveState, e: JournalEntry) -> bool:
        """Make one journaled call again; whether it gave the result the call returned."""
        if e.op == "remember":
            subject, predicate, object, kind, at, session, message, source, note, fid = e.args
            return self._remember_behind(state, subject, predicate, object, kind, at,
                                         Evidence(session, message, source), note) == fid
        if e.op == "consolidate":
            at, prune, archived = e.args
            return self._consolidate_behind(state, at, prune).archived == archived
        assert e.batch is not None
        self._ingest_behind(state, e.batch)
        return True

    def _flush_replayed(self, journal: Journal, journal_id: str | None) -> None:
        """Write the calls re-applied from ``journal``, recording its id with their numbers (a crash
        before the journal is removed then finds them applied)."""
        own, self._journal = self._journal, journal
        journal.journal_id = journal_id
        try:
            self._flush()
        finally:
            self._journal = own


def forget_unclosed(store: WriteBehind) -> None:
    """A store that is closed (or failed to close) is not flushed again at exit."""
    _UNCLOSED.discard(store)


#: file stores holding calls written behind: flushed at a normal interpreter exit, so that a store the
#: program never closed leaves its tables complete for other tools (the journal covers a crash)
_UNCLOSED: weakref.WeakSet[WriteBehind] = weakref.WeakSet()


@atexit.register
def _flush_unclosed() -> None:
    for store in list(_UNCLOSED):
        try:
            store.close()
        except Exception:  # pragma: no cover - best effort at exit; reopening applies the journal
            pass

"""A faithful row-by-row port of the seed's memory to SQLite, the baseline of the benchmarks.

It follows the seed's ``remember_with_evidence`` statement for statement (identical active fact →
reinforce; else the latest conflicting active fact is superseded; insert) and its consolidate pass
(archive active facts whose effective confidence is below the threshold), one transaction per call
as a production memory would run them.

``tuned=False`` is the seed as published: its schema alone (no index) and SQLite's default journal.
``tuned=True`` (the default) is a *strong* baseline with what production would add: WAL journal with
synchronous=NORMAL and indexes on (subject, predicate, status) and status. Both compute effective
confidence inside SQLite when it has exp().
"""

from __future__ import annotations

import math
import sqlite3

from factmem.export.sqlite_format import SEED_FACTS_DDL  # the seed's CREATE TABLE, verbatim

SCHEMA = SEED_FACTS_DDL + """
CREATE TABLE IF NOT EXISTS memory_evidence (
    fact_id     INTEGER NOT NULL,
    session_id  TEXT,
    message_id  TEXT,
    observed_at INTEGER NOT NULL
);"""

# what a production deployment would add beyond the seed's listing
TUNING = """
CREATE INDEX IF NOT EXISTS idx_facts_sp ON memory_facts(subject, predicate, status);
CREATE INDEX IF NOT EXISTS idx_facts_status ON memory_facts(status);
"""

DECAY = {"explicit": 0.05, "user_preference": 0.02, "episodic": 0.30, "derived": 0.02}
INITIAL = {"explicit": 0.4, "user_preference": 0.5, "episodic": 0.4, "derived": 0.5}
REINFORCE_GAIN = 0.3
CAP = 0.99
ARCHIVE_THRESHOLD = 0.05


class SeedSqliteMemory:
    def __init__(self, path: str = ":memory:", tuned: bool = True):
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.executescript(SCHEMA)
        if tuned:
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.executescript(TUNING)
        try:
            self.conn.execute("SELECT exp(1.0)").fetchone()
            self.sql_exp = True
        except sqlite3.OperationalError:
            self.conn.create_function("exp", 1, math.exp, deterministic=True)
            self.sql_exp = False

    def remember(self, subject, predicate, obj, kind, now, session_id=None, message_id=None, note=None):
        c = self.conn
        c.execute("BEGIN")
        row = c.execute(
            "SELECT id, confidence, reinforcement_count FROM memory_facts "
            "WHERE status = 'active' AND subject = ?1 AND predicate = ?2 AND object = ?3 LIMIT 1",
            (subject, predicate, obj),
        ).fetchone()
        if row is not None:
            fid, conf, _count = row
            new_conf = min(CAP, conf + REINFORCE_GAIN * (1.0 - conf))
            c.execute(
                "UPDATE memory_facts SET confidence = ?1, reinforcement_count = reinforcement_count + 1, "
                "last_reinforced = ?2 WHERE id = ?3",
                (new_conf, now, fid),
            )
        else:
            conflict = c.execute(
                "SELECT id FROM memory_facts WHERE status = 'active' AND subject = ?1 AND predicate = ?2 "
                "AND object <> ?3 ORDER BY last_reinforced DESC, id DESC LIMIT 1",
                (subject, predicate, obj),
            ).fetchone()
            cur = c.execute(
                "INSERT INTO memory_facts (subject, predicate, object, note, kind, confidence, "
                "reinforcement_count, first_seen, last_reinforced, decay_rate, status, supersedes_id) "
                "VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, ?7, ?7, ?8, 'active', ?9)",
                (subject, predicate, obj, note, kind, INITIAL[kind], now, DECAY[kind],
                 conflict[0] if conflict else None),
            )
            fid = cur.lastrowid
            if conflict is not None:
                c.execute("UPDATE memory_facts SET status = 'superseded' WHERE id = ?1", (conflict[0],))
        c.execute(
            "INSERT INTO memory_evidence (fact_id, session_id, message_id, observed_at) VALUES (?1, ?2, ?3, ?4)",
            (fid, session_id, message_id, now),
        )
        c.execute("COMMIT")
        return fid

    def consolidate(self, now):
        c = self.conn
        c.execute("BEGIN")
        cur = c.execute(
            "UPDATE memory_facts SET status = 'archived' WHERE status = 'active' AND "
            "confidence * exp(-decay_rate * max(0.0, (?1 - last_reinforced) / 86400.0)) < ?2",
            (now, ARCHIVE_THRESHOLD),
        )
        c.execute("COMMIT")
        return cur.rowcount


def replay_prefix(events, grid, n: int, *, tuned: bool, path: str) -> float:
    """Seconds the port takes for the first ``n`` events of ``events`` (a DataFrame sorted by ts),
    one ``remember`` per event and the consolidations of ``grid`` (sorted times) as they fall due."""
    import time

    mem = SeedSqliteMemory(path, tuned=tuned)
    sub = events.iloc[:n]
    cols = [sub[c].tolist() for c in ("subject", "predicate", "object", "kind", "ts", "session_id", "message_id")]
    gi = 0
    t = time.perf_counter()
    for s, p, o, k, at, sid, mid in zip(*cols):  # row by row: this is the baseline
        while gi < len(grid) and grid[gi] <= at:
            mem.consolidate(int(grid[gi]))
            gi += 1
        mem.remember(s, p, o, k, at, sid, mid)
    elapsed = time.perf_counter() - t
    mem.conn.close()
    return elapsed

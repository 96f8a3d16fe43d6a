// A seed-style production client, as a crate author writes one: rusqlite, the seed's
// `remember_with_evidence` row by row, the parameters from `factmem export --format rust`
// (included with `include!`), consolidations on the module's schedule, and the context from the
// module's `CONTEXT_CANDIDATES_SQL` + `rank_context`. It keeps only the seed's tables (no
// factmem_fact_state, no factmem evidence extras) — what `whatif` must read without blaming it.
//
// Usage: client DB EVENTS LAST_CONSOLIDATION UNTIL K
//   EVENTS: one observation a line, fields separated by U+001F:
//           ts, session_id, message_id, subject, predicate, object, kind, note (U+001E = NULL)
//   Consolidations run at every schedule time in (LAST_CONSOLIDATION, UNTIL], each before the
//   observations at or after it. Prints the context of K facts of every subject at UNTIL:
//   subject U+001F rank U+001F id U+001F bits of the effective confidence.

include!(env!("FACTMEM_PARAMS_RS"));

use rusqlite::{params, Connection, OptionalExtension};

fn consolidate(conn: &Connection, at: i64) -> rusqlite::Result<usize> {
    let mut due = Vec::new();
    {
        let mut stmt = conn.prepare_cached(
            "SELECT id, confidence, decay_rate, last_reinforced FROM memory_facts WHERE status = 'active'")?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, f64>(1)?, r.get::<_, f64>(2)?,
                                                r.get::<_, i64>(3)?)))?;
        for row in rows {
            let (id, c, rate, last) = row?;
            if archive_due(c, rate, last, at) {
                due.push(id);
            }
        }
    }
    for id in &due {
        conn.execute("UPDATE memory_facts SET status = 'archived' WHERE id = ?1", params![id])?;
    }
    Ok(due.len())
}

#[allow(clippy::too_many_arguments)]
fn remember_with_evidence(conn: &Connection, subject: &str, predicate: &str, object: &str, kind: FactKind,
                          note: Option<&str>, now: i64, session: Option<&str>, message: Option<&str>)
                          -> rusqlite::Result<i64> {
    // 1. identical active fact -> reinforce
    let same = conn.prepare_cached(
        "SELECT id, confidence, decay_rate, last_reinforced FROM memory_facts
         WHERE status = 'active' AND subject = ?1 AND predicate = ?2 AND object = ?3")?
        .query_row(params![subject, predicate, object],
                   |r| Ok((r.get::<_, i64>(0)?, r.get::<_, f64>(1)?, r.get::<_, f64>(2)?, r.get::<_, i64>(3)?)))
        .optional()?;
    let id = if let Some((id, c, rate, last)) = same {
        let new_conf = reinforce(c, rate, last, now);
        conn.prepare_cached("UPDATE memory_facts SET confidence = ?1, reinforcement_count = reinforcement_count + 1,
                             last_reinforced = ?2 WHERE id = ?3")?
            .execute(params![new_conf, now, id])?;
        id
    } else {
        // 2. conflicting active fact (same subject+predicate, different object) of a single-valued predicate
        let conflict: Option<i64> = if is_multi_valued(predicate) {
            None
        } else {
            conn.prepare_cached(
                "SELECT id FROM memory_facts
                 WHERE status = 'active' AND subject = ?1 AND predicate = ?2 AND object <> ?3
                 ORDER BY last_reinforced DESC, id DESC LIMIT 1")?
                .query_row(params![subject, predicate, object], |r| r.get(0))
                .optional()?
        };
        // 3. insert the new fact (factmem stores the observation's note; the seed's INSERT has none)
        conn.prepare_cached(
            "INSERT INTO memory_facts
             (subject, predicate, object, note, kind, confidence, reinforcement_count,
              first_seen, last_reinforced, decay_rate, status, supersedes_id)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, ?7, ?7, ?8, 'active', ?9)")?
            .execute(params![subject, predicate, object, note, kind.as_str(), kind.initial_confidence(), now,
                             kind.decay_rate_for(predicate), conflict])?;
        let id = conn.last_insert_rowid();
        if let Some(conflict_id) = conflict {
            conn.execute("UPDATE memory_facts SET status = 'superseded' WHERE id = ?1", params![conflict_id])?;
        }
        id
    };
    // one evidence row per observation: the seed's four provenance columns
    conn.prepare_cached("INSERT INTO memory_evidence (fact_id, session_id, message_id, observed_at)
                         VALUES (?1, ?2, ?3, ?4)")?
        .execute(params![id, session, message, now])?;
    Ok(id)
}

fn field(s: &str) -> Option<&str> {
    if s == "\u{1e}" { None } else { Some(s) }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let conn = Connection::open(&args[1]).expect("open the memory");
    let events = std::fs::read_to_string(&args[2]).expect("read the events");
    let mut last_consolidation: i64 = args[3].parse().expect("LAST_CONSOLIDATION");
    let until: i64 = args[4].parse().expect("UNTIL");
    let k: usize = args[5].parse().expect("K");

    // the file must have been built with these parameters and this schedule
    let meta = |key: &str| -> Option<String> {
        conn.query_row("SELECT value FROM factmem_meta WHERE key = ?1", params![key], |r| r.get(0)).optional()
            .expect("read factmem_meta")
    };
    if let Some(fp) = meta("params_fingerprint") {
        if fp != PARAMS_FINGERPRINT {
            eprintln!("the file was built with parameters {fp}, this client runs {PARAMS_FINGERPRINT}");
            std::process::exit(3);
        }
    }
    if let Some(p) = meta("consolidate_every_seconds") {
        if p.parse::<i64>().ok() != Some(CONSOLIDATE_EVERY_SECONDS) {
            eprintln!("the file was built with a consolidation every {p} s, this client every {CONSOLIDATE_EVERY_SECONDS} s");
            std::process::exit(3);
        }
    }

    conn.execute_batch("BEGIN").unwrap();
    for line in events.lines() {
        let f: Vec<&str> = line.split('\u{1f}').collect();
        let ts: i64 = f[0].parse().expect("ts");
        while next_consolidation(last_consolidation) <= ts.min(until) {
            last_consolidation = next_consolidation(last_consolidation);
            consolidate(&conn, last_consolidation).unwrap();
        }
        let kind = FactKind::from_str(f[6]).expect("a known kind");
        remember_with_evidence(&conn, f[3], f[4], f[5], kind, field(f[7]), ts, field(f[1]), field(f[2])).unwrap();
    }
    while next_consolidation(last_consolidation) <= until {
        last_consolidation = next_consolidation(last_consolidation);
        consolidate(&conn, last_consolidation).unwrap();
    }
    conn.execute_batch("COMMIT").unwrap();

    // every subject's context at UNTIL, by the module's rule
    let subjects: Vec<String> = conn.prepare("SELECT DISTINCT subject FROM memory_facts ORDER BY subject").unwrap()
        .query_map([], |r| r.get(0)).unwrap().map(|s| s.unwrap()).collect();
    let mut out = String::new();
    let mut stmt = conn.prepare(CONTEXT_CANDIDATES_SQL).unwrap();
    for s in &subjects {
        let facts: Vec<ContextFact> = stmt.query_map(params![s], |r| Ok(ContextFact {
            id: r.get(0)?, predicate: r.get(1)?, object: r.get(2)?, confidence: r.get(3)?, decay_rate: r.get(4)?,
            first_seen: r.get(5)?, last_reinforced: r.get(6)?,
        })).unwrap().map(|f| f.unwrap()).collect();
        for (rank, (fact, eff)) in rank_context(facts, k, until).iter().enumerate() {
            out.push_str(&format!("{s}\u{1f}{rank}\u{1f}{}\u{1f}{}\n", fact.id, eff.to_bits()));
        }
    }
    print!("{out}");
}

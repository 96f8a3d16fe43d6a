"""A plain-Python reference model of the memory's semantics (docs/design.md, §4) — no numpy, no SQL.

It is deliberately naive (a dict of facts, linear scans) so that it can be read against the design
line by line; factmem's own store is held to it by property tests, and yours can be too
(:mod:`factmem.testing`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from factmem.core.params import MemoryParams

__all__ = ["RefMemory"]


@dataclass
class RefMemory:
    params: MemoryParams = field(default_factory=MemoryParams)
    facts: dict = field(default_factory=dict)
    evidence: list = field(default_factory=list)
    links: list = field(default_factory=list)  # (parent_id, child_id, created_at)

    def _effective(self, f: dict, at: int) -> float:
        age = (at - f["last_reinforced"]) / 86400.0
        return f["confidence"] * math.exp(-f["decay_rate"] * max(0.0, age))

    def _latest(self, candidates: list[dict]) -> dict | None:
        if not candidates:
            return None
        return max(candidates, key=lambda f: (f["last_reinforced"], f["id"]))

    def remember(self, subject, predicate, obj, kind, at, session_id=None, message_id=None, note=None,
                 source="observation") -> int:
        p = self.params
        active = [f for f in self.facts.values() if f["status"] == "active"]
        same = self._latest([f for f in active if (f["subject"], f["predicate"], f["object"]) == (subject, predicate, obj)])
        if same is not None:
            c = same["confidence"]
            base = c if p.reinforce_base == "stored" else self._effective(same, at)
            same["confidence"] = min(p.confidence_cap, base + p.reinforce_gain * (1.0 - base))
            same["reinforcement_count"] += 1
            same["last_reinforced"] = at
            fid, action, conf = same["id"], "reinforce", same["confidence"]
        else:
            conflict = None
            if predicate not in p.multi_valued_predicates:
                conflict = self._latest([f for f in active if f["subject"] == subject and f["predicate"] == predicate
                                         and f["object"] != obj])
            fid = len(self.facts) + 1
            conf = p.initial_confidence[kind]
            self.facts[fid] = dict(
                id=fid, subject=subject, predicate=predicate, object=obj, note=note, kind=kind,
                confidence=conf, reinforcement_count=0, first_seen=at, last_reinforced=at,
                # the predicate's own rate if the parameters give it one, else the kind's
                decay_rate=p.decay_rate_by_predicate[predicate] if predicate in p.decay_rate_by_predicate
                else p.decay_rate[kind], status="active",
                supersedes_id=conflict["id"] if conflict else None,
                status_changed_at=None, status_reason=None, stale=False,
            )
            if conflict is not None:
                conflict.update(status="superseded", status_changed_at=at, status_reason="contradiction")
                self._mark_stale([conflict["id"]])
            action = "insert"
        self.evidence.append(dict(id=len(self.evidence) + 1, fact_id=fid, session_id=session_id,
                                  message_id=message_id, observed_at=at, action=action, confidence=conf,
                                  source=source))
        return fid

    def _mark_stale(self, child_ids):
        for parent, child, _ in self.links:
            f = self.facts[parent]
            if child in child_ids and f["status"] == "active" and f["kind"] == "derived":
                f["stale"] = True

    def consolidate(self, at, prune=True) -> tuple[int, int]:
        p = self.params
        archived = []
        for f in self.facts.values():
            if f["status"] == "active" and self._effective(f, at) < p.archive_threshold:
                f.update(status="archived", status_changed_at=at, status_reason="decay")
                archived.append(f["id"])
        self._mark_stale(archived)
        pruned = 0
        if prune:
            validated = {f["id"] for f in self.facts.values() if f["kind"] == "derived" and f["status"] == "active"
                         and f["reinforcement_count"] >= p.prune_min_reinforcements}
            for parent, child, _ in self.links:
                c = self.facts[child]
                if parent in validated and c["status"] == "active":
                    c.update(status="archived", status_changed_at=at, status_reason="pruned")
                    pruned += 1
        return len(archived), pruned

    def table(self) -> list[dict]:
        return [self.facts[i] for i in sorted(self.facts)]

    # -- the abstraction pass --------------------------------------------------------------------
    # (factmem.abstraction.passes, read line by line: clusters, the unchanged rule of each link
    # scope, the strict answer contract, links to the cluster or to the cited support, pruning)

    examined: list = field(default_factory=list)  # (subject, member ids, examined_at, pass_id, outcome)

    def abstract(self, at, answer, *, min_cluster, max_facts, link_scope, prune=True) -> list[str]:
        """One pass; ``answer(subject, members)`` returns the model's text or raises. Returns the
        subjects called, in order."""
        facts = self.facts
        active_obs = [f for f in facts.values() if f["status"] == "active" and f["kind"] != "derived"]
        called = []
        for subject in sorted({f["subject"] for f in active_obs}):
            ids = sorted(f["id"] for f in active_obs if f["subject"] == subject)
            if len(ids) < min_cluster:
                continue
            live_derived = [f for f in facts.values() if f["status"] == "active" and f["kind"] == "derived"]
            stale = sorted({f["id"] for f in live_derived if f["stale"] and any(
                p == f["id"] and facts[c]["subject"] == subject for p, c, _ in self.links)})
            records = [r for r in self.examined if r[0] == subject and list(r[1]) == ids]
            if link_scope == "cluster":
                linked = any(
                    not f["stale"] and sorted(c for p, c, _ in self.links if p == f["id"]
                                              and facts[c]["status"] == "active" and facts[c]["kind"] != "derived") == ids
                    for f in live_derived)
                known = linked or any(r[4] == "empty" for r in records)
            else:
                known = bool(records)
            if known and not stale:
                continue
            called.append(subject)
            members = [facts[i] for i in ids]
            try:
                text = answer(subject, members)
            except Exception:  # a provider failure: skipped, nothing written
                continue
            items = self._accept(text, subject, members, max_facts, link_scope)
            if items is None:  # rejected: failed, nothing written
                continue
            for predicate, obj, note, support in items:
                fid = self.remember(subject, predicate, obj, "derived", at, f"abstraction:{at}",
                                    f"cluster:{subject}", note, source="abstraction")
                children = ids if link_scope == "cluster" else [ids[i] for i in support]
                have = {(p, c) for p, c, _ in self.links}
                self.links += [(fid, c, at) for c in children if (fid, c) not in have]
            self.examined.append((subject, tuple(ids), at, str(at), "derived" if items else "empty"))
            for i in stale:
                facts[i]["stale"] = False
        if prune:
            validated = {f["id"] for f in facts.values() if f["kind"] == "derived" and f["status"] == "active"
                         and f["reinforcement_count"] >= self.params.prune_min_reinforcements}
            for parent, child, _ in self.links:
                if parent in validated and facts[child]["status"] == "active":
                    facts[child].update(status="archived", status_changed_at=at, status_reason="pruned")
        return called

    def _accept(self, text, subject, members, max_facts, link_scope):
        """The answer contract: (predicate, object, note, support) per item, or None if rejected."""
        body = text.strip()
        if body.startswith("```"):
            body = body[3:].removeprefix("json").strip().removesuffix("```").strip()
        try:
            data = json.loads(body)
        except ValueError:
            return None
        if not isinstance(data, list) or len(data) > max_facts:
            return None
        items, seen, single = [], set(), set()
        pairs = {(m["predicate"], m["object"]) for m in members}
        member_preds = {m["predicate"] for m in members}
        for raw in data:
            if not isinstance(raw, dict):
                return None
            values = [raw.get(k) for k in ("subject", "predicate", "object")]
            if not all(isinstance(v, str) and v.strip() for v in values):
                return None
            s, p, o = (v.strip() for v in values)
            note = raw.get("note")
            if note is not None and not isinstance(note, str):
                return None
            note = (note.strip() or None) if note is not None else None
            if s != subject.strip() or (p, o) in seen:
                return None
            seen.add((p, o))
            support = ()
            if link_scope == "support":
                support = raw.get("support")
                if not isinstance(support, list) or not support:
                    return None
                if any(isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(members) for i in support):
                    return None
                support = tuple(sorted(set(support)))
            # may not restate, contradict, or set one single-valued predicate twice
            if (p, o) in pairs:
                return None
            if p not in self.params.multi_valued_predicates:
                if p in member_preds or p in single:
                    return None
                single.add(p)
            items.append((p, o, note, support))
        return items

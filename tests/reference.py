"""A plain-Python reference model of DESIGN.md's semantics — no numpy, no SQL.

It is deliberately naive (a dict of facts, linear scans) so that it can be read against the
design line by line; the store is held to it by the property tests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from factmem.core.params import MemoryParams


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

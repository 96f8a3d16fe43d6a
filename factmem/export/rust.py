"""Chosen parameters as a Rust module for a memory crate shaped like the seed's.

The module holds ``impl FactKind { fn decay_rate, fn initial_confidence, fn decay_rate_for }``, one ``pub const`` per
other parameter (``REINFORCE_GAIN``, ``CONFIDENCE_CAP``, ``ARCHIVE_THRESHOLD``,
``RETRIEVAL_THRESHOLD``, ``PRUNE_MIN_REINFORCEMENTS``, ``MIN_CLUSTER``, ``MAX_FACTS``,
``TEMPERATURE``, ``REINFORCE_BASE``, ``MULTI_VALUED_PREDICATES``, ``LINK_SCOPE`` with its enum
``LinkScope { Cluster, Support }``, ``DECAY_RATE_BY_PREDICATE``), a ``reinforced`` helper with
the seed's bounded gain, the provenance in the module's doc comment, and a ``#[cfg(test)]`` module
asserting every value bit for bit (``f64::to_bits`` against the bits Python holds).

**The enum.** ``with_enum=True`` (the default, and the CLI's) also emits the seed's
``enum FactKind`` with ``as_str``, so the file compiles on its own (``rustc --edition 2021 --test``)
and can be dropped into a crate that has no such enum. A crate that already defines ``FactKind``
exports with ``with_enum=False`` (``--no-enum``): the module then starts with ``use <enum_path>;``
(default ``super::FactKind``; ``--enum-path crate::fact::FactKind``) and adds only the inherent
``impl`` — Rust allows several ``impl`` blocks for one type within its crate; remove the crate's own
``decay_rate``/``initial_confidence`` methods then.

**Per-predicate decay rates.** ``kind.decay_rate_for(predicate)`` is the rate a new fact gets: a
``match`` on the predicate first (each predicate of ``decay_rate_by_predicate``), then the kind's
``decay_rate()``. ``DECAY_RATE_BY_PREDICATE`` lists the same pairs sorted by predicate. The memory
stores the rate with the fact at insert; reinforcement keeps it.

**What a client needs besides the numbers** (see docs/design.md, "Writing a production client"):

* the **context rule** the tuning scored (:mod:`factmem.core.context_rule`): ``CONTEXT_CANDIDATES_SQL``
  (the person's active facts, ``?1`` = subject), ``CONTEXT_THRESHOLD`` (``max(ARCHIVE_THRESHOLD,
  RETRIEVAL_THRESHOLD)``) and the pure ``rank_context(facts, k, now)`` over ``ContextFact`` rows —
  threshold, order (effective confidence, later ``last_reinforced``, later ``first_seen``,
  (predicate, object), then id) and budget, with no database dependency;
* the **schedule** (:mod:`factmem.core.schedule`): ``CONSOLIDATE_EVERY_SECONDS`` at multiples since
  ``CONSOLIDATION_ANCHOR`` (midnight UTC), ``next_consolidation(after)``, and ``archive_due`` (the
  consolidate pass's test);
* ``effective_confidence(confidence, decay_rate, last_reinforced, now)`` (timestamps are Unix
  **seconds**, ``i64``; ``SECONDS_PER_DAY``), ``reinforce(...)`` applying ``REINFORCE_BASE``. The
  same float operations as factmem, except that ``f64::exp`` is the C library's and factmem's is
  numpy's vectorized one: the two may differ by one ulp (measured: 4.7% of 200,000 exponents in
  [-30, 0], never more than one ulp; equal inputs still give equal outputs, so ties stay ties);
* ``FactKind::from_str`` / ``as_str`` (and ``FromStr``) when the enum is emitted.

**Usable as a crate author uses it**: the file has no inner attributes or ``//!`` comments (the
provenance is the outer doc comment of ``PARAMS_FINGERPRINT``), so ``include!("memory_params.rs")``
works as well as ``#[path] mod``; every item carries ``#[allow(dead_code)]``, so a binary crate that
uses a few of them compiles with ``-D warnings``.

Floats are printed from Python's shortest round-tripping ``repr`` as valid Rust ``f64`` literals
(``1.0``, ``5e-324`` → ``5.0e-324``), strings escaped for Rust. Integers are ``i64``, SQLite's
integer type (an error naming the parameter if one does not fit). The output is a pure function of
the document.
"""

from __future__ import annotations

import re
from typing import Any

from factmem.core.codes import KINDS, LINK_SCOPES, REINFORCE_BASES, SECONDS_PER_DAY
from factmem.core.context_rule import context_threshold
from factmem.core.params import MemoryParams
from factmem.core.schedule import CONSOLIDATION_ANCHOR, CONSOLIDATION_ANCHOR_TEXT, check_period
from factmem.errors import ExportError, InputError
from factmem.export.atomic import write_text
from factmem.export.document import FIELD_TYPES, PARAMS_SCHEMA, ParamsDocument, as_document, params_fingerprint
from factmem.export.rust_syntax import RUST_CONSTS, doc_text, f64_bits, rust_f64, rust_str, variant_name
from factmem.export.rust_tests import rust_tests

__all__ = ["RUST_CONSTS", "CONTEXT_CANDIDATES_SQL", "rust_f64", "f64_bits", "rust_str", "render_rust",
           "write_rust"]

_I64 = (-(2**63), 2**63 - 1)
#: The query a client runs for a person's context candidates (``?1``: the subject): its active facts,
#: with the columns ``rank_context`` reads. The threshold and order are applied in Rust, with the same
#: float operations as factmem (SQLite's ``exp`` is optional and need not round alike).
CONTEXT_CANDIDATES_SQL = ("SELECT id, predicate, object, confidence, decay_rate, first_seen, last_reinforced "
                          "FROM memory_facts WHERE subject = ?1 AND status = 'active'")
_ALLOW = "#[allow(dead_code)]"  # a binary crate uses some items only: no warning for the rest
_RUST_PATH = re.compile(r"(::)?[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)*")

_PER_KIND_DOCS = {
    "decay_rate": "Per-day decay rate λ: effective = confidence × exp(−λ × days since last reinforcement).",
    "initial_confidence": "Confidence of a newly inserted fact.",
}
_CONST_DOCS = {
    "reinforce_gain": "Reinforcement gain: c := min(CONFIDENCE_CAP, base + REINFORCE_GAIN × (1 − base)).",
    "confidence_cap": "Ceiling of every confidence.",
    "archive_threshold": "A consolidate pass archives active facts whose effective confidence is below this.",
    "retrieval_threshold": "Facts with effective confidence at or above this are retrieved (the believed set).",
    "prune_min_reinforcements": "Children of an active derived fact reinforced at least this often are archived.",
    "min_cluster": "Abstraction: smallest cluster (facts per subject) sent to the model.",
    "max_facts": "Abstraction: most generalizations accepted per cluster.",
    "temperature": "Abstraction: sampling temperature of the model call.",
    "reinforce_base": "Which confidence the gain applies to: the stored one (the seed) or the decayed one at reinforcement time.",
    "multi_valued_predicates": "Predicates that may hold several objects at once and never supersede each other (sorted).",
    "link_scope": ("Abstraction: a derived fact is linked to (and prunes) every member of its cluster (the seed) "
                   "or only the members the model cites as its support."),
    "decay_rate_by_predicate": "Predicates with their own per-day decay rate, overriding their kind's (sorted; see `FactKind::decay_rate_for`).",
}


def _i64(name: str, v: int) -> str:
    if not _I64[0] <= v <= _I64[1]:
        raise ExportError(f"{name} = {v} does not fit the Rust type i64 ({_I64[0]}..={_I64[1]})")
    return str(v)


def _provenance_doc(doc: ParamsDocument) -> list[str]:
    p = doc.provenance
    lines = ["/// Provenance:", f"/// - schema: {doc.schema or 'legacy (no schema key)'}",
             f"/// - parameters fingerprint (sha256 of canonical JSON): {params_fingerprint(doc.params)}"]
    labels = {"run_id": "run id", "dataset_sha256": "dataset sha256", "objective": "objective",
              "git_commit": "git commit", "factmem_version": "factmem version", "created_at": "created at",
              "notes": "notes"}
    for key, label in labels.items():
        if key in p:
            lines.append(f"/// - {label}: {doc_text(p[key])}")
    judged = p.get("judgement", {})
    if judged:
        lines += ["///", "/// Judged comparison (held out, the one the decision made):"]
        for key, v in judged.items():
            lines.append(f"/// - {doc_text(key)[1:-1]}: {doc_text(v)[1:-1] if isinstance(v, str) else repr(v)}")
    # the comparison the decision made (the baseline); files written before it existed carry the seed defaults
    metrics = p.get("metrics", {})
    other, label = (p["baseline_metrics"], "judged against (baseline)") if "baseline_metrics" in p \
        else (p.get("default_metrics", {}), "seed defaults")
    defaults = other
    names = list(metrics) + [m for m in defaults if m not in metrics]
    if names:
        lines += ["///", "/// Held-out metrics:", "///", f"/// | metric | these parameters | {label} |",
                  "/// |---|---|---|"]
        for m in names:
            a = repr(metrics[m]) if m in metrics else "-"
            b = repr(defaults[m]) if m in defaults else "-"
            name = doc_text(m)[1:-1].replace("|", "\\|")
            lines.append(f"/// | {name} | {a} | {b} |")
    if not p:
        lines.append("/// - no provenance recorded")
    return lines


def render_rust(source: Any, *, with_enum: bool = True, enum_path: str = "super::FactKind",
                consolidate_every_seconds: int | None = None) -> str:
    """The Rust module text for a params file, :class:`ParamsDocument` or :class:`MemoryParams`.
    ``consolidate_every_seconds``: the consolidation period (default: the document's)."""
    doc = as_document(source)
    params: MemoryParams = doc.params
    period = check_period(doc.consolidate_every_seconds if consolidate_every_seconds is None
                          else consolidate_every_seconds)
    if not with_enum and not _RUST_PATH.fullmatch(enum_path):
        raise InputError(f"enum_path {enum_path!r} is not a Rust path like crate::memory::FactKind")
    unmapped = [f for f, t in FIELD_TYPES.items() if t != "per_kind" and f not in RUST_CONSTS]
    if unmapped:  # a parameter added to MemoryParams must not vanish silently from production
        raise ExportError(f"no Rust constant for parameter {unmapped[0]!r}; add it to factmem.export.rust_syntax.RUST_CONSTS")
    variants = [(k, variant_name(k)) for k in KINDS]
    lines: list[str] = [
        "// Memory parameters chosen with factmem. Generated by `factmem export --format rust`: do not edit;",
        "// re-export from the params file instead. Use it with `include!(\"memory_params.rs\");` or",
        "// `#[path = \"memory_params.rs\"] mod memory_params;`. Timestamps are Unix seconds (i64).",
        "",
        "/// sha256 of the parameters' canonical JSON (`factmem.export.params_fingerprint`); a file exported",
        "/// by factmem records the fingerprint it was built with in `factmem_meta` (`params_fingerprint`).",
        "///",
        *_provenance_doc(doc),
        _ALLOW,
        f"pub const PARAMS_FINGERPRINT: &str = {rust_str(params_fingerprint(params))};",
        "/// Schema of the factmem params document these values came from.",
        _ALLOW,
        f"pub const PARAMS_SCHEMA: &str = {rust_str(PARAMS_SCHEMA)};",
        "",
    ]
    if with_enum:
        lines += [
            "// ---- FactKind: emitted because this file is standalone (`--with-enum`, the default). A crate",
            "// ---- that already defines the seed's FactKind exports with `--no-enum` and drops this block.",
            "",
            "/// The seed's four fact kinds.",
            _ALLOW,
            "#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]",
            "pub enum FactKind {",
            *[f"    {v}," for _, v in variants],
            "}",
            "",
            _ALLOW,
            "impl FactKind {",
            f"    pub const ALL: [FactKind; {len(variants)}] = [{', '.join(f'FactKind::{v}' for _, v in variants)}];",
            "",
            "    /// The kind's name as stored in `memory_facts.kind`.",
            "    pub fn as_str(&self) -> &'static str {",
            "        match self {",
            *[f"            FactKind::{v} => {rust_str(k)}," for k, v in variants],
            "        }",
            "    }",
            "",
            "    /// The kind stored as `s` in `memory_facts.kind` (None for any other text).",
            "    pub fn from_str(s: &str) -> Option<FactKind> {",
            "        match s {",
            *[f"            {rust_str(k)} => Some(FactKind::{v})," for k, v in variants],
            "            _ => None,",
            "        }",
            "    }",
            "}",
            "",
            "impl std::str::FromStr for FactKind {",
            "    type Err = String;",
            "",
            "    /// `\"explicit\".parse::<FactKind>()`; the error names the text.",
            "    fn from_str(s: &str) -> Result<FactKind, String> {",
            "        FactKind::from_str(s).ok_or_else(|| format!(\"unknown fact kind {s:?}\"))",
            "    }",
            "}",
            "",
            "// ---- end of FactKind",
            "",
        ]
    else:
        lines += [_ALLOW, f"use {enum_path};", ""]
    lines += [_ALLOW, "impl FactKind {"]
    for i, name in enumerate(("decay_rate", "initial_confidence")):
        table = getattr(params, name)
        if i:
            lines.append("")
        lines += [
            f"    /// {_PER_KIND_DOCS[name]}",
            f"    pub fn {name}(&self) -> f64 {{",
            "        match self {",
            *[f"            FactKind::{v} => {rust_f64(table[k])}," for k, v in variants],
            "        }",
            "    }",
        ]
    rates = params.decay_rate_by_predicate
    lines += [
        "",
        "    /// Decay rate of a new fact with this kind and `predicate`: the predicate's own rate if it has one",
        "    /// (`DECAY_RATE_BY_PREDICATE`), else the kind's `decay_rate()`. Stored with the fact at insert.",
        "    pub fn decay_rate_for(&self, predicate: &str) -> f64 {",
        "        match predicate {",
        *[f"            {rust_str(pred)} => {rust_f64(rate)}," for pred, rate in rates.items()],
        "            _ => self.decay_rate(),",
        "        }",
        "    }",
    ]
    lines += ["}", ""]
    for field, const in RUST_CONSTS.items():
        value = getattr(params, field)
        ftype = FIELD_TYPES[field]
        lines += [f"/// {_CONST_DOCS[field]}", _ALLOW]
        if ftype == "float":
            lines.append(f"pub const {const}: f64 = {rust_f64(value)};")
        elif ftype == "int":
            lines.append(f"pub const {const}: i64 = {_i64(field, value)};")
        elif field == "reinforce_base":
            lines.append(f"pub const {const}: ReinforceBase = ReinforceBase::{variant_name(value)};")
        elif field == "multi_valued_predicates":
            items = ", ".join(rust_str(p) for p in sorted(value))
            lines.append(f"pub const {const}: &[&str] = &[{items}];")
        elif field == "link_scope":
            lines.append(f"pub const {const}: LinkScope = LinkScope::{variant_name(value)};")
        elif field == "decay_rate_by_predicate":
            items = ", ".join(f"({rust_str(p)}, {rust_f64(r)})" for p, r in value.items())
            lines.append(f"pub const {const}: &[(&str, f64)] = &[{items}];")
        else:  # pragma: no cover - RUST_CONSTS and FIELD_TYPES agree today
            raise ExportError(f"no Rust rendering for {field} ({ftype})")
        lines.append("")
    lines += [
        "/// Which confidence the reinforcement gain applies to.",
        _ALLOW,
        "#[derive(Debug, Clone, Copy, PartialEq, Eq)]",
        "pub enum ReinforceBase {",
        *[f"    {variant_name(b)}," for b in REINFORCE_BASES],
        "}",
        "",
        "/// What an abstraction pass links a derived fact to, and so what pruning archives under it.",
        _ALLOW,
        "#[derive(Debug, Clone, Copy, PartialEq, Eq)]",
        "pub enum LinkScope {",
        *[f"    {variant_name(b)}," for b in LINK_SCOPES],
        "}",
        "",
        "/// True when `predicate` may hold several objects at once (never supersedes).",
        _ALLOW,
        "pub fn is_multi_valued(predicate: &str) -> bool {",
        "    MULTI_VALUED_PREDICATES.binary_search(&predicate).is_ok()",
        "}",
        "",
        "/// One reinforcement with the bounded gain: `min(CONFIDENCE_CAP, base + REINFORCE_GAIN * (1 - base))`,",
        "/// where `base` is the stored confidence, or the effective one when `REINFORCE_BASE` is `Effective`.",
        _ALLOW,
        "pub fn reinforced(base: f64) -> f64 {",
        "    (base + REINFORCE_GAIN * (1.0 - base)).min(CONFIDENCE_CAP)",
        "}",
        "",
        "/// The confidence after an observation at `now` reinforces a fact: `reinforced` of the stored",
        "/// confidence, or of the effective one at `now` when `REINFORCE_BASE` is `Effective`.",
        _ALLOW,
        "pub fn reinforce(confidence: f64, decay_rate: f64, last_reinforced: i64, now: i64) -> f64 {",
        "    match REINFORCE_BASE {",
        "        ReinforceBase::Stored => reinforced(confidence),",
        "        ReinforceBase::Effective => reinforced(effective_confidence(confidence, decay_rate, last_reinforced, now)),",
        "    }",
        "}",
        "",
        "// ---- time, decay and the consolidation schedule",
        "",
        "/// Seconds per day: ages in days are `(now - last_reinforced) as f64 / SECONDS_PER_DAY`.",
        _ALLOW,
        f"pub const SECONDS_PER_DAY: f64 = {rust_f64(SECONDS_PER_DAY)};",
        "",
        "/// Effective confidence at `now` (Unix seconds): `confidence * exp(-decay_rate * max(0, age in days))`,",
        "/// the same float operations as factmem (whose numpy `exp` may differ from `f64::exp` by one ulp).",
        _ALLOW,
        "pub fn effective_confidence(confidence: f64, decay_rate: f64, last_reinforced: i64, now: i64) -> f64 {",
        "    let age_days = ((now - last_reinforced) as f64 / SECONDS_PER_DAY).max(0.0);",
        "    confidence * (-decay_rate * age_days).exp()",
        "}",
        "",
        f"/// The consolidation period the parameters were tuned with, in seconds ({period / 3600:g} h). A",
        "/// consolidation archives every active fact with `archive_due` true; run one at each",
        "/// `CONSOLIDATION_ANCHOR + n * CONSOLIDATE_EVERY_SECONDS`, before the observations at that time.",
        _ALLOW,
        f"pub const CONSOLIDATE_EVERY_SECONDS: i64 = {period};",
        f"/// Consolidations run at multiples of the period since this Unix time ({CONSOLIDATION_ANCHOR_TEXT}:",
        "/// a daily schedule runs at midnight UTC).",
        _ALLOW,
        f"pub const CONSOLIDATION_ANCHOR: i64 = {CONSOLIDATION_ANCHOR};",
        "",
        "/// The first consolidation time strictly after `after` (Unix seconds).",
        _ALLOW,
        "pub fn next_consolidation(after: i64) -> i64 {",
        "    CONSOLIDATION_ANCHOR",
        "        + ((after - CONSOLIDATION_ANCHOR).div_euclid(CONSOLIDATE_EVERY_SECONDS) + 1) * CONSOLIDATE_EVERY_SECONDS",
        "}",
        "",
        "/// True when a consolidation at `at` archives an active fact: its effective confidence is below",
        "/// `ARCHIVE_THRESHOLD`.",
        _ALLOW,
        "pub fn archive_due(confidence: f64, decay_rate: f64, last_reinforced: i64, at: i64) -> bool {",
        "    effective_confidence(confidence, decay_rate, last_reinforced, at) < ARCHIVE_THRESHOLD",
        "}",
        "",
        "// ---- the context rule the parameters were tuned for",
        "",
        "/// A person's context candidates: their active facts (`?1` = subject), the columns of `ContextFact`",
        "/// in order. Filter and rank the rows with `rank_context`.",
        _ALLOW,
        f"pub const CONTEXT_CANDIDATES_SQL: &str = {rust_str(CONTEXT_CANDIDATES_SQL)};",
        "",
        "/// A fact enters a context when its effective confidence is at least this:",
        "/// `max(ARCHIVE_THRESHOLD, RETRIEVAL_THRESHOLD)`.",
        _ALLOW,
        f"pub const CONTEXT_THRESHOLD: f64 = {rust_f64(context_threshold(params))};",
        "",
        "/// One context candidate: a row of `CONTEXT_CANDIDATES_SQL`.",
        _ALLOW,
        "#[derive(Debug, Clone, PartialEq)]",
        "pub struct ContextFact {",
        "    pub id: i64,",
        "    pub predicate: String,",
        "    pub object: String,",
        "    pub confidence: f64,",
        "    pub decay_rate: f64,",
        "    pub first_seen: i64,",
        "    pub last_reinforced: i64,",
        "}",
        "",
        "/// The context of budget `k` at `now`: the candidates with effective confidence at least",
        "/// `CONTEXT_THRESHOLD`, by effective confidence (higher first), ties by later `last_reinforced`,",
        "/// later `first_seen`, then `(predicate, object)` in byte order, then `id`; the first `k`, each with",
        "/// its effective confidence. The rule factmem's context metrics score (`FactStore.context`).",
        _ALLOW,
        "pub fn rank_context(facts: Vec<ContextFact>, k: usize, now: i64) -> Vec<(ContextFact, f64)> {",
        "    let mut ranked: Vec<(ContextFact, f64)> = facts",
        "        .into_iter()",
        "        .map(|f| {",
        "            let e = effective_confidence(f.confidence, f.decay_rate, f.last_reinforced, now);",
        "            (f, e)",
        "        })",
        "        .filter(|(_, e)| *e >= CONTEXT_THRESHOLD)",
        "        .collect();",
        "    ranked.sort_by(|(a, ea), (b, eb)| {",
        "        eb.partial_cmp(ea).unwrap_or(std::cmp::Ordering::Equal)",
        "            .then(b.last_reinforced.cmp(&a.last_reinforced))",
        "            .then(b.first_seen.cmp(&a.first_seen))",
        "            .then_with(|| a.predicate.as_bytes().cmp(b.predicate.as_bytes()))",
        "            .then_with(|| a.object.as_bytes().cmp(b.object.as_bytes()))",
        "            .then(a.id.cmp(&b.id))",
        "    });",
        "    ranked.truncate(k);",
        "    ranked",
        "}",
        "",
    ]
    lines += rust_tests(params, variants, with_enum, period)
    return "\n".join(lines) + "\n"


def write_rust(path, source: Any, **options: Any):
    """Render and write the module atomically (see :func:`render_rust`)."""
    from pathlib import Path

    return write_text(Path(path), render_rust(source, **options))

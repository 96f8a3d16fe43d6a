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

Floats are printed from Python's shortest round-tripping ``repr`` as valid Rust ``f64`` literals
(``1.0``, ``5e-324`` → ``5.0e-324``), strings escaped for Rust. Integers are ``u32`` (an error
naming the parameter if one does not fit). The output is a pure function of the document.
"""

from __future__ import annotations

import json
import math
import re
import struct
import unicodedata
from collections.abc import Sequence
from typing import Any

from factmem.core.codes import KINDS, LINK_SCOPES, REINFORCE_BASES
from factmem.core.decay import reinforce
from factmem.core.params import MemoryParams
from factmem.errors import ExportError, InputError
from factmem.export.atomic import write_text
from factmem.export.document import FIELD_TYPES, PARAMS_SCHEMA, ParamsDocument, as_document, params_fingerprint

__all__ = ["RUST_CONSTS", "rust_f64", "f64_bits", "rust_str", "render_rust", "write_rust"]

_U32_MAX = 2**32 - 1
_RUST_PATH = re.compile(r"(::)?[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)*")

#: Rust constant name of each scalar parameter (per-kind ones become FactKind methods).
RUST_CONSTS: dict[str, str] = {
    "reinforce_gain": "REINFORCE_GAIN",
    "confidence_cap": "CONFIDENCE_CAP",
    "archive_threshold": "ARCHIVE_THRESHOLD",
    "retrieval_threshold": "RETRIEVAL_THRESHOLD",
    "prune_min_reinforcements": "PRUNE_MIN_REINFORCEMENTS",
    "min_cluster": "MIN_CLUSTER",
    "max_facts": "MAX_FACTS",
    "temperature": "TEMPERATURE",
    "reinforce_base": "REINFORCE_BASE",
    "multi_valued_predicates": "MULTI_VALUED_PREDICATES",
    "link_scope": "LINK_SCOPE",
    "decay_rate_by_predicate": "DECAY_RATE_BY_PREDICATE",
}
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


def _variant(kind: str) -> str:
    return "".join(part.capitalize() for part in kind.split("_"))


def rust_f64(x: float) -> str:
    """A Rust ``f64`` literal that parses to exactly ``x`` (finite). ``-0.0`` keeps its sign."""
    x = float(x)
    if not math.isfinite(x):
        raise InputError(f"Rust has no literal for {x!r}")
    text = repr(x)  # shortest string that round-trips
    mant, _, exp = text.partition("e")
    if "." not in mant:
        mant += ".0"
    return f"{mant}e{int(exp)}" if exp else mant


def f64_bits(x: float) -> str:
    """The IEEE-754 bits of ``x`` as a Rust ``u64`` hex literal."""
    return f"0x{struct.unpack('<Q', struct.pack('<d', float(x)))[0]:016x}"


def rust_str(s: str) -> str:
    """A Rust string literal for ``s``: quotes, backslashes, every control character and every
    invisible format character escaped as ``\\u{...}`` — bidirectional controls (U+202A–U+202E,
    U+2066–U+2069, U+200E/F, U+061C) in a literal are a compile error (rustc's deny-by-default
    ``text_direction_codepoint_in_literal``), and none of them should be invisible in a source file."""
    out = []
    for ch in s:
        o = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif 0xD800 <= o <= 0xDFFF:
            raise InputError(f"{s!r} holds a lone surrogate; Rust strings are valid Unicode")
        elif _invisible(ch):
            out.append(f"\\u{{{o:x}}}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _invisible(ch: str) -> bool:
    """Control, format (bidirectional controls, zero-width characters) and line/paragraph separators."""
    return unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp")


def _doc_text(value: Any) -> str:
    """A value shown in a doc comment: JSON-quoted so newlines and CRs cannot break the comment, and
    invisible characters spelled ``\\uXXXX`` (a bidirectional control in a comment is a compile
    error: rustc's ``text_direction_codepoint_in_comment``)."""
    if isinstance(value, str):
        quoted = json.dumps(value, ensure_ascii=False)
        return "".join(f"\\u{ord(ch):04x}" if _invisible(ch) else ch for ch in quoted)
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _u32(name: str, v: int) -> str:
    if not 0 <= v <= _U32_MAX:
        raise ExportError(f"{name} = {v} does not fit the Rust type u32 (0..={_U32_MAX})")
    return str(v)


def _provenance_doc(doc: ParamsDocument) -> list[str]:
    p = doc.provenance
    lines = ["//! Provenance:", f"//! - schema: {doc.schema or 'legacy (no schema key)'}",
             f"//! - parameters fingerprint (sha256 of canonical JSON): {params_fingerprint(doc.params)}"]
    labels = {"run_id": "run id", "dataset_sha256": "dataset sha256", "objective": "objective",
              "git_commit": "git commit", "factmem_version": "factmem version", "created_at": "created at",
              "notes": "notes"}
    for key, label in labels.items():
        if key in p:
            lines.append(f"//! - {label}: {_doc_text(p[key])}")
    judged = p.get("judgement", {})
    if judged:
        lines += ["//!", "//! Judged comparison (held out, the one the decision made):"]
        for key, v in judged.items():
            lines.append(f"//! - {_doc_text(key)[1:-1]}: {_doc_text(v)[1:-1] if isinstance(v, str) else repr(v)}")
    # the comparison the decision made (the baseline); files written before it existed carry the seed defaults
    metrics = p.get("metrics", {})
    other, label = (p["baseline_metrics"], "judged against (baseline)") if "baseline_metrics" in p \
        else (p.get("default_metrics", {}), "seed defaults")
    defaults = other
    names = list(metrics) + [m for m in defaults if m not in metrics]
    if names:
        lines += ["//!", "//! Held-out metrics:", "//!", f"//! | metric | these parameters | {label} |",
                  "//! |---|---|---|"]
        for m in names:
            a = repr(metrics[m]) if m in metrics else "-"
            b = repr(defaults[m]) if m in defaults else "-"
            name = _doc_text(m)[1:-1].replace("|", "\\|")
            lines.append(f"//! | {name} | {a} | {b} |")
    if not p:
        lines.append("//! - no provenance recorded")
    return lines


def render_rust(source: Any, *, with_enum: bool = True, enum_path: str = "super::FactKind") -> str:
    """The Rust module text for a params file, :class:`ParamsDocument` or :class:`MemoryParams`."""
    doc = as_document(source)
    params: MemoryParams = doc.params
    if not with_enum and not _RUST_PATH.fullmatch(enum_path):
        raise InputError(f"enum_path {enum_path!r} is not a Rust path like crate::memory::FactKind")
    unmapped = [f for f, t in FIELD_TYPES.items() if t != "per_kind" and f not in RUST_CONSTS]
    if unmapped:  # a parameter added to MemoryParams must not vanish silently from production
        raise ExportError(f"no Rust constant for parameter {unmapped[0]!r}; add it to factmem.export.rust.RUST_CONSTS")
    variants = [(k, _variant(k)) for k in KINDS]
    L: list[str] = [
        "//! Memory parameters chosen with factmem. Generated by `factmem export --format rust`: do not edit;",
        "//! re-export from the params file instead.",
        "//!",
        *_provenance_doc(doc),
        "",
    ]
    if with_enum:
        L += [
            "// ---- FactKind: emitted because this file is standalone (`--with-enum`, the default). A crate",
            "// ---- that already defines the seed's FactKind exports with `--no-enum` and drops this block.",
            "",
            "/// The seed's four fact kinds.",
            "#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]",
            "pub enum FactKind {",
            *[f"    {v}," for _, v in variants],
            "}",
            "",
            "impl FactKind {",
            f"    pub const ALL: [FactKind; {len(variants)}] = [{', '.join(f'FactKind::{v}' for _, v in variants)}];",
            "",
            "    /// The kind's name as stored in `memory_facts.kind`.",
            "    pub fn as_str(&self) -> &'static str {",
            "        match self {",
            *[f"            FactKind::{v} => {rust_str(k)}," for k, v in variants],
            "        }",
            "    }",
            "}",
            "",
            "// ---- end of FactKind",
            "",
        ]
    else:
        L += [f"use {enum_path};", ""]
    L += ["impl FactKind {"]
    for i, name in enumerate(("decay_rate", "initial_confidence")):
        table = getattr(params, name)
        if i:
            L.append("")
        L += [
            f"    /// {_PER_KIND_DOCS[name]}",
            f"    pub fn {name}(&self) -> f64 {{",
            "        match self {",
            *[f"            FactKind::{v} => {rust_f64(table[k])}," for k, v in variants],
            "        }",
            "    }",
        ]
    rates = params.decay_rate_by_predicate
    L += [
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
    L += ["}", ""]
    L += ["/// Schema of the factmem params document these values came from.",
          f"pub const PARAMS_SCHEMA: &str = {rust_str(PARAMS_SCHEMA)};",
          "/// sha256 of the parameters' canonical JSON (`factmem.export.params_fingerprint`).",
          f"pub const PARAMS_FINGERPRINT: &str = {rust_str(params_fingerprint(params))};", ""]
    for field, const in RUST_CONSTS.items():
        value = getattr(params, field)
        ftype = FIELD_TYPES[field]
        L.append(f"/// {_CONST_DOCS[field]}")
        if ftype == "float":
            L.append(f"pub const {const}: f64 = {rust_f64(value)};")
        elif ftype == "int":
            L.append(f"pub const {const}: u32 = {_u32(field, value)};")
        elif field == "reinforce_base":
            L.append(f"pub const {const}: ReinforceBase = ReinforceBase::{_variant(value)};")
        elif field == "multi_valued_predicates":
            items = ", ".join(rust_str(p) for p in sorted(value))
            L.append(f"pub const {const}: &[&str] = &[{items}];")
        elif field == "link_scope":
            L.append(f"pub const {const}: LinkScope = LinkScope::{_variant(value)};")
        elif field == "decay_rate_by_predicate":
            items = ", ".join(f"({rust_str(p)}, {rust_f64(r)})" for p, r in value.items())
            L.append(f"pub const {const}: &[(&str, f64)] = &[{items}];")
        else:  # pragma: no cover - RUST_CONSTS and FIELD_TYPES agree today
            raise ExportError(f"no Rust rendering for {field} ({ftype})")
        L.append("")
    L += [
        "/// Which confidence the reinforcement gain applies to.",
        "#[derive(Debug, Clone, Copy, PartialEq, Eq)]",
        "pub enum ReinforceBase {",
        *[f"    {_variant(b)}," for b in REINFORCE_BASES],
        "}",
        "",
        "/// What an abstraction pass links a derived fact to, and so what pruning archives under it.",
        "#[derive(Debug, Clone, Copy, PartialEq, Eq)]",
        "pub enum LinkScope {",
        *[f"    {_variant(b)}," for b in LINK_SCOPES],
        "}",
        "",
        "/// True when `predicate` may hold several objects at once (never supersedes).",
        "pub fn is_multi_valued(predicate: &str) -> bool {",
        "    MULTI_VALUED_PREDICATES.binary_search(&predicate).is_ok()",
        "}",
        "",
        "/// One reinforcement with the bounded gain: `min(CONFIDENCE_CAP, base + REINFORCE_GAIN * (1 - base))`,",
        "/// where `base` is the stored confidence, or the effective one when `REINFORCE_BASE` is `Effective`.",
        "pub fn reinforced(base: f64) -> f64 {",
        "    (base + REINFORCE_GAIN * (1.0 - base)).min(CONFIDENCE_CAP)",
        "}",
        "",
    ]
    L += _rust_tests(params, variants)
    return "\n".join(L) + "\n"


def _rust_tests(params: MemoryParams, variants: Sequence[tuple[str, str]]) -> list[str]:
    T = ["#[cfg(test)]", "mod tests {", "    use super::*;", "", "    #[test]", "    fn values_are_bit_exact() {"]
    for name in ("decay_rate", "initial_confidence"):
        table = getattr(params, name)
        for k, v in variants:
            T.append(f"        assert_eq!(FactKind::{v}.{name}().to_bits(), {f64_bits(table[k])}, "
                     f"\"{name}({v})\");")
    for field, const in RUST_CONSTS.items():
        value = getattr(params, field)
        ftype = FIELD_TYPES[field]
        if ftype == "float":
            T.append(f"        assert_eq!({const}.to_bits(), {f64_bits(value)}, \"{const}\");")
        elif ftype == "int":
            T.append(f"        assert_eq!({const}, {value}, \"{const}\");")
        elif field == "reinforce_base":
            T.append(f"        assert_eq!({const}, ReinforceBase::{_variant(value)});")
        elif field == "link_scope":
            T.append(f"        assert_eq!({const}, LinkScope::{_variant(value)});")
        elif field == "multi_valued_predicates":
            preds = sorted(value)
            T.append(f"        assert_eq!({const}.len(), {len(preds)});")
            for i, p in enumerate(preds):
                T.append(f"        assert_eq!({const}[{i}], {rust_str(p)});")
                T.append(f"        assert!(is_multi_valued({rust_str(p)}));")
            T.append(f"        assert!(!is_multi_valued({rust_str(_absent_predicate(preds))}));")
        elif field == "decay_rate_by_predicate":
            T.append(f"        assert_eq!({const}.len(), {len(value)});")
            for i, (pred, rate) in enumerate(value.items()):
                T.append(f"        assert_eq!({const}[{i}].0, {rust_str(pred)});")
                T.append(f"        assert_eq!({const}[{i}].1.to_bits(), {f64_bits(rate)});")
                for _, v in variants:  # the predicate wins over every kind
                    T.append(f"        assert_eq!(FactKind::{v}.decay_rate_for({rust_str(pred)}).to_bits(), "
                             f"{f64_bits(rate)}, \"decay_rate_for({v}, DECAY_RATE_BY_PREDICATE[{i}])\");")
            absent = rust_str(_absent_predicate(list(value)))
            for k, v in variants:  # any other predicate: the kind's rate
                T.append(f"        assert_eq!(FactKind::{v}.decay_rate_for({absent}).to_bits(), "
                         f"{f64_bits(params.decay_rate[k])});")
    T += ["    }", "", "    #[test]", "    fn reinforcement_matches_factmem() {",
          "        // bits computed by factmem.core.decay.reinforce on the same inputs: IEEE-754 + and * agree exactly"]
    for k, v in variants:
        c0 = params.initial_confidence[k]
        r = float(reinforce(c0, params.reinforce_gain, params.confidence_cap))
        T.append(f"        assert_eq!(reinforced(FactKind::{v}.initial_confidence()).to_bits(), {f64_bits(r)});")
    T += ["    }", "", "    #[test]", "    fn invariants_hold() {",
          "        assert!(CONFIDENCE_CAP > 0.0 && CONFIDENCE_CAP <= 1.0);",
          "        assert!(REINFORCE_GAIN > 0.0 && REINFORCE_GAIN <= 1.0);",
          "        assert!(ARCHIVE_THRESHOLD >= 0.0 && ARCHIVE_THRESHOLD < CONFIDENCE_CAP);",
          "        assert!(RETRIEVAL_THRESHOLD >= 0.0 && RETRIEVAL_THRESHOLD <= CONFIDENCE_CAP);",
          "        assert!(PRUNE_MIN_REINFORCEMENTS >= 1 && MIN_CLUSTER >= 1 && MAX_FACTS >= 1);",
          "        assert!(MULTI_VALUED_PREDICATES.windows(2).all(|w| w[0] < w[1]));",
          "        assert!(DECAY_RATE_BY_PREDICATE.windows(2).all(|w| w[0].0 < w[1].0));",
          "        for (_, rate) in DECAY_RATE_BY_PREDICATE {",
          "            assert!(*rate >= 0.0 && rate.is_finite());",
          "        }",
          f"        for kind in [{', '.join(f'FactKind::{v}' for _, v in variants)}] {{",
          "            assert!(kind.decay_rate() >= 0.0 && kind.decay_rate().is_finite());",
          "            assert!(kind.initial_confidence() > 0.0 && kind.initial_confidence() <= CONFIDENCE_CAP);",
          "        }",
          "    }", "}"]
    return T


def _absent_predicate(preds: list[str]) -> str:
    probe = "factmem-absent-predicate"
    while probe in preds:
        probe += "-"
    return probe


def write_rust(path, source: Any, **options: Any):
    """Render and write the module atomically (see :func:`render_rust`)."""
    from pathlib import Path

    return write_text(Path(path), render_rust(source, **options))

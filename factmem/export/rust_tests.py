"""The ``#[cfg(test)]`` module of the generated Rust file: every value and rule checked against factmem.

``rust_tests(params, variants, with_enum, period)`` returns its lines. The expected values are
computed here by factmem's own functions on the same inputs, so the Rust side is held to Python's:

* ``values_are_bit_exact``: every per-kind rate and initial confidence and every constant, bit for
  bit (``f64::to_bits``); the multi-valued predicates and per-predicate rates with a predicate absent
  from both;
* ``reinforcement_matches_factmem``: ``reinforced`` on each kind's initial confidence (IEEE-754 ``+``
  and ``*`` agree exactly);
* ``helpers_match_factmem``: ``effective_confidence`` within one ulp (``f64::exp`` is the C library's,
  factmem's numpy's), the consolidation schedule, ``rank_context`` on a hand-made set with ties on
  every key, and ``FactKind``'s names when the enum is emitted;
* ``invariants_hold``: the ranges every parameter must respect.
"""

from __future__ import annotations

from collections.abc import Sequence

from factmem.core.codes import SECONDS_PER_DAY
from factmem.core.context_rule import context_threshold, effective_at
from factmem.core.decay import reinforce
from factmem.core.params import MemoryParams
from factmem.export.document import FIELD_TYPES
from factmem.export.rust_syntax import RUST_CONSTS, f64_bits, rust_f64, rust_str, variant_name

__all__ = ["rust_tests"]


def rust_tests(params: MemoryParams, variants: Sequence[tuple[str, str]], with_enum: bool,
                period: int) -> list[str]:
    lines = ["#[cfg(test)]", "mod tests {", "    use super::*;", "", "    #[test]", "    fn values_are_bit_exact() {"]
    for name in ("decay_rate", "initial_confidence"):
        table = getattr(params, name)
        for k, v in variants:
            lines.append(f"        assert_eq!(FactKind::{v}.{name}().to_bits(), {f64_bits(table[k])}, "
                         f"\"{name}({v})\");")
    for field, const in RUST_CONSTS.items():
        value = getattr(params, field)
        ftype = FIELD_TYPES[field]
        if ftype == "float":
            lines.append(f"        assert_eq!({const}.to_bits(), {f64_bits(value)}, \"{const}\");")
        elif ftype == "int":
            lines.append(f"        assert_eq!({const}, {value}, \"{const}\");")
        elif field == "reinforce_base":
            lines.append(f"        assert_eq!({const}, ReinforceBase::{variant_name(value)});")
        elif field == "link_scope":
            lines.append(f"        assert_eq!({const}, LinkScope::{variant_name(value)});")
        elif field == "multi_valued_predicates":
            preds = sorted(value)
            lines.append(f"        assert_eq!({const}.len(), {len(preds)});")
            for i, p in enumerate(preds):
                lines.append(f"        assert_eq!({const}[{i}], {rust_str(p)});")
                lines.append(f"        assert!(is_multi_valued({rust_str(p)}));")
            lines.append(f"        assert!(!is_multi_valued({rust_str(_absent_predicate(preds))}));")
        elif field == "decay_rate_by_predicate":
            lines.append(f"        assert_eq!({const}.len(), {len(value)});")
            for i, (pred, rate) in enumerate(value.items()):
                lines.append(f"        assert_eq!({const}[{i}].0, {rust_str(pred)});")
                lines.append(f"        assert_eq!({const}[{i}].1.to_bits(), {f64_bits(rate)});")
                for _, v in variants:  # the predicate wins over every kind
                    lines.append(f"        assert_eq!(FactKind::{v}.decay_rate_for({rust_str(pred)}).to_bits(), "
                                 f"{f64_bits(rate)}, \"decay_rate_for({v}, DECAY_RATE_BY_PREDICATE[{i}])\");")
            absent = rust_str(_absent_predicate(list(value)))
            for k, v in variants:  # any other predicate: the kind's rate
                lines.append(f"        assert_eq!(FactKind::{v}.decay_rate_for({absent}).to_bits(), "
                             f"{f64_bits(params.decay_rate[k])});")
    lines += ["    }", "", "    #[test]", "    fn reinforcement_matches_factmem() {",
              "        // bits computed by factmem.core.decay.reinforce on the same inputs: IEEE-754 + and * "
              "agree exactly"]
    for k, v in variants:
        c0 = params.initial_confidence[k]
        r = float(reinforce(c0, params.reinforce_gain, params.confidence_cap))
        lines.append(f"        assert_eq!(reinforced(FactKind::{v}.initial_confidence()).to_bits(), {f64_bits(r)});")
    lines += ["    }", ""]
    lines += _rust_rule_tests(params, variants, with_enum, period)
    lines += ["", "    #[test]", "    fn invariants_hold() {",
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
    return lines


#: a hand-made candidate set for the generated ``rank_context`` test: (id, predicate, object,
#: confidence as a fraction of the cap, decay rate, first_seen, last_reinforced) — ties on every key
_RANK_CASE = [(1, "b", "x", 1.0, 0.0, 0, 100), (2, "a", "y", 1.0, 0.0, 0, 100), (3, "a", "x", 1.0, 0.0, 0, 100),
              (4, "c", "z", 1.0, 0.0, 50, 100), (5, "d", "w", 1.0, 0.0, 0, 200), (6, "e", "v", 1.0, 0.3, 0, 0),
              (7, "f", "u", 0.0, 0.0, 0, 300), (8, "a", "x", 1.0, 0.0, 0, 100)]
_RANK_NOW = 3 * 86400 + 7


def _rust_rule_tests(params: MemoryParams, variants: Sequence[tuple[str, str]], with_enum: bool,
                     period: int) -> list[str]:
    """Tests of the helpers against factmem's own functions: effective confidence bit for bit, the
    schedule, the context rule on a hand-made set with ties on every key, and FactKind's names."""
    import numpy as np

    from factmem.core.context_rule import context_order, lexicographic_rank
    from factmem.core.schedule import next_consolidation

    lines = ["    /// Distance in units in the last place. factmem computes `exp` with numpy's vectorized routine,",
             "    /// which may differ from the C library's (Rust's `f64::exp`) by one ulp.",
             "    fn ulps(a: f64, b: f64) -> u64 {",
             "        (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs()",
             "    }",
             "",
             "    #[test]", "    fn helpers_match_factmem() {"]
    for k, _ in variants:
        c0, r0 = params.initial_confidence[k], params.decay_rate[k]
        for last, now in ((0, 216_000), (1_704_067_200, 1_704_067_200 + 3_601), (10, 5)):
            with np.errstate(over="ignore"):  # a rate near the float maximum: exp(-inf) = 0, as in Rust
                e = float(effective_at(c0, r0, last, now))
            lines.append(f"        assert!(ulps(effective_confidence({rust_f64(c0)}, {rust_f64(r0)}, {last}, {now}), "
                         f"f64::from_bits({f64_bits(e)})) <= 1);")
    lines += [f"        assert_eq!(SECONDS_PER_DAY, {rust_f64(SECONDS_PER_DAY)});",
              f"        assert_eq!(CONSOLIDATE_EVERY_SECONDS, {period});"]
    for after in (0, 1_704_067_199, 1_704_067_200, -1, -86_400):
        lines.append(f"        assert_eq!(next_consolidation({after}), {next_consolidation(after, period)});")
    cap = params.confidence_cap
    rows = [(i, p, o, f * cap, r, fs, lr) for i, p, o, f, r, fs, lr in _RANK_CASE]
    conf = np.array([r[3] for r in rows])
    rates = np.array([r[4] for r in rows])
    firsts = np.array([r[5] for r in rows], np.int64)
    lasts = np.array([r[6] for r in rows], np.int64)
    with np.errstate(over="ignore"):
        eff = effective_at(conf, rates, lasts, _RANK_NOW)
    keep = np.flatnonzero(eff >= context_threshold(params))
    order = keep[context_order(np.zeros(len(keep), np.int64), eff[keep], lasts[keep], firsts[keep],
                               lexicographic_rank([rows[i][1] for i in keep], [rows[i][2] for i in keep]))]
    expected = [rows[i][0] for i in order]
    lines.append("        let facts = vec![")
    for i, p, o, c, r, fs, lr in rows:
        lines.append(f"            ContextFact {{ id: {i}, predicate: {rust_str(p)}.to_string(), object: {rust_str(o)}.to_string(), "
                     f"confidence: {rust_f64(c)}, decay_rate: {rust_f64(r)}, first_seen: {fs}, last_reinforced: {lr} }},")
    lines += ["        ];",
              f"        let all: Vec<i64> = rank_context(facts.clone(), 100, {_RANK_NOW}).iter().map(|(f, _)| f.id)"
              ".collect();",
              f"        assert_eq!(all, vec!{expected!r});",
              f"        let top: Vec<i64> = rank_context(facts, 3, {_RANK_NOW}).iter().map(|(f, _)| f.id).collect();",
              f"        assert_eq!(top, vec!{expected[:3]!r});"]
    if with_enum:
        lines += ["        for kind in FactKind::ALL {",
                  "            assert_eq!(FactKind::from_str(kind.as_str()), Some(kind));",
                  "            assert_eq!(kind.as_str().parse::<FactKind>(), Ok(kind));",
                  "        }",
                  "        assert_eq!(FactKind::from_str(\"Explicit\"), None);",
                  "        assert!(\"nope\".parse::<FactKind>().is_err());"]
    lines.append("    }")
    return lines


def _absent_predicate(preds: list[str]) -> str:
    probe = "factmem-absent-predicate"
    while probe in preds:
        probe += "-"
    return probe

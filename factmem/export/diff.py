"""What a promotion changes: the parameters that differ between two params documents and both
sides' held-out metrics from their provenance — the text a reviewer reads before shipping.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from factmem.core.params import MemoryParams
from factmem.export.document import ParamsDocument, as_document, params_fingerprint

__all__ = ["diff_params", "diff_metrics", "render_diff"]


def _fmt_value(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):  # no such parameter on this side
        return "—"
    if isinstance(v, (list, tuple, frozenset, set)):
        return "[" + ", ".join(sorted(map(str, v))) + "]"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def diff_params(a: Any, b: Any, *, all: bool = False) -> pd.DataFrame:
    """What changes from ``a`` to ``b`` (params files, documents or MemoryParams): one row per flat
    parameter name (``decay_rate.episodic``) that differs, or every parameter with ``all=True``.

    Columns: ``parameter``, ``old``, ``new`` (the values), ``delta`` (new − old for numbers, else
    NaN), ``relative_change`` (delta / |old|; ±inf from 0; NaN for non-numbers), ``note`` (for
    predicate sets: ``+added -removed``).

    Per-predicate decay rates are rows ``decay_rate_by_predicate.<predicate>`` for every predicate
    either side gives a rate; a side without one has ``None`` there (its facts take their kind's
    rate) and the note says ``added`` or ``removed``.
    """
    pa_, pb = as_document(a).params.to_flat(), as_document(b).params.to_flat()
    rows = []
    for name in _names(pa_, pb):  # ~20 parameters, not facts: a loop is the clear form
        old: Any = pa_.get(name)  # None: no such per-predicate rate on this side
        new: Any = pb.get(name)
        numeric = isinstance(old, (int, float)) and isinstance(new, (int, float))
        same = old == new
        if numeric:
            # bit-exact: 0.0 and -0.0 differ in a file even if they compare equal
            same = same and math.copysign(1.0, old) == math.copysign(1.0, new)
        if same and not all:
            continue
        delta = rel = math.nan
        note = ""
        if numeric:
            delta = float(new) - float(old)
            rel = delta / abs(old) if old != 0 else (0.0 if delta == 0 else math.copysign(math.inf, delta))
        elif isinstance(old, list):
            added, removed = sorted(set(new) - set(old)), sorted(set(old) - set(new))
            note = " ".join([f"+{x}" for x in added] + [f"-{x}" for x in removed])
        elif old is None:
            note = "added (was the kind's rate)"
        elif new is None:
            note = "removed (the kind's rate applies)"
        rows.append({"parameter": name, "old": old, "new": new, "delta": delta, "relative_change": rel, "note": note})
    return pd.DataFrame(rows, columns=["parameter", "old", "new", "delta", "relative_change", "note"])


def _names(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """The fixed parameter names, then every per-predicate name of either side (sorted)."""
    fixed = MemoryParams.field_names()
    return fixed + sorted((set(a) | set(b)) - set(fixed))


def diff_metrics(a: Any, b: Any) -> pd.DataFrame:
    """Each side's held-out metrics from its provenance, one row per metric name (indexed by it):
    ``a``, ``a_baseline``, ``b``, ``b_baseline`` (what each side's decision judged it against) and
    ``b_minus_a``; NaN where a side has none. Files written before the judged comparison existed
    carry the seed defaults instead: ``a_defaults`` / ``b_defaults`` columns appear only for them."""
    da, db = as_document(a), as_document(b)
    cols = {
        "a": da.provenance.get("metrics", {}),
        "a_baseline": da.provenance.get("baseline_metrics", {}),
        "b": db.provenance.get("metrics", {}),
        "b_baseline": db.provenance.get("baseline_metrics", {}),
    }
    for side, doc in (("a", da), ("b", db)):
        if "default_metrics" in doc.provenance:
            cols[f"{side}_defaults"] = doc.provenance["default_metrics"]
    names: list[str] = []
    for table in cols.values():
        names.extend(m for m in table if m not in names)
    df = pd.DataFrame({c: [t.get(m, math.nan) for m in names] for c, t in cols.items()},
                      index=pd.Index(names, name="metric"), dtype="float64")
    df["b_minus_a"] = df["b"] - df["a"]
    return df


def render_diff(a: Any, b: Any, *, all: bool = False) -> str:
    """The text a reviewer reads before promoting ``b`` over ``a``: changed parameters with their
    relative change, then both sides' held-out metrics and a warning when they are not comparable."""
    da, db = as_document(a), as_document(b)
    la, lb = da.label, db.label
    lines = [f"A: {la}{_prov_line(da)}", f"B: {lb}{_prov_line(db)}"]
    for side, doc in (("A", da), ("B", db)):
        j = doc.provenance.get("judgement")
        if j:
            lines.append(f"{side} judged: {_judged_line(j)}")
    lines.append("")
    changes = diff_params(da, db, all=all)
    n_params = len(_names(da.params.to_flat(), db.params.to_flat()))
    if changes.empty:
        lines.append(f"parameters: identical (all {n_params}; fingerprint {params_fingerprint(da.params)[:16]})")
    else:
        n_changed = len(diff_params(da, db)) if all else len(changes)
        lines.append(f"parameters: {n_changed} of {n_params} changed")
        shown = pd.DataFrame({
            "parameter": changes["parameter"],
            "A": changes["old"].map(_fmt_value),
            "B": changes["new"].map(_fmt_value),
            "change": [_fmt_change(r, n) for r, n in zip(changes["relative_change"], changes["note"])],
        })
        lines.append(_indent(shown.to_string(index=False)))
    lines.append("")
    metrics = diff_metrics(da, db)
    if metrics.empty:
        lines.append("held-out metrics: none recorded in either provenance")
    else:
        shown = metrics.rename(columns={"a": "A", "a_baseline": "A judged against", "b": "B",
                                        "b_baseline": "B judged against", "a_defaults": "A seed defaults (old file)",
                                        "b_defaults": "B seed defaults (old file)", "b_minus_a": "B - A"})
        shown = shown[[c for c in shown.columns if not shown[c].isna().all() or c in ("A", "B", "B - A")]]
        objective = db.provenance.get("objective") or da.provenance.get("objective")
        lines.append("held-out metrics (from provenance)" + (f"; objective: {objective}" if objective else "") + ":")
        lines.append(_indent(shown.reset_index().to_string(index=False, float_format=lambda v: f"{v:.6g}", na_rep="-")))
        sa, sb = da.provenance.get("dataset_sha256"), db.provenance.get("dataset_sha256")
        if sa and sb and sa != sb:
            lines.append(f"warning: A and B were evaluated on different datasets (sha256 {sa[:12]}… vs {sb[:12]}…); "
                         "compare each side with its own defaults, not A with B")
        elif not (sa and sb):
            lines.append("note: a side records no dataset_sha256; metrics may come from different data")
    return "\n".join(lines) + "\n"


def _judged_line(j: dict[str, Any]) -> str:
    """The judged comparison of a params file, in one line."""
    def num(key: str, fmt: str = "+.4g") -> str:
        v = j.get(key)
        return format(v, fmt) if isinstance(v, float) else "?"

    text = (f"{j.get('keep', '?')} kept ({'promoted' if j.get('promoted') == 'yes' else 'not promoted'}); "
            f"held-out {j.get('objective', '?')} {num('recommended', '.4g')} against {num('baseline', '.4g')} for "
            f"the {j.get('against', 'baseline')}: {num('difference')}, 95% interval [{num('low')}, {num('high')}]; "
            f"{num('people', '.0f')} people, {num('points', '.0f')} session starts ({j.get('holdout', '?')}); "
            f"costs {j.get('costs', '?')}; minimum effect {num('min_effect', 'g')}")
    if "empty_difference" in j:
        text += f"; vs empty {num('empty_difference')}, vs keep-everything {num('keep_everything_difference')}"
    return text


def _prov_line(doc: ParamsDocument) -> str:
    p = doc.provenance
    bits = [f"{k} {p[k]}" for k in ("run_id", "created_at") if k in p]
    if doc.legacy:
        bits.append("legacy file, no provenance")
    return f" ({', '.join(bits)})" if bits else ""


def _fmt_change(rel: float, note: str) -> str:
    if note:
        return note
    if math.isnan(rel):
        return "changed"
    if math.isinf(rel):
        return "from 0"
    return f"{rel:+.1%}"


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())

"""Import real temporal facts (``subject predicate object start end`` TSV) as a dataset.

Temporal knowledge-graph datasets publish facts with validity bounds in several formats. Each
bound is read as a *period*:

==================  ==========================================  ===============================
bound               meaning                                     period
==================  ==========================================  ===============================
``1987``            a year                                      1987-01-01 .. 1988-01-01
``1987-05-03``      a date                                      that day
``1952-##-##``      a year, month and day unknown               the year 1952
``1952-05-##``      a month, day unknown                        May 1952
``None``, empty,    unknown or open                             —
``####-##-##``
==================  ==========================================  ===============================

A fact is true from the start of its start period (``valid_from``) to the end of its end period
(``valid_to``, exclusive; empty when the end is open). The truth keeps the periods themselves in
its optional columns ``start_period`` and ``end_period`` ("year", "month" or "day"), so that value
changes can be judged in periods (an old value whose end year is the new value's start year was
handed over in that year: :mod:`factmem.evaluation.cardinality_choice`); its rows are in start order, ties
in the file's order. Rows are skipped — and reported with their
count and first examples, never silently — when a bound is unparseable or outside the supported
years 0001–9999 (times are Unix seconds in that range), when the start period
begins after the end period ends, when the start is unknown (unless ``open_start="log_start"``),
when a field is missing or empty, or when the row repeats an earlier one.

**Guards.** A row whose latest bound lies centuries beyond the rest of the data (more than
:data:`OUTLIER_YEARS` years after every other row's, and such rows at most 1% of the file) is an
*outlier* — a typo like a start in the year 2844 — and is skipped and reported by line: taken as
data it would become the log's end, and every open-ended fact would be mentioned until then. The
log's end is the last observed time (the latest bound of the imported rows) unless ``end`` says
otherwise; with ``end`` a fact starting after it is skipped (reported) and mentions stop there. The
number of mentions is counted before any is made: beyond ``max_mentions`` (default
:data:`DEFAULT_MAX_MENTIONS`, which fits in memory on a machine with a few GB free) the import is
refused with an error naming the rows that contribute the most.

The log has a mention at each fact's start and, optionally, further mentions at random instants
inside its interval (a Poisson process of ``mention_rate`` per year, seeded), up to the log's end. Mentions of one
subject at one instant share a message; a subject's messages of one UTC day share a session.
Predicates whose objects overlap in time for some subject are declared multi-valued in the
scenario (with the number of overlapping pairs), so the cost of single-valued supersession on
real data can be measured per predicate.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from factmem.core.codes import DAY, MAX_TIME, MENTION_KINDS, MIN_TIME
from factmem.data.logs import Dataset, make_dataset
from factmem.errors import InputError

__all__ = ["DEFAULT_MAX_MENTIONS", "OPEN_START", "OUTLIER_YEARS", "ImportReport", "parse_bounds", "import_triples"]

_UNKNOWN = {"", "none", "null", "nan", "unknown", "####-##-##", "####", "####-##"}
_BOUND_RE = r"^(-?[0-9]{1,4})(?:-([0-9]{2}|##)(?:-([0-9]{2}|##))?)?$"
_HEADER = ("subject", "predicate", "object", "start", "end")
OPEN_START = ("skip", "log_start")
#: mentions an import may make: about 2.3 KB each while the dataset is built and saved (measured: 2.2 GB
#: resident for 0.93M mentions), so ~7 GB at the limit
DEFAULT_MAX_MENTIONS = 3_000_000
#: a row whose latest bound is this many years beyond every other row's is an outlier
OUTLIER_YEARS = 200
_YEAR = 365.2425 * DAY


@dataclass
class ImportReport:
    """What an import read, kept and skipped (reason → count; first examples with line numbers)."""

    source: str
    rows: int = 0
    imported: int = 0
    mentions: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    examples: list[tuple[int, str, str]] = field(default_factory=list)  # (line, reason, line text)
    outliers: list[tuple[int, str, str]] = field(default_factory=list)  # every outlier row: (line, why, text)
    end: int | None = None  # the log's end

    @property
    def skipped_total(self) -> int:
        return sum(self.skipped.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source, "rows": self.rows, "imported": self.imported, "mentions": self.mentions,
            "skipped": dict(self.skipped), "skipped_total": self.skipped_total,
            "examples": [{"line": ln, "reason": r, "text": t} for ln, r, t in self.examples],
            "outliers": [{"line": ln, "reason": r, "text": t} for ln, r, t in self.outliers],
            "end": self.end,
        }

    def __str__(self) -> str:
        lines = [f"{self.source}: {self.rows} rows, {self.imported} facts imported, {self.mentions} mentions, "
                 f"{self.skipped_total} skipped"]
        for reason, n in self.skipped.items():
            lines.append(f"  skipped {n}: {reason}")
        for ln, reason, text in self.examples:
            lines.append(f"  e.g. line {ln}: {reason}: {text!r}")
        for ln, reason, text in self.outliers:
            lines.append(f"  outlier, line {ln}: {reason}: {text!r}")
        return "\n".join(lines)


def parse_bounds(values: pd.Series | np.ndarray | list[str]) -> pd.DataFrame:
    """Parse bound strings (vectorized) into periods.

    Returns columns ``status`` ("ok", "unknown", "invalid", "out_of_range" for a period outside the
    supported years 0001–9999, or "ends_past_range" for one that starts in them but ends after the last
    supported second, 9999-12-31T23:59:59: its exclusive end would be 10000-01-01), ``lo`` (Unix seconds at the start
    of the period), ``hi`` (Unix seconds at its end, exclusive) and ``period`` ("year", "month" or
    "day"); lo/hi are 0 and period is empty unless ok.
    """
    s = pd.Series(values, dtype="str").fillna("").str.strip()
    unknown = s.str.lower().isin(_UNKNOWN).to_numpy()
    parts = s.str.extract(_BOUND_RE)
    matched = parts[0].notna().to_numpy() & ~unknown
    y = pd.to_numeric(parts[0].where(matched), errors="coerce").fillna(1970).to_numpy(np.int64)
    m_raw, d_raw = parts[1].fillna("##"), parts[2].fillna("##")
    m_known = (m_raw != "##").to_numpy()
    d_known = (d_raw != "##").to_numpy()
    m = pd.to_numeric(m_raw.where(m_known), errors="coerce").fillna(1).to_numpy(np.int64)
    d = pd.to_numeric(d_raw.where(d_known), errors="coerce").fillna(1).to_numpy(np.int64)
    valid = matched & ~(d_known & ~m_known) & (m >= 1) & (m <= 12) & (d >= 1)
    year = (y - 1970).astype("datetime64[Y]")
    month = year.astype("datetime64[M]") + np.where(valid, m - 1, 0)
    month_days = ((month + 1).astype("datetime64[D]") - month.astype("datetime64[D]")).astype(np.int64)
    valid &= d <= month_days
    day = month.astype("datetime64[D]") + np.where(valid, d - 1, 0)
    precise_day = valid & d_known
    precise_month = valid & m_known & ~d_known
    lo = np.where(precise_day, day.astype("datetime64[s]").astype(np.int64),
                  np.where(precise_month, month.astype("datetime64[s]").astype(np.int64),
                           year.astype("datetime64[s]").astype(np.int64)))
    hi = np.where(precise_day, (day + 1).astype("datetime64[s]").astype(np.int64),
                  np.where(precise_month, (month + 1).astype("datetime64[s]").astype(np.int64),
                           (year + 1).astype("datetime64[s]").astype(np.int64)))
    # the supported time range: a period must lie within 0001-01-01 .. 9999-12-31T23:59:59
    in_range = (lo >= MIN_TIME) & (hi <= MAX_TIME)
    # a period of year 9999 (or its December, or its last day) starts in range but its exclusive end,
    # 10000-01-01, is past the last supported second: told apart so that the message names that
    range_word = np.where((lo >= MIN_TIME) & (lo <= MAX_TIME), "ends_past_range", "out_of_range")
    status = np.where(unknown, "unknown", np.where(valid, np.where(in_range, "ok", range_word), "invalid"))
    valid &= in_range
    period = np.where(~valid, "", np.where(precise_day, "day", np.where(precise_month, "month", "year")))
    return pd.DataFrame({"status": status, "lo": np.where(valid, lo, 0), "hi": np.where(valid, hi, 0),
                         "period": period})


def import_triples(
    path: str | os.PathLike[str],
    *,
    mention_rate: float = 0.0,
    seed: int = 0,
    kind: str = "explicit",
    open_start: str = "skip",
    max_examples: int = 5,
    max_mentions: int = DEFAULT_MAX_MENTIONS,
    end: int | None = None,
) -> tuple[Dataset, ImportReport]:
    """Read a temporal-fact TSV into a dataset (in memory; write it with ``logs.save``).

    ``mention_rate``: extra mentions per year of validity (Poisson, seeded by ``seed``).
    ``kind``: the kind of every imported fact. ``open_start``: what to do with a fact whose start
    is unknown — ``"skip"`` it (reported) or let it hold from the log's start (``"log_start"``).
    ``max_mentions``: refuse an import that would make more mentions (the rows contributing the
    most are named). ``end``: the log's end (Unix seconds; default: the last observed time).
    Returns the dataset and an :class:`ImportReport`.
    """
    if isinstance(max_mentions, bool) or not isinstance(max_mentions, (int, np.integer)) or max_mentions < 1:
        raise InputError(f"max_mentions = {max_mentions!r} is invalid: must be a positive integer")
    if end is not None and (isinstance(end, bool) or not isinstance(end, (int, np.integer))
                            or not MIN_TIME <= end <= MAX_TIME):
        raise InputError(f"end = {end!r} is invalid: must be Unix seconds in the years 0001-9999")
    given_end = end
    if kind not in MENTION_KINDS:
        raise InputError(f"kind = {kind!r} is invalid: must be one of {', '.join(MENTION_KINDS)}")
    if open_start not in OPEN_START:
        raise InputError(f"open_start = {open_start!r} is invalid: must be one of {', '.join(OPEN_START)}")
    if isinstance(mention_rate, bool) or not isinstance(mention_rate, (int, float)) or not 0 <= mention_rate <= 1e4:
        raise InputError(f"mention_rate = {mention_rate!r} is invalid: must be a number in [0, 10000] (per year)")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"seed must be a non-negative integer, got {seed!r}")
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    try:
        text = data.decode("utf-8").lstrip("\ufeff")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(f"{path}:{line}: not UTF-8 text ({exc.reason})") from None
    report = ImportReport(source=path.name)

    lines = np.array(text.replace("\r\n", "\n").split("\n"), dtype=object)
    lineno = np.arange(1, len(lines) + 1)
    nonblank = np.asarray(pc.utf8_length(pc.utf8_trim_whitespace(pa.array(lines, pa.string()))).to_numpy()) > 0
    lines, lineno = lines[nonblank], lineno[nonblank]
    fields = pc.split_pattern(pa.array(lines, pa.string()), "\t")
    nfields = pc.list_value_length(fields).to_numpy()
    if len(lines) and nfields[0] == 5:
        header = tuple(str(x).strip().lower() for x in fields[0].as_py())
        if header == _HEADER:
            lines, lineno, nfields = lines[1:], lineno[1:], nfields[1:]
            fields = fields[1:]
    report.rows = len(lines)

    reason = np.full(len(lines), None, dtype=object)
    reason[nfields != 5] = "expected 5 tab-separated fields (subject predicate object start end)"
    ok5 = nfields == 5
    cols = {}
    for i, name in enumerate(_HEADER):
        col = np.full(len(lines), "", dtype=object)
        if ok5.any():
            picked = pc.list_element(fields.filter(pa.array(ok5)), i)
            col[ok5] = np.asarray(pc.utf8_trim_whitespace(picked).to_numpy(zero_copy_only=False), dtype=object)
        cols[name] = col
    for name in ("subject", "predicate", "object"):
        empty = ok5 & (cols[name] == "") & (reason == None)  # noqa: E711
        reason[empty] = f"empty {name}"
    for name in ("subject", "predicate"):  # a fact's key: no NUL (factmem.store.calls)
        nul = ok5 & (reason == None) & np.asarray(  # noqa: E711
            pc.match_substring(pa.array(cols[name], pa.string()), "\0").to_numpy(zero_copy_only=False), bool)
        reason[nul] = f"NUL (\\0) in {name}"
    start = parse_bounds(cols["start"])
    end_bounds = parse_bounds(cols["end"])
    pending = reason == None  # noqa: E711
    reason[pending & (start["status"].to_numpy() == "invalid")] = "unparseable start"
    pending = reason == None  # noqa: E711
    reason[pending & (end_bounds["status"].to_numpy() == "invalid")] = "unparseable end"
    for name, bound in (("start", start), ("end", end_bounds)):
        pending = reason == None  # noqa: E711
        reason[pending & (bound["status"].to_numpy() == "out_of_range")] = \
            f"{name} outside the supported years 0001-9999"
        pending = reason == None  # noqa: E711
        reason[pending & (bound["status"].to_numpy() == "ends_past_range")] = \
            f"{name} ends after 9999-12-31T23:59:59, the last supported second (a period ends where the next " \
            "begins: year 9999 at 10000-01-01)"
    s_ok, e_ok = start["status"].to_numpy() == "ok", end_bounds["status"].to_numpy() == "ok"
    s_lo, e_hi = start["lo"].to_numpy(), end_bounds["hi"].to_numpy()
    pending = reason == None  # noqa: E711
    reason[pending & s_ok & e_ok & (s_lo >= e_hi)] = "start after end"
    pending = reason == None  # noqa: E711
    reason[pending & ~s_ok & ~e_ok] = "no known bound"
    if open_start == "skip":
        pending = reason == None  # noqa: E711
        reason[pending & ~s_ok] = "unknown start"
    pending = reason == None  # noqa: E711
    keyframe = pd.DataFrame({n: cols[n] for n in _HEADER})
    dup = keyframe.duplicated().to_numpy() & pending
    reason[dup] = "duplicate of an earlier row"
    if given_end is not None:
        pending = reason == None  # noqa: E711
        reason[pending & s_ok & (s_lo > given_end)] = "starts after the given end"
    outlier_why = _outliers(reason == None, s_ok, s_lo, e_ok, e_hi)  # noqa: E711
    outlier = np.flatnonzero(outlier_why != None)  # noqa: E711
    reason[outlier] = f"outlier: a bound more than {OUTLIER_YEARS} years after the rest of the data"
    report.outliers = [(int(lineno[i]), str(outlier_why[i]), str(lines[i])) for i in outlier]
    keep = reason == None  # noqa: E711

    # report skipped rows: counts per reason (first-seen order), first examples
    skipped = np.flatnonzero(~keep)
    if len(skipped):
        counts = pd.Series(reason[skipped]).value_counts(sort=False)
        report.skipped = {str(k): int(v) for k, v in counts.items()}
        report.examples = [(int(lineno[i]), str(reason[i]), str(lines[i])) for i in skipped[:max_examples]]

    idx = np.flatnonzero(keep)
    subj, pred, obj = cols["subject"][idx], cols["predicate"][idx], cols["object"][idx]
    vf = np.where(s_ok[idx], s_lo[idx], 0)
    vt_known = e_ok[idx]
    vt = np.where(vt_known, e_hi[idx], 0)
    # the period each bound is known to (empty: a log-start stand-in for an unknown start, or open)
    no_period = np.array(None, dtype=object)
    start_period = np.where(s_ok[idx], start["period"].to_numpy(object)[idx], no_period)
    end_period = np.where(vt_known, end_bounds["period"].to_numpy(object)[idx], no_period)
    if len(idx) == 0:
        raise InputError(f"{path}: no fact could be imported\n{report}")
    known_starts = vf[s_ok[idx]]
    log_start = int(known_starts.min()) if len(known_starts) else int(vt[vt_known].min()) - DAY
    vf = np.where(s_ok[idx], vf, log_start)
    observed_end = int(max(vf.max(), vt[vt_known].max() if vt_known.any() else vf.max()))
    log_end = observed_end if given_end is None else int(given_end)
    report.imported = len(idx)
    report.end = log_end

    # mentions: one at the start, then a seeded Poisson process inside the interval (up to the log's end)
    rng = np.random.default_rng(seed)
    stop = np.minimum(np.where(vt_known, vt, log_end), log_end)
    span = np.maximum(stop - vf - 1, 0)
    extra = rng.poisson(mention_rate * span / (365.25 * DAY)) if mention_rate > 0 else np.zeros(len(idx), np.int64)
    extra = np.where(span > 0, extra, 0)
    total = len(idx) + int(extra.sum())
    if total > max_mentions:  # refuse before any mention is made
        top = np.argsort(-extra, kind="stable")[:5]
        named = "; ".join(f"line {int(lineno[idx][i])} ({int(extra[i]) + 1:,} mentions: {lines[idx][i]!r})"
                          for i in top)
        raise InputError(f"{path}: the import would make {total:,} mentions, more than max_mentions = "
                         f"{max_mentions:,} (the log runs to {_year(log_end)}); the rows making the most: {named}. "
                         "Lower --rate, give --end, or raise --max-mentions if the memory allows")
    fact = np.concatenate([np.arange(len(idx)), np.repeat(np.arange(len(idx)), extra)])
    offset = np.concatenate([np.zeros(len(idx), np.int64),
                             1 + np.floor(rng.random(int(extra.sum())) * np.repeat(span, extra)).astype(np.int64)])
    ts = vf[fact] + offset
    report.mentions = len(fact)

    # messages: one per (subject, instant); sessions: one per (subject, UTC day)
    subj_codes, subj_names = pd.factorize(subj, sort=True)
    sc = subj_codes[fact]
    order = np.lexsort((fact, sc, ts))
    fact, sc, ts = fact[order], sc[order], ts[order]
    new_msg = np.r_[True, (ts[1:] != ts[:-1]) | (sc[1:] != sc[:-1])] if len(ts) else np.zeros(0, bool)
    msg_of = np.cumsum(new_msg) - 1
    first = np.flatnonzero(new_msg)
    n_msg = len(first)
    width = len(str(max(n_msg, 1)))
    msg_ids = _ids("m", n_msg, width)
    day = np.datetime_as_string(np.floor_divide(ts[first], DAY).astype("datetime64[D]"))
    sess_ids = _concat(np.asarray(subj_names, dtype=object)[sc[first]], "@", day.astype(object))
    sentence = _concat(np.asarray(subj)[fact], " ", pred[fact], " ", obj[fact], ".")
    message_text = _join_groups(sentence, msg_of, n_msg)
    messages = pd.DataFrame({"session_id": sess_ids, "message_id": msg_ids, "ts": ts[first],
                             "speaker": "import", "text": message_text})
    events = pd.DataFrame({
        "ts": ts, "subject": subj[fact], "predicate": pred[fact], "object": obj[fact], "kind": kind,
        "session_id": sess_ids[msg_of], "message_id": msg_ids[msg_of], "note": None,
    })
    truth = pd.DataFrame({
        "subject": subj, "predicate": pred, "object": obj, "kind": kind, "valid_from": vf,
        "valid_to": pd.arrays.IntegerArray(vt.astype(np.int64), ~vt_known),
        "relevant_until": pd.array([pd.NA] * len(idx), dtype="Int64"), "noise": None,
        "start_period": start_period, "end_period": end_period,
    })
    # by start, then source order: values of one (subject, predicate) with the same start period
    # keep the file's order, which value-change accounting uses to break the tie
    truth = truth.iloc[np.argsort(vf, kind="stable")].reset_index(drop=True)
    preds = _cardinality(subj, pred, obj, vf, np.where(vt_known, vt, np.iinfo(np.int64).max))
    scenario = {
        "generator": "factmem.data.importer",
        "name": path.stem,
        "source": path.name,
        "source_sha256": hashlib.sha256(data).hexdigest(),
        "start": log_start,
        "end": log_end,
        "seed": int(seed),
        "mention_rate": float(mention_rate),
        "kind": kind,
        "open_start": open_start,
        "multi_valued_predicates": sorted(p for p, d in preds.items() if d["cardinality"] == "multi"),
        "predicates": preds,
        "import": {"rows": report.rows, "imported": report.imported, "mentions": report.mentions,
                   "skipped": dict(report.skipped), "outlier_lines": [ln for ln, _, _ in report.outliers],
                   "end": "given" if given_end is not None else "last observed time",
                   "start_periods": _counts(start_period), "end_periods": _counts(end_period)},
    }
    gens = pd.DataFrame({c: pd.Series([], dtype="str") for c in
                         ("gen_id", "subject", "predicate", "object", "note", "support_predicate", "support_object")})
    return make_dataset(messages, events, truth, gens, scenario), report


def _year(t: int) -> str:
    return str(np.datetime64(int(t), "s").astype("datetime64[Y]"))


def _outliers(candidate: np.ndarray, s_ok: np.ndarray, s_lo: np.ndarray, e_ok: np.ndarray, e_hi: np.ndarray
              ) -> np.ndarray:
    """Per row, why it is a far-future outlier (None if not): among the ``candidate`` rows, the few
    (at most 1%, at least one) whose latest bound lies more than :data:`OUTLIER_YEARS` years after
    every other row's latest bound."""
    out = np.full(len(candidate), None, dtype=object)
    latest = np.where(e_ok, e_hi, np.where(s_ok, s_lo, np.iinfo(np.int64).min))
    rows = np.flatnonzero(candidate & (s_ok | e_ok))
    if len(rows) < 2:
        return out
    order = rows[np.argsort(latest[rows], kind="stable")]
    t = latest[order]
    gap = np.diff(t)
    limit = max(1, len(rows) // 100)
    # the lowest cut with a gap of centuries above which at most `limit` rows lie
    cuts = np.flatnonzero((gap > OUTLIER_YEARS * _YEAR) & (len(t) - 1 - np.arange(len(gap)) <= limit))
    if not len(cuts):
        return out
    cut = int(cuts[0])
    rest = int(t[cut])
    for i in order[cut + 1:]:  # the few outlier rows
        which = "end" if e_ok[i] and (not s_ok[i] or e_hi[i] > s_lo[i]) else "start"
        bound = int(e_hi[i] - 1) if which == "end" else int(s_lo[i])
        out[i] = (f"its {which} in the year {_year(bound)} lies {(bound - rest) / _YEAR:,.0f} years after every other "
                  f"row's latest bound ({_year(rest - 1)})")
    return out


def _counts(periods: np.ndarray) -> dict[str, int]:
    """How many bounds are known to each period (year, month, day), for the scenario."""
    known = pd.Series(periods[pd.notna(periods)], dtype=object)
    return {str(k): int(v) for k, v in known.value_counts().sort_index().items()}


def _ids(prefix: str, n: int, width: int) -> np.ndarray:
    num = pc.utf8_lpad(pc.cast(pa.array(np.arange(1, n + 1, dtype=np.int64)), pa.string()), width=width, padding="0")
    return np.asarray(pc.binary_join_element_wise(prefix, num, "").to_numpy(zero_copy_only=False), dtype=object)


def _concat(*parts) -> np.ndarray:
    arrays = [p if isinstance(p, str) else (p if isinstance(p, (pa.Array, pa.ChunkedArray)) else pa.array(p, pa.string()))
              for p in parts]
    return np.asarray(pc.binary_join_element_wise(*arrays, "").to_numpy(zero_copy_only=False), dtype=object)


def _join_groups(strings: np.ndarray, group: np.ndarray, n: int) -> np.ndarray:
    """Join the strings of each group (contiguous group ids 0..n-1, in order) with spaces."""
    offsets = np.r_[np.flatnonzero(np.r_[True, group[1:] != group[:-1]]), len(group)].astype(np.int32)
    lists = pa.ListArray.from_arrays(pa.array(offsets), pa.array(strings, pa.string()))
    out = np.asarray(pc.binary_join(lists, " ").to_numpy(zero_copy_only=False), dtype=object)
    if len(out) != n:  # pragma: no cover - guards the contiguity assumption
        raise AssertionError("message groups are not contiguous")
    return out


def _cardinality(subj, pred, obj, vf, vt) -> dict[str, dict[str, Any]]:
    """Per predicate: multi-valued if some subject holds two facts at overlapping times."""
    frame = pd.DataFrame({"s": subj, "p": pred, "vf": vf, "vt": vt})
    frame = frame.sort_values(["p", "s", "vf", "vt"], kind="stable").reset_index(drop=True)
    code = frame.groupby(["p", "s"], sort=False).ngroup()
    # the latest end among the earlier facts of the same (predicate, subject): grouped Cython ops
    prev_end = frame["vt"].groupby(code).cummax().groupby(code).shift(1)
    overlap = (frame["vf"] < prev_end).fillna(False).to_numpy(dtype=bool)
    per = pd.DataFrame({"p": frame["p"], "overlap": overlap}).groupby("p", sort=True)["overlap"].agg(["sum", "size"])
    return {
        str(p): {"cardinality": "multi" if int(r["sum"]) > 0 else "single", "facts": int(r["size"]),
                 "overlapping": int(r["sum"])}
        for p, r in per.iterrows()
    }

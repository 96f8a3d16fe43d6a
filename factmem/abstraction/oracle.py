"""The abstraction prompt's cluster contract and the ground-truth oracle provider.

The abstraction pass puts the cluster in the last user message as one JSON object (see
:func:`cluster_payload`); :class:`OracleProvider` reads it back (:func:`parse_cluster_prompt`) and
answers from a dataset's ground-truth generalizations with a seeded error model, so the simulator
can study abstraction without a model. Ground floor: imports only factmem.errors and factmem.abstraction.cassette.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from factmem.abstraction.cassette import canonical_json
from factmem.abstraction.prompts import PROMPT_VERSION
from factmem.errors import InputError, ProviderError

__all__ = [
    "PROMPT_VERSION",
    "OracleProvider",
    "OracleDraw",
    "ORACLE_ERRORS",
    "SUPPORT_ERRORS",
    "GENERALIZATION_COLUMNS",
    "cluster_payload",
    "parse_cluster_prompt",
    "messages_hash",
]




def _check_temperature(temperature: float) -> float:
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float, np.floating, np.integer)):
        raise InputError(f"temperature must be a number, got {temperature!r}")
    t = float(temperature)
    if not math.isfinite(t) or t < 0:
        raise InputError(f"temperature must be finite and >= 0, got {temperature!r}")
    return t

# --------------------------------------------------------------------------------------------------
# The cluster prompt contract shared by the abstraction pass and the oracle
# --------------------------------------------------------------------------------------------------

_FACT_FIELDS = ("id", "subject", "predicate", "object", "note")
_INDEXED_FIELDS = ("index", "subject", "predicate", "object", "note")
_FENCE_RE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n(.*?)```", re.S)


def cluster_payload(subject: str, max_facts: int, facts: pd.DataFrame | Sequence[Mapping],
                    link_scope: str = "cluster") -> str:
    """The cluster as the JSON object the prompt must carry (and the oracle reads).

    ``facts``: a DataFrame or records with ``id, subject, predicate, object`` and optional ``note``.
    Returns the JSON text of ``{"subject", "max_facts", "facts": [{"id","subject","predicate","object","note"}]}``
    with facts in the given order and missing notes as ``""``. With ``link_scope="support"`` each
    fact carries its position ``"index"`` (0, 1, …) in place of its store ``"id"``: the model cites
    supporting facts by these indices, and a store id would only invite citing the wrong number.
    """
    if link_scope not in ("cluster", "support"):
        raise InputError(f"link_scope must be 'cluster' or 'support', got {link_scope!r}")
    if isinstance(facts, pd.DataFrame):
        missing = [c for c in ("id", "subject", "predicate", "object") if c not in facts.columns]
        if missing:
            raise InputError(f"cluster facts lack column(s) {missing}; have {list(facts.columns)}")
        # whole columns to native Python lists, then one zip: no per-row pandas access
        note = facts["note"].fillna("").astype(str).tolist() if "note" in facts.columns else [""] * len(facts)
        columns = [facts["id"].tolist()] + [facts[c].astype(str).tolist() for c in ("subject", "predicate", "object")]
        records = [dict(zip(_FACT_FIELDS, row)) for row in zip(*columns, note)]
    else:
        records = []
        for i, f in enumerate(facts):  # plain records: validate while copying
            missing = [c for c in ("id", "subject", "predicate", "object") if c not in f]
            if missing:
                raise InputError(f"cluster facts[{i}] lacks {missing}")
            records.append({"id": f["id"], "subject": str(f["subject"]), "predicate": str(f["predicate"]),
                            "object": str(f["object"]), "note": "" if f.get("note") is None else str(f["note"])})
    if link_scope == "support":
        records = [dict(zip(_INDEXED_FIELDS, (i, r["subject"], r["predicate"], r["object"], r["note"])))
                   for i, r in enumerate(records)]
    payload = {"subject": str(subject), "max_facts": int(max_facts), "facts": records}
    return json.dumps(payload, ensure_ascii=False, default=_json_default)


def _json_default(value: Any) -> Any:
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _message_text(message: Any) -> str:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI "content parts"
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    raise InputError(f"oracle prompt: the user message has no text content ({type(content).__name__})")


def _json_objects(text: str):
    """Candidate JSON objects in ``text``: the whole text, fenced blocks, then each '{' in order."""
    decoder = json.JSONDecoder()
    stripped = text.strip()
    try:
        yield json.loads(stripped)
    except ValueError:
        pass
    for block in _FENCE_RE.findall(text):
        try:
            yield json.loads(block)
        except ValueError:
            pass
    for match in re.finditer(r"\{", text):
        try:
            yield decoder.raw_decode(text, match.start())[0]
        except ValueError:
            continue


def parse_cluster_prompt(messages: Sequence[Mapping]) -> dict:
    """Find the cluster JSON object in the last user message (see :func:`cluster_payload`).

    The message may be bare JSON, prose with a fenced JSON block, or prose with a bare JSON object;
    the first JSON object having a ``facts`` key is used. Returns ``subject``, ``max_facts``,
    ``facts`` and ``link_scope``: ``support`` when every fact carries an integer ``index`` (the
    support prompt), ``cluster`` when none does. Raises InputError naming what is missing.
    """
    users = [m for m in messages if isinstance(m, Mapping) and m.get("role") == "user"]
    if not users:
        raise InputError("oracle prompt: no message with role 'user'")
    text = _message_text(users[-1])
    cluster = next((o for o in _json_objects(text) if isinstance(o, dict) and "facts" in o), None)
    if cluster is None:
        raise InputError(
            "oracle prompt: the last user message holds no JSON object with a 'facts' key "
            f"(starts {text[:80]!r})"
        )
    subject, max_facts, facts = cluster.get("subject"), cluster.get("max_facts"), cluster["facts"]
    if not isinstance(subject, str) or not subject:
        raise InputError(f"oracle prompt: 'subject' must be a non-empty string, got {subject!r}")
    if isinstance(max_facts, bool) or not isinstance(max_facts, int) or max_facts < 0:
        raise InputError(f"oracle prompt: 'max_facts' must be an integer >= 0, got {max_facts!r}")
    if not isinstance(facts, list):
        raise InputError(f"oracle prompt: 'facts' must be a list, got {type(facts).__name__}")
    indexed = 0
    for i, fact in enumerate(facts):  # validation of a prompt-sized list, not a hot path
        if not isinstance(fact, dict):
            raise InputError(f"oracle prompt: facts[{i}] is not an object")
        for field in ("predicate", "object"):
            if not isinstance(fact.get(field), str):
                raise InputError(f"oracle prompt: facts[{i}].{field} missing or not a string")
        if "index" in fact:
            index = fact["index"]
            if isinstance(index, bool) or not isinstance(index, int) or index < 0:
                raise InputError(f"oracle prompt: facts[{i}].index must be an integer >= 0, got {index!r}")
            indexed += 1
    if indexed not in (0, len(facts)):
        raise InputError(f"oracle prompt: {indexed} of {len(facts)} facts carry an 'index'; all or none must")
    scope = "support" if facts and indexed == len(facts) else "cluster"
    return {"subject": subject, "max_facts": max_facts, "facts": facts, "link_scope": scope}


def messages_hash(messages: Sequence[Mapping]) -> str:
    """sha256 (hex) of the canonical JSON of the messages: the oracle's per-prompt randomness key."""
    return hashlib.sha256(canonical_json(list(messages)).encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------------------------------
# The oracle
# --------------------------------------------------------------------------------------------------

#: Error draws of the oracle, in the fixed order their uniforms are drawn.
ORACLE_ERRORS: tuple[str, ...] = ("prose", "fence", "invalid_json", "too_many", "invented", "timeout",
                                   "wrong_support", "missing_support", "invalid_support")
#: The errors of a support answer's indices: drawn from their own generator (so the first six draw
#: exactly as before they existed) and fired only on support prompts.
SUPPORT_ERRORS: tuple[str, ...] = ("wrong_support", "missing_support", "invalid_support")
_N_BASE_ERRORS = len(ORACLE_ERRORS) - len(SUPPORT_ERRORS)
GENERALIZATION_COLUMNS: tuple[str, ...] = (
    "gen_id", "subject", "predicate", "object", "note", "support_predicate", "support_object",
)
_SEP = "\x1f"  # joins strings into one comparable key; cannot occur in sane text
_PROSE = (
    "Based on the facts provided, here are the generalizations:\n\n{}\n\nEach one is supported by the observed facts.",
    "Sure! {}",
    "Here is the JSON you asked for:\n{}",
    "{}\n\nNote: I only included generalizations that are well supported.",
)


@dataclass(frozen=True)
class OracleDraw:
    """The oracle's random draws for one prompt: its key and which errors fire."""

    key: str
    errors: tuple[str, ...]

    def to_dict(self) -> dict:
        return {"key": self.key, "errors": list(self.errors)}


def _check_error_rates(error_rates: Mapping[str, float] | None) -> dict[str, float]:
    rates = dict.fromkeys(ORACLE_ERRORS, 0.0)
    for key, value in (error_rates or {}).items():
        if key not in rates:
            raise InputError(f"error_rates: unknown error {key!r}; known: {list(ORACLE_ERRORS)}")
        if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)) or not 0.0 <= float(value) <= 1.0:
            raise InputError(f"error_rates[{key!r}] must be a probability in [0, 1], got {value!r}")
        rates[key] = float(value)
    return rates


class OracleProvider:
    """Answers abstraction prompts from ground-truth generalizations, with a seeded error model.

    ``generalizations``: long DataFrame, one row per (generalization, supporting fact), columns
    ``gen_id, subject, predicate, object, note, support_predicate, support_object`` (``note``
    optional). A generalization of the cluster's subject is *supported* when at least
    ``ceil(min_support * n)`` of its ``n`` distinct supporting (predicate, object) pairs appear among
    the cluster's facts (and at least one); ``min_support=1.0`` (default) requires all of them.
    The truthful answer is the JSON array of supported generalizations, best first (matched fraction,
    then matched count, descending; then gen_id order), cut to ``max_facts``; ``[]`` when none. To a
    support prompt (facts carrying ``index``, see :func:`cluster_payload`) each item also carries
    ``"support"``: the indices, ascending, of the cluster's facts that state one of its supporting
    (predicate, object) pairs.

    ``error_rates`` maps each of :data:`ORACLE_ERRORS` to an independent probability (default 0):
    ``prose`` (answer wrapped in prose: must be rejected), ``fence`` (inside a markdown fence: valid),
    ``invalid_json``, ``too_many`` (``max_facts + 1`` items), ``invented`` (one fact absent from the
    ground truth added, or replacing one when the answer is full), ``timeout`` (raises
    ``ProviderError`` kind ``timeout`` without sleeping); on support prompts only (see
    :data:`SUPPORT_ERRORS`), for one item chosen at random: ``wrong_support`` (the index of a cluster
    fact that does not support it is added: a valid answer with a wrong link; nothing changes when
    every fact supports it), ``missing_support`` (one of its indices is dropped: a valid answer with a
    link missing, or an empty list, which rejects the answer, when it had one index) and
    ``invalid_support`` (its ``support`` left out, empty, or holding an index past the last fact,
    one of the three at random: the answer is rejected). Support errors act on the truthful items
    before ``invented`` and ``too_many`` add theirs (which carry one random valid index). The draws
    come from Generators seeded by ``(seed, sha256 of the messages)`` (and ``(…, 1)`` for the support
    errors), so an answer depends on the seed and the prompt only, never on call order. Invented facts avoid every (subject, predicate, object) in the generalizations and
    in ``facts_truth`` (optional DataFrame with subject, predicate, object), so metrics can tell them.

    ``calls`` counts calls (timeouts included); ``error_counts`` counts fired errors.
    """

    def __init__(
        self,
        generalizations: pd.DataFrame,
        seed: int = 0,
        error_rates: Mapping[str, float] | None = None,
        facts_truth: pd.DataFrame | None = None,
        *,
        min_support: float = 1.0,
        model: str = "oracle",
    ):
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise InputError(f"seed must be an integer >= 0, got {seed!r}")
        if isinstance(min_support, bool) or not isinstance(min_support, (int, float)) or not 0.0 < float(min_support) <= 1.0:
            raise InputError(f"min_support must be a fraction in (0, 1], got {min_support!r}")
        self.seed = int(seed)
        self.error_rates = _check_error_rates(error_rates)
        self.min_support = float(min_support)
        self.model = model
        self._rates = np.array([self.error_rates[k] for k in ORACLE_ERRORS])
        self._build(generalizations, facts_truth)
        self.calls = 0
        self.error_counts = dict.fromkeys(ORACLE_ERRORS, 0)
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        del state["_lock"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    # -- ground truth ---------------------------------------------------------------------------
    def _build(self, gens: pd.DataFrame, truth: pd.DataFrame | None) -> None:
        if not isinstance(gens, pd.DataFrame):
            raise InputError(f"generalizations must be a pandas DataFrame, got {type(gens).__name__}")
        required = [c for c in GENERALIZATION_COLUMNS if c != "note"]
        missing = [c for c in required if c not in gens.columns]
        if missing:
            raise InputError(f"generalizations: missing column(s) {missing}; have {list(gens.columns)}")
        df = gens[required].copy()
        df["note"] = gens["note"].fillna("").astype(str) if "note" in gens.columns else ""
        if df["gen_id"].isna().any():
            raise InputError(f"generalizations: gen_id is empty at row {int(np.flatnonzero(df['gen_id'].isna())[0])}")
        for col in required[1:]:
            text = df[col].astype("string")
            bad = (text.fillna("").str.strip() == "").to_numpy(dtype=bool)
            if bad.any():
                row = int(np.flatnonzero(bad)[0])
                raise InputError(f"generalizations: column {col!r} is empty at row {row} (gen_id {df['gen_id'].iloc[row]!r})")
            df[col] = text.astype(str)
        conflict = df.groupby("gen_id", sort=False)[["subject", "predicate", "object"]].nunique().max(axis=1) > 1
        if conflict.any():
            raise InputError(
                f"generalizations: gen_id {conflict.index[conflict.to_numpy()][0]!r} has several "
                "(subject, predicate, object) values"
            )
        df = df.drop_duplicates(["gen_id", "support_predicate", "support_object"])
        try:
            gen_ids = pd.Index(pd.unique(df["gen_id"])).sort_values()
        except TypeError:
            raise InputError("generalizations: gen_id values must be of one comparable type") from None
        df["code"] = gen_ids.get_indexer(df["gen_id"])
        first = df.drop_duplicates("code").set_index("code").sort_index()
        self._gen = first[["gen_id", "subject", "predicate", "object", "note"]].reset_index(drop=True)
        self._n_support = np.bincount(df["code"].to_numpy(), minlength=len(gen_ids))
        # answer items prebuilt once, indexed by gen code; note only when there is one
        self._items = [
            {"subject": s, "predicate": p, "object": o, **({"note": n} if n else {})}
            for s, p, o, n in self._gen[["subject", "predicate", "object", "note"]].itertuples(index=False)
        ]
        # supporting pairs as integer ids, so a call is integer set algebra in numpy
        df["key"] = df["support_predicate"] + _SEP + df["support_object"]
        key_codes, key_uniques = pd.factorize(df["key"])
        self._key_id = dict(zip(key_uniques, range(len(key_uniques))))
        df["key_id"] = key_codes
        self._support = {
            subject: (g["code"].to_numpy(), g["key_id"].to_numpy())
            for subject, g in df.groupby("subject", sort=True)
        }
        # per generalization code, the ids of its supporting pairs (to cite them in support answers)
        self._gen_keys: list[frozenset[int]] = [frozenset() for _ in range(len(gen_ids))]
        for code, g in df.groupby("code", sort=True):
            self._gen_keys[int(code)] = frozenset(g["key_id"].tolist())
        # vocabulary for invented facts, and every triple that must never be "invented"
        vocab = self._gen[["predicate", "object"]].drop_duplicates().sort_values(["predicate", "object"])
        self._vocab_pred = vocab["predicate"].to_numpy(dtype=object)
        self._vocab_obj = vocab["object"].to_numpy(dtype=object)
        known = [self._gen["subject"] + _SEP + self._gen["predicate"] + _SEP + self._gen["object"],
                 df["subject"] + _SEP + df["key"]]
        if truth is not None:
            miss = [c for c in ("subject", "predicate", "object") if c not in truth.columns]
            if miss:
                raise InputError(f"facts_truth: missing column(s) {miss}; have {list(truth.columns)}")
            known.append(truth["subject"].astype(str) + _SEP + truth["predicate"].astype(str) + _SEP + truth["object"].astype(str))
        self._known = pd.Index(pd.concat(known, ignore_index=True).unique())
        self._free: dict[str, np.ndarray] = {}  # per subject: vocab indices free to invent

    def _rank(self, subject: str, facts: Sequence[Mapping]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Supported gen codes of ``subject``, best first, with matched and total support counts."""
        entry = self._support.get(subject)
        empty = np.zeros(0, dtype=np.int64)
        if entry is None:
            return empty, empty, empty
        # the cluster arrives as parsed JSON: one pass to turn it into ids, then numpy
        fact_ids = np.fromiter(
            (self._key_id.get(f"{f['predicate']}{_SEP}{f['object']}", -1)
             for f in facts if f.get("subject", subject) in (subject, None)),
            dtype=np.int64,
        )
        codes, key_ids = entry
        hit = np.isin(key_ids, fact_ids)
        uniq, inverse = np.unique(codes, return_inverse=True)
        matched = np.bincount(inverse, weights=hit, minlength=len(uniq)).astype(np.int64)
        n = self._n_support[uniq]
        ok = matched >= np.maximum(1, np.ceil(self.min_support * n - 1e-9))
        uniq, matched, n = uniq[ok], matched[ok], n[ok]
        order = np.lexsort((uniq, -matched, -(matched / np.maximum(n, 1))))
        return uniq[order], matched[order], n[order]

    def _support_indices(self, code: int, subject: str, facts: Sequence[Mapping]) -> list[int]:
        """The ``index`` of every fact of ``facts`` (about ``subject``) stating a supporting pair of
        generalization ``code``, ascending."""
        keys = self._gen_keys[code]
        return sorted(int(f["index"]) for f in facts  # a prompt-sized list
                      if f.get("subject", subject) in (subject, None)
                      and self._key_id.get(f"{f['predicate']}{_SEP}{f['object']}", -1) in keys)

    def supported(self, subject: str, facts: Sequence[Mapping] | pd.DataFrame) -> pd.DataFrame:
        """The ground-truth generalizations of ``subject`` supported by ``facts``, best first, with
        ``matched`` and ``n_support`` columns (the truthful answer before the ``max_facts`` cut)."""
        records = facts.to_dict("records") if isinstance(facts, pd.DataFrame) else list(facts)
        codes, matched, n = self._rank(subject, records)
        out = self._gen.iloc[codes].reset_index(drop=True)
        out["matched"] = matched
        out["n_support"] = n
        return out

    # -- the error model ------------------------------------------------------------------------
    def _draw(self, messages: Sequence[Mapping], support: bool = False
              ) -> tuple[OracleDraw, np.random.Generator, np.random.Generator | None]:
        """The draw, the generator of the answer's other choices, and (support prompts) the generator
        of the support errors' choices, each advanced past the uniforms that decided the draw."""
        key = messages_hash(messages)
        rng = np.random.default_rng([self.seed, int(key, 16)])
        # all uniforms are always drawn, in a fixed order, so one rate never shifts another's draws
        u = rng.random(_N_BASE_ERRORS)
        fired = [k for k, hit in zip(ORACLE_ERRORS, u < self._rates[:_N_BASE_ERRORS]) if hit]
        support_rng = None
        if support:
            support_rng = np.random.default_rng([self.seed, int(key, 16), 1])
            u_support = support_rng.random(len(SUPPORT_ERRORS))
            fired += [k for k, hit in zip(SUPPORT_ERRORS, u_support < self._rates[_N_BASE_ERRORS:]) if hit]
        return OracleDraw(key, tuple(fired)), rng, support_rng

    def draw(self, messages: Sequence[Mapping]) -> OracleDraw:
        """Which errors fire for this prompt (pure: depends on seed and messages only)."""
        support = parse_cluster_prompt(messages)["link_scope"] == "support"
        return self._draw(messages, support)[0]

    def _invent(self, subject: str, rng: np.random.Generator, taken: Sequence[dict]) -> dict:
        """A plausible fact about ``subject`` that the ground truth does not hold (nor ``taken``)."""
        free = self._free.get(subject)
        if free is None:
            triples = pd.Index(subject + _SEP + self._vocab_pred + _SEP + self._vocab_obj)
            free = self._free[subject] = np.flatnonzero(~triples.isin(self._known))
        taken_po = {(t["predicate"], t["object"]) for t in taken}
        free = free[[(self._vocab_pred[i], self._vocab_obj[i]) not in taken_po for i in free]] if taken_po else free
        if len(free):
            i = free[rng.integers(len(free))]
            return {"subject": subject, "predicate": str(self._vocab_pred[i]), "object": str(self._vocab_obj[i])}
        return {"subject": subject, "predicate": "trait", "object": f"unsupported_{int(rng.integers(10**6)):06d}"}

    # -- the Provider interface -----------------------------------------------------------------
    def complete(self, messages: list[dict], *, model: str | None = None, temperature: float = 0.0) -> str:
        """Answer one cluster prompt (see the class docstring); ``model`` is ignored."""
        _check_temperature(temperature)
        with self._lock:
            self.calls += 1
        cluster = parse_cluster_prompt(messages)
        support = cluster["link_scope"] == "support"
        draw, rng, support_rng = self._draw(messages, support)
        with self._lock:
            for k in draw.errors:
                self.error_counts[k] += 1
        subject, max_facts, facts = cluster["subject"], cluster["max_facts"], cluster["facts"]
        if "timeout" in draw.errors:
            raise ProviderError(
                "timeout",
                f"oracle: simulated timeout for subject {subject!r} (error_rates['timeout']={self.error_rates['timeout']:g})",
                url="oracle:",
            )
        codes = self._rank(subject, facts)[0]
        items = [dict(self._items[c]) for c in codes[:max_facts]]
        if support_rng is not None:
            indices = [int(f["index"]) for f in facts]
            for item, code in zip(items, codes):
                item["support"] = self._support_indices(int(code), subject, facts)
            _support_errors(items, indices, draw.errors, support_rng)
        if "invented" in draw.errors:
            fake = self._invent(subject, rng, items)
            if support_rng is not None:
                fake["support"] = [indices[int(support_rng.integers(len(indices)))]]
            if items and len(items) >= max_facts:
                items[int(rng.integers(len(items)))] = fake
            else:
                items.append(fake)
        if "too_many" in draw.errors and len(items) <= max_facts:
            # pad with what an over-eager model adds: more generalizations, then restated facts
            pool = [dict(self._items[c]) for c in codes[max_facts:]]
            pool += [{"subject": subject, "predicate": str(f["predicate"]), "object": str(f["object"])} for f in facts]
            seen = {_triple(i) for i in items}
            pool = [p for p in pool if _triple(p) not in seen]
            first_padded = len(items)
            while len(items) <= max_facts:
                items.append(pool.pop(0) if pool else self._invent(subject, rng, items))
            if support_rng is not None:
                for padded in items[first_padded:]:
                    padded["support"] = [indices[int(support_rng.integers(len(indices)))]]
        text = json.dumps(items, ensure_ascii=False)
        if "invalid_json" in draw.errors:
            text = _corrupt(text, rng)
        if "fence" in draw.errors:
            text = f"```{'json' if rng.random() < 0.7 else ''}\n{text}\n```"
        if "prose" in draw.errors:
            text = _PROSE[int(rng.integers(len(_PROSE)))].format(text)
        return text

    def __repr__(self) -> str:
        active = {k: v for k, v in self.error_rates.items() if v}
        return f"OracleProvider({len(self._gen)} generalizations, seed={self.seed}, error_rates={active})"

    @classmethod
    def from_dataset(cls, path: str | os.PathLike, **kwargs: Any) -> OracleProvider:
        """Build from a dataset folder (``generalizations.{parquet,csv}``, optional ``truth.*``) or
        from a generalizations file; other keyword arguments as for the constructor."""
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"{path}: no such dataset folder or generalizations file")
        gens_path = _find_table(path, "generalizations") if path.is_dir() else path
        if gens_path is None:
            raise FileNotFoundError(f"{path}: no generalizations.parquet or generalizations.csv")
        truth_path = _find_table(path if path.is_dir() else path.parent, "truth")
        if "facts_truth" not in kwargs and truth_path is not None:
            kwargs["facts_truth"] = _read_table(truth_path)
        return cls(_read_table(gens_path), **kwargs)


def _support_errors(items: list[dict], indices: list[int], errors: Sequence[str], rng: np.random.Generator) -> None:
    """Apply the fired support errors (see :class:`OracleProvider`) to the truthful ``items`` in place.

    ``indices``: the cluster's fact indices. Each error picks its own item; draws come from ``rng``
    in a fixed order, whether or not an error has something to act on."""
    if not items:
        return
    if "wrong_support" in errors:
        item = items[int(rng.integers(len(items)))]
        unrelated = [i for i in indices if i not in item["support"]]
        pick = rng.integers(max(len(unrelated), 1))
        if unrelated:
            item["support"] = sorted(item["support"] + [unrelated[int(pick)]])
    if "missing_support" in errors:
        item = items[int(rng.integers(len(items)))]
        drop = int(rng.integers(max(len(item["support"]), 1)))
        item["support"] = [i for j, i in enumerate(item["support"]) if j != drop]
    if "invalid_support" in errors:
        item = items[int(rng.integers(len(items)))]
        how = int(rng.integers(3))
        if how == 0:
            del item["support"]
        elif how == 1:
            item["support"] = []
        else:
            item["support"] = sorted(item["support"]) + [max(indices, default=-1) + 1 + int(rng.integers(3))]


def _triple(item: Mapping) -> str:
    return f"{item['subject']}{_SEP}{item['predicate']}{_SEP}{item['object']}"


def _corrupt(text: str, rng: np.random.Generator) -> str:
    """Make ``text`` (a JSON array) invalid JSON in one of a few ways an LLM does."""
    style = int(rng.integers(3))
    if style == 0:
        bad = text[:-1] + ",]"  # trailing comma
    elif style == 1:
        bad = text.replace('"', "'")  # Python-style quotes
    else:
        bad = text[: int(rng.integers(1, len(text)))]  # cut off mid-answer
    try:
        json.loads(bad)
    except ValueError:
        return bad
    return text[:-1]  # "[]" with quotes swapped is still valid: an unclosed array never is


def _find_table(folder: Path, stem: str) -> Path | None:
    for suffix in (".parquet", ".csv"):
        candidate = folder / f"{stem}{suffix}"
        if candidate.exists():
            return candidate
    return None


def _read_table(path: Path) -> pd.DataFrame:
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    if path.suffix == ".csv":
        # strings stay strings: an object named "None" or "NA" is not missing
        return pd.read_csv(path, dtype=str, keep_default_na=False)
    raise InputError(f"{path}: expected a .parquet or .csv file")


def parse_error_rates(text: str | None) -> dict[str, float] | None:
    """Oracle error rates written as ``KIND=P,KIND=P`` (``prose=0.1,timeout=0.05``); None for none.

    >>> parse_error_rates("prose=0.1, timeout=0.05")
    {'prose': 0.1, 'timeout': 0.05}
    """
    if not text:
        return None
    rates: dict[str, float] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        try:
            rates[key.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep:
            raise InputError(f"oracle error rates: expected KIND=PROBABILITY, got {part.strip()!r}")
    return rates

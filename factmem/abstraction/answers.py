"""The abstraction pass's question and answer: the system prompts (versioned by
:data:`~factmem.abstraction.prompts.PROMPT_VERSION`), the messages of one cluster, and the strict
parsing of the model's answer into :class:`DerivedItem` s (:func:`parse_response`,
:func:`check_against_cluster`) — the response contract :mod:`factmem.abstraction.passes` describes.
An answer that breaks the contract raises :class:`~factmem.errors.ResponseRejected` naming what is
wrong, with a preview of the text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd

from factmem.abstraction.oracle import cluster_payload
from factmem.core.codes import LINK_SCOPES, LinkScope
from factmem.core.text import is_unicode
from factmem.errors import InputError, ResponseRejected

__all__ = ["SYSTEM_PROMPT", "SUPPORT_SYSTEM_PROMPT", "DerivedItem", "build_messages", "parse_response",
           "check_against_cluster", "check_scope", "printable"]

SYSTEM_PROMPT = (
    "You consolidate the long-term memory of an assistant. The user message is a JSON object holding "
    "one subject and the facts currently believed about it: "
    '{{"subject": ..., "max_facts": ..., "facts": [{{"id", "subject", "predicate", "object", "note"}}, ...]}}.\n'
    "Reply with at most {max_facts} higher-level facts about that subject which the listed facts, taken "
    "together, clearly support: generalizations, not copies of a listed fact. Never add anything the "
    "facts do not support; when in doubt, leave it out.\n"
    "Answer with a JSON array and nothing else: no prose, no explanation. Each element is an object "
    'with the string keys "subject" (exactly the given subject), "predicate" (short, snake_case, for '
    'example is_a) and "object", and optionally "note" (a few words on why). If no generalization is '
    "safely supported, answer []."
)

SUPPORT_SYSTEM_PROMPT = (
    "You consolidate the long-term memory of an assistant. The user message is a JSON object holding "
    "one subject and the facts currently believed about it, each with an index: "
    '{{"subject": ..., "max_facts": ..., "facts": [{{"index", "subject", "predicate", "object", "note"}}, ...]}}.\n'
    "Reply with at most {max_facts} higher-level facts about that subject which some of the listed facts, "
    "taken together, clearly support: generalizations, not copies of a listed fact. Never add anything the "
    "facts do not support; when in doubt, leave it out.\n"
    "Answer with a JSON array and nothing else: no prose, no explanation. Each element is an object "
    'with the string keys "subject" (exactly the given subject), "predicate" (short, snake_case, for '
    'example is_a) and "object", the key "support" (a non-empty array of the indices of the listed facts '
    'that support it, and only those), and optionally "note" (a few words on why). If no generalization '
    "is safely supported, answer []."
)

_ITEM_KEYS = ("subject", "predicate", "object")
_FENCE = re.compile(r"\A```[A-Za-z0-9_+.-]*[ \t]*\n(.*?)```\Z", re.S)
_PREVIEW = 80


@dataclass(frozen=True)
class DerivedItem:
    """One generalization the model proposed (fields stripped of surrounding whitespace).

    ``support``: under support links, the indices (ascending, distinct) of the prompt's facts that
    support it; empty under cluster links."""

    subject: str
    predicate: str
    object: str
    note: str | None = None
    support: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["support"] = list(self.support)
        return d


def printable(text: str) -> str:
    """An answer as it can be stored and printed (lone surrogates escaped)."""
    return text if is_unicode(text) else text.encode("utf-8", "backslashreplace").decode("utf-8")


def build_messages(subject: str, facts: pd.DataFrame | Sequence[dict], max_facts: int,
                   link_scope: LinkScope = "cluster") -> list[dict]:
    """The chat messages of one cluster: the system prompt of ``link_scope``, then the cluster as
    JSON (:func:`factmem.abstraction.oracle.cluster_payload`, facts in the given order)."""
    check_scope(link_scope)
    prompt = SUPPORT_SYSTEM_PROMPT if link_scope == "support" else SYSTEM_PROMPT
    return [
        {"role": "system", "content": prompt.format(max_facts=int(max_facts))},
        {"role": "user", "content": cluster_payload(subject, int(max_facts), facts, link_scope)},
    ]


def check_scope(link_scope: Any) -> LinkScope:
    if link_scope not in LINK_SCOPES:
        raise InputError(f"link_scope must be one of {', '.join(LINK_SCOPES)}, got {link_scope!r}")
    return link_scope


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _PREVIEW else flat[:_PREVIEW] + "…"


def parse_response(text: str, max_facts: int, subject: str | None = None,
                   n_facts: int | None = None) -> list[DerivedItem]:
    """Parse one answer under the response contract; raise :class:`ResponseRejected` otherwise.

    Surrounding whitespace and at most one markdown code fence (```` ``` ```` or ```` ```json ````,
    the whole answer) are stripped; the rest must be a JSON array of at most ``max_facts`` objects
    whose ``subject``, ``predicate`` and ``object`` are strings, non-empty after stripping whitespace,
    and whose optional ``note`` is a string or null. Other keys are ignored (models add
    "confidence" or "evidence"; they carry nothing the store keeps). Prose before or after the JSON,
    invalid JSON, another shape or too many items reject the whole answer. If ``subject`` is given,
    every item must be about it exactly, and two items may not be the same fact.

    ``n_facts`` (support links: the number of facts in the prompt) makes ``"support"`` required in
    every item: a non-empty JSON array of integers in ``[0, n_facts)`` (JSON integers only: ``1.0``
    and ``true`` are not indices); repeats collapse, the item keeps them ascending. A missing, empty
    or malformed list, or an index out of range, rejects the whole answer like any malformed item.
    """
    if not isinstance(text, str):
        raise ResponseRejected(f"answer is {type(text).__name__}, not text")
    body = text.strip()
    fence = _FENCE.match(body)
    if fence is not None:
        body = fence.group(1).strip()
    if not body:
        raise ResponseRejected("empty answer (expected a JSON array, [] when nothing is abstractable)")
    try:
        data = json.loads(body)
    except ValueError as exc:
        what = "prose or invalid JSON" if body[:1] not in "[{" else "invalid JSON"
        raise ResponseRejected(f"{what} ({exc}): {_preview(text)!r}") from None
    except RecursionError:
        raise ResponseRejected(f"JSON nested too deep to read: {_preview(text)!r}") from None
    if not isinstance(data, list):
        raise ResponseRejected(f"expected a JSON array, got a JSON {type(data).__name__}: {_preview(body)!r}")
    if len(data) > max_facts:
        raise ResponseRejected(f"{len(data)} items, more than max_facts={max_facts}")
    items: list[DerivedItem] = []
    seen: dict[tuple[str, str, str], int] = {}
    for i, raw in enumerate(data):  # at most max_facts items
        if not isinstance(raw, dict):
            raise ResponseRejected(f"item {i} is a JSON {type(raw).__name__}, not an object")
        values = []
        for key in _ITEM_KEYS:
            value = raw.get(key)
            if not isinstance(value, str) or not value.strip():
                got = "missing" if key not in raw else repr(value)
                raise ResponseRejected(f"item {i}: {key!r} must be a non-empty string, got {got}")
            values.append(value.strip())
        note = raw.get("note")
        if note is not None and not isinstance(note, str):
            raise ResponseRejected(f"item {i}: 'note' must be a string, got {note!r}")
        for key, value in zip((*_ITEM_KEYS, "note"), (*values, note)):
            if value is not None and not is_unicode(value):
                raise ResponseRejected(f"item {i}: {key!r} is not valid Unicode text (a lone surrogate): {value!r}")
        note = (note.strip() or None) if note is not None else None
        if subject is not None:
            if values[0] != subject.strip():
                raise ResponseRejected(f"item {i} is about {values[0]!r}, not the cluster's subject {subject!r}")
            values[0] = subject  # the cluster's own spelling, surrounding whitespace included
        support = _parse_support(raw, i, n_facts) if n_facts is not None else ()
        item = DerivedItem(values[0], values[1], values[2], note, support)
        key3 = (item.subject, item.predicate, item.object)
        if key3 in seen:
            raise ResponseRejected(f"items {seen[key3]} and {i} are the same fact {key3}")
        seen[key3] = i
        items.append(item)
    return items


def _parse_support(raw: dict, i: int, n_facts: int) -> tuple[int, ...]:
    """The ``support`` of item ``i`` under support links (see :func:`parse_response`)."""
    if "support" not in raw:
        raise ResponseRejected(f"item {i}: 'support' is missing (the indices of the facts that support it)")
    support = raw["support"]
    if not isinstance(support, list):
        raise ResponseRejected(f"item {i}: 'support' must be an array of fact indices, got {support!r}")
    if not support:
        raise ResponseRejected(f"item {i}: 'support' is empty (at least one supporting fact is required)")
    for index in support:  # at most a prompt's worth of indices
        if isinstance(index, bool) or not isinstance(index, int):
            raise ResponseRejected(f"item {i}: 'support' holds {index!r}, not an integer fact index")
        if not 0 <= index < n_facts:
            raise ResponseRejected(f"item {i}: 'support' index {index} is out of range (the prompt lists "
                                   f"{n_facts} facts, indices 0 to {n_facts - 1})")
    return tuple(sorted(set(support)))


def check_against_cluster(items: Sequence[DerivedItem], members: pd.DataFrame,
                          multi_valued_predicates: Iterable[str] = ()) -> None:
    """Reject answers that would let the model rewrite observations; raise :class:`ResponseRejected`.

    An item may not restate a member (same predicate and object: the store would *reinforce the
    observation* with the model's echo), may not use a member's single-valued predicate with another
    object (the store would *supersede the observation*), and two items may not set the same
    single-valued predicate (the second would supersede the first within one answer).
    """
    multi = frozenset(multi_valued_predicates)
    pairs = set(zip(members["predicate"].tolist(), members["object"].tolist()))
    member_preds = set(members["predicate"].tolist())
    first_pred: dict[str, int] = {}
    for i, item in enumerate(items):
        if (item.predicate, item.object) in pairs:
            raise ResponseRejected(
                f"item {i} restates an observed fact ({item.subject}, {item.predicate}, {item.object}) "
                "instead of generalizing")
        if item.predicate in multi:
            continue
        if item.predicate in member_preds:
            raise ResponseRejected(
                f"item {i} ({item.subject}, {item.predicate}, {item.object}) contradicts an observed "
                f"{item.predicate!r} fact and would supersede it")
        if item.predicate in first_pred:
            raise ResponseRejected(
                f"items {first_pred[item.predicate]} and {i} both set the single-valued predicate "
                f"{item.predicate!r}; the second would supersede the first")
        first_pred[item.predicate] = i

"""How Python values are spelled in the generated Rust module: literals, names and doc text.

* ``rust_f64(x)``: a Rust ``f64`` literal that parses to exactly ``x`` (finite only; ``-0.0`` keeps its
  sign), from Python's shortest round-tripping ``repr`` (``1.0``, ``5e-324`` → ``5.0e-324``);
* ``f64_bits(x)``: the IEEE-754 bits of ``x`` as a ``u64`` hex literal, what the generated tests compare;
* ``rust_str(s)``: a string literal with quotes, backslashes, control and invisible format characters
  escaped (a bidirectional control in a literal is a rustc error), a lone surrogate refused;
* ``doc_text(value)``: a value inside a ``///`` comment, JSON-quoted, invisible characters spelled out;
* ``variant_name(kind)``: ``user_preference`` → ``UserPreference``;
* ``RUST_CONSTS``: the Rust constant of each scalar parameter (per-kind ones are ``FactKind`` methods).
"""

from __future__ import annotations

import json
import math
import struct
import unicodedata
from typing import Any

from factmem.errors import InputError

__all__ = ["RUST_CONSTS", "rust_f64", "f64_bits", "rust_str", "doc_text", "variant_name", "invisible"]

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


def variant_name(kind: str) -> str:
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
        elif invisible(ch):
            out.append(f"\\u{{{o:x}}}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def invisible(ch: str) -> bool:
    """Control, format (bidirectional controls, zero-width characters) and line/paragraph separators."""
    return unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp")


def doc_text(value: Any) -> str:
    """A value shown in a doc comment: JSON-quoted so newlines and CRs cannot break the comment, and
    invisible characters spelled ``\\uXXXX`` (a bidirectional control in a comment is a compile
    error: rustc's ``text_direction_codepoint_in_comment``)."""
    if isinstance(value, str):
        quoted = json.dumps(value, ensure_ascii=False)
        return "".join(f"\\u{ord(ch):04x}" if invisible(ch) else ch for ch in quoted)
    if isinstance(value, float):
        return repr(value)
    return str(value)

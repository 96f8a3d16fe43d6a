"""The key hash of the write-behind state (:mod:`factmem.store.active`): a 64-bit hash of a fact's key
:func:`~factmem.store.calls.state_key` (the length-prefixed ``subject``, NUL, ``predicate``), the same
in every process and computed alike from an Arrow string array's buffers (vectorized, no Python
string made) or from a Python string (a ``remember`` call).

The hash is a polynomial over the key's UTF-8 bytes, ``h = sum(byte_i * B**(len-1-i)) mod 2**64`` with
``B = 0x100000001B3``, then SplitMix64's finalizer. :func:`pair_hashes` puts a key's hash together
from its subject's and predicate's (computed once per distinct value), without spelling the keys;
:func:`state_keys` spells them as an Arrow array, and :func:`keys_and_hashes` spells and hashes them
in one compiled pass over the subjects' and predicates' bytes (a batch's keys: ~0.05 ms for 2,000
keys, where spelling them with Arrow's kernels and hashing the spelled array with numpy took 0.8 ms).
The polynomial is one compiled loop over a string's bytes (:func:`_poly_of`), whichever way the
bytes come. Hashes may collide: the state checks every candidate against its key string.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from factmem.core.compiled import njit
from factmem.errors import StoreError
from factmem.store.batch import encode

__all__ = ["key_hashes", "pair_hashes", "state_keys", "keys_and_hashes"]


#: the key hash: a polynomial over the key's UTF-8 bytes modulo 2**64, then SplitMix64's finalizer
_HASH_BASE = 0x100000001B3
_MIX1, _MIX2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
_MASK = (1 << 64) - 1


def key_hashes(keys: pa.Array | pa.ChunkedArray | np.ndarray | list[str]) -> np.ndarray:
    """int64 hashes of :func:`~factmem.store.calls.state_key` strings — an Arrow string array (vectorized
    over its bytes, no Python string made) or a few Python strings (a ``remember`` call); both give
    the same numbers, in every process: h = sum(byte_i * B**(len-1-i)) mod 2**64, then mixed."""
    if not isinstance(keys, (pa.Array, pa.ChunkedArray)):
        if len(keys) <= 4:  # a call's key: a loop over a few bytes beats a dozen numpy calls
            return np.array([_key_hash(k) for k in keys], np.uint64).view(np.int64)
        keys = pa.array(np.asarray(keys, object), pa.string())
    return _mix(_polys(keys)).view(np.int64)


def pair_hashes(subjects: pa.Array | pa.ChunkedArray, predicates: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """``key_hashes(state_keys(subjects, predicates))`` without spelling the keys: the polynomial of a
    concatenation is ``poly(a) * B**len(b) + poly(b)``, so the key's is put together from the
    length prefix's, the subject's and the predicate's (the NULs between them are zero bytes):
    ``h = (poly(prefix) * B**len(s)) * B**(len(p)+2) + poly(s) * B**(len(p)+1) + poly(p)``, each factor
    computed once per distinct subject or predicate (a store's million facts share tens of thousands
    of subjects and a few dozen predicates), then gathered."""
    s_codes, s_words = encode(subjects)
    p_codes, p_words = encode(predicates)
    h_s, h_p = _polys(s_words), _polys(p_words)
    n_s = np.asarray(pc.binary_length(s_words), np.int64)
    n_p = np.asarray(pc.binary_length(p_words), np.int64)
    chars = np.asarray(pc.utf8_length(s_words), np.int64)  # the prefix: the subject's length in code points
    prefix = np.zeros(int(chars.max()) + 1 if len(chars) else 0, np.uint64)  # poly(str(length)), per length
    for c in np.flatnonzero(np.bincount(chars)):  # the lengths present (a few)
        prefix[c] = _poly(str(int(c)).encode())
    top = max(int(n_s.max()) if len(n_s) else 0, int(n_p.max()) + 2 if len(n_p) else 0)
    powers = _powers(top + 1)
    lead = prefix[chars] * powers[n_s]  # per subject (uint64: wraps modulo 2**64)
    h = lead[s_codes] * powers[n_p + 2][p_codes] + h_s[s_codes] * powers[n_p + 1][p_codes] + h_p[p_codes]
    return _mix(h).view(np.int64)


def _poly(data: bytes) -> int:
    h = 0
    for byte in data:
        h = (h * _HASH_BASE + byte) & _MASK
    return h


def _powers(n: int, base: int = _HASH_BASE) -> np.ndarray:
    """base**0 .. base**(n-1) modulo 2**64."""
    if n <= 1:
        return np.ones(max(n, 0), np.uint64)
    return np.concatenate([np.ones(1, np.uint64), np.cumprod(np.full(n - 1, base, np.uint64))])


def _polys(keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The polynomial part of the hashes of these strings, a chunk at a time (no copy of the strings)."""
    out = np.empty(len(keys), np.uint64)
    at = 0
    for chunk in keys.chunks if isinstance(keys, pa.ChunkedArray) else [keys]:
        out[at:at + len(chunk)] = _poly_hashes(chunk)
        at += len(chunk)
    return out


def _key_hash(key: str) -> int:
    h = _poly(key.encode("utf-8"))
    h = ((h ^ (h >> 30)) * _MIX1) & _MASK
    h = ((h ^ (h >> 27)) * _MIX2) & _MASK
    return h ^ (h >> 31)


def _mix(h: np.ndarray) -> np.ndarray:
    h = (h ^ (h >> np.uint64(30))) * np.uint64(_MIX1)  # uint64 arithmetic wraps modulo 2**64
    h = (h ^ (h >> np.uint64(27))) * np.uint64(_MIX2)
    return h ^ (h >> np.uint64(31))


def _string_buffers(keys: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """An Arrow string array's offsets (int64, this slice's ``n + 1``) and its whole data buffer."""
    if keys.null_count:
        raise StoreError("internal: a null key in the write-behind state")
    n = len(keys)
    off_type: Any = np.int64 if pa.types.is_large_string(keys.type) else np.int32
    if not (pa.types.is_large_string(keys.type) or pa.types.is_string(keys.type)):
        keys = keys.cast(pa.string())
    buffers = keys.buffers()
    offsets = np.frombuffer(buffers[1], off_type)[keys.offset:keys.offset + n + 1].astype(np.int64)
    data = np.frombuffer(buffers[2], np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    return offsets, data


@njit(inline=True)
def _poly_of(data, lo, hi):  # pragma: no cover - compiled
    """The polynomial of bytes ``data[lo:hi]`` modulo 2**64 (uint64 arithmetic wraps)."""
    h = np.uint64(0)
    base = np.uint64(_HASH_BASE)
    for i in range(lo, hi):
        h = h * base + np.uint64(data[i])
    return h


@njit
def _polys_of(offsets, data):  # pragma: no cover - compiled
    out = np.empty(len(offsets) - 1, np.uint64)
    for i in range(len(out)):
        out[i] = _poly_of(data, offsets[i], offsets[i + 1])
    return out


def _poly_hashes(keys: pa.Array) -> np.ndarray:
    """The polynomial part of :func:`key_hashes` of one Arrow string array, from its buffers."""
    offsets, data = _string_buffers(keys)
    return _polys_of(offsets, data)


@njit
def _spell_and_hash(s_offsets, s_data, p_offsets, p_data):  # pragma: no cover - compiled
    """The keys ``f"{len(subject)}\0{subject}\0{predicate}"`` (the length in code points) as Arrow
    offsets and bytes, and each key's polynomial: one pass to size them, one to write and hash."""
    n = len(s_offsets) - 1
    chars = np.zeros(n, np.int64)
    digits = np.ones(n, np.int64)
    offsets = np.zeros(n + 1, np.int64)
    for i in range(n):
        for j in range(s_offsets[i], s_offsets[i + 1]):
            if (s_data[j] & 0xC0) != 0x80:  # not a UTF-8 continuation byte: a code point starts here
                chars[i] += 1
        c = chars[i]
        while c >= 10:
            c //= 10
            digits[i] += 1
        offsets[i + 1] = (offsets[i] + digits[i] + 1 + (s_offsets[i + 1] - s_offsets[i]) + 1
                          + (p_offsets[i + 1] - p_offsets[i]))
    data = np.empty(offsets[n], np.uint8)
    polys = np.empty(n, np.uint64)
    for i in range(n):
        at = offsets[i]
        c = chars[i]
        for d in range(digits[i] - 1, -1, -1):
            data[at + d] = 48 + c % 10  # "0" + the digit
            c //= 10
        at += digits[i]
        data[at] = 0
        at += 1
        for j in range(s_offsets[i], s_offsets[i + 1]):
            data[at] = s_data[j]
            at += 1
        data[at] = 0
        at += 1
        for j in range(p_offsets[i], p_offsets[i + 1]):
            data[at] = p_data[j]
            at += 1
        polys[i] = _poly_of(data, offsets[i], offsets[i + 1])
    return offsets, data, polys


def keys_and_hashes(subjects: pa.Array, predicates: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """``(state_keys(subjects, predicates), key_hashes(of them))`` in one compiled pass: the keys
    spelled into an Arrow string array's buffers and hashed as they are written."""
    if len(subjects) != len(predicates):
        raise StoreError("internal: subjects and predicates of different lengths")
    s_offsets, s_data = _string_buffers(subjects)
    p_offsets, p_data = _string_buffers(predicates)
    offsets, data, polys = _spell_and_hash(s_offsets, s_data, p_offsets, p_data)
    n = len(subjects)
    if offsets[-1] < 2**31:
        keys = pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)])
    else:  # (over 2 GiB of keys)
        keys = pa.Array.from_buffers(pa.large_string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    return keys, _mix(polys).view(np.int64)


def state_keys(subjects: pa.Array | pa.ChunkedArray, predicates: pa.Array | pa.ChunkedArray) -> pa.Array:
    """:func:`~factmem.store.calls.state_key` of Arrow columns, vectorized (an Arrow string array)."""
    lengths = pc.cast(pc.utf8_length(subjects), pa.string())
    joined = pc.binary_join_element_wise(lengths, subjects, predicates, "\0")
    return joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined

"""The key hash of the write-behind state (:mod:`factmem.store.active`): a 64-bit hash of a fact's key
:func:`~factmem.store.calls.state_key` (the length-prefixed ``subject``, NUL, ``predicate``), the same
in every process and computed alike from an Arrow string array's buffers (vectorized, no Python
string made) or from a Python string (a ``remember`` call).

The hash is a polynomial over the key's UTF-8 bytes, ``h = sum(byte_i * B**(len-1-i)) mod 2**64`` with
``B = 0x100000001B3``, then SplitMix64's finalizer. :func:`pair_hashes` puts a key's hash together
from its subject's and predicate's (computed once per distinct value), without spelling the keys;
:func:`state_keys` spells them as an Arrow array; :func:`keys_and_hashes` does both at once, compiled
(a batch's keys: one pass over their bytes instead of a dozen Arrow and numpy calls, ~80 us against
~360 us for a day's 1,500 keys). Hashes may collide: the state checks every candidate against its
key string.

**A single call never starts the compiler** (see :mod:`factmem.store.hashchains`): the compiled
function serves batches only, whose lookups run compiled anyway; opening (:func:`pair_hashes`) and a
call (:func:`key_hashes` of a few strings) stay in numpy and Python. The tests hold every way to the
same keys and hashes.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from factmem.core.compiled import njit
from factmem.errors import StoreError
from factmem.store.batch import encode

__all__ = ["as_text", "key_hashes", "keys_and_hashes", "pair_hashes", "state_keys", "string_buffers"]


#: the key hash: a polynomial over the key's UTF-8 bytes modulo 2**64, then SplitMix64's finalizer
_HASH_BASE = 0x100000001B3
_MIX1, _MIX2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
_MASK = (1 << 64) - 1
_HASH_CHUNK = 1 << 14  # keys hashed at once: per-byte temporaries under a few MB (4x faster than 1M at once)
_KEPT_POWERS = 1 << 20  # power tables up to this long are kept between calls (16 MB); longer ones are not


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
        for lo in range(0, len(chunk), _HASH_CHUNK):
            part = chunk.slice(lo, _HASH_CHUNK)
            out[at:at + len(part)] = _poly_hashes(part)
            at += len(part)
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


def _poly_hashes(keys: pa.Array) -> np.ndarray:
    """The polynomial part of :func:`key_hashes` of one Arrow string array, from its buffers."""
    if keys.null_count:
        raise StoreError("internal: a null key in the write-behind state")
    n = len(keys)
    offsets, data = string_buffers(keys if pa.types.is_large_string(keys.type) else keys.cast(pa.string()))
    offsets = offsets.astype(np.int64)
    lo, hi = int(offsets[0]), int(offsets[-1])
    out = np.zeros(n, np.uint64)
    if hi == lo:
        return out
    data = data[lo:hi]
    # with S the running sum of byte_j * B**-j (B is odd: invertible modulo 2**64), the string over bytes
    # [start, end) hashes to B**(end-1) * (S[end] - S[start]): three passes over the bytes, none gathered
    up, down = _power_tables(hi - lo + 1)
    running = np.zeros(hi - lo + 1, np.uint64)
    np.cumsum(data * down[:hi - lo], out=running[1:])  # (uint8 * uint64: uint64, wrapping)
    start, end = offsets[:-1] - lo, offsets[1:] - lo
    return up[np.maximum(end - 1, 0)] * (running[end] - running[start])  # an empty string: 0


_TABLES: list[np.ndarray] = [np.ones(1, np.uint64), np.ones(1, np.uint64)]


def _power_tables(n: int) -> tuple[np.ndarray, np.ndarray]:
    """B**k and B**-k modulo 2**64 for k < n (kept, grown as needed, up to ``_KEPT_POWERS``: a chunk
    holding a very long key gets tables of its own)."""
    if len(_TABLES[0]) < n:
        size = max(n, min(2 * len(_TABLES[0]), _KEPT_POWERS))
        tables = [_powers(size, _HASH_BASE), _powers(size, pow(_HASH_BASE, -1, 1 << 64))]
        if size > _KEPT_POWERS:
            return tables[0], tables[1]
        _TABLES[:] = tables
    return _TABLES[0], _TABLES[1]


_HASH_BASE_U = np.uint64(_HASH_BASE)
_MIX1_U, _MIX2_U = np.uint64(_MIX1), np.uint64(_MIX2)


@njit
def _spell_and_hash(s_off, s_data, s_rows, p_off, p_data, p_rows):  # pragma: no cover - compiled
    """The keys ``f"{len(s)}\0{s}\0{p}"`` of the pairs (subject s_rows[i], predicate p_rows[i]) as
    (int64 offsets, UTF-8 bytes), and their hashes; ``len(s)`` counts code points (the bytes that
    do not continue a UTF-8 sequence)."""
    n = len(s_rows)
    offsets = np.empty(n + 1, np.int64)
    digits = np.empty(n, np.int64)
    chars = np.empty(n, np.int64)
    offsets[0] = 0
    for i in range(n):
        s_len = s_off[s_rows[i] + 1] - s_off[s_rows[i]]
        p_len = p_off[p_rows[i] + 1] - p_off[p_rows[i]]
        count = 0
        for j in range(s_off[s_rows[i]], s_off[s_rows[i] + 1]):
            if (s_data[j] & 0xC0) != 0x80:
                count += 1
        chars[i] = count
        d = 1
        while count >= 10:
            count //= 10
            d += 1
        digits[i] = d
        offsets[i + 1] = offsets[i] + d + 1 + s_len + 1 + p_len
    data = np.empty(offsets[n], np.uint8)
    hashes = np.empty(n, np.uint64)
    for i in range(n):
        at = offsets[i]
        count = chars[i]
        for d in range(digits[i] - 1, -1, -1):
            data[at + d] = 48 + count % 10
            count //= 10
        at += digits[i]
        data[at] = 0
        at += 1
        for j in range(s_off[s_rows[i]], s_off[s_rows[i] + 1]):
            data[at] = s_data[j]
            at += 1
        data[at] = 0
        at += 1
        for j in range(p_off[p_rows[i]], p_off[p_rows[i] + 1]):
            data[at] = p_data[j]
            at += 1
        h = np.uint64(0)
        for j in range(offsets[i], offsets[i + 1]):
            h = h * _HASH_BASE_U + np.uint64(data[j])  # modulo 2**64
        h = (h ^ (h >> np.uint64(30))) * _MIX1_U
        h = (h ^ (h >> np.uint64(27))) * _MIX2_U
        hashes[i] = h ^ (h >> np.uint64(31))
    return offsets, data, hashes


def as_text(strings: pa.Array) -> pa.Array:
    """A string or large-string array as it is; another type cast to string."""
    return strings if pa.types.is_string(strings.type) or pa.types.is_large_string(strings.type) \
        else strings.cast(pa.string())


def string_buffers(strings: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A string or large-string array's (offsets, bytes) as numpy views, its slice offset applied (no
    copy; :func:`as_text` first for another type) — what the compiled passes over strings read."""
    buffers = strings.buffers()
    large = pa.types.is_large_string(strings.type)
    offsets = np.frombuffer(buffers[1], np.int64 if large else np.int32)[strings.offset:strings.offset + len(strings) + 1]
    data = np.frombuffer(buffers[2], np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    return offsets, data


def keys_and_hashes(subjects: pa.Array, predicates: pa.Array, subject_rows: np.ndarray,
                    predicate_rows: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    """``state_keys(subjects.take(subject_rows), predicates.take(predicate_rows))`` and their
    :func:`key_hashes`, compiled, in one pass (a batch's keys, from its subject and predicate
    dictionaries and each pair's codes)."""
    if subjects.null_count or predicates.null_count:
        raise StoreError("internal: a null key part in the write-behind state")
    s_off, s_data = string_buffers(as_text(subjects))
    p_off, p_data = string_buffers(as_text(predicates))
    offsets, data, hashes = _spell_and_hash(s_off, s_data, np.ascontiguousarray(subject_rows, np.int64),
                                            p_off, p_data, np.ascontiguousarray(predicate_rows, np.int64))
    n = len(offsets) - 1
    if offsets[-1] < 2**31:
        keys = pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)])
    else:
        keys = pa.Array.from_buffers(pa.large_string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    return keys, hashes.view(np.int64)


def state_keys(subjects: pa.Array | pa.ChunkedArray, predicates: pa.Array | pa.ChunkedArray) -> pa.Array:
    """:func:`~factmem.store.calls.state_key` of Arrow columns, vectorized (an Arrow string array)."""
    lengths = pc.cast(pc.utf8_length(subjects), pa.string())
    joined = pc.binary_join_element_wise(lengths, subjects, predicates, "\0")
    return joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined

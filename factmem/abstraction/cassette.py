"""Record/replay cassette for LLM providers: makes experiments with a real model reproducible offline.

A cassette is a JSONL file, one line per recorded answer::

    {"key": "<sha256>", "model": "...", "temperature": 0.0, "prompt_version": "2",
     "messages": [...], "response": "<the model's text>"}

or, for a recorded failure, ``"error": {"kind": "timeout", "message": "...", "url": ..., "status": ...}``
instead of ``"response"``. The key is the sha256 of the canonical JSON (sorted keys, no spaces,
UTF-8) of ``{"model", "messages", "temperature", "prompt_version"}``; temperature is hashed as a float
so ``0`` and ``0.0`` are the same request. When a key occurs on several lines the last one wins.

Modes: ``record`` calls the wrapped provider every time and appends; ``replay`` answers only from the
file (a miss raises :class:`CassetteMiss`, the provider is never called, so nothing touches the
network); ``auto`` replays what is there and records the rest.

Recorded errors: a ``ProviderError`` whose kind is in ``record_errors`` (default ``timeout``, ``http``,
``envelope``: things the server did in answer to *this* prompt) is recorded and re-raised on replay with
the same kind, so a replayed pass skips the same clusters. ``connection`` errors are not recorded by
default: nothing was learned about the prompt, and recording them would make ``auto`` mode replay an
outage forever.

Crash safety: each answer is one ``os.write`` of a whole line on an ``O_APPEND`` descriptor under an
exclusive ``flock``, followed by ``fsync``. A torn last line (a crash mid-write) is ignored on load with
a warning; the next append in record/auto mode truncates it away first. A malformed line anywhere else
is corruption and raises :class:`CassetteError` naming the file and line.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from factmem.errors import CassetteError, CassetteMiss, InputError, ProviderError

try:  # POSIX: serialize appends across processes sharing a cassette (sweep workers)
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "Cassette",
    "CassetteError",
    "CassetteMiss",
    "MODES",
    "DEFAULT_RECORD_ERRORS",
    "canonical_json",
    "cassette_key",
]

MODES: tuple[str, ...] = ("record", "replay", "auto")
DEFAULT_RECORD_ERRORS: tuple[str, ...] = ("timeout", "http", "envelope")


def canonical_json(obj: Any) -> str:
    """The canonical JSON text of ``obj``: sorted keys, no whitespace, UTF-8 kept, no NaN."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def cassette_key(model: str, messages: Sequence[dict], temperature: float, prompt_version: str | None = None) -> str:
    """sha256 (hex) of the canonical JSON of ``(model, messages, temperature, prompt_version)``
    (``prompt_version`` default: the abstraction prompt's current version)."""
    if prompt_version is None:  # imported late: oracle imports this module
        from factmem.abstraction.prompts import PROMPT_VERSION as prompt_version
    payload = {
        "model": str(model),
        "messages": list(messages),
        "temperature": float(temperature),
        "prompt_version": str(prompt_version),
    }
    try:
        text = canonical_json(payload)
    except (TypeError, ValueError) as exc:
        raise InputError(f"cannot key this request: messages/temperature are not plain JSON ({exc})") from None
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _entry_problem(entry: Any) -> str | None:
    """What is wrong with one parsed cassette line, or None."""
    if not isinstance(entry, dict):
        return f"expected a JSON object, got {type(entry).__name__}"
    if not isinstance(entry.get("key"), str) or not entry["key"]:
        return "field 'key' missing or not a string"
    has_response, has_error = "response" in entry, "error" in entry
    if has_response == has_error:
        return "exactly one of 'response' and 'error' is required"
    if has_response and not isinstance(entry["response"], str):
        return "field 'response' is not a string"
    if has_error:
        err = entry["error"]
        if not isinstance(err, dict) or err.get("kind") not in ProviderError.KINDS:
            return f"field 'error.kind' must be one of {ProviderError.KINDS}"
        if not isinstance(err.get("message"), str):
            return "field 'error.message' missing or not a string"
    return None


class Cassette:
    """A provider wrapper that records answers to a JSONL file and replays them offline.

    ``provider`` may be None in ``replay`` mode. ``model`` is the default model when ``complete`` is
    called without one (else the wrapped provider's ``model``). Counters: ``hits`` (answered from the
    file), ``misses`` (replay-mode misses), ``recorded`` (lines appended). Thread-safe.
    ``prompt_version`` keys every answer (default: the abstraction prompt's current
    :data:`~factmem.abstraction.oracle.PROMPT_VERSION`, so answers recorded for an older prompt miss).
    """

    def __init__(
        self,
        provider: Any,
        path: str | os.PathLike,
        mode: str = "record",
        prompt_version: str | None = None,
        *,
        model: str | None = None,
        record_errors: Iterable[str] = DEFAULT_RECORD_ERRORS,
    ):
        if mode not in MODES:
            raise InputError(f"cassette mode must be one of {MODES}, got {mode!r}")
        record_errors = tuple(record_errors)
        unknown = [k for k in record_errors if k not in ProviderError.KINDS]
        if unknown:
            raise InputError(f"record_errors: unknown ProviderError kind(s) {unknown}; known: {ProviderError.KINDS}")
        if provider is None and mode != "replay":
            raise InputError(f"cassette mode {mode!r} needs a provider to record from (only 'replay' works without)")
        self.provider = provider
        self.path = Path(path)
        self.mode = mode
        if prompt_version is None:  # the abstraction prompt's current version (imported late: oracle imports us)
            from factmem.abstraction.prompts import PROMPT_VERSION as prompt_version
        self.prompt_version = str(prompt_version)
        self.record_errors = record_errors
        self._model = model
        self._lock = threading.Lock()
        self._entries: dict[str, dict] = {}
        self._loaded_size = 0
        self._truncate_to: int | None = None  # byte offset of a torn tail to cut before appending
        self._needs_newline = False  # last complete line lacks its "\n"
        self.hits = 0
        self.misses = 0
        self.recorded = 0
        if mode == "replay" and not self.path.exists():
            raise CassetteError(f"cassette {self.path} does not exist; nothing to replay (mode='replay')")
        self._load()

    # -- loading ------------------------------------------------------------------------------
    def _load(self) -> None:
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        self._loaded_size = len(data)
        end = data.rfind(b"\n") + 1
        body, tail = data[:end], data[end:]
        entries = self._parse_body(body)
        if tail.strip():
            n_line = body.count(b"\n") + 1
            try:
                last = json.loads(tail.decode("utf-8"))
                problem = _entry_problem(last)
            except (UnicodeDecodeError, ValueError) as exc:
                last, problem = None, f"not valid JSON ({exc})"
            if problem is None:
                entries.append(last)  # complete, only its newline is missing
                self._needs_newline = True
            else:
                warnings.warn(
                    f"cassette {self.path}, line {n_line}: ignoring torn last line ({len(tail)} bytes, "
                    f"{problem}); probably a crash mid-write",
                    RuntimeWarning,
                    stacklevel=3,
                )
                self._truncate_to = end
        elif tail:
            self._needs_newline = True
        # later lines win: a re-recorded request replaces the earlier answer
        self._entries = {e["key"]: e for e in entries}

    def _parse_body(self, body: bytes) -> list[dict]:
        if not body.strip():
            return []
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = body.count(b"\n", 0, exc.start) + 1
            raise CassetteError(f"cassette {self.path}, line {line}: not valid UTF-8") from None
        lines = [ln for ln in text.split("\n") if ln.strip()]
        try:
            # one C-speed parse of the whole file rather than one json.loads per line
            entries = json.loads("[" + ",".join(lines) + "]")
            if len(entries) != len(lines):  # a line holding "1,2" would parse as two items
                raise InputError("line count mismatch")
        except ValueError:
            entries = None
        if entries is None or any(_entry_problem(e) is not None for e in entries):
            self._raise_first_bad_line(text)
        return entries

    def _raise_first_bad_line(self, text: str) -> None:
        # error path only: locate the offending line for the message
        for number, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            try:
                problem = _entry_problem(json.loads(line))
            except ValueError as exc:
                problem = f"not valid JSON ({exc})"
            if problem is not None:
                raise CassetteError(f"cassette {self.path}, line {number}: {problem}")
        raise CassetteError(f"cassette {self.path}: unreadable")  # pragma: no cover

    # -- the Provider interface -----------------------------------------------------------------
    @property
    def model(self) -> str | None:
        """The default model (constructor's, else the wrapped provider's)."""
        return self._model if self._model is not None else getattr(self.provider, "model", None)

    def __len__(self) -> int:
        return len(self._entries)

    def key(self, messages: Sequence[dict], *, model: str | None = None, temperature: float = 0.0) -> str:
        """The cassette key this cassette would use for a request."""
        return cassette_key(self._resolve_model(model), messages, temperature, self.prompt_version)

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def _resolve_model(self, model: str | None) -> str:
        model = model if model is not None else self.model
        if model is None:
            raise InputError("no model given: pass model= to complete() or to the cassette/provider")
        return model

    def complete(self, messages: list[dict], *, model: str | None = None, temperature: float = 0.0) -> str:
        """Answer from the cassette or through the provider, per ``mode`` (see the module docstring)."""
        model = self._resolve_model(model)
        key = cassette_key(model, messages, temperature, self.prompt_version)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and self.mode != "record":
                self.hits += 1
            elif self.mode == "replay":
                self.misses += 1
        if entry is not None and self.mode != "record":
            return self._play(entry)
        if self.mode == "replay":
            raise CassetteMiss(
                f"cassette {self.path} has no recorded answer for key {key} (model={model!r}, "
                f"temperature={float(temperature)}, prompt_version={self.prompt_version!r}, "
                f"{len(messages)} message(s), last starts {_snippet(messages)!r}); "
                f"record it with mode='record' or 'auto'",
                key=key,
                path=str(self.path),
            )
        record = {
            "key": key,
            "model": model,
            "temperature": float(temperature),
            "prompt_version": self.prompt_version,
            "messages": list(messages),
        }
        try:
            response = self.provider.complete(messages, model=model, temperature=temperature)
        except ProviderError as exc:
            if exc.kind in self.record_errors:
                record["error"] = {"kind": exc.kind, "message": str(exc), "url": exc.url, "status": exc.status}
                self._append(record)
            raise
        if not isinstance(response, str):
            raise TypeError(f"provider {type(self.provider).__name__} returned {type(response).__name__}, not str")
        record["response"] = response
        self._append(record)
        return response

    def _play(self, entry: dict) -> str:
        if "error" in entry:
            err = entry["error"]
            raise ProviderError(
                err["kind"],
                f"{err['message']} [replayed from cassette {self.path}]",
                url=err.get("url"),
                status=err.get("status"),
            )
        return entry["response"]

    # -- appending ------------------------------------------------------------------------------
    def _append(self, record: dict) -> None:
        line = (canonical_json(record) + "\n").encode("utf-8")
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                if fcntl is not None:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                size = os.fstat(fd).st_size
                if self._truncate_to is not None:
                    # cut the torn tail, but only if nobody appended since we read the file
                    if size == self._loaded_size:
                        os.ftruncate(fd, self._truncate_to)
                        size = self._truncate_to
                    self._truncate_to = None
                if self._needs_newline and size > 0:
                    line = b"\n" + line
                self._needs_newline = False
                view = memoryview(line)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
                os.fsync(fd)
            finally:
                os.close(fd)
            self._entries[record["key"]] = record
            self.recorded += 1

    def __repr__(self) -> str:
        return f"Cassette({self.provider!r}, {str(self.path)!r}, mode={self.mode!r}, entries={len(self)})"


def _snippet(messages: Sequence[dict], n: int = 60) -> str:
    if not messages:
        return ""
    content = messages[-1].get("content", "") if isinstance(messages[-1], dict) else messages[-1]
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    return text[:n]

"""LLM providers for the abstraction pass: OpenAI-compatible and Ollama over httpx, a ground-truth
oracle with a seeded error model (:mod:`factmem.abstraction.oracle`), and a factory. The record/replay
cassette lives in :mod:`factmem.abstraction.cassette`. Both are re-exported here.

Every provider has ``complete(messages, *, model, temperature) -> str`` and raises
:class:`~factmem.errors.ProviderError` (kind ``connection``, ``timeout``, ``http`` or ``envelope``) on
transport or protocol failure. Providers return the model's text untouched; parsing the answer (one
code fence tolerated, prose rejected) is the abstraction pass's job.

Ground floor: imports nothing from factmem but :mod:`factmem.errors` and its own siblings
(:mod:`factmem.abstraction.cassette`, :mod:`factmem.abstraction.oracle`).
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
import time
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import httpx
import pandas as pd

from factmem.abstraction.cassette import Cassette, CassetteError, CassetteMiss, cassette_key
from factmem.abstraction.oracle import (
    GENERALIZATION_COLUMNS,
    ORACLE_ERRORS,
    PROMPT_VERSION,
    SUPPORT_ERRORS,
    OracleDraw,
    OracleProvider,
    _check_temperature,
    cluster_payload,
    messages_hash,
    parse_cluster_prompt,
)
from factmem.errors import InputError, ProviderError

__all__ = [
    "Provider",
    "ProviderError",
    "OpenAICompatible",
    "Ollama",
    "OracleProvider",
    "OracleDraw",
    "ORACLE_ERRORS",
    "SUPPORT_ERRORS",
    "PROMPT_VERSION",
    "GENERALIZATION_COLUMNS",
    "Cassette",
    "CassetteError",
    "CassetteMiss",
    "cassette_key",
    "cluster_payload",
    "parse_cluster_prompt",
    "messages_hash",
    "make_provider",
    "PROVIDER_KINDS",
]

PROVIDER_KINDS: tuple[str, ...] = ("openai", "ollama", "oracle")
_BODY_PREVIEW = 200  # characters of an error body quoted in a ProviderError
#: The largest answer read (a chat completion of a few generalizations is a few kilobytes).
MAX_ANSWER_BYTES = 16 * 2**20


@runtime_checkable
class Provider(Protocol):
    """What the abstraction pass calls: one chat completion, text out, ProviderError on failure."""

    def complete(self, messages: list[dict], *, model: str, temperature: float) -> str: ...


def _check_timeout(timeout: float) -> float:
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not (timeout > 0) or math.isinf(timeout):
        raise InputError(f"timeout must be a positive number of seconds, got {timeout!r}")
    return float(timeout)


def _normalize_base_url(base_url: str, strip_suffix: str) -> str:
    if not isinstance(base_url, str) or not re.match(r"^https?://[^/\s]+", base_url):
        raise InputError(f"base_url must be an http:// or https:// URL, got {base_url!r}")
    url = base_url.rstrip("/")
    if url.endswith(strip_suffix):
        url = url[: -len(strip_suffix)]
    return url


def _preview(text: str) -> str:
    """The start of a response body, whitespace collapsed, for an error message."""
    text = " ".join(text.split())
    return text if len(text) <= _BODY_PREVIEW else text[:_BODY_PREVIEW] + "…"


class _HTTPProvider:
    """Shared transport: one lazily created httpx.Client, explicit timeouts, no retry."""

    endpoint = ""
    _suffix = ""

    def __init__(self, base_url: str, model: str | None, timeout: float, api_key_env: str | None = None):
        self.base_url = _normalize_base_url(base_url, self._suffix)
        self.url = self.base_url + self.endpoint
        if model is not None and (not isinstance(model, str) or not model):
            raise InputError(f"model must be a non-empty string or None, got {model!r}")
        self.model = model
        self.timeout = _check_timeout(timeout)
        if api_key_env is not None and (not isinstance(api_key_env, str) or not api_key_env):
            raise InputError(f"api_key_env must name an environment variable, got {api_key_env!r}")
        self.api_key_env = api_key_env
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()

    # clients hold sockets and locks: rebuild them after pickling (process pools, Dask)
    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_client"] = None
        del state["_lock"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def _http(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                self._client = httpx.Client(timeout=httpx.Timeout(self.timeout))
            return self._client

    def close(self) -> None:
        """Close the underlying connection pool (the provider stays usable; it reopens lazily)."""
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _resolve_model(self, model: str | None) -> str:
        model = model if model is not None else self.model
        if not model:
            raise InputError(f"{type(self).__name__}: no model given (pass model= to complete() or the constructor)")
        return model

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key_env is not None:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise InputError(f"environment variable {self.api_key_env} (api_key_env) is not set or empty")
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _post(self, body: dict) -> dict:
        """POST ``body`` as JSON; return the decoded JSON object or raise ProviderError.

        ``timeout`` is a deadline for the whole call — connecting, sending, and reading the answer
        to its last byte — not only per read (httpx's timeouts are per operation: a server dripping
        one byte per second would never time out). The request runs in a worker thread that the
        caller waits for at most ``timeout`` seconds; a worker outliving the deadline drops the
        connection at its next read (within ``timeout``) and its answer is discarded."""
        url = self.url
        headers = self._headers()
        deadline = time.monotonic() + self.timeout
        outcome: dict[str, Any] = {}
        finished = threading.Event()
        abandoned = threading.Event()

        def call() -> None:
            try:
                outcome["answer"] = self._request(url, body, headers, deadline, abandoned)
            except BaseException as exc:  # handed to the caller's thread
                outcome["error"] = exc
            finally:
                finished.set()

        threading.Thread(target=call, name="factmem-provider-call", daemon=True).start()
        if not finished.wait(max(deadline - time.monotonic(), 0.0)):
            abandoned.set()
            raise ProviderError("timeout", f"no complete answer from {url} within the {self.timeout:g} s "
                                           "deadline of the call", url=url)
        if "error" in outcome:
            raise outcome["error"]
        status, reason, raw, text = outcome["answer"]
        if not 200 <= status < 300:
            raise ProviderError(
                "http",
                f"HTTP {status} {reason} from {url}: {_preview(text)}",
                url=url,
                status=status,
            )
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):  # RecursionError: JSON nested thousands deep
            raise ProviderError(
                "envelope", f"answer from {url} is not JSON (HTTP {status}): {_preview(text)}", url=url
            ) from None
        if not isinstance(data, dict):
            raise ProviderError(
                "envelope", f"answer from {url} is JSON {type(data).__name__}, not an object: {_preview(text)}", url=url
            )
        if "error" in data and not self._has_payload(data):
            raise ProviderError(
                "envelope", f"{url} answered HTTP {status} with an error: {_preview(json.dumps(data['error']))}", url=url
            )
        return data

    def _request(self, url: str, body: dict, headers: dict, deadline: float,
                 abandoned: threading.Event) -> tuple[int, str, bytes, str]:
        """The HTTP exchange (in the worker thread): (status, reason, body bytes, body text)."""
        try:
            with self._http().stream("POST", url, json=body, headers=headers) as resp:
                chunks: list[bytes] = []
                size = 0
                for chunk in resp.iter_bytes():
                    if abandoned.is_set() or time.monotonic() > deadline:
                        raise ProviderError("timeout", f"no complete answer from {url} within the "
                                                       f"{self.timeout:g} s deadline of the call", url=url)
                    size += len(chunk)
                    if size > MAX_ANSWER_BYTES:
                        raise ProviderError("envelope", f"answer from {url} exceeds {MAX_ANSWER_BYTES:,} bytes",
                                            url=url)
                    chunks.append(chunk)
                raw = b"".join(chunks)
                text = raw.decode(resp.encoding or "utf-8", errors="replace")
                return resp.status_code, resp.reason_phrase, raw, text
        except httpx.TimeoutException as exc:
            raise ProviderError(
                "timeout", f"no answer from {url} within the {self.timeout:g} s timeout ({type(exc).__name__})", url=url
            ) from exc
        except httpx.ConnectError as exc:
            raise ProviderError("connection", f"cannot connect to {url}: {exc or type(exc).__name__}", url=url) from exc
        except httpx.TransportError as exc:
            raise ProviderError(
                "connection", f"connection to {url} failed: {type(exc).__name__}: {exc}", url=url
            ) from exc

    def _has_payload(self, data: dict) -> bool:  # pragma: no cover - overridden
        return True

    def _envelope(self, what: str, data: dict) -> ProviderError:
        return ProviderError(
            "envelope", f"malformed answer from {self.url}: {what} (keys present: {sorted(data)})", url=self.url
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_url!r}, model={self.model!r}, timeout={self.timeout:g})"


class OpenAICompatible(_HTTPProvider):
    """An OpenAI-compatible chat endpoint (llama.cpp server, vLLM, LM Studio, OpenAI).

    POSTs ``{base_url}/v1/chat/completions`` (``base_url`` may end in ``/v1`` or not) with
    ``{"model", "messages", "temperature", "stream": false}`` and returns ``choices[0].message.content``.
    ``api_key_env`` names an environment variable holding a bearer key, read at each call (never
    stored, never printed). ``timeout`` (seconds) is a deadline for the whole call (connect, send,
    the complete answer), not only for each read; no retry.
    """

    endpoint = "/v1/chat/completions"
    _suffix = "/v1"

    def __init__(self, base_url: str, model: str | None = None, api_key_env: str | None = None, timeout: float = 30.0):
        super().__init__(base_url, model, timeout, api_key_env)

    def _has_payload(self, data: dict) -> bool:
        return "choices" in data

    def complete(self, messages: list[dict], *, model: str | None = None, temperature: float = 0.0) -> str:
        """One chat completion; the model's text, or ProviderError."""
        body = {
            "model": self._resolve_model(model),
            "messages": list(messages),
            "temperature": _check_temperature(temperature),
            "stream": False,
        }
        data = self._post(body)
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            raise self._envelope("'choices' missing or empty", data)
        first = choices[0]
        message = first.get("message") if isinstance(first, dict) else None
        if not isinstance(message, dict):
            raise self._envelope("'choices[0].message' missing", data)
        content = message.get("content")
        if not isinstance(content, str):
            reason = first.get("finish_reason")
            raise self._envelope(f"'choices[0].message.content' is {type(content).__name__}, not text (finish_reason={reason!r})", data)
        return content


class Ollama(_HTTPProvider):
    """An Ollama server's chat endpoint.

    POSTs ``{base_url}/api/chat`` with ``{"model", "messages", "stream": false, "options":
    {"temperature"}}`` and returns ``message.content``. ``timeout`` as in :class:`OpenAICompatible`.
    """

    endpoint = "/api/chat"
    _suffix = "/api"

    def __init__(self, base_url: str = "http://localhost:11434", model: str | None = None, timeout: float = 30.0):
        super().__init__(base_url, model, timeout)

    def _has_payload(self, data: dict) -> bool:
        return "message" in data

    def complete(self, messages: list[dict], *, model: str | None = None, temperature: float = 0.0) -> str:
        """One chat completion; the model's text, or ProviderError."""
        body = {
            "model": self._resolve_model(model),
            "messages": list(messages),
            "stream": False,
            "options": {"temperature": _check_temperature(temperature)},
        }
        data = self._post(body)
        message = data.get("message")
        if not isinstance(message, dict):
            raise self._envelope("'message' missing", data)
        content = message.get("content")
        if not isinstance(content, str):
            raise self._envelope(f"'message.content' is {type(content).__name__}, not text", data)
        return content


# --------------------------------------------------------------------------------------------------
# Factory
# --------------------------------------------------------------------------------------------------

def make_provider(
    kind: str,
    base_url: str | None = None,
    model: str | None = None,
    cassette: str | os.PathLike | None = None,
    *,
    cassette_mode: str = "auto",
    prompt_version: str | None = None,
    timeout: float = 30.0,
    api_key_env: str | None = None,
    generalizations: pd.DataFrame | None = None,
    dataset: str | os.PathLike | None = None,
    facts_truth: pd.DataFrame | None = None,
    seed: int = 0,
    error_rates: Mapping[str, float] | None = None,
    min_support: float = 1.0,
) -> Any:
    """Build the provider the CLI asks for: ``kind`` in openai|ollama|oracle, optionally wrapped in a
    :class:`Cassette` at ``cassette`` (mode ``cassette_mode``, default ``auto``).

    openai needs ``base_url``; ollama defaults to ``http://localhost:11434``; oracle needs
    ``generalizations`` (DataFrame) or ``dataset`` (folder or file, see
    :meth:`OracleProvider.from_dataset`). ``prompt_version`` keys the cassette (default: the current
    :data:`PROMPT_VERSION`). In ``replay`` mode a real provider is not needed: a missing
    ``base_url`` is then allowed and ``model`` becomes the cassette's default model.
    """
    if kind not in PROVIDER_KINDS:
        raise InputError(f"provider kind must be one of {PROVIDER_KINDS}, got {kind!r}")
    replay_only = cassette is not None and cassette_mode == "replay"
    provider: Any
    if kind == "openai":
        if base_url is None and not replay_only:
            raise InputError("the openai provider needs base_url (e.g. http://127.0.0.1:8080 for a llama.cpp server)")
        provider = OpenAICompatible(base_url, model, api_key_env=api_key_env, timeout=timeout) if base_url else None
    elif kind == "ollama":
        provider = Ollama(base_url or "http://localhost:11434", model, timeout=timeout)
    else:
        oracle_kwargs: dict[str, Any] = dict(seed=seed, error_rates=error_rates, min_support=min_support,
                                             model=model or "oracle")
        if generalizations is not None:
            provider = OracleProvider(generalizations, facts_truth=facts_truth, **oracle_kwargs)
        elif dataset is not None:
            if facts_truth is not None:
                oracle_kwargs["facts_truth"] = facts_truth
            provider = OracleProvider.from_dataset(dataset, **oracle_kwargs)
        else:
            raise InputError("the oracle provider needs generalizations= (DataFrame) or dataset= (folder)")
    if cassette is None:
        return provider
    return Cassette(provider, cassette, mode=cassette_mode, prompt_version=prompt_version, model=model)

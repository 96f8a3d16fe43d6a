"""A real, scriptable LLM HTTP server on 127.0.0.1 for tests: speaks the OpenAI-compatible
``POST /v1/chat/completions`` and Ollama ``POST /api/chat`` APIs.

Script it per test with a queue of replies (``server.reply(...)``, consumed one per request) and/or a
function (``server.handler = fn``, called with the :class:`Request` when the queue is empty). A reply
is a :class:`Reply` or a plain string (the model's text, wrapped in the envelope of the API the
request used). Every request is recorded in ``server.requests`` (method, path, headers, parsed JSON).
With nothing scripted the server answers HTTP 500 ``llm_server: nothing scripted``, so a test that
forgot to script a call fails loudly.

A hang (``Reply.hang(s)``) waits on the server's stop event, so ``stop()`` never blocks on it;
after ``stop()`` the port is closed and clients get *connection refused*.

Use the ``llm_server`` fixture (``from tests.llm_server import llm_server``), or
``with LLMServer() as server: ...``.
"""

from __future__ import annotations

import collections
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

OPENAI_PATH = "/v1/chat/completions"
OLLAMA_PATH = "/api/chat"
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


@dataclass
class Reply:
    """One scripted answer. ``content`` is the model text (wrapped in the API envelope); ``body``
    replaces the whole response body instead (str/bytes sent as is, dict/list as JSON)."""

    content: str | None = None
    status: int = 200
    body: Any = None
    delay: float = 0.0
    headers: dict = field(default_factory=dict)
    drip: float = 0.0  # > 0: send the headers, then the body one byte every `drip` seconds

    @classmethod
    def text(cls, content: str, delay: float = 0.0) -> Reply:
        """A 200 answer whose model text is ``content``."""
        return cls(content=content, delay=delay)

    @classmethod
    def http(cls, status: int, body: Any = "") -> Reply:
        """An HTTP error status with a raw body."""
        return cls(status=status, body=body)

    @classmethod
    def raw(cls, body: Any, status: int = 200) -> Reply:
        """A raw body (for malformed envelopes)."""
        return cls(status=status, body=body)

    @classmethod
    def slow_drip(cls, content: str = "[]", every: float = 0.5) -> Reply:
        """Headers at once, then the body a byte at a time, one every ``every`` seconds: each read
        returns in time, so only a deadline on the whole call ends it."""
        return cls(content=content, drip=every)

    @classmethod
    def hang(cls, seconds: float = 30.0, content: str = "[]") -> Reply:
        """Answer only after ``seconds`` (or never, if the server stops first)."""
        return cls(content=content, delay=seconds)


@dataclass
class Request:
    """One request the server received."""

    method: str
    path: str
    headers: dict
    raw: bytes
    json: Any
    at: float


def openai_envelope(content: str, model: str | None) -> dict:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": model or "unknown",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def ollama_envelope(content: str, model: str | None) -> dict:
    return {
        "model": model or "unknown",
        "created_at": "1970-01-01T00:00:00Z",
        "message": {"role": "assistant", "content": content},
        "done": True,
        "done_reason": "stop",
    }


class _Handler(BaseHTTPRequestHandler):
    server_version = "factmem-test-llm/1"

    def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
        pass

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _serve(self) -> None:
        llm: LLMServer = self.server.llm  # type: ignore[attr-defined]
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = None
        request = Request(self.command, self.path, dict(self.headers), raw, parsed, time.monotonic())
        reply = llm._next_reply(request)
        if reply.delay > 0 and llm._stopping.wait(reply.delay):
            return  # server stopping: drop the connection without answering
        if reply.body is not None:
            body = reply.body
            if isinstance(body, (dict, list)):
                payload, ctype = json.dumps(body).encode(), "application/json"
            else:
                payload = body if isinstance(body, bytes) else str(body).encode()
                ctype = "text/plain; charset=utf-8"
        elif self.path == OPENAI_PATH:
            payload, ctype = json.dumps(openai_envelope(reply.content or "", _model(parsed))).encode(), "application/json"
        elif self.path == OLLAMA_PATH:
            payload, ctype = json.dumps(ollama_envelope(reply.content or "", _model(parsed))).encode(), "application/json"
        else:
            reply = Reply(status=404)
            payload, ctype = json.dumps({"error": f"no route {self.path}"}).encode(), "application/json"
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(payload)))
            for key, value in reply.headers.items():
                self.send_header(key, value)
            self.end_headers()
            if reply.drip > 0:
                for i in range(len(payload)):
                    self.wfile.write(payload[i:i + 1])
                    self.wfile.flush()
                    if llm._stopping.wait(reply.drip):
                        return
            else:
                self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timed out); nothing to do


def _model(parsed: Any) -> str | None:
    return parsed.get("model") if isinstance(parsed, dict) else None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # a hung handler must not hold up server_close()
    allow_reuse_address = False


class LLMServer:
    """The fake server; see the module docstring."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.handler: Callable[[Request], Reply | str] | None = None
        self._queue: collections.deque[Reply | str] = collections.deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None
        self.port: int | None = None

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:41234`` (valid after start, kept after stop)."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> LLMServer:
        self._stopping.clear()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.llm = self  # type: ignore[attr-defined]
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the port (later connections are refused). Idempotent."""
        if self._httpd is None:
            return
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None

    @property
    def running(self) -> bool:
        return self._httpd is not None

    def __enter__(self) -> LLMServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def reply(self, *replies: Reply | str) -> LLMServer:
        """Queue replies, one per coming request, in order."""
        with self._lock:
            self._queue.extend(replies)
        return self

    @property
    def pending(self) -> int:
        """Queued replies not yet consumed."""
        with self._lock:
            return len(self._queue)

    def requests_to(self, path: str) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.path == path]

    def _next_reply(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            item = self._queue.popleft() if self._queue else None
        if item is None and self.handler is not None:
            item = self.handler(request)
        if item is None:
            item = Reply.http(500, f"llm_server: nothing scripted for {request.method} {request.path}")
        return Reply.text(item) if isinstance(item, str) else item


def provider_handler(provider: Any, hang: float = 30.0) -> Callable[[Request], Reply]:
    """A handler answering each request through ``provider.complete`` (e.g. an OracleProvider), so
    the server behaves like a model: a ProviderError ``timeout`` becomes a hang, others HTTP 502."""
    from factmem.errors import ProviderError

    def handle(request: Request) -> Reply:
        body = request.json or {}
        temperature = body.get("temperature", (body.get("options") or {}).get("temperature", 0.0))
        try:
            return Reply.text(provider.complete(body.get("messages", []), model=body.get("model"), temperature=temperature))
        except ProviderError as exc:
            return Reply.hang(hang) if exc.kind == "timeout" else Reply.http(502, str(exc))

    return handle


@pytest.fixture
def llm_server(monkeypatch: pytest.MonkeyPatch):
    """A started :class:`LLMServer`, stopped after the test; proxy variables cleared so httpx talks
    to 127.0.0.1 directly."""
    for var in PROXY_VARS:
        monkeypatch.delenv(var, raising=False)
    server = LLMServer().start()
    try:
        yield server
    finally:
        server.stop()


class InProcessModel:
    """A provider answering in process: ``answer(subject, facts)`` on each parsed cluster prompt; the
    subjects asked are kept in order (for comparing a pass's calls with the reference model's)."""

    model = "ref"

    def __init__(self, answer: Callable[[str, list[dict]], str]):
        self.answer = answer
        self.subjects: list[str] = []

    def complete(self, messages, *, model=None, temperature=0.0):
        from factmem.abstraction.providers import parse_cluster_prompt

        cluster = parse_cluster_prompt(messages)
        self.subjects.append(cluster["subject"])
        return self.answer(cluster["subject"], cluster["facts"])


def assert_passes_match_reference(params: Any, answer: Callable[[str, list[dict]], str], rounds: list,
                                  start: int, day: int = 86400) -> None:
    """Run ``rounds`` of (facts, days, min_cluster, prune) — new facts (subject, predicate, object, kind)
    an hour apart, maybe a consolidation ``days`` later, then an abstraction pass — on a FactStore and on
    the reference model with the same in-process ``answer``, then two more passes, and assert after each
    pass: the same subjects called, the same facts (confidence to 1e-12), links and examined records."""
    import numpy as np
    import pandas as pd

    from factmem.abstraction.passes import abstract
    from factmem.store.factstore import FactStore
    from factmem.testing import RefMemory

    store, ref, model = FactStore(params=params), RefMemory(params), InProcessModel(answer)
    t = start
    cols = ["id", "subject", "predicate", "object", "kind", "reinforcement_count", "last_reinforced", "status",
            "status_reason", "stale"]
    try:
        for facts, days, min_cluster, prune in list(rounds) + [([], None, 2, True), ([], None, 2, True)]:
            for subject, predicate, obj, kind in facts:
                t += 3600
                store.remember(subject, predicate, obj, kind=kind, at=t)
                ref.remember(subject, predicate, obj, kind, t)
            if days is not None:
                t += days * day
                assert tuple(store.consolidate(t, prune=False)) == (ref.consolidate(t, prune=False)[0], 0)
            t += 3600
            model.subjects.clear()
            result = abstract(store, model, at=t, min_cluster=min_cluster, prune=prune)
            want_called = ref.abstract(t, answer, min_cluster=min_cluster, max_facts=params.max_facts,
                                       link_scope=params.link_scope, prune=prune)
            assert model.subjects == want_called and result.calls == len(want_called)
            got, want = store.facts(at=0), pd.DataFrame(ref.table(), columns=cols + ["confidence"])
            assert got[cols].astype(object).where(got[cols].notna(), None).values.tolist() == \
                want[cols].astype(object).where(want[cols].notna(), None).values.tolist()
            np.testing.assert_allclose(got["confidence"].to_numpy(float), want["confidence"].to_numpy(float),
                                       rtol=1e-12)
            assert set(map(tuple, store.links().values.tolist())) == set(ref.links)
            rec = store.examined()
            assert sorted(zip(rec["subject"], map(tuple, rec["member_ids"]), rec["examined_at"], rec["pass_id"],
                              rec["outcome"])) == sorted(ref.examined)
    finally:
        store.close()

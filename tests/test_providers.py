"""Providers over httpx against a real 127.0.0.1 server, the oracle's contract and error model, and
the record/replay cassette."""

from __future__ import annotations

import hashlib
import json
import math
import pickle
import re
import threading
import time
import warnings

import numpy as np
import pandas as pd
import pytest

from factmem.abstraction.providers import (
    ORACLE_ERRORS,
    SUPPORT_ERRORS,
    Cassette,
    Ollama,
    OpenAICompatible,
    OracleProvider,
    Provider,
    cassette_key,
    cluster_payload,
    make_provider,
    messages_hash,
    parse_cluster_prompt,
)
from factmem.errors import CassetteError, CassetteMiss, FactmemError, ProviderError
from tests.llm_server import OLLAMA_PATH, OPENAI_PATH, LLMServer, Reply, provider_handler

FAST = 1.0  # client timeout in tests (seconds): what a hang waits; ample for an answer on a loaded machine
MSGS = [{"role": "system", "content": "be terse"}, {"role": "user", "content": "hello"}]

# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------

APIS = {
    "openai": (lambda url, **kw: OpenAICompatible(url, **kw), OPENAI_PATH),
    "ollama": (lambda url, **kw: Ollama(url, **kw), OLLAMA_PATH),
}


@pytest.fixture(params=sorted(APIS))
def api(request):
    return request.param


def make(api: str, url: str, **kw):
    kw.setdefault("model", "test-model")
    kw.setdefault("timeout", FAST)
    return APIS[api][0](url, **kw)


def parse_answer(text: str, max_facts: int):
    """Reference of DESIGN.md's answer rule: strip whitespace and at most one code fence; the rest
    must be a JSON array of <= max_facts objects with non-empty string subject/predicate/object
    (note optional string). Returns the list or None when rejected."""
    s = text.strip()
    m = re.fullmatch(r"```[A-Za-z0-9_-]*[ \t]*\n(.*?)\n?```", s, re.S)
    if m:
        s = m.group(1).strip()
    try:
        data = json.loads(s)
    except ValueError:
        return None
    if not isinstance(data, list) or len(data) > max_facts:
        return None
    for item in data:
        if not isinstance(item, dict):
            return None
        if any(not isinstance(item.get(k), str) or not item[k] for k in ("subject", "predicate", "object")):
            return None
        if "note" in item and not isinstance(item["note"], str):
            return None
    return data


# --------------------------------------------------------------------------------------------------
# the test server itself
# --------------------------------------------------------------------------------------------------


def test_server_unscripted_and_unknown_path(llm_server):
    import httpx

    r = httpx.post(llm_server.url + OPENAI_PATH, json={"model": "m"})
    assert r.status_code == 500 and "nothing scripted" in r.text
    llm_server.reply("x")
    r = httpx.post(llm_server.url + "/nope", json={})
    assert r.status_code == 404
    assert [q.path for q in llm_server.requests] == [OPENAI_PATH, "/nope"]


def test_server_stop_does_not_wait_for_a_hang():
    server = LLMServer().start()
    server.reply(Reply.hang(30))
    p = OpenAICompatible(server.url, model="m", timeout=FAST)
    with pytest.raises(ProviderError):
        p.complete(MSGS)
    t0 = time.monotonic()
    server.stop()
    assert time.monotonic() - t0 < 2.0
    server.stop()  # idempotent


# --------------------------------------------------------------------------------------------------
# HTTP providers: every case, both APIs
# --------------------------------------------------------------------------------------------------

CONTENTS = {
    "json": '[{"subject": "alice", "predicate": "is_a", "object": "engineer"}]',
    "empty": "[]",
    "fenced": '```json\n[{"subject": "alice", "predicate": "is_a", "object": "engineer"}]\n```',
    "prose": 'Sure! Here you go: [{"subject": "alice", "predicate": "is_a", "object": "engineer"}] Hope it helps.',
    "invalid": '[{"subject": "alice", "predicate": "is_a",',
    "unicode": '[{"subject": "zoë", "predicate": "likes", "object": "crème brûlée ☕"}]',
}


@pytest.mark.parametrize("case", sorted(CONTENTS))
def test_content_returned_verbatim(api, llm_server, case):
    llm_server.reply(CONTENTS[case])
    assert make(api, llm_server.url).complete(MSGS) == CONTENTS[case]


def test_request_body_openai(llm_server):
    llm_server.reply("a", "b")
    p = OpenAICompatible(llm_server.url, model="default-model", timeout=FAST)
    p.complete(MSGS, temperature=0)
    p.complete(MSGS, model="other-model", temperature=0.7)
    first, second = (r.json for r in llm_server.requests)
    assert [r.path for r in llm_server.requests] == [OPENAI_PATH, OPENAI_PATH]
    assert first == {"model": "default-model", "messages": MSGS, "temperature": 0.0, "stream": False}
    assert second["model"] == "other-model" and second["temperature"] == 0.7 and second["stream"] is False
    assert "authorization" not in {k.lower() for k in llm_server.requests[0].headers}


def test_request_body_ollama(llm_server):
    llm_server.reply("a", "b")
    p = Ollama(llm_server.url, model="llama3", timeout=FAST)
    p.complete(MSGS)
    p.complete(MSGS, model="qwen", temperature=0.2)
    first, second = (r.json for r in llm_server.requests)
    assert [r.path for r in llm_server.requests] == [OLLAMA_PATH, OLLAMA_PATH]
    assert first == {"model": "llama3", "messages": MSGS, "stream": False, "options": {"temperature": 0.0}}
    assert second["model"] == "qwen" and second["options"] == {"temperature": 0.2}


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
def test_openai_base_url_forms(llm_server, suffix):
    llm_server.reply("ok")
    p = OpenAICompatible(llm_server.url + suffix, model="m", timeout=FAST)
    assert p.url == llm_server.url + OPENAI_PATH
    assert p.complete(MSGS) == "ok" and llm_server.requests[-1].path == OPENAI_PATH


@pytest.mark.parametrize("suffix", ["", "/", "/api", "/api/"])
def test_ollama_base_url_forms(llm_server, suffix):
    llm_server.reply("ok")
    p = Ollama(llm_server.url + suffix, model="m", timeout=FAST)
    assert p.complete(MSGS) == "ok" and llm_server.requests[-1].path == OLLAMA_PATH


def test_bad_arguments(api):
    with pytest.raises(ValueError, match="base_url"):
        make(api, "localhost:8080")
    with pytest.raises(ValueError, match="timeout"):
        make(api, "http://127.0.0.1:9", timeout=0)
    p = make(api, "http://127.0.0.1:9", model=None)
    with pytest.raises(ValueError, match="no model"):
        p.complete(MSGS)
    with pytest.raises(ValueError, match="temperature"):
        make(api, "http://127.0.0.1:9").complete(MSGS, temperature=float("nan"))


def test_no_model_sends_nothing(llm_server, api):
    with pytest.raises(ValueError):
        make(api, llm_server.url, model=None).complete(MSGS)
    assert llm_server.requests == []


def test_http_500_names_status_url_and_body_start(api, llm_server):
    body = "internal failure: " + "x" * 1000
    llm_server.reply(Reply.http(500, body))
    p = make(api, llm_server.url)
    with pytest.raises(ProviderError) as info:
        p.complete(MSGS)
    err = info.value
    assert err.kind == "http" and err.status == 500 and err.url == p.url
    msg = str(err)
    assert "500" in msg and p.url in msg and "internal failure: " + "x" * 150 in msg
    assert "x" * 300 not in msg and len(msg) < 400


def test_http_404_with_json_error(api, llm_server):
    llm_server.reply(Reply.http(404, {"error": "model 'nope' not found"}))
    with pytest.raises(ProviderError) as info:
        make(api, llm_server.url).complete(MSGS)
    assert info.value.kind == "http" and info.value.status == 404 and "model 'nope' not found" in str(info.value)


def test_hang_past_timeout(api, llm_server):
    llm_server.reply(Reply.hang(30))
    p = make(api, llm_server.url)
    t0 = time.monotonic()
    with pytest.raises(ProviderError) as info:
        p.complete(MSGS)
    elapsed = time.monotonic() - t0
    assert info.value.kind == "timeout"
    assert f"{FAST:g} s" in str(info.value) and p.url in str(info.value)
    assert FAST * 0.9 <= elapsed < FAST + 1.5


def test_slow_but_within_timeout(api, llm_server):
    llm_server.reply(Reply.text("late", delay=0.05))
    assert make(api, llm_server.url).complete(MSGS) == "late"


def test_connection_refused_after_stop(api, llm_server):
    llm_server.reply("up")
    p = make(api, llm_server.url)
    assert p.complete(MSGS) == "up"
    llm_server.stop()
    n = len(llm_server.requests)
    with pytest.raises(ProviderError) as info:
        p.complete(MSGS)
    assert info.value.kind == "connection"
    assert p.url in str(info.value) and "refused" in str(info.value).lower()
    assert len(llm_server.requests) == n


ENVELOPES = {
    "openai": [
        ("not json at all", "not JSON"),
        ([1, 2], "not an object"),
        ({"id": "x"}, "'choices' missing"),
        ({"choices": []}, "'choices' missing or empty"),
        ({"choices": [{"index": 0}]}, "'choices[0].message' missing"),
        ({"choices": [{"message": {"role": "assistant", "content": None}, "finish_reason": "length"}]}, "content"),
        ({"error": {"message": "server overloaded"}}, "server overloaded"),
    ],
    "ollama": [
        ("<html>nope</html>", "not JSON"),
        ({"done": True}, "'message' missing"),
        ({"message": {"role": "assistant"}}, "'message.content'"),
        ({"error": "model requires more system memory"}, "more system memory"),
    ],
}


@pytest.mark.parametrize("api_name,body,needle", [(a, b, n) for a, cases in ENVELOPES.items() for b, n in cases])
def test_malformed_envelope(llm_server, api_name, body, needle):
    llm_server.reply(Reply.raw(body))
    p = make(api_name, llm_server.url)
    with pytest.raises(ProviderError) as info:
        p.complete(MSGS)
    assert info.value.kind == "envelope"
    assert needle in str(info.value) and p.url in str(info.value)


def test_bearer_key_from_env(llm_server, monkeypatch):
    monkeypatch.setenv("FACTMEM_TEST_KEY", "sekret-123")
    llm_server.reply("ok")
    p = OpenAICompatible(llm_server.url, model="m", api_key_env="FACTMEM_TEST_KEY", timeout=FAST)
    assert p.complete(MSGS) == "ok"
    headers = {k.lower(): v for k, v in llm_server.requests[0].headers.items()}
    assert headers["authorization"] == "Bearer sekret-123"
    assert "sekret" not in repr(p) and "sekret" not in str(pickle.dumps(p))
    monkeypatch.delenv("FACTMEM_TEST_KEY")
    with pytest.raises(ValueError, match="FACTMEM_TEST_KEY"):
        p.complete(MSGS)
    assert len(llm_server.requests) == 1


def test_pickle_roundtrip_and_close(api, llm_server):
    llm_server.reply("one", "two")
    p = make(api, llm_server.url)
    assert p.complete(MSGS) == "one"
    q = pickle.loads(pickle.dumps(p))
    assert q.complete(MSGS) == "two" and q.url == p.url and q.timeout == p.timeout
    p.close()
    q.close()
    assert isinstance(p, Provider)


# --------------------------------------------------------------------------------------------------
# the oracle
# --------------------------------------------------------------------------------------------------

GEN_COLS = ["gen_id", "subject", "predicate", "object", "note", "support_predicate", "support_object"]


def small_gens() -> pd.DataFrame:
    rows = [
        ("g1", "alice", "is_a", "rust_engineer", "systems person", "prefers_language", "rust"),
        ("g1", "alice", "is_a", "rust_engineer", "systems person", "uses_db", "sqlite"),
        ("g2", "alice", "works_style", "test_first", "", "writes", "tests_first"),
        ("g2", "alice", "works_style", "test_first", "", "uses_os", "linux"),
        ("g2", "alice", "works_style", "test_first", "", "uses_ci", "github"),
        ("g3", "bob", "is_a", "runner", None, "hobby", "running"),
        ("g3", "bob", "is_a", "runner", None, "owns", "running_shoes"),
    ]
    return pd.DataFrame(rows, columns=GEN_COLS)


def facts_of(subject: str, pairs, start: int = 0) -> list[dict]:
    return [
        {"id": start + i, "subject": subject, "predicate": p, "object": o, "note": ""} for i, (p, o) in enumerate(pairs)
    ]


def prompt(subject: str, facts, max_facts: int = 2, style: str = "fenced") -> list[dict]:
    payload = cluster_payload(subject, max_facts, facts)
    if style == "bare":
        text = payload
    elif style == "fenced":
        text = "Generalize these facts. Return {subject, predicate, object} objects.\n```json\n" + payload + "\n```\nJSON only."
    else:  # prose with a bare object after braces that are not JSON
        text = "Keys are {subject, predicate, object}. Cluster follows: " + payload + " -- thanks"
    return [{"role": "system", "content": "You are a memory consolidation engine."}, {"role": "user", "content": text}]


ALICE_ALL = [("prefers_language", "rust"), ("uses_db", "sqlite"), ("writes", "tests_first"), ("uses_os", "linux"), ("uses_ci", "github")]


@pytest.mark.parametrize("style", ["bare", "fenced", "prose"])
def test_oracle_truthful_answer(style):
    o = OracleProvider(small_gens())
    ans = json.loads(o.complete(prompt("alice", facts_of("alice", ALICE_ALL), 2, style)))
    # g2 has 3 supports and all are matched: ranked before g1 (2 supports)
    assert ans == [
        {"subject": "alice", "predicate": "works_style", "object": "test_first"},
        {"subject": "alice", "predicate": "is_a", "object": "rust_engineer", "note": "systems person"},
    ]
    one = json.loads(o.complete(prompt("alice", facts_of("alice", ALICE_ALL), 1, style)))
    assert one == ans[:1]
    assert o.calls == 2


def test_oracle_support_rule():
    partial = facts_of("alice", [("prefers_language", "rust"), ("uses_db", "sqlite"), ("uses_os", "linux"), ("noise", "x")])
    strict = OracleProvider(small_gens())
    assert json.loads(strict.complete(prompt("alice", partial, 3))) == [
        {"subject": "alice", "predicate": "is_a", "object": "rust_engineer", "note": "systems person"}
    ]
    # with min_support 1/3, g2 (1 of 3 matched) counts too, ranked after the fully supported g1
    loose = OracleProvider(small_gens(), min_support=1 / 3)
    assert [a["object"] for a in json.loads(loose.complete(prompt("alice", partial, 3)))] == ["rust_engineer", "test_first"]
    half = OracleProvider(small_gens(), min_support=0.5)  # needs ceil(1.5) = 2 of 3
    assert [a["object"] for a in json.loads(half.complete(prompt("alice", partial, 3)))] == ["rust_engineer"]
    sup = loose.supported("alice", partial)
    assert sup[["gen_id", "matched", "n_support"]].values.tolist() == [["g1", 2, 2], ["g2", 1, 3]]


def test_oracle_empty_answers():
    o = OracleProvider(small_gens())
    assert o.complete(prompt("alice", facts_of("alice", [("prefers_language", "rust"), ("noise", "y")]))) == "[]"
    assert o.complete(prompt("carol", facts_of("carol", ALICE_ALL))) == "[]"  # no generalizations for carol
    # alice's supporting pairs stated about someone else support nothing for alice
    assert o.complete(prompt("alice", facts_of("bob", ALICE_ALL))) == "[]"
    assert o.complete(prompt("alice", facts_of("alice", ALICE_ALL), max_facts=0)) == "[]"


def test_parse_cluster_prompt_uses_last_user_message():
    first = prompt("bob", facts_of("bob", [("hobby", "running"), ("owns", "running_shoes")]))
    second = prompt("alice", facts_of("alice", ALICE_ALL), 1)
    msgs = first + [{"role": "assistant", "content": "[]"}] + second[1:]
    cluster = parse_cluster_prompt(msgs)
    assert cluster["subject"] == "alice" and cluster["max_facts"] == 1 and len(cluster["facts"]) == 5
    assert json.loads(OracleProvider(small_gens()).complete(msgs))[0]["object"] == "test_first"


@pytest.mark.parametrize(
    "text,needle",
    [
        ("no json here", "no JSON object with a 'facts' key"),
        ('{"subject": "a", "facts": []}', "max_facts"),
        ('{"subject": "", "max_facts": 2, "facts": []}', "subject"),
        ('{"subject": "a", "max_facts": -1, "facts": []}', "max_facts"),
        ('{"subject": "a", "max_facts": 2, "facts": {}}', "'facts' must be a list"),
        ('{"subject": "a", "max_facts": 2, "facts": [{"predicate": "p"}]}', "facts[0].object"),
    ],
)
def test_parse_cluster_prompt_errors(text, needle):
    with pytest.raises(ValueError) as info:
        parse_cluster_prompt([{"role": "user", "content": text}])
    assert needle in str(info.value)
    with pytest.raises(ValueError):
        OracleProvider(small_gens()).complete([{"role": "user", "content": text}])


def test_parse_cluster_prompt_no_user():
    with pytest.raises(ValueError, match="role 'user'"):
        parse_cluster_prompt([{"role": "system", "content": "{}"}])


def test_oracle_argument_validation():
    with pytest.raises(ValueError, match="'prose_rate'"):
        OracleProvider(small_gens(), error_rates={"prose_rate": 0.1})
    for bad in (1.5, -0.1, float("nan"), "0.5", True):
        with pytest.raises(ValueError, match="error_rates\\['fence'\\]"):
            OracleProvider(small_gens(), error_rates={"fence": bad})
    with pytest.raises(ValueError, match="support_object"):
        OracleProvider(small_gens().drop(columns="support_object"))
    g = small_gens()
    g.loc[3, "subject"] = " "
    with pytest.raises(ValueError, match="'subject' is empty at row 3"):
        OracleProvider(g)
    g = small_gens()
    g.loc[1, "object"] = "go_engineer"
    with pytest.raises(ValueError, match="g1"):
        OracleProvider(g)
    with pytest.raises(ValueError, match="seed"):
        OracleProvider(small_gens(), seed=-1)
    with pytest.raises(ValueError, match="min_support"):
        OracleProvider(small_gens(), min_support=0)
    # note column optional; duplicate support rows harmless
    g = pd.concat([small_gens(), small_gens().iloc[:1]]).drop(columns="note")
    ans = json.loads(OracleProvider(g).complete(prompt("alice", facts_of("alice", ALICE_ALL[:2]))))
    assert ans == [{"subject": "alice", "predicate": "is_a", "object": "rust_engineer"}]


def random_world(seed: int, n_subjects: int = 25):
    """A random ground truth and random cluster prompts over it (test data)."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(n_subjects):
        for g in range(3):
            for k in range(int(rng.integers(2, 4))):
                rows.append((f"g{s}_{g}", f"user{s}", "archetype", f"type{s}_{g}", f"note {g}" if g else "", f"p{g}_{k}", f"o{s}_{g}_{k}"))
    gens = pd.DataFrame(rows, columns=GEN_COLS)
    truth = gens[["subject", "support_predicate", "support_object"]].set_axis(["subject", "predicate", "object"], axis=1)
    pairs_of = {s: list(zip(g["support_predicate"], g["support_object"])) for s, g in gens.groupby("subject")}
    prompts = []
    for i in range(400):
        s = int(rng.integers(n_subjects))
        pairs = pairs_of[f"user{s}"]
        keep = [pairs[j] for j in sorted(rng.choice(len(pairs), size=int(rng.integers(3, len(pairs) + 1)), replace=False))]
        keep += [(f"noise{i}", f"n{j}") for j in range(int(rng.integers(0, 3)))]
        max_facts = int(rng.integers(1, 4))
        prompts.append((f"user{s}", max_facts, prompt(f"user{s}", facts_of(f"user{s}", keep, start=i * 10), max_facts)))
    return gens, truth, prompts


def test_oracle_error_free_answers_are_valid_and_truthful():
    gens, truth, prompts = random_world(1)
    o = OracleProvider(gens, facts_truth=truth)
    gen_triples = set(zip(gens["subject"], gens["predicate"], gens["object"]))
    nonempty = 0
    for subject, max_facts, msgs in prompts:
        items = parse_answer(o.complete(msgs), max_facts)
        assert items is not None
        assert all({"subject", "predicate", "object"} <= set(i) and all(isinstance(v, str) and v for v in i.values()) for i in items)
        assert all((i["subject"], i["predicate"], i["object"]) in gen_triples and i["subject"] == subject for i in items)
        expected = o.supported(subject, parse_cluster_prompt(msgs)["facts"]).head(max_facts)
        assert [i["object"] for i in items] == expected["object"].tolist()
        nonempty += bool(items)
    assert 50 < nonempty < len(prompts)  # the world has both outcomes


def test_oracle_deterministic_per_seed_and_prompt_not_call_order():
    gens, truth, prompts = random_world(2)
    rates = {k: 0.3 for k in ORACLE_ERRORS if k != "timeout"}

    def answers(o, order):
        return {i: o.complete(prompts[i][2]) for i in order}

    idx = list(range(120))
    a = answers(OracleProvider(gens, seed=7, error_rates=rates, facts_truth=truth), idx)
    b = answers(OracleProvider(gens, seed=7, error_rates=rates, facts_truth=truth), idx[::-1])
    c = answers(OracleProvider(gens, seed=8, error_rates=rates, facts_truth=truth), idx)
    assert a == b
    assert sum(a[i] != c[i] for i in idx) > 30
    o = OracleProvider(gens, seed=7, error_rates=rates)
    assert o.draw(prompts[0][2]) == o.draw(prompts[0][2])
    assert o.draw(prompts[0][2]).key == messages_hash(prompts[0][2])
    assert pickle.loads(pickle.dumps(o)).complete(prompts[5][2]) == a[5]


def test_oracle_error_rates_statistics():
    rates = {"prose": 0.1, "fence": 0.2, "invalid_json": 0.3, "too_many": 0.15, "invented": 0.25, "timeout": 0.05}
    o0 = OracleProvider(small_gens(), seed=0, error_rates=rates)
    o1 = OracleProvider(small_gens(), seed=1, error_rates=rates)
    n = 4000
    msgs = [[{"role": "user", "content": json.dumps({"subject": "alice", "max_facts": 2, "facts": [], "nonce": i})}] for i in range(n)]
    def fired(o, m):
        errors = o.draw(m).errors
        return [k in errors for k in rates]

    d0 = np.array([fired(o0, m) for m in msgs])
    d1 = np.array([fired(o1, m) for m in msgs])
    p = np.array(list(rates.values()))
    tol = 4 * np.sqrt(p * (1 - p) / n)
    assert np.all(np.abs(d0.mean(0) - p) < tol), d0.mean(0)
    assert np.all(np.abs(d1.mean(0) - p) < tol), d1.mean(0)
    # independence: joint rate of two errors is the product
    joint = (d0[:, 1] & d0[:, 2]).mean()
    assert abs(joint - p[1] * p[2]) < 4 * math.sqrt(p[1] * p[2] / n)
    # different seeds give independent draws: per-error agreement is p^2 + (1-p)^2, not 1
    agree = (d0 == d1).mean(0)
    expected = p**2 + (1 - p) ** 2
    assert np.all(np.abs(agree - expected) < 4 * np.sqrt(expected * (1 - expected) / n)), agree
    # rates 0 and 1 are exact
    never = OracleProvider(small_gens(), error_rates={"prose": 0.0, "fence": 1.0})
    assert all(never.draw(m).errors == ("fence",) for m in msgs[:200])


def test_oracle_outputs_match_their_draws():
    gens, truth, prompts = random_world(3)
    rates = {k: 0.3 for k in ORACLE_ERRORS}  # support errors are drawn but never fire on cluster prompts
    o = OracleProvider(gens, seed=11, error_rates=rates, facts_truth=truth)
    known = set(zip(gens["subject"], gens["predicate"], gens["object"])) | set(zip(truth["subject"], truth["predicate"], truth["object"]))
    seen = {k: 0 for k in ORACLE_ERRORS if k not in SUPPORT_ERRORS}
    for subject, max_facts, msgs in prompts:
        errors = set(o.draw(msgs).errors)
        for k in errors:
            seen[k] += 1
        if "timeout" in errors:
            with pytest.raises(ProviderError) as info:
                o.complete(msgs)
            assert info.value.kind == "timeout" and subject in str(info.value)
            continue
        text = o.complete(msgs)
        items = parse_answer(text, max_facts)
        rejected = bool(errors & {"prose", "invalid_json", "too_many"})
        assert (items is None) == rejected, (errors, text)
        stripped = text.strip()
        if "prose" in errors:
            bare = stripped.startswith("[") and stripped.endswith("]")
            fenced = stripped.startswith("```") and stripped.endswith("```")
            assert not (bare or fenced)
        elif "fence" in errors:
            assert stripped.startswith("```") and stripped.endswith("```")
        else:
            assert stripped.startswith("[")
        if not errors & {"prose", "invalid_json"}:
            loose = parse_answer(text, 10**6)  # shape check without the max_facts limit
            assert loose is not None
            truthful = o.supported(subject, parse_cluster_prompt(msgs)["facts"]).head(max_facts)
            invented = [i for i in loose if (i["subject"], i["predicate"], i["object"]) not in known]
            if "too_many" in errors:
                assert len(loose) == max_facts + 1
            else:
                assert len(loose) <= max_facts
            if "invented" in errors:
                assert len(invented) == 1 and invented[0]["subject"] == subject
            else:
                assert invented == []
                assert [i["object"] for i in loose[: len(truthful)]] == truthful["object"].tolist()
    assert all(v > 40 for v in seen.values()), seen
    assert o.calls == len(prompts)
    assert o.error_counts == seen | dict.fromkeys(SUPPORT_ERRORS, 0)


def test_oracle_from_dataset_and_csv_strings(tmp_path):
    g = small_gens()
    g.loc[0, "support_object"] = "None"  # a real string that pandas would read as missing by default
    g.to_csv(tmp_path / "generalizations.csv", index=False)
    o = make_provider("oracle", dataset=tmp_path, seed=3)
    assert isinstance(o, OracleProvider) and o.seed == 3
    facts = facts_of("alice", [("prefers_language", "None"), ("uses_db", "sqlite")])
    assert json.loads(o.complete(prompt("alice", facts)))[0]["object"] == "rust_engineer"
    with pytest.raises(FileNotFoundError):
        OracleProvider.from_dataset(tmp_path / "nowhere")


def test_cluster_payload_from_dataframe():
    df = pd.DataFrame({"id": np.array([3, 1], dtype=np.int64), "subject": ["a", "a"], "predicate": ["p", "q"],
                       "object": ["x", "y"], "note": [None, "n"]})
    text = cluster_payload("a", 2, df)
    assert json.loads(text) == {"subject": "a", "max_facts": 2, "facts": [
        {"id": 3, "subject": "a", "predicate": "p", "object": "x", "note": ""},
        {"id": 1, "subject": "a", "predicate": "q", "object": "y", "note": "n"}]}
    with pytest.raises(ValueError, match="predicate"):
        cluster_payload("a", 2, df.drop(columns="predicate"))


def test_oracle_behind_the_http_server(llm_server):
    o = OracleProvider(small_gens(), error_rates={"timeout": 1.0})
    llm_server.handler = provider_handler(o)
    with pytest.raises(ProviderError) as info:
        OpenAICompatible(llm_server.url, model="m", timeout=FAST).complete(prompt("alice", facts_of("alice", ALICE_ALL)))
    assert info.value.kind == "timeout"
    llm_server.handler = provider_handler(OracleProvider(small_gens()))
    text = Ollama(llm_server.url, model="m", timeout=FAST).complete(prompt("alice", facts_of("alice", ALICE_ALL), 1))
    assert json.loads(text)[0]["object"] == "test_first"


# --------------------------------------------------------------------------------------------------
# the cassette
# --------------------------------------------------------------------------------------------------


def msgs_n(i: int) -> list[dict]:
    return [{"role": "user", "content": f"question {i}"}]


def test_cassette_key_is_sha256_of_canonical_json():
    key = cassette_key("m", MSGS, 0, "1")
    text = json.dumps({"model": "m", "messages": MSGS, "temperature": 0.0, "prompt_version": "1"},
                      sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert key == hashlib.sha256(text.encode()).hexdigest()
    assert cassette_key("m", MSGS, 0.0, "1") == key
    assert len({key, cassette_key("m2", MSGS, 0, "1"), cassette_key("m", MSGS, 0.1, "1"),
                cassette_key("m", MSGS, 0, "2"), cassette_key("m", MSGS[1:], 0, "1")}) == 5
    with pytest.raises(ValueError):
        cassette_key("m", [{"role": "user", "content": object()}], 0)


def test_cassette_record_then_replay_offline(api, llm_server, tmp_path):
    path = tmp_path / "cassette.jsonl"
    llm_server.reply("answer 0", "```json\n[]\n```", Reply.hang(30), Reply.http(503, "overloaded"), "answer 4")
    # a longer client timeout than FAST: the answers before and after the hang must not time out on a
    # machine loaded by other work (this test once saw "answer 0" time out under a load of 5-7)
    rec = Cassette(make(api, llm_server.url, timeout=3 * FAST), path, mode="record")
    recorded = []
    for i in range(5):
        try:
            recorded.append(("ok", rec.complete(msgs_n(i), temperature=0)))
        except ProviderError as exc:
            recorded.append((exc.kind, exc.status))
    assert recorded == [("ok", "answer 0"), ("ok", "```json\n[]\n```"), ("timeout", None), ("http", 503), ("ok", "answer 4")]
    assert rec.recorded == 5 and len(path.read_text().splitlines()) == 5
    llm_server.stop()
    n_requests = len(llm_server.requests)

    for provider in (make(api, llm_server.url), None):
        rep = Cassette(provider, path, mode="replay", model="test-model")
        replayed = []
        for i in range(5):
            try:
                replayed.append(("ok", rep.complete(msgs_n(i), temperature=0.0)))
            except ProviderError as exc:
                assert "replayed from cassette" in str(exc)
                replayed.append((exc.kind, exc.status))
        assert replayed == recorded and rep.hits == 5
    assert len(llm_server.requests) == n_requests


def test_cassette_replay_miss(tmp_path, llm_server):
    path = tmp_path / "c.jsonl"
    llm_server.reply("a")
    Cassette(OpenAICompatible(llm_server.url, model="m", timeout=FAST), path).complete(msgs_n(0))
    rep = Cassette(OpenAICompatible(llm_server.url, model="m", timeout=FAST), path, mode="replay")
    with pytest.raises(CassetteMiss) as info:
        rep.complete(msgs_n(1))
    err = info.value
    assert isinstance(err, FactmemError) and not isinstance(err, ProviderError)
    assert err.key == cassette_key("m", msgs_n(1), 0.0) and err.key in str(err) and str(path) in str(err)
    with pytest.raises(CassetteMiss):
        rep.complete(msgs_n(0), temperature=0.5)  # another temperature is another request
    assert rep.misses == 2 and len(llm_server.requests) == 1
    with pytest.raises(CassetteError, match="does not exist"):
        Cassette(None, tmp_path / "absent.jsonl", mode="replay")
    with pytest.raises(ValueError, match="mode"):
        Cassette(None, path, mode="play")
    with pytest.raises(ValueError, match="needs a provider"):
        Cassette(None, path, mode="record")


def test_cassette_auto_and_record_modes(tmp_path, llm_server):
    path = tmp_path / "c.jsonl"
    llm_server.reply("first", "second", "third")
    p = Ollama(llm_server.url, model="m", timeout=FAST)
    auto = Cassette(p, path, mode="auto")
    assert auto.complete(msgs_n(0)) == "first"
    assert auto.complete(msgs_n(0)) == "first"  # replayed
    assert len(llm_server.requests) == 1 and auto.hits == 1 and auto.recorded == 1
    rec = Cassette(p, path, mode="record")
    assert rec.complete(msgs_n(0)) == "second"  # record always calls through
    assert len(llm_server.requests) == 2 and len(path.read_text().splitlines()) == 2
    assert Cassette(None, path, mode="replay", model="m").complete(msgs_n(0)) == "second"  # last line wins
    assert Cassette(p, path, mode="auto").complete(msgs_n(0), model="m2") == "third"  # other model: recorded


def test_cassette_does_not_record_connection_errors(tmp_path):
    server = LLMServer().start()
    url = server.url
    server.stop()
    path = tmp_path / "c.jsonl"
    cas = Cassette(OpenAICompatible(url, model="m", timeout=FAST), path, mode="auto")
    with pytest.raises(ProviderError) as info:
        cas.complete(msgs_n(0))
    assert info.value.kind == "connection" and not path.exists() and len(cas) == 0
    with pytest.raises(ValueError, match="record_errors"):
        Cassette(None, path, mode="replay", record_errors=["boom"])


def record_oracle(path, n: int, mode: str = "record") -> Cassette:
    cas = Cassette(OracleProvider(small_gens(), error_rates={"fence": 0.5}), path, mode=mode)
    for i in range(n):
        cas.complete(prompt("alice", facts_of("alice", ALICE_ALL, start=i)))
    return cas


def test_cassette_bytes_deterministic(tmp_path):
    record_oracle(tmp_path / "a.jsonl", 6)
    record_oracle(tmp_path / "b.jsonl", 6)
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    lines = (tmp_path / "a.jsonl").read_text(encoding="utf-8").splitlines()
    assert all(json.loads(line)["model"] == "oracle" for line in lines)


def test_cassette_torn_last_line(tmp_path):
    path = tmp_path / "c.jsonl"
    record_oracle(path, 3)
    good = path.read_bytes()
    with open(path, "ab") as f:
        f.write(b'{"key": "abc", "response": "half a li')
    torn = path.read_bytes()
    with pytest.warns(RuntimeWarning, match=r"line 4: ignoring torn last line"):
        rep = Cassette(None, path, mode="replay", model="oracle")
    assert len(rep) == 3
    assert rep.complete(prompt("alice", facts_of("alice", ALICE_ALL, start=1))) == \
        OracleProvider(small_gens(), error_rates={"fence": 0.5}).complete(prompt("alice", facts_of("alice", ALICE_ALL, start=1)))
    assert path.read_bytes() == torn  # replay never writes
    with pytest.warns(RuntimeWarning):
        record_oracle(path, 4, mode="auto")  # replays 3, records 1, cutting the torn tail first
    data = path.read_bytes()
    assert data.startswith(good) and data.endswith(b"\n") and len(data.splitlines()) == 4
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(Cassette(None, path, mode="replay", model="oracle")) == 4


def test_cassette_last_line_without_newline_is_kept(tmp_path):
    path = tmp_path / "c.jsonl"
    record_oracle(path, 2)
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cas = record_oracle(path, 3, mode="auto")
    assert cas.hits == 2 and cas.recorded == 1
    assert [len(json.loads(line)["key"]) for line in path.read_text().splitlines()] == [64, 64, 64]


@pytest.mark.parametrize(
    "bad,needle",
    [
        (b"not json", "line 2: not valid JSON"),
        (b'{"response": "x"}', "line 2: field 'key'"),
        (b'{"key": "k"}', "line 2: exactly one of"),
        (b'{"key": "k", "error": {"kind": "boom", "message": "m"}}', "line 2: field 'error.kind'"),
        (b"1, 2", "line 2"),
    ],
)
def test_cassette_corrupt_middle_line(tmp_path, bad, needle):
    path = tmp_path / "c.jsonl"
    record_oracle(path, 2)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(lines[0] + bad + b"\n" + lines[1])
    with pytest.raises(CassetteError) as info:
        Cassette(None, path, mode="replay", model="oracle")
    assert needle in str(info.value) and str(path) in str(info.value)


def test_cassette_concurrent_appends(tmp_path):
    path = tmp_path / "c.jsonl"
    cas = Cassette(OracleProvider(small_gens()), path, mode="auto")

    def work(t: int) -> None:
        for i in range(25):
            cas.complete(prompt("alice", facts_of("alice", ALICE_ALL, start=1000 * t + i)))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    lines = path.read_text().splitlines()
    assert len(lines) == 150 and len({json.loads(line)["key"] for line in lines}) == 150
    assert len(Cassette(None, path, mode="replay", model="oracle")) == 150


# --------------------------------------------------------------------------------------------------
# the factory
# --------------------------------------------------------------------------------------------------


def test_make_provider(tmp_path, llm_server):
    p = make_provider("openai", llm_server.url, "m", timeout=FAST)
    assert isinstance(p, OpenAICompatible) and p.model == "m" and p.timeout == FAST
    o = make_provider("ollama", model="llama3")
    assert isinstance(o, Ollama) and o.url == "http://localhost:11434/api/chat"
    with pytest.raises(ValueError, match="kind"):
        make_provider("anthropic")
    with pytest.raises(ValueError, match="base_url"):
        make_provider("openai", model="m")
    with pytest.raises(ValueError, match="generalizations"):
        make_provider("oracle")
    oracle = make_provider("oracle", generalizations=small_gens(), error_rates={"fence": 1.0}, seed=5)
    assert isinstance(oracle, OracleProvider) and oracle.error_rates["fence"] == 1.0
    # a cassette wraps the provider (auto by default); replay needs no server and no base_url
    llm_server.reply("recorded")
    cas = make_provider("openai", llm_server.url, "m", cassette=tmp_path / "c.jsonl", timeout=FAST)
    assert isinstance(cas, Cassette) and cas.mode == "auto" and cas.complete(MSGS) == "recorded"
    rep = make_provider("openai", model="m", cassette=tmp_path / "c.jsonl", cassette_mode="replay")
    assert rep.provider is None and rep.complete(MSGS) == "recorded"
    assert len(llm_server.requests) == 1

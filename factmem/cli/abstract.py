"""CLI command ``abstract``: one abstraction pass over a store (:func:`factmem.abstraction.passes.abstract`)."""

from __future__ import annotations

import argparse
import sys

from factmem.cli.output import Output, output_args
from factmem.errors import InputError

__all__ = ["add_abstract"]


def add_abstract(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "abstract",
        help="run one abstraction pass over a store with an LLM provider",
        description="Group the store's active observed facts by subject; ask the provider once per new, changed or "
        "stale cluster of at least --min-cluster facts for at most --max-facts generalizations; remember them as "
        "derived facts linked to the cluster; then archive the children of derived facts reinforced at least "
        "prune_min_reinforcements times. Prints the pass's counters. A provider that fails skips its clusters: "
        "nothing is lost, and they are asked again on the next pass.",
    )
    p.add_argument("db", metavar="DB", help="store file (DuckDB), e.g. memory.duckdb; must exist")
    p.add_argument("--provider", required=True, choices=("openai", "ollama", "oracle"),
                   help="openai: any OpenAI-compatible server (llama.cpp, vLLM, LM Studio); ollama; oracle: a "
                   "dataset's ground truth with a seeded error model")
    p.add_argument("--base-url", metavar="URL", help="server URL, e.g. http://127.0.0.1:8080 (ollama default: "
                   "http://localhost:11434)")
    p.add_argument("--model", metavar="NAME", help="model name (required for openai and ollama)")
    p.add_argument("--api-key-env", metavar="VAR", help="environment variable holding a bearer key (openai)")
    p.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS", help="per-call timeout (default 30)")
    p.add_argument("--cassette", metavar="FILE", help="record/replay answers in this JSONL file")
    p.add_argument("--cassette-mode", choices=("record", "replay", "auto"), default="auto",
                   help="record: always call and append; replay: answer only from the file (offline); auto "
                   "(default): replay what is there, record the rest")
    p.add_argument("--dataset", metavar="DIR", help="dataset folder the oracle answers from (generalizations.csv)")
    p.add_argument("--oracle-seed", type=int, default=0, metavar="N", help="seed of the oracle's error model")
    p.add_argument("--oracle-errors", metavar="KIND=P,...", default=None,
                   help="oracle error rates, e.g. prose=0.1,fence=0.2,timeout=0.05")
    p.add_argument("--at", metavar="TIME", help="time of the pass: Unix seconds or ISO-8601 (default: now)")
    p.add_argument("--min-cluster", type=int, default=None, metavar="N", help="default: the store's parameters")
    p.add_argument("--max-facts", type=int, default=None, metavar="N", help="default: the store's parameters")
    p.add_argument("--temperature", type=float, default=None, help="default: the store's parameters (0)")
    p.add_argument("--link-scope", choices=("cluster", "support"), default=None,
                   help="link derived facts to the whole cluster or to the facts the model cites as support "
                        "(default: the store's parameters)")
    p.add_argument("--pass-id", default=None, metavar="ID", help="names the pass in evidence (default: the time)")
    p.add_argument("--no-prune", action="store_true", help="do not archive the children of validated derived facts")
    output_args(p)
    p.set_defaults(func=_run_abstract)


def _run_abstract(args: argparse.Namespace) -> int:
    from pathlib import Path

    from factmem.abstraction.oracle import parse_error_rates
    from factmem.abstraction.passes import PROMPT_VERSION, abstract
    from factmem.abstraction.providers import make_provider
    from factmem.core.timeutil import parse_time
    from factmem.store.factstore import FactStore

    db = Path(args.db)
    if not db.is_file():
        raise InputError(f"{db}: no such store file")
    if args.provider in ("openai", "ollama") and not args.model:
        raise InputError(f"--model NAME is required with --provider {args.provider}")
    if args.provider == "oracle":
        if not args.dataset:
            raise InputError("--provider oracle needs --dataset DIR (a folder with generalizations.csv)")
        if not Path(args.dataset).exists():
            raise InputError(f"--dataset {args.dataset}: no such folder or file")
    at = None if args.at is None else parse_time(args.at)
    provider = make_provider(
        args.provider, base_url=args.base_url, model=args.model, cassette=args.cassette,
        cassette_mode=args.cassette_mode, prompt_version=PROMPT_VERSION, timeout=args.timeout,
        api_key_env=args.api_key_env, dataset=args.dataset, seed=args.oracle_seed,
        error_rates=parse_error_rates(args.oracle_errors),
    )
    try:
        with FactStore(db) as store:
            result = abstract(store, provider, model=args.model, at=at, min_cluster=args.min_cluster,
                              max_facts=args.max_facts, prune=not args.no_prune, temperature=args.temperature,
                              pass_id=args.pass_id, quiet=args.quiet or args.json, link_scope=args.link_scope)
    finally:
        for obj in (provider, getattr(provider, "provider", None)):
            close = getattr(obj, "close", None)
            if callable(close):
                close()
    say = Output(args)
    if args.json:
        return say.result(result, [db])
    trouble = [o for o in result.outcomes if o.outcome in ("skipped", "failed")]
    for o in trouble[:10]:
        print(f"{o.outcome} {o.subject}: {o.error}", file=sys.stderr)
    if len(trouble) > 10:
        print(f"... and {len(trouble) - 10} more skipped or failed clusters", file=sys.stderr)
    say.say(f"{db}: abstraction pass {result.pass_id} (model {result.model})")
    for name, value in result.counters().items():
        say.say(f"  {name:14s} {value}")
    return say.result(result, [db])

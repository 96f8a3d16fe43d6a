"""The abstraction pass and the LLM providers it calls.

``passes`` (clusters, prompt, strict parsing, derived facts, links, pruning), ``providers``
(OpenAI-compatible and Ollama over httpx), ``oracle`` (ground-truth answers with a seeded error
model), ``cassette`` (record/replay of answers).
"""

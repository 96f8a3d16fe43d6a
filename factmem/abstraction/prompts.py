"""The version of the abstraction prompt and its answer contract, shared by the pass, the oracle and
the cassette (it is part of every cassette key), so that none of them imports another for it."""

from __future__ import annotations

__all__ = ["PROMPT_VERSION"]

#: Version of the abstraction prompt and of its answer contract; part of every cassette key. Bump it
#: when a prompt's text, the payload or the parsing rules change, so that recorded answers are not
#: replayed against a different question. Version 2: the support prompt and its ``support`` indices.
PROMPT_VERSION = "2"

"""Export a params file in a production format: versioned TOML or JSON, or a Rust module.

The output is a pure function of the input document (provenance is carried over unchanged), written
atomically: on any error nothing is written.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from factmem.core.params import MemoryParams
from factmem.errors import InputError
from factmem.export.atomic import write_text
from factmem.export.document import ParamsDocument, as_document, doc_text
from factmem.export.rust import render_rust

__all__ = ["export_params", "FORMATS"]

#: output formats and the file suffix that implies each
FORMATS: dict[str, str] = {".toml": "toml", ".json": "json", ".rs": "rust"}


def export_params(source: str | os.PathLike | ParamsDocument | MemoryParams, out: str | os.PathLike,
                  fmt: str | None = None, **rust_options: Any) -> Path:
    """Export a params file (or document) as ``toml``, ``json`` or ``rust`` (default: by ``out``'s
    suffix: .toml, .json, .rs). Provenance is carried over unchanged, so the output is a pure
    function of the input. ``rust_options`` go to :func:`factmem.export.rust.render_rust`."""
    doc = as_document(source)
    out = Path(out)
    if fmt is None:
        fmt = FORMATS.get(out.suffix.lower())
        if fmt is None:
            raise InputError(f"{out}: cannot tell the format from the suffix; pass --format toml, json or rust")
    if fmt == "rust":
        return write_text(out, render_rust(doc, **rust_options))
    if rust_options:
        raise InputError(f"options {', '.join(rust_options)} apply only to --format rust")
    return write_text(out, doc_text(doc, fmt))

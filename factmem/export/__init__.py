"""Shipping chosen parameters and memories to production.

``document`` (versioned TOML/JSON params documents with provenance, strict validation), ``files``
(export in a format: TOML, JSON, Rust), ``rust`` (a Rust module shaped like the seed's crate),
``diff`` (what a promotion changes), ``sqlite`` (memories in the seed's SQLite schema, out and in),
``atomic`` (all-or-nothing file writes).
"""

from factmem.export.atomic import atomic_write
from factmem.export.diff import diff_metrics, diff_params, render_diff
from factmem.export.document import (
                                     PARAMS_SCHEMA,
                                     PROVENANCE_KEYS,
                                     ParamsDocument,
                                     as_document,
                                     load_params_file,
                                     params_fingerprint,
                                     read_params_document,
                                     write_params_file,
)
from factmem.export.files import export_params

__all__ = [
    "PARAMS_SCHEMA", "PROVENANCE_KEYS", "ParamsDocument", "as_document", "load_params_file", "params_fingerprint",
    "read_params_document", "write_params_file", "export_params", "diff_params", "diff_metrics", "render_diff",
    "atomic_write",
]

"""Was the production file built with the parameters and schedule a replay assumes?

A file written by ``factmem export-db`` records in ``factmem_meta`` the parameters' JSON (``params``),
their fingerprint (``params_fingerprint``: sha256 of the canonical JSON, the Rust module's
``PARAMS_FINGERPRINT``) and the consolidation period (``consolidate_every_seconds``). A production
client that continues the file under other parameters or another schedule updates the two keys
(docs/design.md, "Writing a production client"). :func:`provenance_notes` compares them with the
parameters and period a replay uses (``whatif``; the production ``tune``) and says, in words, where
they differ — the reproduction check then fails for a reason the report can name, instead of counting
the facts as "unexplained". Nothing here is an error: a file without the keys (a crate that writes
only the seed's tables) gets no note.

>>> from factmem.core.params import MemoryParams
>>> provenance_notes({"consolidate_every_seconds": "3600"}, MemoryParams(), 86400)[0][:60]
'The file was built with a consolidation every 1 h (factmem_m'
"""

from __future__ import annotations

from factmem.core.params import MemoryParams
from factmem.export.document import params_fingerprint
from factmem.export.sqlite_format import META_FINGERPRINT, META_PERIOD

__all__ = ["provenance_notes", "recorded_period", "resolve_period", "DEFAULT_PERIOD"]

#: the replay's consolidation period when the file records none: daily, at midnight UTC (seconds)
DEFAULT_PERIOD = 86400


def _hours(seconds: int) -> str:
    return f"{seconds / 3600:g} h"


def recorded_period(meta: dict[str, str]) -> int | None:
    """The consolidation period (seconds) the file records in ``factmem_meta``, when it is a positive
    whole number; else None (then a replay consolidates daily, and :func:`provenance_notes` names a
    value it cannot read)."""
    raw = meta.get(META_PERIOD)
    try:
        value = int(raw) if raw is not None else None
    except ValueError:
        return None
    return value if value is not None and value > 0 else None


def resolve_period(meta: dict[str, str], hours: float | None) -> tuple[int, str | None]:
    """The replay's period in seconds: ``hours`` when given, else the one the file records, else
    :data:`DEFAULT_PERIOD`; and a note when the file's own period, other than daily, was taken."""
    if hours is not None:
        return int(round(hours * 3600)), None
    theirs = recorded_period(meta)
    if theirs is None or theirs == DEFAULT_PERIOD:
        return DEFAULT_PERIOD, None
    return theirs, (f"The replay consolidates every {_hours(theirs)}, the period the file records (factmem_meta "
                    f"{META_PERIOD} = {theirs}); pass --consolidate-every HOURS to replay another schedule.")


def provenance_notes(meta: dict[str, str], params: MemoryParams, period: int, *,
                     params_label: str = "the current parameters") -> list[str]:
    """Notes on where the file's recorded fingerprint or period differ from ``params`` and ``period``
    (seconds); empty when they agree or the file records neither."""
    notes = []
    recorded = meta.get(META_FINGERPRINT)
    ours = params_fingerprint(params)
    if recorded is not None and recorded != ours:
        stored = meta.get("params")
        stored_fp = None
        if stored is not None:
            try:
                stored_fp = params_fingerprint(MemoryParams.from_json(stored))
            except ValueError:
                stored_fp = None
        detail = ""
        if stored_fp is not None and stored_fp != recorded:
            detail = (" — and not those of its own factmem_meta 'params' (fingerprint "
                      f"{stored_fp[:12]}…): a client changed the parameters without rewriting them")
        notes.append(f"The file was built with other parameters: factmem_meta records params_fingerprint "
                     f"{recorded[:12]}…, {params_label} have {ours[:12]}…{detail}. Facts the replay does not "
                     "reproduce may differ for that reason alone.")
    raw = meta.get(META_PERIOD)
    if raw is not None:
        theirs = recorded_period(meta)
        if theirs is None:
            notes.append(f"factmem_meta's {META_PERIOD} = {raw!r} is not a whole number of seconds above 0; "
                         "ignored.")
        else:
            if theirs != period:
                notes.append(f"The file was built with a consolidation every {_hours(theirs)} (factmem_meta "
                             f"{META_PERIOD} = {theirs}); this replay consolidates every {_hours(period)} — pass "
                             f"--consolidate-every {theirs / 3600:g} to replay the file's schedule.")
    return notes

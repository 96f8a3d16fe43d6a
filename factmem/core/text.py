"""Text every layer stores: valid Unicode only.

Python strings can hold lone surrogates (JSON's ``\\ud800`` escapes decode to them, and so do some
file names), which no UTF-8 store — DuckDB, SQLite, Parquet — can hold. Each writer checks with
:func:`is_unicode` and names the offending value instead of failing deep inside a driver.

>>> is_unicode("naïve"), is_unicode("\\ud800")
(True, False)
"""

from __future__ import annotations

__all__ = ["is_unicode"]


def is_unicode(text: str) -> bool:
    """Whether ``text`` is valid Unicode (encodes to UTF-8: no lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True

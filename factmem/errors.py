"""Exceptions of factmem: one hierarchy under :class:`FactmemError`.

Every error a user can cause — bad data, a bad argument, a file that cannot be used, a provider that
fails — derives from :class:`FactmemError`, carries a message naming what is wrong, and survives
pickling (process pools, Dask). The command line catches :class:`FactmemError` only (exit status 2,
one line; 1 for :class:`StoreWriteError`, a write the file system refused); anything else is a bug
and shows its traceback. Errors about bad input are also
``ValueError`` (and a missing fact a ``KeyError``) for callers that expect the built-in classes.
"""

from __future__ import annotations

__all__ = ["FactmemError", "InputError", "ParamsError", "ScenarioError", "StoreError", "StoreLockedError",
    "SchemaVersionError", "StoreWriteError", "FactNotFoundError", "ProviderError", "CassetteError", "CassetteMiss",
    "ParamsFileError", "ProductionDBError", "ExportError", "ResponseRejected"]


class FactmemError(Exception):
    """Base class of factmem's errors."""


class InputError(FactmemError, ValueError):
    """Bad input — data (a batch, a file) or an argument: the message names what is wrong (file, line,
    field, value); nothing was changed. A ``ValueError`` too, for callers that expect one."""


class ParamsError(InputError):
    """A memory parameter is out of its domain or unknown: the message names the field and the value."""


class ScenarioError(InputError):
    """A generator scenario is invalid: the message names the key (``predicates.lives_in.lifetime_days``)
    and the value."""


class StoreError(FactmemError):
    """The fact store cannot be opened or used as asked."""


class StoreLockedError(StoreError):
    """Another process holds the store file open for writing."""


class StoreWriteError(StoreError):
    """The file system refused a write (a full disk, a quota, an I/O error): the message names the file
    and gives the system's words (``No space left on device``). No call that returned is lost — it is
    in the journal, or the call failed before returning. The command line exits 1 on it (not 2: the
    input was fine)."""

    exit_status = 1


class SchemaVersionError(StoreError):
    """The store file was written by a newer (or unknown) schema version."""


class FactNotFoundError(FactmemError, KeyError):
    """No fact with the given id."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else "fact not found"


class ProviderError(FactmemError):
    """An LLM provider call failed in transport or protocol; the message says what happened.

    ``kind`` is one of ``"connection"`` (nothing listening, connection reset), ``"timeout"`` (no
    answer within the client timeout), ``"http"`` (a non-2xx status; ``status`` holds it) or
    ``"envelope"`` (a 2xx answer whose body is not the API's response shape). The abstraction pass
    counts a cluster whose call raised this as *skipped*.
    """

    KINDS = ("connection", "timeout", "http", "envelope")

    def __init__(self, kind: str, message: str, *, url: str | None = None, status: int | None = None):
        if kind not in self.KINDS:
            raise ValueError(f"ProviderError kind must be one of {self.KINDS}, got {kind!r}")
        super().__init__(message)
        self.kind = kind
        self.url = url
        self.status = status

    def __reduce__(self):  # keep kind/url/status across pickling (process pools)
        return (_rebuild_provider_error, (type(self), self.kind, str(self), self.url, self.status))


def _rebuild_provider_error(cls, kind, message, url, status):
    return cls(kind, message, url=url, status=status)


class CassetteError(FactmemError):
    """A record/replay cassette file cannot be used (missing in replay mode, corrupt line)."""


class CassetteMiss(CassetteError):
    """Replay mode found no recorded response for a request. Deliberately *not* a ProviderError:
    a replayed experiment that asks something new is not reproducible and must stop, not skip."""

    def __init__(self, message: str, *, key: str | None = None, path: str | None = None):
        super().__init__(message)
        self.key = key
        self.path = path

    def __reduce__(self):
        return (_rebuild_cassette_miss, (type(self), str(self), self.key, self.path))


def _rebuild_cassette_miss(cls, message, key, path):
    return cls(message, key=key, path=path)


class ParamsFileError(ParamsError):
    """A parameters document (TOML/JSON) is malformed: the message names the file, the key and the value."""


class ProductionDBError(InputError):
    """A production memory file (SQLite) does not have the seed's schema, or holds values factmem
    cannot keep: the message names the file, the table, the column and the offending value."""


class ExportError(FactmemError):
    """An export or import could not write its output (the message names the file); nothing was written."""


class ResponseRejected(FactmemError, ValueError):
    """An abstraction answer broke the response contract (prose, invalid JSON, wrong shape, too many
    items, an item about another subject, ...). The abstraction pass counts the cluster as *failed*
    and writes nothing for it; the message says what was wrong and where."""

"""The fact store on DuckDB: the seed's schema, every read and write of facts.

``factstore`` (:class:`FactStore`: open, ``remember``, ``consolidate``, links), ``writes`` (set-based
``ingest`` and ``replay``), ``reads`` (queries returning DataFrames), ``batch`` (input validation),
``schema`` (DDL and the effective-confidence SQL).
"""

from factmem.store.factstore import ConsolidateResult, Evidence, FactStore
from factmem.store.reads import Fact
from factmem.store.writes import IngestResult, ReplayResult

__all__ = ["FactStore", "Evidence", "Fact", "ConsolidateResult", "IngestResult", "ReplayResult"]

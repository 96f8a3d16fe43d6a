import os

import matplotlib
import pytest
from hypothesis import HealthCheck, settings

from tests.llm_server import llm_server  # noqa: F401 - the 127.0.0.1 LLM server fixture, for every module

matplotlib.use("Agg")

settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", deadline=None, max_examples=2000,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(params=["memory", "file"])
def store_factory(request, tmp_path):
    """Make FactStores on one backend: in-memory DuckDB, or a DuckDB file under tmp_path."""
    from factmem.store.factstore import FactStore

    made = []

    def make(params=None, name="memory.duckdb"):
        path = None if request.param == "memory" else tmp_path / name
        s = FactStore(path, params=params)
        made.append(s)
        return s

    make.backend = request.param
    make.tmp_path = tmp_path
    yield make
    for s in made:
        s.close()


@pytest.fixture
def store(store_factory):
    return store_factory()

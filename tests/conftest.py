import os

import matplotlib
import pytest
from hypothesis import HealthCheck, Phase, settings

from tests.llm_server import llm_server  # noqa: F401 - the 127.0.0.1 LLM server fixture, for every module

matplotlib.use("Agg")

# Hypothesis profiles. Every property test states its own max_examples (its budget in the suite's
# time); the profiles decide where the examples come from:
# * "ci" (the default, also under the name "default"): derandomized — each test draws its examples
#   from a seed derived from its own source, no example database is read or written, so a rerun
#   gives the same tests the same examples (CI runs the README's command verbatim, with no profile
#   set). Examples that matter beyond these are pinned in the tests with @example.
# * "random": fresh random examples on every run, failures kept in .hypothesis/ and replayed first.
# * "thorough": "random" with ten times each test's examples — HYPOTHESIS_PROFILE=thorough pytest.
# * "mutation": "ci" without shrinking — tests/mutation/run.py needs a failure, not the smallest one.
PROFILE = os.environ.get("HYPOTHESIS_PROFILE") or "ci"
_common = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])
# (the random ones first: a profile inherits unset values from the default profile at registration)
settings.register_profile("random", derandomize=False, **_common)
settings.register_profile("thorough", derandomize=False, **_common)
for _name in ("ci", "default"):
    settings.register_profile(_name, derandomize=True, database=None, print_blob=True, **_common)
settings.register_profile("mutation", derandomize=True, database=None,
                          phases=[Phase.explicit, Phase.reuse, Phase.generate], **_common)
EXAMPLES_SCALE = {"thorough": 10}.get(PROFILE, 1)
settings.load_profile(PROFILE)


def pytest_collection_modifyitems(config, items):
    """Under a scaled profile, multiply each property test's own max_examples (a profile's
    max_examples would not reach them: a test's @settings wins over its profile)."""
    if EXAMPLES_SCALE == 1:
        return
    for item in items:
        fn = getattr(item, "obj", None)
        if not getattr(fn, "is_hypothesis_test", False) or getattr(fn, "_factmem_scaled", False):
            continue
        current = fn._hypothesis_internal_use_settings
        fn._hypothesis_internal_use_settings = settings(current, max_examples=current.max_examples * EXAMPLES_SCALE)
        fn._factmem_scaled = True


def write_tiny(tmp_path_factory, seed: int):
    """The `tiny` preset generated with ``seed`` and written to a fresh folder (for module fixtures)."""
    from factmem.data.generate import generate, write

    folder = tmp_path_factory.mktemp("tiny")
    write(generate("tiny", seed=seed), folder)
    return folder


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

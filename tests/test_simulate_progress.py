"""``simulate(progress=True)``: a progress bar over the mentions replayed (for notebooks' long cells),
which changes nothing in the result and is off by default."""

from __future__ import annotations

import re

from factmem.abstraction.oracle import OracleProvider
from factmem.core.params import MemoryParams
from factmem.data.generate import generate
from factmem.evaluation.simulate import Schedule, prepare, simulate


def test_progress_bar_counts_every_mention_and_changes_nothing(capsys):
    ds = generate("tiny", seed=5)
    prepared = prepare(ds)
    params = MemoryParams(multi_valued_predicates=ds.multi_valued_predicates)
    schedule = Schedule(abstract_every_days=7)

    def run(progress):
        return simulate(prepared, params, schedule, provider=OracleProvider(ds.generalizations, seed=5),
                        progress=progress)

    quiet = run(False)
    assert capsys.readouterr().err == ""                     # off by default and when False
    loud = run(True)
    err = capsys.readouterr().err
    total = len(prepared.events)
    # the bar's last state: every mention replayed, and the passes run as its postfix
    assert re.search(rf"simulate: 100%.*\b{total}/{total}\b", err), err[-300:]
    assert f"passes={len(loud.passes)}" in err
    assert loud.summary == quiet.summary
    assert loud.passes.equals(quiet.passes)
    quiet.store.close()
    loud.store.close()

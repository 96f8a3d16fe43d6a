"""Set-based replay engines over numpy arrays, with no database.

``kernel`` computes what a batch of ``remember`` calls does (``FactStore.ingest``); ``waves``
replays a log with consolidations, vectorized over events and over parameter sets
(``FactStore.replay`` and sweeps). Both apply :mod:`factmem.core.decay`, so their numbers are
bit-for-bit those of the row-by-row path.
"""

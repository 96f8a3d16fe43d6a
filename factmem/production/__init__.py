"""What-if on a production memory: what new parameters would have done to the people already in it.

``rebuild`` (the mention log rebuilt from a production file's evidence), ``replay`` (set-based replays
of that log and the check that the current parameters reproduce the file), ``compare`` (current
against new: per fact, per subject, over time, in the context an agent would assemble), ``whatif``
(the entry point :func:`~factmem.production.whatif.whatif` and :class:`~factmem.production.whatif.WhatIfResult`),
``report`` (``report.md``, figures, tables, manifest).
"""

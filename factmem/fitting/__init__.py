"""Estimating memory parameters from data by maximum likelihood, with intervals.

``fit`` (the entry point: :func:`~factmem.fitting.fit.fit` and :class:`FitResult`), ``populations``
(the samples each estimate is built on: lifetimes, silent stretches, checkpoint observations),
``models`` (the likelihoods and their optimisers), ``estimates`` (each family of estimates, per kind
and per predicate), ``report`` (the output folder: ``estimates.csv``, ``params.toml``, figures,
``report.md``).
"""

"""Choosing parameters: sweeps, ``factmem tune`` and its report, and run folders.

``sweep`` (many parameter sets scored on tuning and held-out parts), ``tune`` (the main job: choose,
judge, promote), ``report`` (the report a tune writes), ``runs`` (manifests and result tables).
"""

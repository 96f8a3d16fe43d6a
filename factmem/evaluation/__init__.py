"""Replaying logs through the memory and scoring what it believed against ground truth.

``simulate`` (a FactStore replay on a schedule, and the vectorized kernel's belief states),
``metrics`` (precision, recall, stale, lost, calibration), ``cardinality`` (which predicates hold
several values at once, and what each choice costs), ``links`` (abstraction links against the
planted generalizations: which pruned children were unrelated).
"""

"""The ground floor: the numbers of a memory and the math over them.

``params`` (:class:`MemoryParams`, validated and serializable), ``decay`` (vectorized decay and
reinforcement), ``timeutil`` (Unix seconds, ages in days), ``codes`` (the vocabularies every layer
shares: kinds, statuses, reasons, time units, option literals). Imports nothing else of factmem but
:mod:`factmem.errors`.
"""

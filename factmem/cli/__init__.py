"""The ``factmem`` command line: a thin wrapper over one library call per command."""

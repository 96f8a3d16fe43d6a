"""``python -m factmem``: the command line."""

from .cli import main

raise SystemExit(main())

"""``python -m factmem``: the command line."""

from factmem.cli.main import main

raise SystemExit(main())

"""``python -m factmem``: the command line."""

from factmem.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())

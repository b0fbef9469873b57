"""``python -m fluidlite``: the command line (see ``fluidlite.cli``)."""
from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())

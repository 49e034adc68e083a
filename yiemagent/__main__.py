"""``python -m yiemagent``: the ``yiemagent`` command (see ``yiemagent.cli``)."""

import sys

from yiemagent.cli._main import main

if __name__ == "__main__":
    sys.exit(main())

"""``python -m yiemagent.parity``: see ``yiemagent.parity.cli``."""

from yiemagent.parity.cli import main

raise SystemExit(main())

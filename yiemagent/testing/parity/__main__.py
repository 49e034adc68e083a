"""``python -m yiemagent.parity``: see ``yiemagent.parity.cli``."""

import os
import sys

from yiemagent.testing.parity._cli import main


def _run() -> int:
    """``main``, ending quietly when the reader of the output goes away (``| head``) or the user
    presses Ctrl-C, as a command-line tool should, instead of with a traceback."""
    try:
        status = main()
        sys.stdout.flush()
    except BrokenPipeError:
        # Python would report the failed flush of stdout again at exit: point it at nothing.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return status


raise SystemExit(_run())

"""``python -m yiemagent.parity``: the conformance suite's command under its short name. The
suite itself is ``yiemagent.testing.parity``; this package only forwards to it."""

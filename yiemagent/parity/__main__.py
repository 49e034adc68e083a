"""``python -m yiemagent.parity``: runs ``python -m yiemagent.testing.parity``."""

import runpy

runpy.run_module("yiemagent.testing.parity", run_name="__main__", alter_sys=True)

"""Names a package exports without importing their modules until they are first used.

``import yiemagent`` must stay cheap: a command that only prints its help, or code that only
builds messages, should not pay for ``requests``, ``jsonschema``, a provider or Ray. Each
package's ``__init__`` lists its public names by the private module that defines them; the
module is imported when a name is first read (module-level ``__getattr__``, PEP 562), and the
value is then kept in the package, so later reads cost nothing.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["Exports"]


class Exports:
    """The public names of package ``package``, by the module that defines them (relative to
    the package, or absolute when it starts with ``yiemagent.``). ``names`` is the package's
    ``__all__``, in sorted order, without the ``optional`` names (those of an optional extra)."""

    def __init__(
        self, package: str, modules: Mapping[str, Sequence[str]], optional: Sequence[str] = ()
    ) -> None:
        self.package = package
        self.where = {name: module for module, names in modules.items() for name in names}
        # Names that need an optional extra are importable but left out of ``__all__``, so
        # ``from package import *`` never imports the extra.
        self.names = sorted(set(self.where) - set(optional))

    def load(self, name: str) -> Any:
        """The value of ``name``, importing its module; ``AttributeError`` for a name the
        package does not export, as for any module."""
        module = self.where.get(name)
        if module is None:
            raise AttributeError(f"module {self.package!r} has no attribute {name!r}")
        path = module if module.startswith("yiemagent.") else f"{self.package}.{module}"
        value = getattr(importlib.import_module(path), name)
        setattr(sys.modules[self.package], name, value)  # later reads skip __getattr__
        return value

    def dir(self, namespace: Mapping[str, Any]) -> list[str]:
        """What ``dir(package)`` shows: its own globals and every exported name."""
        return sorted(set(namespace) | set(self.names))

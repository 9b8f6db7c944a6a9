"""Names a package imports on first use (PEP 562), so that importing it stays light (issue 21)."""

import importlib
import sys


def lazy_module(package, table, submodules=()):
    """``(__getattr__, __dir__)`` of ``package``, whose names are imported on first use.

    ``table`` maps a public name to the (relative) module that defines it;
    ``submodules`` are the package's modules a user reaches as attributes.
    A name once looked up is stored in the package, so later look-ups skip
    ``__getattr__``.
    """
    def __getattr__(name):
        if name in submodules:
            return importlib.import_module(f".{name}", package)
        if name in table:
            value = getattr(importlib.import_module(table[name], package), name)
            setattr(sys.modules[package], name, value)
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():
        namespace = vars(sys.modules[package])
        return sorted(set(namespace) | set(namespace.get("__all__", ())))

    return __getattr__, __dir__

"""``show_versions()``: what to paste into a bug report.

The versions are read from the installed distributions' metadata
(:func:`importlib.metadata.version`), so nothing is imported: asking for
torch's version does not load torch, and an optional dependency that is not
installed is reported as such.
"""

from __future__ import annotations

import platform
import sys
from importlib import metadata

# (distribution name on the index, why sklearn_fdp needs it)
_DEPENDENCIES: tuple[tuple[str, str], ...] = (
    ("numpy", "required"),
    ("scipy", "required"),
    ("scikit-learn", "required"),
    ("numba", "required"),
    ("dp-accounting", "required"),
    ("pandas", "required"),
    ("torch", "optional: [torch], MLPFeatureDP"),
    ("skops", "optional: [cli], model files"),
    ("tqdm", "optional: [cli], progress bars"),
    ("dask", "optional: [dask]"),
    ("distributed", "optional: [dask]"),
    ("matplotlib", "optional: [plot]"),
)


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _info() -> dict[str, dict[str, str | None]]:
    """The versions ``show_versions`` prints, as nested dicts."""
    from . import __version__

    system = {
        "sklearn_fdp": __version__,
        "python": sys.version.replace("\n", " "),
        "executable": sys.executable,
        "platform": platform.platform(),
    }
    return {"system": system, "dependencies": {name: _version(name) for name, _ in _DEPENDENCIES}}


def show_versions() -> None:
    """Print the versions of sklearn_fdp, Python, the platform and the dependencies.

    The dependencies' versions come from the installed packages' metadata:
    nothing is imported, and an optional dependency (torch, skops, tqdm,
    dask, matplotlib) that is not installed is shown as "not installed".
    Paste the output into bug reports.

    Returns
    -------
    None
        The report is printed to standard output.

    Examples
    --------
    >>> import sklearn_fdp
    >>> sklearn_fdp.show_versions()  # doctest: +ELLIPSIS
    <BLANKLINE>
    System:
      sklearn_fdp: ...
    """
    info = _info()
    width = max(len(name) for section in info.values() for name in section) + 1
    print("\nSystem:")
    for name, value in info["system"].items():
        print(f"  {name + ':':<{width}} {value}")
    print("\nDependencies:")
    notes = dict(_DEPENDENCIES)
    for name, value in info["dependencies"].items():
        shown = value if value is not None else "not installed"
        print(f"  {name + ':':<{width}} {shown}  ({notes[name]})")

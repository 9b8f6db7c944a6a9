"""A one-line notice when a fit is about to compile the numba kernels (issue 37).

The kernels are compiled on first use and cached on disk (``cache=True``,
beside the package or in numba's user cache when the package's folder is
read-only): once per machine and installation. That first compilation takes
a few seconds, which a first fit used to spend in silence. Before the first
fit of a process, :func:`announce_compilation` looks for the cache index of
a few kernels every linear fit uses; when one is missing it writes one line
to the process's standard error (``sys.__stderr__``: not to a redirected
``sys.stderr``, so the private search, which holds back what its trials
print, does not swallow it). Nothing is written once the cache exists, and
nothing when numba's cache layout cannot be read.
"""

import os
import sys

NOTICE = ("sklearn_fdp: compiling its numba kernels for this machine (once; cached on disk "
          "for later runs): this first fit takes a few seconds longer.")

_checked = False


def kernels_cached():
    """Whether the on-disk cache of the most used kernels exists (True when unknown)."""
    from . import clip_residuals, gather_rows, sgd_update

    try:
        return all(os.path.exists(kernel._cache._cache_file._index_path)
                   for kernel in (gather_rows, clip_residuals, sgd_update))
    except Exception:  # numba's private layout changed: say nothing
        return True


def announce_compilation():
    """Write :data:`NOTICE` once per process, before a fit that will compile the kernels."""
    global _checked
    if _checked:
        return
    _checked = True
    if kernels_cached():
        return
    stream = sys.__stderr__ if sys.__stderr__ is not None else sys.stderr
    if stream is not None:
        print(NOTICE, file=stream, flush=True)

"""Progress reporting for long fits, without live objects in estimator params.

A caller that wants progress (the ``sklearn-fdp`` command line draws a tqdm
bar) installs a hook for the duration of a block::

    with progress_hook(lambda done, total: ...):
        estimator.fit(X, y)

The training loops (:func:`sklearn_fdp._engine.run_dp_sgd`, its lazy sparse
path and :class:`~sklearn_fdp.MLPFeatureDP`) ask :func:`progress_reporter`
for a reporter once per run; it is ``None`` when no hook is installed (the
loops then pay one ``is None`` test per step), else a callable ``report(done)``
that calls the hook at most about :data:`MAX_REPORTS` times per run and
always on completion. The hook sees only step counts, never data or
iterates, and consumes no randomness: a fit is bit-identical with and
without it.

The hook lives in a :class:`contextvars.ContextVar`, so it is local to the
thread (and asyncio task) that installed it; fits running in worker threads
or processes do not report.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Callable

__all__ = ["MAX_REPORTS", "progress_hook", "progress_reporter"]

MAX_REPORTS = 100
"""Most hook calls per run (plus the final one)."""

_HOOK = contextvars.ContextVar("sklearn_fdp_progress_hook", default=None)


@contextlib.contextmanager
def progress_hook(
    fn: Callable[[int, int], None] | None,
) -> contextlib.AbstractContextManager:
    """Install ``fn(done, total)`` as the progress hook inside a ``with`` block.

    The hook is local to the thread (and asyncio task) that installs it:
    fits in worker threads or processes (``n_jobs`` of a search) do not
    report. It sees only step counts, never data or iterates, and consumes
    no randomness, so a fit is bit-identical with and without it.

    Parameters
    ----------
    fn : callable ``(done, total) -> None`` or None
        Called with the number of completed steps and the run's total, at
        most about ``MAX_REPORTS`` times per run. A fit may consist of
        several runs (e.g. public pretraining, then the private run): each
        starts again from ``done`` near 0 with its own ``total``. None
        disables reporting inside the block.

    Yields
    ------
    fn : callable or None
        The hook installed.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_fdp import DPSGDClassifier, progress_hook
    >>> X = np.random.default_rng(0).normal(size=(200, 3))
    >>> y = (X[:, 0] > 0).astype(int)
    >>> seen = []
    >>> with progress_hook(lambda done, total: seen.append((done, total))):
    ...     _ = DPSGDClassifier(epsilon=1.0, epochs=2, random_state=0).fit(X, y)
    >>> seen[-1][0] == seen[-1][1]
    True
    """
    token = _HOOK.set(fn)
    try:
        yield fn
    finally:
        _HOOK.reset(token)


class _Reporter:
    __slots__ = ("fn", "total", "every", "next")

    def __init__(self, fn, total):
        self.fn = fn
        self.total = total
        self.every = max(1, math.ceil(total / MAX_REPORTS))
        self.next = self.every

    def __call__(self, done):
        if done >= self.next or done >= self.total:
            self.next = (done // self.every + 1) * self.every
            self.fn(done, self.total)


def progress_reporter(total):
    """A throttled ``report(done)`` for a run of ``total`` steps, or None without a hook."""
    fn = _HOOK.get()
    if fn is None or total <= 0:
        return None
    return _Reporter(fn, int(total))

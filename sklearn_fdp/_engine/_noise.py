"""The Gaussian noise of the eager loop, optionally drawn one step ahead.

The noise of a DP-SGD step is data-independent, so the next step's draw can
run on a second core while the current step computes its gradient: numpy's
generators release the GIL while they fill an array. The sequence is the
one the loop would draw itself -- the same generator, in the same order,
with the same sizes and the same scaling -- so a fit gives bit-identical
results with and without the background thread.

By default the noise is drawn on the calling thread (one thread, as
scikit-learn's SGDClassifier and Opacus); the worker thread is used only
under ``sklearn_fdp.set_config(noise_prefetch=True)`` (or
``config_context``), when it is also worth its hand-off.

Measured on the 2-core reference machine (benchmarks/bench_speed.py):
60,100 normals (a 600 x 100 model) cost ~0.5 ms, about a quarter to a half
of the step's matrix products; hidden behind them when a core is free. Below
``BACKGROUND_MIN_SIZE`` entries the hand-off between threads costs more
than the draw.
"""

import os
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .._config import get_config
from .._secure import SecureGenerator

BACKGROUND_MIN_SIZE = 1 << 15
FIRST_BLOCK = 1 << 16  # size of a NormalStream's first block


def _prefetch_allowed():
    """Whether the settings ask for a worker thread and a second core exists."""
    return get_config()["noise_prefetch"] and (os.cpu_count() or 1) > 1


def _background_default(size):
    return size >= BACKGROUND_MIN_SIZE and _prefetch_allowed()


class _AheadDraws:
    """Calls ``self._draw()`` in order, each next call ahead on a worker thread.

    Subclasses call :meth:`_start` once and :meth:`_take` for every result;
    ``more`` tells whether another result will be wanted (nothing is drawn
    beyond the last, so the generator ends in the same state either way).
    """

    def _start(self, background, more=True, depth=1):
        """``depth``: how many results are drawn ahead (one worker, in order)."""
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="sklearn_fdp-noise") \
            if background and more else None
        self._next = deque()
        if self._pool is not None:
            self._next.extend(self._pool.submit(self._draw) for _ in range(depth))

    def _take(self, more=True):
        if self._pool is None:
            return self._draw()
        out = self._next.popleft().result()
        if more:
            self._next.append(self._pool.submit(self._draw))
        return out

    def close(self):
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class NoiseStream(_AheadDraws):
    """``n_draws`` arrays ``std * N(0, I) * mask`` of ``shape`` and ``dtype`` from ``rng``.

    Parameters
    ----------
    rng : numpy.random.Generator
        Used by nothing else while the stream is open.
    shape, dtype : the arrays' shape and dtype. Drawn in float64 and cast, so a
        float32 fit sees the same noise as a float64 fit with the same seed.
    std : float
    mask : ndarray or None
        Multiplies every draw (e.g. no noise on an absent intercept).
    n_draws : int
        How many arrays will be taken; nothing is drawn beyond them, so the
        generator ends in the same state either way.
    background : bool or None
        Draw one step ahead on a worker thread; ``None``: when the
        ``noise_prefetch`` setting asks for it, by size and core count.
    """

    def __init__(self, rng, shape, dtype, std, mask, n_draws, background=None):
        self.rng = rng
        self.shape = shape
        self.dtype = dtype
        self.std = std
        self.mask = mask
        self.remaining = int(n_draws)
        if background is None:
            background = _background_default(int(np.prod(shape)))
        self._start(background, more=self.remaining > 0)

    def _draw(self):
        noise = self.rng.standard_normal(self.shape).astype(self.dtype, copy=False)
        noise *= self.std
        if self.mask is not None:
            noise *= self.mask
        return noise

    def draw(self):
        """The next array."""
        if self.remaining <= 0:
            raise RuntimeError("NoiseStream exhausted: more draws than announced.")
        self.remaining -= 1
        return self._take(more=self.remaining > 0)


class NormalStream(_AheadDraws):
    """One sequence of standard normals from ``rng``, handed out in slices.

    For the lazy-noise engine, whose kernels consume a data-dependent number
    of normals: :meth:`view` returns at least ``need`` unused normals, the
    kernel reports how many it used, :meth:`advance` moves past them. Every
    normal is used at most once, in order. The sequence is drawn in blocks
    of ``block`` normals, the next block on a worker thread when
    ``background`` (the numbers do not depend on it; ``None``: the
    ``noise_prefetch`` setting). ``block=None``: 2**20,
    or 2**16 for a :class:`~sklearn_fdp._secure.SecureGenerator`, whose
    normals cost ~20 times more, so a small fit does not pay for a million
    it never uses (a block is drawn in pieces of 2**16 either way). The
    first block has at most ``FIRST_BLOCK`` normals, so a fit starts without
    waiting for a whole block.
    ``depth`` blocks are drawn ahead in the background (more keeps the
    worker busy through bursts, e.g. a flush of every coordinate, at
    ``depth x block`` floats of memory).
    """

    def __init__(self, rng, block=None, background=None, depth=1):
        self.rng = rng
        if block is None:
            block = 1 << 16 if isinstance(rng, SecureGenerator) else 1 << 20
        self.block = int(block)
        if background is None:
            background = _prefetch_allowed()
        self._blocks_drawn = 0
        self._start(background, depth=int(depth))
        self._buf = np.empty(0)
        self._pos = 0

    def _draw(self):
        # The first block is short, so the first step need not wait for a
        # whole block (the worker draws the rest meanwhile).
        size = self.block if self._blocks_drawn else min(self.block, FIRST_BLOCK)
        self._blocks_drawn += 1
        return self.rng.standard_normal(size)

    def view(self, need):
        """At least ``need`` unused normals (a view; do not keep it past :meth:`advance`)."""
        if self._buf.shape[0] - self._pos < need:
            parts = [self._buf[self._pos:]] if self._pos < self._buf.shape[0] else []
            have = parts[0].shape[0] if parts else 0
            while have < need:
                parts.append(self._take())
                have += parts[-1].shape[0]
            self._buf = np.concatenate(parts) if len(parts) > 1 else parts[0]
            self._pos = 0
        return self._buf[self._pos:]

    def available(self):
        """How many unused normals are already drawn (no wait, no copy)."""
        return self._buf.shape[0] - self._pos

    def fresh(self, need):
        """Like :meth:`view`, but a short remainder of the current block is skipped.

        When fewer than ``need`` normals are left and they are under a
        sixteenth of a block, they are dropped (never used: the sequence
        handed out is still i.i.d. N(0, 1), each normal used at most once)
        and the view starts on a new block, without copying it.
        """
        if self.available() < need and self.available() * 16 < self.block:
            self._buf = self._buf[:0]
            self._pos = 0
        return self.view(need)

    def advance(self, used):
        self._pos += int(used)

    def take(self, count):
        """The next ``count`` normals."""
        out = self.view(count)[:count]
        self.advance(count)
        return out

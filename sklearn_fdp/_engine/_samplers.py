"""Batch samplers of the DP optimisation engine.

The private batch is drawn by Poisson sampling: every record is included
independently with probability ``q``. This is the sampling scheme the
accountant's ``PoissonSampledDpEvent`` assumes; fixed-size shuffled batches
would need a different (and in dp-accounting, unsupported) analysis.

Public batches are drawn from their *own* random generator. FDP Algorithm 1
(Prop. 3 of the FDP paper) loses privacy amplification if the public batch
reuses the private batch's coins, so the engine never shares generators.
"""

import numpy as np

from .._secure import SecureGenerator
from ._floyd import ChoiceWithoutReplacement


class PoissonSampler:
    """Poisson subsampling of ``n`` records at rate ``q``.

    Drawing the batch size from Binomial(n, q) and then a uniform subset of
    that size gives exactly the distribution of independent Bernoulli(q)
    inclusions, in O(batch) instead of O(n) time per step.

    Parameters
    ----------
    n : int
        Number of records.
    rate : float
        Inclusion probability in (0, 1].
    rng : numpy.random.Generator or SecureGenerator
        Dedicated generator; nothing else may draw from it. A
        :class:`~sklearn_fdp._secure.SecureGenerator` draws every record's
        coin from the OS CSPRNG instead (one pass over ``n``).
    """

    def __init__(self, n, rate, rng):
        self.n = int(n)
        self.rate = float(rate)
        self.rng = rng
        self._choice = (None if isinstance(rng, SecureGenerator)
                        else ChoiceWithoutReplacement(rng))

    def sample(self):
        """Return the sorted indices of one Poisson batch (possibly empty)."""
        if self.rate >= 1.0:
            return np.arange(self.n)
        if self._choice is None:  # noise="secure": exact CSPRNG coins
            return self.rng.bernoulli_indices(self.n, self.rate)
        size = self.rng.binomial(self.n, self.rate)
        idx = self._choice(self.n, size)  # rng.choice(n, size, replace=False), compiled
        idx.sort()
        return idx


class UniformSampler:
    """Uniform batches of fixed size without replacement (public data only).

    ``size >= n`` returns every record (the full-batch public gradient,
    e.g. the excess-risk setting m' = n of the FDP paper). The batches are
    ``rng.choice(n, size, replace=False)``, sorted; drawn by the compiled
    :class:`~sklearn_fdp._engine._floyd.ChoiceWithoutReplacement` (the same
    picks, the generator left in the same state).
    """

    def __init__(self, n, size, rng):
        self.n = int(n)
        self.size = int(min(size, n))
        self.rng = rng
        self._choice = ChoiceWithoutReplacement(rng)

    def sample(self):
        """Return the sorted indices of one uniform batch."""
        if self.size >= self.n:
            return np.arange(self.n)
        idx = self._choice(self.n, self.size)
        idx.sort()
        return idx


class AheadSampler:
    """``sampler``'s batches, each drawn ``depth`` steps before it is used.

    Every batch is announced to ``announce(idx)`` when it is drawn, so an
    oracle that reads rows elsewhere (a cluster's workers) can start
    gathering it while earlier steps run. The sampler's generator is used by
    nothing else, so drawing ahead changes no draw: the batches, in order,
    are ``sampler``'s. No more than ``total`` batches are drawn.
    """

    def __init__(self, sampler, announce, depth, total):
        from collections import deque

        self.sampler = sampler
        self.announce = announce
        self.remaining = int(total)
        self._queue = deque()
        for _ in range(max(1, int(depth))):
            self._draw()

    def _draw(self):
        if self.remaining > 0:
            self.remaining -= 1
            idx = self.sampler.sample()
            self.announce(idx)
            self._queue.append(idx)

    def sample(self):
        """The next batch (the one announced earliest); the one after it is drawn now."""
        idx = self._queue.popleft()
        self._draw()
        return idx

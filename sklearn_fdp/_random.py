"""``random_state`` to independent NumPy generators.

A fit needs several random streams that must not share coins (the Poisson
batches, the noise, and anything public). They are spawned from one
:class:`numpy.random.SeedSequence` seeded through sklearn's
``check_random_state``, so the same ``random_state`` reproduces a fit exactly.
"""

import numpy as np
from sklearn.utils import check_random_state


def spawn_generators(random_state, n):
    """Return ``n`` independent :class:`numpy.random.Generator` objects.

    Parameters
    ----------
    random_state : None, int or numpy.random.RandomState
        As accepted by scikit-learn. ``None`` draws fresh OS entropy.
    n : int
        Number of streams.
    """
    if random_state is None:
        seed = np.random.SeedSequence()
    else:
        rs = check_random_state(random_state)
        seed = np.random.SeedSequence(int(rs.randint(np.iinfo(np.int32).max)))
    return [np.random.Generator(np.random.PCG64(s)) for s in seed.spawn(n)]

"""``random_state`` to independent NumPy generators.

A fit needs several random streams that must not share coins (the Poisson
batches, the noise, and anything public). They are spawned from one
:class:`numpy.random.SeedSequence` seeded through sklearn's
``check_random_state``, so the same ``random_state`` reproduces a fit exactly.

With ``noise="secure"`` the privacy-relevant streams (the Poisson batch
coins and every Gaussian noise draw) are :class:`~sklearn_fdp._secure.SecureGenerator`
objects instead: fresh bits from the OS CSPRNG on every call, a
floating-point-hardened Gaussian sampler, nothing that ``random_state``
decides. The public streams (public batches and their padding,
initialisation) stay seeded, and are the same PCG64 streams as with
``noise="default"``. A private stream spawned from a public one (e.g. the
padding of FDP's private batch) goes through :func:`secure_if`.
"""

import numpy as np
from sklearn.utils import check_random_state

from ._secure import SecureGenerator

# Values of the estimators' ``noise`` parameter.
NOISE_OPTIONS = ("default", "secure")


def spawn_generators(random_state, n, *, noise="default", private_streams=None):
    """Return ``n`` independent generators, one per random stream of a fit.

    Parameters
    ----------
    random_state : None, int or numpy.random.RandomState
        As accepted by scikit-learn. ``None`` draws fresh OS entropy.
    n : int
        Number of streams.
    noise : {"default", "secure"}, default="default"
        ``"default"``: every stream is a :class:`numpy.random.Generator`
        (PCG64) spawned from ``random_state``. ``"secure"``: the streams in
        ``private_streams`` are :class:`~sklearn_fdp._secure.SecureGenerator`
        objects (OS CSPRNG, not reproducible); the others are unchanged.
    private_streams : iterable of int or None, default=None
        Indices of the streams whose randomness privacy depends on (batch
        coins, noise). None: all ``n``.

    Returns
    -------
    generators : list
        ``numpy.random.Generator`` or ``SecureGenerator`` objects.
    """
    if noise not in NOISE_OPTIONS:
        raise ValueError(f"`noise` must be one of {NOISE_OPTIONS}, got {noise!r}.")
    if random_state is None:
        seed = np.random.SeedSequence()
    else:
        rs = check_random_state(random_state)
        seed = np.random.SeedSequence(int(rs.randint(np.iinfo(np.int32).max)))
    # Spawn all n in both modes, so the public streams do not depend on ``noise``.
    gens = [np.random.Generator(np.random.PCG64(s)) for s in seed.spawn(n)]
    if noise == "secure":
        for i in range(n) if private_streams is None else private_streams:
            gens[i] = SecureGenerator()
    return gens


def secure_if(rng, noise):
    """``rng``, or a :class:`~sklearn_fdp._secure.SecureGenerator` when ``noise == "secure"``.

    For a private stream spawned from a public one (e.g. a child of the
    public stream that draws a private mean's noise).
    """
    return SecureGenerator() if noise == "secure" else rng

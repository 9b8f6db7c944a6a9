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


class SeedSequenceState(np.random.RandomState):
    """A ``RandomState`` carrying a full-width :class:`numpy.random.SeedSequence`.

    It passes scikit-learn's ``random_state`` validation, and
    :func:`spawn_generators` spawns a fit's streams from the sequence itself
    rather than from a 31-bit integer drawn from the ``RandomState``.
    ``PrivateRandomizedSearchCV`` seeds its trials with it.

    Parameters
    ----------
    seed_sequence : numpy.random.SeedSequence
    """

    def __init__(self, seed_sequence):
        super().__init__(np.random.MT19937(seed_sequence))
        self.seed_sequence = seed_sequence

    def __reduce__(self):  # copies (clone, deepcopy, pickle) keep the sequence
        return (type(self), (self.seed_sequence,))


def spawn_generators(random_state, n, *, noise="default", private_streams=None):
    """Return ``n`` independent generators, one per random stream of a fit.

    Parameters
    ----------
    random_state : None, int or numpy.random.RandomState
        As accepted by scikit-learn. ``None`` draws fresh OS entropy; a
        :class:`SeedSequenceState` gives its own SeedSequence.
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
    elif isinstance(random_state, SeedSequenceState):
        # Its whole SeedSequence (not 31 bits of it), the same on every call.
        ss = random_state.seed_sequence
        seed = np.random.SeedSequence(ss.entropy, spawn_key=ss.spawn_key,
                                      pool_size=ss.pool_size)
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

"""Randomness for ``noise="secure"``: every bit from the OS CSPRNG.

:class:`SecureGenerator` stands in for the part of
:class:`numpy.random.Generator` that the privacy-relevant streams of a fit
use (the Poisson batch coins and the Gaussian noise). It holds no state and
no seed: every call reads fresh bytes from :func:`os.urandom` (``getrandom``
on Linux, the kernel's ChaCha20 CSPRNG), so the noise cannot be predicted
from a ``random_state``, a saved seed or earlier outputs, and it never
touches NumPy's global or seeded generators.

Gaussian noise. A textbook sampler maps one or two 53-bit uniforms to a
double; the set of doubles it can output is sparse and depends on where the
mean lies, so an observer of ``x + noise`` can test candidate inputs ``x``
(Mironov, CCS 2012, for Laplace; Jin et al., "Are We There Yet? Timing and
Floating-Point Attacks on Differential Privacy Systems", IEEE S&P 2022,
arXiv:2112.05307, for Gaussians). The defence of Holohan & Braghin,
"Secure Random Sampling in Differential Privacy", ESORICS 2021
(arXiv:2107.10138, Section 5.1) returns the normalised sum of ``2n``
independent Gaussians, ``N(0, 1) = (Z_1 + ... + Z_2n) / sqrt(2n)``; the
attack then has to search ``2^(p (2n - 1))`` combinations for a ``p``-bit
sampler. Opacus's ``secure_mode`` uses ``n = 2``: four ``N(0, σ²)`` draws
from a CSPRNG, summed and halved (``opacus/optimizers/optimizer.py``,
``_generate_noise``). This module does the same: each component is a
Box–Muller normal from two 53-bit CSPRNG uniforms (both of its outputs are
used), and each returned normal is ``(Z_1 + Z_2 + Z_3 + Z_4) / 2``, exactly
``N(0, 1)`` in distribution. It is a mitigation of the floating-point attack
(it makes the attack's search infeasible), not a proof that the rounded
sampler is exactly Gaussian; the accounting is the continuous Gaussian's,
as in Opacus. The output differs from an exact ``N(0, 1)`` only through the
53-bit grid of the uniforms and the cut-off of each component's radius at
``sqrt(2 · 53 ln 2) ≈ 8.6`` (the smallest ``U_1`` is ``2^-53``: the
Rayleigh tail beyond it has probability ``2^-53`` per component pair).

Poisson coins. Privacy amplification by subsampling assumes the batch coins
are secret and exactly Bernoulli(q). :meth:`SecureGenerator.bernoulli_indices`
compares, for every record, a CSPRNG uniform ``U`` with ``q`` digit by digit
in base 256 (most records are decided by their first byte): the record is
included iff ``U < q``, which has probability exactly ``q`` (a double has a
finite binary expansion). About one byte per record per step.
"""

import os

import numpy as np

# Bytes come from here (a module attribute so that tests can count or replace
# the source). os.urandom is getrandom(2) on Linux: the OS CSPRNG.
_urandom = os.urandom

# Independent normals summed per output (Opacus's secure_mode: 2n = 4).
N_TERMS = 4
# Outputs computed per chunk (bounds the temporary arrays to a few MiB).
_CHUNK = 1 << 16
_TWO_PI = 2.0 * np.pi
_2_POW_M53 = 2.0**-53


def _uniform53(count):
    """``count`` uniforms on the grid ``{0, 1, ..., 2^53 - 1} / 2^53`` (in [0, 1))."""
    words = np.frombuffer(_urandom(8 * count), dtype=np.uint64)
    return (words >> np.uint64(11)).astype(np.float64) * _2_POW_M53


def _box_muller(count):
    """``count`` (even) independent N(0, 1) from ``count`` CSPRNG uniforms.

    ``r = sqrt(-2 ln U_1)`` with ``U_1`` in ``(0, 1]`` and ``θ = 2π U_2``;
    ``r cos θ`` and ``r sin θ`` are two independent standard normals.
    """
    half = count // 2
    u = _uniform53(count)
    u1 = 1.0 - u[:half]  # in (0, 1]: no log(0)
    theta = u[half:]
    theta *= _TWO_PI
    r = np.sqrt(-2.0 * np.log(u1))
    out = np.empty(count)
    np.multiply(r, np.cos(theta), out=out[:half])
    np.multiply(r, np.sin(theta), out=out[half:])
    return out


def secure_standard_normal(count):
    """``count`` independent N(0, 1), each the sum of four CSPRNG normals over 2.

    Parameters
    ----------
    count : int
        Number of normals.

    Returns
    -------
    z : ndarray of shape (count,), float64
    """
    count = int(count)
    out = np.empty(count)
    norm = 1.0 / np.sqrt(N_TERMS)  # 1/2, exact
    for start in range(0, count, _CHUNK):
        m = min(_CHUNK, count - start)
        parts = _box_muller(N_TERMS * m).reshape(N_TERMS, m)  # N_TERMS is even
        chunk = out[start:start + m]
        np.sum(parts, axis=0, out=chunk)
        chunk *= norm
    return out


def _as_shape(size):
    if size is None:
        return None
    if isinstance(size, (int, np.integer)):
        return (int(size),)
    return tuple(int(s) for s in size)


def _sized(draw, size):
    """``draw(n)`` reshaped to ``size``; one float when ``size`` is None."""
    shape = _as_shape(size)
    if shape is None:
        return float(draw(1)[0])
    return draw(int(np.prod(shape, dtype=np.int64))).reshape(shape)


class SecureGenerator:
    """Drop-in for the calls a private stream makes on a NumPy Generator, from ``os.urandom``.

    Supports :meth:`standard_normal`, :meth:`normal`, :meth:`random`,
    :meth:`bernoulli_indices` (the Poisson sampler's coins) and
    :meth:`spawn`. Anything else raises ``AttributeError``, so a code path
    that would silently draw private randomness some other way fails
    loudly instead. It has no seed and no state: two instances are
    independent, outputs are not reproducible (by design), and it is safe
    to use from several threads and across ``fork``.

    Notes
    -----
    Normals: the Holohan & Braghin (ESORICS 2021) defence as in Opacus's
    ``secure_mode``, see :mod:`sklearn_fdp._secure`. About 32 bytes of OS
    randomness per normal; 18-30 times slower than NumPy's ziggurat
    (``benchmarks/results/secure_noise.md``).
    """

    def standard_normal(self, size=None, dtype=np.float64):
        """Standard normals of shape ``size`` (a float when ``size`` is None).

        Parameters
        ----------
        size : int, tuple of int or None, default=None
        dtype : {numpy.float64, numpy.float32}, default=numpy.float64
            Drawn in float64, then cast.

        Returns
        -------
        z : ndarray or float
        """
        z = _sized(secure_standard_normal, size)
        return z if isinstance(z, float) else z.astype(dtype, copy=False)

    def normal(self, loc=0.0, scale=1.0, size=None):
        """``loc + scale * standard_normal``, broadcast like :meth:`numpy.random.Generator.normal`.

        Parameters
        ----------
        loc, scale : float or array-like, default=0.0 and 1.0
            ``scale`` must be >= 0.
        size : int, tuple of int or None, default=None

        Returns
        -------
        x : ndarray or float
        """
        loc = np.asarray(loc, dtype=np.float64)
        scale = np.asarray(scale, dtype=np.float64)
        if np.any(scale < 0):
            raise ValueError(f"scale of SecureGenerator.normal must be >= 0, got {scale!r}.")
        shape = _as_shape(size)
        if shape is None:
            shape = np.broadcast_shapes(loc.shape, scale.shape)
        out = loc + scale * secure_standard_normal(
            int(np.prod(shape, dtype=np.int64))).reshape(shape)
        return float(out) if out.ndim == 0 else out

    def random(self, size=None):
        """Uniforms on ``{0, ..., 2^53 - 1} / 2^53`` (as NumPy's ``random``).

        Parameters
        ----------
        size : int, tuple of int or None, default=None

        Returns
        -------
        u : ndarray or float
        """
        return _sized(_uniform53, size)

    def bernoulli_indices(self, n, p):
        """Sorted indices of ``n`` independent Bernoulli(``p``) coins that came up 1.

        Record ``i`` is included iff ``U_i < p`` for a uniform ``U_i`` whose
        base-256 digits are CSPRNG bytes, compared with ``p``'s digits one
        at a time and only while they tie: probability exactly ``p``.

        Parameters
        ----------
        n : int
            Number of records.
        p : float
            Inclusion probability in [0, 1].

        Returns
        -------
        idx : ndarray of int64, sorted
        """
        n = int(n)
        p = float(p)
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"p of SecureGenerator.bernoulli_indices must be in [0, 1], "
                             f"got {p!r}.")
        if p >= 1.0:
            return np.arange(n, dtype=np.int64)
        if p <= 0.0 or n == 0:
            return np.empty(0, dtype=np.int64)
        num, den = p.as_integer_ratio()  # den is a power of two: finite expansion
        include = np.zeros(n, dtype=bool)
        undecided = None  # None: every record (first digit)
        while True:
            num *= 256
            digit, num = divmod(num, den)
            size = n if undecided is None else undecided.shape[0]
            byte = np.frombuffer(_urandom(size), dtype=np.uint8)
            below = byte < digit
            tie = byte == digit
            if undecided is None:
                include |= below
                undecided = np.flatnonzero(tie)
            else:
                include[undecided[below]] = True
                undecided = undecided[tie]
            # Once p's remaining digits are all 0, a tie means U >= p: excluded.
            if num == 0 or undecided.shape[0] == 0:
                break
        return np.flatnonzero(include).astype(np.int64, copy=False)

    def spawn(self, n_children):
        """``n_children`` new :class:`SecureGenerator` objects (independent, like all of them).

        Parameters
        ----------
        n_children : int

        Returns
        -------
        generators : list of SecureGenerator
        """
        return [SecureGenerator() for _ in range(int(n_children))]

    def __repr__(self):
        return "SecureGenerator(os.urandom)"

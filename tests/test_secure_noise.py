"""noise="secure": OS-CSPRNG coins and hardened Gaussian noise on every private estimator.

The secure draws are non-deterministic by design, so the statistical checks
below use fixed sample sizes and tolerances from the statistic's exact (or
stated) distribution under a correct sampler, each with a false-failure
probability of at most about 1e-6 (summed over this file: below 1e-4).
"""

import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats
from sklearn.datasets import make_classification
from sklearn.preprocessing import normalize
from sklearn.utils import get_tags

from sklearn_fdp import (
    AdaMixClassifier,
    DPSGDClassifier,
    DPSGDFClassifier,
    FeatureDPLogisticRegression,
    PrivateMeanCenterer,
)
from sklearn_fdp import _secure
from sklearn_fdp._engine import PoissonSampler
from sklearn_fdp._random import spawn_generators
from sklearn_fdp._secure import SecureGenerator

# False-failure probability allowed to each statistical check.
ALPHA = 1e-6

N = 400
_MASK = np.zeros(N, dtype=bool)
_MASK[:20] = True


@pytest.fixture(scope="module")
def data():
    X, y = make_classification(n_samples=N, n_features=5, n_informative=3, random_state=0)
    return normalize(X), y


def _mlp(**kw):
    torch_mod = pytest.importorskip("torch")
    del torch_mod
    from sklearn_fdp import MLPFeatureDP

    return MLPFeatureDP(hidden_layer_sizes=(6,), public_features=[0, 1], epochs=2,
                        device="cpu", **FIXED_SIGMA, **kw)


# A given σ and the RDP accountant: no calibration, fast fits.
FIXED_SIGMA = dict(epsilon=None, noise_multiplier=1.0, accountant="rdp")

# name -> (factory(**params), fit kwargs, "pure": True when the fit has no
# public randomness, so that the secure stream is its only randomness)
ESTIMATORS = {
    "DPSGDClassifier": (lambda **kw: DPSGDClassifier(epochs=2, **FIXED_SIGMA, **kw), {}, True),
    "FeatureDPLogisticRegression": (
        lambda **kw: FeatureDPLogisticRegression(public_features=[0, 1], label_public=True,
                                                 public_loss="gaussian_pad", public_epochs=1,
                                                 epochs=2, **FIXED_SIGMA, **kw), {}, False),
    "DPSGDFClassifier": (lambda **kw: DPSGDFClassifier(epochs=2, **FIXED_SIGMA, **kw), {},
                         True),
    "DPSGDFClassifier-analysed": (
        lambda **kw: DPSGDFClassifier(epochs=2, variant="analysed", epsilon_mean=0.2,
                                      epsilon_quantile=0.1, feature_norm=2.0, **FIXED_SIGMA,
                                      **kw), {}, True),
    "AdaMixClassifier": (lambda **kw: AdaMixClassifier(public_epochs=5, **kw),
                         {"public_mask": _MASK}, True),
    "MLPFeatureDP": (_mlp, {}, False),
    "PrivateMeanCenterer": (lambda **kw: PrivateMeanCenterer(**kw), {}, True),
}


def _fit(name, data, **params):
    make, fit_kw, _ = ESTIMATORS[name]
    X, y = data
    est = make(**params)
    return est.fit(X) if name == "PrivateMeanCenterer" else est.fit(X, y, **fit_kw)


def _released(est):
    """The fitted numbers the release consists of."""
    if isinstance(est, PrivateMeanCenterer):
        return [est.mean_]
    if hasattr(est, "coef_"):
        return [est.coef_, est.intercept_]
    return [p.detach().numpy().copy() for p in est.module_.parameters()]


def _same(a, b):
    return all(np.array_equal(u, v) for u, v in zip(_released(a), _released(b), strict=True))


# -- estimators ------------------------------------------------------------------


@pytest.mark.parametrize("name", ESTIMATORS)
def test_secure_fits_differ_and_default_fits_reproduce(data, name):
    a = _fit(name, data, noise="secure", random_state=0)
    b = _fit(name, data, noise="secure", random_state=0)
    # Continuous noise: two secure fits coincide with probability ~0.
    assert not _same(a, b)
    c = _fit(name, data, noise="default", random_state=0)
    d = _fit(name, data, random_state=0)  # the default value
    assert _same(c, d)
    assert not _same(a, c)
    assert get_tags(a).non_deterministic and not get_tags(c).non_deterministic


@pytest.mark.parametrize("name", ESTIMATORS)
def test_accounting_is_the_same_in_both_modes(data, name):
    a = _fit(name, data, noise="secure", random_state=0)
    c = _fit(name, data, noise="default", random_state=0)
    assert a.epsilon_ == c.epsilon_ and a.delta_ == c.delta_
    assert a.noise_multiplier_ == c.noise_multiplier_
    assert repr(a.dp_event_) == repr(c.dp_event_)


def test_lazy_sparse_path_uses_secure_normals(data, monkeypatch):
    X, y = data
    Xs = sp.csr_matrix(X)
    seen = []
    real = _secure._urandom
    monkeypatch.setattr(_secure, "_urandom", lambda n: seen.append(n) or real(n))
    a = DPSGDClassifier(momentum=0.0, epochs=2, noise="secure", random_state=0).fit(Xs, y)
    b = DPSGDClassifier(momentum=0.0, epochs=2, noise="secure", random_state=0).fit(Xs, y)
    assert not _same(a, b)
    # Batch coins (one byte per record per step, at least) and normals (32 bytes each).
    assert sum(seen) >= 2 * a.steps_ * N


class _FakeBytes:
    """A seeded stand-in for os.urandom: proves where a fit's randomness comes from."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.count = 0

    def __call__(self, n):
        self.count += n
        return self.rng.bytes(n)


@pytest.mark.parametrize("name", ESTIMATORS)
def test_secure_randomness_comes_only_from_the_os_source(data, name, monkeypatch):
    """With the OS source replaced by a seeded one, the fit is a function of it.

    For estimators without public randomness, ``random_state`` then changes
    nothing: no private draw comes from a seeded NumPy/torch stream. (The
    problems are small, so no noise is drawn on a background thread and the
    order of the byte requests is fixed.)
    """
    pure = ESTIMATORS[name][2]
    fits = []
    for random_state in (0, 1 if pure else 0):
        source = _FakeBytes(123)
        monkeypatch.setattr(_secure, "_urandom", source)
        fits.append(_fit(name, data, noise="secure", random_state=random_state))
        assert source.count > 0
    assert _same(*fits)


@pytest.mark.parametrize("name", ESTIMATORS)
def test_invalid_noise_value_names_value_and_choices(data, name):
    with pytest.raises(ValueError) as info:
        _fit(name, data, noise="fast")
    msg = str(info.value)
    assert "noise" in msg and "'fast'" in msg and "'secure'" in msg and "'default'" in msg


def test_secure_fit_leaves_global_and_seeded_state_alone(data):
    state = np.random.get_state()
    torch = None
    try:
        import torch
    except ImportError:  # pragma: no cover
        pass
    torch_state = torch.random.get_rng_state() if torch is not None else None
    SecureGenerator().standard_normal(100)
    _fit("DPSGDClassifier", data, noise="secure", random_state=None)
    if torch is not None:
        _fit("MLPFeatureDP", data, noise="secure", random_state=0)
        assert torch.equal(torch.random.get_rng_state(), torch_state)
    after = np.random.get_state()
    assert after[0] == state[0] and np.array_equal(after[1], state[1]) and after[2:] == state[2:]
    # The public streams are the seeded ones, identical in both modes.
    default = spawn_generators(7, 4)
    secure = spawn_generators(7, 4, noise="secure", private_streams=(0, 1))
    assert all(isinstance(g, SecureGenerator) for g in secure[:2])
    for g, h in zip(default[2:], secure[2:]):
        assert np.array_equal(g.standard_normal(10), h.standard_normal(10))
    assert all(isinstance(g, SecureGenerator)
               for g in spawn_generators(7, 3, noise="secure"))
    with pytest.raises(ValueError, match="'fast'"):
        spawn_generators(7, 2, noise="fast")


# -- the sampler ------------------------------------------------------------------


def test_secure_generator_api():
    g = SecureGenerator()
    assert g.standard_normal((3, 4)).shape == (3, 4)
    assert g.standard_normal(5, dtype=np.float32).dtype == np.float32
    assert isinstance(g.standard_normal(), float) and isinstance(g.random(), float)
    x = g.normal(0.0, [0.0, 1.0, 2.0])
    assert x.shape == (3,) and x[0] == 0.0
    assert g.normal(1.0, 2.0, size=(2, 2)).shape == (2, 2)
    u = g.random(1000)
    assert u.min() >= 0.0 and u.max() < 1.0
    assert np.all(u * 2.0**53 == np.floor(u * 2.0**53))  # the 53-bit grid
    assert len(g.spawn(2)) == 2 and all(isinstance(h, SecureGenerator) for h in g.spawn(2))
    with pytest.raises(ValueError, match="scale"):
        g.normal(0.0, -1.0)
    with pytest.raises(ValueError, match="0.5|1.5"):
        g.bernoulli_indices(10, 1.5)
    # Calls the secure path does not support fail loudly instead of falling back.
    for method in ("choice", "binomial", "integers", "permutation"):
        assert not hasattr(g, method)
    assert np.array_equal(g.bernoulli_indices(5, 1.0), np.arange(5))
    assert g.bernoulli_indices(5, 0.0).shape == (0,)


@pytest.mark.statistical
def test_secure_normals_match_standard_normal():
    """The CSPRNG's normals are N(0, 1): KS, mean, variance and tails, each at ALPHA.

    Power (issue 30): the sum of squares is exactly χ²(200,000), bounds
    1 ± 0.016 of the mean at ALPHA = 1e-6, so a 5 % error in the std
    (variance x 1.1025 or x 0.9025) is detected with probability > 1 - 1e-12.
    """
    n = 200_000
    z = SecureGenerator().standard_normal(n)
    # KS: Dvoretzky-Kiefer-Wolfowitz with Massart's constant, exact for every n:
    # P(sup |F_n - Φ| > e) <= 2 exp(-2 n e²) = ALPHA.
    e = math.sqrt(math.log(2 / ALPHA) / (2 * n))
    assert stats.kstest(z, "norm").statistic < e
    # Mean: sqrt(n) * mean is exactly N(0, 1) under a correct sampler.
    zq = stats.norm.isf(ALPHA / 2)
    assert abs(z.mean()) * math.sqrt(n) < zq
    # Variance: the sum of squares is exactly chi²(n).
    ss = float(z @ z)
    assert stats.chi2.ppf(ALPHA / 2, n) < ss < stats.chi2.isf(ALPHA / 2, n)
    # Tails, where KS is blind: #{|z| > t} is exactly Binomial(n, 2 Φ(-t)).
    for t in (3.0, 4.0):
        p = 2 * stats.norm.sf(t)
        k = int(np.count_nonzero(np.abs(z) > t))
        assert stats.binom.ppf(ALPHA / 2, n, p) <= k <= stats.binom.isf(ALPHA / 2, n, p)


@pytest.mark.statistical
def test_secure_uniforms_are_uniform():
    n = 200_000
    u = SecureGenerator().random(n)
    e = math.sqrt(math.log(2 / ALPHA) / (2 * n))  # DKW, as above
    assert stats.kstest(u, "uniform").statistic < e


@pytest.mark.statistical
@pytest.mark.parametrize("rate", [0.1, 0.5, 3 / 1024, 0.0123])
def test_poisson_sampler_with_secure_coins(rate):
    n, steps = 1000, 2000
    sampler = PoissonSampler(n, rate, SecureGenerator())
    sizes = np.empty(steps, dtype=np.int64)
    counts = np.zeros(n, dtype=np.int64)
    for t in range(steps):
        idx = sampler.sample()
        assert np.all(np.diff(idx) > 0) and (idx.size == 0 or 0 <= idx[0] <= idx[-1] < n)
        sizes[t] = idx.size
        counts[idx] += 1
    # Total inclusions: exactly Binomial(n * steps, rate).
    total = int(sizes.sum())
    assert (stats.binom.ppf(ALPHA / 2, n * steps, rate) <= total
            <= stats.binom.isf(ALPHA / 2, n * steps, rate))
    # Variance of the batch size, nq(1-q): the sample variance of ``steps``
    # i.i.d. Binomial(n, q) draws has variance (μ4 - σ⁴ (T-3)/(T-1)) / T; a
    # normal approximation (T = 2000) at the two-sided ALPHA quantile.
    var = n * rate * (1 - rate)
    mu4 = var * (1 + 3 * (n - 2) * rate * (1 - rate))
    sd = math.sqrt((mu4 - var**2 * (steps - 3) / (steps - 1)) / steps)
    assert abs(sizes.var(ddof=1) - var) < stats.norm.isf(ALPHA / 2) * sd
    # Each record: exactly Binomial(steps, rate) inclusions (union bound over n).
    lo = stats.binom.ppf(ALPHA / (2 * n), steps, rate)
    hi = stats.binom.isf(ALPHA / (2 * n), steps, rate)
    assert lo <= counts.min() and counts.max() <= hi


def test_secure_coins_have_probability_exactly_rate(monkeypatch):
    """Known bytes give the decisions of the digit-by-digit comparison ``U < rate``."""
    rate = 3 / 1024 + 5 / 2**24  # base-256 digits 0, 192, 5: three rounds
    n = 256**2
    first = np.repeat(np.arange(256, dtype=np.uint8), 256).tobytes()
    calls = []

    def fake(k):
        calls.append(k)
        if len(calls) == 1:
            return first
        # Ties of the previous round; give them every byte value in turn.
        return np.resize(np.arange(256, dtype=np.uint8), k).tobytes()

    monkeypatch.setattr(_secure, "_urandom", fake)
    idx = SecureGenerator().bernoulli_indices(n, rate)
    # Round 1: byte 0 ties (256 records), others exceed digit 0: excluded.
    # Round 2 (256 records, bytes 0..255): 192 below digit 192, 1 tie.
    # Round 3 (1 record, byte 0): 0 < 5: included. Then rem = 0: done.
    assert calls == [n, 256, 1]
    assert idx.size == 193
    assert idx.size / n == pytest.approx(3 / 1024 + 1 / 2**16)
    # And the probability: round r includes (digit_r) / 256^r of all byte strings.
    assert 0 / 256 + 192 / 256**2 + 5 / 256**3 == rate

"""Sensitivity of AdaMix's noisy steps (supplement Alg. 3; DESIGN.md §2, row "AdaMix").

Every private-phase step of :class:`~sklearn_fdp.AdaMixClassifier` releases

    Σ_{i private} clip(U_tᵀ g_i(θ_t), τ_t) + N(0, σ² τ_t² I_{n_dims})

in the coordinates of a subspace ``U_t`` (the identity without projection),
and the accountant charges one Gaussian mechanism of noise multiplier σ per
step, i.e. sensitivity ``τ_t`` under add/remove of one private record (the
only relation AdaMix offers: it has no replace-one option). That holds only if

* ``U_t``, ``τ_t`` and the noise dimension are functions of the *public*
  records and the released iterate ``θ_t`` alone (else they are themselves
  un-noised releases of private data), and
* one private record moves the clipped coordinate sum by at most ``τ_t``, and
* the noise drawn is ``σ τ_t`` per coordinate of that same subspace.

The oracle under test is the one ``AdaMixClassifier.fit`` builds (validation,
float64 cast, label encoding, public pretraining, hyperparameter plumbing
included): fit runs until it hands its private oracle to the engine, which is
intercepted there. The release is evaluated at the pretrained weights the
first step sees and at arbitrary iterates (every later ``θ_t`` is noisy, so
any value is possible).
"""

from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sklearn_fdp import AdaMixClassifier, accounting
from sklearn_fdp._mechanisms import adamix as _adamix

from ._harness import SCALES, adversarial_dense, assert_sensitivity, hostile_csr, remove_one


class _Captured(Exception):
    """Raised by the stand-in engine once fit has built its private oracle."""


def build(X, y, public_mask, **params):
    """The private-phase oracle that ``AdaMixClassifier(**params).fit`` builds.

    Returns ``(oracle, call)``, ``call`` holding what fit passed to the engine
    (``theta0``, ``config``, ``noise_rng``, ...). The public pretraining runs
    through the real engine. The step count is fixed at 3: the calibration
    (ε → T) is irrelevant to one step's sensitivity and costs a PLD evaluation.
    """
    real = _adamix.run_dp_sgd
    call = {}

    def engine(theta0, private, n_samples, config, **kw):
        if kw.get("noise_fn") is None:  # public pretraining: no private data, no noise
            return real(theta0, private, n_samples, config, **kw)
        call.update(theta0=theta0, private=private, n_samples=n_samples, config=config, **kw)
        raise _Captured

    est = AdaMixClassifier(**params)
    with patch.object(_adamix, "run_dp_sgd", engine), \
            patch.object(_adamix, "calibrate_steps", lambda *args, **kwargs: (3, 0.5)), \
            pytest.raises(_Captured):
        est.fit(X, y, public_mask=public_mask)
    oracle = call["noise_fn"].__self__
    assert isinstance(oracle, _adamix._AdaMixOracle)
    return oracle, call


def start_point(call):
    """The parameters at which fit's first step evaluates the oracle (``w_ref``)."""
    private = call["private"]
    if isinstance(private, _adamix._AdaMixOracle):  # practical: the engine starts at w_ref
        return call["theta0"]
    return _shift(private) + call["theta0"]  # theory: the engine runs in v = w − w_ref


def _shift(private):
    """``w_ref`` of the theory variant's shifted oracle (a closure over ``oracle, shift``)."""
    cells = dict(zip(private.__code__.co_freevars, private.__closure__))
    return cells["shift"].cell_contents


def check_step(oracle_a, oracle_b, theta, what):
    """Public statistics bit-identical, clipped coordinates within τ_t, noise σ τ_t."""
    coords_a, tau_a, dims_a, back_a = oracle_a.release(theta)
    coords_b, tau_b, dims_b, back_b = oracle_b.release(theta)
    # τ_t and U_t come from the public records and θ only: changing the private
    # records must leave them bit-identical.
    assert tau_a == tau_b, f"{what}: τ_t depends on the private records ({tau_a!r} vs {tau_b!r})"
    assert dims_a == dims_b, f"{what}: the noise dimension depends on the private records"
    assert (back_a is None) == (back_b is None), what
    probe = np.random.default_rng(1).standard_normal(dims_a)
    if back_a is not None:
        np.testing.assert_array_equal(back_a(probe), back_b(probe),
                                      err_msg=f"{what}: U_t depends on the private records")
    assert coords_a.shape == coords_b.shape == (dims_a,), what
    n_terms = max(len(oracle_a.X_priv), len(oracle_b.X_priv))
    diff = assert_sensitivity(coords_a, coords_b, tau_a, n_terms=n_terms, clip=tau_a,
                              dtype=np.float64, what=what)
    # What the engine gets is that release mapped back, and the noise lives in
    # the same coordinates with std σ τ_t (the accountant's Gaussian(σ) step).
    for oracle, coords, tau, back in ((oracle_a, coords_a, tau_a, back_a),
                                      (oracle_b, coords_b, tau_b, back_b)):
        summed = oracle(np.arange(len(oracle.X_priv)), theta)
        expected = coords.reshape(theta.shape) if back is None else back(coords)
        np.testing.assert_array_equal(summed, expected, err_msg=what)
        z = np.random.default_rng(7).standard_normal(dims_a)
        noise = oracle.noise(np.random.default_rng(7))
        std = oracle.sigma * tau
        want = (std * z).reshape(theta.shape) if back is None else back(std * z)
        np.testing.assert_array_equal(noise, want, err_msg=f"{what}: noise is not σ τ_t")
    return diff


def iterates(call, rng):
    """``w_ref`` and arbitrary iterates of small, unit and large scale."""
    start = start_point(call)
    thetas = [start]
    for scale in (1e-3, 1.0, 1e3):
        thetas.append(rng.standard_normal(start.shape) * scale)
    return thetas


def labels_for(n, n_classes, rng):
    """Labels in which every class occurs at least twice (removing one record keeps
    ``classes_``: AdaMix treats the class set as public)."""
    y = rng.integers(0, n_classes, n)
    y[: 2 * n_classes] = np.repeat(np.arange(n_classes), 2)
    return rng.permutation(y)


def masked_data(rng, n, d, n_classes, n_public):
    """``(X, y, mask)``: ``n × d`` standard normals, :func:`labels_for` labels, and the
    first ``n_public`` rows public."""
    X = rng.standard_normal((n, d))
    y = labels_for(n, n_classes, rng)
    mask = np.zeros(n, dtype=bool)
    mask[:n_public] = True
    return X, y, mask


def check_remove_one(X, y, mask, removed, params, rng, what=""):
    """Remove each private record of ``removed`` in turn; check the step statistics and
    the release at ``w_ref`` and at arbitrary iterates."""
    oracle_a, call_a = build(X, y, mask, **params)
    thetas = iterates(call_a, rng)
    for i in removed:
        assert not mask[i]
        X2, y2 = remove_one(X, y, i)
        oracle_b, call_b = build(X2, y2, np.delete(mask, i), **params)
        # The config the engine gets: σ as accounted, full batch, the noise via the oracle.
        for call in (call_a, call_b):
            sigma = params.get("noise_multiplier", "auto")  # the default: "auto", from ε, δ
            expected = (_adamix.auto_noise_multiplier(params.get("epsilon", 1.0),
                                                      params.get("delta", 1e-5))
                        if sigma == "auto" else sigma)
            assert call["config"].noise_multiplier == expected
            assert call["config"].sampling_rate == 1.0
        np.testing.assert_array_equal(call_a["theta0"], call_b["theta0"],
                                      err_msg="the start point depends on the private records")
        for k, theta in enumerate(thetas):
            check_step(oracle_a, oracle_b, theta, f"{what}, record {i}, θ#{k}")


PARAMS = st.fixed_dictionaries({
    "subspace": st.sampled_from(["feature", "gradient"]),
    "subspace_dim": st.sampled_from(["auto", 1, 2]),
    "projection": st.booleans(),
    "adaptive_clipping": st.booleans(),
    "fit_intercept": st.booleans(),
    "clip_percentile": st.sampled_from([10.0, 50.0, 90.0, 100.0]),
    "max_grad_norm": st.sampled_from([1e-3, 1e-3, 1.0, 1e3]),
    "variant": st.sampled_from(["practical", "practical", "theory"]),
    "noise_multiplier": st.sampled_from([0.5, 20.0]),
    "public_epochs": st.sampled_from([0, 5]),
})


@settings(max_examples=100, deadline=None, derandomize=True)
@given(data=adversarial_dense(n_rows=(6, 14), n_cols=(1, 6)), params=PARAMS,
       n_classes=st.sampled_from([2, 3]), pub_frac=st.floats(0.0, 0.8),
       seed=st.integers(0, 2**16))
def test_remove_one_private_record(data, params, n_classes, pub_frac, seed):
    X, _ = data
    rng = np.random.default_rng(seed)
    n = len(X)
    y = labels_for(n, n_classes, rng)
    n_pub = min(int(pub_frac * n), n - 2)
    if n_pub == 0 and params["variant"] == "practical":
        params = dict(params, projection=False, adaptive_clipping=False)  # NoisyGD
    mask = np.zeros(n, dtype=bool)
    mask[rng.choice(n, n_pub, replace=False)] = True
    check_remove_one(X, y, mask, np.flatnonzero(~mask), dict(params, random_state=0), rng,
                     what=f"{params}, {X.dtype}, n_pub={n_pub}")


def _case(name, rng):
    """Hand-built worst cases: ``(X, y, mask, i, params)`` (``i``: the hostile record)."""
    n, d = 12, 4
    X, y, mask = masked_data(rng, n, d, 3, 5)
    i = 7
    params = {}
    if name == "rank-one public, huge mislabelled private":
        X[:5] = X[0]  # the public Gram matrix has rank 1
        X[i] = 1e8 * rng.standard_normal(d)
        y[i] = (y[i] + 1) % 3
    elif name == "float32, public scale 3e3":
        X[mask] *= 3e3
        X = X.astype(np.float32)
    elif name == "tiny public, unit private (τ tiny)":
        X[mask] *= 1e-8
    elif name == "huge public, tiny private":
        X[mask] *= 1e8
        X[~mask] *= 1e-8
    elif name == "constant and one-hot columns":
        X[:, 0] = 1.0
        X[:, 1:] = 0.0
        X[np.arange(n), 1 + rng.integers(0, d - 1, n)] = 1.0
    elif name == "private copy of a public row":
        X[i] = X[0]
        y[i] = y[0]
    elif name == "one public record":
        mask[1:5] = False
    elif name == "no public record (NoisyGD)":
        mask[:] = False
        params = dict(projection=False, adaptive_clipping=False)
    elif name == "theory, tiny Lipschitz bound":
        params = dict(variant="theory", max_grad_norm=1e-6)
    elif name == "cross Gram recomputed every step":
        params = dict(subspace="gradient")
    return X, y, mask, i, params


CASES = ["rank-one public, huge mislabelled private", "float32, public scale 3e3",
         "tiny public, unit private (τ tiny)", "huge public, tiny private",
         "constant and one-hot columns", "private copy of a public row", "one public record",
         "no public record (NoisyGD)", "theory, tiny Lipschitz bound",
         "cross Gram recomputed every step"]


@pytest.mark.parametrize("subspace, subspace_dim", [("feature", "auto"), ("feature", 1),
                                                    ("gradient", "auto"), ("gradient", 2)])
@pytest.mark.parametrize("name", CASES)
def test_remove_one_worst_cases(name, subspace, subspace_dim):
    rng = np.random.default_rng(0)
    X, y, mask, i, params = _case(name, rng)
    params = dict(dict(subspace=subspace, subspace_dim=subspace_dim, random_state=0), **params)
    if name == "cross Gram recomputed every step":
        with patch.object(_adamix, "_MAX_CROSS_GRAM", 0):
            check_remove_one(X, y, mask, [i, 11], params, rng, what=name)
    else:
        check_remove_one(X, y, mask, [i, 11], params, rng, what=name)


@settings(max_examples=30, deadline=None, derandomize=True)
@given(params=PARAMS, scale=st.sampled_from(SCALES), seed=st.integers(0, 2**16),
       dtype=st.sampled_from([np.float64, np.float32]))
def test_public_statistics_ignore_private_rows(params, scale, seed, dtype):
    """Replace every private row (features and label) by hostile values: τ_t, U_t and
    the noise dimension stay bit-identical."""
    rng = np.random.default_rng(seed)
    n, d = 10, 3
    X, y, mask = masked_data(rng, n, d, 2, 4)
    X2, y2 = X.copy(), y.copy()
    X2[~mask] = rng.standard_normal((n - 4, d)) * scale
    y2[~mask] = 1 - y2[~mask]
    params = dict(params, random_state=0)
    oracle_a, call_a = build(X.astype(dtype), y, mask, **params)
    oracle_b, call_b = build(X2.astype(dtype), y2, mask, **params)
    np.testing.assert_array_equal(call_a["theta0"], call_b["theta0"])
    for k, theta in enumerate(iterates(call_a, rng)):
        coords_a, tau_a, dims, back_a = oracle_a.release(theta)
        coords_b, tau_b, dims_b, back_b = oracle_b.release(theta)
        assert tau_a == tau_b and dims == dims_b, f"θ#{k}"
        if back_a is not None:
            probe = rng.standard_normal(dims)
            np.testing.assert_array_equal(back_a(probe), back_b(probe), err_msg=f"θ#{k}")
        # Both releases are clipped sums of n - 4 records: at most 2 (n - 4) τ_t apart.
        assert_sensitivity(coords_a, coords_b, 2 * (n - 4) * tau_a, n_terms=n - 4, clip=tau_a,
                           dtype=np.float64, what=f"θ#{k}")


@pytest.mark.parametrize("params", [{}, dict(subspace="gradient", subspace_dim=2),
                                    dict(projection=False), dict(variant="theory")])
def test_drawn_noise_is_the_accounted_noise(params):
    """A real fit: every step draws its noise once, through the oracle, with std σ τ_t in
    the step's subspace, and dp_event_ is T Gaussian mechanisms of noise multiplier σ."""
    X, y, mask = masked_data(np.random.default_rng(0), 40, 4, 3, 6)
    seen = []
    draw = _adamix._AdaMixOracle.noise

    def noise(self, generator):
        seen.append((self.sigma, self._tau, self._n_dims))
        return draw(self, generator)

    with patch.object(_adamix._AdaMixOracle, "noise", noise):
        clf = AdaMixClassifier(epsilon=1.0, noise_multiplier=5.0, random_state=0, **params)
        clf.fit(X, y, public_mask=mask)
    assert len(seen) == clf.steps_
    sigmas, taus, dims = map(np.array, zip(*seen))
    np.testing.assert_array_equal(sigmas, clf.noise_multiplier_)
    np.testing.assert_array_equal(taus, clf.clip_thresholds_)
    np.testing.assert_array_equal(dims, clf.subspace_dims_)
    assert repr(clf.dp_event_) == repr(accounting.dpsgd_event(5.0, 1.0, clf.steps_))


@pytest.mark.parametrize("noise", ["default", "secure"])
def test_noise_stream_with_known_random_state(noise):
    """With a known random_state the default noise is reproducible (documented); the
    secure noise must not be: two fits with the same random_state draw different noise."""
    rng = np.random.default_rng(0)
    X, y, mask = masked_data(rng, 12, 3, 2, 4)
    draws = []
    for _ in range(2):
        oracle, call = build(X, y, mask, random_state=0, noise=noise)
        oracle(np.arange(8), start_point(call))
        draws.append(oracle.noise(call["noise_rng"]))
    assert np.all(np.isfinite(draws[0]))
    if noise == "secure":
        assert not np.array_equal(draws[0], draws[1])
    else:
        np.testing.assert_array_equal(draws[0], draws[1])


def test_sparse_input_is_refused():
    """AdaMix is dense-only: a CSR matrix (duplicate, unsorted entries) is refused, so no
    norm is ever computed from uncanonicalised sparse data on this path."""
    rng = np.random.default_rng(0)
    X, y, mask = masked_data(rng, 12, 3, 2, 4)
    with pytest.raises(TypeError, match="[Ss]parse"):
        AdaMixClassifier(random_state=0).fit(hostile_csr(X, rng), y, public_mask=mask)

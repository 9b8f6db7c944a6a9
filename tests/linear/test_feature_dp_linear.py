"""FeatureDPLinearRegression: the released blocks, the noise, the solvers, sklearn behaviour."""

import math
import pickle
import warnings
from unittest import mock

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import Ridge
from sklearn.metrics import r2_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, OneHotEncoder

from sklearn_fdp import FdpWarning, FeatureDPLinearRegression
from sklearn_fdp._mechanisms import linear_statistics as ls
from sklearn_fdp.preprocessing import RowNormBounds

N, D = 3000, 6
PRIVATE = [0, 1]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.uniform(-0.4, 0.4, size=(N, D))
    y = X @ np.array([1.0, -2.0, 0.5, 3.0, 0.0, -1.0]) + 0.5 + 0.1 * rng.standard_normal(N)
    return X, y


def _clip_blocks(X, private, b_pub, b_priv):
    """Rows' public and protected blocks clipped apart (numpy reference)."""
    X = np.array(X, dtype=np.float64)
    mask = np.zeros(X.shape[1], dtype=bool)
    mask[private] = True
    for cols, bound in ((~mask, b_pub), (mask, b_priv)):
        block = X[:, cols]
        norms = np.linalg.norm(block, axis=1)
        factor = np.where(norms > bound, bound / np.where(norms > 0, norms, 1.0), 1.0)
        X[:, cols] = block * factor[:, None]
    return X


def _captured_system(est, X, y):
    """``(exact stats, noisy system, layout)`` of ``est.fit(X, y)``."""
    seen = {}
    real_stats = ls.sufficient_statistics
    real_solve = ls.solve_noisy_ridge

    real_bound = ls.with_residual_bound

    def stats(*args, **kwargs):
        seen["stats"] = real_stats(*args, **kwargs)
        seen["layout"] = args[2]
        return seen["stats"]

    def bound(*args, **kwargs):  # the layout with the residual clip R: the one released
        seen["layout"] = real_bound(*args, **kwargs)
        return seen["layout"]

    def solve(system, *args, **kwargs):
        seen["system"] = system
        return real_solve(system, *args, **kwargs)

    with mock.patch.object(ls, "sufficient_statistics", stats), \
            mock.patch.object(ls, "with_residual_bound", bound), \
            mock.patch("sklearn_fdp.linear._feature_dp_linear.solve_noisy_ridge", solve):
        est.fit(X, y)
    return seen["stats"], seen["system"], seen["layout"]


# -- correctness with negligible noise --------------------------------------------


def _perturbation_bound(A, tau, theta, b_noise=0.0):
    """Bound on ‖Δθ‖ for (A + E) θ' = b + e with ‖E‖ <= 2τ, ‖e‖ <= b_noise (Weyl/Neumann)."""
    inv_norm = 1.0 / np.linalg.eigvalsh(A).min()
    e = 2.0 * tau
    assert inv_norm * e < 0.5
    return inv_norm * (b_noise + e * np.linalg.norm(theta)) / (1.0 - inv_norm * e)


@pytest.mark.parametrize("label_public", [True, False])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_joint_solver_with_tiny_noise_is_ridge_on_clipped_data(data, label_public, fit_intercept):
    X, y = data
    X = X * 2.0  # some rows' blocks exceed the bounds: clipping must match
    lo, hi = -2.0, 3.0
    est = FeatureDPLinearRegression(private_features=PRIVATE, label_public=label_public,
                                    y_bounds=(lo, hi), row_norm_bounds=(0.8, 0.5), alpha=2.0,
                                    solver="joint", fit_intercept=fit_intercept,
                                    epsilon=None, noise_multiplier=1e-3, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FdpWarning)  # targets are clipped here
        est.fit(X, y)
    Xc = _clip_blocks(X, PRIVATE, 0.8, 0.5)
    yc = np.clip(y, lo, hi)
    ref = Ridge(alpha=2.0, fit_intercept=fit_intercept, solver="cholesky").fit(Xc, yc)
    # Tolerance from the noise: ‖E‖ <= 2τ (τ: its expected spectral norm) and the
    # noise of Xᵀy below 6 σ_b sqrt(d + 1), in target units (y scaled by h).
    centre, half = ls.target_map((lo, hi), fit_intercept)
    Xa = np.hstack([Xc, np.ones((N, 1))]) if fit_intercept else Xc
    A = Xa.T @ Xa + np.diag([2.0] * D + [0.0] * fit_intercept)
    theta = np.r_[ref.coef_, [ref.intercept_ - centre] * fit_intercept] / half
    b_noise = 6 * max(est.block_noise_std_.values()) * math.sqrt(D + 1)
    bound = _perturbation_bound(A, est.noise_scale_, theta, b_noise) * half
    got = np.r_[est.coef_, [est.intercept_] * fit_intercept]
    want = np.r_[ref.coef_, [ref.intercept_] * fit_intercept]
    assert np.linalg.norm(got - want) <= bound
    assert bound < 1e-3 * np.linalg.norm(want)  # the check is tight


def test_residual_solver_with_tiny_noise_is_ridge_too(data):
    """Every public direction is kept when τ is tiny: the residual solve is exact FWL."""
    X, y = data
    kwargs = dict(private_features=PRIVATE, label_public=True, y_bounds=(-3, 4), alpha=1.0,
                  epsilon=None, noise_multiplier=1e-3, random_state=0)
    residual = FeatureDPLinearRegression(solver="residual", **kwargs).fit(X, y)
    ref = Ridge(alpha=1.0, solver="cholesky").fit(X, y)
    centre, half = ls.target_map((-3, 4), True)
    Xa = np.hstack([X, np.ones((N, 1))])
    A = Xa.T @ Xa + np.diag([1.0] * D + [0.0])
    theta = np.r_[ref.coef_, ref.intercept_ - centre] / half
    # The joint solve's perturbation bound, doubled for the protected step's ridge α + τ.
    bound = 2 * _perturbation_bound(A, residual.noise_scale_, theta) * half
    got = np.r_[residual.coef_, residual.intercept_]
    want = np.r_[ref.coef_, ref.intercept_]
    assert np.linalg.norm(got - want) <= bound
    assert bound < 1e-3 * np.linalg.norm(want)


def test_residual_solver_keeps_the_exact_public_model_under_huge_noise(data):
    """τ above every public eigenvalue: no direction is kept, the public part is the
    exact public-only Ridge (target public) and the protected part adds to it."""
    X, y = data
    est = FeatureDPLinearRegression(private_features=PRIVATE, label_public=True,
                                    y_bounds=(-3, 4), alpha=1.0, epsilon=None,
                                    noise_multiplier=1e6, random_state=0).fit(X, y)
    assert est.noise_scale_ > 2 * N  # above the largest public eigenvalue (about n)
    public = [j for j in range(D) if j not in PRIVATE]
    centre, half = ls.target_map((-3, 4), True)
    ref = Ridge(alpha=1.0).fit(X[:, public], np.clip(y, -3, 4))
    np.testing.assert_allclose(est.coef_[public], ref.coef_, rtol=1e-8, atol=1e-10)
    assert est.intercept_ == pytest.approx(ref.intercept_, rel=1e-8)
    assert np.all(np.isfinite(est.coef_[PRIVATE]))


# -- the release: exact public blocks, noise as accounted --------------------------


@pytest.mark.parametrize("label_public", [True, False])
def test_public_blocks_are_exact(data, label_public):
    X, y = data
    est = FeatureDPLinearRegression(private_features=PRIVATE, label_public=label_public,
                                    y_bounds=(-3, 4), epsilon=0.5, random_state=0)
    stats, system, layout = _captured_system(est, X, y)
    public = np.r_[[j for j in range(D) if j not in PRIVATE], D]
    Xa = np.hstack([X, np.ones((N, 1))])
    np.testing.assert_allclose(system.G[np.ix_(public, public)],
                               Xa[:, public].T @ Xa[:, public], rtol=1e-12)
    centre, half = ls.target_map((-3, 4), True)
    exact_b = Xa[:, public].T @ ((y - centre) / half)
    if label_public:
        np.testing.assert_allclose(system.b[public], exact_b, rtol=1e-12)
        # With a public target the residual X_Qᵀ r is released instead of X_Qᵀy.
        assert set(est.block_noise_std_) == {"QP", "QQ", "Qr"}
    else:
        assert not np.allclose(system.b[public], exact_b)
        assert set(est.block_noise_std_) == {"QP", "QQ", "Qy", "Py"}


def test_noise_is_sigma_on_the_stacked_vector_and_sigma_over_w_per_block(data):
    """The released minus the exact blocks, per block, over the std the plan says:
    N(0, 1) entries (chi-square tolerance on the sample variance)."""
    X, y = data
    X = np.hstack([X] * 4) / 2  # 24 columns, 8 protected: 8 x 17 + 36 + 8 + 17 entries
    private = list(range(8))
    est = FeatureDPLinearRegression(private_features=private, y_bounds=(-3, 4),
                                    epsilon=1.0, random_state=3)
    stats, system, layout = _captured_system(est, X, y)
    std = est.block_noise_std_
    # w_k = σ / std_k, and the weighted stack has the sensitivity the accountant assumed.
    weighted = math.sqrt(math.fsum(((est.noise_multiplier_ / s) * layout.sensitivities[k]) ** 2
                                   for k, s in std.items()))
    assert weighted == pytest.approx(1.0, rel=1e-12)
    public = np.r_[[j for j in range(24) if j not in private], 24]
    pieces = [
        (system.G[np.ix_(private, public)] - stats.A_QP).ravel() / std["QP"],
        np.diag(system.G[np.ix_(private, private)] - stats.A_QQ) / std["QQ"],
        (system.G[np.ix_(private, private)] - stats.A_QQ)[np.triu_indices(8, 1)]
        / (std["QQ"] / math.sqrt(2)),
        (system.b[private] - stats.b_Q) / std["Qy"],
        (system.b[public] - stats.b_P) / std["Py"],
    ]
    z = np.concatenate(pieces)
    m = z.size
    # Sample variance of m standard normals: mean 1, std sqrt(2 / m); 5 stds.
    assert abs(np.mean(z**2) - 1.0) < 5 * math.sqrt(2.0 / m)
    assert abs(np.mean(z)) < 5 / math.sqrt(m)


def test_public_target_releases_the_residual_of_the_public_model(data):
    """Target public: the Qr block is X_Qᵀ clip(y − X~_P β) for the public Ridge β
    (numpy reference), its noise N(0, std_Qr²), and X_Qᵀy is not released."""
    X, y = data
    X = np.hstack([X] * 4) / 2
    private = list(range(8))
    est = FeatureDPLinearRegression(private_features=private, y_bounds=(-3, 4), alpha=2.0,
                                    label_public=True, epsilon=1.0, random_state=3)
    stats, system, layout = _captured_system(est, X, y)
    public = [j for j in range(24) if j not in private]
    centre, half = ls.target_map((-3, 4), True)
    yt = (np.clip(y, -3, 4) - centre) / half
    ref = Ridge(alpha=2.0, solver="cholesky").fit(X[:, public], yt)
    r = yt - ref.predict(X[:, public])
    # R: twice the rms residual, raised to the (k+1)-th largest |r| (k = ⌊16 σ √d_Q⌋).
    k = math.floor(ls.RESIDUAL_CLIP_RATE * est.noise_multiplier_ * math.sqrt(len(private)))
    kth = np.sort(np.abs(r))[::-1][k] if k < len(r) else 0.0
    R = min(ls.RESIDUAL_BOUND, max(2 * math.sqrt(np.mean(r**2)), kth))
    assert stats.residual_bound == pytest.approx(R, rel=1e-9)
    assert 0 < stats.n_residual_clipped == int(np.sum(np.abs(r) > R))  # this σ clips some
    r = np.clip(r, -R, R)
    np.testing.assert_allclose(stats.r_Q, X[:, private].T @ r, rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(stats.beta, np.r_[ref.coef_, ref.intercept_], rtol=1e-8)
    assert set(layout.sizes) == {"QP", "QQ", "Qr"}
    z = (system.r_Q - stats.r_Q) / est.block_noise_std_["Qr"]
    assert abs(np.mean(z**2) - 1.0) < 5 * math.sqrt(2.0 / z.size)
    assert layout.sensitivities["Qr"] == pytest.approx(1.0 * R)  # B_Q = 1
    assert est.privacy_plan_.details["residual_bound"] == layout.residual_bound


def test_residual_clip_vanishes_with_the_noise(data):
    """As σ → 0 no residual is clipped (R = the largest |r|, below 2), so the fit
    tends to Ridge on the clipped data; at a large σ R is twice the rms residual."""
    X, y = data
    public = [j for j in range(D) if j not in PRIVATE]
    centre, half = ls.target_map((-3, 4), True)
    yt = (np.clip(y, -3, 4) - centre) / half
    r = yt - Ridge(alpha=1.0, solver="cholesky").fit(X[:, public], yt).predict(X[:, public])
    assert np.abs(r).max() < ls.RESIDUAL_BOUND
    for sigma, want in ((1e-6, np.abs(r).max()), (1e3, 2 * math.sqrt(np.mean(r**2)))):
        est = FeatureDPLinearRegression(private_features=PRIVATE, y_bounds=(-3, 4),
                                        label_public=True, epsilon=None,
                                        noise_multiplier=sigma, random_state=0)
        stats, _, layout = _captured_system(est, X, y)
        assert stats.residual_bound == pytest.approx(want, rel=1e-9)
        assert stats.n_residual_clipped == int(np.sum(np.abs(r) > want * (1 + 1e-9)))
        assert layout.residual_bound == stats.residual_bound
    assert 2 * math.sqrt(np.mean(r**2)) < np.abs(r).max()  # the two cases differ


def test_protected_step_has_no_ridge_beyond_alpha(data):
    """Target public: the protected step solves (C + α I) θ_Q = X_Qᵀ r with C the
    Schur complement on the kept public directions (the top qp_rank, at least KEEP τ),
    eigenvalues below FLOOR τ raised to it (no extra ridge: bench_fdp_linear_rules.py,
    issue 19). Rebuilt from the release."""
    X, y = data
    for sigma in (1e-3, 200.0):
        est = FeatureDPLinearRegression(private_features=PRIVATE, y_bounds=(-3, 4),
                                        label_public=True, epsilon=None,
                                        noise_multiplier=sigma, random_state=0)
        _, system, layout = _captured_system(est, X, y)
        G, tau = system.G, system.noise_scale
        pub = [j for j in range(D) if j not in PRIVATE] + [D]
        d_pen = np.r_[np.ones(len(pub) - 1), 0.0]
        lam, V = np.linalg.eigh(G[np.ix_(pub, pub)] + np.diag(1.0 * d_pen))
        lam, V = lam[::-1], V[:, ::-1]
        kept = lam >= ls.KEEP[True] * tau
        if system.qp_rank is not None:
            assert kept[:system.qp_rank].all()  # every released direction is kept
            kept[system.qp_rank:] = False
        W = G[np.ix_(PRIVATE, pub)] @ V[:, kept]
        C = G[np.ix_(PRIVATE, PRIVATE)] - (W / lam[kept]) @ W.T
        mu, U = np.linalg.eigh(C + 1.0 * np.eye(len(PRIVATE)))
        floor = ls.FLOOR[True] * tau
        want = U @ ((U.T @ system.r_Q) / np.maximum(mu, floor))
        centre, half = ls.target_map((-3, 4), True)
        np.testing.assert_allclose(est.coef_[PRIVATE] / half, want, rtol=1e-9, atol=1e-14)
        assert (mu < floor).any() == (sigma > 1)  # the floor acts only at the large σ


def test_public_target_releases_the_top_public_directions_only(data):
    """Target public: X_QᵀX~_P is released as X_QᵀX~_P V_k, V_k the top k eigenvectors
    of the public X~_PᵀX~_P + α D (public), k the largest rank the solver keeps at the
    layout's own noise scale (λ_k >= KEEP τ(k)); the whole block as σ → 0."""
    X, y = data
    d_p1 = D - len(PRIVATE) + 1
    for sigma, whole in ((1e-3, True), (30.0, False)):
        est = FeatureDPLinearRegression(private_features=PRIVATE, y_bounds=(-3, 4),
                                        label_public=True, epsilon=None,
                                        noise_multiplier=sigma, random_state=0)
        stats, system, layout = _captured_system(est, X, y)
        lam, V = ls.public_eigenbasis(stats.G_PP, 1.0, True)
        if whole:
            assert layout.qp_basis is None and system.qp_rank is None
            assert layout.sizes["QP"] == len(PRIVATE) * d_p1
            continue
        k = layout.qp_basis.shape[1]
        assert 1 <= k < d_p1 and system.qp_rank == k
        assert layout.sizes["QP"] == len(PRIVATE) * k
        np.testing.assert_allclose(np.abs(layout.qp_basis.T @ V[:, :k]), np.eye(k), atol=1e-10)
        tau = ls.noise_scale(layout, sigma)
        assert lam[k - 1] >= ls.KEEP[True] * tau  # the k released directions are kept ...
        bigger = ls.with_residual_bound(layout, layout.residual_bound, V[:, :k + 1])
        assert lam[k] < ls.KEEP[True] * ls.noise_scale(bigger, sigma)  # ... and k + 1 are not
        # The noisy QP block of the system is the released projections, mapped back.
        A = system.G[np.ix_(PRIVATE, [j for j in range(D) if j not in PRIVATE] + [D])]
        released = A @ layout.qp_basis
        np.testing.assert_allclose(A, released @ layout.qp_basis.T, atol=1e-9)
        z = (released - stats.A_QP @ layout.qp_basis) / est.block_noise_std_["QP"]
        assert abs(np.mean(z**2) - 1.0) < 5 * math.sqrt(2.0 / z.size)


def test_residuals_beyond_the_bound_are_clipped(data):
    """Each public residual is clipped to ±R <= RESIDUAL_BOUND before X_Qᵀ r, and
    counted (a bound of 0.1 here, below twice the rms residual, so that many are)."""
    X, y = data
    lay = ls.statistic_layout(np.isin(np.arange(D), PRIVATE, invert=True), fit_intercept=True,
                              label_public=True, public_bound=1.0, private_bound=1.0,
                              neighboring="add_remove")
    with mock.patch.object(ls, "RESIDUAL_BOUND", 0.1):
        stats = ls.sufficient_statistics(X, y, lay, (-3.0, 4.0), alpha=1.0)
    public = [j for j in range(D) if j not in PRIVATE]
    centre, half = ls.target_map((-3, 4), True)
    yt = (np.clip(y, -3, 4) - centre) / half
    r = yt - Ridge(alpha=1.0, solver="cholesky").fit(X[:, public], yt).predict(X[:, public])
    assert 2 * math.sqrt(np.mean(r**2)) > 0.1 == stats.residual_bound
    assert stats.n_residual_clipped == int(np.sum(np.abs(r) > 0.1)) > N // 10
    np.testing.assert_allclose(stats.r_Q, X[:, PRIVATE].T @ np.clip(r, -0.1, 0.1),
                               rtol=1e-8, atol=1e-9)


def test_stacked_vector_sensitivity_is_normalised(data):
    for relation, target in (("add_remove", 1.0), ("replace", 2.0)):
        for label_public in (True, False):
            mask = np.ones(D, dtype=bool)
            mask[PRIVATE] = False
            lay = ls.statistic_layout(mask, fit_intercept=True, label_public=label_public,
                                      public_bound=0.7, private_bound=0.3, neighboring=relation)
            total = math.sqrt(sum((lay.weights[k] * lay.sensitivities[k]) ** 2
                                  for k in lay.weights))
            assert total == pytest.approx(target, rel=1e-12)
            assert lay.sensitivity == target


def test_triangle_vector_has_the_frobenius_norm():
    """Off-diagonal × √2: ‖triu(q qᵀ)‖ = ‖q qᵀ‖_F = ‖q‖², exactly; and the round trip."""
    rng = np.random.default_rng(1)
    for q in (rng.standard_normal(5), np.eye(5)[2], np.ones(5) / math.sqrt(5)):
        v = ls._triu(np.outer(q, q))
        assert np.linalg.norm(v) == pytest.approx(np.linalg.norm(q) ** 2, rel=1e-12)
        np.testing.assert_allclose(ls._untriu(v, 5), np.outer(q, q), atol=1e-15)
    # Replacement: ‖q qᵀ − q' q'ᵀ‖_F ≤ √2 B² and reached by orthogonal q, q'.
    e1, e2 = np.eye(5)[0], np.eye(5)[1]
    diff = np.linalg.norm(ls._triu(np.outer(e1, e1) - np.outer(e2, e2)))
    assert diff == pytest.approx(math.sqrt(2.0))


# -- the positive-definiteness rule ----------------------------------------------


@pytest.mark.parametrize("solver", ["residual", "joint"])
def test_solution_is_finite_under_huge_noise_and_singular_data(solver):
    rng = np.random.default_rng(2)
    X = rng.uniform(0, 1, size=(200, 5))
    X[:, 1] = X[:, 0]  # duplicate column
    X[:, 3] = 0.0  # constant column
    y = rng.standard_normal(200)
    for sigma in (1e-3, 1.0, 1e4):
        for alpha in (0.0, 1.0):
            est = FeatureDPLinearRegression(private_features=[0, 3], y_bounds=(-3, 3),
                                            row_norm_bounds=2.0, alpha=alpha, solver=solver,
                                            epsilon=None, noise_multiplier=sigma,
                                            random_state=0, delta=1e-3).fit(X, y)
            assert np.all(np.isfinite(est.coef_)) and np.isfinite(est.intercept_)
            assert np.all(np.isfinite(est.predict(X)))


def test_floor_raises_only_eigenvalues_below_it():
    G = np.diag([4.0, 1e-6, -3.0])
    system = ls.NoisySystem(G, np.ones(3), 0.5, 0.0)
    lay = ls.statistic_layout(np.array([True, True, False]), fit_intercept=False,
                              label_public=True, public_bound=1.0, private_bound=1.0,
                              neighboring="add_remove")
    theta, raised = ls.solve_noisy_ridge(system, 0.0, False, lay, "joint")
    np.testing.assert_allclose(theta, [0.25, 2.0, 2.0])
    assert raised == 2


# -- parameters and their errors -----------------------------------------------------


@pytest.mark.parametrize("bounds, match", [
    (None, r"needs y_bounds=\(lo, hi\)"),
    ((3, 3), "lo < hi"),
    ((4, 1), "lo < hi"),
    ((0, np.inf), "finite"),
    ((1, 2, 3), "pair"),
    ("ab", "pair"),
])
def test_y_bounds_errors(data, bounds, match):
    X, y = data
    est = FeatureDPLinearRegression(private_features=PRIVATE, y_bounds=bounds)
    with pytest.raises(ValueError, match=match):
        est.fit(X, y)
    assert not hasattr(est, "coef_")


def test_clipped_targets_are_counted_in_a_warning(data):
    X, y = data
    y = y.copy()
    y[:3] = [100.0, -100.0, 50.0]
    with pytest.warns(FdpWarning, match=r"3 of 3000 target value\(s\) lie outside y_bounds"):
        FeatureDPLinearRegression(private_features=PRIVATE, y_bounds=(-3, 4),
                                  random_state=0).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FdpWarning)
        FeatureDPLinearRegression(private_features=PRIVATE, y_bounds=(-100, 100),
                                  random_state=0).fit(X, y)


@pytest.mark.parametrize("label_public", [False, True])
def test_clipped_target_count_says_when_it_is_not_private(data, label_public):
    # The count reads the targets: with a private target the warning must say
    # that it is outside ε (the threat model lets an attacker read printed lines).
    X, y = data
    y = y.copy()
    y[:2] = [100.0, -100.0]
    with pytest.warns(FdpWarning, match="lie outside") as rec:
        FeatureDPLinearRegression(private_features=PRIVATE, y_bounds=(-3, 4),
                                  label_public=label_public, random_state=0).fit(X, y)
    text = " ".join(str(w.message) for w in rec if "lie outside" in str(w.message))
    assert ("not covered by epsilon_" in text) is (not label_public)


@pytest.mark.parametrize("value, match", [
    (0.0, "public row-norm bound"),
    ((1.0, -1.0), "protected row-norm bound"),
    ((np.inf, 1.0), "public row-norm bound"),
    ((1.0, 2.0, 3.0), "must be a number, a pair"),
    ("x", "must be a number, a pair"),
])
def test_row_norm_bound_errors(data, value, match):
    X, y = data
    with pytest.raises(ValueError, match=match):
        FeatureDPLinearRegression(private_features=PRIVATE, y_bounds=(-3, 4),
                                  row_norm_bounds=value).fit(X, y)


def test_row_norm_bounds_from_a_schema(data):
    X, y = data
    bounds = RowNormBounds(1.0, 0.9, 0.8)
    est = FeatureDPLinearRegression(private_features=PRIVATE, y_bounds=(-3, 4),
                                    row_norm_bounds=bounds, random_state=0).fit(X, y)
    assert est.row_norm_bounds_ == (0.9, 0.8)
    # A schema without protected columns gives 0 for the protected block: fine for label DP.
    FeatureDPLinearRegression(private_features=[], y_bounds=(-3, 4),
                              row_norm_bounds=RowNormBounds(1.0, 1.0, 0.0)).fit(X, y)


def test_public_rows_above_their_bound_are_counted_in_a_warning(data):
    """Free (public columns only); protected rows above theirs are not counted."""
    X, y = data
    X = X.copy()
    X[:5, 2:] = 3.0  # 5 public blocks above 1
    X[5:9, :2] = 3.0  # 4 protected blocks above 1: not reported
    with pytest.warns(FdpWarning, match=r"^5 of 3000 rows .* public columns"):
        FeatureDPLinearRegression(private_features=PRIVATE, y_bounds=(-3, 4),
                                  random_state=0).fit(X, y)


def test_input_is_not_mutated(data):
    X, y = data
    X2, y2 = X * 5, y * 5
    Xc, yc = X2.copy(), y2.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FdpWarning)
        FeatureDPLinearRegression(private_features=PRIVATE, y_bounds=(-3, 4),
                                  random_state=0).fit(X2, y2)
    np.testing.assert_array_equal(X2, Xc)
    np.testing.assert_array_equal(y2, yc)


# -- label DP, privacy attributes --------------------------------------------------


def test_label_dp_noises_only_the_target_block(data):
    X, y = data
    est = FeatureDPLinearRegression(private_features=[], y_bounds=(-3, 4), epsilon=1.0,
                                    random_state=0).fit(X, y)
    assert set(est.block_noise_std_) == {"Py"}
    assert est.noise_scale_ == 0.0
    assert est.privacy_plan_.unit == "label"
    assert est.private_features_.tolist() == []
    assert est.score(X, y) > 0.9
    with pytest.raises(ValueError, match="nothing is protected"):
        FeatureDPLinearRegression(private_features=[], label_public=True,
                                  y_bounds=(-3, 4)).fit(X, y)


@pytest.mark.parametrize("neighboring", ["add_remove", "replace"])
def test_privacy_attributes(data, neighboring):
    X, y = data
    est = FeatureDPLinearRegression(private_features=PRIVATE, label_public=True,
                                    y_bounds=(-3, 4), epsilon=0.5, neighboring=neighboring,
                                    random_state=0).fit(X, y)
    assert est.epsilon_ <= 0.5
    assert est.epsilon_ > 0.49
    assert est.delta_ == 1e-5
    assert est.privacy_plan_.unit == "features"
    assert est.privacy_plan_.dp_event == est.dp_event_
    assert est.public_features_.tolist() == [2, 3, 4, 5]
    assert est.label_public_ is True
    plan = est.privacy_plan(N, D)
    assert plan == est.privacy_plan_
    # The fitted σ re-accounts to the reported ε.
    from sklearn_fdp import accounting

    eps = accounting.epsilon_of_event(est.dp_event_, 1e-5, accountant="pld",
                                      neighboring=neighboring)
    assert eps == pytest.approx(est.epsilon_, rel=1e-6)


def test_given_noise_multiplier_over_budget_raises(data):
    from sklearn_fdp import BudgetExceededError

    X, y = data
    with pytest.raises(BudgetExceededError):
        FeatureDPLinearRegression(private_features=PRIVATE, y_bounds=(-3, 4), epsilon=0.1,
                                  noise_multiplier=1.0).fit(X, y)
    with pytest.raises(ValueError, match="give `epsilon`"):
        FeatureDPLinearRegression(private_features=PRIVATE, y_bounds=(-3, 4), epsilon=None,
                                  noise_multiplier=None).fit(X, y)


def test_secure_noise_runs(data):
    X, y = data
    a = FeatureDPLinearRegression(private_features=PRIVATE, y_bounds=(-3, 4), noise="secure",
                                  random_state=0).fit(X, y)
    b = FeatureDPLinearRegression(private_features=PRIVATE, y_bounds=(-3, 4), noise="secure",
                                  random_state=0).fit(X, y)
    assert not np.array_equal(a.coef_, b.coef_)  # the OS CSPRNG, not random_state
    assert a.epsilon_ == b.epsilon_


# -- input kinds --------------------------------------------------------------------


def test_csr_and_float32(data):
    X, y = data
    kwargs = dict(private_features=PRIVATE, y_bounds=(-3, 4), epsilon=1.0, random_state=0)
    dense = FeatureDPLinearRegression(**kwargs).fit(X, y)
    sparse = FeatureDPLinearRegression(**kwargs).fit(sp.csr_matrix(X), y)
    np.testing.assert_allclose(sparse.coef_, dense.coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(sparse.predict(sp.csr_matrix(X)), dense.predict(X), rtol=1e-9)
    single = FeatureDPLinearRegression(**kwargs).fit(X.astype(np.float32), y)
    assert single.coef_.dtype == np.float32
    # float32 input rounds X by 6e-8 relative; the same noise draw otherwise.
    np.testing.assert_allclose(single.coef_, dense.coef_, rtol=1e-4, atol=1e-4)


def test_reproducible_pickle_and_score(data):
    X, y = data
    est = FeatureDPLinearRegression(private_features=PRIVATE, y_bounds=(-3, 4),
                                    random_state=0).fit(X, y)
    again = FeatureDPLinearRegression(private_features=PRIVATE, y_bounds=(-3, 4),
                                      random_state=0).fit(X, y)
    np.testing.assert_array_equal(est.coef_, again.coef_)
    loaded = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))
    assert est.score(X, y) == pytest.approx(r2_score(y, est.predict(X)))


def test_feature_names_in_a_private_pipeline():
    from sklearn_fdp.pipeline import make_private_pipeline

    rng = np.random.default_rng(0)
    n = 2000
    df = pd.DataFrame({"age": rng.uniform(0, 1, n), "sex": rng.choice(["F", "M"], n),
                       "hours": rng.uniform(0, 1, n)})
    y = 2 * df["age"] + (df["sex"] == "M") + rng.normal(0, 0.1, n)
    pre = ColumnTransformer([("num", "passthrough", ["age", "hours"]),
                             ("cat", OneHotEncoder(categories=[["F", "M"]]), ["sex"])],
                            sparse_threshold=1.0)
    pipe = make_private_pipeline(
        pre, FeatureDPLinearRegression(private_features=["sex"], label_public=True,
                                       y_bounds=(-1, 4), row_norm_bounds=(2.0, 1.0),
                                       epsilon=1.0, random_state=0))
    pipe.fit(df, y)
    reg = pipe[-1]
    assert reg.private_features_.tolist() == [2, 3]
    assert reg.privacy_plan_.protected_features == ("cat__sex_F", "cat__sex_M")
    assert pipe.score(df, y) > 0.8
    # A plain pipeline on a DataFrame output works with names too.
    plain = make_pipeline(FunctionTransformer(lambda Z: Z),
                          FeatureDPLinearRegression(private_features=["sex_M"],
                                                    y_bounds=(-1, 4), row_norm_bounds=2.0,
                                                    random_state=0))
    frame = pd.DataFrame({"age": df["age"], "sex_M": (df["sex"] == "M").astype(float)})
    plain.fit(frame, y)
    assert plain[-1].private_features_.tolist() == [1]


# -- the documentation ------------------------------------------------------------------


def test_docs_regression_snippets_run(capsys):
    from .._helpers import run_doc_blocks

    namespace = run_doc_blocks("regression.md", 2)
    out = capsys.readouterr().out
    assert out.count("test R²: ") >= 2
    assert "total epsilon" in out
    assert "the label only (label DP" in out
    assert namespace["model"][-1].epsilon_ <= 0.1


# ========================================= method: never dominated by DP-SGD (issue 32)


def _unit_target_data(n=400, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-0.3, 0.3, (n, 4))
    y = np.clip(0.4 + X @ [0.5, -0.5, 0.2, 0.1] + 0.05 * rng.standard_normal(n), 0.0, 1.0)
    return X, y


@pytest.mark.parametrize(("kwargs", "expected"), [
    (dict(private_features=PRIVATE, y_bounds=(0.0, 1.0)), "dpsgd"),
    (dict(private_features=PRIVATE, y_bounds=(-1.0, 1.0)), "dpsgd"),
    (dict(private_features=PRIVATE, y_bounds=(-1.0, 1.0 + 1e-9)), "sufficient_statistic"),
    (dict(private_features=PRIVATE, y_bounds=(0.0, 20.0)), "sufficient_statistic"),
    (dict(private_features=PRIVATE, y_bounds=(0.0, 1.0), label_public=True),
     "sufficient_statistic"),
    (dict(private_features=[], y_bounds=(0.0, 1.0)), "sufficient_statistic"),  # label DP
    (dict(private_features=PRIVATE, y_bounds=(0.0, 20.0), method="dpsgd"), "dpsgd"),
    (dict(private_features=PRIVATE, y_bounds=(0.0, 1.0), method="sufficient_statistic"),
     "sufficient_statistic"),
])
def test_auto_method_rule(kwargs, expected):
    """The auto rule: DP-SGD on the whole record iff the target and some column are private
    and y_bounds lies within [-1, 1]; the plan (public) and the fit say the same."""
    X, y = _unit_target_data()
    est = FeatureDPLinearRegression(epsilon=1.0, random_state=0, **kwargs)
    assert est.privacy_plan(*X.shape).details["method"] == expected
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FdpWarning)
        est.fit(X, y)
    assert est.method_ == expected == est.privacy_plan_.details["method"]
    mechanism = est.privacy_plan_.details["mechanism"]
    assert ("DP-SGD on the whole record" in mechanism) == (expected == "dpsgd")
    assert ("DP-SGD on the whole record" in est.privacy_plan_.description) == (
        expected == "dpsgd")


@pytest.mark.parametrize("neighboring", ["add_remove", "replace"])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_whole_record_branch_is_dpsgd_regressor_bit_for_bit(neighboring, fit_intercept):
    from sklearn_fdp import DPSGDRegressor

    X, y = _unit_target_data()
    kw = dict(epsilon=0.5, delta=1e-5, neighboring=neighboring, fit_intercept=fit_intercept,
              random_state=3)
    fdp = FeatureDPLinearRegression(private_features=PRIVATE, y_bounds=(0.0, 1.0), **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FdpWarning)  # DPSGDRegressor: no y_bounds given
        ref = DPSGDRegressor(**kw).fit(X, y)
    fdp.fit(X, y)
    assert fdp.method_ == "dpsgd"
    np.testing.assert_array_equal(fdp.coef_, ref.coef_)
    assert fdp.intercept_ == (float(ref.intercept_[0]) if fit_intercept else 0.0)
    assert fdp.epsilon_ == ref.epsilon_ and fdp.noise_multiplier_ == ref.noise_multiplier_
    assert fdp.accountant_ == ref.accountant_
    assert repr(fdp.dp_event_) == repr(ref.dp_event_)
    assert fdp.privacy_plan_.schedule == ref.privacy_plan_.schedule
    assert fdp.privacy_plan_.label_protected
    assert fdp.block_noise_std_ == {}
    # predict clips to y_bounds (post-processing): never further from y than DPSGDRegressor
    Xt = X * 5.0
    np.testing.assert_array_equal(fdp.predict(Xt), np.clip(ref.predict(Xt), 0.0, 1.0))


def test_whole_record_branch_clips_the_target_and_warns():
    X, y = _unit_target_data()
    y_out = y.copy()
    y_out[:3] = [5.0, -7.0, 1e6]
    est = FeatureDPLinearRegression(private_features=PRIVATE, y_bounds=(0.0, 1.0),
                                    epsilon=1.0, random_state=0)
    with pytest.warns(FdpWarning, match="3 of 400"):
        est.fit(X, y_out)
    ref = FeatureDPLinearRegression(private_features=PRIVATE, y_bounds=(0.0, 1.0),
                                    epsilon=1.0, random_state=0).fit(X, np.clip(y_out, 0, 1))
    np.testing.assert_array_equal(est.coef_, ref.coef_)
    assert y_out[2] == 1e6  # the input is not modified


def test_dpsgd_method_refuses_a_public_target():
    X, y = _unit_target_data()
    est = FeatureDPLinearRegression(private_features=PRIVATE, y_bounds=(0.0, 1.0),
                                    label_public=True, method="dpsgd")
    with pytest.raises(ValueError, match="label_public=True declares the target public"):
        est.fit(X, y)

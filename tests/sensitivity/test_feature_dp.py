"""Sensitivity of FeatureDPLogisticRegression's private releases.

Three mechanism paths, each checked on the pre-noise quantity the estimator
actually noises, built by ``fit`` itself (the engine call / the statistic's
release is intercepted, so the oracle, its clip and its random streams are
exactly the fit's):

* FDP Algorithm 1 (``method="alg1"``): the private oracle's clipped sum
  ``Σ_i clip(∇ℓ − ∇ℓ_pub)`` over a batch, for ``public_loss`` ``"mask"`` and
  ``"gaussian_pad"``, label public and private, binary and multiclass;
* FDP (DP-SGD) (``method="dpsgd"``): plain DP-SGD's clipped sum of whole
  gradients after public pretraining;
* label DP by one release (``method="sufficient_statistic"``): the clipped
  sum ``Σ_i clip(x~_i (π − e_{y_i})ᵀ)``.

Relations and bounds, as the accounting assumes them. The noise of a private
sum is ``σ · C`` with ``C = EngineConfig.max_grad_norm`` (the clip the oracle
uses: checked below), and ``dp_event_`` is the Poisson-subsampled Gaussian of
that σ, accounted under ``neighboring``:

* ``neighboring="add_remove"`` (FDP Def. 6, the simulator knows the public
  part of the removed record): removing one record moves the sum by ≤ ``C``;
* ``neighboring="replace"`` (Def. 5: the private part changes, Ψ(x) is kept):
  replacing a record's protected values, and its label when the label is
  private, moves it by ≤ ``2C``.

Every Poisson batch is coupled by its coins (the record is in the batch or
not); the batch here is the whole data (q = 1), the worst case. Gaussian
padding of the private batch (``"gaussian_pad"``) is coupled per record
(each record keeps its padding), which is valid when the attacker cannot
predict the padding stream; the known-seed coupling of secure mode is tested
separately (issue 16 item 5).
"""

from unittest import mock

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from sklearn_fdp import FeatureDPLogisticRegression
from sklearn_fdp._mechanisms import fdp, label_statistic
from sklearn_fdp.linear import _feature_dp_logistic

from ._harness import (
    SCALES,
    adversarial_dense,
    assert_sensitivity,
    remove_one,
    replace_columns,
    replace_label,
)


class _Stop(Exception):
    """Raised by the interceptors below once the fit has built what it releases."""


def engine_inputs(est, X, y):
    """``(private_oracle, theta0, config)`` that ``est.fit(X, y)`` hands to the engine."""
    seen = {}

    def capture(theta0, private_oracle, n_samples, config, **kwargs):
        seen.update(oracle=private_oracle, theta0=theta0, config=config, n=n_samples)
        raise _Stop

    with mock.patch.object(_feature_dp_logistic, "run_dp_sgd", capture), pytest.raises(_Stop):
        est.fit(X, y)
    assert seen["n"] == X.shape[0]
    return seen


def simulator_inputs(est, X, y, i):
    """:func:`engine_inputs` of the Def. 6 simulator for ``D' = D`` minus record ``i``.

    The simulator knows the removed record's public part, so it runs the
    estimator's own fit on ``D'`` with ``public_scale_`` computed from the
    public parts of all of ``D`` (the factor ``fit`` divides ``X`` by before
    the public steps, issue 22 item 5), as the fit on ``D`` does. A removed
    record with the largest public row otherwise changes the scale of every
    other record's term, which Def. 6 allows (it is a function of public
    parts) but the per-record coupling below does not model.
    """
    public_mask = np.ones(X.shape[1], dtype=bool)
    public_mask[est.private_features] = False
    scale = fdp.public_scale(X, public_mask)  # public parts only
    X2, y2 = remove_one(X, y, i)
    with mock.patch.object(fdp, "public_scale", lambda *args: scale):
        return engine_inputs(est, X2, y2)


def statistic_inputs(est, X, y):
    """``(oracle, theta, noise_std)`` of the one release of ``method="sufficient_statistic"``."""
    seen = {}

    def capture(private_oracle, n_samples, theta, noise_std, noise_rng):
        seen.update(oracle=private_oracle, theta=theta, noise_std=noise_std, n=n_samples)
        raise _Stop

    with mock.patch.object(label_statistic, "release_private_sum", capture), \
            pytest.raises(_Stop):
        est.fit(X, y)
    assert seen["n"] == X.shape[0]
    return seen


class FixedDraws:
    """A stand-in generator whose ``standard_normal`` returns given rows (the padding)."""

    def __init__(self, rows):
        self.rows = np.asarray(rows, dtype=np.float64)

    def standard_normal(self, size=None, dtype=np.float64):
        assert tuple(size) == self.rows.shape, (size, self.rows.shape)
        return self.rows.copy()


def _labels(n, k, seed):
    """Labels with every one of ``k`` classes at least twice (n >= 2k)."""
    y = np.arange(n) % k
    return np.random.default_rng(seed).permutation(y)


def _estimator(private_idx, *, method, label_public, public_loss, neighboring, clip,
               noise="default", random_state=0):
    return FeatureDPLogisticRegression(
        private_features=[int(j) for j in private_idx],
        label_public=label_public, public_loss=public_loss, method=method,
        max_grad_norm=clip, noise_multiplier=1.0, epsilon=None, epochs=1.0, alpha=1.0,
        public_epochs=0, neighboring=neighboring,
        accountant="pld" if neighboring == "replace" else "rdp",
        random_state=random_state, noise=noise)


def _release_engine(inputs, theta, padding):
    """The private oracle's clipped sum over every record, with the given private padding."""
    oracle = inputs["oracle"]
    if padding is not None and getattr(oracle, "view", None) is not None and oracle.view.pad:
        oracle.pad_rng = FixedDraws(padding)
    return oracle(np.arange(inputs["n"]), theta.astype(inputs["theta0"].dtype))


def check_engine_neighbours(X, y, private_idx, *, method, label_public, public_loss, clip,
                            relation, i, theta, pad_seed, new_values=None, new_label=None):
    """One sensitivity check of an engine-run method (alg1 / dpsgd) under ``relation``."""
    neighboring = "add_remove" if relation == "remove" else "replace"
    est = _estimator(private_idx, method=method, label_public=label_public,
                     public_loss=public_loss, neighboring=neighboring, clip=clip)
    n = X.shape[0]
    padding = np.random.default_rng(pad_seed).standard_normal((n, len(private_idx)))
    if relation == "remove":
        padding2 = np.delete(padding, i, axis=0)
        factor = 1.0
    else:
        X2, y2, padding2 = X, y, padding
        if new_values is not None:
            X2 = replace_columns(X, i, private_idx, new_values)
        if new_label is not None:
            assert not label_public
            y2 = replace_label(y, i, new_label)
        factor = 2.0
    a = engine_inputs(est, X, y)
    b = simulator_inputs(est, X, y, i) if relation == "remove" else engine_inputs(est, X2, y2)
    C = a["config"].max_grad_norm
    # One source of truth: the oracle clips at the C the noise is scaled to.
    assert a["oracle"].max_grad_norm == C == b["config"].max_grad_norm == clip
    theta = np.broadcast_to(theta, a["theta0"].shape)
    ra = _release_engine(a, theta, padding)
    rb = _release_engine(b, theta, padding2)
    return assert_sensitivity(ra, rb, factor * C, n_terms=n, clip=C, dtype=X.dtype,
                              what=f"{method}/{public_loss}/label_public={label_public}"
                                   f"/{relation}")


# -- strategies -----------------------------------------------------------------------


@st.composite
def fdp_problem(draw, *, all_public=False):
    """``(X, y, private_idx, i, theta)`` on adversarial data (dense or canonical CSR)."""
    k = draw(st.sampled_from((2, 3)))
    X, private_idx = draw(adversarial_dense(n_rows=(2 * k + 1, 12), n_cols=(2, 6)))
    if all_public:
        private_idx = np.array([], dtype=int)
    n, d = X.shape
    y = _labels(n, k, draw(st.integers(0, 2**16)))
    i = draw(st.integers(0, n - 1))
    n_out = 1 if k == 2 else k
    theta_scale = draw(st.sampled_from((0.0, 0.1, 1.0, 30.0)))
    theta = np.random.default_rng(draw(st.integers(0, 2**16))).standard_normal(
        (d + 1, n_out)) * theta_scale
    if draw(st.booleans()):
        X = sp.csr_matrix(X)  # canonical CSR (duplicates are issue 16 item 3's tests)
    return X, y, private_idx, i, theta


def _new_private_values(draw, m, dtype):
    scale = draw(st.sampled_from(SCALES))
    kind = draw(st.sampled_from(("normal", "zero", "onehot")))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    if kind == "normal":
        return (rng.standard_normal(m) * scale).astype(dtype)
    v = np.zeros(m, dtype=dtype)
    if kind == "onehot":
        v[rng.integers(0, m)] = 1.0
    return v


_SETTINGS = settings(max_examples=150, deadline=None, derandomize=True)
_CLIPS = (0.5, 1e-3, 3.0)


# -- FDP Algorithm 1 -------------------------------------------------------------------


@pytest.mark.parametrize("public_loss", ["mask", "gaussian_pad"])
@pytest.mark.parametrize("label_public", [True, False])
@_SETTINGS
@given(problem=fdp_problem(), clip=st.sampled_from(_CLIPS), pad_seed=st.integers(0, 99))
def test_alg1_remove_one_moves_the_private_sum_by_at_most_C(public_loss, label_public,
                                                             problem, clip, pad_seed):
    X, y, private_idx, i, theta = problem
    check_engine_neighbours(X, y, private_idx, method="alg1", label_public=label_public,
                            public_loss=public_loss, clip=clip, relation="remove", i=i,
                            theta=theta, pad_seed=pad_seed)


@pytest.mark.parametrize("public_loss", ["mask", "gaussian_pad"])
@pytest.mark.parametrize("label_public", [True, False])
@_SETTINGS
@given(problem=fdp_problem(), clip=st.sampled_from(_CLIPS), pad_seed=st.integers(0, 99),
       data=st.data())
def test_alg1_replacing_the_private_part_moves_the_private_sum_by_at_most_2C(
        public_loss, label_public, problem, clip, pad_seed, data):
    X, y, private_idx, i, theta = problem
    values = _new_private_values(data.draw, len(private_idx), X.dtype)
    new_label = None
    if not label_public:
        new_label = data.draw(st.sampled_from(sorted(set(np.unique(y)) - {y[i]})))
        if data.draw(st.booleans()):
            values = None  # the label alone
    check_engine_neighbours(X, y, private_idx, method="alg1", label_public=label_public,
                            public_loss=public_loss, clip=clip, relation="replace", i=i,
                            theta=theta, pad_seed=pad_seed, new_values=values,
                            new_label=new_label)


def _large_public_scale(n, d, n_priv, scale, dtype, k, seed, private_scale=1.0):
    """Public columns of ``scale``, private ones of ``private_scale``: item 4's failing inputs."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * scale
    private_idx = np.arange(d - n_priv, d)
    X[:, private_idx] = rng.standard_normal((n, n_priv)) * private_scale
    return X.astype(dtype), _labels(n, k, seed), private_idx


@pytest.mark.parametrize("dtype,scale", [(np.float32, 3e3), (np.float32, 1e4),
                                         (np.float64, 1e8)])
@pytest.mark.parametrize("public_loss", ["mask", "gaussian_pad"])
@pytest.mark.parametrize("label_public", [True, False])
@pytest.mark.parametrize("k", [2, 3])
def test_alg1_large_public_columns_do_not_break_the_clip(dtype, scale, public_loss,
                                                         label_public, k):
    # Issue 16 item 4: the closed form ‖a‖²‖b‖² + ‖c‖²‖d‖² − 2(a·c)(b·d) cancels
    # when the public columns are large, and one record's clipped contribution
    # reached 2.2-2.8 C (float32 from a public scale of 3e3, float64 at 1e8).
    # With a public label and θ ≈ 0 on the private columns, r ≈ r_pub: the
    # whole private gradient is x_priv rᵀ, lost in the rounding of ‖x‖² ≈ ‖x_pub‖².
    X, y, private_idx = _large_public_scale(40, 6, 2, scale, dtype, k, seed=1,
                                            private_scale=3.0)
    n_out = 1 if k == 2 else k
    for seed in range(4):
        theta = np.random.default_rng(seed).standard_normal((7, n_out)) / scale
        theta[private_idx] = (0.0 if seed % 2 else
                              np.random.default_rng(seed + 10).standard_normal((2, n_out)))
        for i in (0, 17, 39):
            check_engine_neighbours(X, y, private_idx, method="alg1",
                                    label_public=label_public, public_loss=public_loss,
                                    clip=0.5, relation="remove", i=i, theta=theta,
                                    pad_seed=seed)


@pytest.mark.parametrize("dtype,scale", [(np.float32, 1e3), (np.float64, 1e8)])
@pytest.mark.parametrize("public_loss", ["mask", "gaussian_pad"])
@pytest.mark.parametrize("label_public", [True, False])
def test_alg1_public_rescaling_keeps_the_sensitivity(dtype, scale, public_loss, label_public):
    # Issue 22 item 5: fit divides X by public_scale_ = max(1, max ‖x_pub‖)
    # before the public steps. Worst cases: the record holding the largest
    # public row is the one removed (the simulator knows its public part) or
    # gets huge private values (the scale reads public columns only).
    X, y, private_idx = _large_public_scale(24, 5, 2, scale, dtype, 2, seed=5,
                                            private_scale=scale)
    public_mask = np.ones(5, dtype=bool)
    public_mask[private_idx] = False
    X[3, public_mask] *= 100  # an outlier: removing it divides f by ~30
    largest = int(np.argmax(np.linalg.norm(X[:, public_mask].astype(np.float64), axis=1)))
    assert largest == 3
    f = fdp.public_scale(X, public_mask)
    assert f > scale
    est = _estimator(private_idx, method="alg1", label_public=label_public,
                     public_loss=public_loss, neighboring="add_remove", clip=0.5)
    assert est.fit(X, y).public_scale_ == f
    theta = np.random.default_rng(6).standard_normal((6, 1))
    for i in (largest, (largest + 1) % 24):
        check_engine_neighbours(X, y, private_idx, method="alg1", label_public=label_public,
                                public_loss=public_loss, clip=0.5, relation="remove", i=i,
                                theta=theta, pad_seed=i)
        values = np.full(2, 1e6 * scale, dtype=dtype)
        assert fdp.public_scale(
            replace_columns(X, i, private_idx, values), public_mask) == f
        check_engine_neighbours(X, y, private_idx, method="alg1", label_public=label_public,
                                public_loss=public_loss, clip=0.5, relation="replace", i=i,
                                theta=theta, pad_seed=i, new_values=values,
                                new_label=None if label_public else 1 - y[i])


# -- FDP (DP-SGD) ---------------------------------------------------------------------


@pytest.mark.parametrize("relation", ["remove", "replace"])
@_SETTINGS
@given(problem=fdp_problem(), clip=st.sampled_from(_CLIPS), data=st.data())
def test_dpsgd_method_private_sum_sensitivity(relation, problem, clip, data):
    X, y, private_idx, i, theta = problem
    label_public = data.draw(st.booleans())
    values, new_label = None, None
    if relation == "replace":
        values = _new_private_values(data.draw, len(private_idx), X.dtype)
        if not label_public:
            new_label = data.draw(st.sampled_from(sorted(set(np.unique(y)) - {y[i]})))
    check_engine_neighbours(X, y, private_idx, method="dpsgd", label_public=label_public,
                            public_loss="mask", clip=clip, relation=relation, i=i,
                            theta=theta, pad_seed=0, new_values=values, new_label=new_label)


# -- label DP: the sufficient statistic -------------------------------------------------


def check_statistic_neighbours(X, y, *, clip, relation, i, new_label=None):
    neighboring = "add_remove" if relation == "remove" else "replace"
    est = _estimator(np.array([], dtype=int), method="sufficient_statistic",
                     label_public=False, public_loss="mask", neighboring=neighboring,
                     clip=clip)
    a = statistic_inputs(est, X, y)
    C = a["oracle"].max_grad_norm
    # The noise is σ · C with the clip the oracle uses (σ = noise_multiplier = 1 here).
    assert a["noise_std"] == 1.0 * C and C <= clip
    n = X.shape[0]
    release_a = a["oracle"](np.arange(n), a["theta"])
    if relation == "remove":
        # Def. 6: the simulator knows the removed record's public part (its
        # features), hence the clip computed from all public features; it
        # sums the other records' terms.
        release_b = a["oracle"](np.delete(np.arange(n), i), a["theta"])
        factor = 1.0
    else:
        b = statistic_inputs(est, X, replace_label(y, i, new_label))
        assert b["oracle"].max_grad_norm == C  # computed from the (unchanged) features
        release_b = b["oracle"](np.arange(n), b["theta"])
        factor = 2.0
    return assert_sensitivity(release_a, release_b, factor * C, n_terms=n, clip=C,
                              dtype=X.dtype, what=f"sufficient_statistic/{relation}")


@pytest.mark.parametrize("relation", ["remove", "replace"])
@_SETTINGS
@given(problem=fdp_problem(all_public=True), clip=st.sampled_from(_CLIPS), data=st.data())
def test_label_dp_statistic_sensitivity(relation, problem, clip, data):
    X, y, _, i, _ = problem
    new_label = None
    if relation == "replace":
        new_label = data.draw(st.sampled_from(sorted(set(np.unique(y)) - {y[i]})))
    check_statistic_neighbours(X, y, clip=clip, relation=relation, i=i, new_label=new_label)


@pytest.mark.parametrize("dtype,scale", [(np.float32, 1e4), (np.float64, 1e8),
                                         (np.float64, 1e-8)])
@pytest.mark.parametrize("k", [2, 3])
def test_label_dp_statistic_with_extreme_feature_scales(dtype, scale, k):
    X, y, _ = _large_public_scale(30, 5, 1, scale, dtype, k, seed=2)
    for i in (0, 29):
        check_statistic_neighbours(X, y, clip=1.0, relation="remove", i=i)
        check_statistic_neighbours(X, y, clip=1.0, relation="replace", i=i,
                                   new_label=(y[i] + 1) % k)


# -- secure mode: the private batch's Gaussian padding (issue 16 item 5) ------------------


def _padding_problem(dtype=np.float64):
    X, y, private_idx = _large_public_scale(30, 5, 2, 1.0, dtype, 2, seed=3)
    theta = np.random.default_rng(4).standard_normal((6, 1))
    theta[private_idx] *= 5.0  # the public view's scores depend on the padding
    return X, y, private_idx, theta


def _secure_estimator(private_idx, label_public=True):
    # noise="secure" with a random_state the attacker knows (e.g. published).
    return _estimator(private_idx, method="alg1", label_public=label_public,
                      public_loss="gaussian_pad", neighboring="add_remove", clip=0.5,
                      noise="secure", random_state=0)


def _first_padding(inputs, p):
    return inputs["oracle"].pad_rng.standard_normal((4, p))


@pytest.mark.parametrize("label_public", [True, False])
def test_secure_mode_private_padding_is_not_seeded_by_random_state(label_public):
    # The private batch's padding enters the private sum: it is a private
    # stream, drawn from the OS CSPRNG in secure mode like the noise and the
    # batch coins, so two fits with the same random_state do not share it.
    from sklearn_fdp._secure import SecureGenerator

    X, y, private_idx, _ = _padding_problem()
    est = _secure_estimator(private_idx, label_public)
    a, b = engine_inputs(est, X, y), engine_inputs(est, X, y)
    assert isinstance(a["oracle"].pad_rng, SecureGenerator)
    assert not np.array_equal(_first_padding(a, 2), _first_padding(b, 2))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("label_public", [True, False])
def test_secure_mode_remove_one_under_the_coupling_the_attacker_can_use(dtype, label_public):
    # With noise="secure" and a known random_state the attacker regenerates
    # every stream that random_state seeds. If the private batch's padding is
    # one of them, the valid coupling of D and D' = D minus record 0 is "same
    # seeds": every later record gets its predecessor's padding, and one
    # step's sensitivity was 2.9 C (issue 16 item 5). If it is secret, each
    # record keeps its own padding (conditional on the padding, the change is
    # the removed record's clipped term).
    X, y, private_idx, theta = _padding_problem(dtype)
    est = _secure_estimator(private_idx, label_public)
    known = np.array_equal(_first_padding(engine_inputs(est, X, y), 2),
                           _first_padding(engine_inputs(est, X, y), 2))
    a, b = engine_inputs(est, X, y), simulator_inputs(est, X, y, 0)
    C = a["config"].max_grad_norm
    if known:  # the attacker's coupling: the streams random_state seeds, as the fit draws them
        ra = a["oracle"](np.arange(30), theta.astype(dtype))
        rb = b["oracle"](np.arange(29), theta.astype(dtype))
    else:
        padding = np.random.default_rng(5).standard_normal((30, 2))
        ra = _release_engine(a, theta, padding)
        rb = _release_engine(b, theta, np.delete(padding, 0, axis=0))
    assert_sensitivity(ra, rb, C, n_terms=30, clip=C, dtype=dtype,
                       what=f"secure gaussian_pad, padding known={known}")

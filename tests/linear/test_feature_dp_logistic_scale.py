"""FeatureDPLogisticRegression on unscaled data (issue 22 item 5).

Rows of norm far above 1 used to train a chance-level model without a word:
the public gradient of FDP Algorithm 1 (and of public pretraining) is not
clipped and the default step size assumes rows of norm <= 1, while the
private remainder is clipped to ``max_grad_norm``, so at scale 1e3 the
public term swamped the private signal. A released model that is not finite
was stored as is.
"""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_classification

from sklearn_fdp import FeatureDPLogisticRegression


@pytest.fixture(scope="module")
def well_scaled():
    """Binary data scaled by one fixed factor to rows of norm <= 1."""
    X, y = make_classification(n_samples=2000, n_features=8, n_informative=5, random_state=0)
    return X / np.linalg.norm(X, axis=1).max(), y


CONFIGS = {
    "alg1-private-label": dict(method="alg1"),  # "auto" is "dpsgd" here (issue 32)
    "alg1-public-label": dict(label_public=True),
    "alg1-pretraining": dict(label_public=True, public_epochs=2.0),
    "dpsgd-pretraining": dict(method="dpsgd", label_public=True, public_epochs=2.0),
    "dpsgd-private-label": dict(method="dpsgd"),
}


def _fit(X, y, **params):
    params = {"private_features": [0, 1], "epsilon": 1.0, "random_state": 0, **params}
    return FeatureDPLogisticRegression(**params).fit(X, y)


@pytest.mark.parametrize("scale", [1e3, 1e6])
@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_unscaled_columns_train_as_well_as_scaled_ones(well_scaled, config, scale):
    # X * 1000 used to drop the default fit's training accuracy from 0.84 to
    # 0.66, X * 1e6 to 0.64, silently (the other settings happened to cope).
    X, y = well_scaled
    reference = _fit(X, y, **CONFIGS[config]).score(X, y)
    Xs = X * scale
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # overflow in exp before the fix
        model = _fit(Xs, y, **CONFIGS[config])
    assert np.all(np.isfinite(model.coef_))
    assert model.score(Xs, y) >= reference - 0.03


@pytest.mark.parametrize("kind", ["csr", "float32"])
def test_unscaled_sparse_and_float32_inputs(well_scaled, kind):
    X, y = well_scaled
    reference = _fit(X, y).score(X, y)
    Xs = X * 1e3
    Xs = sp.csr_matrix(Xs) if kind == "csr" else Xs.astype(np.float32)
    model = _fit(Xs, y)
    assert model.score(Xs, y) >= reference - 0.03


def test_non_finite_release_raises_and_keeps_the_previous_fit(well_scaled):
    # In float32 a step size of 1e300 is inf: the released weights became NaN
    # and were stored with only numpy's RuntimeWarnings (a model predicting
    # class 0 everywhere).
    X, y = well_scaled
    X32 = X.astype(np.float32)
    model = _fit(X32, y)
    coef = model.coef_.copy()
    model.set_params(learning_rate=1e300)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(ValueError, match="not finite"):
            model.fit(X32, y)
    np.testing.assert_array_equal(model.coef_, coef)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("params", [dict(method="alg1"),
                                    dict(method="alg1", public_loss="gaussian_pad"),
                                    dict(label_public=True, public_epochs=1.0)],
                         ids=["mask", "pad", "pretraining"])
def test_rescaled_memmap_fit_is_bit_identical(tmp_path, monkeypatch, well_scaled, dtype,
                                              params):
    # Out-of-core input is divided by public_scale_ row block by row block,
    # never read whole; the model is the in-memory one bit for bit.
    from sklearn_fdp import _outofcore

    monkeypatch.setattr(_outofcore, "STREAM_MIN_BYTES", 0)
    X, y = well_scaled
    X = (X * 1e3).astype(dtype)
    path = tmp_path / "X.npy"
    out = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=X.shape)
    out[:] = X
    out.flush()
    del out
    mapped = np.load(path, mmap_mode="r")
    a = _fit(X, y, epochs=2, **params)
    b = _fit(mapped, y, epochs=2, **params)
    assert a.public_scale_ == b.public_scale_ > 1e2
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)
    assert a.coef_.dtype == b.coef_.dtype == dtype


def test_public_scale_is_one_and_the_fit_unchanged_on_well_scaled_data(well_scaled):
    # Rows of norm <= 1 (the step size rules' assumption): nothing is rescaled.
    X, y = well_scaled
    for params in CONFIGS.values():
        assert _fit(X, y, **params).public_scale_ == 1.0
    # Rows normalised to norm 1 (which rounds to 1 plus a few ulp) count as 1.
    Xn = X.copy()
    Xn[:, :2] = 0.0
    Xn /= np.linalg.norm(Xn, axis=1, keepdims=True)
    assert np.linalg.norm(Xn, axis=1).max() > 1.0
    assert _fit(Xn, y).public_scale_ == 1.0
    # The factor reads the public columns only: private columns of any size
    # do not change it, and a fit without public steps never rescales.
    Xp = X.copy()
    Xp[:, :2] *= 1e6
    assert _fit(Xp, y).public_scale_ == 1.0
    assert _fit(X * 1e3, y, method="dpsgd").public_scale_ == 1.0
    assert _fit(X * 1e3, y, private_features=[]).public_scale_ == 1.0  # label DP

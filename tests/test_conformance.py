"""scikit-learn conformance beyond ``parametrize_with_checks``, for every estimator.

* ``clone`` and ``get_params``/``set_params`` round trips; parameters hold
  only plain values (no generators, accountants or arrays), survive JSON and
  YAML, and ``fit`` never changes them.
* Pickle and skops persistence give identical predictions. skops loads only
  the types listed by ``skops.io.get_untrusted_types``: for these estimators
  they are the sklearn_fdp estimator classes themselves and the
  ``dp_accounting.dp_event`` classes of ``dp_event_`` (plain attrs classes of
  numbers); everything else (NumPy arrays, scalars, dicts, sklearn objects,
  MLPFeatureDP's weights, stored as NumPy arrays) is trusted by skops'
  defaults.
* ``set_output(transform="pandas")`` and ``get_feature_names_out`` on the
  transformer (also inside a Pipeline), ``feature_names_in_`` for every
  estimator fitted on a DataFrame, and sklearn's error when the columns at
  predict time come in another order.
"""

import json
import pickle

import numpy as np
import pandas as pd
import pytest
import yaml
from sklearn.base import BaseEstimator, clone
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import sklearn_fdp
from sklearn_fdp import (
    AdaMixClassifier,
    DPSGDClassifier,
    DPSGDFClassifier,
    DPSGDRegressor,
    FeatureDPLinearRegression,
    FeatureDPLogisticRegression,
    FeatureDPSGDRegressor,
    FeatureDPStackingClassifier,
    FeatureDPStackingRegressor,
    PrivateMeanCenterer,
)
from sklearn_fdp.model_selection import PrivateRandomizedSearchCV

skops_io = pytest.importorskip("skops.io")

try:
    import torch
except ImportError:  # pragma: no cover - exercised without torch
    torch = None

N = 200
COLUMNS = ["age", "hours", "sex", "race"]


def _make(name):
    """A fresh, fast instance of every public estimator (large ε, few steps, δ < 1/N)."""
    if name == "DPSGDClassifier":
        return DPSGDClassifier(epsilon=20.0, delta=1e-6, epochs=2, accountant="rdp",
                               random_state=0)
    if name == "FeatureDPLogisticRegression":
        return FeatureDPLogisticRegression(private_features=["sex", "race"], epsilon=20.0,
                                           delta=1e-6, epochs=2, accountant="rdp",
                                           random_state=0)
    if name == "FeatureDPLinearRegression":
        return FeatureDPLinearRegression(private_features=["sex", "race"], y_bounds=(0.0, 1.0),
                                         epsilon=20.0, delta=1e-6, random_state=0)
    if name == "FeatureDPStackingClassifier":  # the default public model (boosting)
        return FeatureDPStackingClassifier(
            final_estimator=FeatureDPLogisticRegression(epochs=2), cv=3,
            private_features=["sex", "race"], epsilon=20.0, delta=1e-6, accountant="rdp",
            random_state=0)
    if name == "FeatureDPStackingRegressor":
        return FeatureDPStackingRegressor(private_features=["sex", "race"], y_bounds=(0.0, 1.0),
                                          cv=3, epsilon=20.0, delta=1e-6, random_state=0)
    if name == "DPSGDFClassifier":
        return DPSGDFClassifier(epsilon=20.0, epsilon_mean=1.0, delta=1e-6, epochs=2,
                                accountant="rdp", random_state=0)
    if name == "AdaMixClassifier":
        return AdaMixClassifier(epsilon=20.0, delta=1e-6, noise_multiplier=2.0,
                                projection=False, adaptive_clipping=False, random_state=0)
    if name == "DPSGDRegressor":  # regression on the 0/1 target
        return DPSGDRegressor(y_bounds=(0.0, 1.0), epsilon=20.0, delta=1e-6, epochs=2,
                              accountant="rdp", random_state=0)
    if name == "FeatureDPSGDRegressor":
        return FeatureDPSGDRegressor(private_features=["sex", "race"], y_bounds=(0.0, 1.0),
                                     epsilon=20.0, delta=1e-6, epochs=2, accountant="rdp",
                                     random_state=0)
    if name == "PrivateMeanCenterer":
        return PrivateMeanCenterer(epsilon=5.0, delta=1e-6, random_state=0)
    if name == "MLPFeatureDP":
        return sklearn_fdp.MLPFeatureDP(hidden_layer_sizes=(8,), private_features=["sex"],
                                        label_public=True, epsilon=20.0, delta=1e-6, epochs=2,
                                        accountant="rdp", device="cpu", random_state=0)
    if name == "MLPFeatureDPRegressor":  # frame's target is 0/1
        return sklearn_fdp.MLPFeatureDPRegressor(
            hidden_layer_sizes=(8,), private_features=["sex"], label_public=True,
            y_bounds=(0.0, 1.0), epsilon=20.0, delta=1e-6, epochs=2, accountant="rdp",
            device="cpu", random_state=0)
    if name == "PrivateRandomizedSearchCV":
        return PrivateRandomizedSearchCV(
            DPSGDClassifier(epsilon=5.0, delta=1e-6, epochs=1, accountant="rdp"),
            {"learning_rate": [0.1, 1.0], "max_grad_norm": [0.5, 1.0]},
            n_iter=2, random_state=0)
    raise KeyError(name)


NAMES = [
    "DPSGDClassifier",
    "FeatureDPLogisticRegression",
    "FeatureDPLinearRegression",
    "FeatureDPStackingClassifier",
    "FeatureDPStackingRegressor",
    "DPSGDFClassifier",
    "AdaMixClassifier",
    "DPSGDRegressor",
    "FeatureDPSGDRegressor",
    "PrivateMeanCenterer",
    pytest.param("MLPFeatureDP", marks=pytest.mark.skipif(torch is None,
                                                          reason="MLPFeatureDP needs torch")),
    pytest.param("MLPFeatureDPRegressor",
                 marks=pytest.mark.skipif(torch is None,
                                          reason="MLPFeatureDPRegressor needs torch")),
    "PrivateRandomizedSearchCV",
]


@pytest.fixture(scope="module")
def frame():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, len(COLUMNS)))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = (X[:, 0] + 0.3 * rng.normal(size=N) > 0).astype(int)
    return pd.DataFrame(X, columns=COLUMNS), pd.Series(y, name="income")


@pytest.fixture(autouse=True)
def _one_torch_thread():
    # Tiny networks: thread start-up costs more than it saves on a busy machine.
    if torch is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _fit(est, X, y):
    return est.fit(X) if isinstance(est, PrivateMeanCenterer) else est.fit(X, y)


@pytest.fixture(scope="module")
def fitted(frame):
    """name -> the estimator fitted on ``frame`` (fitted once; tests only read it)."""
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = _fit(_make(name), *frame)
        return cache[name]

    return get


def _outputs(est, X):
    """Everything the fitted estimator computes on X."""
    if isinstance(est, PrivateMeanCenterer):
        return {"transform": np.asarray(est.transform(X))}
    out = {"predict": est.predict(X)}
    if hasattr(est, "predict_proba"):
        out["predict_proba"] = est.predict_proba(X)
    return out


def _assert_same_outputs(a, b, X):
    out_a, out_b = _outputs(a, X), _outputs(b, X)
    assert out_a.keys() == out_b.keys()
    for key in out_a:
        np.testing.assert_array_equal(out_a[key], out_b[key], err_msg=key)
    for attr in ("epsilon_", "delta_", "noise_multiplier_"):
        if hasattr(a, attr):
            assert getattr(a, attr) == getattr(b, attr), attr


# -- parameters -------------------------------------------------------------------


PLAIN_SCALARS = (type(None), bool, int, float, str)


def _assert_plain(value, where):
    """Only None/bool/int/float/str, and lists/tuples/dicts of them (recursively)."""
    if isinstance(value, PLAIN_SCALARS):
        return
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _assert_plain(item, f"{where}[{i}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            assert isinstance(key, str), f"{where}: key {key!r}"
            _assert_plain(item, f"{where}[{key!r}]")
        return
    raise AssertionError(f"{where} is a live object of type {type(value).__name__}: "
                         f"{value!r}")


def _assert_params_plain(est):
    for key, value in est.get_params(deep=True).items():
        if isinstance(value, BaseEstimator):  # a nested estimator: deep=True lists its params
            continue
        _assert_plain(value, key)


@pytest.mark.parametrize("name", NAMES)
def test_clone_and_set_params_round_trip(fitted, name):
    est = _make(name)
    params = est.get_params(deep=True)
    twin = clone(est)
    assert twin is not est
    assert repr(twin.get_params(deep=True)) == repr(params)
    # set_params with its own get_params is a no-op, shallow and deep.
    twin.set_params(**est.get_params(deep=False))
    assert repr(twin.get_params(deep=True)) == repr(params)
    deep = {k: v for k, v in params.items() if not isinstance(v, BaseEstimator)}
    clone(est).set_params(**deep)
    # a clone of a fitted estimator is unfitted, with the same parameters
    fresh = clone(fitted(name))
    assert repr(fresh.get_params(deep=True)) == repr(params)
    assert not [k for k in vars(fresh) if k.endswith("_") and not k.startswith("_")]


@pytest.mark.parametrize("name", NAMES)
def test_params_are_plain_values_and_fit_leaves_them(frame, name):
    est = _make(name)
    _assert_params_plain(est)
    before = repr(est.get_params(deep=True))
    _fit(est, *frame)
    assert repr(est.get_params(deep=True)) == before
    _assert_params_plain(est)


def _to_plain(est):
    """get_params(deep=False) as JSON-able data; a nested estimator as {class, params}."""
    out = {}
    for key, value in est.get_params(deep=False).items():
        if isinstance(value, BaseEstimator):
            value = {"__estimator__": type(value).__name__, "params": _to_plain(value)}
        out[key] = value
    return out


def _from_plain(cls, params):
    kwargs = {}
    for key, value in params.items():
        if isinstance(value, dict) and "__estimator__" in value:
            value = _from_plain(getattr(sklearn_fdp, value["__estimator__"]), value["params"])
        kwargs[key] = value
    return cls(**kwargs)


@pytest.mark.parametrize("fmt", ["json", "yaml"])
@pytest.mark.parametrize("name", NAMES)
def test_params_survive_json_and_yaml(frame, name, fmt):
    est = _make(name)
    plain = _to_plain(est)
    text = json.dumps(plain) if fmt == "json" else yaml.safe_dump(plain)
    loaded = json.loads(text) if fmt == "json" else yaml.safe_load(text)
    rebuilt = _from_plain(type(est), loaded)
    # JSON/YAML turn tuples into lists (hidden_layer_sizes); the fits agree.
    X, y = frame
    _assert_same_outputs(_fit(est, X, y), _fit(rebuilt, X, y), X)


# -- persistence --------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_pickle_round_trip(frame, fitted, name):
    X, _ = frame
    est = fitted(name)
    loaded = pickle.loads(pickle.dumps(est))
    _assert_same_outputs(est, loaded, X)
    assert list(loaded.feature_names_in_) == COLUMNS


# The planning contract's records, kept by every private estimator as privacy_plan_.
PLAN_TYPES = {"sklearn_fdp._plan.PrivacyPlan", "sklearn_fdp._plan.DPSGDSchedule"}
# What the stacked estimators' fitted public model (gradient boosting) holds.
PUBLIC_MODEL_TYPES = {
    "sklearn.ensemble._hist_gradient_boosting.gradient_boosting.HistGradientBoostingClassifier",
    "sklearn.ensemble._hist_gradient_boosting.gradient_boosting.HistGradientBoostingRegressor",
    "sklearn.ensemble._hist_gradient_boosting.predictor.TreePredictor",
    "sklearn.ensemble._hist_gradient_boosting.binning._BinMapper",
}


def _expected_untrusted(est):
    """Types skops must be told to trust: our estimator classes and dp_accounting events."""
    public = {f"{type(c).__module__}.{type(c).__qualname__}" for c in [est]}
    nested = est.get_params(deep=True).values()
    public |= {f"{type(v).__module__}.{type(v).__qualname__}" for v in nested
               if isinstance(v, BaseEstimator)}
    final = getattr(est, "final_estimator_", None)  # the stacked estimators' final model
    if final is not None:
        public.add(f"{type(final).__module__}.{type(final).__qualname__}")
    return public


@pytest.mark.parametrize("name", NAMES)
def test_skops_round_trip(frame, fitted, name):
    X, _ = frame
    est = fitted(name)
    data = skops_io.dumps(est)
    untrusted = skops_io.get_untrusted_types(data=data)
    own = _expected_untrusted(est)
    for type_name in untrusted:
        assert (type_name in own or type_name.startswith("dp_accounting.dp_event.")
                or type_name in PLAN_TYPES
                or (hasattr(est, "public_estimator_") and type_name in PUBLIC_MODEL_TYPES)), \
            f"unexpected untrusted type {type_name}"
    assert own <= set(untrusted)
    for type_name in own:  # each is a public sklearn_fdp estimator
        assert getattr(sklearn_fdp, type_name.rsplit(".", 1)[1], None) is not None or (
            type_name.endswith("PrivateRandomizedSearchCV"))
    with pytest.raises(Exception, match="[Uu]ntrusted"):
        skops_io.loads(data)  # nothing is trusted implicitly
    loaded = skops_io.loads(data, trusted=untrusted)
    _assert_same_outputs(est, loaded, X)
    assert repr(loaded.dp_event_) == repr(est.dp_event_)
    if hasattr(est, "privacy_plan_"):
        assert loaded.privacy_plan_ == est.privacy_plan_


@pytest.mark.skipif(torch is None, reason="MLPFeatureDP needs torch")
def test_mlp_state_holds_no_torch_objects(fitted):
    # The pickled/skops state stores the network as NumPy arrays (loads without
    # CUDA, and skops can persist it); unpickling rebuilds the torch module.
    est = fitted("MLPFeatureDP")
    state = est.__getstate__()
    assert isinstance(state["module_"], dict)
    assert all(isinstance(a, np.ndarray) for a in state["module_"]["parameters"])
    assert isinstance(est.module_, torch.nn.Sequential)  # the live estimator is untouched
    loaded = pickle.loads(pickle.dumps(est))
    assert isinstance(loaded.module_, torch.nn.Sequential)
    assert all(p.device.type == "cpu" for p in loaded.module_.parameters())


# -- pandas output and feature names ---------------------------------------------------


def test_centerer_set_output_pandas(frame):
    X, _ = frame
    X = X.set_axis(np.arange(100, 100 + N))  # a non-default index is kept
    est = _make("PrivateMeanCenterer").set_output(transform="pandas").fit(X)
    out = est.transform(X)
    assert isinstance(out, pd.DataFrame)
    assert list(out.columns) == COLUMNS
    assert out.index.equals(X.index)
    np.testing.assert_allclose(out.to_numpy(), X.to_numpy() - est.mean_, rtol=1e-12)
    np.testing.assert_array_equal(est.get_feature_names_out(), COLUMNS)
    with pytest.raises(ValueError, match="input_features is not equal to feature_names_in_"):
        est.get_feature_names_out(["a", "b", "c", "d"])
    # fitted on an array: names x0.. and a DataFrame with those names
    arr = _make("PrivateMeanCenterer").set_output(transform="pandas").fit(X.to_numpy())
    assert list(arr.get_feature_names_out()) == ["x0", "x1", "x2", "x3"]
    assert list(arr.transform(X.to_numpy()).columns) == ["x0", "x1", "x2", "x3"]


def test_centerer_set_output_pandas_in_pipeline(frame):
    X, y = frame
    pipe = make_pipeline(_make("PrivateMeanCenterer"), StandardScaler(),
                         _make("DPSGDClassifier"))
    pipe.set_output(transform="pandas")
    pipe.fit(X, y)
    out = pipe[:-1].transform(X)
    assert isinstance(out, pd.DataFrame) and list(out.columns) == COLUMNS
    assert list(pipe[-1].feature_names_in_) == COLUMNS  # the classifier saw the names
    np.testing.assert_array_equal(pipe[:-1].get_feature_names_out(), COLUMNS)
    assert len(pipe.predict(X)) == N


@pytest.mark.parametrize("name", NAMES)
def test_feature_names_in(fitted, name):
    est = fitted(name)
    assert isinstance(est.feature_names_in_, np.ndarray)
    assert list(est.feature_names_in_) == COLUMNS
    assert est.n_features_in_ == len(COLUMNS)


@pytest.mark.parametrize("name", [n for n in NAMES if getattr(n, "values", [n])[0]
                                  not in ("FeatureDPLogisticRegression", "MLPFeatureDP",
                                          "FeatureDPSGDRegressor", "FeatureDPLinearRegression",
                                          "MLPFeatureDPRegressor", "FeatureDPStackingClassifier",
                                          "FeatureDPStackingRegressor")])
def test_no_feature_names_from_an_array(frame, name):
    # (The estimators above are configured by column names here.)
    X, y = frame
    est = _fit(_make(name), X.to_numpy(), y.to_numpy())
    assert not hasattr(est, "feature_names_in_")
    assert est.n_features_in_ == len(COLUMNS)


@pytest.mark.parametrize("name", NAMES)
def test_reordered_columns_at_predict_raise(frame, fitted, name):
    X, _ = frame
    est = fitted(name)
    method = est.transform if isinstance(est, PrivateMeanCenterer) else est.predict
    with pytest.raises(ValueError, match="Feature names must be in the same order"):
        method(X[COLUMNS[::-1]])
    with pytest.raises(ValueError, match="Feature names unseen at fit time"):
        method(X.rename(columns={"age": "AGE"}))
    # an array has no names to check: sklearn warns (a UserWarning) and goes on
    with pytest.warns(UserWarning, match="X does not have valid feature names"):
        method(X.to_numpy())

"""PrivateRandomizedSearchCV: Papernot-Steinke private search, accounted with RepeatAndSelect."""

import math

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.rdp import rdp_privacy_accountant
from scipy.stats import loguniform
from sklearn.base import BaseEstimator, TransformerMixin, clone
from sklearn.datasets import make_classification
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import Normalizer, StandardScaler

from sklearn_fdp import (
    AdaMixClassifier,
    BudgetExceededError,
    DPSGDClassifier,
    DPSGDFClassifier,
    FeatureDPLogisticRegression,
    accounting,
    privacy_report,
)
from sklearn_fdp._search import _sample_truncated_negative_binomial, _split
from sklearn_fdp.model_selection import PrivateRandomizedSearchCV

SPACE = {"learning_rate": [0.1, 1.0, "auto"], "momentum": [0.0, 0.9]}


@pytest.fixture(scope="module")
def data():
    X, y = make_classification(n_samples=1500, n_features=6, random_state=0)
    return Normalizer().fit_transform(X), y


@pytest.fixture(scope="module")
def fitted(data):
    X, y = data
    return PrivateRandomizedSearchCV(DPSGDClassifier(epochs=1, accountant="rdp"), SPACE,
                                     epsilon=2.0, delta=1e-5, n_iter=3,
                                     random_state=0).fit(X, y)


def _rdp_repeat_and_select(trial_event, mean, shape, delta):
    acc = rdp_privacy_accountant.RdpAccountant()
    acc.compose(dp_event.RepeatAndSelectDpEvent(trial_event, mean, shape))
    return acc.get_epsilon(delta)


def test_epsilon_is_dp_accountings_repeat_and_select(fitted):
    s = fitted
    assert isinstance(s.dp_event_, dp_event.RepeatAndSelectDpEvent)
    assert (s.dp_event_.mean, s.dp_event_.shape) == (3.0, 1.0)
    # Independently rebuilt: fit event of one trial + the noisy score's Gaussian.
    clf = s.best_estimator_
    trial = dp_event.ComposedDpEvent([
        dp_event.SelfComposedDpEvent(
            dp_event.PoissonSampledDpEvent(clf.sampling_rate_,
                                           dp_event.GaussianDpEvent(s.noise_multiplier_)),
            clf.steps_),
        dp_event.GaussianDpEvent(10.0)])
    assert repr(trial) == repr(s.trial_dp_event_)
    expected = _rdp_repeat_and_select(trial, 3.0, 1.0, 1e-5)
    assert s.epsilon_ == pytest.approx(expected, rel=1e-12)
    assert s.epsilon_ <= 2.0 and s.epsilon_ > 1.99  # calibrated to the budget
    assert s.epsilon_trial_ < s.epsilon_
    assert clf.noise_multiplier_ == s.noise_multiplier_
    n_train = len(_split(1500, 0.2, np.random.SeedSequence(0).spawn(4)[1])[0])
    assert 1100 < n_train < 1300  # about 80 % (each row by its own coin)
    assert clf.sampling_rate_ == pytest.approx(clf.batch_size_ / n_train)


@pytest.mark.parametrize("distribution, shape, expected_shape", [
    ("poisson", 1.0, math.inf), ("truncated_negative_binomial", 0.0, 0.0),
    ("truncated_negative_binomial", 0.5, 0.5)])
def test_distributions_account_their_shape(data, distribution, shape, expected_shape):
    X, y = data
    s = PrivateRandomizedSearchCV(
        DPSGDClassifier(epochs=1, noise_multiplier=3.0, epsilon=None, accountant="rdp"),
        SPACE, delta=1e-5, n_iter=4, trials_distribution=distribution, shape=shape,
        random_state=1).fit(X, y)
    assert s.dp_event_.shape == expected_shape and s.noise_multiplier_ is None
    assert s.epsilon_ == pytest.approx(
        _rdp_repeat_and_select(s.trial_dp_event_, 4.0, expected_shape, 1e-5), rel=1e-12)
    assert s.best_estimator_.noise_multiplier_ == 3.0  # the estimator's own budget


def test_sklearn_api(fitted, data):
    X, y = data
    s = fitted
    assert set(s.best_params_) == set(SPACE)
    assert isinstance(s.best_score_, float)
    np.testing.assert_array_equal(s.predict(X), s.best_estimator_.predict(X))
    assert s.predict_proba(X).shape == (len(y), 2)
    assert s.decision_function(X).shape == (len(y),)
    assert 0.5 < s.score(X, y) <= 1.0
    np.testing.assert_array_equal(s.classes_, [0, 1])
    assert s.n_features_in_ == 6
    # clone / get_params hold no live state; a refit with the seed is reproducible.
    again = clone(s).fit(X, y)
    assert again.best_params_ == s.best_params_ and again.best_score_ == s.best_score_
    np.testing.assert_array_equal(again.best_estimator_.coef_, s.best_estimator_.coef_)
    assert "best_estimator_" not in clone(s).__dict__
    with pytest.raises(NotFittedError):
        PrivateRandomizedSearchCV(DPSGDClassifier(), SPACE).predict(X)


def test_report_of_the_search(fitted):
    report = privacy_report(fitted)
    assert report.epsilon_rdp == pytest.approx(fitted.epsilon_)
    assert report.epsilon_pld is None  # PLD cannot account RepeatAndSelect
    assert report.is_private and report.steps[0]["unit"] == "record"


def test_feature_dp_and_distributions_and_pipeline(data):
    X, y = data
    est = make_pipeline(Normalizer(), FeatureDPLogisticRegression(
        private_features=[0, 1], label_public=True, epochs=1, accountant="rdp"))
    s = PrivateRandomizedSearchCV(
        est, {"featuredplogisticregression__learning_rate": loguniform(0.05, 5)},
        epsilon=1.0, delta=1e-5, n_iter=2, random_state=0).fit(X, y)
    assert s.epsilon_ <= 1.0
    assert "x0, x1" in s.protected_unit_
    assert privacy_report(s).steps[0]["unit"] == "features"
    dpsgdf = PrivateRandomizedSearchCV(
        DPSGDFClassifier(epochs=1, variant="analysed", epsilon_mean=0.1,
                         epsilon_quantile=0.1, accountant="rdp"),
        {"learning_rate": [0.3, 1.0]}, epsilon=3.0, delta=1e-5, n_iter=2,
        random_state=0).fit(X, y)
    assert dpsgdf.epsilon_ <= 3.0


def test_truncated_negative_binomial_sampler_mean():
    rng = np.random.RandomState(0)
    for shape, mean in [(1.0, 5.0), (0.5, 4.0), (0.0, 3.0)]:
        draws = [_sample_truncated_negative_binomial(rng, shape, mean) for _ in range(4000)]
        assert min(draws) >= 1
        assert np.mean(draws) == pytest.approx(mean, rel=0.1)


def test_bad_inputs(data):
    X, y = data
    est = DPSGDClassifier(epochs=1, accountant="rdp")
    with pytest.raises(ValueError, match="changes each trial's privacy cost"):
        PrivateRandomizedSearchCV(est, {"batch_size": [32, 64]}, epsilon=1.0).fit(X, y)
    with pytest.raises(ValueError, match="not a parameter"):
        PrivateRandomizedSearchCV(est, {"lr": [0.1]}, epsilon=1.0).fit(X, y)
    with pytest.raises(ValueError, match="invalid value -1.0"):
        # Checked before K is drawn: a trial failing on it would reveal K's reach.
        PrivateRandomizedSearchCV(est, {"learning_rate": [0.1, -1.0]}, epsilon=1.0).fit(X, y)
    with pytest.raises(TypeError, match="non-empty list"):
        PrivateRandomizedSearchCV(est, {"learning_rate": []}, epsilon=1.0).fit(X, y)
    with pytest.raises(ValueError, match="n_iter"):
        PrivateRandomizedSearchCV(est, SPACE, n_iter=0.5).fit(X, y)
    with pytest.raises(ValueError, match="epsilon"):
        PrivateRandomizedSearchCV(est, SPACE, epsilon=-1.0).fit(X, y)
    with pytest.raises(ValueError, match="validation_fraction"):
        PrivateRandomizedSearchCV(est, SPACE, validation_fraction=1.0).fit(X, y)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        PrivateRandomizedSearchCV(est, SPACE, epsilon=1.0).fit(X, y[:-1])
    with pytest.raises(ValueError, match="without differential privacy"):
        PrivateRandomizedSearchCV(make_pipeline(StandardScaler(), est), {
            "dpsgdclassifier__learning_rate": [0.1]}, n_iter=1).fit(X, y)
    with pytest.raises(ValueError, match="without differential privacy"):
        PrivateRandomizedSearchCV(LogisticRegression(), {"C": [1.0]}, delta=1e-5,
                                  n_iter=1).fit(X, y)
    with pytest.raises(ValueError, match="with a privacy_plan"):
        PrivateRandomizedSearchCV(LogisticRegression(), {"C": [1.0]}, epsilon=1.0,
                                  delta=1e-5).fit(X, y)
    with pytest.raises(ValueError, match="neighboring"):
        PrivateRandomizedSearchCV(DPSGDClassifier(neighboring="replace"), SPACE,
                                  epsilon=1.0).fit(X, y)
    with pytest.raises(BudgetExceededError):
        PrivateRandomizedSearchCV(est, SPACE, epsilon=1e-4, n_iter=50,
                                  score_noise_multiplier=0.5).fit(X, y)


def test_calibration_refuses_unplanned_private_steps(data):
    from sklearn_fdp import PrivateMeanCenterer

    X, y = data
    est = make_pipeline(PrivateMeanCenterer(epsilon=0.5, random_state=0),
                        DPSGDClassifier(epochs=1, accountant="rdp"))
    with pytest.raises(ValueError, match="not the planned"):
        PrivateRandomizedSearchCV(est, {"dpsgdclassifier__momentum": [0.0]}, epsilon=2.0,
                                  delta=1e-5, n_iter=1).fit(X, y)
    # Without calibration the centerer's event is part of every trial.
    s = PrivateRandomizedSearchCV(est, {"dpsgdclassifier__momentum": [0.0, 0.9]},
                                  delta=1e-5, n_iter=2, random_state=0).fit(X, y)
    assert "GaussianDpEvent(noise_multiplier=8." in repr(s.trial_dp_event_)


def test_trials_use_independent_seeds(data):
    # The estimator's random_state=7 is replaced by a different seed per trial
    # (and the released model carries none; see the item 7 test below).
    X, y = data
    _RecordingDPSGD.seen = []
    s = PrivateRandomizedSearchCV(_RecordingDPSGD(epochs=1, accountant="rdp", random_state=7),
                                  {"momentum": [0.0]}, epsilon=2.0, delta=1e-5, n_iter=3,
                                  trials_distribution="poisson", random_state=3).fit(X, y)
    assert s.best_estimator_.random_state != 7
    keys = [r.seed_sequence.spawn_key for r in _RecordingDPSGD.seen]
    assert len(keys) >= 2 and len(set(keys)) == len(keys)


def test_secure_search_draws_k_and_score_noise_from_the_csprng(monkeypatch, data):
    # noise="secure": K and the score noise come from os.urandom (not from
    # random_state), every trial's estimator runs with noise="secure", and the
    # accounting is unchanged.
    from sklearn_fdp import _secure

    calls = []
    real = _secure._urandom
    monkeypatch.setattr(_secure, "_urandom", lambda n: calls.append(n) or real(n))
    X, y = data
    kw = dict(epsilon=2.0, delta=1e-5, n_iter=3, random_state=0)
    est = DPSGDClassifier(epochs=1, accountant="rdp")
    secure = PrivateRandomizedSearchCV(est, {"learning_rate": [0.5, 1.0]}, noise="secure",
                                       **kw).fit(X, y)
    assert calls  # OS randomness was read
    assert secure.best_estimator_.noise == "secure"
    default = PrivateRandomizedSearchCV(est, {"learning_rate": [0.5, 1.0]}, **kw).fit(X, y)
    assert default.best_estimator_.noise == "default"
    # Same accounting; the split's coins differ (OS entropy), so the training
    # size, hence q and the calibrated σ, may differ a little.
    for s in (secure, default):
        assert 1.99 < s.epsilon_ <= 2.0
        assert s.best_estimator_.noise_multiplier_ == s.noise_multiplier_


@pytest.mark.parametrize("distribution, shape", [("poisson", 1.0),
                                                  ("truncated_negative_binomial", 1.0),
                                                  ("truncated_negative_binomial", 0.0),
                                                  ("truncated_negative_binomial", 2.5)])
def test_secure_trial_counts_follow_the_law(distribution, shape):
    # The inversion sampler has the law of the seeded one: compare the mean of
    # 4,000 secure draws of K with the law's mean (Poisson) or with the mean of
    # 200,000 seeded draws; 4 standard errors of the difference (a false
    # failure has probability ~6e-5); K >= 1 always for the truncated law.
    from sklearn_fdp._search import _secure_poisson

    mean = 5.0
    if distribution == "poisson":
        draws = np.array([_secure_poisson(mean) for _ in range(4000)])
        law_mean, law_var, n_ref = mean, mean, np.inf
    else:
        draws = np.array([_sample_truncated_negative_binomial(None, shape, mean, secure=True)
                          for _ in range(4000)])
        seeded = np.random.RandomState(0)
        ref = np.array([_sample_truncated_negative_binomial(seeded, shape, mean)
                        for _ in range(200_000)])
        assert draws.min() >= 1
        law_mean, law_var, n_ref = ref.mean(), ref.var(), len(ref)
    assert abs(draws.mean() - law_mean) < 4 * np.sqrt(law_var / len(draws) + law_var / n_ref)


# -- issue 16 item 1: the number of trials K must stay secret ------------------

class _WarningDPSGD(DPSGDClassifier):
    """A DPSGDClassifier that emits one (non-privacy) warning per fit."""

    def fit(self, X, y):
        import warnings

        warnings.warn("trial warning from fit", UserWarning, stacklevel=2)
        return super().fit(X, y)


def _signature(value):
    """Type and size of a fitted attribute, recursively: what could encode K."""
    if isinstance(value, dict):
        return ("dict", tuple(sorted((k, _signature(v)) for k, v in value.items())))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_signature(v) for v in value))
    if isinstance(value, np.ndarray):
        return ("ndarray", value.shape, value.dtype.str)
    if hasattr(value, "get_params"):  # an estimator: its attribute names and params
        return (type(value).__name__, tuple(sorted(vars(value))))
    return (type(value).__name__,)


def _observe_search(monkeypatch, caplog, capsys, data, k, **kw):
    """Fit a search that runs exactly ``k`` trials; return everything it let out."""
    import logging
    import warnings

    from sklearn_fdp import _search
    from sklearn_fdp._progress import progress_hook

    monkeypatch.setattr(_search, "_sample_truncated_negative_binomial",
                        lambda rng, shape, mean, secure=False: k)
    # The split's coins (OS entropy with noise="secure") set the training size,
    # hence σ and the events: fixed here, as K is the only thing compared.
    real_split = _split
    monkeypatch.setattr(_search, "_split", lambda n, fraction, seed: real_split(
        n, fraction, np.random.SeedSequence(0)))
    X, y = data
    est = _WarningDPSGD(epochs=1, accountant="rdp", verbose=1)
    search = PrivateRandomizedSearchCV(
        est, {"learning_rate": loguniform(0.05, 5.0), "momentum": [0.0, 0.9]},
        epsilon=2.0, delta=1e-5, n_iter=3, verbose=1, **kw)
    progress = []
    caplog.clear()
    capsys.readouterr()
    with caplog.at_level(logging.DEBUG), warnings.catch_warnings(record=True) as caught, \
            progress_hook(lambda done, total: progress.append((done, total))):
        warnings.simplefilter("always")
        search.fit(X, y)
    out = capsys.readouterr()
    return dict(
        search=search,
        printed=(out.out, out.err),
        # numba's JIT logs its compilation (once per process, K-free): not ours.
        logged=[(r.name, r.levelno, r.getMessage()) for r in caplog.records
                if not r.name.startswith("numba")],
        warned=[(w.category, str(w.message)) for w in caught],
        progress=progress,
    )


@pytest.mark.parametrize("noise", ["default", "secure"])
def test_search_does_not_reveal_the_number_of_trials(monkeypatch, caplog, capsys, data,
                                                     noise):
    # Papernot-Steinke's bound (RepeatAndSelectDpEvent) holds only when the
    # best candidate is the sole output: conditioned on a revealed K, best-of-K
    # is close to K-fold composition. Two searches that run different numbers
    # of trials must be indistinguishable except through the released best
    # candidate: same fitted attribute names and shapes, same values for
    # everything but best_*, same printed lines, log records, warnings and
    # progress reports.
    one = _observe_search(monkeypatch, caplog, capsys, data, 1, noise=noise, random_state=0)
    many = _observe_search(monkeypatch, caplog, capsys, data, 4, noise=noise, random_state=0)
    a, b = one["search"], many["search"]
    for gone in ("n_trials_", "best_index_", "cv_results_"):
        assert not hasattr(a, gone) and not hasattr(b, gone), gone
    assert sorted(vars(a)) == sorted(vars(b))
    released = {"best_estimator_", "best_params_", "best_score_"}
    for name in vars(a):
        assert _signature(getattr(a, name)) == _signature(getattr(b, name)), name
        if name.endswith("_") and name not in released:
            assert repr(getattr(a, name)) == repr(getattr(b, name)), name
    assert sorted(a.best_estimator_.get_params()) == sorted(b.best_estimator_.get_params())
    assert one["printed"] == many["printed"]
    assert one["printed"][0]  # verbose still says something (K-free)
    assert one["logged"] == many["logged"]
    assert one["warned"] == many["warned"]
    assert one["progress"] == many["progress"]


# -- issue 30 item 1: nothing observable depends on K --------------------------

class _Chatty(BaseEstimator, TransformerMixin):
    """A stateless step that warns, prints and logs every time it transforms.

    What it says depends on the rows it sees (their number and their sum),
    as an encoder's unknown-category warning does.
    """

    def fit(self, X, y=None):
        return self

    def transform(self, X):
        import logging
        import sys
        import warnings

        X = np.asarray(X, dtype=float)
        text = f"chatty saw {len(X)} rows, sum {X.sum():.6f}"
        warnings.warn(text, UserWarning, stacklevel=2)
        print(text)
        print(text, file=sys.stderr)
        logging.getLogger("tests.chatty").warning(text)
        return X

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.requires_fit = False
        return tags


class _Failing(DPSGDClassifier):
    def fit(self, X, y):
        raise ValueError("this estimator cannot be fitted")


def _pickled_signature(value, seen=None):
    """What a pickle of ``value`` holds, but values: names, types, shapes, and
    every SeedSequence's spawn key (a trial's key is its index)."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return ("seen",)
    if isinstance(value, np.random.SeedSequence):
        return ("SeedSequence", value.spawn_key)
    if isinstance(value, (dict, list, tuple, np.ndarray)) or not hasattr(value, "__dict__"):
        return _signature(value)
    seen.add(id(value))
    return (type(value).__name__, tuple(sorted(
        (k, _pickled_signature(v, seen)) for k, v in vars(value).items())))


def _observe_everything(monkeypatch, caplog, capsys, k, estimator, X, y, **kw):
    """Everything a caller sees of a search that runs exactly ``k`` trials."""
    import logging
    import pickle
    import warnings

    from sklearn_fdp import _search
    from sklearn_fdp._progress import progress_hook

    monkeypatch.setattr(_search, "_sample_truncated_negative_binomial",
                        lambda rng, shape, mean, secure=False: k)
    search = PrivateRandomizedSearchCV(estimator, **kw)
    progress = []
    caplog.clear()
    capsys.readouterr()
    raised = None
    with caplog.at_level(logging.DEBUG), warnings.catch_warnings(record=True) as caught, \
            progress_hook(lambda done, total: progress.append((done, total))):
        warnings.simplefilter("always")
        try:
            search.fit(X, y)
        except Exception as exc:  # noqa: BLE001 - compared below
            raised = (type(exc), str(exc))
    out = capsys.readouterr()
    seen = dict(
        raised=raised, printed=(out.out, out.err), progress=progress,
        logged=[(r.name, r.levelno, r.getMessage()) for r in caplog.records
                if not r.name.startswith("numba")],
        warned=[(w.category, str(w.message)) for w in caught])
    if raised is None:
        restored = pickle.loads(pickle.dumps(search))
        seen["pickled"] = _pickled_signature(restored)
        seen["attributes"] = {name: _signature(v) for name, v in vars(search).items()}
        seen["public"] = {name: repr(v) for name, v in vars(search).items()
                          if name.endswith("_") and not name.startswith("best_")}
    return seen


def _chatty_pipeline(final):
    from sklearn.compose import ColumnTransformer
    from sklearn.preprocessing import FunctionTransformer, OneHotEncoder

    encode = ColumnTransformer([
        ("num", FunctionTransformer(feature_names_out="one-to-one"), [0, 1, 2, 3]),
        # Fixed categories (learns nothing); value 3 is unknown: a warning per call.
        ("cat", OneHotEncoder(categories=[[0.0, 1.0, 2.0]], handle_unknown="warn",
                              sparse_output=False), [4])])
    return make_pipeline(_Chatty(), encode, final)


@pytest.mark.parametrize("case", ["chatty_pipeline", "noisy_estimator", "failing"])
def test_nothing_observable_depends_on_k(monkeypatch, caplog, capsys, case):
    """Issue 30 item 1: K = 1 and K = 50 trials look the same to the caller.

    Return value, attributes (names, types, shapes; the values of every
    public figure), the pickled state (including every SeedSequence's
    spawn key), warnings, printed lines, log records, progress reports and
    exceptions; only the released ``best_*`` values (one DP output) and the
    wall time may differ. On the code before issue 30 the validation
    predict's warnings, prints and log lines came out once per trial
    (K + 1 warnings).
    """
    rng = np.random.default_rng(0)
    n = 300
    X = np.c_[rng.uniform(-0.4, 0.4, (n, 4)), rng.integers(0, 4, n).astype(float)]
    y = (X[:, 0] + 0.1 * X[:, 4] > 0.1).astype(int)
    fixed = dict(epsilon=None, noise_multiplier=2.0, accountant="rdp")  # no calibration
    if case == "chatty_pipeline":
        est = _chatty_pipeline(_WarningDPSGD(epochs=1, verbose=1, **fixed))
        space = {"_warningdpsgd__learning_rate": loguniform(0.05, 5.0)}
        X = X.copy()
    elif case == "noisy_estimator":
        est = _WarningDPSGD(epochs=1, verbose=2, **fixed)
        space = {"learning_rate": loguniform(0.05, 5.0), "momentum": [0.0, 0.9]}
        X = X[:, :4]
    else:
        est = _Failing(epochs=1, **fixed)
        space = {"learning_rate": [0.1, 1.0]}
        X = X[:, :4]
    kw = dict(param_distributions=space, delta=1e-5, n_iter=3, verbose=1, random_state=0)
    one = _observe_everything(monkeypatch, caplog, capsys, 1, est, X, y, **kw)
    many = _observe_everything(monkeypatch, caplog, capsys, 50, est, X, y, **kw)
    assert set(one) == set(many)
    for key in one:
        assert one[key] == many[key], key
    if case == "failing":
        assert one["raised"][0] is ValueError
    else:
        # The released trial's fit still speaks.
        assert one["raised"] is None and one["printed"][0] and one["warned"]
    if case == "chatty_pipeline":
        chatty = [w for w in one["warned"] if "chatty" in w[1]]
        assert len(chatty) == 1 and "rows" in chatty[0][1]  # its fit's


def test_secure_search_takes_nothing_from_random_state(data):
    # With noise="secure" the attacker may know random_state. The trial
    # configurations, the split and the trials' seeds must not come from it:
    # a known sequence of configurations (or of trial seeds) turns
    # best_params_ into the index of the winning trial, a lower bound on K.
    X, y = data
    rs = np.random.RandomState(0)
    before = rs.get_state()[1].copy()
    PrivateRandomizedSearchCV(DPSGDClassifier(epochs=1, accountant="rdp"),
                              {"learning_rate": loguniform(0.05, 5.0)}, epsilon=2.0,
                              delta=1e-5, n_iter=2, noise="secure",
                              random_state=rs).fit(X, y)
    np.testing.assert_array_equal(rs.get_state()[1], before)


# -- issue 16 item 7: random_state=None means fresh OS entropy -----------------

class _RecordingDPSGD(DPSGDClassifier):
    """A DPSGDClassifier that records the random_state each fit runs with."""

    seen = []

    def fit(self, X, y):
        type(self).seen.append(self.random_state)
        return super().fit(X, y)


def test_search_without_random_state_ignores_numpys_global_state(data):
    # random_state=None must not draw K, the split, the score noise or the
    # trials' noise from NumPy's global RandomState: np.random.seed(0) would
    # make the whole search, DP noise included, predictable.
    X, y = data
    fits = []
    for _ in range(2):
        np.random.seed(0)
        fits.append(PrivateRandomizedSearchCV(
            DPSGDClassifier(epochs=1, accountant="rdp"), {"learning_rate": [0.5, 1.0]},
            epsilon=2.0, delta=1e-5, n_iter=2).fit(X, y))  # K >= 1 always
    a, b = fits
    assert a.best_score_ != b.best_score_
    assert not np.array_equal(a.best_estimator_.coef_, b.best_estimator_.coef_)


@pytest.mark.parametrize("random_state", [None, 0])
def test_trials_get_full_width_seeds_that_are_not_released(data, random_state):
    # Each trial runs from a full-width SeedSequence child (not a 31-bit int),
    # and the released best_estimator_ does not carry the seed of its fit: with
    # noise="default" that seed reproduces the trial's DP noise exactly.
    from sklearn_fdp._random import spawn_generators

    X, y = data
    _RecordingDPSGD.seen = []
    s = PrivateRandomizedSearchCV(_RecordingDPSGD(epochs=1, accountant="rdp"),
                                  {"learning_rate": [0.5, 1.0]}, epsilon=2.0, delta=1e-5,
                                  n_iter=3, random_state=random_state).fit(X, y)
    seen = _RecordingDPSGD.seen
    assert seen and not any(isinstance(r, (int, np.integer)) for r in seen)
    assert all(isinstance(r, np.random.RandomState) for r in seen)
    # spawn_generators takes the trial's SeedSequence itself (>= 128 bits of
    # entropy when the search drew it from the OS), and again on every call.
    first = [g.integers(2**63) for g in spawn_generators(seen[0], 2)]
    again = [g.integers(2**63) for g in spawn_generators(seen[0], 2)]
    assert first == again
    assert s.best_estimator_.random_state is None
    assert all(v is None for k, v in s.best_estimator_.get_params(deep=True).items()
               if k.endswith("random_state"))


# -- issue 16 item 9: every trial must protect the same thing -------------------

_FDP = FeatureDPLogisticRegression(private_features=[0, 1], epochs=1, accountant="rdp")


@pytest.mark.parametrize("estimator, key, values", [
    (_FDP, "private_features", [[0], [0, 1]]),
    (_FDP, "public_features", [[2, 3, 4, 5], [3, 4, 5]]),
    (_FDP, "label_public", [True, False]),
    (_FDP, "public_loss", ["mask", "gaussian_pad"]),
    (_FDP, "method", ["alg1", "dpsgd"]),
    (make_pipeline(Normalizer(), _FDP), "featuredplogisticregression__label_public",
     [True, False]),
    (DPSGDClassifier(epochs=1, accountant="rdp"), "noise", ["default", "secure"]),
    (DPSGDClassifier(epochs=1, accountant="rdp"), "random_state", [0, 1]),
    (make_pipeline(Normalizer(), DPSGDClassifier(epochs=1, accountant="rdp")),
     "dpsgdclassifier", [DPSGDClassifier(epochs=1), _FDP]),
])
def test_search_refuses_parameters_that_change_what_is_protected(data, estimator, key,
                                                                  values):
    # Trials that protect different things (other protected columns, a public
    # or private label, another public view, another mechanism or unit) are
    # not runs of one mechanism: the repeat-and-select bound does not apply,
    # and the released unit would depend on which trial won. Refused up front,
    # naming the parameter, before anything is fitted.
    X, y = data
    search = PrivateRandomizedSearchCV(estimator, {key: values}, epsilon=2.0, delta=1e-5,
                                       n_iter=2, random_state=0)
    with pytest.raises(ValueError, match=rf"varies '{key}'"):
        search.fit(X, y)


class _ShiftingFDP(FeatureDPLogisticRegression):
    """Protects column 0 or 1 depending on learning_rate (no static check can see it)."""

    def fit(self, X, y):
        self.private_features = [0] if self.learning_rate == 0.5 else [1]
        return super().fit(X, y)


def test_search_checks_what_each_fitted_trial_protects(data):
    X, y = data
    with pytest.raises(ValueError, match="two trials protect different things"):
        PrivateRandomizedSearchCV(
            _ShiftingFDP(private_features=[0], epochs=1, accountant="rdp"),
            {"learning_rate": [0.5, 1.0]}, epsilon=2.0, delta=1e-5, n_iter=8,
            trials_distribution="poisson", random_state=0).fit(X, y)


# -- fit parameters (issue 22 item 6) -----------------------------------------------


class _SpyAdaMix(AdaMixClassifier):
    """Records the rows and the public_mask every trial's fit gets."""

    calls = []

    def fit(self, X, y, public_mask=None):
        type(self).calls.append((np.array(X), None if public_mask is None
                                 else np.array(public_mask)))
        return super().fit(X, y, public_mask=public_mask)


def _assert_masks_follow_their_rows(calls, X, mask):
    public_rows = {tuple(row) for row in X[mask]}
    assert calls
    for X_trial, mask_trial in calls:
        assert mask_trial is not None and len(mask_trial) == len(X_trial)
        expected = np.array([tuple(row) in public_rows for row in X_trial])
        np.testing.assert_array_equal(mask_trial, expected)
        assert 0 < mask_trial.sum() < mask.sum()  # the training part's public rows only


@pytest.mark.parametrize("routing", [False, True])
def test_fit_params_are_split_with_X(data, monkeypatch, routing):
    """AdaMix's public_mask reaches every trial, cut to the trial's training rows.

    Without metadata routing every fit parameter goes to the estimator's
    ``fit`` (as in sklearn's search CVs); with routing, the estimator must
    request it. The noisy score counts every validation row, public ones
    included (documented in the class's Notes).
    """
    import sklearn

    from sklearn_fdp import _search

    X, y = data
    mask = np.zeros(len(y), dtype=bool)
    mask[::15] = True
    counted = []
    real_count = _search._correct_count
    monkeypatch.setattr(_search, "_correct_count",
                        lambda est, X_val, y_val: counted.append(len(X_val))
                        or real_count(est, X_val, y_val))
    _SpyAdaMix.calls = []
    est = _SpyAdaMix(epsilon=2.0, delta=1e-5, random_state=0)
    with sklearn.config_context(enable_metadata_routing=routing):
        if routing:
            est.set_fit_request(public_mask=True)
        search = PrivateRandomizedSearchCV(est, {"l2_regularization": [1e-3, 1e-2]},
                                           n_iter=2, random_state=0)
        search.fit(X, y, public_mask=mask)
    _assert_masks_follow_their_rows(_SpyAdaMix.calls, X, mask)
    (n_val,) = set(counted)
    assert search.best_estimator_.n_public_ == _SpyAdaMix.calls[0][1].sum()
    assert search.best_estimator_.n_private_ == len(y) - n_val - search.best_estimator_.n_public_


def test_fit_params_need_a_request_with_routing(data):
    import sklearn

    X, y = data
    mask = np.zeros(len(y), dtype=bool)
    mask[::15] = True
    with sklearn.config_context(enable_metadata_routing=True):
        search = PrivateRandomizedSearchCV(AdaMixClassifier(epsilon=2.0, delta=1e-5),
                                           {"l2_regularization": [1e-3]}, n_iter=1)
        with pytest.raises(Exception, match="public_mask"):
            search.fit(X, y, public_mask=mask)
    # Without routing an unknown parameter reaches the estimator, which rejects it.
    with pytest.raises(TypeError, match="sample_weight"):
        PrivateRandomizedSearchCV(DPSGDClassifier(epochs=1, accountant="rdp"), SPACE,
                                  n_iter=1, random_state=0).fit(X, y, sample_weight=y)


@pytest.mark.parametrize("estimator, sparse", [
    (DPSGDClassifier(epochs=1), True),
    (DPSGDFClassifier(epochs=1), False),
    (make_pipeline(Normalizer(), DPSGDClassifier(epochs=1)), True),
])
def test_sparse_tag_follows_the_estimator(estimator, sparse):
    from sklearn.utils import get_tags

    search = PrivateRandomizedSearchCV(estimator, {})
    assert get_tags(search).input_tags.sparse == get_tags(estimator).input_tags.sparse == sparse


def test_one_sample_error_names_n_samples(data):
    X, y = data
    with pytest.raises(ValueError, match="n_samples=1"):
        PrivateRandomizedSearchCV(DPSGDClassifier(), SPACE).fit(X[:1], y[:1])


@pytest.mark.parametrize("final", ["fdp_names", "dpsgdf_analysed"])
def test_calibrated_search_over_a_pipeline_with_text_columns(final):
    """A Pipeline whose ColumnTransformer encodes a text column and expands it:
    the search must not refuse the text column (its preprocessing encodes it), and
    must plan the final step on what that step is fitted on (names for FDP-LR's
    column-name spec, the expanded width for DPSGD-F's analysed rounds)."""
    import pandas as pd
    from sklearn.compose import ColumnTransformer
    from sklearn.preprocessing import FunctionTransformer, OneHotEncoder

    from sklearn_fdp import DPSGDFClassifier, FeatureDPLogisticRegression
    from sklearn_fdp.pipeline import make_private_pipeline

    rng = np.random.default_rng(0)
    n = 600
    df = pd.DataFrame({"age": rng.uniform(0, 1, n), "hours": rng.uniform(0, 1, n),
                       "sex": rng.choice(["F", "M"], n)})
    y = (df["age"] + 0.3 * (df["sex"] == "M") > 0.7).astype(int).to_numpy()
    encode = ColumnTransformer([
        ("num", FunctionTransformer(feature_names_out="one-to-one"), ["age", "hours"]),
        ("cat", OneHotEncoder(categories=[["F", "M"]]), ["sex"])])
    if final == "fdp_names":
        est = FeatureDPLogisticRegression(private_features=["sex"], label_public=True,
                                          epochs=1)
    else:
        est = DPSGDFClassifier(variant="analysed", epochs=1)
    name = type(est).__name__.lower()
    search = PrivateRandomizedSearchCV(
        make_private_pipeline(encode, est), {f"{name}__learning_rate": [0.1, 0.3]},
        epsilon=2.0, delta=1e-5, n_iter=3, random_state=0).fit(df, y)
    assert 0 < search.epsilon_ <= 2.0
    assert repr(search.trial_dp_event_) == repr(accounting.compose_events(
        search.best_estimator_[-1].trial_dp_event_,
        accounting.gaussian_event(search.score_noise_multiplier)))
    if final == "fdp_names":
        assert search.privacy_plan_.protected_features == ("cat__sex_F", "cat__sex_M")


# -- issue 30 item 4: the released model carries the search's guarantee --------

@pytest.mark.parametrize("pipeline", [False, True])
def test_released_model_reports_the_searchs_guarantee(data, pipeline):
    """``best_estimator_`` published alone states the search's ε, δ and event.

    Before issue 30 it stated one trial's (ε 2.17 after a search that spent
    4.23): about half the truth, with ``is_private=True``.
    """
    from sklearn_fdp import PrivateMeanCenterer

    X, y = data
    final = DPSGDClassifier(epochs=1, epsilon=None, noise_multiplier=2.0, accountant="pld")
    est = make_pipeline(PrivateMeanCenterer(epsilon=1.0, delta=1e-6), final) \
        if pipeline else final
    key = "dpsgdclassifier__learning_rate" if pipeline else "learning_rate"
    search = PrivateRandomizedSearchCV(est, {key: [0.1, 1.0]}, delta=1e-5, n_iter=4,
                                       random_state=0).fit(X, y)
    best = search.best_estimator_
    clf = best[-1] if pipeline else best
    assert clf.epsilon_ == search.epsilon_ and clf.delta_ == search.delta_
    assert clf.accountant_ == "rdp"
    assert repr(clf.dp_event_) == repr(search.dp_event_)
    assert clf.privacy_plan_.epsilon == search.epsilon_
    assert repr(clf.privacy_plan_.dp_event) == repr(search.dp_event_)
    # The trial's own figures, under other names.
    assert clf.trial_epsilon_ < search.epsilon_
    assert clf.trial_accountant_ == "pld"
    assert clf.trial_privacy_plan_.epsilon == clf.trial_epsilon_
    fit = (accounting.compose_events(best[0].trial_dp_event_, clf.trial_dp_event_)
           if pipeline else clf.trial_dp_event_)
    assert repr(accounting.compose_events(fit, accounting.gaussian_event(
        search.score_noise_multiplier))) == repr(search.trial_dp_event_)
    report = privacy_report(best)
    assert report.is_private
    assert report.epsilon_rdp == pytest.approx(search.epsilon_, rel=1e-12)
    assert report.epsilon_rdp == pytest.approx(privacy_report(search).epsilon_rdp, rel=1e-12)
    if pipeline:
        assert best[0].epsilon_ == search.epsilon_  # states the whole, spends nothing more

"""Out-of-core fits: X as a numpy.memmap or a dask array (sklearn_fdp._outofcore).

The linear DP-SGD estimators gather each Poisson batch from the memmap (or
compute it from the dask array) and must release exactly the model the
in-memory fit of the same data and seed releases, bit for bit, without ever
holding X in memory.
"""

import os
import sys
import tracemalloc

import numpy as np
import pytest
from sklearn.base import clone

from sklearn_fdp import (
    AdaMixClassifier,
    DPSGDClassifier,
    DPSGDFClassifier,
    FeatureDPLogisticRegression,
    PrivateMeanCenterer,
)
from sklearn_fdp import _outofcore
from sklearn_fdp._engine import _linear as engine_linear
from sklearn_fdp._mechanisms import adamix as adamix_mechanism
from sklearn_fdp._outofcore import MemmapRowSource, as_row_source, is_out_of_core

N, D = 3000, 12

COMMON = dict(epsilon=4.0, delta=1e-6, epochs=2, accountant="rdp", random_state=0)

STREAMING = {
    "dpsgd_log": DPSGDClassifier(**COMMON),
    "dpsgd_hinge_no_intercept": DPSGDClassifier(loss="hinge", fit_intercept=False, **COMMON),
    # method="alg1" named: with a private label "auto" is DP-SGD since issue 32.
    "fdp_alg1_mask": FeatureDPLogisticRegression(private_features=[0, 3], method="alg1",
                                                 **COMMON),
    "fdp_alg1_pad": FeatureDPLogisticRegression(private_features=[0, 3], method="alg1",
                                                public_loss="gaussian_pad", **COMMON),
    "fdp_label_public": FeatureDPLogisticRegression(private_features=[0], label_public=True,
                                                    **COMMON),
    "fdp_public_epochs": FeatureDPLogisticRegression(private_features=[1], label_public=True,
                                                     public_epochs=1, **COMMON),
    "fdp_dpsgd": FeatureDPLogisticRegression(private_features=[0], method="dpsgd", **COMMON),
    # label DP: one release of the θ-free private sum, then L-BFGS over row blocks
    "fdp_label_dp": FeatureDPLogisticRegression(public_features=np.ones(D, bool),
                                                epsilon=4.0, delta=1e-6, random_state=0),
}


@pytest.fixture(autouse=True)
def stream_every_size(monkeypatch):
    # Stream even the small arrays of these tests (the default is 256 MiB).
    monkeypatch.setattr(_outofcore, "STREAM_MIN_BYTES", 0)


def _data(n_classes=2, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    score = X[:, :n_classes] + 0.3 * rng.normal(size=(N, n_classes))
    y = score.argmax(axis=1) if n_classes > 2 else (score[:, 0] > 0).astype(int)
    return X.astype(dtype), y


def _memmap(tmp_path, X, mode="r", name="X.npy"):
    path = tmp_path / name
    out = np.lib.format.open_memmap(path, mode="w+", dtype=X.dtype, shape=X.shape)
    out[:] = X
    out.flush()
    del out
    return np.load(path, mmap_mode=mode)


def _assert_same_model(a, b):
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)
    assert a.coef_.dtype == b.coef_.dtype
    assert a.epsilon_ == b.epsilon_ and a.steps_ == b.steps_


@pytest.mark.parametrize("name", list(STREAMING))
def test_memmap_fit_is_bit_identical(tmp_path, name):
    X, y = _data()
    Xm = _memmap(tmp_path, X)
    ref = clone(STREAMING[name]).fit(X, y)
    est = clone(STREAMING[name]).fit(Xm, y)
    _assert_same_model(ref, est)
    assert est.n_features_in_ == D
    np.testing.assert_array_equal(est.predict(Xm), ref.predict(X))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n_classes", [2, 4])
def test_memmap_dtypes_and_multiclass(tmp_path, dtype, n_classes):
    X, y = _data(n_classes, dtype)
    Xm = _memmap(tmp_path, X)
    est = clone(STREAMING["dpsgd_log"])
    _assert_same_model(clone(est).fit(X, y), clone(est).fit(Xm, y))


@pytest.mark.parametrize("name", ["dpsgd_log", "fdp_alg1_pad"])
def test_dask_fit_is_bit_identical(name):
    da = pytest.importorskip("dask.array")
    X, y = _data()
    Xd = da.from_array(X, chunks=(700, D))  # chunk edges fall inside batches
    assert is_out_of_core(Xd)
    _assert_same_model(clone(STREAMING[name]).fit(X, y), clone(STREAMING[name]).fit(Xd, y))


def test_fused_path_is_bit_identical(tmp_path, monkeypatch):
    # Force the fused numba pass (batches above the gather threshold); the
    # out-of-core source feeds it sub-batches of gathered rows.
    monkeypatch.setattr(engine_linear, "FUSED_MIN_GATHER_BYTES", 2048)
    X, y = _data(3)
    Xm = _memmap(tmp_path, X)
    est = DPSGDClassifier(batch_size=400, **COMMON)
    _assert_same_model(clone(est).fit(X, y), clone(est).fit(Xm, y))


def test_small_memmaps_take_the_in_memory_path(tmp_path, monkeypatch):
    # Below STREAM_MIN_BYTES (e.g. joblib's memmaps for GridSearchCV workers)
    # X is validated as one array, gathered from the map in place.
    X, y = _data()
    Xm = _memmap(tmp_path, X)
    calls = []
    real = _outofcore.validate_row_source
    monkeypatch.setattr("sklearn_fdp.linear._base.validate_row_source",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setattr(_outofcore, "STREAM_MIN_BYTES", Xm.nbytes + 1)
    est = clone(STREAMING["dpsgd_log"])
    ref = clone(est).fit(X, y)
    _assert_same_model(ref, clone(est).fit(Xm, y))
    assert not calls
    monkeypatch.setattr(_outofcore, "STREAM_MIN_BYTES", Xm.nbytes)
    _assert_same_model(ref, clone(est).fit(Xm, y))
    assert calls


def test_integer_and_fortran_memmaps_fit_like_their_float_copy(tmp_path):
    rng = np.random.default_rng(1)
    Xi = rng.integers(-3, 4, size=(N, D)).astype(np.int16)
    y = (Xi[:, 0] + Xi[:, 1] > 0).astype(int)
    est = DPSGDClassifier(max_grad_norm=5.0, **COMMON)
    ref = clone(est).fit(Xi.astype(np.float64), y)
    _assert_same_model(ref, clone(est).fit(_memmap(tmp_path, Xi), y))
    path = tmp_path / "F.dat"
    Xf = np.memmap(path, dtype=np.float64, mode="w+", shape=(N, D), order="F")
    Xf[:] = Xi
    _assert_same_model(ref, clone(est).fit(Xf, y))


def test_copy_on_write_memmap_is_never_released(tmp_path):
    X, y = _data()
    Xc = _memmap(tmp_path, X, mode="c")
    Xc[0, 0] = 0.5  # a private change that MADV_DONTNEED would discard
    source = as_row_source(Xc)
    assert source._mmap is None
    X2 = X.copy()
    X2[0, 0] = 0.5
    est = clone(STREAMING["dpsgd_log"])
    _assert_same_model(clone(est).fit(X2, y), clone(est).fit(Xc, y))
    assert Xc[0, 0] == 0.5


def test_fit_does_not_load_x(tmp_path, monkeypatch):
    # numpy reports its allocations to tracemalloc. With small chunks, the
    # fit allocates O(n) (row norms, labels) and O(batch x d), never O(n x d):
    # the bound X.nbytes / 4 is 3x the O(n) arrays (d = 40: X is 40 float64
    # per row, the fit keeps about 3 per row).
    monkeypatch.setattr(_outofcore, "CHUNK_BYTES", 2**18)
    rng = np.random.default_rng(2)
    n, d = 40_000, 40
    X = rng.normal(size=(n, d)) / np.sqrt(d)
    y = (X[:, 0] > 0).astype(int)
    Xm = _memmap(tmp_path, X)
    del X
    # noise_multiplier given: no σ calibration (slow under tracemalloc).
    est = DPSGDClassifier(epsilon=None, noise_multiplier=1.0, delta=1e-6, epochs=0.5,
                          accountant="rdp", random_state=0)
    est.fit(Xm[:100], y[:100])  # compile and import outside the measurement
    _assert_fit_peak_below_a_quarter(est, Xm, y)


def _assert_fit_peak_below_a_quarter(est, Xm, y):
    """``est.fit(Xm, y)`` allocates (tracemalloc's peak) less than a quarter of ``Xm``."""
    tracemalloc.start()
    try:
        est.fit(Xm, y)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < Xm.nbytes / 4, (peak, Xm.nbytes)


def _rss_file_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssFile:"):
                return int(line.split()[1])
    return None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
@pytest.mark.parametrize("order, reader", [("C", "file"), ("F", "map")])
def test_rows_read_leave_little_of_the_file_resident(tmp_path, monkeypatch, order, reader):
    # One chunked pass and 50 gathers over a 48 MiB map leave less than
    # 16 MiB of it resident: C-order rows are read with pread (nothing
    # mapped); column-major ones through the map, released every chunk and
    # every 4 MiB of gathered rows.
    monkeypatch.setattr(_outofcore, "CHUNK_BYTES", 2**21)
    n, d = 100_000, 60
    path = tmp_path / "big.dat"
    Xw = np.memmap(path, dtype=np.float64, mode="w+", shape=(n, d), order=order)
    for start in range(0, n, 10_000):
        Xw[start:start + 10_000] = 1.0
    Xw.flush()
    del Xw
    Xm = np.memmap(path, dtype=np.float64, mode="r", shape=(n, d), order=order)
    source = MemmapRowSource(Xm, np.float64, release_bytes=2**22)
    assert source.reader == reader
    before = _rss_file_kib()
    if before is None:
        pytest.skip("no RssFile in /proc/self/status")
    total = 0.0
    for _, block in source.iter_chunks():
        total += float(block.sum())
    rng = np.random.default_rng(0)
    for _ in range(50):
        idx = np.sort(rng.choice(n, size=2000, replace=False))
        total += float(source.gather(idx).sum())
    grown_mib = (_rss_file_kib() - before) / 1024
    assert total == n * d + 50 * 2000 * d
    assert grown_mib < 16, grown_mib


def test_file_reader_matches_the_map(tmp_path):
    # Row and column slices, offsets inside the file (.npy header), runs of consecutive
    # rows and big-endian data all read through pread as through the map.
    X, _ = _data()
    Xm = _memmap(tmp_path, X)
    idx = np.array([0, 1, 2, 7, 8, 100, 2998, 2999])
    for view in (Xm, Xm[5:2000], Xm[::3], Xm[::-1]):
        source = as_row_source(view)
        assert source.reader == "file"
        sub = idx[idx < len(view)]
        np.testing.assert_array_equal(source.gather(sub), np.asarray(view)[sub])
        blocks = [b for _, b in source.iter_chunks(chunk_bytes=7 * D * 8)]
        np.testing.assert_array_equal(np.vstack(blocks), np.asarray(view))
    path = tmp_path / "be.dat"
    Xb = np.memmap(path, dtype=">f4", mode="w+", shape=X.shape, offset=24)
    Xb[:] = X
    Xb.flush()
    source = as_row_source(np.memmap(path, dtype=">f4", mode="r", shape=X.shape, offset=24))
    assert source.reader == "file" and source.dtype == np.float64
    np.testing.assert_array_equal(source.gather(idx), X.astype(">f4").astype(np.float64)[idx])
    cols = as_row_source(Xm[:, 2:5])  # each row still one run of bytes
    assert cols.reader == "file"
    np.testing.assert_array_equal(cols.gather(idx), X[idx, 2:5])
    assert as_row_source(Xm[:, ::2]).reader == "map"


# -- every estimator that accepts a memmap streams it (issue 22 item 4) --------

ADAMIX = dict(epsilon=4.0, delta=1e-6, noise_multiplier=2.0, public_epochs=20, random_state=0)

# Estimators that used to read an out-of-core X into memory. Each entry:
# (estimator, number of public records for AdaMix's public_mask or None).
OTHERS = {
    "dpsgdf_practical": (DPSGDFClassifier(epsilon_mean=1.0, **COMMON), None),
    "dpsgdf_practical_no_intercept": (
        DPSGDFClassifier(epsilon_mean=1.0, fit_intercept=False, loss="hinge", **COMMON), None),
    "dpsgdf_analysed": (DPSGDFClassifier(variant="analysed", epsilon_mean=1.0,
                                         epsilon_quantile=0.5, feature_norm=2.0, **COMMON),
                        None),
    "dpsgdf_analysed_no_intercept": (
        DPSGDFClassifier(variant="analysed", epsilon_mean=1.0, epsilon_quantile=0.5,
                         fit_intercept=False, **COMMON), None),
    "adamix_feature_fixed": (AdaMixClassifier(**ADAMIX), 8),
    "adamix_feature_full_rank": (AdaMixClassifier(**ADAMIX), 40),
    "adamix_feature_k2": (AdaMixClassifier(subspace_dim=2, **ADAMIX), 8),
    "adamix_feature_k2_many_public": (AdaMixClassifier(subspace_dim=2, **ADAMIX), 40),
    "adamix_gradient_gram": (AdaMixClassifier(subspace="gradient", **ADAMIX), 8),
    "adamix_gradient_basis": (AdaMixClassifier(subspace="gradient", subspace_dim=3, **ADAMIX),
                              40),
    "adamix_noisy_gd": (AdaMixClassifier(projection=False, adaptive_clipping=False, **ADAMIX),
                        None),
    "adamix_theory": (AdaMixClassifier(variant="theory", l2_regularization=1e-2, **ADAMIX), 8),
}


def _fit_other(name, X, y):
    est, n_pub = OTHERS[name]
    est = clone(est)
    if n_pub is None:
        return est.fit(X, y)
    mask = np.zeros(len(y), dtype=bool)
    mask[np.random.default_rng(5).choice(len(y), n_pub, replace=False)] = True
    return est.fit(X, y, public_mask=mask)


def _assert_same_fit(a, b):
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)
    assert a.coef_.dtype == b.coef_.dtype
    assert a.epsilon_ == b.epsilon_ and a.steps_ == b.steps_
    for attr in ("mean_", "quantile_", "mean_radii_", "clip_thresholds_", "subspace_dims_",
                 "pretrained_coef_"):
        if hasattr(a, attr):
            np.testing.assert_array_equal(getattr(a, attr), getattr(b, attr), err_msg=attr)


@pytest.fixture
def small_chunks(monkeypatch):
    # Many row blocks even on these small arrays: every blockwise statistic
    # (sums, histograms, AdaMix's per-step passes) crosses block edges.
    monkeypatch.setattr(_outofcore, "CHUNK_BYTES", 7 * D * 8 * 23)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("name", list(OTHERS))
def test_other_estimators_stream_with_the_in_memory_model(tmp_path, small_chunks, name,
                                                          n_classes, dtype):
    X, y = _data(n_classes, dtype)
    X[:, 0] += 3.0  # an offset for the centring to remove
    Xm = _memmap(tmp_path, X)
    ref = _fit_other(name, X, y)
    est = _fit_other(name, Xm, y)
    _assert_same_fit(ref, est)
    np.testing.assert_array_equal(est.predict(Xm), ref.predict(X))


@pytest.mark.parametrize("name", ["dpsgdf_analysed", "adamix_gradient_gram"])
def test_other_estimators_stream_dask_arrays(small_chunks, name):
    da = pytest.importorskip("dask.array")
    X, y = _data(3)
    Xd = da.from_array(X, chunks=(700, D))
    _assert_same_fit(_fit_other(name, X, y), _fit_other(name, Xd, y))


def test_adamix_per_instance_epsilon_streams(tmp_path, small_chunks):
    X, y = _data()
    Xm = _memmap(tmp_path, X)
    mask = np.zeros(N, dtype=bool)
    mask[:8] = True
    est = AdaMixClassifier(store_iterates=True, **ADAMIX).fit(X, y, public_mask=mask)
    np.testing.assert_array_equal(est.per_instance_epsilon(Xm, y, public_mask=mask),
                                  est.per_instance_epsilon(X, y, public_mask=mask))


@pytest.mark.parametrize("row_scaling", ["normalize", "clip", "none"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_mean_centerer_streams(tmp_path, small_chunks, row_scaling, dtype):
    X, _ = _data(dtype=dtype)
    X = X * 3.0 + 1.0
    Xm = _memmap(tmp_path, X)
    params = dict(epsilon=1.0, delta=1e-6, row_scaling=row_scaling, random_state=0)
    ref = PrivateMeanCenterer(**params).fit(X)
    est = PrivateMeanCenterer(**params).fit(Xm)
    np.testing.assert_array_equal(est.mean_, ref.mean_)
    assert est.epsilon_ == ref.epsilon_ and est.n_features_in_ == D
    # transform: an in-memory array of X's size (what a transformer returns).
    Xt = est.transform(Xm)
    assert type(Xt) is np.ndarray and Xt.dtype == dtype
    np.testing.assert_array_equal(Xt, ref.transform(X))
    np.testing.assert_array_equal(est.inverse_transform(Xt), ref.inverse_transform(Xt))


def _mlp(**kw):
    from sklearn_fdp import MLPFeatureDP

    params = dict(hidden_layer_sizes=(8,), epsilon=4.0, delta=1e-6, epochs=2, device="cpu",
                  random_state=0)
    params.update(kw)
    return MLPFeatureDP(**params)


MLPS = {
    "alg1_pad": dict(private_features=[0, 3], label_public=True, public_loss="gaussian_pad",
                     public_epochs=1),
    "alg1_mask": dict(private_features=[1]),
    "dp": dict(method="dp"),
    "dpsgd_vmap": dict(private_features=[0], label_public=True, method="dpsgd",
                       public_epochs=1, per_example="vmap"),
    # public columns above MAX_PUBLIC_ABS: Algorithm 1 computes in float64
    "alg1_float64": dict(private_features=[0], label_public=True, public_loss="gaussian_pad"),
}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", list(MLPS))
def test_mlp_streams_with_the_in_memory_model(tmp_path, name, dtype):
    torch = pytest.importorskip("torch")
    X, y = _data(3, dtype)
    if name == "alg1_float64":
        X[:, 1:] *= 50.0
    Xm = _memmap(tmp_path, X)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        ref = _mlp(**MLPS[name]).fit(X, y)
        est = _mlp(**MLPS[name]).fit(Xm, y)
    finally:
        torch.set_num_threads(threads)
    for a, b in zip(ref.module_.parameters(), est.module_.parameters()):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    assert est.epsilon_ == ref.epsilon_ and est.n_features_in_ == D
    np.testing.assert_array_equal(est.predict_proba(Xm), ref.predict_proba(X))


def _big_memmap(tmp_path, n=40_000, d=64, seed=2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) / np.sqrt(d)
    X[:, 0] += 2.0
    y = (X[:, 1] > 0).astype(int)
    return _memmap(tmp_path, X, name="big.npy"), y


def _traced_peak(fit):
    tracemalloc.start()
    try:
        fit()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak


MEMORY_CASES = {
    "centerer": lambda: PrivateMeanCenterer(epsilon=1.0, delta=1e-6, random_state=0),
    "dpsgdf_practical": lambda: DPSGDFClassifier(epsilon=None, noise_multiplier=1.0,
                                                 epsilon_mean=0.5, delta=1e-6, epochs=0.5,
                                                 accountant="rdp", random_state=0),
    "dpsgdf_analysed": lambda: DPSGDFClassifier(epsilon=None, noise_multiplier=1.0,
                                                epsilon_mean=0.5, epsilon_quantile=0.5,
                                                variant="analysed", delta=1e-6, epochs=0.5,
                                                accountant="rdp", random_state=0),
    "adamix_feature": lambda: AdaMixClassifier(**ADAMIX),
    "adamix_gradient": lambda: AdaMixClassifier(subspace="gradient", **ADAMIX),
    "adamix_noisy_gd": lambda: AdaMixClassifier(projection=False, adaptive_clipping=False,
                                                **ADAMIX),
}


@pytest.mark.parametrize("name", list(MEMORY_CASES))
def test_other_fits_do_not_load_x(tmp_path, monkeypatch, name):
    # As test_fit_does_not_load_x: the fit allocates O(n) and O(chunk), never
    # O(n x d) (X is 64 float64 per row; the bound is 16 per row).
    monkeypatch.setattr(_outofcore, "CHUNK_BYTES", 2**18)
    # AdaMix: a fixed number of steps (its ε -> T calibration is slow under
    # tracemalloc and allocates nothing of X's size).
    monkeypatch.setattr(adamix_mechanism, "calibrate_steps", lambda *args, **kwargs: (3, 0.5))
    Xm, y = _big_memmap(tmp_path)
    mask = np.zeros(len(y), dtype=bool)
    mask[:10] = True
    fit_kw = {"public_mask": mask} if name.startswith("adamix") else {}
    args = (Xm,) if name == "centerer" else (Xm, y)
    small = (Xm[:200],) if name == "centerer" else (Xm[:200], y[:200])
    small_kw = {"public_mask": mask[:200]} if fit_kw else {}
    MEMORY_CASES[name]().set_params(delta=1e-4).fit(*small, **small_kw)  # compile, import
    peak = _traced_peak(lambda: MEMORY_CASES[name]().fit(*args, **fit_kw))
    assert peak < Xm.nbytes / 4, (peak, Xm.nbytes)


def test_mlp_fit_never_builds_a_full_tensor(tmp_path, monkeypatch):
    # torch's allocations are not traced by tracemalloc: count the elements
    # of every tensor the fit creates from numpy data instead.
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(_outofcore, "CHUNK_BYTES", 2**18)
    Xm, y = _big_memmap(tmp_path, n=20_000)
    largest = [0]
    for fn in ("tensor", "as_tensor", "from_numpy"):
        real = getattr(torch, fn)

        def spy(data, *a, _real=real, **k):
            out = _real(data, *a, **k)
            largest[0] = max(largest[0], out.numel())
            return out

        monkeypatch.setattr(torch, fn, spy)
    est = _mlp(private_features=[0, 3], label_public=True, public_epochs=1, epochs=0.2,
               batch_size=256, delta=1e-5)
    est.fit(Xm, y)
    assert largest[0] < Xm.size / 4, (largest[0], Xm.size)
    _assert_fit_peak_below_a_quarter(est, Xm, y)


def test_bad_out_of_core_inputs_raise_the_in_memory_errors(tmp_path):
    X, y = _data()
    est = clone(STREAMING["dpsgd_log"])
    Xn = X.copy()
    Xn[N - 5, 2] = np.nan  # in the last chunk
    with pytest.raises(ValueError, match="Input X contains NaN"):
        est.fit(_memmap(tmp_path, Xn, name="nan.npy"), y)
    Xb = X.copy()
    Xb[7, 1] = 1e200
    with pytest.raises(ValueError, match="squared L2 norm of a row overflows"):
        est.fit(_memmap(tmp_path, Xb, name="big.npy"), y)
    with pytest.raises(ValueError, match="Expected a 2D array"):
        est.fit(_memmap(tmp_path, X[:, 0], name="one.npy"), y)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        est.fit(_memmap(tmp_path, X, name="ok.npy"), y[:-1])
    with pytest.raises(ValueError, match="at least 2 classes"):
        est.fit(_memmap(tmp_path, X, name="ok2.npy"), np.zeros(N))


def test_dask_array_of_unknown_shape_is_rejected():
    da = pytest.importorskip("dask.array")
    X, y = _data()
    Xd = da.from_array(X, chunks=(500, D))
    Xd = Xd[Xd[:, 0] > -10]  # boolean mask: row count unknown until computed
    with pytest.raises(ValueError, match="compute_chunk_sizes"):
        clone(STREAMING["dpsgd_log"]).fit(Xd, y)


def test_row_source_refuses_whole_array_conversion(tmp_path):
    X, _ = _data()
    source = as_row_source(_memmap(tmp_path, X))
    with pytest.raises(TypeError, match="cannot be converted"):
        np.asarray(source)
    # A column view (public columns for public pretraining) may be materialised.
    np.testing.assert_array_equal(np.asarray(source[:, [1, 4]]), X[:, [1, 4]])
    np.testing.assert_array_equal(source[np.array([3, 9, 2000])], X[[3, 9, 2000]])
    assert os.fspath(source.data.filename).endswith("X.npy")

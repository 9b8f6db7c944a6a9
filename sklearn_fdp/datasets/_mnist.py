"""The MNIST test set (10,000 images), bundled, with a fixed 8,000/2,000 split."""

import gzip
from importlib import resources

import numpy as np
from sklearn.utils import Bunch

_DATA_PACKAGE = "sklearn_fdp.datasets"
_IMAGES = "t10k-images-idx3-ubyte.gz"
_LABELS = "t10k-labels-idx1-ubyte.gz"
_N_TRAIN = 8000
_SPLIT_SEED = 0

_DESCR = """\
MNIST handwritten digits: the 10,000-image *test* set of the original
distribution (LeCun, Cortes & Burges, http://yann.lecun.com/exdb/mnist/),
bundled unmodified in IDX format (the 60,000 training images are not
shipped). 28 x 28 grayscale images, 10 classes. ``load_mnist8k`` splits it
once and for all into 8,000 training and 2,000 test images (a permutation
drawn with ``numpy.random.default_rng(0)``, stratified by class), so every
benchmark of the package uses the same split.

Copyright Yann LeCun and Corinna Cortes; commonly cited as available under
CC BY-SA 3.0 (https://creativecommons.org/licenses/by-sa/3.0/). Derived from
NIST Special Databases 3 and 1.
"""


def _read_idx(name, offset):
    with resources.files(_DATA_PACKAGE).joinpath("data", name).open("rb") as fh:
        raw = gzip.decompress(fh.read())
    return np.frombuffer(raw, dtype=np.uint8, offset=offset)


def _split_indices(labels):
    """Stratified 8,000/2,000 split, fixed by ``_SPLIT_SEED``."""
    rng = np.random.default_rng(_SPLIT_SEED)
    train, test = [], []
    n_test_total = len(labels) - _N_TRAIN
    for c in range(10):
        idx = np.flatnonzero(labels == c)
        idx = idx[rng.permutation(len(idx))]
        n_test = round(len(idx) * n_test_total / len(labels))
        test.append(idx[:n_test])
        train.append(idx[n_test:])
    train, test = np.concatenate(train), np.concatenate(test)
    # Rounding per class may leave the totals one or two off; move the excess.
    excess = len(test) - n_test_total
    if excess > 0:
        train, test = np.concatenate([train, test[:excess]]), test[excess:]
    elif excess < 0:
        test, train = np.concatenate([test, train[:-excess]]), train[-excess:]
    return np.sort(train), np.sort(test)


def load_mnist8k(*, return_X_y=False, scale=True):
    """Load the bundled MNIST test set, split into 8,000 train / 2,000 test images.

    Only the 10,000-image MNIST test set is bundled; this loader splits it
    with a fixed, class-stratified permutation (seed 0), the same on every
    machine. Nothing is downloaded.

    Parameters
    ----------
    return_X_y : bool, default=False
        If True, return ``(X_train, y_train, X_test, y_test)`` instead of a
        :class:`~sklearn.utils.Bunch`.
    scale : bool, default=True
        If True, pixels are ``float64`` in [0, 1] (divided by 255, a
        data-independent map); if False, the raw ``uint8`` values.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        With ``data`` (8000, 784), ``target`` (8000,), ``data_test``
        (2000, 784), ``target_test`` (2000,), ``images`` (8000, 28, 28),
        ``feature_names`` (``"pixel_0"`` ... ``"pixel_783"``),
        ``target_names`` (0-9) and ``DESCR``.
    (X_train, y_train, X_test, y_test) : tuple
        Only if ``return_X_y`` is True.

    Examples
    --------
    >>> from sklearn_fdp.datasets import load_mnist8k
    >>> X, y, X_test, y_test = load_mnist8k(return_X_y=True)
    >>> X.shape, X_test.shape
    ((8000, 784), (2000, 784))
    """
    images = _read_idx(_IMAGES, 16).reshape(-1, 784)
    labels = _read_idx(_LABELS, 8).astype(np.int64)
    train, test = _split_indices(labels)
    X = images.astype(np.float64) / 255.0 if scale else images.copy()
    X_train, X_test = X[train], X[test]
    y_train, y_test = labels[train], labels[test]
    if return_X_y:
        return X_train, y_train, X_test, y_test
    return Bunch(
        data=X_train,
        target=y_train,
        data_test=X_test,
        target_test=y_test,
        images=X_train.reshape(-1, 28, 28),
        feature_names=[f"pixel_{i}" for i in range(784)],
        target_names=list(range(10)),
        DESCR=_DESCR,
    )

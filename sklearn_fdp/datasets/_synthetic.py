"""Synthetic data sets: the DPSGD-F counterexample and a Purchase100 stand-in."""

import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.cluster import KMeans, MiniBatchKMeans
from sklearn.utils import check_random_state

__all__ = ["make_dpsgdf_counterexample", "make_purchase_like"]

_VARIANTS = ("both", "plus", "minus")
_CLUSTERINGS = ("auto", "kmeans", "minibatch")
# clustering="auto" switches to MiniBatchKMeans above this many samples.
_KMEANS_MAX_SAMPLES = 50_000
# Rows per chunk when drawing the Bernoulli purchases (bounds peak memory).
_CHUNK_ROWS = 8192


def _check_int(value, name, func, *, low, hint):
    if (
        not isinstance(value, numbers.Integral)
        or isinstance(value, bool)
        or value < low
    ):
        raise ValueError(
            f"`{name}` of {func} must be an integer >= {low}, got {value!r}. {hint}"
        )


def _check_choice(value, name, func, choices):
    if not isinstance(value, str) or value not in choices:
        raise ValueError(
            f"`{name}` of {func} must be one of {list(choices)}, got {value!r}."
        )


def make_dpsgdf_counterexample(
    n_samples=2000, mu=10000.0, *, variant="both", random_state=None
):
    """Make the two mirrored data sets on which DP-SGD provably fails.

    The construction of Section 4 of the DPSGD-F paper ("A counter-example
    for DPSGD"). With basis vectors ``e1 = (1, 0)`` and ``e2 = (0, 1)``, half
    of the points are ``x = mu * e1 + e2`` and half ``x = mu * e1 - e2``:

    - ``D'`` (``variant="plus"``): ``y = +1`` for ``mu * e1 + e2`` and
      ``y = -1`` for ``mu * e1 - e2``; the weight ``w = (0, 1)`` has zero
      hinge loss.
    - ``D''`` (``variant="minus"``): the same points with the labels
      swapped; ``w = (0, -1)`` has zero hinge loss.

    Only the small ``e2`` coordinate carries the label, while every point
    has norm ``sqrt(mu**2 + 1)``. Per-example clipping to any norm ``C``
    shrinks the useful ``e2`` part of each gradient to about ``C / mu``, so
    for ``mu > n_samples * epsilon`` any ``(epsilon, delta)``-DP run of
    DP-SGD (any clipping norm, steps, learning rate or initialisation) has
    excess hinge loss ``Omega(1)`` on ``D'`` or on ``D''`` (Theorem 3 of
    the paper). Centring the features on their (private) mean, as DPSGD-F
    does, removes the ``mu * e1`` offset and the problem becomes easy.

    Parameters
    ----------
    n_samples : int, default=2000
        Total number of points ``n``, half of each kind. Must be even and
        >= 2.
    mu : float, default=10000.0
        Length of the common offset along ``e1``. Must be in (0, inf); the
        theorem needs ``mu > n_samples * epsilon``.
    variant : {"both", "plus", "minus"}, default="both"
        Which data set to return: ``"plus"`` is ``D'``, ``"minus"`` is
        ``D''``, ``"both"`` returns the two.
    random_state : int, RandomState instance or None, default=None
        Seed of the row shuffle. The two variants share the same shuffle.

    Returns
    -------
    X, y : tuple of ndarray
        If ``variant`` is ``"plus"`` or ``"minus"``: ``X`` of shape
        ``(n_samples, 2)``, float64, and ``y`` of shape ``(n_samples,)``,
        int64, with values -1 and +1 as in the paper (scikit-learn
        classifiers accept these labels as they are).
    datasets : dict
        If ``variant="both"``: ``{"plus": (X, y_plus), "minus": (X,
        y_minus)}``. The feature matrices are equal (separate copies) and
        ``y_minus == -y_plus``.

    Notes
    -----
    The paper analyses a model without intercept (``b = 0``; its optimum has
    ``b = 0`` anyway), so fit with ``fit_intercept=False`` to match it
    exactly. Labels are balanced: ``n_samples / 2`` of each sign.

    References
    ----------
    .. [1] DPSGD-F paper (feature preprocessing for differentially private
       linear optimisation), Section 4, "A counter-example for DPSGD",
       Theorem 3 and Lemma 2.

    Examples
    --------
    >>> from sklearn_fdp.datasets import make_dpsgdf_counterexample
    >>> X, y = make_dpsgdf_counterexample(4, mu=100.0, variant="plus",
    ...                                   random_state=0)
    >>> X.shape, sorted(y.tolist())
    ((4, 2), [-1, -1, 1, 1])
    >>> bool(((X[:, 1] == y) & (X[:, 0] == 100.0)).all())
    True
    """
    func = "make_dpsgdf_counterexample"
    _check_int(n_samples, "n_samples", func, low=2, hint="Pass an even count.")
    if n_samples % 2:
        raise ValueError(
            f"`n_samples` of {func} must be even (two halves of n/2 points), "
            f"got {n_samples!r}. Use {n_samples + 1}."
        )
    if (
        not isinstance(mu, numbers.Real)
        or isinstance(mu, bool)
        or not 0 < mu < np.inf
    ):
        raise ValueError(
            f"`mu` of {func} must be a finite number > 0, got {mu!r}. "
            "The paper's failure regime needs mu > n_samples * epsilon."
        )
    _check_choice(variant, "variant", func, _VARIANTS)
    rng = check_random_state(random_state)

    half = n_samples // 2
    sign = np.repeat(np.array([1, -1], dtype=np.int64), half)
    sign = sign[rng.permutation(n_samples)]
    X = np.empty((n_samples, 2), dtype=np.float64)
    X[:, 0] = float(mu)
    X[:, 1] = sign
    datasets = {"plus": (X, sign), "minus": (X.copy(), -sign)}
    if variant == "both":
        return datasets
    return datasets[variant]


def make_purchase_like(
    n_samples=20000,
    n_features=600,
    n_classes=100,
    *,
    n_profiles=None,
    n_boosted=None,
    mix_fraction=0.5,
    clustering="auto",
    dtype=np.float64,
    random_state=None,
):
    """Make a synthetic stand-in for the Purchase100 data set.

    Purchase100 (Shokri et al., 2017) has one row per customer and 600
    binary features, whether the customer bought each of 600 products; its
    100 classes are not given by the source but obtained by k-means
    clustering of the purchase vectors. This generator draws purchase
    vectors from a small model of shoppers and labels them the same way, by
    clustering the binary vectors.

    Parameters
    ----------
    n_samples : int, default=20000
        Number of customers (rows). Must be >= ``n_classes``.
    n_features : int, default=600
        Number of products (binary features). Must be >= 1.
    n_classes : int, default=100
        Number of k-means clusters, i.e. of labels. Must be >= 2.
    n_profiles : int or None, default=None
        Number of shopping profiles; None means ``n_classes``. Must be >= 1.
    n_boosted : int or None, default=None
        Products each profile favours; None means
        ``max(1, n_features // 12)`` (50 for 600 products). Must be in
        ``[1, n_features]``.
    mix_fraction : float, default=0.5
        Fraction of customers who mix two profiles. Must be in [0, 1].
    clustering : {"auto", "kmeans", "minibatch"}, default="auto"
        Labelling algorithm: :class:`~sklearn.cluster.KMeans` (Lloyd,
        k-means++ init, one run) or
        :class:`~sklearn.cluster.MiniBatchKMeans` (batches of 2048,
        k-means++ init, one run). ``"auto"`` uses KMeans up to 50,000
        samples and MiniBatchKMeans above.
    dtype : {np.float64, np.float32}, default=np.float64
        Floating dtype of ``X``. The values are the same (0.0 and 1.0);
        float32 halves the memory of large data sets.
    random_state : int, RandomState instance or None, default=None
        Seed of every draw, including the clustering's initialisation. An
        int gives the same data set on every call.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
        Purchases, 0.0 or 1.0, dense, of dtype ``dtype``.
    y : ndarray of shape (n_samples,)
        Cluster ids in ``[0, n_classes)``, int64.

    Notes
    -----
    The recipe is fixed (not tuned for any learning method):

    1. Base popularity of each product ``j``: ``b_j ~ Beta(0.5, 15)``
       (mean 0.032; most products are rarely bought).
    2. Each profile ``k`` copies ``b`` and replaces it on ``n_boosted``
       products, chosen uniformly without replacement, by
       ``Beta(2, 5)`` draws (mean 0.29): ``P[k]``.
    3. Each customer draws a profile ``a`` uniformly; with probability
       ``mix_fraction`` also a second profile ``c`` (uniform, possibly equal
       to ``a``) and a weight ``w ~ U(0, 1)``, else ``w = 1``. Purchases are
       independent Bernoulli draws with probabilities
       ``w * P[a] + (1 - w) * P[c]``.
    4. Labels are the clusters of the binary rows found by k-means with
       ``n_classes`` clusters (run on a sparse copy, which is faster for
       rows this sparse), exactly as Purchase100's labels are cluster ids of
       its features, not the profiles of step 3.

    With the defaults a row has about 33 purchases (density ~0.055). Since
    k-means labels form a Voronoi partition, they are a linear function of
    ``X``; what makes the task hard is the number of classes, the few
    samples per class and the many rows near cluster boundaries (mixed
    customers). Cluster sizes are unequal (some clusters are very small for
    small ``n_samples``), as in Purchase100.

    References
    ----------
    .. [1] Shokri, R., Stronati, M., Song, C. & Shmatikov, V. (2017).
       Membership inference attacks against machine learning models. IEEE
       Symposium on Security and Privacy (SP), 3-18.

    Examples
    --------
    >>> from sklearn_fdp.datasets import make_purchase_like
    >>> X, y = make_purchase_like(500, n_features=60, n_classes=5,
    ...                           random_state=0)
    >>> X.shape, y.shape
    ((500, 60), (500,))
    >>> sorted(set(X.ravel().tolist())), sorted(set(y.tolist()))
    ([0.0, 1.0], [0, 1, 2, 3, 4])
    """
    func = "make_purchase_like"
    _check_int(n_features, "n_features", func, low=1, hint="Pass a positive count.")
    _check_int(n_classes, "n_classes", func, low=2, hint="Pass at least 2 classes.")
    _check_int(
        n_samples,
        "n_samples",
        func,
        low=n_classes,
        hint="k-means needs at least one sample per class (n_classes).",
    )
    if n_profiles is None:
        n_profiles = n_classes
    _check_int(n_profiles, "n_profiles", func, low=1, hint="Or pass None.")
    if n_boosted is None:
        n_boosted = max(1, n_features // 12)
    _check_int(n_boosted, "n_boosted", func, low=1, hint="Or pass None.")
    if n_boosted > n_features:
        raise ValueError(
            f"`n_boosted` of {func} must be <= n_features={n_features}, "
            f"got {n_boosted!r}. Pass None for n_features // 12."
        )
    if (
        not isinstance(mix_fraction, numbers.Real)
        or isinstance(mix_fraction, bool)
        or not 0 <= mix_fraction <= 1
    ):
        raise ValueError(
            f"`mix_fraction` of {func} must be in [0, 1], got {mix_fraction!r}."
        )
    _check_choice(clustering, "clustering", func, _CLUSTERINGS)
    if np.dtype(dtype) not in (np.dtype(np.float64), np.dtype(np.float32)):
        raise ValueError(
            f"`dtype` of {func} must be np.float64 or np.float32, got {dtype!r}."
        )
    rng = check_random_state(random_state)

    # 1-2. Shopping profiles: per-product purchase probabilities.
    base = rng.beta(0.5, 15.0, size=n_features)
    profiles = np.tile(base, (n_profiles, 1))
    for k in range(n_profiles):
        boosted = rng.choice(n_features, size=n_boosted, replace=False)
        profiles[k, boosted] = rng.beta(2.0, 5.0, size=n_boosted)

    # 3. Customers: one profile, or a mix of two, then Bernoulli purchases.
    first = rng.randint(n_profiles, size=n_samples)
    second = rng.randint(n_profiles, size=n_samples)
    mixed = rng.random_sample(n_samples) < mix_fraction
    weight = np.where(mixed, rng.random_sample(n_samples), 1.0)[:, np.newaxis]
    X = np.empty((n_samples, n_features), dtype=dtype)
    for start in range(0, n_samples, _CHUNK_ROWS):
        rows = slice(start, start + _CHUNK_ROWS)
        prob = weight[rows] * profiles[first[rows]]
        prob += (1.0 - weight[rows]) * profiles[second[rows]]
        X[rows] = rng.random_sample(prob.shape) < prob

    # 4. Labels: k-means clusters of the binary purchase vectors.
    seed = rng.randint(np.iinfo(np.int32).max)
    if clustering == "auto":
        clustering = "kmeans" if n_samples <= _KMEANS_MAX_SAMPLES else "minibatch"
    if clustering == "kmeans":
        kmeans = KMeans(n_clusters=n_classes, n_init=1, random_state=seed)
    else:
        kmeans = MiniBatchKMeans(
            n_clusters=n_classes, n_init=1, batch_size=2048, random_state=seed
        )
    # float64 on purpose: k-means++ on float32 input is far slower here.
    y = kmeans.fit_predict(sp.csr_matrix(X, dtype=np.float64))
    return X, y.astype(np.int64, copy=False)

"""MLPFeatureDPRegressor: a multi-layer perceptron regressor trained with feature DP.

What it shares with :class:`~sklearn_fdp.neural.MLPFeatureDP` (parameters,
validation, the privacy plan, the network, its persistence) is
:class:`~sklearn_fdp.neural._mlp._BaseMLPFeatureDP`; this module holds the
regressor's target (mapped to [-1, 1] by the public ``y_bounds``, the squared
error) and its predictions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from sklearn.base import RegressorMixin

from .._distributed._torch import SOLO
from .._validation import _fit_context, atomic_fit, check_y_bounds, warn_clipped_targets
from ._mlp import _BaseMLPFeatureDP, _fill_mlp_doc, _import_torch

if TYPE_CHECKING:  # annotations only
    from typing import Literal, Self

    from .._typing import ArrayLike, FeatureSpec, MatrixLike, RandomStateLike

__all__ = ["MLPFeatureDPRegressor"]


@_fill_mlp_doc
class MLPFeatureDPRegressor(RegressorMixin, _BaseMLPFeatureDP):
    """Multi-layer perceptron regressor (squared error) trained with feature DP (PyTorch).

    The regression twin of :class:`~sklearn_fdp.MLPFeatureDP`: the same
    network, feature specs, methods (FDP Algorithm 1, public pretraining +
    DP-SGD, plain DP-SGD), accounting, devices and persistence, with one
    linear output trained on the squared error. The target is clipped to the
    public range ``y_bounds = (lo, hi)`` (a warning counts the values
    clipped) and mapped to [-1, 1] by the public affine map
    ``t = (y − (lo + hi)/2) / ((hi − lo)/2)`` for training; predictions are
    mapped back. The run is (ε, δ)-feature-DP for the private columns (and
    the target unless ``label_public``), with ε computed by dp-accounting
    for the Poisson-subsampled Gaussian.

    Needs the optional extra ``[torch]`` (``pip install '.[torch]'`` from the source
    tree).

    Parameters
    ----------
    y_bounds : (float, float)
        Required (the default None raises at ``fit``): the range ``(lo, hi)``
        the target can take, a public choice made without looking at ``y``
        (e.g. ``(1, 99)`` hours per week). Targets outside it are clipped to
        it (with an :class:`~sklearn_fdp.exceptions.FdpWarning` that counts
        them), and it fixes the affine map to [-1, 1] the network is trained
        on, so it is never learnt from the data.
    [[hidden_layer_sizes]]
    [[activation]]
    [[feature_specs]]
    label_public : bool, default=False
        Whether the target is public too. If False, ``ℓ_pub`` is label-free:
        ``½ f(x_pub)²``, the squared error against the mean 0 of a uniform
        prior on the mapped target's range [-1, 1] (the expected squared
        error under that prior, up to a constant; it reads no ``y``). If
        True, ``ℓ_pub = ½ (f(x_pub) − t)²``.
    [[public_loss]]
    [[mlp_method]]
    [[alpha]]
    [[public_batch_size]]
    public_epochs : float or "auto", default=0.0
        Passes of noise-free SGD on ``ℓ_pub`` before the private run (free:
        Remark 2 of the paper). Needs ``label_public=True`` (the label-free
        ``ℓ_pub`` only pulls every prediction to the middle of ``y_bounds``)
        and ``method`` other than ``"dp"``. ``"auto"``:
        :class:`MLPFeatureDP`'s default rule (there), chosen on
        classification data only.
    [[epsilon]]
    [[delta]]
    [[mlp_max_grad_norm]]
    [[noise_multiplier]]
    [[mlp_batch_size]]
    [[epochs]]
    [[mlp_learning_rate]]
    [[mlp_momentum]]
    [[accountant]]
    [[neighboring]]
    [[device]]
    [[per_example]]
    [[mlp_random_state]]
    [[mlp_noise]]
    [[mlp_verbose]]

    Attributes
    ----------
    y_bounds_ : tuple of float
        ``(lo, hi)``: the target's range used for clipping and the map.
    [[mlp_fitted_inputs]]
    [[mlp_fitted_privacy]]

    Notes
    -----
    Privacy: unit = the private columns of one record (and its target unless
    ``label_public``); feature DP relative to the public part Ψ(x) (FDP
    paper, Def. 6 under ``"add_remove"``, Def. 5 under ``"replace"``);
    ``method="dp"`` gives record-level DP. Per-example clipping of
    ``∇ℓ − ∇ℓ_pub`` (of ``∇ℓ`` for ``"dpsgd"``/``"dp"``) to ``max_grad_norm``,
    Gaussian noise of std ``σ C``, sums divided by the expected batch size;
    ε by dp-accounting for ``steps_`` Poisson-subsampled Gaussian steps
    (Thm. 5): the same mechanism, streams and event as
    :class:`~sklearn_fdp.MLPFeatureDP`'s, only the loss differs. With every
    feature public and a private target (label DP), a record's private
    gradient is ``−t ∇f(x)``. NOT protected: the public columns, the target
    when ``label_public=True``, ``n``, ``y_bounds`` (public by declaration;
    the warning that counts clipped targets is seen by whoever holds the
    data, not released), and the training loss printed when ``verbose``.
    torch's generators are not cryptographically secure.

    See Also
    --------
    MLPFeatureDP : the classifier.
    sklearn.neural_network.MLPRegressor : the non-private model.

    References
    ----------
    Mahloujifar, Guo et al., "Machine Learning with Privacy for Protected
    Attributes": §5 (Algorithm 1, Thm. 5, Prop. 3, Remark 2) and §6.2.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_fdp import MLPFeatureDPRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, size=(500, 4))
    >>> y = 3 * X[:, 0] - 2 * X[:, 1] + 1
    >>> reg = MLPFeatureDPRegressor(hidden_layer_sizes=(16,), private_features=[0],
    ...                             y_bounds=(-5, 7), epsilon=2.0, epochs=2, delta=1e-4,
    ...                             device="cpu", random_state=0).fit(X, y)
    >>> reg.private_features_.tolist(), bool(reg.epsilon_ <= 2.0), reg.predict(X).shape
    ([0], True, (500,))
    """

    _loss = "squared_error"

    _parameter_constraints: dict = {
        **_BaseMLPFeatureDP._parameter_constraints,
        "y_bounds": "no_validation",  # checked by _validation.check_y_bounds
    }

    def __init__(
        self,
        *,
        y_bounds: tuple[float, float] | None = None,
        hidden_layer_sizes: int | tuple[int, ...] = (300,),
        activation: Literal["identity", "logistic", "relu", "tanh"] = "relu",
        public_features: FeatureSpec = None,
        private_features: FeatureSpec = None,
        label_public: bool = False,
        public_loss: Literal["gaussian_pad", "mask"] = "mask",
        method: Literal["alg1", "dp", "dpsgd"] = "alg1",
        epsilon: float | None = 1.0,
        delta: float = 1e-5,
        max_grad_norm: float = 1.0,
        noise_multiplier: float | None = None,
        alpha: float | Literal["auto"] = 1.0,
        batch_size: int | Literal["auto"] = "auto",
        public_batch_size: int | Literal["auto"] = "auto",
        public_epochs: float | Literal["auto"] = 0.0,
        epochs: float = 10.0,
        learning_rate: float = 0.1,
        momentum: float = 0.9,
        accountant: Literal["auto", "pld", "rdp"] = "auto",
        neighboring: Literal["add_remove", "replace"] = "add_remove",
        device: Literal["auto", "cpu", "cuda"] = "auto",
        per_example: Literal["outer", "vmap"] = "outer",
        random_state: RandomStateLike = None,
        noise: Literal["default", "secure"] = "default",
        verbose: int = 0,
    ) -> None:
        _import_torch("MLPFeatureDPRegressor")  # fail early, with the install hint
        self.y_bounds = y_bounds
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.public_features = public_features
        self.private_features = private_features
        self.label_public = label_public
        self.public_loss = public_loss
        self.method = method
        self.epsilon = epsilon
        self.delta = delta
        self.max_grad_norm = max_grad_norm
        self.noise_multiplier = noise_multiplier
        self.alpha = alpha
        self.batch_size = batch_size
        self.public_batch_size = public_batch_size
        self.public_epochs = public_epochs
        self.epochs = epochs
        self.learning_rate = learning_rate
        self.momentum = momentum
        self.accountant = accountant
        self.neighboring = neighboring
        self.device = device
        self.per_example = per_example
        self.random_state = random_state
        self.noise = noise
        self.verbose = verbose

    def _check_params(self):
        super()._check_params()
        check_y_bounds(self, required=True)

    def _training_data(self, X, y, comm):
        """``(X, T, {"y_bounds_": (lo, hi)})``: ``T`` the target clipped and mapped to [-1, 1].

        On ``torch.distributed`` (``comm``): this rank's shard, checked on
        every rank before any rank trains.
        """
        if comm.world_size > 1:
            return comm.agree(self._training_data, X, y, SOLO)
        lo, hi = check_y_bounds(self, required=True)
        X, y = self._validate_features(X, y, y_numeric=True)
        try:
            y = np.asarray(y, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(
                f"{type(self).__name__} needs a numeric target y; got values of dtype "
                f"{np.asarray(y).dtype}. Use MLPFeatureDP for class labels."
            ) from None
        outside = int(np.count_nonzero((y < lo) | (y > hi)))
        if outside:
            warn_clipped_targets(self, outside, len(y), (lo, hi), not self.label_public,
                                 stacklevel=6)  # the caller of fit
        return X, self._scale_target(y, lo, hi)[:, None], {"y_bounds_": (lo, hi)}

    @staticmethod
    def _scale_target(y, lo, hi):
        """``clip(y, lo, hi)`` mapped to [-1, 1] by the public affine map of ``(lo, hi)``."""
        centre, half = (lo + hi) / 2.0, (hi - lo) / 2.0
        return np.clip((np.clip(y, lo, hi) - centre) / half, -1.0, 1.0)

    @_fit_context(prefer_skip_nested_validation=True)
    @atomic_fit
    def fit(self, X: MatrixLike, y: ArrayLike, feature_names: ArrayLike | None = None) -> Self:
        """Train the network privately.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data (dense). Scale the columns to a data-independent
            range; clipping bounds every per-example gradient anyway.
        y : array-like of shape (n_samples,)
            Real-valued target; values outside ``y_bounds`` are clipped to it
            (with a warning that counts them).
        feature_names : sequence of str or None, default=None
            Names of X's columns, used only to resolve column names in
            ``public_features``/``private_features`` when X has none.
            :func:`sklearn_fdp.pipeline.make_private_pipeline` passes them;
            they are stored in ``feature_names_``, not in
            ``feature_names_in_``.

        Returns
        -------
        self : MLPFeatureDPRegressor
        """
        return self._fit(X, y, feature_names)

    def predict(self, X: MatrixLike) -> np.ndarray:
        """Predicted target of every row, in the units of ``y``.

        The network's output ``f(x)`` (trained on the target mapped to
        [-1, 1]) mapped back: ``(lo + hi)/2 + f(x) (hi − lo)/2``. Computed
        in float64, in batches of rows (batch-invariant, as
        :meth:`MLPFeatureDP.predict_proba`), then clipped to ``y_bounds_``
        (the target never left it in training; post-processing, no privacy
        cost).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows to predict, with the columns seen in ``fit``.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
        """
        z = self._forward(X)[:, 0]
        lo, hi = self.y_bounds_
        return np.clip((lo + hi) / 2.0 + z * ((hi - lo) / 2.0), lo, hi)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # A private model is noisier than its non-private twin by design.
        tags.regressor_tags.poor_score = True
        return tags

"""MLPFeatureDP: a multi-layer perceptron classifier trained with feature DP.

What it shares with :class:`~sklearn_fdp.neural.MLPFeatureDPRegressor` (parameters,
validation, the privacy plan, the network, its persistence) is
:class:`~sklearn_fdp.neural._mlp._BaseMLPFeatureDP`; this module holds the
classifier's targets (one-hot labels, the cross-entropy) and its predictions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from sklearn.base import ClassifierMixin

from .._validation import _fit_context, atomic_fit, encode_labels
from ._mlp import _BaseMLPFeatureDP, _fill_mlp_doc, _import_torch

if TYPE_CHECKING:  # annotations only
    from typing import Literal, Self

    from .._typing import ArrayLike, FeatureSpec, MatrixLike, RandomStateLike

__all__ = ["MLPFeatureDP"]


@_fill_mlp_doc
class MLPFeatureDP(ClassifierMixin, _BaseMLPFeatureDP):
    """Multi-layer perceptron trained with feature differential privacy (PyTorch).

    Some columns of ``X`` (and optionally the label) are public, the other
    columns of every record are protected. With ``method="alg1"`` each step
    follows FDP Algorithm 1: per-example gradients of ``ℓ − ℓ_pub`` on a
    Poisson batch (``ℓ_pub`` sees only the public part of a record) are
    clipped and noised as in DP-SGD, and the exact gradient of ``ℓ_pub`` on a
    separate uniform public batch is added for free. The run is
    (ε, δ)-feature-DP for the private columns, with ε computed by
    dp-accounting for the Poisson-subsampled Gaussian, exactly as for
    :class:`~sklearn_fdp.FeatureDPLogisticRegression`.

    Needs the optional extra ``[torch]`` (``pip install '.[torch]'`` from the source
    tree).

    Parameters
    ----------
    [[hidden_layer_sizes]]
    [[activation]]
    [[feature_specs]]
    label_public : bool, default=False
        Whether the label is public too. If False, ``ℓ_pub`` is the
        label-free cross-entropy against the uniform prior.
    [[public_loss]]
    [[mlp_method]]
    [[mlp_alpha_auto]]
    [[public_batch_size]]
    public_epochs : float or "auto", default="auto"
        Passes of noise-free SGD on ``ℓ_pub`` before the private run (free:
        Remark 2 of the paper). A number > 0 needs ``label_public=True``
        (the label-free ``ℓ_pub`` has no minimiser) and ``method`` other
        than ``"dp"``. ``"auto"``: 500 steps of ``public_batch_size_`` rows
        when the label and some columns are public (``method`` ``"alg1"``
        or ``"dpsgd"`` and ``label_public=True``), none otherwise: at small
        n the noisy run has few steps (35 on 750 rows), too few to train
        the network on the public loss alone; chosen with ``alpha="auto"``
        on validation data. ``public_steps_`` records the number of steps.
        Until issue 20 the default was 0.
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
    [[classes]]

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    [[mlp_fitted_inputs]]
    [[mlp_fitted_privacy]]

    Notes
    -----
    Privacy: unit = the private columns of one record (and its label unless
    ``label_public``); feature DP relative to the public part Ψ(x) (FDP
    paper, Def. 6 under ``"add_remove"``, Def. 5 under ``"replace"``);
    ``method="dp"`` gives record-level DP. Per-example clipping of
    ``∇ℓ − ∇ℓ_pub`` (of ``∇ℓ`` for ``"dpsgd"``/``"dp"``) to ``max_grad_norm``,
    Gaussian noise of std ``σ C``, sums divided by the expected batch size;
    ε by dp-accounting for ``steps_`` Poisson-subsampled Gaussian steps
    (Thm. 5), the same event as :class:`~sklearn_fdp.DPSGDClassifier`'s. The
    public batches, their padding and the padding of the private batch's
    ``ℓ_pub`` term come from generators of their own, never the Poisson
    sampler's (Prop. 3); with ``noise="secure"`` the private batch's padding
    is drawn from the OS CSPRNG, like the noise. Public pretraining reads
    public data only (Remark 2). NOT protected: the public columns, the label when
    ``label_public=True``, ``n``, the set of classes (read from ``y`` unless
    ``classes`` is given), and the training loss
    printed when ``verbose`` (a diagnostic computed on the private data).
    torch's generators are not cryptographically secure.

    See Also
    --------
    MLPFeatureDPRegressor : the same network for a real-valued target.
    FeatureDPLogisticRegression : the linear model with the same splits.
    sklearn.neural_network.MLPClassifier : the non-private model.

    References
    ----------
    Mahloujifar, Guo et al., "Machine Learning with Privacy for Protected
    Attributes": §5 (Algorithm 1, Thm. 5, Prop. 3, Remark 2) and §6.2.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from sklearn_fdp import MLPFeatureDP
    >>> X, y = make_classification(n_samples=500, n_features=6, random_state=0)
    >>> clf = MLPFeatureDP(hidden_layer_sizes=(16,), private_features=[0, 1],
    ...                    label_public=True, epsilon=2.0, epochs=2, delta=1e-4,
    ...                    device="cpu", random_state=0).fit(X, y)
    >>> clf.private_features_.tolist(), bool(clf.epsilon_ <= 2.0)
    ([0, 1], True)
    """

    _loss = "cross_entropy"

    _parameter_constraints: dict = {
        **_BaseMLPFeatureDP._parameter_constraints,
        "classes": ["array-like", None],
    }

    def __init__(
        self,
        *,
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
        alpha: float | Literal["auto"] = "auto",
        batch_size: int | Literal["auto"] = "auto",
        public_batch_size: int | Literal["auto"] = "auto",
        public_epochs: float | Literal["auto"] = "auto",
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
        classes: ArrayLike | None = None,
    ) -> None:
        _import_torch("MLPFeatureDP")  # fail early, with the install hint
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
        self.classes = classes

    def _training_data(self, X, y, comm):
        """``(X, Y, {"classes_": classes})``: ``Y`` the one-hot labels (float32).

        On ``torch.distributed`` (``comm``) the classes are those of every
        rank's labels (or ``classes``), the same on every rank.
        """
        if comm.world_size == 1:
            X, y = self._validate_features(X, y, y_numeric=False)
            classes, y_index = encode_labels(self, y, self.classes)
        else:  # every rank's shard checked before any rank trains
            X, y = comm.agree(self._validate_features, X, y, y_numeric=False)
            classes, _ = comm.agree(encode_labels, self, comm.labels(y), self.classes)
            _, y_index = encode_labels(self, y, classes)
        Y = np.eye(len(classes), dtype=np.float32)[y_index]
        return X, Y, {"classes_": classes}

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
            Class labels.
        feature_names : sequence of str or None, default=None
            Names of X's columns, used only to resolve column names in
            ``public_features``/``private_features`` when X has none.
            :func:`sklearn_fdp.pipeline.make_private_pipeline` passes them;
            they are stored in ``feature_names_``, not in
            ``feature_names_in_``.

        Returns
        -------
        self : MLPFeatureDP
        """
        return self._fit(X, y, feature_names)

    def predict_proba(self, X: MatrixLike) -> np.ndarray:
        """Class probabilities, computed in batches of rows.

        The forward pass runs in float64 (the weights trained in float32,
        upcast exactly), so a row's probabilities do not depend on the other
        rows predicted with it beyond float64 rounding (~1e-16): in float32
        the BLAS kernel chosen for the batch's shape changed them by up to
        ~1e-7.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows to classify, with the columns seen in ``fit``.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
        """
        return self._forward(X, lambda torch, z: torch.softmax(z, dim=1))

    def predict_log_proba(self, X: MatrixLike) -> np.ndarray:
        """Log of :meth:`predict_proba`.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows to classify, with the columns seen in ``fit``.

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes)
        """
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def predict(self, X: MatrixLike) -> np.ndarray:
        """Most probable class of every row.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows to classify, with the columns seen in ``fit``.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
        """
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # A private model is noisier than its non-private twin by design.
        tags.classifier_tags.poor_score = True
        return tags

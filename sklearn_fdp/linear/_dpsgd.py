"""DPSGDClassifier: plain DP-SGD for linear classifiers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._docs import fill_doc
from .._engine import LinearLoss, split_theta
from .._validation import _fit_context, atomic_fit
from ._base import (
    BaseDPLinearClassifier,
    n_outputs_of,
    resolve_learning_rate,
    validate_linear_data,
)
from ._whole_record import WholeRecordDPSGD, plan_fit, run_whole_record_dpsgd

if TYPE_CHECKING:  # annotations only
    from typing import Literal, Self

    from .._typing import ArrayLike, MatrixLike, RandomStateLike


@fill_doc
class DPSGDClassifier(WholeRecordDPSGD, BaseDPLinearClassifier):
    """Linear classifier trained with differentially private SGD (DP-SGD).

    Each step draws a Poisson batch (every record independently with
    probability ``q = batch_size / n``), clips every per-example gradient to
    L2 norm ``max_grad_norm``, adds Gaussian noise of standard deviation
    ``noise_multiplier * max_grad_norm`` to their sum and takes a (momentum)
    step. The run is (ε, δ)-differentially private for *whole records*
    (features and label) under the add/remove relation, with ε computed by
    dp-accounting for the Poisson-subsampled Gaussian mechanism.

    Parameters
    ----------
    loss : {"log_loss", "hinge"}, default="log_loss"
        ``"log_loss"``: logistic regression (binary) or multinomial softmax.
        ``"hinge"``: the margin loss ``max(0, 1 - y z)`` of the DPSGD-F paper
        (Crammer–Singer for more than two classes); no ``predict_proba``.
    [[epsilon]]
    [[delta]]
    [[max_grad_norm]]
    [[noise_multiplier]]
    [[batch_size]]
    [[epochs]]
    [[learning_rate]]
    [[lr_schedule]]
    [[momentum]]
    [[average]]
    [[l2_regularization]]
    [[fit_intercept]]
    [[accountant]]
    [[neighboring]]
    [[random_state]]
    [[noise]]
    [[verbose]]
    [[classes]]

    Attributes
    ----------
    [[linear_classifier_attributes]]
    [[epsilon_]]
    [[delta_]]
    [[noise_multiplier_]]
    [[sampling_rate_]]
    [[batch_size_]]
    [[learning_rate_]]
    [[steps_]]
    [[n_iter_]]
    [[accountant_]]
    [[dp_event_]]
    [[privacy_plan_]]

    Notes
    -----
    Privacy: unit = one record (all features and the label); neighbouring
    relation add/remove by default; per-example clipping to
    ``max_grad_norm``; ε by dp-accounting's RDP (or PLD) accountant for a
    self-composed Poisson-subsampled Gaussian. The noisy sum is divided by
    the expected batch size ``q n``, never the realised one. Treated as
    public: the number of rows ``n`` and the set of class labels
    (``classes_``): pass ``classes`` to make that true, otherwise
    ``classes_`` is read from ``y`` without noise (a label held by a single
    record reveals that record's label). All other hyperparameters must be chosen without looking
    at the private data, or the choice must itself be accounted for (see
    ``sklearn_fdp.accounting``).

    References
    ----------
    Abadi et al., "Deep Learning with Differential Privacy", CCS 2016.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from sklearn.preprocessing import Normalizer
    >>> from sklearn_fdp import DPSGDClassifier
    >>> X, y = make_classification(n_samples=2000, random_state=0)
    >>> X = Normalizer().fit_transform(X)
    >>> clf = DPSGDClassifier(epsilon=1.0, delta=1e-5, random_state=0).fit(X, y)
    >>> bool(clf.epsilon_ <= 1.0)
    True
    """

    _parameter_constraints: dict = {
        **BaseDPLinearClassifier._parameter_constraints,
        **BaseDPLinearClassifier._LOSS_CONSTRAINT,
    }

    def __init__(
        self,
        *,
        loss: Literal["hinge", "log_loss"] = "log_loss",
        epsilon: float | None = 1.0,
        delta: float = 1e-5,
        max_grad_norm: float = 1.0,
        noise_multiplier: float | None = None,
        batch_size: int | Literal["auto"] = "auto",
        epochs: float = 10.0,
        learning_rate: float | Literal["auto"] = "auto",
        lr_schedule: Literal["constant", "cosine", "linear"] = "cosine",
        momentum: float = 0.9,
        average: bool = True,
        l2_regularization: float = 0.0,
        fit_intercept: bool = True,
        accountant: Literal["auto", "pld", "rdp"] = "auto",
        neighboring: Literal["add_remove", "replace"] = "add_remove",
        random_state: RandomStateLike = None,
        noise: Literal["default", "secure"] = "default",
        verbose: int = 0,
        classes: ArrayLike | None = None,
    ) -> None:
        self.loss = loss
        self.epsilon = epsilon
        self.delta = delta
        self.max_grad_norm = max_grad_norm
        self.noise_multiplier = noise_multiplier
        self.batch_size = batch_size
        self.epochs = epochs
        self.learning_rate = learning_rate
        self.lr_schedule = lr_schedule
        self.momentum = momentum
        self.average = average
        self.l2_regularization = l2_regularization
        self.fit_intercept = fit_intercept
        self.accountant = accountant
        self.neighboring = neighboring
        self.random_state = random_state
        self.noise = noise
        self.verbose = verbose
        self.classes = classes

    @_fit_context(prefer_skip_nested_validation=True)
    @atomic_fit
    def fit(self, X: MatrixLike, y: ArrayLike) -> Self:
        """Fit the model with DP-SGD.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data. Rows should have a data-independent L2 bound
            (e.g. scaled to norm ≤ 1); clipping bounds each gradient anyway.
        y : array-like of shape (n_samples,)
            Class labels.

        Returns
        -------
        self : DPSGDClassifier
        """
        X, classes, y_index = validate_linear_data(self, X, y, cluster=True)
        plan = plan_fit(self, X)
        n_outputs = n_outputs_of(classes)
        loss = LinearLoss(self.loss, n_outputs)
        theta, learning_rate = run_whole_record_dpsgd(
            self, X, y_index, loss, plan, n_outputs,
            lambda noise_std, n_rows: resolve_learning_rate(self, noise_std, plan.schedule,
                                                            n_rows, n_outputs))
        self._store_linear(*split_theta(theta, self.fit_intercept, theta.dtype), classes,
                           plan, learning_rate)
        return self

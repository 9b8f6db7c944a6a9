"""check_collapse: an opt-in check that a fitted classifier did not collapse (issue 20).

A private classifier trained with too little signal for its noise (few rows,
small ε) often predicts the majority class everywhere, or scores below the
rule that always predicts it. The check is opt-in and runs on data the user
passes, not inside ``fit``: computed on the private training data, its answer
is a function of those data that ``epsilon_`` does not cover (see
docs/threat_model.md, "Checking a fit for collapse").
"""

import warnings
from dataclasses import dataclass

import numpy as np

from .exceptions import CollapseWarning

__all__ = ["CollapseCheck", "check_collapse"]

# The likely fixes, most effective first (issue 32: with a private label the
# noise covers the label's whole gradient; a public label lets the public part
# of the loss learn without noise).
COLLAPSE_ADVICE = (
    "Likely fixes: label_public=True (FeatureDPLogisticRegression, MLPFeatureDP) where the "
    "label is not sensitive; a larger epsilon; fewer private columns (declare public "
    "features); more rows; or tune learning_rate/epochs with PrivateRandomizedSearchCV.")


@dataclass(frozen=True)
class CollapseCheck:
    """The result of :func:`check_collapse` (a frozen dataclass).

    Parameters
    ----------
    n_predicted_classes : int
        Distinct labels the classifier predicts on ``X``.
    accuracy : float
        Accuracy of the classifier on ``(X, y)``.
    majority_accuracy : float
        Accuracy of the rule that always predicts the most frequent label of ``y``.
    collapsed : bool
        ``n_predicted_classes == 1`` (with several labels in ``y``) or
        ``accuracy < majority_accuracy``.
    """

    n_predicted_classes: int
    accuracy: float
    majority_accuracy: float
    collapsed: bool


def check_collapse(estimator, X, y, *, warn=True):
    """Warn when a fitted classifier predicts one class or loses to the majority rule.

    Post-processing of the released model on the data passed here. On public
    or held-out data that the guarantee does not protect, the check costs no
    privacy. On the private training data, its result (the warning included)
    depends on those data and is **not** covered by the estimator's
    ``epsilon_``: read it yourself, do not publish it. ``fit`` never runs it
    (docs/threat_model.md, "Checking a fit for collapse").

    Parameters
    ----------
    estimator : fitted classifier
        Any fitted estimator or Pipeline with ``predict``.
    X : array-like of shape (n_samples, n_features)
        Rows to predict, e.g. a held-out split.
    y : array-like of shape (n_samples,)
        Their labels.
    warn : bool, default=True
        Issue a :class:`~sklearn_fdp.exceptions.CollapseWarning` when the
        fit collapsed.

    Returns
    -------
    check : CollapseCheck
        The number of predicted classes, the accuracy, the majority rule's
        accuracy and whether the fit collapsed.

    Raises
    ------
    ValueError
        When ``y`` is empty or its length differs from the number of rows of ``X``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.dummy import DummyClassifier
    >>> from sklearn_fdp import check_collapse
    >>> X, y = np.zeros((4, 1)), np.array([0, 0, 0, 1])
    >>> check_collapse(DummyClassifier().fit(X, y), X, y, warn=False).collapsed
    True
    """
    y = np.asarray(y)
    if y.ndim != 1 or y.size == 0:
        raise ValueError(f"check_collapse needs a non-empty 1-d y; got shape {y.shape}.")
    pred = np.asarray(estimator.predict(X))
    if pred.shape != y.shape:
        raise ValueError(
            f"check_collapse: {type(estimator).__name__} predicted {pred.shape[0]} labels "
            f"for {y.shape[0]} labels in y. Pass the X and y of the same rows."
        )
    labels, counts = np.unique(y, return_counts=True)
    n_predicted = int(np.unique(pred).size)
    accuracy = float(np.mean(pred == y))
    majority = float(counts.max() / y.size)
    single = n_predicted == 1 and labels.size > 1
    collapsed = bool(single or accuracy < majority)
    if collapsed and warn:
        what = ("predicts a single class" if single
                else f"scores {accuracy:.4f}, below the majority rule's {majority:.4f}")
        warnings.warn(
            f"{type(estimator).__name__} {what} on these {y.size} rows: the noise drowned "
            f"the signal. {COLLAPSE_ADVICE} On private training data this check is not "
            "covered by epsilon_: do not publish it.",
            CollapseWarning,
            stacklevel=2,
        )
    return CollapseCheck(n_predicted, accuracy, majority, collapsed)

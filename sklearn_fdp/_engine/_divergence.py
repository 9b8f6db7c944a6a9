"""The "diverged" check of the regressors' released weights, with its cause.

A check of released (DP) values and public parameters only: post-processing,
no privacy cost. The weights are those of the model for the target mapped to
[-1, 1] by the public ``y_bounds`` (rows of norm ≤ 1 assumed by the step-size
rules), so no useful model has weights anywhere near :data:`EXPLODED`.

The cause is named from the fit's own public quantities, in this order:

* the **learning rate**, when it exceeds the largest stable heavy-ball step
  on that scale: ``2 (1 + β) / λ_max`` with ``λ_max ≤ 2`` (rows of norm ≤ 1
  and an intercept), i.e. ``1 + β``;
* the **noise**, when the Gaussian noise alone moves each weight by more than
  the whole target range: ``η σ C sqrt(T) / (B (1 − β)) > 1`` (the standard
  deviation of T momentum steps of noise ``σ C / B`` per coordinate);
* else the **scale of X**: rows far beyond norm 1 (the clipped private
  gradients are bounded, the unclipped public ones of FDP and the step rule's
  curvature bound are not).
"""

import math

import numpy as np

# |weight| on the mapped scale above which a fit is treated as exploded: a model
# of a target in [-1, 1] on rows of norm <= 1 with such a weight predicts a
# million times the target's range on some unit row.
EXPLODED = 1e6


def noise_displacement(learning_rate, noise_multiplier, max_grad_norm, steps, batch_size,
                       momentum):
    """Standard deviation of the noise's total move of one weight (mapped scale)."""
    beta = min(float(momentum), 0.999)
    return (float(learning_rate) * float(noise_multiplier) * float(max_grad_norm)
            * math.sqrt(max(int(steps), 1)) / (max(float(batch_size), 1.0) * (1.0 - beta)))


def check_not_diverged(est, weights, *, learning_rate, noise_multiplier, max_grad_norm, steps,
                       batch_size, momentum, mapped=True):
    """Raise a ValueError naming the cause when ``weights`` are not finite or exploded.

    ``weights``: the released arrays (any shapes). ``mapped``: whether they
    are on the scale of a target mapped to [-1, 1] (with ``y_bounds``);
    otherwise only non-finite weights are an error (the target's scale is
    unknown).
    """
    arrays = [np.asarray(w, dtype=np.float64) for w in weights]
    finite = all(np.all(np.isfinite(a)) for a in arrays)
    largest = max((float(np.max(np.abs(a))) for a in arrays if a.size), default=0.0)
    if finite and not (mapped and largest > EXPLODED):
        return
    name = type(est).__name__
    what = ("are not finite" if not finite else
            f"reach {largest:.3g} on the target mapped to [-1, 1] by y_bounds (a useful "
            f"model stays near 1; more than {EXPLODED:.0e} is treated as exploded)")
    stable = 1.0 + min(float(momentum), 0.999)
    moved = noise_displacement(learning_rate, noise_multiplier, max_grad_norm, steps,
                               batch_size, momentum)
    if float(learning_rate) > stable:
        cause = (f"the learning rate: learning_rate={float(learning_rate):.3g} exceeds "
                 f"{stable:.3g}, the largest stable step with momentum={momentum!r} for "
                 "rows of norm ≤ 1. Lower learning_rate (or leave it 'auto' where it has "
                 "that option).")
    elif moved > 1.0:
        eps = getattr(est, "epsilon", None)
        origin = f" (from epsilon={eps!r})" if eps is not None else ""
        cause = (f"the noise: noise_multiplier={float(noise_multiplier):.3g}{origin} "
                 "moves each weight by about "
                 f"{moved:.3g} over {int(steps)} steps of batch {int(batch_size)} at "
                 f"learning_rate={float(learning_rate):.3g}, more than the whole target "
                 "range. Raise epsilon, train on more rows (or larger batches), or lower "
                 "learning_rate.")
    else:
        cause = ("the scale of X: the step size and the noise are moderate "
                 f"(learning_rate={float(learning_rate):.3g}, noise move {moved:.3g}), so "
                 "rows far beyond norm 1 drove the weights (public gradients are not "
                 "clipped). Scale the columns to a data-independent range (e.g. "
                 "sklearn_fdp.preprocessing.make_tabular_preprocessor, rows of norm ≤ 1).")
    raise ValueError(f"Training of {name} diverged: the released weights {what}. The cause "
                     f"is {cause}")

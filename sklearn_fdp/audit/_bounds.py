"""Bounds on what an attacker can learn from a model trained with (feature) DP.

Feature DP (FDP paper, Def. 5/6) does not hide whether a record is in the
data; what it limits is *attribute inference*: guessing a record's protected
attributes from the model when its public part Ψ(x) is known. Thm. 4 of the
paper turns the privacy parameters into a bound on any such attack.
"""

import math
from numbers import Real

import numpy as np

__all__ = ["attribute_inference_bound"]


def _check_array(name, value, low, high, *, high_closed):
    arr = np.asarray(value)
    if arr.dtype.kind not in "fiu":
        raise TypeError(f"`{name}` must be a real number or an array of them, got {value!r}.")
    arr = arr.astype(float)
    bad = np.isnan(arr) | (arr < low) | ((arr > high) if high_closed else (arr >= high))
    if np.any(bad):
        shown = arr[bad].ravel()[:5].tolist()
        interval = f"[{low:g}, {high:g}{']' if high_closed else ')'}"
        raise ValueError(f"`{name}` must be in {interval}, got {shown!r}.")
    return arr


def attribute_inference_bound(epsilon, delta, baseline):
    """Largest attribute-inference success probability allowed by (ε, δ)-(feature) DP.

    Thm. 4 of the FDP paper: let a mechanism M be feature f-DP with respect
    to the public part Ψ, for a convex trade-off function f. For any data
    distribution X, any public value u and any adversary A that sees the
    model trained on ``S ∪ {x}`` (``x ~ X | Ψ(x) = u``) and outputs a guess
    ``x'`` of the record,

        Pr[d(x', x) <= ρ] <= 1 - f(Ball(X, u, d, ρ)),

    where ``Ball`` is the success probability of the best guess made
    *without* the model (the largest mass of a ρ-ball of ``X | u``; for an
    exact guess of a discrete protected attribute, the probability of its
    most likely value given the public features). This function evaluates
    the right-hand side for the trade-off function of (ε, δ)-DP,
    ``f(x) = max(0, 1 - δ - e^ε x, e^-ε (1 - δ - x))`` (Dong, Roth & Su
    2022, Prop. 2.5), which gives

        bound = min(1, δ + e^ε b, 1 - e^-ε (1 - δ - b))

    for baseline ``b``. The middle term (from ``f(x) = 1 - δ - e^ε x``)
    is the binding one for small baselines, the last one for large
    baselines; both equal ``b`` at ε = δ = 0.

    The same bound holds for plain (ε, δ)-DP models (which are feature DP
    with the same parameters, Prop. 2). It is a worst case over attackers:
    a measured attack success above it contradicts the privacy claim, one
    below it does not prove the claim.

    Parameters
    ----------
    epsilon : float or array-like of float
        ε of the model's guarantee, in [0, inf] (``inf``: no protection,
        bound 1 unless the baseline is 0 and δ = 0).
    delta : float or array-like of float
        δ of the guarantee, in [0, 1].
    baseline : float or array-like of float
        Success probability of the best attack that does not see the model,
        ``Ball(X, u, d, ρ)`` in the theorem, in [0, 1].

    Returns
    -------
    bound : float or ndarray of float
        Upper bound on the attack's success probability, in [baseline, 1].
        The inputs are broadcast against each other; a float is returned
        when all three are scalars.

    Raises
    ------
    ValueError
        A value outside its range (or NaN).
    TypeError
        A non-numeric value.

    See Also
    --------
    sklearn_fdp.accounting.epsilon_of_event : ε of a fitted model's ``dp_event_``.

    References
    ----------
    Mahloujifar, Guo et al., "Machine Learning with Privacy for Protected
    Attributes", Thm. 4 (Def. 7 and 8 for the success rate and ``Ball``).
    Dong, Roth & Su, "Gaussian Differential Privacy", JRSS-B 2022.

    Examples
    --------
    A binary protected attribute whose majority value given the public
    features is right 70 % of the time, under (1, 1e-5)-feature DP:

    >>> from sklearn_fdp.audit import attribute_inference_bound
    >>> round(attribute_inference_bound(1.0, 1e-5, 0.7), 4)
    0.8896
    >>> attribute_inference_bound(0.0, 0.0, 0.7)
    0.7
    """
    scalar = all(isinstance(v, Real) and not isinstance(v, bool)
                 for v in (epsilon, delta, baseline))
    for name, v in (("epsilon", epsilon), ("delta", delta), ("baseline", baseline)):
        if isinstance(v, bool):
            raise TypeError(f"`{name}` must be a real number, got {v!r}.")
    eps = _check_array("epsilon", epsilon, 0.0, math.inf, high_closed=True)
    dlt = _check_array("delta", delta, 0.0, 1.0, high_closed=True)
    b = _check_array("baseline", baseline, 0.0, 1.0, high_closed=True)
    eps, dlt, b = np.broadcast_arrays(eps, dlt, b)
    with np.errstate(over="ignore", invalid="ignore"):
        # e^ε b with the convention inf * 0 = 0 (a zero-mass event stays zero).
        grow = np.where(b > 0, np.exp(eps) * b, 0.0)
        first = dlt + grow
        second = 1.0 - np.exp(-eps) * (1.0 - dlt - b)
    bound = np.minimum(1.0, np.minimum(first, second))
    # Guard the last ulp: the bound is never below the baseline.
    bound = np.maximum(bound, b)
    if scalar:
        return float(bound)
    return bound

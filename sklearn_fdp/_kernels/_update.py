"""The parameter update of one DP-SGD step, fused (post-processing only).

On a small model (Adult: 106 parameters) each numpy operation of the
update costs about a microsecond of call overhead, more than its arithmetic;
a step spent ~6 µs there, ~8% of a whole DP step. This kernel does the same
IEEE operations in the same order (no fastmath, so no contraction into fused
multiply-adds), storing where numpy stored: the results are bit for bit
those of the numpy update it replaced in
:func:`sklearn_fdp._engine.run_dp_sgd` (``tests/test_engine.py`` keeps that
numpy update as the reference).
"""

from numba import njit


@njit(cache=True)
def sgd_update(theta, grad, noise, normaliser, alpha, public, l2, velocity, momentum, lr,
               average, n_averaged):
    """One step on flat (1-D, same length) arrays, in place.

    The numpy statements it replaces, each rounded to the arrays' dtype
    where numpy stores its result: ``grad += noise`` (``noise`` empty:
    none); ``grad /= normaliser``; when ``public`` is not empty: ``grad *=
    alpha; grad += public``; when ``l2``: ``grad += l2 * theta``; when
    ``momentum``: ``velocity *= momentum; velocity += grad`` and the step
    uses ``velocity``; ``theta -= lr * step``; when ``n_averaged > 0``:
    ``average += (theta - average) / n_averaged``. Scalars come in the type
    numpy would compute with (a Python float is cast to the arrays' dtype, a
    numpy float64 is not), so the arithmetic is numpy's.
    """
    noisy = noise.shape[0] > 0
    mixed = public.shape[0] > 0
    for i in range(theta.shape[0]):
        if noisy:
            grad[i] = grad[i] + noise[i]
        grad[i] = grad[i] / normaliser
        if mixed:
            grad[i] = grad[i] * alpha
            grad[i] = grad[i] + public[i]
        if l2 != 0.0:
            grad[i] = grad[i] + l2 * theta[i]
        if momentum != 0.0:
            velocity[i] = velocity[i] * momentum
            velocity[i] = velocity[i] + grad[i]
            step = lr * velocity[i]
        else:
            step = lr * grad[i]
        theta[i] = theta[i] - step
        if n_averaged > 0:
            average[i] = average[i] + (theta[i] - average[i]) / n_averaged

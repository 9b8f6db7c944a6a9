"""How far a fit may move when only the order of its floating-point sums changes.

The fingerprint record (``fingerprints.json``) holds each fit's arrays bit for
bit, with the environment that decides the last bits (BLAS kernel and thread
count, the CPU the SIMD code paths dispatch on). Elsewhere — another OpenBLAS
kernel (SkylakeX's AVX-512 sums 8 lanes where Haswell sums 4), another thread
split, another vector width in numba or torch — the same operations run on the
same inputs and the same random draws, in another association order. This
module bounds the difference that can make, from the standard forward error
bound of a reassociated sum (Higham, *Accuracy and Stability of Numerical
Algorithms*, §3.1 and §4.2): a sum of ``N`` terms evaluated in any order has
error at most ``γ_N · Σ|terms|`` with ``γ_N = N·u / (1 − N·u)`` and ``u`` the
unit roundoff of the arrays' dtype (2⁻⁵³ for float64, 2⁻²⁴ for float32), so two
orders differ by at most ``2·γ_N · Σ|terms|``.

For one fit on the record's data (``n`` rows of norm ≤ 1, ``d`` columns):

* ``N = n + w``: every fitted quantity is a sum over at most the ``n`` rows of
  terms that are themselves dot products of length at most ``w`` (``d``, or the
  widest layer of an MLP): the composition's error is at most
  ``γ_n + γ_w + γ_n·γ_w ≤ γ_{n+w}``.
* ``Σ|terms| ≤ max(1, |a|∞)``-scaled: rows have norm ≤ 1 and per-example
  gradients are clipped (the record's estimators clip at ≤ 1 relative to the
  parameters' scale), so the terms summed into a coordinate are bounded by the
  scale of the recorded array itself, or 1.
* ``T`` steps: each noisy step (the ``count`` of the fit's own ``dp_event_``,
  summed over its parts; 1 for a single release) adds one such error; for the
  convex losses at the step sizes the estimators use (``η ≤ 2/β``) a gradient
  step is non-expansive, so errors add and are not amplified.
* ``κ``: a fit that solves a linear system (the sufficient-statistic fits)
  multiplies a relative perturbation of the system by at most its condition
  number; the test passes the condition number of the record data's Gram
  matrix ``XᵀX`` (an assumption, not a proof: the solvers raise the noisy
  systems' eigenvalues below a floor, which keeps them about as well
  conditioned as the data's), a factor ≥ 1 for the other fits too.

The bound is ``|a_now − a_record| ≤ 2 · γ_N · T · κ · max(1, |a_record|∞)``
per entry. It is a bound for reassociation only: a change of algorithm, of
random stream or of a library version is not covered (the test skips when the
library versions differ), and a non-smooth loss whose kink an example sits on
within rounding (hinge, ε-insensitive, Huber) could in principle flip a
subgradient — that would show as a failure naming the fit, to be looked at.
"""

import math
import re

import numpy as np

_COUNT = re.compile(r"count=(\d+)")
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|nan|inf")


def unit_roundoff(dtype):
    return float(np.finfo(np.dtype(dtype)).eps) / 2.0


def gamma(n_terms, dtype="float64"):
    """Higham's ``γ_N``: the relative error bound of a sum of ``N`` terms."""
    nu = n_terms * unit_roundoff(dtype)
    if nu >= 1.0:
        return math.inf
    return nu / (1.0 - nu)


def noisy_steps(dp_event_repr):
    """``T``: how many noisy steps the fit's ``dp_event_`` composes (≥ 1)."""
    counts = [int(c) for c in _COUNT.findall(dp_event_repr or "")]
    return max(1, sum(counts))


def array_tolerance(recorded, dtype, *, n_rows, width, steps, kappa):
    """The largest ``|now − recorded|`` per entry that reassociation explains."""
    scale = max(1.0, float(np.max(np.abs(recorded)))) if recorded.size else 1.0
    return 2.0 * gamma(n_rows + width, dtype) * steps * kappa * scale


def compare_scalars(recorded_text, now_text, rtol):
    """Compare two reprs (``epsilon_``, ``dp_event_``): the same text apart
    from numbers, and each number within ``rtol`` relative."""
    if _NUMBER.sub("#", recorded_text) != _NUMBER.sub("#", now_text):
        return False
    a = [float(x) for x in _NUMBER.findall(recorded_text)]
    b = [float(x) for x in _NUMBER.findall(now_text)]
    return all((x == y) or (math.isnan(x) and math.isnan(y))
               or abs(x - y) <= rtol * max(abs(x), abs(y)) for x, y in zip(a, b))

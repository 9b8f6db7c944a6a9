"""Data sets: the bundled UCI Adult data and synthetic generators.

- :func:`load_adult`, :func:`make_adult_preprocessor` and :func:`adult_schema`: the UCI Adult
  (Census Income) data, bundled (CC BY 4.0), and its data-independent
  features; :data:`ADULT_PROTECTED` names the protected columns used in
  the benchmarks.
- :func:`make_dpsgdf_counterexample`: the two mirrored 2-D data sets on
  which DP-SGD provably fails (DPSGD-F paper, Section 4).
- :func:`make_purchase_like`: a synthetic stand-in for Purchase100.
- :func:`load_mnist8k`: the bundled MNIST test set (10,000 images) with a
  fixed 8,000/2,000 split.
"""

from ._adult import ADULT_PROTECTED, adult_schema, load_adult, make_adult_preprocessor
from ._mnist import load_mnist8k
from ._synthetic import make_dpsgdf_counterexample, make_purchase_like

__all__ = [
    "ADULT_PROTECTED",
    "adult_schema",
    "load_adult",
    "load_mnist8k",
    "make_adult_preprocessor",
    "make_dpsgdf_counterexample",
    "make_purchase_like",
]

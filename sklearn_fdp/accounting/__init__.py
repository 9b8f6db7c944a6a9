"""Privacy accounting: the only package of sklearn_fdp that imports dp-accounting.

Every mechanism a fit uses is described by a :class:`dp_accounting.DpEvent`;
its (ε, δ) is computed by one of dp-accounting's accountants (Rényi DP or
privacy-loss distributions). Noise scales are calibrated here and nowhere
else, so the ε an estimator reports is the one its noise was drawn for.

Conventions
-----------
* ``noise_multiplier`` is the ratio of the Gaussian noise's standard
  deviation to the L2 sensitivity under add/remove (the clip norm ``C`` for a
  clipped sum). Under ``neighboring="replace"`` the sensitivity of a clipped
  sum is ``2C`` while the noise is still ``noise_multiplier * C``.
* ``sampling_rate`` is the Poisson inclusion probability ``q = batch_size / n``.
  The number of records ``n`` is treated as public.
* ``accountant="pld"`` gives the tightest ε (privacy-loss distributions,
  pessimistic discretisation); ``"rdp"`` is faster and is the only one that
  handles :class:`~dp_accounting.RepeatAndSelectDpEvent`.

dp-accounting pitfalls handled here (release 0.6.0):

* ``calibrate_dp_mechanism``'s default bracket evaluates σ = 0; we build an
  explicit bracket whose lower end is positive.
* The RDP accountant under ``REPLACE_ONE`` treats a ``GaussianDpEvent`` as if
  its sensitivity were ``C`` (dp-accounting issue #378); we instead account a
  replace-one Gaussian release as an add/remove Gaussian with half the noise
  multiplier, which is exact. The RDP accountant rejects Poisson sampling
  under ``REPLACE_ONE``; use ``accountant="pld"`` there (the PLD accountant
  models the replace-one subsampled Gaussian exactly, sensitivity ``2C``).
* The RDP accountant returns ε = 0 once a total-variation shortcut applies
  (very large noise), and cannot go below ≈ log(1/δ)/1023 otherwise (its
  largest order is 1024): an answer of 0, or one set by the largest order, is
  a failure of that accountant here, and the PLD accountant answers instead
  (see :func:`epsilon_and_accountant`). The PLD accountant's default
  discretisation (1e-4) overstates small ε many times over (×17 at ε ≈ 6e-5,
  3,000 steps) and makes large ε very slow; its discretisation is adapted to
  the ε it resolves (``_pld_scan``: about ε/512, refined until ε is
  resolved to 0.1 %; every answer is dp-accounting's pessimistic PLD, an upper
  bound), and below δ = 1e-12, where its truncated mass (about 1e-15) decides
  the answer, RDP answers instead. No reported ε is 0.
* Since scipy 1.15 the ``logsumexp`` behind the PLD composition's Chernoff
  truncation bounds spends most of a small PLD pass in array-API dispatch;
  for the events the estimators spend, the PLD is composed in ``_pld``
  from dp-accounting's own constructors, with the self-composition's bounds
  computed without that dispatch (the bounds are integers, so the PLD is
  dp-accounting's bit for bit). dp-accounting itself is never patched.

Calibration (issue 18) starts from the CLT estimate of σ, searches by secant
steps at one fixed PLD discretisation (RDP: on a few of its orders), and
checks the result by the reporting rule; results are kept in a persistent
cache (:func:`calibration_cache_path`), checked again before use.

The package's modules, one job each (``docs/architecture.md``):

* ``_checks``: argument checks, the σ range, the error of an unreachable budget;
* ``_events``: DpEvent construction (DP-SGD, Gaussian releases, composition);
* ``_epsilon``: ε of an event, the PLD / RDP dispatch with its fallbacks and caches;
* ``_pld``: one PLD pass (the PLD composed without patching dp-accounting);
* ``_calibration``: σ for a budget (the solver) and the glue to the persistent cache;
* ``_cache``: the persistent cache file of calibrated σ;
* ``_gaussian``: Gaussian releases (analytic Gaussian mechanism, μ-GDP);
* ``_select``: repeat-and-select for the private search.
"""

from __future__ import annotations

# dp-accounting (and the scipy.signal it loads) is imported inside the functions
# that use it, so that `import sklearn_fdp` stays fast (issue 21).
from ._calibration import (
    _calibrate,
    _calibrate_pld_predicted,
    _rule_prediction,
    _sigma_guess,
    calibrate_noise_multiplier,
    calibration_cache_path,
    clear_calibration_cache,
)
from ._checks import (
    ACCOUNTANTS,
    NEIGHBORING_RELATIONS,
    Accountant,
    Neighboring,
    _check_delta,
)
from ._epsilon import (
    _pld_raw,
    _pld_scan,
    _rdp_raw,
    compute_epsilon,
    epsilon_and_accountant,
    epsilon_of_event,
)
from ._events import _relation, compose_events, dpsgd_event, gaussian_event
from ._gaussian import (
    gaussian_epsilon,
    gaussian_noise_multiplier,
    gaussian_release,
    gaussian_sigma_and_epsilon,
    gdp_epsilon,
)
from ._select import (
    TRIAL_DISTRIBUTIONS,
    calibrate_repeat_and_select,
    repeat_and_select_event,
    truncated_negative_binomial_gamma,
)

__all__ = [
    "ACCOUNTANTS",
    "NEIGHBORING_RELATIONS",
    "DpEvent",
    "dpsgd_event",
    "gaussian_event",
    "compose_events",
    "epsilon_of_event",
    "epsilon_and_accountant",
    "compute_epsilon",
    "calibrate_noise_multiplier",
    "calibration_cache_path",
    "clear_calibration_cache",
    "gaussian_noise_multiplier",
    "gaussian_epsilon",
    "gdp_epsilon",
    "gaussian_release",
    "gaussian_sigma_and_epsilon",
    "TRIAL_DISTRIBUTIONS",
    "repeat_and_select_event",
    "truncated_negative_binomial_gamma",
    "calibrate_repeat_and_select",
]

# The private names other modules of the package (and its tests and benchmarks) use.
_PRIVATE_API = ("Accountant", "Neighboring", "_check_delta", "_relation", "_rdp_raw", "_pld_raw",
                "_pld_scan", "_sigma_guess", "_calibrate", "_calibrate_pld_predicted",
                "_rule_prediction")


def __getattr__(name):
    # ``DpEvent`` is dp-accounting's class, loaded on first use (PEP 562).
    if name == "DpEvent":
        import dp_accounting

        return dp_accounting.DpEvent
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

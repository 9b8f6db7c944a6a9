"""What MLPFeatureDP and MLPFeatureDPRegressor share: multi-layer perceptrons trained with feature DP.

torch is imported lazily (inside functions), so ``import sklearn_fdp`` works
without it; the estimators raise an :class:`ImportError` naming the extra to
install when they are constructed without torch.

This module holds what the two estimators share (:class:`_BaseMLPFeatureDP`):
parameters, validation, the privacy plan, the network's architecture and
persistence, the forward pass. The estimators are in ``_mlp_classifier.py``
(:class:`MLPFeatureDP`: one-hot labels and the cross-entropy) and
``_mlp_regressor.py`` (:class:`MLPFeatureDPRegressor`: a target mapped to
[-1, 1] by the public ``y_bounds`` and the squared error); they differ only
in their targets and in what they predict. What runs on
the private data (FDP Algorithm 1's private step, its random streams, the
training loop, the losses) lives in :mod:`sklearn_fdp.neural._alg1`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import math
import sys
from numbers import Integral, Real
from typing import NamedTuple

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted, validate_data

from .. import accounting
from .._budget import (
    calibrate_dpsgd,
    check_budget_params,
    dpsgd_schedule,
    resolve_public_batch_size,
)
from .._engine._divergence import check_not_diverged
from .._docs import fill_doc
from ..exceptions import FdpWarning
from .._mechanisms.fdp import PUBLIC_LOSSES
from .._outofcore import should_stream, validate_row_source
from .._plan import feature_plan, record_plan
from .._random import NOISE_OPTIONS
from .._validation import (
    DELTA_CONSTRAINT,
    NEIGHBORING_CONSTRAINT,
    Interval,
    StrOptions,
    check_delta_vs_n,
    check_row_norms_finite,
    validate_numeric_data,
)
from ..features import check_label_in_spec, resolve_feature_spec, spec_feature_names
from .._distributed._torch import SOLO, current_collective
from ._alg1 import (Shard, Trainer, _torch_generator, compute_dtype, rank_streams,
                    spawn_streams, train)

if TYPE_CHECKING:  # annotations only
    from .._plan import PrivacyPlan
    from .._typing import ArrayLike

_TORCH_HINT = (
    "{name} needs PyTorch, which is not installed. Install the optional extra: "
    "pip install 'torch>=2.4,<3' (or, from the sklearn_fdp source tree, "
    "pip install '.[torch]'; README, 'Install', for the CPU-only wheel)"
)

ACTIVATIONS = ("relu", "tanh", "logistic", "identity")


class _Method(NamedTuple):
    """What a value of ``method`` runs."""

    feature_dp: bool  # the feature specs declare public columns (else: record-level DP)
    alg1: bool  # the private step is FDP Algorithm 1's ∇ℓ − ∇ℓ_pub (else DP-SGD on ∇ℓ)


# The one dispatch on ``method``.
_METHODS = {
    "alg1": _Method(feature_dp=True, alg1=True),
    "dpsgd": _Method(feature_dp=True, alg1=False),
    "dp": _Method(feature_dp=False, alg1=False),
}

# Rows per forward pass in predict_proba.
_PREDICT_BATCH = 8192

# alpha="auto" (issue 20): α = min(1, c / nu, (_AUTO_ALPHA_SQUARED / nu)²),
# nu = σ C sqrt(d + 1) / B, c = _AUTO_ALPHA_BINARY for two classes, else _AUTO_ALPHA,
# and public_epochs="auto": _AUTO_PUBLIC_STEPS noise-free steps on ℓ_pub before the
# noisy run when the label is public (0 otherwise). See _auto_alpha.
_AUTO_ALPHA = 0.1
_AUTO_ALPHA_BINARY = 0.2
_AUTO_ALPHA_SQUARED = 0.35
_AUTO_PUBLIC_STEPS = 500


def _auto_alpha(noise_multiplier, max_grad_norm, n_features, batch_size, n_classes=None):
    """Default α of ``"alg1"``: ``min(1, c / nu, (0.35 / nu)²)``, ``nu = σ C sqrt(d + 1) / B``.

    ``c`` = 0.2 for two classes (``n_classes == 2``), else 0.1 (more
    classes, a regressor's outputs, or classes not known when planning).

    ``nu`` is the norm of the noise in one first-layer hidden unit's
    incoming weights (``d`` inputs and the bias) of one averaged private
    gradient: the linear estimator's ``nu`` (one output column) with a
    hidden unit in its place. Every quantity is public (σ, C, d, B): α
    costs no privacy. α = 1 while ``nu <= 0.1`` (the Purchase-like data at
    ε = 1); above, the noise-free public steps carry more of the fit,
    starting from ``public_epochs="auto"``'s public pretraining, so that
    with a lot of noise the network stays near the public-only network
    instead of drifting to one class; the squared term takes over once
    ``nu > 1.225`` (very small ε or small n) and shrinks α faster.

    Chosen in issue 20 by ``benchmarks/studies/bench_mlp_alpha.py`` on validation
    splits only (30 % of adult.data, never adult.test, on all 22,792
    training rows and on 750; Purchase-like data of another seed than the
    benchmarks' test data), at ε in {0.03, 0.1, 1}: among α = 1 without
    pretraining (the default until then), and after 500 public steps α = 1,
    ``c / nu`` for c in {0.2, 0.1, 0.05} and two combinations with the
    squared term, the smallest worst shortfall from the best rule of each
    cell (0.86 points; ``0.2 / nu`` lost 10.5 on the Purchase-like data at
    ε = 0.1, where Adult at the same ``nu`` preferred it by 0.5), and the
    largest mean gain over the DP MLP. Figures:
    ``benchmarks/results/mlp_alpha.md``.

    Two classes: ``c`` = 0.2 (issue 20, third round; the defaults
    benchmark's FDP MLP ≥ DP MLP checks on Adult at ε ∈ {0.03, 0.1} were
    NOT SHOWN, the FDP MLP a point below the linear FDP model). In the
    same validation cells, ``0.2 / nu`` with the squared term was at least
    as good as ``0.1 / nu`` in every binary (Adult) cell — +0.50 and +0.48
    points at ε = 0.03 and 0.1 on all rows, +0.62 on 750 rows at ε = 1,
    unchanged where the squared term rules — while on the 100-class
    Purchase-like data it lost 7.1 points at ε = 0.1. Learning rate,
    hidden size and longer pretraining did not help on Adult
    (``benchmarks/results/defaults_rules.md``). The number of classes is
    public (``classes``, or the label values of a public label). Validated
    on one binary and one 100-class data set only.
    """
    nu = noise_multiplier * max_grad_norm * math.sqrt(n_features + 1) / batch_size
    if not nu > 0:
        return 1.0
    c = _AUTO_ALPHA_BINARY if n_classes == 2 else _AUTO_ALPHA
    return float(min(1.0, c / nu, (_AUTO_ALPHA_SQUARED / nu) ** 2))


def _import_torch(name="MLPFeatureDP"):
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - exercised with torch hidden
        raise ImportError(_TORCH_HINT.format(name=name)) from exc
    return torch


def _resolve_device(torch, device, name):
    """``"auto"``: CUDA when available, else CPU."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"`device` of {name} is 'cuda' but torch sees no CUDA device "
            f"(torch {torch.__version__}). Use device='auto' (CUDA when available) "
            "or device='cpu'."
        )
    return device


def _build_module(torch, sizes, activation, generator):
    """``Linear → act → … → Linear`` with PyTorch's default init, seeded by ``generator``.

    ``skip_init`` leaves torch's global RNG untouched; the weights and biases
    are then drawn from U(-1/sqrt(fan_in), 1/sqrt(fan_in)), the distribution
    of :class:`torch.nn.Linear`'s default initialisation.
    """
    act = {
        "relu": torch.nn.ReLU,
        "tanh": torch.nn.Tanh,
        "logistic": torch.nn.Sigmoid,
        "identity": torch.nn.Identity,
    }[activation]
    layers = []
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        lin = torch.nn.utils.skip_init(torch.nn.Linear, fan_in, fan_out)
        bound = 1.0 / math.sqrt(fan_in)
        with torch.no_grad():
            lin.weight.uniform_(-bound, bound, generator=generator)
            lin.bias.uniform_(-bound, bound, generator=generator)
        layers.append(lin)
        if i < len(sizes) - 2:
            layers.append(act())
    module = torch.nn.Sequential(*layers)
    module.requires_grad_(False)
    return module


# Hidden-layer module class name -> ``activation`` value (to rebuild a module).
_ACT_NAMES = {"ReLU": "relu", "Tanh": "tanh", "Sigmoid": "logistic", "Identity": "identity"}


def _module_to_arrays(module):
    """A plain, torch-free description of a trained module: activation and weights."""
    activations = [_ACT_NAMES[type(layer).__name__] for layer in module
                   if type(layer).__name__ in _ACT_NAMES]
    return {
        "activation": activations[0] if activations else "identity",
        "parameters": [p.detach().cpu().numpy().copy() for p in module.parameters()],
    }


def _module_from_arrays(saved):
    """Inverse of :func:`_module_to_arrays`; the module is on the CPU."""
    torch = _import_torch()
    params = saved["parameters"]
    weights = params[::2]  # (weight, bias) per Linear layer
    sizes = (weights[0].shape[1], *(w.shape[0] for w in weights))
    module = _build_module(torch, sizes, saved["activation"], torch.Generator().manual_seed(0))
    with torch.no_grad():
        for p, value in zip(module.parameters(), params):
            p.copy_(torch.from_numpy(np.asarray(value)))
    return module


# Parameter and attribute paragraphs of both MLPs (filled in by fill_doc).
_PARAGRAPHS = {
    "hidden_layer_sizes": """\
hidden_layer_sizes : tuple of int, default=(300,)
    Widths of the hidden layers (the FDP paper's Purchase100 model is one
    hidden layer of 300 ReLU units). Each must be >= 1.""",
    "activation": """\
activation : {"relu", "tanh", "logistic", "identity"}, default="relu"
    Hidden-layer activation.""",
    "feature_specs": """\
public_features, private_features : spec or None, default=None
    Exactly one, for ``method`` ``"alg1"`` and ``"dpsgd"``: the columns
    that may leak, or the ones to protect, as column indices, a boolean
    mask, column names (encoder outputs ``"<name>_*"`` match too) or a
    callable on column names; see :mod:`sklearn_fdp.features`. Ignored
    (may be None) for ``method="dp"``, which treats nothing as public.""",
    "public_loss": """\
public_loss : {"gaussian_pad", "mask"}, default="mask"
    Construction of the public view ``x_pub``: private columns replaced
    by zeros (``"mask"``) or by fresh N(0, 1) draws (``"gaussian_pad"``,
    the paper's Purchase100 recipe). ``"mask"`` is the default since it
    won every comparison of ``benchmarks/bench_mlp.py`` (on the
    Purchase-like data 0.59-0.77 against 0.36-0.38 test accuracy at
    ε = 1-8: N(0, 1) columns look nothing like sparse 0/1 purchases);
    ``FeatureDPLogisticRegression`` uses the same default.""",
    "mlp_method": """\
method : {"alg1", "dpsgd", "dp"}, default="alg1"
    ``"alg1"``: FDP Algorithm 1 (after ``public_epochs`` of public
    pretraining). ``"dpsgd"``: public pretraining, then plain DP-SGD on
    the full loss (the FDP paper's "FDP (DP-SGD)"). ``"dp"``: plain
    DP-SGD on all features (record-level DP; the baseline).""",
    "alpha": """\
alpha : float or "auto", default=1.0
    Weight of the noisy private gradient in ``g = g_pub + α g̃_priv``
    (``"alg1"`` only), > 0. The paper tunes it; smaller values average
    out more noise at the price of a bias towards ``ℓ_pub``. ``"auto"``:
    :class:`MLPFeatureDP`'s default rule (there), chosen on classification
    data only.""",
    "mlp_alpha_auto": """\
alpha : float or "auto", default="auto"
    Weight of the noisy private gradient in ``g = g_pub + α g̃_priv``
    (``"alg1"`` only), > 0; post-processing, any value keeps the
    guarantee. Smaller values average out more noise at the price of a
    bias towards ``ℓ_pub``. ``"auto"``: ``min(1, c / nu, (0.35 / nu)²)``
    with ``nu = σ C sqrt(d + 1) / B`` (the noise norm in one hidden unit's
    incoming weights of one averaged private gradient; ``d`` input
    columns, ``B`` the expected batch size) and ``c`` = 0.2 for two
    classes, 0.1 for more, when ``label_public=True``:
    1 while the noise of a step is small, smaller as it grows, so that
    at small ε or small n the noise-free public steps (after
    ``public_epochs="auto"``'s pretraining) carry the fit instead of the
    noise; 1 when the label is private (``ℓ_pub`` then knows no label to
    fall back on). A rule of public quantities only, chosen on
    validation splits of adult.data and Purchase-like data (user guide,
    "Never below the public-only model"; ``benchmarks/studies/bench_mlp_alpha.py``).
    ``alpha_`` records the value used. Until issue 20 the default was 1.""",
    "public_batch_size": """\
public_batch_size : int or "auto", default="auto"
    Size of the uniform public batches; ``"auto"``: the expected private
    batch size.""",
    "mlp_max_grad_norm": """\
max_grad_norm : float, default=1.0
    Clip norm ``C`` of each per-example (private) gradient, > 0.""",
    "mlp_batch_size": """\
batch_size : int or "auto", default="auto"
    Expected Poisson batch size ``q n``. ``"auto"``:
    ``clip(round(8 sqrt(n)), 64, 4096)``, at most ``n - 1`` (never
    ``q = 1``; about ``n / 16``, the paper's sampling rate, for n = 16,000).""",
    "mlp_learning_rate": """\
learning_rate : float, default=0.1
    Step size (the paper's 0.1), > 0.""",
    "mlp_momentum": """\
momentum : float, default=0.9
    Heavy-ball momentum in [0, 1) (the paper's 0.9).""",
    "device": """\
device : {"auto", "cpu", "cuda"}, default="auto"
    Where to train. ``"auto"``: CUDA when torch sees a GPU, else CPU.
    The fitted weights are always stored on the CPU.""",
    "per_example": """\
per_example : {"outer", "vmap"}, default="outer"
    How the clipped sum of per-example gradients is computed; both are
    exact and give the same result up to float rounding. ``"vmap"``:
    ``torch.func`` (``functional_call`` + ``vmap`` + ``grad``), which
    materialises per-example gradients in chunks. ``"outer"``: the
    closed form for Linear layers -- a per-example gradient is
    ``δ_i a_iᵀ`` (a difference of two for ``ℓ − ℓ_pub``, split into
    orthogonal pieces so that its norm does not cancel), so its norm
    and the clipped sum need one batched backward pass and a few matrix
    products per layer; tens of times faster (see
    ``benchmarks/bench_mlp.py``). Both clip every per-example gradient
    to ``max_grad_norm · (1 − 4u)`` (``u``: float32's unit roundoff).""",
    "mlp_random_state": """\
random_state : int, RandomState instance or None, default=None
    Seeds the initialisation, the batches, the padding and the noise; on
    the CPU a fixed value reproduces the fit.""",
    "mlp_noise": """\
noise : {"default", "secure"}, default="default"
    Source of the randomness privacy rests on: the Poisson batch coins and the
    Gaussian noise (drawn on the CPU and copied to ``device``). ``"default"``:
    NumPy PCG64 streams spawned from ``random_state`` (reproducible).
    ``"secure"``: fresh bits from the OS CSPRNG (``os.urandom``) and a
    Gaussian sampler hardened against floating-point attacks (four Box–Muller
    normals summed and halved, as in Opacus's ``secure_mode``); slower (user
    guide, "Secure noise"), and ``random_state`` no longer reproduces the fit
    (it still seeds the initialisation, the public batches and their
    padding; the padding of the private batch's ``ℓ_pub`` term comes from
    the CSPRNG too).
    The accounting, and so ``epsilon_``, is the same.""",
    "mlp_verbose": """\
verbose : int, default=0
    Print, after every epoch, the mean training loss of that epoch's
    private batches and the ε spent so far.""",
    "mlp_fitted_inputs": """\
n_features_in_ : int
feature_names_in_ : ndarray of shape (``n_features_in_``,)
    Defined when ``X`` has string column names.
feature_names_ : ndarray of str of shape (``n_features_in_``,) or None
    Column names the feature specs were resolved against:
    ``feature_names_in_``, else the ``feature_names`` passed to ``fit``
    (as :class:`~sklearn_fdp.pipeline.PrivatePipeline` does), else None.
module_ : torch.nn.Sequential
    The trained network, on the CPU.
device_ : str
    Device the fit ran on.""",
    "mlp_fitted_privacy": """\
epsilon_ : float
    ε the run actually spent at ``delta_`` (≤ ``epsilon``).
delta_ : float
noise_multiplier_ : float
    σ used (calibrated or given).
steps_ : int
    Number of noisy steps.
n_iter_ : int
    Same as ``steps_``.
batch_size_ : int
    Expected private batch size.
sampling_rate_ : float
    Poisson rate ``q = batch_size_ / n_samples``.
accountant_ : str
    Accountant that computed ``noise_multiplier_`` and ``epsilon_``.
dp_event_ : dp_accounting.DpEvent
    The mechanism run by ``fit``, for re-accounting (e.g. at another δ).
privacy_plan_ : PrivacyPlan
    What the fit spent and protects, computed from public quantities
    before any private value was read (``privacy_plan(...)``); its
    ``dp_event`` is ``dp_event_``.
public_mask_ : ndarray of bool of shape (``n_features_in_``,)
    Columns treated as public (all False for ``method="dp"``).
public_features_ : ndarray of int
    Indices of the public columns.
private_features_ : ndarray of int
    Indices of the protected columns.
label_public_ : bool
    Whether the label was treated as public.
alpha_ : float
    α used (1 unless ``method="alg1"``; ``"auto"`` resolved).
public_steps_ : int
    Noise-free pretraining steps on ``ℓ_pub`` run before the noisy ones
    (``public_epochs`` resolved; 0 without pretraining).
public_batch_size_ : int
    Size of the public batches (0 when no public gradient was used).""",
}


def _fill_mlp_doc(obj):
    return fill_doc(obj, extra=_PARAGRAPHS)


class _BaseMLPFeatureDP(BaseEstimator):
    """What both MLPs share: parameters, the plan, ``fit``'s straight line, the forward pass.

    A subclass sets ``_loss`` (a key of :data:`._alg1.LOSSES`) and
    implements ``_training_data(X, y, comm) -> (X, Y, fitted)`` (``Y``: the
    training targets, one column per network output; ``fitted``: its
    target attributes, stored by ``fit``) and its predictions. Not an
    estimator by itself.
    """

    _loss = None

    _parameter_constraints: dict = {
        "hidden_layer_sizes": "no_validation",  # checked by _hidden_sizes
        "activation": [StrOptions(set(ACTIVATIONS))],
        "public_features": "no_validation",
        "private_features": "no_validation",
        "label_public": ["boolean"],
        "public_loss": [StrOptions(set(PUBLIC_LOSSES))],
        "method": [StrOptions(set(_METHODS))],
        "epsilon": [Interval(Real, 0, None, closed="neither"), None],
        "delta": DELTA_CONSTRAINT,
        "max_grad_norm": [Interval(Real, 0, None, closed="neither")],
        "noise_multiplier": [Interval(Real, 0, None, closed="neither"), None],
        "alpha": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "batch_size": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "public_batch_size": [Interval(Integral, 1, None, closed="left"),
                              StrOptions({"auto"})],
        "public_epochs": [Interval(Real, 0, None, closed="left"), StrOptions({"auto"})],
        "epochs": [Interval(Real, 0, None, closed="neither")],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "momentum": [Interval(Real, 0, 1, closed="left")],
        "accountant": [StrOptions({*accounting.ACCOUNTANTS, "auto"})],
        "neighboring": NEIGHBORING_CONSTRAINT,
        "device": [StrOptions({"auto", "cpu", "cuda"})],
        "per_example": [StrOptions({"outer", "vmap"})],
        "random_state": ["random_state"],
        "noise": [StrOptions(set(NOISE_OPTIONS))],
        "verbose": ["verbose"],
    }

    def _hidden_sizes(self):
        name = type(self).__name__
        sizes = self.hidden_layer_sizes
        if isinstance(sizes, Integral) and not isinstance(sizes, bool):
            sizes = (sizes,)
        try:
            sizes = tuple(sizes)
        except TypeError:
            sizes = None
        if sizes is None or not all(
            isinstance(s, Integral) and not isinstance(s, bool) and s >= 1 for s in sizes
        ):
            raise ValueError(
                f"`hidden_layer_sizes` of {name} must be a tuple of positive integers "
                f"(e.g. (300,)), got {self.hidden_layer_sizes!r}."
            )
        return tuple(int(s) for s in sizes)

    def _check_params(self):
        """Rules spanning several parameters (besides the budget's)."""
        name = type(self).__name__
        self._hidden_sizes()
        if self.public_epochs == "auto":  # pretrains only where it can
            return
        if self.public_epochs > 0 and not _METHODS[self.method].feature_dp:
            raise ValueError(
                f"public_epochs={self.public_epochs!r} of {name} needs public data, but "
                "method='dp' treats every feature as private. Use method='dpsgd' (public "
                "pretraining, then DP-SGD) or public_epochs=0."
            )
        if self.public_epochs > 0 and not self.label_public:
            raise ValueError(
                f"public_epochs={self.public_epochs!r} of {name} needs label_public=True: "
                "with a private label the public loss is label-free and pretraining on "
                "it alone has no minimiser. Set public_epochs=0 or label_public=True."
            )

    def _feature_split(self, n_features, feature_names):
        """``(public_mask, label_public)``: what the fit treats as public.

        ``method="dp"`` treats nothing as public (record-level DP); the other
        methods resolve ``public_features``/``private_features`` against
        ``feature_names``.
        """
        if not _METHODS[self.method].feature_dp:
            return np.zeros(n_features, dtype=bool), False
        public_mask = resolve_feature_spec(
            self.public_features,
            self.private_features,
            n_features,
            feature_names,
            type(self).__name__,
            label_public=self.label_public,
        )
        return public_mask, bool(self.label_public)

    def _public_batch_size(self, uses_public, batch_size, n_samples):
        """Size of the uniform public batches (0 when no public gradient is used)."""
        if not uses_public:
            return 0
        return resolve_public_batch_size(self, batch_size, n_samples)

    @fill_doc
    def privacy_plan(self, n_samples: int, n_features: int, *,
                     feature_names: ArrayLike | None = None,
                     n_classes: int | None = None) -> PrivacyPlan:
        """What a fit on ``n_samples`` × ``n_features`` data spends and protects.

        Computed from public quantities only (the shape, the column names
        and the parameters); ``fit`` runs with the σ and the feature split
        it holds and stores it as ``privacy_plan_``. ``method="dp"``
        protects whole records; the other methods the protected columns
        (named from ``feature_names``, else ``"x<i>"``) and the label unless
        ``label_public``.

        Parameters
        ----------
        [[plan_shape]]
        feature_names : array-like of str or None, default=None
            Column names, to resolve feature specs given by name and to name
            the protected columns.
        n_classes : int or None, default=None
            Number of classes (a classifier's outputs), read by
            ``alpha="auto"`` (its constant is 0.2 for two classes, 0.1
            otherwise). None: ``len(classes)`` when ``classes`` is set,
            else the rule for more than two classes. ``fit`` passes the
            number of classes it found.

        Returns
        -------
        plan : PrivacyPlan
            Its ``details`` hold the public settings of the run:
            ``public_features`` (indices of the public columns), ``alg1``,
            ``alpha`` and ``public_batch_size``.
        """
        check_budget_params(self)
        self._check_params()
        method = _METHODS[self.method]
        schedule = dpsgd_schedule(self, n_samples)
        public_mask, label_public = self._feature_split(n_features, feature_names)
        if self.public_epochs == "auto":  # pretraining needs public columns and label
            pretrain = method.feature_dp and label_public
        else:
            pretrain = self.public_epochs > 0
        public_batch_size = self._public_batch_size(method.alg1 or pretrain,
                                                    schedule.batch_size, n_samples)
        if not pretrain:
            public_steps = 0
        elif self.public_epochs == "auto":
            public_steps = _AUTO_PUBLIC_STEPS
        else:
            public_steps = max(1, math.ceil(self.public_epochs * n_samples / public_batch_size))
        sigma, event, spent, accountant = calibrate_dpsgd(self, schedule.sampling_rate,
                                                          schedule.steps)
        if not method.alg1:
            alpha = 1.0
        elif self.alpha == "auto":  # the fallback to ℓ_pub needs its label: 1 without it
            if n_classes is None and getattr(self, "classes", None) is not None:
                n_classes = len(self.classes)
            alpha = (_auto_alpha(sigma, self.max_grad_norm, n_features, schedule.batch_size,
                                 n_classes) if label_public else 1.0)
        else:
            alpha = float(self.alpha)
        details = {"public_features": tuple(int(j) for j in np.flatnonzero(public_mask)),
                   "alg1": method.alg1, "alpha": alpha,
                   "public_batch_size": public_batch_size, "public_steps": public_steps}
        args = (event, spent, float(self.delta), accountant)
        kwargs = dict(noise_multiplier=sigma, schedule=schedule, details=details)
        if not method.feature_dp:  # plain DP-SGD on every column: whole records
            return record_plan(*args, **kwargs)
        protected = [str(feature_names[j]) if feature_names is not None else f"x{j}"
                     for j in np.flatnonzero(~public_mask)]
        return feature_plan(*args, protected, not label_public,
                            protected_columns=np.flatnonzero(~public_mask), **kwargs)

    def _validate_features(self, X, y, y_numeric):
        """``(X, y)`` checked, in memory or out of core; a spec naming the label is rejected."""
        if _METHODS[self.method].feature_dp:  # "dp" ignores the feature specs
            check_label_in_spec(self, X, y)
        if should_stream(X):
            # A large numpy.memmap / dask array: checked in chunks, each batch's
            # rows read from it (sklearn_fdp._outofcore), never copied whole.
            return validate_row_source(self, X, y, compute_dtype=np.float32)
        X, y = validate_numeric_data(self, X, y, dtype=[np.float32, np.float64],
                                     y_numeric=y_numeric)
        # The network computes in float32: reject rows whose squared norm overflows it.
        check_row_norms_finite(X, type(self).__name__, compute_dtype=np.float32)
        return X, y

    def _fit(self, X, y, feature_names):
        """``fit``'s straight line: validate, plan, train, check, store.

        Under :func:`~sklearn_fdp.neural.fit_distributed` the fit's collective
        is this rank's ``torch.distributed`` group: ``X, y`` are this rank's
        shard, ``n_samples`` counts the rows of every shard, and the training
        loop combines the ranks' sums (:mod:`sklearn_fdp.neural._alg1`); in
        one process (plain ``fit``) every collective step is the identity.
        """
        torch = _import_torch(type(self).__name__)
        name = type(self).__name__
        comm = current_collective()
        comm.check_params(self)
        X, Y, fitted = self._training_data(X, y, comm)
        n_local, n_features = X.shape
        offset, n_samples = comm.layout(n_local, n_features, feature_names)
        check_delta_vs_n(self.delta, n_samples, name, stacklevel=6)  # the caller of fit
        device = _resolve_device(torch, self.device, name)
        names = spec_feature_names(self, n_features, feature_names)
        n_classes = len(fitted["classes_"]) if "classes_" in fitted else None
        plan = self.privacy_plan(n_samples, n_features, feature_names=names,
                                 n_classes=n_classes)
        run = plan.details
        public_mask = np.zeros(n_features, dtype=bool)
        public_mask[list(run["public_features"])] = True
        label_public = not plan.label_protected

        streams = rank_streams(spawn_streams(comm.seed(self.random_state), self.noise),
                               comm.rank, comm.world_size)
        trainer = self._trainer(torch, X, Y, public_mask, label_public, run["alg1"], device,
                                streams.init, comm)
        train(trainer, n_samples, plan.schedule, plan.noise_multiplier, streams,
              alg1=run["alg1"], alpha=run["alpha"], learning_rate=self.learning_rate,
              momentum=self.momentum, public_steps=run["public_steps"],
              public_batch_size=run["public_batch_size"],
              on_epoch=self._epoch_printer(plan) if comm.rank == 0 else None,
              comm=comm, shard=Shard(offset, n_local))
        trainer.write_back()
        # A check of the released (DP) weights and public quantities only:
        # post-processing, no privacy cost. Non-finite weights raise, naming the
        # cause (learning rate, noise, or the scale of X: the public gradient of
        # pretraining and of ℓ_pub is not clipped; sklearn_fdp._engine._divergence).
        # Large finite weights do not: hidden weights have no fixed scale, and a
        # regressor's predictions are clipped to y_bounds.
        check_not_diverged(
            self, [p.detach().cpu().double().numpy() for p in trainer.module.parameters()],
            learning_rate=self.learning_rate,
            noise_multiplier=float(run["alpha"]) * float(plan.noise_multiplier),
            max_grad_norm=self.max_grad_norm, steps=plan.schedule.steps,
            batch_size=plan.schedule.batch_size, momentum=self.momentum,
            mapped=False)

        for key, value in fitted.items():
            setattr(self, key, value)
        self.feature_names_ = names
        self.public_mask_ = public_mask
        self.public_features_ = np.flatnonzero(public_mask)
        self.private_features_ = np.flatnonzero(~public_mask)
        self.label_public_ = label_public
        self.public_batch_size_ = run["public_batch_size"]
        self.module_ = trainer.module
        self.device_ = device
        self.alpha_ = run["alpha"]
        self.public_steps_ = run["public_steps"]
        self.steps_ = self.n_iter_ = plan.schedule.steps
        self.batch_size_ = plan.schedule.batch_size
        self.sampling_rate_ = plan.schedule.sampling_rate
        self.noise_multiplier_ = float(plan.noise_multiplier)
        self.dp_event_ = plan.dp_event
        self.epsilon_ = float(plan.epsilon)
        self.delta_ = float(self.delta)
        self.accountant_ = plan.accountant
        self.privacy_plan_ = plan
        return self

    def _trainer(self, torch, X, Y, public_mask, label_public, alg1, device, init_rng,
                 comm=SOLO):
        """The network (initialised from ``init_rng``) and its :class:`~._alg1.Trainer`.

        ``Y``: the training targets, one column per output of the network.
        ``trainer.clipped_sum`` is the private batch's pre-noise release: the
        sensitivity tests (``tests/sensitivity/test_mlp*.py``) build it here.
        """
        sizes = (X.shape[1], *self._hidden_sizes(), Y.shape[1])
        module = _build_module(torch, sizes, self.activation,
                               _torch_generator(torch, init_rng, "cpu"))
        dtype = getattr(torch, compute_dtype(X, public_mask, alg1, comm))
        return Trainer(torch, module, X, Y, public_mask, label_public, self.public_loss,
                       device, self.max_grad_norm, self.activation, self.per_example,
                       dtype=dtype, loss=self._loss)

    def _epoch_printer(self, plan):
        """``on_epoch(done, epoch, losses)`` for ``verbose``: the ε spent so far, or None."""
        if not self.verbose:
            return None
        name, steps = type(self).__name__, plan.schedule.steps

        def on_epoch(done, epoch, losses):
            eps = accounting.compute_epsilon(
                plan.noise_multiplier, plan.schedule.sampling_rate, done, self.delta,
                accountant=plan.accountant, neighboring=self.neighboring)
            loss = float(np.mean(losses)) if losses else float("nan")
            print(
                f"[{name}] epoch {epoch:.1f}: step {done}/{steps}, train loss {loss:.4f} "
                f"(not private), ε spent {eps:.4g} (δ={self.delta:g})",
                file=sys.stdout,
                flush=True,
            )

        return on_epoch

    # -- prediction ------------------------------------------------------------

    def _predict_device(self, torch):
        if self.device == "cpu":
            return "cpu"
        # A model fitted on a GPU still predicts on a machine without one.
        return "cuda" if torch.cuda.is_available() else "cpu"

    def _forward(self, X, output=None):
        """The network's outputs on ``X`` in float64, in batches of rows.

        ``output(torch, z)``: applied to each batch's outputs on the device
        (e.g. the softmax), before they are copied back.

        The forward pass runs in float64 (the weights trained in float32,
        upcast exactly), so a row's outputs do not depend on the other rows
        predicted with it beyond float64 rounding (~1e-16): in float32 the
        BLAS kernel chosen for the batch's shape changed them by up to ~1e-7.
        """
        check_is_fitted(self)
        X = validate_data(self, X, dtype=[np.float32, np.float64], reset=False)
        torch = _import_torch(type(self).__name__)
        from torch.func import functional_call

        device = self._predict_device(torch)
        # float64 throughout: batch-invariant predictions (issue 22 item 6).
        params = {k: v.detach().to(device=device, dtype=torch.float64)
                  for k, v in self.module_.named_parameters()}
        n_outputs = self.module_[-1].out_features
        out = np.empty((X.shape[0], n_outputs), dtype=np.float64)
        with torch.no_grad():
            for start in range(0, X.shape[0], _PREDICT_BATCH):
                xb = torch.tensor(X[start:start + _PREDICT_BATCH], dtype=torch.float64,
                                  device=device)
                z = functional_call(self.module_, params, (xb,))
                if output is not None:
                    z = output(torch, z)
                out[start:start + len(xb)] = z.cpu().numpy()
        return out

    # -- persistence -----------------------------------------------------------

    def __getstate__(self):
        """Pickle/skops state: ``module_`` as NumPy arrays, not torch objects.

        skops cannot rebuild torch tensors, and arrays load anywhere (no CUDA
        or torch pickle protocol involved); :meth:`__setstate__` rebuilds the
        module on the CPU.
        """
        state = super().__getstate__()
        if "module_" in state:
            state = dict(state)
            state["module_"] = _module_to_arrays(state["module_"])
        return state

    def __setstate__(self, state):
        if isinstance(state.get("module_"), dict):
            state = dict(state)
            state["module_"] = _module_from_arrays(state["module_"])
        super().__setstate__(state)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        # noise="secure" draws from the OS CSPRNG: random_state does not fix the fit.
        tags.non_deterministic = self.noise == "secure"
        return tags

"""Parameter and attribute paragraphs shared by several estimators' docstrings.

One source instead of copies: a docstring line that reads ``[[name]]`` (alone,
indented) is replaced by the paragraph ``name`` below, at that line's
indentation, by :func:`fill_doc`. Only paragraphs whose meaning is the same
for every estimator that uses them belong here; an estimator whose
parameter means something else writes its own.
"""

import re
import textwrap

PARAGRAPHS = {
    # The shape a privacy_plan takes (every estimator's: one meaning).
    "plan_shape": """\
n_samples : int
    Number of training rows.
n_features : int
    Number of input columns.""",
    "epsilon": """\
epsilon : float or None, default=1.0
    Privacy budget of one call to ``fit``, in (0, inf). The noise
    multiplier is calibrated so that the run spends at most this. May be
    None only when ``noise_multiplier`` is given.""",
    "delta": """\
delta : float, default=1e-5
    δ of the guarantee, in (0, 1). Keep it well below ``1 / n_samples``
    (a warning is issued otherwise).""",
    "max_grad_norm": """\
max_grad_norm : float, default=1.0
    Clip norm ``C`` of each per-example gradient, > 0. With rows of norm
    at most 1 and an intercept, a logistic gradient has norm at most
    ``sqrt(2)``.""",
    "noise_multiplier": """\
noise_multiplier : float or None, default=None
    σ. When given, ε is computed rather than targeted; if ``epsilon`` is
    also given, ``fit`` raises :class:`BudgetExceededError` when the
    run would spend more than ``epsilon``.""",
    "batch_size": """\
batch_size : int or "auto", default="auto"
    Expected Poisson batch size ``q * n``. ``"auto"`` uses
    ``clip(round(8 * sqrt(n)), 64, 4096)``, at most ``n - 1`` (never
    ``q = 1``).""",
    "epochs": """\
epochs : float, default=10.0
    Passes over the data; the number of steps is
    ``ceil(epochs * n / batch_size)``.""",
    "learning_rate": """\
learning_rate : float or "auto", default="auto"
    Base step size. ``"auto"`` scales it to the noise of each step:
    ``min(4 k^0.3, sqrt(k) 0.005 B^1.5 / (σ C sqrt(d + 1)))`` for ``d``
    features, ``k`` output columns (1 if binary), clip ``C``, expected
    batch ``B`` (a rule fitted on a validation split of Adult; see
    ``benchmarks/bench_adult.py``).""",
    "lr_schedule": """\
lr_schedule : {"constant", "cosine", "linear"}, default="cosine"
    Decay of the step size over the run.""",
    "momentum": """\
momentum : float, default=0.9
    Heavy-ball momentum in [0, 1). On sparse (CSR) data the noise of
    coordinates a batch does not touch is drawn lazily and exactly, with
    or without momentum and weight decay (see the user guide, "Lazy
    noise"), so a step costs its non-zeros instead of ``d`` Gaussian
    draws.""",
    "average": """\
average : bool, default=True
    Return the average of the iterates of the second half of the run
    (post-processing: free) instead of the last one.""",
    "l2_regularization": """\
l2_regularization : float, default=0.0
    Weight decay ``λ θ`` added to every step.""",
    "fit_intercept": """\
fit_intercept : bool, default=True
    Fit an intercept; it is part of every per-example gradient and hence
    clipped and noised with it.""",
    "accountant": """\
accountant : {"auto", "pld", "rdp"}, default="auto"
    dp-accounting's accountant. ``"pld"`` (privacy-loss distributions) is
    the tightest: 5-8 % less noise than ``"rdp"`` for the same ε, but
    slower to evaluate for large ε. ``"auto"`` uses PLD for ``epsilon <= 10``
    (and for ``neighboring="replace"``) and RDP above.""",
    "neighboring": """\
neighboring : {"add_remove", "replace"}, default="add_remove"
    Neighbouring relation of the guarantee. ``"replace"`` needs PLD
    (``accountant="pld"`` or ``"auto"``).""",
    "random_state": """\
random_state : int, RandomState instance or None, default=None
    Seeds the batches and the noise; a fixed value reproduces ``coef_``.""",
    "noise": """\
noise : {"default", "secure"}, default="default"
    Source of the randomness privacy rests on: the Poisson batch coins and the
    Gaussian noise of the steps. ``"default"``: NumPy PCG64 streams spawned
    from ``random_state`` (reproducible). ``"secure"``: fresh bits from the OS
    CSPRNG (``os.urandom``) and a Gaussian sampler hardened against
    floating-point attacks (four Box–Muller normals summed and halved, as in
    Opacus's ``secure_mode``); slower (user guide, "Secure noise"), and
    ``random_state`` no longer reproduces the fit. The accounting, and so
    ``epsilon_``, is the same.""",
    "verbose": """\
verbose : int, default=0
    Print the ε spent after every epoch.""",
    "classes": """\
classes : array-like of shape (n_classes,) or None, default=None
    Every label the task can have, a public list chosen without looking
    at ``y``; ``classes_`` is then this list (sorted) whatever ``y``
    holds, and a label of ``y`` outside it raises ``ValueError``. None:
    ``classes_`` is read from ``y`` and is not private (a label seen
    once, or missing, shows in it); give ``classes`` whenever the label
    is protected and some class may be rare.""",
    # The fitted linear classifier's attributes, as scikit-learn's linear models name them.
    "linear_classifier_attributes": """\
coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
intercept_ : ndarray of shape (1,) or (n_classes,)
classes_ : ndarray of shape (n_classes,)
n_features_in_ : int
feature_names_in_ : ndarray of shape (``n_features_in_``,)
    Defined when ``X`` has string column names.""",
    "epsilon_": """\
epsilon_ : float
    ε the run actually spent at ``delta_`` (≤ ``epsilon``).""",
    "delta_": """\
delta_ : float""",
    "noise_multiplier_": """\
noise_multiplier_ : float
    σ used (calibrated or given).""",
    "sampling_rate_": """\
sampling_rate_ : float
    Poisson rate ``q = batch_size_ / n_samples``.""",
    "batch_size_": """\
batch_size_ : int
    Expected batch size used.""",
    "learning_rate_": """\
learning_rate_ : float
    Step size used.""",
    "steps_": """\
steps_ : int
    Number of noisy steps.""",
    "n_iter_": """\
n_iter_ : int
    Same as ``steps_``.""",
    "accountant_": """\
accountant_ : str
    Accountant that computed ``noise_multiplier_`` and ``epsilon_``.""",
    "dp_event_": """\
dp_event_ : dp_accounting.DpEvent
    The mechanism run by ``fit``, for re-accounting (e.g. at another δ).""",
    "public_features_": """\
public_features_ : ndarray of int
    Indices of the public columns.""",
    "private_features_": """\
private_features_ : ndarray of int
    Indices of the protected columns.""",
    "label_public_": """\
label_public_ : bool
    Whether the label was treated as public.""",
    "privacy_plan_": """\
privacy_plan_ : PrivacyPlan
    What the fit spent and protects, computed from public quantities
    before any private value was read (``privacy_plan(...)``); its
    ``dp_event`` is ``dp_event_``.""",
}

_MARKER = re.compile(r"^( *)\[\[(\w+)\]\]$", flags=re.MULTILINE)


def fill_doc(obj, extra=None):
    """Replace every ``[[name]]`` line of ``obj.__doc__`` by ``PARAGRAPHS[name]``.

    ``extra``: paragraphs shared by a family of estimators in their own
    module (e.g. the two MLPs), looked up before :data:`PARAGRAPHS`.
    """
    table = PARAGRAPHS if extra is None else {**PARAGRAPHS, **extra}

    def paragraph(match):
        indent, name = match.groups()
        if name not in table:
            raise KeyError(f"{obj.__qualname__}'s docstring asks for the unknown shared "
                           f"paragraph [[{name}]]; add it to sklearn_fdp._docs.PARAGRAPHS.")
        return textwrap.indent(table[name], indent)

    if obj.__doc__:
        obj.__doc__ = _MARKER.sub(paragraph, obj.__doc__)
    return obj

"""MLPFeatureDP: a multi-layer perceptron trained with feature DP, in PyTorch.

torch is imported lazily (inside functions), so ``import sklearn_fdp`` works
without it; :class:`MLPFeatureDP` raises an :class:`ImportError` naming the
extra to install when it is constructed without torch.

One training step of FDP Algorithm 1 (FDP paper, §5 and the Purchase100
recipe of §6.2):

1. a Poisson batch of the private data (sampler of :mod:`sklearn_fdp._engine`);
2. per-example gradients of ``ℓ(w; x, y) − ℓ_pub(w; x_pub, y)`` by
   ``torch.func`` (``functional_call`` + ``vmap`` + ``grad``, in chunks of
   examples so that memory stays bounded), each clipped to ``max_grad_norm``
   and summed; ``N(0, (σ C)² I)`` added; divided by the *expected* batch
   size ``q n``;
3. the mean gradient of ``ℓ_pub`` on a uniform public batch drawn from its
   own generator (Prop. 3), mixed in as ``g = g_pub + α g̃_priv``;
4. a heavy-ball momentum step.

``x_pub`` keeps the public columns and replaces the private ones by fresh
N(0, 1) draws (``"gaussian_pad"``) or zeros (``"mask"``); with a private
label ``ℓ_pub`` is the cross-entropy against the uniform prior (label-free),
the MLP analogue of the label-DP case study of §5 (as for the linear model,
see :mod:`sklearn_fdp._mechanisms.fdp`).
"""

import math
import sys
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from .. import accounting
from .._engine import PoissonSampler, UniformSampler
from .._mechanisms.fdp import PUBLIC_LOSSES
from .._outofcore import is_row_source, should_stream, validate_row_source
from .._progress import progress_reporter
from .._random import NOISE_OPTIONS, secure_if, spawn_generators
from .._validation import (
    DELTA_CONSTRAINT,
    NEIGHBORING_CONSTRAINT,
    Interval,
    StrOptions,
    _fit_context,
    atomic_fit,
    check_delta_vs_n,
    check_row_norms_finite,
    encode_labels,
    validate_numeric_data,
)
from ..features import check_label_in_spec, resolve_feature_spec, spec_feature_names
from .._budget import DPSGDBudgetMixin

__all__ = ["MLPFeatureDP"]

_TORCH_HINT = (
    "MLPFeatureDP needs PyTorch, which is not installed. Install the optional extra: "
    "pip install sklearn-fdp[torch]"
)

ACTIVATIONS = ("relu", "tanh", "logistic", "identity")
METHODS = ("alg1", "dpsgd", "dp")

# Streams spawned from random_state, in this order, for every fit.
_SAMPLE, _NOISE, _PUBLIC, _INIT = range(4)

# Per-example gradients are materialised for at most this many floats at a
# time (chunks of examples): 2**25 floats = 128 MiB in float32.
_PER_EXAMPLE_FLOATS = 1 << 25

# Rows per forward pass in predict_proba.
_PREDICT_BATCH = 8192

# Largest |value| of a public column that Algorithm 1 trains on in float32
# (above it, in float64: MLPFeatureDP._compute_dtype). Removing one record moved the other
# records' clipped float32 gradients by 3e-7 C at public scale 10, 1e-6 C at
# 30 and 3e-5 C at 100 (tests/sensitivity/test_mlp.py's batch check; the
# rounding slack of a 10-record sum is 1.2e-5 C): up to 10, float32 is at rounding level.
MAX_PUBLIC_ABS = 10.0


def _max_abs_columns(X, cols):
    """``max |X[:, cols]|`` without copying the selection whole (row blocks)."""
    top = 0.0
    if is_row_source(X):  # out of core: one pass over row chunks
        for _, block in X.iter_chunks():
            if block.size and len(cols):
                top = max(top, float(np.max(np.abs(block[:, cols]))))
        return top
    step = max(1, (8 << 20) // max(1, len(cols) * X.itemsize))
    for start in range(0, X.shape[0], step):
        block = np.asarray(X[start:start + step])[:, cols]
        if block.size:
            top = max(top, float(np.max(np.abs(block))))
    return top


def _import_torch():
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - exercised with torch hidden
        raise ImportError(_TORCH_HINT) from exc
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


def _torch_generator(torch, rng, device):
    """A torch generator on ``device`` seeded from a NumPy stream (its only use)."""
    gen = torch.Generator(device=device)
    gen.manual_seed(int(rng.integers(0, 2**63 - 1)))
    return gen


class _SecurePad:
    """N(0, 1) padding from a :class:`~sklearn_fdp._secure.SecureGenerator` (``noise="secure"``).

    The padding of the private batch's ``ℓ_pub`` term is a private stream
    (which record gets which draw follows the secret batch), so it is drawn
    like the noise: on the CPU, in float64, from the OS CSPRNG;
    :meth:`_Trainer.public_view` moves it to the device.
    """

    def __init__(self, torch, rng):
        self.torch = torch
        self.rng = rng

    def __call__(self, idx, n_cols):
        return self.torch.from_numpy(self.rng.standard_normal((len(idx), int(n_cols))))


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


_ACT_FUNCTIONS = {
    "relu": lambda torch: torch.relu,
    "tanh": lambda torch: torch.tanh,
    "logistic": lambda torch: torch.sigmoid,
    "identity": lambda torch: (lambda z: z),
}


def _sq_norms(v):
    """Row-wise squared norms of a ``[m, k]`` tensor, accumulated in float64."""
    v = v.double()
    return (v * v).sum(1)


def _orthogonal_pair(torch, d1, a1, d2, a2):
    """``d1 a1ᵀ − d2 a2ᵀ`` (row-wise) as two Frobenius-orthogonal outer products.

    With ``b`` the longer of ``a1, a2`` (per row) and ``c = other − β b``,
    ``β = (b·other) / ‖b‖²`` (so ``|β| ≤ 1`` and ``c ⊥ b``):
    ``d1 a1ᵀ − d2 a2ᵀ = u bᵀ + v cᵀ`` with ``u = d1 − β d2, v = −d2`` when
    ``b = a1`` and ``u = β d1 − d2, v = d1`` when ``b = a2``. Computed in
    float64, returned in the dtype of the inputs as ``[(u, b), (v, c)]``; the
    rounding to that dtype leaves ``b·c`` at rounding level, and
    :func:`_sq_norm_of_outer_sum` includes that cross term.
    """
    dtype = a1.dtype
    a1d, a2d, d1d, d2d = a1.double(), a2.double(), d1.double(), d2.double()
    n1, n2 = (a1d * a1d).sum(1), (a2d * a2d).sum(1)
    first = (n1 >= n2)[:, None]
    base = torch.where(first, a1d, a2d)
    other = torch.where(first, a2d, a1d)
    nb = torch.maximum(n1, n2)[:, None]
    beta = torch.where(nb > 0, (base * other).sum(1, keepdim=True) / nb.clamp_min(1e-300),
                       torch.zeros_like(nb))
    perp = other - beta * base
    u = torch.where(first, d1d - beta * d2d, beta * d1d - d2d)
    v = torch.where(first, -d2d, d1d)
    return [(u.to(dtype), base.to(dtype)), (v.to(dtype), perp.to(dtype))]


def _sq_norm_of_outer_sum(pieces):
    """Row-wise ``‖Σ_k U_k[i] V_k[i]ᵀ‖²_F`` in float64, cross terms included."""
    sq = 0.0
    for k, (u, v) in enumerate(pieces):
        ud, vd = u.double(), v.double()
        sq = sq + (ud * ud).sum(1) * (vd * vd).sum(1)
        for u2, v2 in pieces[k + 1:]:
            sq = sq + 2.0 * (ud * u2.double()).sum(1) * (vd * v2.double()).sum(1)
    return sq


class _Trainer:
    """The torch side of one fit: data on the device, losses, oracles, the loop."""

    def __init__(self, torch, module, X, Y, public_mask, label_public, public_loss,
                 device, max_grad_norm, activation, per_example, dtype=None):
        from torch.func import functional_call, grad, vmap

        dtype = torch.float32 if dtype is None else dtype

        self.torch = torch
        self.module = module
        self.device = device
        self.dtype = dtype
        if is_row_source(X):
            # Out of core: the rows of each batch are read from X when needed.
            self.X, self.source = None, X
            self._last = None
        else:
            # A copy (never a view of the caller's array, which may be read-only).
            self.X, self.source = torch.tensor(X, dtype=dtype, device=device), None
        self.Y = torch.as_tensor(Y, dtype=dtype, device=device)  # one-hot targets
        self.n_classes = Y.shape[1]
        self.private_idx = torch.as_tensor(np.flatnonzero(~public_mask), device=device)
        self.public_idx = torch.as_tensor(np.flatnonzero(public_mask), device=device)
        self.label_public = bool(label_public)
        self.pad = public_loss == "gaussian_pad"
        self.C = float(max_grad_norm)
        # Target of the label-free public loss: the uniform prior.
        self.prior = torch.full((self.n_classes,), 1.0 / self.n_classes, dtype=dtype,
                                device=device)
        # The working copy of the weights (float64 for Algorithm 1 on large public
        # columns, MLPFeatureDP._compute_dtype); write_back casts to the module's float32.
        self.params = {k: v.detach().clone().to(device=device, dtype=dtype)
                       for k, v in module.named_parameters()}
        n_params = sum(v.numel() for v in self.params.values())
        self.chunk = max(1, _PER_EXAMPLE_FLOATS // n_params)

        def logits(params, x):
            return functional_call(module, params, (x,))

        def soft_ce(z, t):
            # Cross-entropy against a (one-hot or soft) target distribution t.
            return torch.logsumexp(z, -1) - (z * t).sum(-1)

        def loss_full(params, x, t):
            return soft_ce(logits(params, x.unsqueeze(0)).squeeze(0), t)

        def loss_diff(params, x, t, x_pub, t_pub):
            return loss_full(params, x, t) - loss_full(params, x_pub, t_pub)

        def batch_loss(params, X, T):
            return soft_ce(logits(params, X), T).mean()

        self.per_example = per_example
        self.linear_keys = [(f"{i}.weight", f"{i}.bias") for i, layer in enumerate(module)
                            if isinstance(layer, torch.nn.Linear)]
        self.act = _ACT_FUNCTIONS[activation](torch)
        self.logits = logits
        self.soft_ce = soft_ce
        self.per_example_full = vmap(grad(loss_full), in_dims=(None, 0, 0))
        t_pub_dim = 0 if self.label_public else None
        self.per_example_diff = vmap(grad(loss_diff), in_dims=(None, 0, 0, 0, t_pub_dim))
        self.batch_grad = grad(batch_loss)

    def rows(self, idx):
        """The rows ``idx`` of X as a tensor of the compute dtype on the device.

        Out of core, gathered from the source (``idx`` sorted): the same
        values as the rows of the in-memory copy. The last batch is
        kept, so the public view of the same ``idx`` does not read it again.
        """
        if self.source is None:
            return self.X[idx]
        if self._last is not None and self._last[0] is idx:
            return self._last[1]
        rows = np.asarray(idx.cpu() if hasattr(idx, "cpu") else idx)
        x = self.torch.tensor(self.source.gather(rows), dtype=self.dtype, device=self.device)
        self._last = (idx, x)
        return x

    # -- public views and targets ---------------------------------------------

    def public_view(self, idx, gen):
        """``x_pub`` for rows ``idx``: private columns padded with N(0, 1) or zeroed.

        ``gen`` is the padding's source: a :class:`torch.Generator` on the
        device, or a callable ``gen(idx, n_cols)`` returning the
        ``(len(idx), n_cols)`` N(0, 1) padding (as :class:`_SecurePad`).
        """
        Xp = self.rows(idx).clone()
        if len(self.private_idx):
            if self.pad:
                shape = (len(idx), len(self.private_idx))
                if callable(gen):
                    pad = gen(idx, shape[1]).to(device=self.device, dtype=Xp.dtype)
                else:
                    pad = self.torch.randn(shape, generator=gen, device=self.device)
                Xp[:, self.private_idx] = pad.to(Xp.dtype)
            else:
                Xp[:, self.private_idx] = 0.0
        return Xp

    def public_targets(self, idx):
        return self.Y[idx] if self.label_public else self.prior

    # -- oracles ---------------------------------------------------------------

    def per_example_grads(self, idx, pad_gen, diff):
        """Per-example gradients (dict of ``[len(idx), ...]`` tensors), no clipping."""
        x, t = self.rows(idx), self.Y[idx]
        if not diff:
            return self.per_example_full(self.params, x, t)
        x_pub = self.public_view(idx, pad_gen)
        return self.per_example_diff(self.params, x, t, x_pub, self.public_targets(idx))

    def clipped_sum(self, idx, pad_gen, diff):
        """Σ over ``idx`` of per-example gradients clipped to L2 norm ``C``."""
        if self.per_example == "outer":
            return self.clipped_sum_outer(idx, pad_gen, diff)
        return self.clipped_sum_vmap(idx, pad_gen, diff)

    def clip_factors(self, sq):
        """Per-example clip factors ``min(1, C (1 − 4u) / norm)`` in the compute dtype.

        ``sq`` holds the squared norms (float64) of exactly the per-example
        tensors that are scaled and summed. The margin of four units in the
        last place of the compute dtype absorbs the rounding of the factor
        and of its products with the summed tensors, so each scaled
        per-example gradient has norm ≤ C (issue 16 item 11).
        """
        dtype = self.dtype
        u = float(self.torch.finfo(dtype).eps) / 2
        norm = sq.clamp_min(0.0).sqrt()
        factor = (self.C * (1.0 - 4.0 * u) / norm.clamp_min(1e-300)).clamp(max=1.0)
        return factor.to(dtype)

    def clipped_sum_outer(self, idx, pad_gen, diff):
        """Closed-form clipped sum for a stack of Linear layers (no per-example tensor).

        For a Linear layer with input ``a_i`` and output gradient ``δ_i`` the
        per-example gradient is ``δ_i a_iᵀ`` (bias ``δ_i``), of norm
        ``‖δ_i‖ ‖a_i‖``. For ``ℓ − ℓ_pub`` it is ``δ_i a_iᵀ − δ'_i a'_iᵀ``
        (primes: the public view). Its norm is NOT evaluated as
        ``‖δ‖²‖a‖² + ‖δ'‖²‖a'‖² − 2 (δ·δ')(a·a')``: with large public columns
        the two products are nearly equal and the subtraction loses the
        private part (issue 16 item 4). Instead the gradient is split into
        pieces that are orthogonal (Frobenius) and summed as such:

        * first layer, public columns: ``x_pub = x`` there, so the block is
          the single product ``(δ − δ') x_Pᵀ``;
        * first layer, private columns, and every layer above (whose inputs
          are hidden activations): Gram–Schmidt on the two inputs,
          ``δ aᵀ − δ' a'ᵀ = u bᵀ + v cᵀ`` with ``b`` the longer of
          ``a, a'`` and ``c ⊥ b`` (:func:`_orthogonal_pair`);
        * biases: ``δ − δ'``.

        The squared norm is accumulated in float64 from exactly the
        (rounded) tensors that are then scaled and summed, with the cross
        term of each Gram–Schmidt pair included (it is at rounding level),
        so every summed per-example contribution has norm ≤ C, and no piece
        is larger than the clipped gradient (no cancellation in the sum
        either). All ``δ`` come from one backward pass of the batch loss;
        the clipped sum is a few matrix products per layer.
        """
        torch = self.torch
        m = len(idx)
        x, t = self.rows(idx), self.Y[idx]
        if diff:
            x_pub = self.public_view(idx, pad_gen)
            t_pub = self.Y[idx] if self.label_public else self.prior.expand(m, -1)
            x = torch.cat([x, x_pub])
            t = torch.cat([t, t_pub])
        inputs, outputs = [], []
        h = x
        with torch.enable_grad():
            for j, (wk, bk) in enumerate(self.linear_keys):
                inputs.append(h)
                z = torch.addmm(self.params[bk], h, self.params[wk].T)
                if j == 0:
                    z.requires_grad_(True)
                outputs.append(z)
                h = self.act(z) if j < len(self.linear_keys) - 1 else z
            losses = self.soft_ce(h, t)
            if diff:
                losses = torch.cat([losses[:m], -losses[m:]])
            deltas = torch.autograd.grad(losses.sum(), outputs)
        inputs = [a.detach() for a in inputs]

        # Per layer: the bias term, and the weight blocks as (columns, [(U, V), ...]):
        # the block's per-example gradient is Σ U_k[i] V_k[i]ᵀ.
        layers = []
        for j, (a, d) in enumerate(zip(inputs, deltas)):
            if not diff:
                layers.append((d, [(slice(None), [(d, a)])]))
                continue
            a1, a2, d1, d2 = a[:m], a[m:], d[:m], -d[m:]
            bias = d1 - d2
            if j == 0 and len(self.private_idx):
                blocks = []
                if len(self.public_idx):  # x_pub equals x on the public columns
                    blocks.append((self.public_idx, [(bias, a1[:, self.public_idx])]))
                q = self.private_idx
                if self.pad:
                    blocks.append((q, _orthogonal_pair(torch, d1, a1[:, q], d2, a2[:, q])))
                else:  # "mask": x_pub is 0 on the private columns
                    blocks.append((q, [(d1, a1[:, q])]))
            else:
                blocks = [(slice(None), _orthogonal_pair(torch, d1, a1, d2, a2))]
            layers.append((bias, blocks))

        sq = torch.zeros(m, dtype=torch.float64, device=self.device)
        for bias, blocks in layers:
            sq += _sq_norms(bias)
            for _, pieces in blocks:
                sq += _sq_norm_of_outer_sum(pieces)
        factor = self.clip_factors(sq)[:, None]

        total = {}
        for (bias, blocks), (wk, bk) in zip(layers, self.linear_keys):
            total[bk] = (bias * factor).sum(0)
            w = torch.zeros_like(self.params[wk])
            for cols, pieces in blocks:
                U = torch.cat([u * factor for u, _ in pieces])
                V = torch.cat([v for _, v in pieces])
                w[:, cols] = U.T @ V
            total[wk] = w
        return total

    def clipped_sum_vmap(self, idx, pad_gen, diff):
        """Clipped sum from ``torch.func`` per-example gradients, in chunks."""
        torch = self.torch
        total = {k: torch.zeros_like(v) for k, v in self.params.items()}
        for start in range(0, len(idx), self.chunk):
            part = idx[start:start + self.chunk]
            g = self.per_example_grads(part, pad_gen, diff)
            sq = sum(_sq_norms(v.reshape(len(part), -1)) for v in g.values())
            factor = self.clip_factors(sq)
            for k, v in g.items():
                total[k] += torch.tensordot(factor, v, dims=1)
        return total

    def public_grad(self, idx, pad_gen):
        """Mean gradient of ``ℓ_pub`` over the rows ``idx`` (public data only)."""
        Xp = self.public_view(idx, pad_gen)
        T = self.Y[idx] if self.label_public else self.prior.expand(len(idx), -1)
        return self.batch_grad(self.params, Xp, T)

    def batch_loss(self, idx):
        """Mean training loss on rows ``idx`` (diagnostic for ``verbose``; not private)."""
        with self.torch.no_grad():
            return float(self.soft_ce(self.logits(self.params, self.rows(idx)),
                                      self.Y[idx]).mean())

    # -- updates ---------------------------------------------------------------

    def step(self, grads, velocity, lr, momentum):
        for k, g in grads.items():
            if momentum:
                velocity[k].mul_(momentum).add_(g)
                g = velocity[k]
            self.params[k].sub_(lr * g)

    def write_back(self):
        """Copy the trained parameters into the (CPU) module."""
        with self.torch.no_grad():
            for k, p in self.module.named_parameters():
                p.copy_(self.params[k].to("cpu"))


class MLPFeatureDP(DPSGDBudgetMixin, ClassifierMixin, BaseEstimator):
    """Multi-layer perceptron trained with feature differential privacy (PyTorch).

    Some columns of ``X`` (and optionally the label) are public, the other
    columns of every record are protected. With ``method="alg1"`` each step
    follows FDP Algorithm 1: per-example gradients of ``ℓ − ℓ_pub`` on a
    Poisson batch (``ℓ_pub`` sees only the public part of a record) are
    clipped and noised as in DP-SGD, and the exact gradient of ``ℓ_pub`` on a
    separate uniform public batch is added for free. The run is
    (ε, δ)-feature-DP for the private columns, with ε computed by
    dp-accounting for the Poisson-subsampled Gaussian, exactly as for
    :class:`~sklearn_fdp.FeatureDPLogisticRegression`.

    Needs the optional extra: ``pip install sklearn-fdp[torch]``.

    Parameters
    ----------
    hidden_layer_sizes : tuple of int, default=(300,)
        Widths of the hidden layers (the FDP paper's Purchase100 model is one
        hidden layer of 300 ReLU units). Each must be >= 1.
    activation : {"relu", "tanh", "logistic", "identity"}, default="relu"
        Hidden-layer activation.
    public_features, private_features : spec or None, default=None
        Exactly one, for ``method`` ``"alg1"`` and ``"dpsgd"``: the columns
        that may leak, or the ones to protect, as column indices, a boolean
        mask, column names (encoder outputs ``"<name>_*"`` match too) or a
        callable on column names; see :mod:`sklearn_fdp.features`. Ignored
        (may be None) for ``method="dp"``, which treats nothing as public.
    label_public : bool, default=False
        Whether the label is public too. If False, ``ℓ_pub`` is the
        label-free cross-entropy against the uniform prior.
    public_loss : {"gaussian_pad", "mask"}, default="gaussian_pad"
        Construction of the public view ``x_pub``: private columns replaced
        by fresh N(0, 1) draws (the paper's Purchase100 recipe) or by zeros.
    method : {"alg1", "dpsgd", "dp"}, default="alg1"
        ``"alg1"``: FDP Algorithm 1 (after ``public_epochs`` of public
        pretraining). ``"dpsgd"``: public pretraining, then plain DP-SGD on
        the full loss (the FDP paper's "FDP (DP-SGD)"). ``"dp"``: plain
        DP-SGD on all features (record-level DP; the baseline).
    alpha : float, default=1.0
        Weight of the noisy private gradient in ``g = g_pub + α g̃_priv``
        (``"alg1"`` only), > 0. The paper tunes it; smaller values average
        out more noise at the price of a bias towards ``ℓ_pub``.
    public_batch_size : int or "auto", default="auto"
        Size of the uniform public batches; ``"auto"``: the expected private
        batch size.
    public_epochs : float, default=0.0
        Passes of noise-free SGD on ``ℓ_pub`` before the private run (free:
        Remark 2 of the paper). Needs ``label_public=True`` (the label-free
        ``ℓ_pub`` has no minimiser) and ``method`` other than ``"dp"``.
    epsilon : float or None, default=1.0
        Privacy budget of one call to ``fit``, in (0, inf); the noise
        multiplier is calibrated to it. May be None only when
        ``noise_multiplier`` is given.
    delta : float, default=1e-5
        δ of the guarantee, in (0, 1); keep it well below ``1 / n_samples``.
    max_grad_norm : float, default=1.0
        Clip norm ``C`` of each per-example (private) gradient, > 0.
    noise_multiplier : float or None, default=None
        σ. When given, ε is computed rather than targeted; if ``epsilon`` is
        also given, ``fit`` raises :class:`~sklearn_fdp.BudgetExceededError`
        when the run would spend more.
    batch_size : int or "auto", default="auto"
        Expected Poisson batch size ``q n``. ``"auto"``:
        ``clip(round(8 sqrt(n)), 64, 4096)`` (about ``n / 16``, the paper's
        sampling rate, for n = 16,000).
    epochs : float, default=10.0
        Passes over the data; ``ceil(epochs n / batch_size)`` noisy steps.
    learning_rate : float, default=0.1
        Step size (the paper's 0.1), > 0.
    momentum : float, default=0.9
        Heavy-ball momentum in [0, 1) (the paper's 0.9).
    accountant : {"auto", "pld", "rdp"}, default="auto"
        dp-accounting's accountant; ``"auto"`` as for the linear estimators
        (PLD up to ε = 2 and for ``neighboring="replace"``, RDP above).
    neighboring : {"add_remove", "replace"}, default="add_remove"
        Neighbouring relation of the guarantee (``"replace"`` needs PLD).
    device : {"auto", "cpu", "cuda"}, default="auto"
        Where to train. ``"auto"``: CUDA when torch sees a GPU, else CPU.
        The fitted weights are always stored on the CPU.
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
        to ``max_grad_norm · (1 − 4u)`` (``u``: float32's unit roundoff).
    random_state : int, RandomState instance or None, default=None
        Seeds the initialisation, the batches, the padding and the noise; on
        the CPU a fixed value reproduces the fit.
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
        The accounting, and so ``epsilon_``, is the same.
    verbose : int, default=0
        Print, after every epoch, the mean training loss of that epoch's
        private batches and the ε spent so far.
    classes : array-like of shape (n_classes,) or None, default=None
        Every label the task can have, a public list chosen without looking
        at ``y``; ``classes_`` is then this list (sorted) whatever ``y``
        holds, and a label of ``y`` outside it raises ``ValueError``. None:
        ``classes_`` is read from ``y`` and is not private (a label seen
        once, or missing, shows in it); give ``classes`` whenever the label
        is protected and some class may be rare.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Defined when ``X`` has string column names.
    feature_names_ : ndarray of str of shape (n_features_in_,) or None
        Column names the feature specs were resolved against:
        ``feature_names_in_``, else the ``feature_names`` passed to ``fit``
        (as :class:`~sklearn_fdp.pipeline.PrivatePipeline` does), else None.
    module_ : torch.nn.Sequential
        The trained network, on the CPU.
    device_ : str
        Device the fit ran on.
    epsilon_ : float
        ε the run spent at ``delta_``.
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
        The mechanism run by ``fit``, for re-accounting.
    public_mask_ : ndarray of bool of shape (n_features_in_,)
        Columns treated as public (all False for ``method="dp"``).
    public_features_ : ndarray of int
        Indices of the public columns.
    private_features_ : ndarray of int
        Indices of the protected columns.
    label_public_ : bool
        Whether the label was treated as public.
    alpha_ : float
        α used (1 unless ``method="alg1"``).
    public_batch_size_ : int
        Size of the public batches (0 when no public gradient was used).

    Notes
    -----
    Privacy: unit = the private columns of one record (and its label unless
    ``label_public``); feature DP relative to the public part Ψ(x) (FDP
    paper, Def. 6 under ``"add_remove"``, Def. 5 under ``"replace"``);
    ``method="dp"`` gives record-level DP. Per-example clipping of
    ``∇ℓ − ∇ℓ_pub`` (of ``∇ℓ`` for ``"dpsgd"``/``"dp"``) to ``max_grad_norm``,
    Gaussian noise of std ``σ C``, sums divided by the expected batch size;
    ε by dp-accounting for ``steps_`` Poisson-subsampled Gaussian steps
    (Thm. 5), the same event as :class:`~sklearn_fdp.DPSGDClassifier`'s. The
    public batches, their padding and the padding of the private batch's
    ``ℓ_pub`` term come from generators of their own, never the Poisson
    sampler's (Prop. 3); with ``noise="secure"`` the private batch's padding
    is drawn from the OS CSPRNG, like the noise. Public pretraining reads
    public data only (Remark 2). NOT protected: the public columns, the label when
    ``label_public=True``, ``n``, the set of classes (read from ``y`` unless
    ``classes`` is given), and the training loss
    printed when ``verbose`` (a diagnostic computed on the private data).
    torch's generators are not cryptographically secure.

    See Also
    --------
    FeatureDPLogisticRegression : the linear model with the same splits.
    sklearn.neural_network.MLPClassifier : the non-private model.

    References
    ----------
    Mahloujifar, Guo et al., "Machine Learning with Privacy for Protected
    Attributes": §5 (Algorithm 1, Thm. 5, Prop. 3, Remark 2) and §6.2.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from sklearn_fdp import MLPFeatureDP
    >>> X, y = make_classification(n_samples=500, n_features=6, random_state=0)
    >>> clf = MLPFeatureDP(hidden_layer_sizes=(16,), private_features=[0, 1],
    ...                    label_public=True, epsilon=2.0, epochs=2, delta=1e-4,
    ...                    device="cpu", random_state=0).fit(X, y)
    >>> clf.private_features_.tolist(), bool(clf.epsilon_ <= 2.0)
    ([0, 1], True)
    """

    _parameter_constraints: dict = {
        "hidden_layer_sizes": "no_validation",  # checked in _check_params
        "activation": [StrOptions(set(ACTIVATIONS))],
        "public_features": "no_validation",
        "private_features": "no_validation",
        "label_public": ["boolean"],
        "public_loss": [StrOptions(set(PUBLIC_LOSSES))],
        "method": [StrOptions(set(METHODS))],
        "epsilon": [Interval(Real, 0, None, closed="neither"), None],
        "delta": DELTA_CONSTRAINT,
        "max_grad_norm": [Interval(Real, 0, None, closed="neither")],
        "noise_multiplier": [Interval(Real, 0, None, closed="neither"), None],
        "alpha": [Interval(Real, 0, None, closed="neither")],
        "batch_size": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "public_batch_size": [Interval(Integral, 1, None, closed="left"),
                              StrOptions({"auto"})],
        "public_epochs": [Interval(Real, 0, None, closed="left")],
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
        "classes": ["array-like", None],
    }

    def __init__(
        self,
        *,
        hidden_layer_sizes=(300,),
        activation="relu",
        public_features=None,
        private_features=None,
        label_public=False,
        public_loss="gaussian_pad",
        method="alg1",
        epsilon=1.0,
        delta=1e-5,
        max_grad_norm=1.0,
        noise_multiplier=None,
        alpha=1.0,
        batch_size="auto",
        public_batch_size="auto",
        public_epochs=0.0,
        epochs=10.0,
        learning_rate=0.1,
        momentum=0.9,
        accountant="auto",
        neighboring="add_remove",
        device="auto",
        per_example="outer",
        random_state=None,
        noise="default",
        verbose=0,
        classes=None,
    ):
        _import_torch()  # fail early, with the install hint
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.public_features = public_features
        self.private_features = private_features
        self.label_public = label_public
        self.public_loss = public_loss
        self.method = method
        self.epsilon = epsilon
        self.delta = delta
        self.max_grad_norm = max_grad_norm
        self.noise_multiplier = noise_multiplier
        self.alpha = alpha
        self.batch_size = batch_size
        self.public_batch_size = public_batch_size
        self.public_epochs = public_epochs
        self.epochs = epochs
        self.learning_rate = learning_rate
        self.momentum = momentum
        self.accountant = accountant
        self.neighboring = neighboring
        self.device = device
        self.per_example = per_example
        self.random_state = random_state
        self.noise = noise
        self.verbose = verbose
        self.classes = classes

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

    def _check_params(self, X, y):
        """Rules spanning several parameters; called first in ``fit``."""
        super()._check_params(X, y)  # the budget rules of every DP-SGD fit
        name = type(self).__name__
        self._hidden_sizes()
        if self.method != "dp":  # "dp" ignores the feature specs
            check_label_in_spec(self, X, y)
        if self.public_epochs > 0 and self.method == "dp":
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

    def _validate_training_data(self, X, y):
        if should_stream(X):
            # A large numpy.memmap / dask array: checked in chunks, each batch's
            # rows read from it (sklearn_fdp._outofcore), never copied whole.
            X, y = validate_row_source(self, X, y, compute_dtype=np.float32)
        else:
            X, y = validate_numeric_data(self, X, y, dtype=[np.float32, np.float64],
                                         y_numeric=False)
            # The network computes in float32: reject rows whose squared norm overflows it.
            check_row_norms_finite(X, type(self).__name__, compute_dtype=np.float32)
        return (X, *encode_labels(self, y, self.classes))

    def _compute_dtype(self, X):
        """``"float64"`` for Algorithm 1 on large public columns, else ``"float32"``.

        The private gradient ``∇ℓ − ∇ℓ_pub`` of a record whose public columns
        dominate is a small difference of two large quantities. Each record's
        own clipped contribution is bounded exactly on every path, but the
        rounding of the *other* records' forward passes depends on the batch
        they share (matrix products block by batch size), and that rounding,
        amplified by the cancellation, moves their clipped gradients when one
        record is removed. In float32 that reached 1.00003·C at public scale
        1e2, 1.002·C at 1e4 and 3.4·C at 1e8; in float64 it stays at the
        rounding level (~1e-15 C). So a fit whose public columns exceed
        ``MAX_PUBLIC_ABS`` trains in float64 (about twice the cost). The
        check reads public columns only (released by declaration): it costs
        no privacy.
        """
        if self.method != "alg1" or not self.public_mask_.any():
            return "float32"
        top = _max_abs_columns(X, np.flatnonzero(self.public_mask_))
        return "float64" if top > MAX_PUBLIC_ABS else "float32"

    def _resolve_features(self, n_features, batch_size, n_samples):
        name = type(self).__name__
        if self.method == "dp":
            self.public_mask_ = np.zeros(n_features, dtype=bool)
            self.label_public_ = False
        else:
            self.public_mask_ = resolve_feature_spec(
                self.public_features,
                self.private_features,
                n_features,
                self.feature_names_,
                name,
                label_public=self.label_public,
            )
            self.label_public_ = bool(self.label_public)
        self.public_features_ = np.flatnonzero(self.public_mask_)
        self.private_features_ = np.flatnonzero(~self.public_mask_)
        uses_public = self.method == "alg1" or self.public_epochs > 0
        if not uses_public:
            self.public_batch_size_ = 0
        elif self.public_batch_size == "auto":
            self.public_batch_size_ = int(batch_size)
        elif self.public_batch_size > n_samples:
            raise ValueError(
                f"`public_batch_size` of {name} is {self.public_batch_size!r} but the "
                f"data have only {n_samples} rows. Use public_batch_size <= n_samples "
                "or 'auto'."
            )
        else:
            self.public_batch_size_ = int(self.public_batch_size)

    @_fit_context(prefer_skip_nested_validation=True)
    @atomic_fit
    def fit(self, X, y, feature_names=None):
        """Train the network privately.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data (dense). Scale the columns to a data-independent
            range; clipping bounds every per-example gradient anyway.
        y : array-like of shape (n_samples,)
            Class labels.
        feature_names : sequence of str or None, default=None
            Names of X's columns, used only to resolve column names in
            ``public_features``/``private_features`` when X has none.
            :func:`sklearn_fdp.pipeline.make_private_pipeline` passes them;
            they are stored in ``feature_names_``, not in
            ``feature_names_in_``.

        Returns
        -------
        self : MLPFeatureDP
        """
        torch = _import_torch()
        name = type(self).__name__
        self._check_params(X, y)
        X, classes, y_index = self._validate_training_data(X, y)
        n_samples, n_features = X.shape
        check_delta_vs_n(self.delta, n_samples, name, stacklevel=4)
        device = _resolve_device(torch, self.device, name)

        batch_size = self._resolve_batch_size(n_samples)
        sampling_rate = batch_size / n_samples
        steps = max(1, math.ceil(self.epochs * n_samples / batch_size))
        self.feature_names_ = spec_feature_names(self, n_features, feature_names)
        self._resolve_features(n_features, batch_size, n_samples)
        sigma, event, spent, accountant = self._budget(n_samples, sampling_rate, steps)

        # noise="secure": the batch coins and the noise come from the OS CSPRNG.
        gens = spawn_generators(self.random_state, 4, noise=self.noise,
                                private_streams=(_SAMPLE, _NOISE))
        # Three children of the public stream: public batches, their padding,
        # and the padding of the private batch's ℓ_pub term (FDP Alg. 1); with
        # noise="secure" the last is replaced by the CSPRNG (a private stream).
        pub_sample_rng, pub_pad_rng, priv_pad_rng = gens[_PUBLIC].spawn(3)
        init_rng, pre_sample_rng, pre_pad_rng = gens[_INIT].spawn(3)

        trainer = self._make_trainer(torch, X, y_index, len(classes), device, init_rng)
        module = trainer.module

        lr, mu = float(self.learning_rate), float(self.momentum)
        if self.public_epochs > 0:  # Remark 2: public data only, no noise, free
            sampler = UniformSampler(n_samples, self.public_batch_size_, pre_sample_rng)
            pad_gen = _torch_generator(torch, pre_pad_rng, device)
            velocity = {k: torch.zeros_like(v) for k, v in trainer.params.items()}
            pre_steps = max(1, math.ceil(self.public_epochs * n_samples
                                         / self.public_batch_size_))
            for _ in range(pre_steps):
                idx = torch.as_tensor(sampler.sample(), device=device)
                trainer.step(trainer.public_grad(idx, pad_gen), velocity, lr, mu)

        alpha = float(self.alpha) if self.method == "alg1" else 1.0
        self._run_private(torch, trainer, n_samples, sampling_rate, steps, sigma, alpha,
                          accountant, gens, pub_sample_rng, pub_pad_rng, priv_pad_rng)
        trainer.write_back()
        # A check of the released (DP) weights only: post-processing, no privacy cost.
        if not all(bool(torch.isfinite(p).all()) for p in module.parameters()):
            raise ValueError(
                f"Training of {name} diverged: the trained weights are not finite. The "
                "public gradient (public pretraining, and ℓ_pub of method='alg1') is not "
                "clipped and grows with the scale of X. Scale the columns to a "
                "data-independent range (e.g. [-1, 1]) or lower learning_rate."
            )

        self.classes_ = classes
        self.module_ = module
        self.device_ = device
        self.alpha_ = alpha
        self.steps_ = steps
        self.n_iter_ = steps
        self.batch_size_ = batch_size
        self.sampling_rate_ = sampling_rate
        self.noise_multiplier_ = float(sigma)
        self.dp_event_ = event
        self.epsilon_ = float(spent)
        self.delta_ = float(self.delta)
        self.accountant_ = accountant
        return self

    def _make_trainer(self, torch, X, y_index, n_classes, device, init_rng):
        """The network (initialised from ``init_rng``) and its :class:`_Trainer` on ``device``.

        Needs the resolved feature split (``public_mask_``, ``label_public_``).
        ``trainer.clipped_sum`` is the private batch's pre-noise release: the
        sensitivity tests (``tests/sensitivity/test_mlp.py``) build it here.
        """
        sizes = (X.shape[1], *self._hidden_sizes(), n_classes)
        module = _build_module(torch, sizes, self.activation,
                               _torch_generator(torch, init_rng, "cpu"))
        Y = np.eye(n_classes, dtype=np.float32)[y_index]
        dtype = getattr(torch, self._compute_dtype(X))
        return _Trainer(torch, module, X, Y, self.public_mask_, self.label_public_,
                        self.public_loss, device, self.max_grad_norm, self.activation,
                        self.per_example, dtype=dtype)

    def _run_private(self, torch, trainer, n_samples, sampling_rate, steps, sigma, alpha,
                     accountant, gens, pub_sample_rng, pub_pad_rng, priv_pad_rng):
        """The noisy steps (FDP Algorithm 1, or DP-SGD for "dpsgd"/"dp")."""
        device = trainer.device
        diff = self.method == "alg1"
        sampler = PoissonSampler(n_samples, sampling_rate, gens[_SAMPLE])
        secure = self.noise == "secure"
        noise_gen = None if secure else _torch_generator(torch, gens[_NOISE], device)
        if not diff:
            priv_pad_gen = None
        elif secure:  # the private batch's padding is private: CSPRNG, on the CPU
            priv_pad_gen = _SecurePad(torch, secure_if(priv_pad_rng, self.noise))
        else:
            priv_pad_gen = _torch_generator(torch, priv_pad_rng, device)
        if diff:
            pub_sampler = UniformSampler(n_samples, self.public_batch_size_, pub_sample_rng)
            pub_pad_gen = _torch_generator(torch, pub_pad_rng, device)
        noise_std = float(sigma) * float(self.max_grad_norm)
        normaliser = sampling_rate * n_samples  # expected batch size: public
        velocity = {k: torch.zeros_like(v) for k, v in trainer.params.items()}
        lr, mu = float(self.learning_rate), float(self.momentum)
        steps_per_epoch = max(1, round(1 / sampling_rate))
        losses = []
        report = progress_reporter(steps)  # None unless a progress hook is installed
        for t in range(steps):
            idx = torch.as_tensor(sampler.sample(), device=device)
            if len(idx):
                grads = trainer.clipped_sum(idx, priv_pad_gen, diff)
            else:
                grads = {k: torch.zeros_like(v) for k, v in trainer.params.items()}
            for g in grads.values():
                if secure:  # hardened CSPRNG normals, drawn on the CPU
                    z = torch.from_numpy(gens[_NOISE].standard_normal(tuple(g.shape)))
                    z = z.to(device=device, dtype=g.dtype)
                else:
                    z = torch.randn(g.shape, generator=noise_gen, device=device)
                g.add_(z, alpha=noise_std)
                g.div_(normaliser)
            if diff:
                g_pub = trainer.public_grad(
                    torch.as_tensor(pub_sampler.sample(), device=device), pub_pad_gen)
                grads = {k: g_pub[k] + alpha * g for k, g in grads.items()}
            trainer.step(grads, velocity, lr, mu)
            if report is not None:
                report(t + 1)
            if self.verbose:
                if len(idx):
                    losses.append(trainer.batch_loss(idx))
                done = t + 1
                if done % steps_per_epoch == 0 or done == steps:
                    self._report(done, steps, steps_per_epoch, sigma, sampling_rate,
                                 accountant, losses)
                    losses = []

    def _report(self, done, steps, steps_per_epoch, sigma, sampling_rate, accountant, losses):
        eps = accounting.compute_epsilon(sigma, sampling_rate, done, self.delta,
                                         accountant=accountant, neighboring=self.neighboring)
        loss = float(np.mean(losses)) if losses else float("nan")
        print(
            f"[{type(self).__name__}] epoch {done / steps_per_epoch:.1f}: step {done}/{steps}, "
            f"train loss {loss:.4f} (not private), ε spent {eps:.4g} (δ={self.delta:g})",
            file=sys.stdout,
            flush=True,
        )

    # -- prediction ------------------------------------------------------------

    def _predict_device(self, torch):
        if self.device == "cpu":
            return "cpu"
        # A model fitted on a GPU still predicts on a machine without one.
        return "cuda" if torch.cuda.is_available() else "cpu"

    def predict_proba(self, X):
        """Class probabilities, computed in batches of rows.

        The forward pass runs in float64 (the weights trained in float32,
        upcast exactly), so a row's probabilities do not depend on the other
        rows predicted with it beyond float64 rounding (~1e-16): in float32
        the BLAS kernel chosen for the batch's shape changed them by up to
        ~1e-7.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows to classify, with the columns seen in ``fit``.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
        """
        check_is_fitted(self)
        X = validate_data(self, X, dtype=[np.float32, np.float64], reset=False)
        torch = _import_torch()
        from torch.func import functional_call

        device = self._predict_device(torch)
        # float64 throughout: batch-invariant predictions (issue 22 item 6).
        params = {k: v.detach().to(device=device, dtype=torch.float64)
                  for k, v in self.module_.named_parameters()}
        out = np.empty((X.shape[0], len(self.classes_)), dtype=np.float64)
        with torch.no_grad():
            for start in range(0, X.shape[0], _PREDICT_BATCH):
                xb = torch.tensor(X[start:start + _PREDICT_BATCH], dtype=torch.float64,
                                  device=device)
                z = functional_call(self.module_, params, (xb,))
                out[start:start + len(xb)] = torch.softmax(z, dim=1).cpu().numpy()
        return out

    def predict_log_proba(self, X):
        """Log of :meth:`predict_proba`.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows to classify, with the columns seen in ``fit``.

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes)
        """
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def predict(self, X):
        """Most probable class of every row.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows to classify, with the columns seen in ``fit``.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
        """
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]

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
        # A private model is noisier than its non-private twin by design.
        tags.classifier_tags.poor_score = True
        # noise="secure" draws from the OS CSPRNG: random_state does not fix the fit.
        tags.non_deterministic = self.noise == "secure"
        return tags

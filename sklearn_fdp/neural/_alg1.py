"""FDP Algorithm 1 for a torch network: the private step, its streams, the loop.

Everything :class:`~sklearn_fdp.MLPFeatureDP` runs on private data lives
here; the estimator validates, plans (:meth:`MLPFeatureDP.privacy_plan`),
builds the network, calls :func:`train` and stores the result. Plain DP-SGD
(``method="dpsgd"``/``"dp"``) is the special case without ``ℓ_pub``: the
per-example gradients of ``ℓ`` alone, ``α = 1``, no public batch.

One training step of FDP Algorithm 1 (FDP paper, §5 and the Purchase100
recipe of §6.2):

1. a Poisson batch of the private data (sampler of :mod:`sklearn_fdp._engine`);
2. per-example gradients of ``ℓ(w; x, y) − ℓ_pub(w; x_pub, y)``, each
   clipped to ``C = max_grad_norm`` and summed (:meth:`Trainer.clipped_sum`:
   a closed form for stacks of Linear layers, or ``torch.func``'s
   ``vmap``); ``N(0, (σ C)² I)`` added; divided by the *expected* batch
   size ``q n``;
3. the mean gradient of ``ℓ_pub`` on a uniform public batch drawn from its
   own generator (Prop. 3), mixed in as ``g = g_pub + α g̃_priv``;
4. a heavy-ball momentum step.

``x_pub`` (:meth:`Trainer.public_view`) keeps the public columns and
replaces the private ones by fresh N(0, 1) draws (``"gaussian_pad"``) or
zeros (``"mask"``). ``ℓ`` is a :class:`Loss` on the network's outputs:
:class:`CrossEntropy` (``MLPFeatureDP``) or :class:`SquaredError`
(``MLPFeatureDPRegressor``); everything else here is the same for both. With
a private label ``ℓ_pub`` is label-free: the loss against the label's
expectation under a public uniform prior (:attr:`Loss.prior`), which for the
cross-entropy is the cross-entropy against the uniform distribution, the MLP
analogue of the label-DP case study of §5 (as for the linear model, see
:mod:`sklearn_fdp._mechanisms.fdp`), and for the squared error on a target
mapped to [-1, 1] is ``½ f(x_pub)²`` (:class:`SquaredError`).

Which streams are private is decided here (:func:`spawn_streams`): the
Poisson coins, the noise and the padding of the private batch's ``ℓ_pub``
term come from the OS CSPRNG under ``noise="secure"``; the public batches,
their padding and the initialisation stay seeded by ``random_state``.
"""

from typing import NamedTuple

import numpy as np

from .._engine import PoissonSampler, UniformSampler
from .._outofcore import column_max_abs, row_reader
from .._distributed._torch import SOLO
from .._progress import progress_reporter
from .._random import secure_if, spawn_generators

# Streams spawned from random_state, in this order, for every fit.
_SAMPLE, _NOISE, _PUBLIC, _INIT = range(4)

# Per-example gradients are materialised for at most this many floats at a
# time (chunks of examples): 2**25 floats = 128 MiB in float32.
_PER_EXAMPLE_FLOATS = 1 << 25

# Largest |value| of a public column that Algorithm 1 trains on in float32
# (above it, in float64: compute_dtype). Removing one record moved the other
# records' clipped float32 gradients by 3e-7 C at public scale 10, 1e-6 C at
# 30 and 3e-5 C at 100 (tests/sensitivity/test_mlp.py's batch check; the
# rounding slack of a 10-record sum is 1.2e-5 C): up to 10, float32 is at rounding level.
MAX_PUBLIC_ABS = 10.0


class Streams(NamedTuple):
    """The random streams of one fit, by role.

    ``sample`` (the Poisson coins), ``noise`` and ``private_pad`` (the
    padding of the private batch's ``ℓ_pub`` term: which record gets which
    draw follows the secret batch) are private: CSPRNG under
    ``noise="secure"``. The others are public: ``public_sample`` and
    ``public_pad`` (Algorithm 1's public batches and their padding),
    ``init`` (the initial weights), ``pretrain_sample`` and ``pretrain_pad``
    (public pretraining).
    """

    sample: object
    noise: object
    private_pad: object
    public_sample: object
    public_pad: object
    init: object
    pretrain_sample: object
    pretrain_pad: object
    secure: bool


def spawn_streams(random_state, noise):
    """The :class:`Streams` of a fit seeded by ``random_state`` (``noise``: "default"/"secure")."""
    # noise="secure": the batch coins and the noise come from the OS CSPRNG.
    gens = spawn_generators(random_state, 4, noise=noise, private_streams=(_SAMPLE, _NOISE))
    # Three children of the public stream: public batches, their padding,
    # and the padding of the private batch's ℓ_pub term (FDP Alg. 1); with
    # noise="secure" the last is replaced by the CSPRNG (a private stream).
    pub_sample_rng, pub_pad_rng, priv_pad_rng = gens[_PUBLIC].spawn(3)
    init_rng, pre_sample_rng, pre_pad_rng = gens[_INIT].spawn(3)
    return Streams(sample=gens[_SAMPLE], noise=gens[_NOISE],
                   private_pad=secure_if(priv_pad_rng, noise), public_sample=pub_sample_rng,
                   public_pad=pub_pad_rng, init=init_rng, pretrain_sample=pre_sample_rng,
                   pretrain_pad=pre_pad_rng, secure=noise == "secure")


def rank_streams(streams, rank, world_size):
    """The :class:`Streams` of rank ``rank`` of a fit on ``world_size`` shards.

    One process (``world_size == 1``): ``streams`` unchanged. Otherwise the
    streams that act on a rank's own rows -- the Poisson coins and the
    padding -- are child ``rank`` of ``world_size`` spawned from the fit's
    stream (independent across ranks; a CSPRNG stays a CSPRNG); the public
    batches' index streams and the initialisation stay the same on every rank
    (every rank draws the same global public batch and starts from the same
    weights); the noise stream is rank 0's alone (None elsewhere: only rank
    0 draws the step's noise).

    Independent Bernoulli(q) coins per row, drawn per shard, are jointly the
    Poisson(q) batch of all rows: the union of the ranks' batches has the
    distribution of the one-process batch, which is what the accountant
    assumes.
    """
    if world_size == 1:
        return streams
    return streams._replace(
        sample=streams.sample.spawn(world_size)[rank],
        private_pad=streams.private_pad.spawn(world_size)[rank],
        public_pad=streams.public_pad.spawn(world_size)[rank],
        pretrain_pad=streams.pretrain_pad.spawn(world_size)[rank],
        noise=streams.noise if rank == 0 else None)


def compute_dtype(X, public_mask, alg1, comm=SOLO):
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
    no privacy. ``comm``: the fit's collective (the largest value over every
    rank's rows).
    """
    if not alg1 or not public_mask.any():
        return "float32"
    top = comm.max(column_max_abs(X, np.flatnonzero(public_mask)))
    return "float64" if top > MAX_PUBLIC_ABS else "float32"


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
    :meth:`Trainer.public_view` moves it to the device.
    """

    def __init__(self, torch, rng):
        self.torch = torch
        self.rng = rng

    def __call__(self, idx, n_cols):
        return self.torch.from_numpy(self.rng.standard_normal((len(idx), int(n_cols))))


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


class Loss:
    """A per-example loss ``ℓ(z, t)`` of the network's outputs ``z`` and a target ``t``.

    ``rows(z, t)`` is the loss of every row (summed over the last axis);
    ``prior(n_outputs)`` the constant target of the label-free public loss
    used when the label is private: the expectation of the target under a
    public, data-independent uniform prior. The trainer computes nothing
    else from the loss (per-example gradients come from autograd), so a
    loss is all that differs between the classifier and the regressor.
    """

    def __init__(self, torch):
        self.torch = torch

    def rows(self, z, t):
        raise NotImplementedError

    def prior(self, n_outputs):
        raise NotImplementedError


class CrossEntropy(Loss):
    """Softmax cross-entropy against a one-hot (or soft) target distribution.

    Label-free public loss: the cross-entropy against the uniform prior
    ``π = 1/K``, which equals the expected cross-entropy of a label drawn
    from π (the cross-entropy is linear in the target).
    """

    def rows(self, z, t):
        return self.torch.logsumexp(z, -1) - (z * t).sum(-1)

    def prior(self, n_outputs):
        return 1.0 / n_outputs


class SquaredError(Loss):
    """``½ ‖z − t‖²``, for targets mapped to [-1, 1] by the public ``y_bounds``.

    Label-free public loss: ``½ ‖z‖²``, i.e. the target 0. Derivation, as
    for :class:`CrossEntropy`: the expected loss of a target drawn from the
    uniform prior on [-1, 1] is
    ``E[½ (z − t)²] = ½ (z − E t)² + ½ Var t = ½ z² + 1/6``, whose gradient
    in the weights is that of ``½ z²``. It reads neither ``y`` nor anything
    computed from it. With every feature public (label DP) the private part
    of a record's gradient is then ``∇ℓ − ∇ℓ_pub = (z − t) ∇z − z ∇z = −t ∇z``.
    """

    def rows(self, z, t):
        d = z - t
        return 0.5 * (d * d).sum(-1)

    def prior(self, n_outputs):
        return 0.0


# ``Trainer(loss=...)`` values.
LOSSES = {"cross_entropy": CrossEntropy, "squared_error": SquaredError}


class Trainer:
    """The torch side of one fit: data on the device, losses, the clipped sum, updates.

    ``X`` is read through :func:`sklearn_fdp._outofcore.row_reader`: copied
    to the device whole when it is in memory, each batch's rows gathered
    from it when it is read out of core. ``Y`` holds the training targets,
    one row per record and one column per output of the network (one-hot
    labels for ``loss="cross_entropy"``, the mapped target for
    ``"squared_error"``). ``C = max_grad_norm`` is the clip of every
    per-example gradient and the scale of the noise :func:`train` adds (one
    value for both).
    """

    def __init__(self, torch, module, X, Y, public_mask, label_public, public_loss,
                 device, max_grad_norm, activation, per_example, dtype=None,
                 loss="cross_entropy"):
        from torch.func import functional_call, grad, vmap

        dtype = torch.float32 if dtype is None else dtype

        self.torch = torch
        self.module = module
        self.device = device
        self.dtype = dtype
        # rows(idx): the rows idx of X as a tensor of the compute dtype on the device.
        # In memory: a copy (never a view of the caller's array, which may be
        # read-only); out of core: the rows of each batch are read from X when needed.
        self.rows = row_reader(X, lambda a: torch.tensor(a, dtype=dtype, device=device))
        self.Y = torch.as_tensor(Y, dtype=dtype, device=device)  # one column per output
        self.n_outputs = Y.shape[1]
        self.loss = LOSSES[loss](torch)
        self.private_idx = torch.as_tensor(np.flatnonzero(~public_mask), device=device)
        self.public_idx = torch.as_tensor(np.flatnonzero(public_mask), device=device)
        self.label_public = bool(label_public)
        self.pad = public_loss == "gaussian_pad"
        self.C = float(max_grad_norm)
        # Target of the label-free public loss: the uniform prior's expectation.
        self.prior = torch.full((self.n_outputs,), self.loss.prior(self.n_outputs),
                                dtype=dtype, device=device)
        # The working copy of the weights (float64 for Algorithm 1 on large public
        # columns, compute_dtype); write_back casts to the module's float32.
        self.params = {k: v.detach().clone().to(device=device, dtype=dtype)
                       for k, v in module.named_parameters()}
        n_params = sum(v.numel() for v in self.params.values())
        self.chunk = max(1, _PER_EXAMPLE_FLOATS // n_params)

        def logits(params, x):
            return functional_call(module, params, (x,))

        loss_rows = self.loss.rows

        def loss_full(params, x, t):
            return loss_rows(logits(params, x.unsqueeze(0)).squeeze(0), t)

        def loss_diff(params, x, t, x_pub, t_pub):
            return loss_full(params, x, t) - loss_full(params, x_pub, t_pub)

        def batch_loss(params, X, T):
            return loss_rows(logits(params, X), T).mean()

        self.per_example = per_example
        self.linear_keys = [(f"{i}.weight", f"{i}.bias") for i, layer in enumerate(module)
                            if isinstance(layer, torch.nn.Linear)]
        self.act = _ACT_FUNCTIONS[activation](torch)
        self.logits = logits
        self.loss_rows = loss_rows
        self.per_example_full = vmap(grad(loss_full), in_dims=(None, 0, 0))
        t_pub_dim = 0 if self.label_public else None
        self.per_example_diff = vmap(grad(loss_diff), in_dims=(None, 0, 0, 0, t_pub_dim))
        self.batch_grad = grad(batch_loss)

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
            losses = self.loss_rows(h, t)
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

    def public_grad_sum(self, idx, pad_gen):
        """Sum of the gradients of ``ℓ_pub`` over the rows ``idx`` (a rank's part of a batch)."""
        if not len(idx):
            return self.zeros()
        return {k: g * len(idx) for k, g in self.public_grad(idx, pad_gen).items()}

    def zeros(self):
        """A gradient of zeros (an empty batch's sum)."""
        return {k: self.torch.zeros_like(v) for k, v in self.params.items()}

    def batch_loss(self, idx):
        """Mean training loss on rows ``idx`` (diagnostic for ``verbose``; not private)."""
        with self.torch.no_grad():
            return float(self.loss_rows(self.logits(self.params, self.rows(idx)),
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


def add_step_noise(torch, grads, noise_std, noise_rng, noise_gen, device):
    """Add the step's one Gaussian draw, std ``noise_std`` per coordinate, to ``grads``.

    ``noise_rng``: a :class:`~sklearn_fdp._secure.SecureGenerator`
    (``noise="secure"``: hardened CSPRNG normals drawn on the CPU), else None
    and ``noise_gen`` (a torch generator on ``device``) draws. Called once per
    noisy step, by the one process that adds the noise (rank 0 of a
    distributed fit).
    """
    for g in grads.values():
        if noise_rng is not None:
            z = torch.from_numpy(noise_rng.standard_normal(tuple(g.shape)))
            z = z.to(device=device, dtype=g.dtype)
        else:
            z = torch.randn(g.shape, generator=noise_gen, device=device)
        g.add_(z, alpha=noise_std)


class Shard(NamedTuple):
    """This process's rows of the training set: global rows ``offset .. offset + size - 1``."""

    offset: int
    size: int

    def local(self, idx):
        """The global indices ``idx`` (sorted) that are this shard's, as local indices."""
        lo, hi = np.searchsorted(idx, [self.offset, self.offset + self.size])
        return idx[lo:hi] - self.offset


def _public_gradient(trainer, idx, pad_gen, comm, shard):
    """Mean gradient of ``ℓ_pub`` over the global public batch ``idx``, every rank's part summed."""
    torch = trainer.torch
    if comm.world_size == 1:
        return trainer.public_grad(torch.as_tensor(idx, device=trainer.device), pad_gen)
    grads = trainer.public_grad_sum(torch.as_tensor(shard.local(idx), device=trainer.device),
                                    pad_gen)
    comm.sum_([grads[k] for k in trainer.params])  # one order on every rank
    for g in grads.values():
        g.div_(len(idx))
    return grads


def train(trainer, n_samples, schedule, sigma, streams, *, alg1, alpha, learning_rate,
          momentum, public_steps=0, public_batch_size=0, on_epoch=None, comm=SOLO,
          shard=None):
    """Run the fit's steps on ``trainer.params``: public pretraining, then the noisy steps.

    This is the DP-SGD loop of the package's engine
    (:func:`sklearn_fdp._engine.run_dp_sgd`) for a torch network. It is a
    loop of its own because the engine's is NumPy (its oracles, noise and
    updates are arrays and numba kernels) and cannot run a torch module's
    forward and backward passes, on a GPU, bit-identically to the torch
    code here. It keeps the engine's contract: the noise added to the sum
    of per-example gradients clipped to ``C = trainer.C`` has std ``σ C``
    (read from that same ``C``), and the noisy sum is divided by the
    *expected* batch size ``q n``, never the realised one.

    On ``torch.distributed`` (``comm`` a
    :class:`~sklearn_fdp._distributed._torch.TorchGroup`) ``trainer`` holds
    this rank's rows (``shard``) and ``streams`` are this rank's
    (:func:`rank_streams`): its Poisson coins cover its rows, its clipped sum
    covers its sampled rows, rank 0 alone adds the noise (one draw per step),
    and the all-reduce makes the noisy sum of every rank's rows; the public
    batches are global (the same indices on every rank), each rank's part
    summed the same way.

    Parameters
    ----------
    trainer : Trainer
        The network's working weights, the data and the clipped sum.
    n_samples : int
        Number of training rows (public; of all shards).
    schedule : sklearn_fdp._plan.DPSGDSchedule
        Poisson rate ``q`` and number of noisy steps.
    sigma : float
        Noise multiplier σ.
    streams : Streams
        The fit's random streams (:func:`spawn_streams`, :func:`rank_streams`).
    alg1 : bool
        FDP Algorithm 1 (per-example ``∇ℓ − ∇ℓ_pub``, a public batch's
        ``∇ℓ_pub`` added to every step), or plain DP-SGD on ``ℓ``.
    alpha : float
        Weight of the noisy private gradient in ``g = g_pub + α g̃_priv``.
    learning_rate, momentum : float
        Heavy-ball SGD step size and momentum.
    public_steps : int, default=0
        Steps of noise-free SGD on ``ℓ_pub`` first (public data only, free:
        Remark 2 of the FDP paper).
    public_batch_size : int, default=0
        Size of the uniform public batches.
    on_epoch : callable or None, default=None
        ``on_epoch(done, epoch, losses)`` after every epoch's last step
        (``done`` steps so far, ``epoch`` their number of epochs;
        ``losses``: the training loss of that epoch's private batches, a
        diagnostic that is not private).
    comm : collective, default=SOLO
        One process, or this rank's ``torch.distributed`` group.
    shard : Shard or None, default=None
        This rank's rows; None: all ``n_samples`` rows (one process).
    """
    torch = trainer.torch
    device = trainer.device
    shard = Shard(0, n_samples) if shard is None else shard
    lr, mu = float(learning_rate), float(momentum)
    if public_steps > 0:  # Remark 2: public data only, no noise, free
        sampler = UniformSampler(n_samples, public_batch_size, streams.pretrain_sample)
        pad_gen = _torch_generator(torch, streams.pretrain_pad, device)
        velocity = {k: torch.zeros_like(v) for k, v in trainer.params.items()}
        for _ in range(public_steps):
            grads = _public_gradient(trainer, sampler.sample(), pad_gen, comm, shard)
            trainer.step(grads, velocity, lr, mu)

    sampling_rate, steps = schedule.sampling_rate, schedule.steps
    # This rank's rows' coins (all rows in one process).
    sampler = PoissonSampler(shard.size, sampling_rate, streams.sample)
    secure = streams.secure
    adds_noise = comm.rank == 0
    noise_rng = streams.noise if secure and adds_noise else None
    noise_gen = (_torch_generator(torch, streams.noise, device)
                 if adds_noise and not secure else None)
    if not alg1:
        priv_pad_gen = None
    elif secure:  # the private batch's padding is private: CSPRNG, on the CPU
        priv_pad_gen = _SecurePad(torch, streams.private_pad)
    else:
        priv_pad_gen = _torch_generator(torch, streams.private_pad, device)
    if alg1:
        pub_sampler = UniformSampler(n_samples, public_batch_size, streams.public_sample)
        pub_pad_gen = _torch_generator(torch, streams.public_pad, device)
    noise_std = float(sigma) * trainer.C  # the clip clipped_sum applies
    normaliser = sampling_rate * n_samples  # expected batch size: public
    velocity = {k: torch.zeros_like(v) for k, v in trainer.params.items()}
    steps_per_epoch = max(1, round(1 / sampling_rate))
    losses = []
    report = progress_reporter(steps)  # None unless a progress hook is installed
    for t in range(steps):
        idx = torch.as_tensor(sampler.sample(), device=device)
        if len(idx):
            grads = trainer.clipped_sum(idx, priv_pad_gen, alg1)
        else:
            grads = trainer.zeros()
        if adds_noise:  # one Gaussian draw per step, before the all-reduce
            add_step_noise(torch, grads, noise_std, noise_rng, noise_gen, device)
        # Every rank's clipped sum, in one order of the parameters on every rank
        # (one process: nothing to add).
        comm.sum_([grads[k] for k in trainer.params])
        for g in grads.values():
            g.div_(normaliser)
        if alg1:
            g_pub = _public_gradient(trainer, pub_sampler.sample(), pub_pad_gen, comm, shard)
            grads = {k: g_pub[k] + alpha * g for k, g in grads.items()}
        trainer.step(grads, velocity, lr, mu)
        if report is not None:
            report(t + 1)
        if on_epoch is not None:
            if len(idx):
                losses.append(trainer.batch_loss(idx))
            done = t + 1
            if done % steps_per_epoch == 0 or done == steps:
                on_epoch(done, done / steps_per_epoch, losses)
                losses = []

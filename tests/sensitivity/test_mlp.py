"""Sensitivity of MLPFeatureDP's private step: the clipped per-example gradient sum.

One noisy step of ``MLPFeatureDP`` adds ``N(0, (σ C)² I)`` to
``Trainer.clipped_sum(batch)`` (:mod:`sklearn_fdp.neural._alg1`): the sum over the Poisson batch of the
per-example gradients of ``ℓ − ℓ_pub`` (``method="alg1"``) or of ``ℓ``
(``"dpsgd"``, ``"dp"``), each clipped to ``C = max_grad_norm``. The
accountant assumes that this sum moves by at most ``C`` when one record is
removed, and by at most ``2 C`` when one record's protected values (or its
private label) are replaced. Both per-example paths are checked:
``per_example="outer"`` (the default: closed-form norms, one matrix product
per layer) and ``"vmap"`` (``torch.func`` per-example gradients).

The release is built the way ``fit`` builds it: the estimator resolves its
feature split and makes its trainer (``MLPFeatureDP._trainer``, the
network at the initial weights ``fit`` would start from), and the whole
data set is the batch. The network computes in float32 whatever the input
dtype, so the rounding slack is float32's.

Two kinds of check. (1) Every record alone (``D = {x_i}`` against the
empty batch or ``{x'_i}``), on every adversarial input (public scales
1e-8 … 1e8, float32/float64, constant and one-hot protected columns): the
clip itself, where issue 16 item 4 lived. (2) Whole batches, on well-scaled
data (public scale ≤ 1, protected columns of order 1), and on public-dominated
data above ``MAX_PUBLIC_ABS``, where Algorithm 1 trains in float64. In float32
whole batches of public-dominated data do not meet ``C`` + the summation
slack on either path: the batched matrix products round one record's
activations differently depending on the batch's shape, and when public
columns dominate, ``∇ℓ − ∇ℓ_pub`` is ill-conditioned, so that rounding moves
the *other* records' clipped gradients (removing one record moved the sum by
up to 1.002 C at public scale 1e4 and 3.4 C at 1e8 for 10 records). That is
why ``_alg1.compute_dtype`` switches to float64 there.

Gaussian padding (``public_loss="gaussian_pad"``) of the private batch is
secret (drawn from the secure generator with ``noise="secure"``): for the
bound, record ``i`` keeps its own padding row in ``D`` and ``D'`` (the
coupling of the proof); ``test_secure_private_padding_*`` checks that the
padding is indeed not reproducible from ``random_state``.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ._harness import (
    SCALES,
    adversarial_dense,
    assert_sensitivity,
    remove_one,
    replace_columns,
    replace_label,
)

torch = pytest.importorskip("torch")

from sklearn_fdp import MLPFeatureDP  # noqa: E402  (after the torch skip)
from sklearn_fdp.neural import _alg1  # noqa: E402

N_CLASSES = 3


pytestmark = pytest.mark.usefixtures("torch_one_thread")  # tests/conftest.py


def _estimator(per_example, method, public_loss, label_public, private_idx, C, activation):
    return MLPFeatureDP(hidden_layer_sizes=(4,), activation=activation,
                        private_features=[int(j) for j in private_idx],
                        label_public=label_public, public_loss=public_loss, method=method,
                        max_grad_norm=C, per_example=per_example, device="cpu", random_state=0)


def _release(est, X, y, pads, weight_scale=1.0):
    """The pre-noise release of one step whose Poisson batch is all of ``X``.

    ``pads[i]`` is record ``i``'s Gaussian padding (``public_loss="gaussian_pad"``).
    """
    public_mask, label_public = est._feature_split(X.shape[1], None)
    # The initial weights are public (random_state): the same for D and D'.
    Y = np.eye(N_CLASSES, dtype=np.float32)[np.asarray(y)]  # the one-hot labels fit trains on
    trainer = est._trainer(torch, X, Y, public_mask, label_public, est.method == "alg1", "cpu",
                           np.random.default_rng(7))
    if weight_scale != 1.0:
        for p in trainer.params.values():
            p.mul_(weight_scale)
    pads = torch.as_tensor(np.asarray(pads, dtype=np.float32))

    def pad(idx, n_cols):
        assert n_cols == pads.shape[1]
        return pads[idx]

    total = trainer.clipped_sum(torch.arange(len(X)), pad, est.method == "alg1")
    return np.concatenate([v.double().numpy().ravel() for v in total.values()])


def _check_all_neighbours(X, y, private_idx, *, per_example, method, public_loss,
                          label_public, C, activation="relu", weight_scale=1.0, seed=0,
                          alone=False):
    """Remove-one (≤ C), replace protected values (≤ 2C), replace label (≤ 2C) for every record.

    ``alone=True``: each record is the whole batch (``D = {x_i}``, ``D' = {}``
    or ``{x'_i}``): the bound on one record's clipped contribution, free of
    how the other records' rounding depends on the batch (module docstring).
    """
    if alone:
        return max(_check_all_neighbours(
            X[i:i + 1], y[i:i + 1], private_idx, per_example=per_example, method=method,
            public_loss=public_loss, label_public=label_public, C=C, activation=activation,
            weight_scale=weight_scale, seed=seed + i) for i in range(X.shape[0]))
    rng = np.random.default_rng(seed)
    n = X.shape[0]
    est = _estimator(per_example, method, public_loss, label_public, private_idx, C, activation)
    protected = np.arange(X.shape[1]) if method == "dp" else np.asarray(private_idx)
    pads = rng.standard_normal((n, len(private_idx)))
    diff = method == "alg1"
    n_terms = 2 * n if (diff and per_example == "outer") else n  # rank-one pieces summed
    check = dict(n_terms=n_terms, clip=C, dtype=np.float32)
    base = _release(est, X, y, pads, weight_scale)
    worst = 0.0
    for i in range(n):
        what = f"{per_example}/{method}/{public_loss}/label_public={label_public}, record {i}"
        if n == 1:  # the empty batch: clipped_sum is not called, the release is 0
            r = np.zeros_like(base)
        else:
            X2, y2 = remove_one(X, y, i)
            r = _release(est, X2, y2, np.delete(pads, i, axis=0), weight_scale)
        worst = max(worst, assert_sensitivity(base, r, C, what="remove " + what, **check) / C)
        values = rng.standard_normal(len(protected)) * rng.choice([1.0, 1e-3, 30.0])
        r = _release(est, replace_columns(X, i, protected, values.astype(X.dtype)), y, pads,
                     weight_scale)
        worst = max(worst, assert_sensitivity(base, r, 2 * C, what="replace " + what,
                                              **check) / (2 * C))
        if not label_public or method == "dp":
            r = _release(est, X, replace_label(y, i, (y[i] + 1) % N_CLASSES), pads,
                         weight_scale)
            worst = max(worst, assert_sensitivity(base, r, 2 * C, what="label " + what,
                                                  **check) / (2 * C))
    return worst


# ---------------------------------------------------------------- data


def _public_heavy(scale, dtype, n=10, d=6, n_priv=2, kind="normal", seed=0):
    """Public columns of magnitude ``scale``, protected ones N(0, 1) / constant / one-hot."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * scale
    private_idx = np.arange(d - n_priv, d)
    if kind == "normal":
        X[:, private_idx] = rng.standard_normal((n, n_priv))
    elif kind == "constant":
        X[:, private_idx] = 1.0
    else:  # one-hot
        X[:, private_idx] = 0.0
        X[np.arange(n), private_idx[rng.integers(0, n_priv, n)]] = 1.0
    y = rng.integers(0, N_CLASSES, n)
    return X.astype(dtype), y, private_idx


@st.composite
def _well_scaled(draw):
    """Public scale ≤ 1 and protected columns of order 1: no ill-conditioned ℓ − ℓ_pub."""
    scale = draw(st.sampled_from([s for s in SCALES if s <= 1.0]))
    dtype = draw(st.sampled_from((np.float32, np.float64)))
    kind = draw(st.sampled_from(("normal", "constant", "onehot")))
    n = draw(st.integers(2, 8))
    d = draw(st.integers(2, 6))
    n_priv = draw(st.integers(1, d - 1))
    seed = draw(st.integers(0, 2**32 - 1))
    return _public_heavy(scale, dtype, n=n, d=d, n_priv=n_priv, kind=kind, seed=seed)


CONFIGS = st.fixed_dictionaries(dict(
    per_example=st.sampled_from(("outer", "vmap")),
    method=st.sampled_from(("alg1", "dpsgd", "dp")),
    public_loss=st.sampled_from(("gaussian_pad", "mask")),
    label_public=st.booleans(),
    C=st.sampled_from((1e-3, 0.1, 10.0)),
    activation=st.sampled_from(("relu", "tanh", "logistic", "identity")),
    weight_scale=st.sampled_from((1.0, 20.0)),
))


# ---------------------------------------------------------------- item 4: one record ≤ C


@pytest.mark.parametrize("per_example", ["outer", "vmap"])
@pytest.mark.parametrize("public_loss", ["mask", "gaussian_pad"])
@pytest.mark.parametrize("scale", [3e3, 1e4, 1e8])
@pytest.mark.parametrize("kind", ["normal", "onehot"])
def test_alg1_large_public_columns_float32(per_example, public_loss, scale, kind):
    """Issue 16 item 4: the closed-form norm cancelled for large public columns.

    ``‖δ‖²‖a‖² + ‖δ'‖²‖a'‖² − 2 (δ·δ')(a·a')`` lost the private part: one
    record's clipped contribution reached many times C.
    """
    X, y, private_idx = _public_heavy(scale, np.float32, kind=kind)
    for label_public in (True, False):
        _check_all_neighbours(X, y, private_idx, per_example=per_example, method="alg1",
                              public_loss=public_loss, label_public=label_public, C=0.1,
                              alone=True)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(data=adversarial_dense(n_rows=(2, 5)), config=CONFIGS)
def test_every_record_contributes_at_most_C(data, config):
    """Every path, adversarial scales (1e-8 … 1e8), float32/float64, constant/one-hot columns."""
    X, private_idx = data
    y = np.arange(X.shape[0]) % N_CLASSES
    _check_all_neighbours(X, y, private_idx, alone=True, **config)


# ---------------------------------------------------------------- batches


@settings(max_examples=100, deadline=None, derandomize=True)
@given(data=_well_scaled(), config=CONFIGS)
def test_batch_neighbours(data, config):
    """Remove-one ≤ C, replace protected values / label ≤ 2C, on a whole batch."""
    X, y, private_idx = data
    _check_all_neighbours(X, y, private_idx, **config)


@pytest.mark.parametrize("per_example", ["outer", "vmap"])
@pytest.mark.parametrize("method", ["alg1", "dpsgd", "dp"])
@pytest.mark.parametrize("kind", ["constant", "onehot"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batch_neighbours_constant_and_onehot(per_example, method, kind, dtype):
    X, y, private_idx = _public_heavy(1.0, dtype, kind=kind)
    for public_loss in ("mask", "gaussian_pad"):
        for label_public in (True, False):
            _check_all_neighbours(X, y, private_idx, per_example=per_example, method=method,
                                  public_loss=public_loss, label_public=label_public, C=0.05)


# ---------------------------------------------------------------- item 5: secure padding


def _first_private_padding(monkeypatch, noise, random_state=0):
    """The Gaussian padding ``fit`` drew for the private batch of its first step.

    The Poisson rate is 1 (``batch_size = n``), so the batch is every record
    in both modes, and the first ``public_view`` call of the noisy loop is
    the private batch's (the public batch's comes after it).
    """
    X, y, private_idx = _public_heavy(1.0, np.float64, n=20)
    seen = []
    original = _alg1.Trainer.public_view

    def spy(self, idx, gen):
        out = original(self, idx, gen)
        seen.append(out[:, self.private_idx].clone())
        return out

    monkeypatch.setattr(_alg1.Trainer, "public_view", spy)
    MLPFeatureDP(hidden_layer_sizes=(4,), private_features=list(private_idx),
                 label_public=True, public_loss="gaussian_pad", method="alg1",
                 epsilon=None, noise_multiplier=1.0, delta=1e-3, batch_size=len(X),
                 epochs=1, public_epochs=0.0,  # the noisy loop's views come first
                 device="cpu", random_state=random_state, noise=noise).fit(X, y)
    monkeypatch.undo()
    return seen[0].numpy()


def test_secure_private_padding_is_not_reproducible_from_random_state(monkeypatch):
    """Issue 16 item 5: with ``noise="secure"`` the private batch's padding was seeded.

    Record ``k`` of the batch got row ``k`` of a padding sequence fixed by
    ``random_state``: whoever knows it knows every padding, and removing one
    early record shifts the padding of every later record, so the pre-noise
    sum moves by far more than C. The padding is a private stream: with
    ``noise="secure"`` it comes from the OS CSPRNG, like the noise.
    """
    default = [_first_private_padding(monkeypatch, "default") for _ in range(2)]
    np.testing.assert_array_equal(default[0], default[1])  # the spy sees the padding
    secure = [_first_private_padding(monkeypatch, "secure") for _ in range(2)]
    assert secure[0].shape == default[0].shape
    assert not np.any(secure[0] == secure[1]), "secure padding reproduced from random_state"
    assert not np.any(secure[0] == default[0])


@pytest.mark.parametrize("per_example", ["outer", "vmap"])
@pytest.mark.parametrize("scale", [1e2, 1e4, 1e8])
def test_batch_neighbours_large_public_columns(per_example, scale):
    """Whole batches on public-dominated data: Algorithm 1 switches to float64 there.

    In float32 removing one record moved the *other* records' clipped
    gradients (batch-dependent rounding, amplified by the cancellation in
    ``∇ℓ − ∇ℓ_pub``) up to 3.4·C at scale 1e8; above ``MAX_PUBLIC_ABS`` the
    trainer computes in float64, where the check holds at float64's slack.
    """
    from sklearn_fdp.neural._alg1 import MAX_PUBLIC_ABS

    assert scale > MAX_PUBLIC_ABS
    X, y, private_idx = _public_heavy(scale, np.float32)
    est = _estimator(per_example, "alg1", "mask", True, private_idx, 1.0, "relu")
    n = X.shape[0]
    base = _release(est, X, y, np.zeros((n, len(private_idx))))
    public_mask, _ = est._feature_split(X.shape[1], None)
    assert _alg1.compute_dtype(X, public_mask, alg1=True) == "float64"
    for i in range(n):
        X2, y2 = remove_one(X, y, i)
        r = _release(est, X2, y2, np.zeros((n - 1, len(private_idx))))
        assert_sensitivity(base, r, 1.0, n_terms=2 * n, clip=1.0, dtype=np.float64,
                           what=f"{per_example}, scale {scale:g}, record {i}")

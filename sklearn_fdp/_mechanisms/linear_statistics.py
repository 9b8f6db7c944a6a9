"""Ridge regression with feature DP: one Gaussian release of the protected sufficient statistics.

The ridge solution needs only ``G = X~ᵀX~`` and ``b = X~ᵀy`` (``X~`` is ``X``
with a public column of ones for the intercept). With the columns split into
public ``P`` (the intercept included) and protected ``Q``, and the target
public or private, the blocks that involve only public values (``X_Pᵀ X_P``,
and ``X_Pᵀ y`` when the target is public) are computed exactly, and the
others are released once with the Gaussian mechanism:

=========  ==================================  ================  ==============
block      entries                             add/remove sens.  replace sens.
=========  ==================================  ================  ==============
``QP``     ``X_Qᵀ X~_P`` (target public:       ``B_Q · P``       ``2 B_Q · P``
           ``X_Qᵀ X~_P V_k``, see below)
``QQ``     upper triangle of X_QᵀX_Q           ``B_Q²``          ``√2 B_Q²``
``Qy``     ``X_Qᵀ y`` (target private)         ``B_Q``           ``2 B_Q``
``Qr``     ``X_Qᵀ clip(r, ±R)`` (target        ``B_Q R``         ``2 B_Q R``
           public; ``r = y − X~_P β``)
``Py``     ``X~_Pᵀ y`` (target private)        ``P``             ``2 P``
=========  ==================================  ================  ==============

Units and bounds. Every row's public block is clipped to L2 norm ``B_P``
and its protected block to ``B_Q`` (declared bounds, never read from the
data); ``P = sqrt(B_P² + 1)`` with the intercept (``B_P`` without). The
target is clipped to the declared ``y_bounds = (lo, hi)`` and mapped to
``[-1, 1]`` by ``(y − c) / h`` with ``c = (lo + hi) / 2``, ``h = (hi − lo) /
2`` (without an intercept ``c = 0`` and ``h = max(|lo|, |hi|)``); the
released blocks are in these units, and the solution is mapped back
exactly (post-processing): the ridge minimiser for ``(y − c) / h`` is the
one for ``y`` divided by ``h``, its intercept moved by ``c``.

The residual block (target public; issue 19). The solver needs the
protected columns' right-hand side only as ``X_Qᵀy − X_QᵀX~_P β = X_Qᵀ r``,
``β`` the public ridge model (:func:`public_ridge`: ``(X~_PᵀX~_P + α
D_P)⁻¹ X~_Pᵀy``) and ``r = y − X~_P β`` its residuals. Releasing ``X_Qᵀy``
and ``X_QᵀX~_P`` and forming it from them puts the noise of ``X_QᵀX~_P``
times ``‖β‖`` into it; so with a public target ``X_Qᵀ clip(r)`` is released
instead of ``X_Qᵀy``, each residual clipped to ``[−R, R]``, ``R`` read off
the public residuals (:func:`residual_bound`, :func:`residual_clip`: twice
their root mean square, raised so that at most about ``16 σ √d_Q`` of them
are clipped, at most :data:`RESIDUAL_BOUND` ``= 2``; ``|y| <= 1``).
β, ``r`` and ``R`` are functions of the public columns and the public
target of *every* record (and of σ), so the bound rests on the relation's
public part: under replacement (Def. 5) a record's public columns and
target are kept, β, ``R`` and every ``r_i`` are unchanged, and the block
moves by ``(q − q') clip(r_i)``, of
norm ``<= 2 B_Q R``. Under add/remove (Def. 6) the simulator
``sim(S, Ψ(x))`` knows the record's public part ``Ψ(x)`` (its public columns
and target) and runs the mechanism on ``S`` plus that record with its
protected values zero: β, ``R`` and every ``r_i`` are the same as on ``S ∪
{x}``, and the record's protected values add ``q clip(r_x)`` (norm ``<= B_Q
R``) to this
block, as they add ``q p~ᵀ`` and ``q qᵀ`` to the others (for which the
simulator's run and plain removal release the same). The sensitivity of
the stacked vector below is therefore unchanged in form, with ``Qr`` in
place of ``Qy``. ``X_Qᵀy`` is not released then; the joint solver uses
``X_Qᵀ r + X_QᵀX~_P β`` for it (post-processing; exact without noise when no
residual is clipped). Validation (``benchmarks/studies/bench_fdp_linear_rules.py``):
+0.7 to +1.7 R² points at ε ∈ [0.01, 1] on Adult hours-per-week with
``R = 2``; the clip from the residuals adds +0.2 to +0.7 more (the block's
noise scales with ``R``; ``2 rmse = 0.47`` there, 5 % of the residuals
clipped at ε <= 0.1, fewer above).

The projected block (target public; issue 19). The residual solver uses
``X_QᵀX~_P`` only along the public eigendirections it keeps (those of
``X~_PᵀX~_P + α D_P`` with eigenvalue at least ``KEEP · τ``), so with a
public target only ``X_QᵀX~_P V_k`` is released, ``V_k`` the top ``k``
eigenvectors (:func:`public_eigenbasis`, :func:`projected_layout`: ``k`` the
largest rank the solver keeps at the noise scale of the layout that releases
``k`` directions; all of them as σ → 0). ``V_k`` is a function of the public
columns of every record, the same under both relations' neighbours (as β);
one record's term ``q (V_kᵀ p~)ᵀ`` has norm ``‖q‖ ‖V_kᵀ p~‖ <= B_Q P``, the
whole block's bound. Fewer entries take less of the budget (the weights
below), which goes to ``X_QᵀX_Q`` and ``X_Qᵀ r``. On Adult ``k`` is 1 at
ε <= 0.03, 3 at ε = 0.1 and 24 at ε = 1 of 83.

The symmetric block. Only the upper triangle of ``X_QᵀX_Q`` is released,
its off-diagonal entries multiplied by ``√2`` first: the vector then has
L2 norm ``‖X_QᵀX_Q‖_F``, and one record's term ``q qᵀ`` has norm
exactly ``‖q‖² ≤ B_Q²`` (the plain upper triangle has the same largest
norm, reached at a one-hot ``q``, so the factor is free and halves the
off-diagonal noise variance). Under replacement ``‖q qᵀ − q' q'ᵀ‖_F² =
‖q‖⁴ + ‖q'‖⁴ − 2 (q · q')² ≤ 2 B_Q⁴``.

One Gaussian. Block ``k`` (``m_k`` entries, sensitivity ``c_k`` under the
estimator's relation) is multiplied by a weight ``w_k`` and the blocks are
stacked into one vector ``v``; ``v + N(0, σ² I)`` is released, where the
weights are scaled so that ``Σ_k w_k² c_k²`` is 1 under add/remove and 4
under replacement. One record then moves ``v`` by at most 1 (add/remove;
exact: every block's largest term is reached by one record at once), or by
at most 2 under replacement (the sum of the blocks' largest moves: an upper
bound, tight but for the ``QQ`` block's share, which no record reaches
together with the others' largest). So ``v + N(0, σ² I)`` is the Gaussian
mechanism with noise multiplier ``σ`` in the convention of
:mod:`sklearn_fdp.accounting` (sensitivity 1 under add/remove, ``2 × 1``
under replacement), its event the one Gaussian the estimator's plan
calibrates ``σ`` for. Block ``k``'s entries get noise of std ``σ / w_k``.
The weights minimise the total noise variance of the released system
``[G, b]`` (each entry counted as often as it appears in the symmetric
``(d + 2) × (d + 2)`` matrix ``[X~, y]ᵀ[X~, y]``), ``w_k² ∝ sqrt(m_k) / c_k``
(Cauchy–Schwarz), the same as splitting the budget across blocks
optimally (``Qr`` counted as ``Qy``); then ``w_QP`` is halved when the
whole block is released (:data:`QP_WEIGHT`; 1 for the projected one,
:data:`QP_PROJECTED_WEIGHT`) and ``w_Qr`` doubled (:data:`QR_WEIGHT`; all
chosen by validation), and all are rescaled to the sensitivity above.

Solving (post-processing; :func:`solve_noisy_ridge`). Noise scales from σ
and the shapes only: ``τ``, the expected spectral norm of the noise of
``G`` (``s_QP (√d_Q + √m) + 2 s_QQ √d_Q`` for the noise stds ``s`` of its
two noisy blocks, ``m`` the public directions released, ``d_P + 1`` or
``k``; Gordon's bound for Gaussian matrices), and ``τ_b``,
the expected norm of the noise of ``X~_Pᵀy``. Every inverse raises the
eigenvalues below its noise scale to it (at least ``1e-12 max(1,
|λ|_max)``), so the solution is always finite. ``solver="residual"`` (the
default) fits the public model, then the protected columns to its residual,
residualised on the public directions the noise leaves intact (eigenvalue at
least ``KEEP · τ``; with a public target the ``k`` released ones), the
public step with ``τ_b`` added to the ridge and the protected one with its
eigenvalues below ``FLOOR · τ`` raised to it; ``"joint"``
solves the whole noisy system. Both are Ridge on the clipped data when the
noise vanishes (no residual is clipped then either).
"""

import math
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from .._distributed import tree_reduce, use_cluster, validate_partition
from .._kernels import clipped_design
from .._outofcore import row_slice
from .gaussian_mean import row_scale_factors

# Bytes of float64 working array per chunk of the passes over the data. 4 MiB
# (issue 19; was 16): the chunk's copies stay in cache and fresh pages are fewer;
# measured on Adult (32,561 × 104, one thread): the statistics 20.3 ms warm and
# 23.6 ms on a process's first fit, against 22.1 and 26.8 ms at 16 MiB (2 MiB:
# 20.8 and 23.2; 512 KiB: 25.1 ms warm).
CHUNK_BYTES = 4 << 20

#: The released blocks, in the order of the stacked vector.
BLOCKS = ("QP", "QQ", "Qy", "Qr", "Py")

#: With a public target the protected columns' right-hand side is released as
#: ``X_Qᵀ r`` for the public residual ``r = y − X~_P β`` (β: the public ridge
#: model), each ``r_i`` clipped to ``[−RESIDUAL_BOUND, RESIDUAL_BOUND]`` (target
#: units, where ``|y| <= 1``): a residual beyond 2 needs a public prediction
#: outside the target's range, so nothing is clipped for a sane public model
#: (Adult hours-per-week: largest |r| 1.41 on the validation study's training split).
RESIDUAL_BOUND = 2.0

#: The clip ``R`` actually used is ``RESIDUAL_RMSE_MULTIPLE`` times the public
#: model's root mean squared residual (:func:`residual_bound`; public), at most
#: :data:`RESIDUAL_BOUND` and at least :data:`RESIDUAL_FLOOR`, raised by the
#: clip-count rule below: the block's sensitivity is ``B_Q R``, so a tighter clip
#: is less noise on the few numbers the protected coefficients are solved from,
#: for the bias of clipping the residuals beyond it (2 rmse = 0.47 on Adult
#: hours-per-week: 5 % of the residuals; the largest |r| 1.41). Chosen on a
#: validation split of adult.data (benchmarks/studies/bench_fdp_linear_rules.py, issue 19's
#: fourth round, 40 noise seeds): with the floor τ in place of the previous round's
#: ridge, +0.005 to +0.013 R² over R = 2 at ε in [0.01, 0.3] and +0.004 at ε = 1;
#: 1.5 is level with 2, 3 loses 0.002 to 0.0035 at ε <= 0.1.
RESIDUAL_RMSE_MULTIPLE = 2.0
RESIDUAL_FLOOR = 1e-6

#: ... but clipping no more than about ``RESIDUAL_CLIP_RATE · σ · √d_Q`` residuals
#: (:func:`residual_clip`): as the noise vanishes nothing is clipped, and the fit
#: tends to Ridge on the clipped data. Same study: against 2 rmse at every σ it
#: changes nothing measurable (within 0.0004 at every ε); a rate of 4 (R = 1.02 at
#: ε = 1) loses 0.003 at ε = 1. On Adult R is 2 rmse up to ε = 0.1, 0.56 at 0.3 and
#: 0.74 at 1.
RESIDUAL_CLIP_RATE = 16.0

# The X_QᵀX~_P block's weight relative to the variance-optimal rule. The
# residual solver (the default) uses that block only through a few
# projections (A_QP β and A_QP V_k), so it needs less of the budget than its
# many entries claim. Chosen among {0.25, 0.35, 0.5, 0.7, 1, 2} on a
# validation split of adult.data (target hours-per-week, Adult's protected
# columns private, 3 seeds; never adult.test): 0.5 was best or within 0.0015
# of the best R² at ε ∈ {0.01, 0.1, 1}, target public and private, and gained
# 0.0011-0.0095 (target public) and 0.009-0.017 (target private) over 1.
# Checked again with the residual release among {0.25, 0.5, 1} (benchmarks/
# bench_fdp_linear_rules.py, issue 19, 40 seeds): 0.5 is best or close at every ε
# but with a public target at ε <= 0.1, where 0.25 gains 0.002-0.008 (and loses
# 0.007 at ε = 1).
QP_WEIGHT = 0.5

# The X_Qᵀ r block's weight relative to the variance-optimal rule (target public):
# the protected coefficients are solved from its d_Q numbers, so their noise costs
# more than the entry count says. Same study: 1.4 over 1 +0.0005 to +0.002 R² at every
# ε (whole QP, floor τ); 2 with the floor 0.7 τ +0.003 to +0.004 more at ε <= 0.1,
# level above; 3 gains 0.0007 at ε = 0.1 and loses 0.004 at ε = 1.
QR_WEIGHT = 2.0

# With a public target the QP block is released only along the public
# eigendirections the residual solver keeps (projected_layout): +0.001 to +0.003
# R² at ε <= 0.3 over the whole block, level at ε = 1 (same study). Its weight is
# then the variance-optimal one (QP_WEIGHT's halving stood for the unused
# directions): 0.5 loses 0.0006 to 0.0018 at every ε.
QP_PROJECTED_WEIGHT = 1.0

# The protected step's eigenvalue floor, FLOOR[label_public] · τ (no ridge beyond α
# either way). With a public target, same study: 0.7 against 1 +0.001 to +0.002 at ε
# <= 0.1, level at 0.3, −0.0006 at 1; 0.5 is level with 0.7 at ε <= 0.3 and loses
# 0.001 at 1. With a private target the floor τ alone gained 0.004-0.009 R² over a
# ridge τ at ε ∈ [0.03, 1] (issue 19's third round).
FLOOR = {True: 0.7, False: 1.0}

# The residual solver keeps the public eigendirections whose eigenvalue is at
# least KEEP[label_public] · τ. Chosen on the same validation split
# (benchmarks/studies/bench_fdp_linear_rules.py, issue 19, 40 seeds) among {0.25, 0.5, 1}:
# with a public target 0.5 gains +0.003 and +0.008 R² over 1 at ε = 0.3 and 1
# (level below; 0.25 is level with 0.5 at ε >= 0.3 and loses 0.002 at 0.1);
# with a private target 1 stays best (0.5 loses up to 0.009 at small ε).
KEEP = {True: 0.5, False: 1.0}

class StatisticLayout(NamedTuple):
    """Everything public about the release: block sizes, sensitivities, weights.

    Built by :func:`statistic_layout` from the shape, the column split and
    the parameters only.
    """

    public_idx: np.ndarray  # input columns of the public block (intercept not included)
    private_idx: np.ndarray  # input columns of the protected block
    fit_intercept: bool
    label_public: bool
    public_bound: float  # B_P
    private_bound: float  # B_Q
    sizes: dict  # block -> number of released entries (noisy blocks only)
    sensitivities: dict  # block -> c_k under the relation
    weights: dict  # block -> w_k
    sensitivity: float  # of the stacked weighted vector: 1 (add/remove) or 2 (replace)
    neighboring: str = "add_remove"
    residual_bound: float = 2.0  # R, the clip of the public residuals (Qr block)
    qp_basis: np.ndarray | None = None  # V_k: QP released as X_QᵀX~_P V_k (None: whole)


def _triu_size(d):
    return d * (d + 1) // 2


def statistic_layout(public_mask, *, fit_intercept, label_public, public_bound, private_bound,
                     neighboring, residual_bound=RESIDUAL_BOUND, qp_basis=None, target=True,
                     qp_weight=None):
    """The public layout of the release (see the module docstring for the numbers).

    Parameters
    ----------
    public_mask : ndarray of bool of shape (n_features,)
    fit_intercept, label_public : bool
    public_bound, private_bound : float
        ``B_P`` and ``B_Q``, > 0.
    neighboring : {"add_remove", "replace"}
    residual_bound : float, default=RESIDUAL_BOUND
        ``R``, the clip of the public residuals in the ``Qr`` block (target
        public): :func:`sufficient_statistics` computes it from the public
        statistics (:func:`residual_bound`); the default, its largest value,
        is the layout before the data are read (:meth:`privacy_plan`).
    qp_basis : ndarray of shape (d_P + fit_intercept, k) or None, default=None
        Orthonormal columns ``V_k`` (public: :func:`projected_layout`): the
        ``QP`` block is released as ``X_QᵀX~_P V_k`` (``d_Q k`` entries, the
        same sensitivity, weight × :data:`QP_PROJECTED_WEIGHT` in place of
        :data:`QP_WEIGHT`); None: the whole ``X_QᵀX~_P``.
    target : bool, default=True
        False: no target (``FeatureDPPCA``'s covariance): only ``QP`` and
        ``QQ`` are released (``label_public`` is then ignored).
    qp_weight : float or None, default=None
        The ``QP`` block's weight relative to the variance-optimal rule
        (None: :data:`QP_WEIGHT`, or :data:`QP_PROJECTED_WEIGHT` with
        ``qp_basis``; those were chosen for the regression's solver).

    Returns
    -------
    layout : StatisticLayout
    """
    public_idx = np.flatnonzero(public_mask)
    private_idx = np.flatnonzero(~np.asarray(public_mask, dtype=bool))
    d_q, d_p1 = len(private_idx), len(public_idx) + int(fit_intercept)
    b_q = float(private_bound)
    p = math.sqrt(float(public_bound) ** 2 + int(fit_intercept))
    replace = neighboring == "replace"
    rank = d_p1 if qp_basis is None else qp_basis.shape[1]
    sizes = {"QP": d_q * rank, "QQ": _triu_size(d_q), "Qy": 0 if label_public else d_q,
             "Qr": d_q if label_public else 0, "Py": 0 if label_public else d_p1}
    if not target:
        label_public = True  # nothing of a target is released (nor summed: no Qr)
        sizes.update(Qy=0, Qr=0, Py=0)
    add_remove = {"QP": b_q * p, "QQ": b_q * b_q, "Qy": b_q, "Qr": b_q * float(residual_bound),
                  "Py": p}
    factor = {"QP": 2.0, "QQ": math.sqrt(2.0), "Qy": 2.0, "Qr": 2.0, "Py": 2.0} if replace \
        else dict.fromkeys(BLOCKS, 1.0)
    # How often a block's entries appear in the symmetric [X~, y]ᵀ[X~, y]
    # (QP and the y columns twice; the scaled triangle stands for QQ whole).
    appears = {"QP": 2, "QQ": 1, "Qy": 2, "Qr": 2, "Py": 2}
    sens = {k: factor[k] * add_remove[k] for k in BLOCKS if sizes[k] and add_remove[k] > 0}
    sizes = {k: sizes[k] for k in sens}
    target = 2.0 if replace else 1.0
    raw = {k: math.sqrt(math.sqrt(appears[k] * sizes[k]) / sens[k]) for k in sens}
    if "QP" in raw:
        if qp_weight is None:
            qp_weight = QP_WEIGHT if qp_basis is None else QP_PROJECTED_WEIGHT
        raw["QP"] *= qp_weight
    if "Qr" in raw:
        raw["Qr"] *= QR_WEIGHT
    total = math.sqrt(math.fsum((raw[k] * sens[k]) ** 2 for k in sens))
    weights = {k: target * raw[k] / total for k in sens}
    return StatisticLayout(public_idx, private_idx, bool(fit_intercept), bool(label_public),
                           float(public_bound), b_q, sizes, sens, weights, target,
                           neighboring, float(residual_bound), qp_basis)


def with_residual_bound(layout, residual_bound, qp_basis=None):
    """``layout`` with the ``Qr`` block's clip ``R`` set to ``residual_bound`` and the
    ``QP`` block's basis to ``qp_basis`` (sizes, sensitivities and every block's
    weight recomputed; public inputs only)."""
    mask = np.zeros(len(layout.public_idx) + len(layout.private_idx), dtype=bool)
    mask[layout.public_idx] = True
    return statistic_layout(mask, fit_intercept=layout.fit_intercept,
                            label_public=layout.label_public, public_bound=layout.public_bound,
                            private_bound=layout.private_bound, neighboring=layout.neighboring,
                            residual_bound=residual_bound, qp_basis=qp_basis)


def public_eigenbasis(G_PP, alpha, fit_intercept):
    """``(λ, V)`` of ``X~_PᵀX~_P + α D_P`` (public), eigenvalues in decreasing order:
    the matrix the residual solver's public step inverts with a public target."""
    d_pen = np.ones(G_PP.shape[0])
    if fit_intercept and d_pen.size:
        d_pen[-1] = 0.0
    M = G_PP + np.diag(alpha * d_pen)
    lam, V = np.linalg.eigh((M + M.T) / 2.0)
    return lam[::-1], V[:, ::-1]


def projected_layout(layout, lam, V, noise_multiplier):
    """The layout whose ``QP`` block is ``X_QᵀX~_P V_k``: the top ``k`` public
    eigendirections, those the residual solver keeps (target public; public inputs).

    ``k`` is the largest rank with ``λ_k >= KEEP · τ(k)``, ``τ(k)`` the noise
    scale (:func:`noise_scale`) of the layout that releases ``k`` directions:
    from ``k = d_P + 1`` down, ``k ← min(k, #{λ >= KEEP τ(k)})`` until it stops
    (at least 1). As σ → 0 every direction is kept (the whole block). Each
    record's term ``q (V_kᵀ p~)ᵀ`` has norm ``‖q‖ ‖V_kᵀ p~‖ <= B_Q P``: the
    sensitivity is the whole block's.
    """
    k = V.shape[1]
    scale = max(1.0, float(np.abs(lam).max(initial=0.0)))
    while k > 1:
        trial = with_residual_bound(layout, layout.residual_bound, V[:, :k])
        tau = noise_scale(trial, noise_multiplier)
        count = int(np.count_nonzero(lam >= max(KEEP[True] * tau, 1e-12 * scale)))
        if count >= k:
            break
        k = max(1, count)
    if k == V.shape[1]:
        return with_residual_bound(layout, layout.residual_bound)  # the whole block
    return with_residual_bound(layout, layout.residual_bound, np.ascontiguousarray(V[:, :k]))


class Statistics(NamedTuple):
    """The clipped sufficient statistics, exact (before any noise), float64, target in [-1, 1] units."""

    G_PP: np.ndarray  # X~_Pᵀ X~_P, public
    A_QP: np.ndarray  # X_Qᵀ X~_P
    A_QQ: np.ndarray  # X_Qᵀ X_Q
    b_Q: np.ndarray  # X_Qᵀ y
    b_P: np.ndarray  # X~_Pᵀ y (public when the target is)
    n_clipped: int  # targets outside y_bounds (not released)
    n_public_clipped: int  # rows whose public block exceeded B_P (public: read off public columns)
    beta: np.ndarray | None = None  # the public ridge model (target public; else None)
    r_Q: np.ndarray | None = None  # X_Qᵀ clip(y − X~_P β) (target public; else None)
    n_residual_clipped: int = 0  # public residuals beyond residual_bound (public)
    residual_bound: float = RESIDUAL_BOUND  # R (target public: from the public statistics)
    public_eigen: tuple | None = None  # (α, λ, V): public_eigenbasis (target public)


def target_map(y_bounds, fit_intercept):
    """``(centre, half_range)``: the target is released in units of ``(y − centre) / half_range``."""
    lo, hi = float(y_bounds[0]), float(y_bounds[1])
    if fit_intercept:
        return (lo + hi) / 2.0, (hi - lo) / 2.0
    return 0.0, max(abs(lo), abs(hi))


def _mapped_target(y, lo, hi, centre, half):
    """``(clip(y, lo, hi) − centre) / half``, clipped to [−1, 1] again: the map's
    rounding may leave it a few ulps outside (narrow bounds far from 0), which
    the sensitivities do not allow for."""
    return np.clip((np.clip(y, lo, hi) - centre) / half, -1.0, 1.0)


# Relative slack of the public row-clip warning's count: far above float64
# rounding of a sum of squares (~1e-15 relative), far below a real excess.
CLIP_WARNING_SLACK = 1e-9


def _clip_factors(block, bound):
    """Per-row factors (<= 1) that scale a float64 block's rows to L2 norm at most ``bound``."""
    if block.shape[1] == 0:
        return np.ones(block.shape[0])
    return row_scale_factors(block, bound, "clip")


def _chunk_rows(n_columns):
    """Rows per chunk: about :data:`CHUNK_BYTES` of float64 working array."""
    return max(256, CHUNK_BYTES // (8 * max(1, n_columns)))


def _dense_float64(rows):
    """A chunk of rows (ndarray or CSR) as a dense float64 array."""
    rows = rows.toarray() if sp.issparse(rows) else rows
    return np.asarray(rows, dtype=np.float64)


def _statistic_chunk(rows, y, layout, y_bounds):
    """One chunk's ``ZᵀZ``, its clipped-target and clipped-public-row counts, and its
    rows' clip factors ``(f_P, f_Q)``: what :func:`sufficient_statistics` adds up, in
    memory and per partition of a cluster (:func:`partition_statistics`) alike."""
    centre, half = target_map(y_bounds, layout.fit_intercept)
    lo, hi = float(y_bounds[0]), float(y_bounds[1])
    d_p, d_q = len(layout.public_idx), len(layout.private_idx)
    d_p1 = d_p + int(layout.fit_intercept)
    rows = _dense_float64(rows)
    Z = np.empty((rows.shape[0], d_p1 + d_q + 1))
    f_pub, f_priv = np.empty(rows.shape[0]), np.empty(rows.shape[0])
    # One compiled pass: the clipped blocks written into Z, no column copies
    # (the same values as the numpy below, which takes the rows the kernel
    # leaves to it: entries beyond _PLAIN_NORM_RANGE).
    if not clipped_design(rows, np.asarray(layout.public_idx, dtype=np.intp),
                          np.asarray(layout.private_idx, dtype=np.intp),
                          bool(layout.fit_intercept), float(layout.public_bound),
                          float(layout.private_bound), Z, f_pub, f_priv):
        block = rows[:, layout.public_idx]
        f_pub = _clip_factors(block, layout.public_bound)
        np.multiply(block, f_pub[:, None], out=Z[:, :d_p])
        if layout.fit_intercept:
            Z[:, d_p] = 1.0
        block = rows[:, layout.private_idx]
        f_priv = _clip_factors(block, layout.private_bound)
        np.multiply(block, f_priv[:, None], out=Z[:, d_p1:d_p1 + d_q])
    if y is None:  # no target (FeatureDPPCA): its column stays zero
        n_clipped, Z[:, -1] = 0, 0.0
    else:
        n_clipped = int(np.count_nonzero((y < lo) | (y > hi)))
        Z[:, -1] = _mapped_target(y, lo, hi, centre, half)
    # Counted for the warning only past a rounding slack: a row on the declared
    # bound (the schema's constant factor, one rounding unit above) is clipped
    # all the same, but is not "above the bound" (issue 32).
    n_public_clipped = int(np.count_nonzero(f_pub < 1.0 - CLIP_WARNING_SLACK))
    return Z.T @ Z, n_clipped, n_public_clipped, f_pub, f_priv


def _residual_chunk(rows, y, f_pub, f_priv, layout, y_bounds, coef, offset, r_min):
    """One chunk's ``Σ q_i r_i`` over the residuals ``|r_i| <= r_min`` (all columns; the
    protected ones are kept) and its tail: ``(part, tail_r, tail_q)``, the residuals
    above ``r_min`` and those rows' clipped protected blocks."""
    centre, half = target_map(y_bounds, layout.fit_intercept)
    lo, hi = float(y_bounds[0]), float(y_bounds[1])
    rows = _dense_float64(rows)
    yc = _mapped_target(y, lo, hi, centre, half)
    r = yc - (f_pub * (rows @ coef) + offset)
    tail = np.abs(r) > r_min
    tail_r = tail_q = None
    if tail.any():
        tail_r = r[tail]
        tail_q = rows[np.ix_(tail, layout.private_idx)] * f_priv[tail][:, None]
        r = np.where(tail, 0.0, r)
    return rows.T @ (f_priv * r), tail_r, tail_q


def _statistics_from_sum(S, n_clipped, n_public_clipped, layout):
    """The :class:`Statistics` blocks of the summed ``ZᵀZ`` (symmetrised)."""
    d_p1 = len(layout.public_idx) + int(layout.fit_intercept)
    d_q = len(layout.private_idx)
    S = (S + S.T) / 2.0
    q = slice(d_p1, d_p1 + d_q)
    return S, Statistics(S[:d_p1, :d_p1].copy(), S[q, :d_p1].copy(), S[q, q].copy(),
                         S[q, -1].copy(), S[:d_p1, -1].copy(), n_clipped, n_public_clipped)


def _public_model(stats, S, layout, alpha, n, n_features):
    """``(eigen, β, r_min, coef, offset)``: the public ridge model of the exact public
    blocks, its residual floor, and β as a coefficient vector over ``X``'s columns."""
    d_p = len(layout.public_idx)
    eigen = public_eigenbasis(stats.G_PP, alpha, layout.fit_intercept)
    beta = public_ridge(stats.G_PP, stats.b_P, alpha, layout.fit_intercept, eigen)
    r_min = residual_bound(stats.G_PP, stats.b_P, float(S[-1, -1]), beta, n)
    coef = np.zeros(n_features)
    coef[layout.public_idx] = beta[:d_p]
    offset = beta[d_p] if layout.fit_intercept else 0.0
    return eigen, beta, r_min, coef, offset


def sufficient_statistics(X, y, layout, y_bounds, alpha=1.0, noise_multiplier=None):
    """The exact clipped blocks of :class:`Statistics`, in one pass over row chunks.

    Rows' public and protected blocks are clipped to ``B_P`` / ``B_Q`` apart
    (the public block never depends on the protected values), the target to
    ``y_bounds`` and then mapped by :func:`target_map`; each chunk becomes
    ``Z = [X~_P, X_Q, y]`` in float64 (whatever ``X``'s dtype) and ``ZᵀZ``
    is accumulated: every block is a sub-matrix of it (``yᵀy`` is computed
    and dropped). With a public target a second, cheaper pass (two
    matrix-vector products per chunk) computes the public residual
    ``r = y − X~_P β`` of the public ridge model β (``alpha``; from the exact
    public blocks) and ``X_Qᵀ clip(r, ±R)`` from the same clipped rows
    (their clip factors are kept from the first pass), ``R`` from the public
    statistics and the residuals (:func:`residual_bound`,
    :func:`residual_clip`; ``noise_multiplier`` σ of the release, None:
    ``R`` the floor of :func:`residual_bound`); the private blocks of the
    rows whose residual exceeds that floor are kept (a few per cent) until
    ``R`` is known.

    A dask array ``X`` with a ``dask.distributed`` client active is summed
    where its partitions live (:func:`cluster_sufficient_statistics`).
    """
    if use_cluster(X):
        return cluster_sufficient_statistics(X, y, layout, y_bounds, alpha, noise_multiplier)
    n = X.shape[0]
    d_p, d_q = len(layout.public_idx), len(layout.private_idx)
    width = d_p + int(layout.fit_intercept) + d_q + 1
    S = np.zeros((width, width))
    y = None if y is None else np.asarray(y, dtype=np.float64)
    n_clipped = n_public_clipped = 0
    step = _chunk_rows(X.shape[1] + width)
    residual = "Qr" in layout.sizes  # a public target and protected columns
    if residual:  # the rows' clip factors, for the second pass
        f_pub, f_priv = np.ones(n), np.ones(n)
    for start in range(0, n, step):
        stop = min(n, start + step)
        part, clipped, public_clipped, fp, fq = _statistic_chunk(
            row_slice(X, start, stop), None if y is None else y[start:stop], layout, y_bounds)
        S += part
        n_clipped += clipped
        n_public_clipped += public_clipped
        if residual:
            f_pub[start:stop], f_priv[start:stop] = fp, fq
    S, stats = _statistics_from_sum(S, n_clipped, n_public_clipped, layout)
    if not residual:
        return stats
    # The public model (exact: public columns and target) and its residuals, clipped
    # to R >= R_min (residual_bound): rows with |r| <= R_min are summed at once,
    # the others (a few per cent) kept until R is known.
    eigen, beta, r_min, coef, offset = _public_model(stats, S, layout, alpha, n, X.shape[1])
    r_q = np.zeros(X.shape[1])
    tail_r, tail_q = [], []
    for start in range(0, n, step):
        stop = min(n, start + step)
        part, tr, tq = _residual_chunk(row_slice(X, start, stop), y[start:stop],
                                       f_pub[start:stop], f_priv[start:stop], layout,
                                       y_bounds, coef, offset, r_min)
        if tr is not None:
            tail_r.append(tr)
            tail_q.append(tq)
        r_q += part
    r_q = r_q[layout.private_idx]
    bound, n_residual_clipped = r_min, 0
    if tail_r:
        tail_r, tail_q = np.concatenate(tail_r), np.concatenate(tail_q)
        bound = residual_clip(np.abs(tail_r), r_min, noise_multiplier, d_q)
        n_residual_clipped = int(np.count_nonzero(np.abs(tail_r) > bound))
        r_q += tail_q.T @ np.clip(tail_r, -bound, bound)
    return stats._replace(beta=beta, r_Q=r_q, n_residual_clipped=n_residual_clipped,
                          residual_bound=bound, public_eigen=(float(alpha), *eigen))


# -- the same statistic summed where a cluster's partitions live ----------------------

def partition_statistics(X, y, layout, y_bounds, name):
    """One partition's ``(ZᵀZ, n_clipped, n_public_clipped, n_rows)``, on a worker.

    The partition is validated first with the in-memory rules
    (:func:`~sklearn_fdp._distributed.validate_partition`: finite values, the
    row-norm overflow bound, a finite target), then cut into the chunks of
    :func:`sufficient_statistics` and summed with :func:`_statistic_chunk`.
    """
    X, y = validate_partition(X, y, name)
    n = X.shape[0]
    width = len(layout.public_idx) + int(layout.fit_intercept) + len(layout.private_idx) + 1
    S = np.zeros((width, width))
    n_clipped = n_public_clipped = 0
    step = _chunk_rows(X.shape[1] + width)
    for start in range(0, n, step):
        part, clipped, public_clipped, _, _ = _statistic_chunk(
            X[start:start + step], None if y is None else y[start:start + step], layout,
            y_bounds)
        S += part
        n_clipped += clipped
        n_public_clipped += public_clipped
    return S, n_clipped, n_public_clipped, n


def _partition_residual_chunks(X, y, layout, y_bounds, coef, offset, r_min):
    """Yield :func:`_residual_chunk` of a partition's chunks (clip factors recomputed)."""
    X = _dense_float64(X)
    y = np.asarray(y, dtype=np.float64)
    width = len(layout.public_idx) + int(layout.fit_intercept) + len(layout.private_idx) + 1
    step = _chunk_rows(X.shape[1] + width)
    for start in range(0, X.shape[0], step):
        rows = X[start:start + step]
        f_pub = _clip_factors(rows[:, layout.public_idx], layout.public_bound)
        f_priv = _clip_factors(rows[:, layout.private_idx], layout.private_bound)
        yield _residual_chunk(rows, y[start:start + step], f_pub, f_priv, layout, y_bounds,
                              coef, offset, r_min)


def partition_residuals(X, y, layout, y_bounds, coef, offset, r_min, keep):
    """A partition's ``(Σ q r over |r| <= r_min, the `keep` largest tail |r|, tail size,
    n_rows)``: the second pass, whose tail values fix ``R`` (:func:`residual_clip`)."""
    r_q, tops, n_tail = np.zeros(X.shape[1]), [np.zeros(0)], 0
    for part, tail_r, _ in _partition_residual_chunks(X, y, layout, y_bounds, coef, offset,
                                                      r_min):
        r_q += part
        if tail_r is not None:
            n_tail += tail_r.size
            tops.append(_largest(np.abs(tail_r), keep))
    return r_q, _largest(np.concatenate(tops), keep), n_tail, X.shape[0]


def partition_residual_tail(X, y, layout, y_bounds, coef, offset, r_min, bound):
    """A partition's ``(Σ q clip(r, ±bound) over its tail, residuals clipped, n_rows)``."""
    total, n_residual_clipped = np.zeros(len(layout.private_idx)), 0
    for _, tail_r, tail_q in _partition_residual_chunks(X, y, layout, y_bounds, coef, offset,
                                                        r_min):
        if tail_r is not None:
            n_residual_clipped += int(np.count_nonzero(np.abs(tail_r) > bound))
            total += tail_q.T @ np.clip(tail_r, -bound, bound)
    return total, n_residual_clipped, X.shape[0]


def _largest(values, k):
    """The ``k`` largest of ``values``, in decreasing order."""
    if k <= 0:
        return values[:0]
    if values.size > k:
        values = np.partition(values, values.size - k)[values.size - k:]
    return np.sort(values)[::-1]


def _merge_largest(k):
    """Combine two partial results whose second entry is a list of largest values."""
    def merge(a, b):
        return (a[0] + b[0], _largest(np.concatenate((a[1], b[1])), k), a[2] + b[2],
                a[3] + b[3])
    return merge


def cluster_sufficient_statistics(X, y, layout, y_bounds, alpha=1.0, noise_multiplier=None):
    """:func:`sufficient_statistics` of a dask array, summed on the cluster's workers.

    Each partition's rows are clipped and summed where it lives
    (:func:`partition_statistics`), the partial ``ZᵀZ`` added in a fixed binary
    tree (:func:`~sklearn_fdp._distributed.tree_reduce`): only
    ``(d + 2) × (d + 2)`` numbers per partition travel. With a public target
    two more passes compute ``X_Qᵀ clip(r)``: the first sums the rows with
    ``|r| <= R_min`` and brings back the ``k + 1`` largest tail residuals
    (all :func:`residual_clip` reads to fix ``R``), the second sums the
    tail's clipped terms. The blocks equal the in-memory ones up to the
    order of the additions (same clipping, same chunks within a partition).
    """
    name = "the sufficient statistic"
    S, n_clipped, n_public_clipped, _ = tree_reduce(
        partition_statistics, X, y, (layout, y_bounds, name), what=name)
    S, stats = _statistics_from_sum(S, n_clipped, n_public_clipped, layout)
    if "Qr" not in layout.sizes:
        return stats
    n, d_q = X.shape[0], len(layout.private_idx)
    eigen, beta, r_min, coef, offset = _public_model(stats, S, layout, alpha, n, X.shape[1])
    keep = 0 if noise_multiplier is None else _tail_rank(noise_multiplier, d_q) + 1
    r_q, top, n_tail, _ = tree_reduce(
        partition_residuals, X, y, (layout, y_bounds, coef, offset, r_min, keep), what=name,
        combine=_merge_largest(keep))
    r_q = r_q[layout.private_idx]
    bound, n_residual_clipped = r_min, 0
    if n_tail:
        bound = residual_clip(top, r_min, noise_multiplier, d_q, n_tail=n_tail)
        tail_sum, n_residual_clipped, _ = tree_reduce(
            partition_residual_tail, X, y, (layout, y_bounds, coef, offset, r_min, bound),
            what=name)
        r_q = r_q + tail_sum
    return stats._replace(beta=beta, r_Q=r_q, n_residual_clipped=n_residual_clipped,
                          residual_bound=bound, public_eigen=(float(alpha), *eigen))


def _tail_rank(noise_multiplier, d_q):
    """``k = ⌊RESIDUAL_CLIP_RATE σ √d_Q⌋`` of :func:`residual_clip` (capped for σ = ∞)."""
    allowed = RESIDUAL_CLIP_RATE * float(noise_multiplier) * math.sqrt(d_q)
    return int(min(math.floor(allowed), 2**31)) if math.isfinite(allowed) else 2**31


def residual_clip(tail, r_min, noise_multiplier, d_q, n_tail=None):
    """``R``: at least ``r_min``, at most :data:`RESIDUAL_BOUND`, and clipping at most
    ``k = ⌊RESIDUAL_CLIP_RATE · σ · √d_Q⌋`` residuals (``tail``: the ``|r_i|``
    above ``r_min``; σ ``noise_multiplier``, None: ``R = r_min``).

    The clipping bias of ``X_Qᵀ clip(r)`` is at most ``B_Q`` times the clipped
    excess, its noise about ``σ B_Q R`` per entry: clipping more residuals
    than the noise's scale (``k``) trades noise for more bias. As σ → 0
    nothing is clipped (below :data:`RESIDUAL_BOUND`), so the fit tends to
    Ridge on the clipped data. On Adult hours-per-week (validation split)
    ``R = r_min = 0.47`` up to ε = 0.1, 0.56 at ε = 0.3 and 0.74 at ε = 1.
    """
    if noise_multiplier is None:
        return float(r_min)
    allowed = RESIDUAL_CLIP_RATE * float(noise_multiplier) * math.sqrt(d_q)
    if not allowed < (tail.size if n_tail is None else n_tail):  # (also an infinite rate)
        return float(r_min)
    k = math.floor(allowed)
    # (With n_tail given, ``tail`` holds at least the k + 1 largest of the n_tail.)
    kth = float(np.partition(tail, tail.size - 1 - k)[tail.size - 1 - k])  # the (k+1)-th largest
    return float(min(RESIDUAL_BOUND, max(r_min, kth)))


def residual_bound(G_PP, b_P, yy, beta, n_samples):
    """``R``: the clip of the public residuals, from the exact public statistics only.

    ``R = min(RESIDUAL_BOUND, RESIDUAL_RMSE_MULTIPLE · rmse)`` with ``rmse² =
    ‖y − X~_P β‖² / n = (yᵀy − 2 βᵀX~_Pᵀy + βᵀ X~_PᵀX~_P β) / n`` the public
    model's mean squared residual (clipped rows, target units), floored at
    :data:`RESIDUAL_FLOOR`. Every input is a function of the public columns
    and the public target of all rows (see the module docstring).
    """
    sq = yy - 2.0 * float(beta @ b_P) + float(beta @ (G_PP @ beta))
    rmse = math.sqrt(max(sq, 0.0) / max(int(n_samples), 1))
    return float(min(RESIDUAL_BOUND, max(RESIDUAL_FLOOR, RESIDUAL_RMSE_MULTIPLE * rmse)))


def public_ridge(G_PP, b_P, alpha, fit_intercept, eigen=None):
    """β = ``(X~_PᵀX~_P + α D_P)⁻¹ X~_Pᵀy`` (the intercept last and unpenalised), its
    eigenvalues below ``1e-12 max(1, |λ|_max)`` raised to that: the public model.
    ``eigen``: that matrix's :func:`public_eigenbasis`, when the caller has it (the
    same numbers as without)."""
    if eigen is None:
        d_pen = np.ones(G_PP.shape[0])
        if fit_intercept and d_pen.size:
            d_pen[-1] = 0.0
        if not d_pen.size:
            return np.zeros(0)
        return _floored_solve(G_PP + np.diag(alpha * d_pen), b_P, 0.0)[0]
    lam, V = eigen[0][::-1], eigen[1][:, ::-1]  # eigh's own (ascending) arrays again
    if not lam.size:
        return np.zeros(0)
    floor = 1e-12 * max(1.0, float(np.abs(lam).max()))
    lam = np.where(lam < floor, floor, lam)
    return V @ ((V.T @ b_P) / lam)


def _triu(A):
    """Upper triangle of a symmetric ``A`` (row-major), off-diagonal entries times √2."""
    i, j = np.triu_indices(A.shape[0])
    return A[i, j] * np.where(i == j, 1.0, math.sqrt(2.0))


def _untriu(v, d):
    """The symmetric matrix of :func:`_triu`'s vector ``v``."""
    i, j = np.triu_indices(d)
    vals = v * np.where(i == j, 1.0, 1.0 / math.sqrt(2.0))
    A = np.zeros((d, d))
    A[i, j] = vals
    A[j, i] = vals
    return A


def _block_vectors(stats, layout):
    """``{block: its unweighted released entries}`` for the noisy blocks."""
    qp = stats.A_QP if layout.qp_basis is None else stats.A_QP @ layout.qp_basis
    vecs = {"QP": qp.ravel(), "QQ": _triu(stats.A_QQ), "Qy": stats.b_Q,
            "Qr": stats.r_Q, "Py": stats.b_P}
    return {k: vecs[k] for k in layout.weights}


def stacked_release(stats, layout):
    """The weighted stacked vector ``v`` the Gaussian is added to (its sensitivity:
    ``layout.sensitivity``)."""
    parts = [layout.weights[k] * v for k, v in _block_vectors(stats, layout).items()]
    return np.concatenate(parts) if parts else np.zeros(0)


def add_gaussian_noise(vector, noise_multiplier, noise_rng):
    """``vector + σ N(0, I)``, the noise drawn from ``noise_rng`` alone, in one call."""
    if vector.size == 0:
        return vector.copy()
    return vector + noise_multiplier * noise_rng.standard_normal(size=vector.size)


class NoisySystem(NamedTuple):
    """The released normal equations (target in [-1, 1] units)."""

    G: np.ndarray  # (d + fit_intercept) × (d + fit_intercept), symmetric; columns as X, intercept last
    b: np.ndarray
    noise_scale: float  # τ: the expected spectral norm of G's noise (public)
    target_noise_std: float  # noise std of X~_Pᵀy's entries (0 when exact)
    beta: np.ndarray | None = None  # the exact public model (target public), intercept last
    r_Q: np.ndarray | None = None  # noisy X_Qᵀ clip(y − X~_P β) (target public)
    qp_rank: int | None = None  # k: only the top k public directions of X_QᵀX~_P released
    public_eigen: tuple | None = None  # (α, λ, V): X~_PᵀX~_P + α D_P's, λ ascending (target public)


def noise_stds(layout, noise_multiplier):
    """``{block: noise std of its entries}`` (for ``QQ``: the diagonal; off-diagonal / √2)."""
    return {k: noise_multiplier / w for k, w in layout.weights.items()}


def noise_scale(layout, noise_multiplier):
    """τ, the expected spectral norm of the noise in ``G`` (public: shapes and σ only)."""
    stds = noise_stds(layout, noise_multiplier)
    d_q = len(layout.private_idx)
    d_p1 = len(layout.public_idx) + int(layout.fit_intercept)
    if layout.qp_basis is not None:
        d_p1 = layout.qp_basis.shape[1]
    tau = stds.get("QP", 0.0) * (math.sqrt(d_q) + math.sqrt(d_p1)) if d_p1 else 0.0
    return tau + 2.0 * stds.get("QQ", 0.0) * math.sqrt(d_q)


def release_linear_statistics(X, y, layout, y_bounds, noise_multiplier, noise_rng, alpha=1.0):
    """Clip, compute the blocks, add one Gaussian to the stacked weighted vector; assemble.

    Returns ``(system, stats, layout)``: the :class:`NoisySystem` (public
    blocks exact, the others noisy), the exact :class:`Statistics`, for
    their counts only (``n_clipped``, the targets outside ``y_bounds``,
    computed from the private targets: for the data holder's warning, never
    released; ``n_public_clipped``, from the public columns), and the layout
    the release used (``layout`` with the residual clip ``R`` of the public
    statistics: :func:`with_residual_bound`; the others as given).
    """
    stats = sufficient_statistics(X, y, layout, y_bounds, alpha, noise_multiplier)
    eigen = None
    if "Qr" in layout.weights:  # the clip R and the QP basis, read off the public statistics
        layout = with_residual_bound(layout, stats.residual_bound)
        if "QP" in layout.weights:
            _, lam, V = stats.public_eigen
            layout = projected_layout(layout, lam, V, noise_multiplier)
            eigen = (float(alpha), lam[::-1], V[:, ::-1])  # for the solver, ascending
    noisy = add_gaussian_noise(stacked_release(stats, layout), noise_multiplier, noise_rng)
    blocks, offset = {}, 0
    for k, size in layout.sizes.items():
        blocks[k] = noisy[offset:offset + size] / layout.weights[k]
        offset += size
    d_q = len(layout.private_idx)
    d_p1 = len(layout.public_idx) + int(layout.fit_intercept)
    if layout.qp_basis is not None:  # the released projections, in the columns' basis
        A_QP = blocks["QP"].reshape(d_q, -1) @ layout.qp_basis.T
    else:
        A_QP = blocks["QP"].reshape(d_q, d_p1) if "QP" in blocks else stats.A_QP
    A_QQ = _untriu(blocks["QQ"], d_q) if "QQ" in blocks else stats.A_QQ
    b_P = blocks.get("Py", stats.b_P)
    r_Q = blocks.get("Qr")
    # With the residual released, X_Qᵀy = X_Qᵀr + X_QᵀX~_P β (exact without noise
    # when no residual is clipped): what the joint solve needs.
    b_Q = blocks["Qy"] if "Qy" in blocks else (
        r_Q + A_QP @ stats.beta if r_Q is not None else stats.b_Q)
    # Assemble in the input's column order, the intercept last.
    pub = np.r_[layout.public_idx, [X.shape[1]] * int(layout.fit_intercept)].astype(int)
    priv = layout.private_idx
    size = X.shape[1] + int(layout.fit_intercept)
    G = np.zeros((size, size))
    b = np.zeros(size)
    G[np.ix_(pub, pub)] = stats.G_PP
    G[np.ix_(priv, pub)] = A_QP
    G[np.ix_(pub, priv)] = A_QP.T
    G[np.ix_(priv, priv)] = A_QQ
    b[pub] = b_P
    b[priv] = b_Q
    stds = noise_stds(layout, noise_multiplier)
    rank = None if layout.qp_basis is None else layout.qp_basis.shape[1]
    return (NoisySystem(G, b, noise_scale(layout, noise_multiplier), stds.get("Py", 0.0),
                        stats.beta if r_Q is not None else None, r_Q, rank, eigen),
            stats, layout)


SOLVERS = ("residual", "joint")


def _floored_solve(M, rhs, floor):
    """``M⁻¹ rhs`` for a symmetric ``M`` whose eigenvalues below ``floor`` are raised to it."""
    lam, V = np.linalg.eigh((M + M.T) / 2.0)
    floor = max(float(floor), 1e-12 * max(1.0, float(np.abs(lam).max(initial=0.0))))
    raised = lam < floor
    lam = np.where(raised, floor, lam)
    return V @ ((V.T @ rhs) / lam), int(raised.sum())


def solve_noisy_ridge(system, alpha, fit_intercept, layout, solver="residual"):
    """Ridge coefficients from the released system (post-processing); ``(theta, n_raised)``.

    ``theta`` has the input's columns in order, the intercept last.
    ``n_raised`` counts the eigenvalues raised to a floor (a function of
    the release: free). ``D`` below is the identity but 0 for the intercept.

    ``"joint"``: ``(G + α D) θ = b`` whole, its eigenvalues below
    ``floor = max(τ, 1e-12 max(1, |λ|_max))`` raised to ``floor``; with no
    noise this is :class:`sklearn.linear_model.Ridge` on the clipped data.

    ``"residual"``: the public model first, then the protected columns fitted
    to its residual (one backfitting pass, made exact where the noise allows):
    ``β = (G_PP + (α + τ_b) D_P)⁻¹ b_P`` with ``τ_b = s_Py sqrt(d_P + 1)`` the
    expected norm of the noise of ``b_P`` (0 with a public target); the
    protected columns are residualised on the public eigendirections ``V_k``
    of that matrix whose eigenvalues ``λ_k`` are at least ``KEEP · τ`` (there
    the noise of ``A_QP`` is not amplified beyond ``1 / (KEEP τ)``; the
    intercept's direction is one of them; :data:`KEEP` is 0.5 with a public
    target, 1 with a private one; with ``system.qp_rank`` set, at most the top
    ``qp_rank`` of them, the directions released), ``C = X_QᵀX_Q − (A_QP
    V_k) Λ_k⁻¹ (A_QP V_k)ᵀ``, and ``θ_Q = (C + α I)⁻¹ (b_Q − A_QP β)`` (the
    eigenvalues of that matrix below ``FLOOR · τ`` raised to it;
    :data:`FLOOR` 0.7 with a public target, 1 with a private one), with the
    released ``X_Qᵀ r`` for ``b_Q − A_QP β`` when the target is public (see
    the module docstring: it carries no noise of ``A_QP``); the public coefficients
    are then moved by ``− V_k Λ_k⁻¹ (A_QP V_k)ᵀ θ_Q``. As the noise grows the
    model falls back to the exact public one; as it vanishes every direction
    is kept and this is the joint solution (Ridge on the clipped data).
    Chosen over the plain backfitting pass (no ``V_k``) and the joint solve
    on a validation split of adult.data (see the estimator's ``solver``).
    """
    G = np.asarray(system.G, dtype=np.float64)
    size = G.shape[0]
    d_pen = np.ones(size)
    if fit_intercept:
        d_pen[-1] = 0.0
    if solver == "joint" or len(layout.private_idx) == 0:
        # Label DP (no protected column) is the public step alone: the same rule.
        tau = system.noise_scale + _target_noise_scale(layout, system)
        if solver == "joint":
            return _floored_solve(G + np.diag(alpha * d_pen), system.b, system.noise_scale)
        return _floored_solve(G + np.diag((alpha + tau) * d_pen), system.b, tau)
    pub = np.r_[layout.public_idx, [size - 1] * int(fit_intercept)].astype(int)
    priv = layout.private_idx
    tau_b = _target_noise_scale(layout, system)
    tau = system.noise_scale
    G_pp = G[np.ix_(pub, pub)] + np.diag((alpha + tau_b) * d_pen[pub])
    if system.r_Q is not None:  # the exact public model the released residual is of
        beta, raised_p = system.beta, 0
    else:
        beta, raised_p = _floored_solve(G_pp, system.b[pub], tau_b)
    A = G[np.ix_(priv, pub)]
    if system.public_eigen is not None and system.public_eigen[0] == alpha + tau_b:
        _, lam, V = system.public_eigen  # computed by the release, of this very matrix
    else:
        lam, V = np.linalg.eigh((G_pp + G_pp.T) / 2.0)
    threshold = KEEP[system.r_Q is not None] * tau
    keep = lam >= max(threshold, 1e-12 * max(1.0, float(np.abs(lam).max(initial=0.0))))
    if system.qp_rank is not None:  # only the top qp_rank directions were released
        keep &= np.argsort(np.argsort(-lam, kind="stable"), kind="stable") < system.qp_rank
    W = A @ V[:, keep]  # A_QP V_k
    lam_k = lam[keep]
    C = G[np.ix_(priv, priv)] - (W / lam_k) @ W.T
    # X_Qᵀ(y − X~_P β): released as such with a public target, else from b_Q and A_QP.
    rhs = system.r_Q if system.r_Q is not None else system.b[priv] - A @ beta
    floor = FLOOR[system.r_Q is not None] * tau
    theta_q, raised_q = _floored_solve(C + alpha * np.eye(len(priv)), rhs, floor)
    theta = np.zeros(size)
    theta[pub] = beta - V[:, keep] @ ((W.T @ theta_q) / lam_k)
    theta[priv] = theta_q
    return theta, raised_p + raised_q


def _target_noise_scale(layout, system):
    """τ_b: the expected norm of the noise of ``X~_Pᵀy`` (0 when it is exact)."""
    return system.target_noise_std * math.sqrt(layout.sizes.get("Py", 0))


__all__ = ["BLOCKS", "SOLVERS", "NoisySystem", "StatisticLayout", "Statistics", "add_gaussian_noise",
           "noise_scale", "noise_stds", "release_linear_statistics", "solve_noisy_ridge",
           "projected_layout", "public_eigenbasis", "residual_bound", "stacked_release",
           "statistic_layout", "sufficient_statistics", "target_map", "with_residual_bound"]

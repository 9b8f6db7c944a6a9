"""What the "n is public" convention costs near q = 1 (issue 30 item 6).

Every DP-SGD fit accounts its Poisson sampling at its own rate
``q = B / n``, as if the neighbour with one record more (or fewer) ran at
the same rate; it runs at ``B' / (n + 1)`` (``B'`` the default batch of
``n + 1`` rows). The accountant's bound covers the added record's own
contribution, not the change of every other record's inclusion law. Far
from ``q = 1`` that change costs little; at ``q = 1`` (the default batch was
``n`` for every ``n <= 64``) every record of ``D`` is in the batch with
certainty while in ``D + x`` each is in with probability ``n / (n + 1)``:
the release's spread itself tells ``D`` from ``D + x``.

Exact one-step toy: every record of ``D`` (``n`` rows) contributes ``+1``
(the clip norm), the added record ``x`` contributes ``+1`` or ``-1``; the
release is ``sum_i b_i c_i + N(0, σ²)`` with ``b_i ~ Bernoulli(q)``. Its law
under ``D`` and ``D + x`` is a finite Gaussian mixture; the hockey-stick
divergence in both directions is integrated on a grid of step ``σ / 200``
over ``±14 σ`` beyond the support (tail mass below 1e-40), and ε at
``δ = 1e-5`` is found by bisection. "claimed" is the larger of the two
fits' own ε (``PoissonSampledDpEvent(q, Gaussian(σ))``, one step, PLD).
The ratio true / claimed is the convention's cost; 1.0 means none.

Rules compared: the default batch before issue 30
(``min(max(round(8 sqrt n), 64), 4096, n)``: ``q = 1`` for ``n <= 64``, and
at ``n = 64`` the neighbour's batch stays 64), after (at most ``n - 1``, see
:func:`sklearn_fdp._budget._auto_batch_size`: the batch grows with ``n``),
and a batch size the user fixes (the same ``B`` for ``n`` and ``n + 1``
rows) at ``n``, ``0.9 n`` and ``0.5 n``.

Run: ``python benchmarks/bench_public_n.py`` (a few seconds); writes
``benchmarks/results/public_n.json`` and ``public_n.md``.

Results (in ``benchmarks/results/``): ``public_n.json``, ``public_n.md``.
Quoted in (the sections whose figures come from these files):

* docs/threat_model.md § "What each estimator protects"
* docs/security_advisories.md § "SA-17. Full batches at small n"
"""

import math
import os
import pathlib
import sys
import time

import numpy as np
from scipy import stats

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import library_fingerprint, table_head, write_results  # noqa: E402

from sklearn_fdp import accounting  # noqa: E402
from sklearn_fdp._budget import _auto_batch_size  # noqa: E402

DELTA = 1e-5
SIGMAS = (1.0, 2.0, 4.0)
NS = (8, 32, 64, 100, 400)


def before_rule(n):
    return int(min(max(round(8 * math.sqrt(n)), 64), 4096, n))


# rule -> (batch of the n-row fit, batch of the (n + 1)-row fit)
RULES = {
    "default before issue 30": lambda n: (before_rule(n), before_rule(n + 1)),
    "default after issue 30": lambda n: (_auto_batch_size(n), _auto_batch_size(n + 1)),
    "batch_size=n (given)": lambda n: (n, n),
    "batch_size=0.9n (given)": lambda n: (round(0.9 * n),) * 2,
    "batch_size=0.5n (given)": lambda n: (round(0.5 * n),) * 2,
}


def _density(n, q, sigma, grid, extra=0.0, q_extra=0.0):
    """Density on ``grid`` of ``Bin(n, q) + extra Bern(q_extra) + N(0, σ²)``."""
    k = np.arange(n + 1)
    weights = stats.binom.pmf(k, n, q)
    out = np.zeros_like(grid)
    for shift, w_extra in ((0.0, 1.0 - q_extra), (extra, q_extra)):
        if w_extra == 0.0:
            continue
        for kk, w in zip(k, weights):
            if w * w_extra > 1e-300:
                out += w * w_extra * stats.norm.pdf(grid, kk + shift, sigma)
    return out


def _epsilon(p, q, step, delta=DELTA):
    """Smallest ε with max(δ(P||Q), δ(Q||P)) <= delta (hockey stick on the grid)."""
    def hockey(eps):
        return max(np.sum(np.maximum(0.0, q - math.exp(eps) * p)) * step,
                   np.sum(np.maximum(0.0, p - math.exp(eps) * q)) * step)

    lo, hi = 0.0, 1.0
    while hockey(hi) > delta:
        lo, hi = hi, 2 * hi
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        if hockey(mid) > delta:
            lo = mid
        else:
            hi = mid
    return hi


def claimed(q, sigma):
    return accounting.epsilon_of_event(accounting.dpsgd_event(sigma, q, 1), DELTA,
                                       accountant="pld")


def one(n, sigma, rule):
    b, b1 = RULES[rule](n)
    q, q1 = b / n, b1 / (n + 1)
    step = sigma / 200
    grid = np.arange(-1 - 14 * sigma, n + 2 + 14 * sigma, step)
    p = _density(n, q, sigma, grid)
    worst = 0.0
    for c in (1.0, -1.0):
        p1 = _density(n, q1, sigma, grid, extra=c, q_extra=q1)
        worst = max(worst, _epsilon(p, p1, step))
    claim = max(claimed(q, sigma), claimed(q1, sigma))
    return dict(n=n, sigma=sigma, rule=rule, batch=b, batch_next=b1, q=q, q_next=q1,
                true_epsilon=worst, claimed_epsilon=claim, ratio=worst / claim)


def main():
    load_start, date = os.getloadavg()[0], time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rows = [one(n, s, r) for r in RULES for s in SIGMAS for n in NS]
    meta = dict(date=date, load_start=load_start, load_end=os.getloadavg()[0],
                delta=DELTA, machine="shared (six agents, 2 cores)", **library_fingerprint())
    lines = table_head(
        "What the public-n convention costs near q = 1 (`benchmarks/bench_public_n.py`)",
        meta, "shared machine; the figures are exact computations, not timings", "One step, "
        f"δ = {DELTA:g}; true ε of the pair (n rows, n + 1 rows) vs the larger ε the two "
        "fits claim.", ["rule", "σ", "n", "batch (n, n+1)", "q", "true ε", "claimed ε",
                        "true / claimed"])
    lines += [f"| {r['rule']} | {r['sigma']:g} | {r['n']} | {r['batch']}, {r['batch_next']} | "
              f"{r['q']:.3f} | {r['true_epsilon']:.3f} | {r['claimed_epsilon']:.3f} | "
              f"{r['ratio']:.2f}× |" for r in rows]
    write_results("public_n", meta, rows, lines)  # public_n.json, public_n.md


if __name__ == "__main__":
    main()

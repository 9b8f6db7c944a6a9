"""Draw docs/figures/architecture.png: the layers of sklearn_fdp (docs/architecture.md).

Run from the project root: ``python docs/figures/make_architecture.py``.
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402

LAYERS = [
    ("consumers", "PrivateRandomizedSearchCV · privacy_report · PrivatePipeline tracer · CLI",
     "read privacy_plan / privacy_plan_ (the planning contract)", "#f2e6ff"),
    ("estimators", "linear/: DPSGD · FeatureDPLogisticRegression · DPSGDF · AdaMix;  "
     "preprocessing/;  neural/: MLPFeatureDP",
     "fit = validate → privacy_plan → run mechanisms → store once", "#e6f0ff"),
    ("mechanisms", "_mechanisms/: gaussian_mean · fdp (Alg. 1) · label_statistic · "
     "dpsgdf (Alg. 2) · adamix (Alg. 3)",
     "released values + the DpEvent spent; own their secret streams", "#e6ffe6"),
    ("engine", "_engine/: Poisson sampler · noise · dense / lazy-sparse loops · EngineConfig",
     "paper-agnostic DP-SGD; refuses noise not scaled to the oracle's clip", "#fff5e0"),
    ("kernels", "_kernels/: numba clip-and-accumulate, norms, gathers (dense, CSR)",
     "numpy twins in tests", "#ffe6e6"),
]
BELOW = ("accounting/ (the only door to dp-accounting) · _budget.py (σ, batch, steps) · "
         "_plan.py (PrivacyPlan)\n_random.py / _secure.py (streams by role) · _validation.py · "
         "_outofcore.py (the only module that asks what X is)")


def main():
    fig, ax = plt.subplots(figsize=(11, 6.4))
    ax.set_xlim(0, 10)
    ax.set_ylim(0, len(LAYERS) + 1.6)
    ax.axis("off")
    for i, (name, what, rule, color) in enumerate(LAYERS):
        y = len(LAYERS) - i + 0.4
        ax.add_patch(FancyBboxPatch((0.2, y), 9.6, 0.8, boxstyle="round,pad=0.02",
                                    facecolor=color, edgecolor="#555555"))
        ax.text(0.35, y + 0.55, name, fontsize=11, fontweight="bold", va="center")
        ax.text(1.9, y + 0.55, what, fontsize=8.5, va="center")
        ax.text(1.9, y + 0.22, rule, fontsize=8.5, va="center", style="italic",
                color="#333333")
        if i < len(LAYERS) - 1:
            ax.annotate("", xy=(5, y - 0.18), xytext=(5, y + 0.02),
                        arrowprops=dict(arrowstyle="->", color="#555555"))
    ax.add_patch(FancyBboxPatch((0.2, 0.1), 9.6, 1.0, boxstyle="round,pad=0.02",
                                facecolor="#eeeeee", edgecolor="#555555"))
    ax.text(0.35, 0.85, "below every layer", fontsize=11, fontweight="bold", va="center")
    ax.text(0.35, 0.42, BELOW, fontsize=8.5, va="center")
    ax.set_title("sklearn_fdp: a layer imports from the layers below it, never above", fontsize=12)
    out = Path(__file__).resolve().parent / "architecture.png"
    fig.savefig(out, dpi=110, bbox_inches="tight")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

"""Main job: private logistic regression on the bundled UCI Adult data.
====================================================================

Trains on adult.data, evaluates on adult.test, prints a privacy/accuracy
table and saves a figure to ``build/adult_demo.png`` under the current
directory (``--figure PATH`` elsewhere, ``--figure ''`` for none; the figure
in the docs is ``--figure docs/figures/adult_demo.png``):

* a non-private scikit-learn LogisticRegression (all features),
* a public-only LogisticRegression that never sees the protected attributes
  (sex, race, marital-status, relationship, capital-gain, capital-loss): it
  spends no privacy on them,
* DPSGDClassifier (DP-SGD: every whole record protected) at a few ε,
* FeatureDPLogisticRegression (feature DP: only the protected attributes are
  protected, the other columns and the label are public) at the same ε,
* and one regression line: FeatureDPLinearRegression predicting
  hours-per-week from the 13 other columns (the protected ones private) at
  ε = 1, its test R² (``benchmarks/bench_regression.py`` has the whole
  comparison).

Every model uses the same data-independent features
(:func:`sklearn_fdp.datasets.make_adult_preprocessor`: fixed category lists,
fixed numeric bounds, every column divided by the same constant so rows have
norm <= 1), so no statistic of the private training data leaks through
preprocessing, and no protected value leaks into a public column (a row-wise
normaliser would divide the public columns by a norm that contains
capital-gain). The private estimators run
with their default hyperparameters: nothing is tuned on the test set.

Run with ``make demo`` (or ``python examples/adult_demo.py``). ``--quick``
fits each private model once at ε = 1 (about ten seconds): the smallest path,
which CI runs against an installed wheel, outside the source tree.
"""

import argparse
import pathlib
import time

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline

from sklearn_fdp import DPSGDClassifier, FeatureDPLinearRegression, FeatureDPLogisticRegression
from sklearn_fdp.datasets import ADULT_PROTECTED, adult_schema, load_adult, make_adult_preprocessor
from sklearn_fdp.pipeline import make_private_pipeline
from sklearn_fdp.preprocessing import make_tabular_preprocessor, row_norm_bounds

DEFAULT_FIGURE = pathlib.Path("build") / "adult_demo.png"


def _preprocessor():
    # Named output columns, so that FeatureDPLogisticRegression can map the
    # original protected column names to their one-hot columns.
    return make_adult_preprocessor().set_output(transform="pandas")


def _private_line(name, make, epsilons, n_seeds, data):
    X_train, y_train, X_test, y_test = data
    rows = []
    for eps in epsilons:
        accs, spent, sigma, seconds = [], [], [], []
        for seed in range(n_seeds):
            clf = make(eps, seed)
            model = make_pipeline(_preprocessor(), clf)
            start = time.perf_counter()
            model.fit(X_train, y_train)
            seconds.append(time.perf_counter() - start)
            accs.append(model.score(X_test, y_test))
            spent.append(clf.epsilon_)
            sigma.append(clf.noise_multiplier_)
        rows.append(dict(model=name, epsilon=eps, spent=max(spent), sigma=float(np.mean(sigma)),
                         mean=float(np.mean(accs)), std=float(np.std(accs)),
                         seconds=float(np.mean(seconds))))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=(__doc__ or "Adult demo.").splitlines()[0])  # no __doc__ in the gallery
    parser.add_argument("--epsilons", default="0.01,0.03,0.1,1",
                        help="comma-separated privacy budgets (default: %(default)s)")
    parser.add_argument("--delta", type=float, default=1e-5)
    parser.add_argument("--seeds", type=int, default=3, help="fits per budget")
    parser.add_argument("--quick", action="store_true",
                        help="one budget (ε = 1) and one seed: the smallest run")
    parser.add_argument("--figure", default=str(DEFAULT_FIGURE),
                        help="where to write the figure, relative to the current directory "
                             "(default: %(default)s; '' for no figure)")
    args = parser.parse_args(argv)
    if args.quick:
        args.epsilons, args.seeds = "1", 1
    epsilons = [float(e) for e in args.epsilons.split(",")]

    data = load_adult(return_X_y=True)
    X_train, y_train, X_test, y_test = data
    protected = list(ADULT_PROTECTED)
    print(f"Adult: {len(y_train)} training rows, {len(y_test)} test rows, "
          f"delta = {args.delta:g}\nprotected attributes: {', '.join(protected)}\n")

    baseline = make_pipeline(_preprocessor(), LogisticRegression(max_iter=1000))
    baseline_acc = baseline.fit(X_train, y_train).score(X_test, y_test)
    public_cols = [c for c in X_train.columns if c not in protected]
    public_only = make_pipeline(
        _preprocessor(), _DropColumns(protected), LogisticRegression(max_iter=1000))
    public_acc = public_only.fit(X_train, y_train).score(X_test, y_test)

    rows = _private_line(
        "DPSGDClassifier (DP)",
        lambda eps, seed: DPSGDClassifier(epsilon=eps, delta=args.delta, random_state=seed),
        epsilons, args.seeds, data)
    rows += _private_line(
        "FeatureDPLogisticRegression",
        lambda eps, seed: FeatureDPLogisticRegression(
            private_features=protected, label_public=True, epsilon=eps, delta=args.delta,
            random_state=seed),
        epsilons, args.seeds, data)

    header = (f"{'model':<30}{'target ε':>9}{'spent ε':>9}{'σ':>8}"
              f"{'test accuracy':>18}{'fit s':>7}")
    print(header)
    print("-" * len(header))
    print(f"{'LogisticRegression (no DP)':<30}{'∞':>9}{'∞':>9}{'-':>8}"
          f"{baseline_acc:>18.4f}{'':>7}")
    print(f"{'public columns only':<30}{'0':>9}{'0':>9}{'-':>8}{public_acc:>18.4f}{'':>7}")
    for r in rows:
        acc = f"{r['mean']:.4f} ± {r['std']:.4f}"
        print(f"{r['model']:<30}{r['epsilon']:>9g}{r['spent']:>9.4f}{r['sigma']:>8.2f}"
              f"{acc:>18}{r['seconds']:>7.2f}")
    print(f"\n(mean ± std over {args.seeds} seeds; ε spent is what dp-accounting gives for the "
          "run, never above the target. DP protects whole records; feature DP protects only "
          "the protected attributes and does not hide membership. Public columns: "
          f"{len(public_cols)} of {X_train.shape[1]} raw columns.)")

    # Regression: hours-per-week from the 13 other columns, the protected ones private.
    schema = adult_schema()
    del schema["numeric"]["hours-per-week"]  # the target is not a feature
    reg = make_private_pipeline(make_tabular_preprocessor(schema), FeatureDPLinearRegression(
        private_features=protected, label_public=True, y_bounds=(1, 99),
        row_norm_bounds=row_norm_bounds(schema), epsilon=1.0, delta=args.delta,
        random_state=0)).fit(X_train, X_train["hours-per-week"])
    print(f"\nFeatureDPLinearRegression, hours-per-week: test R² "
          f"{reg.score(X_test, X_test['hours-per-week']):.3f} at ε = {reg[-1].epsilon_:.2f}")

    _plot(rows, baseline_acc, public_acc, args)


class _DropColumns:
    """Drop the one-hot / scaled outputs of the named raw columns (public-only model)."""

    def __init__(self, names):
        self.names = names

    def fit(self, X, y=None):
        return self

    def transform(self, X):
        keep = [c for c in X.columns
                if not any(c.startswith(f"cat__{n}_") or c == f"num__{n}" for n in self.names)]
        return X[keep]

    def set_output(self, *, transform=None):
        return self


def _plot(rows, baseline_acc, public_acc, args):
    if not args.figure:
        return
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - matplotlib is optional
        print("matplotlib is not installed (the [plot] extra: pip install '.[plot]' "
              "from a clone): no figure written.")
        return
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for name in dict.fromkeys(r["model"] for r in rows):
        line = [r for r in rows if r["model"] == name]
        ax.errorbar([r["epsilon"] for r in line], [r["mean"] for r in line],
                    yerr=[r["std"] for r in line], marker="o", capsize=3, label=name)
    ax.axhline(baseline_acc, color="k", ls="--", lw=1, label="non-private LogisticRegression")
    ax.axhline(public_acc, color="grey", ls=":", lw=1.5, label="public columns only")
    ax.set_xscale("log")
    ax.set_xlabel(f"ε  (δ = {args.delta:g})")
    ax.set_ylabel("test accuracy (adult.test)")
    ax.set_title("UCI Adult: protected attributes under DP and feature DP")
    ax.legend(loc="lower right", fontsize=7)
    fig.tight_layout()
    path = pathlib.Path(args.figure)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    print(f"figure written to {path.resolve()}")


if __name__ == "__main__":
    main()

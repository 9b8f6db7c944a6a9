"""sklearn_fdp.plotting.plot_privacy_utility (Agg backend, no display)."""

import math

import numpy as np
import pandas as pd
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.container import ErrorbarContainer  # noqa: E402

from sklearn_fdp.plotting import plot_privacy_utility  # noqa: E402

from ._helpers import call_without  # noqa: E402

EPS = [0.5, 1.0, 4.0]


@pytest.fixture
def runs():
    """Two methods x three budgets x three seeds, with known means and spreads."""
    out = []
    for method, base in [("DP-SGD", 0.70), ("FDP", 0.78)]:
        for eps in EPS:
            for seed, delta in enumerate([-0.02, 0.0, 0.05]):
                out.append({"method": method, "epsilon": eps, "seed": seed,
                            "accuracy": base + 0.01 * eps + delta})
    return out


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _curves(ax):
    return [c for c in ax.containers if isinstance(c, ErrorbarContainer)]


def _legend(ax):
    return [t.get_text() for t in ax.get_legend().get_texts()]


def _yerr(container):
    """Half-lengths of the vertical error bars of an errorbar container."""
    (bars,) = container.lines[2]
    return np.array([(seg[1, 1] - seg[0, 1]) / 2 for seg in bars.get_segments()])


def test_lines_labels_and_errorbars(runs):
    ax = plot_privacy_utility(runs, baselines={"non-private": 0.85, "public only": 0.6})
    curves = _curves(ax)
    assert [c.get_label() for c in curves] == ["DP-SGD", "FDP"]
    assert _legend(ax) == ["DP-SGD", "FDP", "non-private", "public only"]
    spread = np.array([-0.02, 0.0, 0.05])
    sem = spread.std(ddof=1) / math.sqrt(3)
    for curve, base in zip(curves, [0.70, 0.78]):
        line = curve.lines[0]
        np.testing.assert_allclose(np.asarray(line.get_xdata(), float), EPS)
        expected = [base + 0.01 * e + spread.mean() for e in EPS]
        np.testing.assert_allclose(np.asarray(line.get_ydata(), float), expected)
        np.testing.assert_allclose(_yerr(curve), sem)
    hlines = {ln.get_label(): ln.get_ydata()[0] for ln in ax.get_lines()
              if ln.get_label() in ("non-private", "public only")}
    assert hlines == {"non-private": 0.85, "public only": 0.6}
    assert ax.get_xscale() == "log"
    assert ax.get_xlabel() == "ε" and "s.e.m." in ax.get_ylabel()


@pytest.mark.parametrize("error, expected", [("std", np.std([-0.02, 0.0, 0.05], ddof=1)),
                                             (None, None)])
def test_error_kinds(runs, error, expected):
    ax = plot_privacy_utility(runs, error=error)
    for curve in _curves(ax):
        if expected is None:
            assert not curve.has_yerr
        else:
            np.testing.assert_allclose(_yerr(curve), expected)


def test_dataframe_and_dict_of_columns_match_records(runs):
    df = pd.DataFrame(runs)
    columns = {k: list(df[k]) for k in df.columns}
    def means(results):
        return [np.asarray(c.lines[0].get_ydata(), float)
                for c in _curves(plot_privacy_utility(results))]

    for data in (df, columns):
        np.testing.assert_allclose(means(data), means(runs))


def test_given_axes_order_styles_and_labels(runs):
    fig, ax = plt.subplots()
    out = plot_privacy_utility(runs, ax=ax, order=["FDP"], styles={"FDP": {"color": "red"}},
                               logx=False, xlabel="budget", ylabel="acc", title="t")
    assert out is ax
    (curve,) = _curves(ax)
    assert curve.get_label() == "FDP"
    assert matplotlib.colors.same_color(curve.lines[0].get_color(), "red")
    assert (ax.get_xscale(), ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) == (
        "linear", "budget", "acc", "t")


def test_infinite_budget_runs_and_per_seed_baselines_are_horizontal(runs):
    runs = runs + [{"method": "DP-SGD", "epsilon": math.inf, "seed": s, "accuracy": a}
                   for s, a in enumerate([0.84, 0.86])]
    ax = plot_privacy_utility(runs, baselines={"public only": [0.5, 0.6, 0.7]})
    assert _legend(ax) == ["DP-SGD", "FDP", "DP-SGD (ε = ∞)", "public only"]
    hlines = {ln.get_label(): ln.get_ydata()[0] for ln in ax.get_lines()}
    np.testing.assert_allclose(hlines["DP-SGD (ε = ∞)"], 0.85)
    np.testing.assert_allclose(hlines["public only"], 0.6)
    assert len(ax.patches) == 2  # one ± s.e.m. band per baseline with several values


def test_no_hue_and_single_runs(runs):
    single = [r for r in runs if r["seed"] == 0 and r["method"] == "FDP"]
    ax = plot_privacy_utility(single, hue=None, y="accuracy")
    (curve,) = _curves(ax)
    assert curve.get_label() == "accuracy"
    np.testing.assert_allclose(_yerr(curve), 0.0)  # one run per budget: no spread


def test_legend_off_or_configured(runs):
    assert plot_privacy_utility(runs, legend=False).get_legend() is None
    ax = plot_privacy_utility(runs, legend={"loc": "lower right", "title": "methods"})
    assert ax.get_legend().get_title().get_text() == "methods"
    assert _legend(ax) == ["DP-SGD", "FDP"]


@pytest.mark.parametrize("kwargs, match", [
    (dict(results=[{"method": "a", "epsilon": 1.0}]), "run 0 has no 'accuracy' key"),
    (dict(results=[{"method": "a", "epsilon": "1", "accuracy": 0.5}]),
     "epsilon='1'; `epsilon` must be a number"),
    (dict(results=[{"method": "a", "epsilon": 1.0, "accuracy": float("nan")}]),
     "must be finite"),
    (dict(results=[]), "no run with a finite 'epsilon'"),
    (dict(results=[{"method": "a", "epsilon": math.inf, "accuracy": 0.5}]),
     "no run with a finite"),
    (dict(results=[{"method": "a", "epsilon": 0.0, "accuracy": 0.5}]), "logx=True needs"),
    (dict(error="ci"), "`error` of plot_privacy_utility must be"),
    (dict(order=["nope"]), "`order` of plot_privacy_utility names"),
    (dict(baselines={"b": "high"}), r"`baselines\['b'\]`"),
    (dict(results={"method": ["a"], "epsilon": [1.0, 2.0], "accuracy": [0.5]}),
     "different lengths"),
])
def test_bad_input_raises(runs, kwargs, match):
    kwargs = {"results": runs, **kwargs}
    with pytest.raises(ValueError, match=match):
        plot_privacy_utility(**kwargs)


@pytest.mark.parametrize("results", ["runs.json", 3, [("a", 1.0, 0.5)]])
def test_bad_results_type(results):
    with pytest.raises(TypeError, match="one dict per run|list of dicts"):
        plot_privacy_utility(results)


def test_importable_without_matplotlib():
    out = call_without("matplotlib", "from sklearn_fdp.plotting import plot_privacy_utility",
                       "plot_privacy_utility([{'method': 'a', 'epsilon': 1.0, 'accuracy': 0.5}])")
    assert "ERR" in out and "pip install '.[plot]'" in out and "LOADED False" in out


def test_numpydoc():
    validate = pytest.importorskip("numpydoc.validate").validate
    errors = validate("sklearn_fdp.plotting.plot_privacy_utility")["errors"]
    assert not errors, errors

"""Plots of privacy experiments (matplotlib, an optional extra).

matplotlib is imported inside the functions, so ``import sklearn_fdp.plotting``
works without it; calling a plot function without it raises an
:class:`ImportError` naming the extra to install.
"""

import math
from collections.abc import Mapping
from numbers import Real

import numpy as np

__all__ = ["plot_privacy_utility"]

_MATPLOTLIB_HINT = (
    "sklearn_fdp.plotting needs matplotlib, which is not installed. Install the optional "
    "extra: pip install matplotlib (or, from the sklearn_fdp source tree, "
    "pip install '.[plot]')"
)

_ERRORS = ("sem", "std", None)
_BASELINE_STYLES = ("--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)))


def _import_pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(_MATPLOTLIB_HINT) from exc
    return plt


def _records(results):
    """``results`` as a list of dicts: a DataFrame, a dict of columns or a list of dicts."""
    if hasattr(results, "to_dict") and hasattr(results, "columns"):  # pandas DataFrame
        return results.to_dict("records")
    if isinstance(results, Mapping):
        lengths = {len(v) for v in results.values()}
        if len(lengths) > 1:
            raise ValueError(
                "`results` of plot_privacy_utility is a dict of columns of different "
                f"lengths {sorted(lengths)}; give columns of equal length, a list of "
                "dicts (one per run) or a DataFrame.")
        n = lengths.pop() if lengths else 0
        return [{k: v[i] for k, v in results.items()} for i in range(n)]
    if isinstance(results, (str, bytes)) or not hasattr(results, "__iter__"):
        raise TypeError(
            "`results` of plot_privacy_utility must be a list of dicts (one per run), a "
            f"dict of columns or a DataFrame, got {type(results).__name__}.")
    records = list(results)
    for i, row in enumerate(records):
        if not isinstance(row, Mapping):
            raise TypeError(
                f"`results` of plot_privacy_utility must hold one dict per run; item {i} "
                f"is a {type(row).__name__}: {row!r}.")
    return records


def _number(value, key, i):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (Real, np.number)):
        raise ValueError(
            f"plot_privacy_utility: run {i} has {key}={value!r}; `{key}` must be a number "
            "in every run.")
    return float(value)


def _aggregate(values, error):
    values = np.asarray(values, dtype=float)
    mean = float(values.mean())
    if error is None or len(values) < 2:
        return mean, 0.0
    std = float(values.std(ddof=1))
    return mean, std if error == "std" else std / math.sqrt(len(values))


def plot_privacy_utility(
    results,
    *,
    x="epsilon",
    y="accuracy",
    hue="method",
    ax=None,
    baselines=None,
    logx=True,
    error="sem",
    order=None,
    styles=None,
    xlabel=None,
    ylabel=None,
    title=None,
    legend=True,
):
    """Plot utility against the privacy budget: mean ± error per method.

    Each row of ``results`` is one run (a method, a budget, a seed and its
    score). Runs are grouped by ``hue`` and ``x``; every group is drawn at its
    mean ``y`` with an error bar, one line per ``hue`` value. Runs whose ``x``
    is infinite (e.g. a non-private model at ε = ∞) and the entries of
    ``baselines`` are drawn as horizontal lines.

    Needs the optional extra ``[plot]`` (matplotlib; ``pip install '.[plot]'`` from the
    source tree).

    Parameters
    ----------
    results : list of dict, dict of sequences or pandas.DataFrame
        One entry per run, with (at least) the keys ``x``, ``y`` and ``hue``
        (e.g. ``{"method": "DP-SGD", "epsilon": 1.0, "seed": 0,
        "accuracy": 0.81}``). Other keys (such as ``seed``) are ignored.
    x : str, default="epsilon"
        Key of the privacy budget, plotted on the horizontal axis. Values
        must be numbers; ``inf`` marks a non-private run (drawn as a
        baseline).
    y : str, default="accuracy"
        Key of the score, averaged over the runs of each (``hue``, ``x``).
    hue : str or None, default="method"
        Key naming the method of a run: one line per value. None: all runs
        form one line, labelled ``y``.
    ax : matplotlib.axes.Axes or None, default=None
        Axes to draw on. None: a new figure (``matplotlib.pyplot.subplots``).
    baselines : dict or None, default=None
        Label -> score of a horizontal reference line (e.g.
        ``{"non-private": 0.85, "public features only": 0.76}``). A value may
        also be a sequence of per-seed scores: the line is drawn at their
        mean, with a shaded band of ± ``error``.
    logx : bool, default=True
        Logarithmic ε axis (every finite ``x`` must then be > 0).
    error : {"sem", "std"} or None, default="sem"
        Error bars: standard error of the mean, standard deviation over the
        runs (``ddof=1``), or none. A group of one run has no error bar.
    order : list or None, default=None
        ``hue`` values to draw, in this order. None: the order of first
        appearance in ``results``.
    styles : dict or None, default=None
        ``hue`` value (or baseline label) -> keyword arguments for
        :meth:`~matplotlib.axes.Axes.errorbar` (or
        :meth:`~matplotlib.axes.Axes.axhline`), e.g. ``{"DP-SGD": {"color":
        "C1", "ls": "--"}}``; they override the defaults.
    xlabel : str or None, default=None
        Horizontal axis label. None: ``"ε"`` for ``x="epsilon"``, else ``x``.
    ylabel : str or None, default=None
        Vertical axis label. None: ``y``, with the error kind appended.
    title : str or None, default=None
        Axes title.
    legend : bool or dict, default=True
        Whether to draw a legend; a dict: keyword arguments of
        :meth:`~matplotlib.axes.Axes.legend` (e.g. ``{"loc": "lower right"}``).

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on.

    Raises
    ------
    ImportError
        If matplotlib is not installed.
    ValueError
        If a run lacks ``x``, ``y`` or ``hue``, a value is not a number,
        ``results`` holds no finite-``x`` run, ``error`` is unknown, or
        ``logx`` meets a budget <= 0.

    See Also
    --------
    sklearn_fdp.model_selection.PrivateRandomizedSearchCV : Tune under a budget.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from sklearn_fdp.plotting import plot_privacy_utility
    >>> runs = [{"method": m, "epsilon": e, "seed": s, "accuracy": a + 0.01 * s}
    ...         for m, a in [("DP-SGD", 0.70), ("FDP Alg. 1", 0.78)]
    ...         for e in [0.5, 1.0, 4.0] for s in range(3)]
    >>> ax = plot_privacy_utility(runs, baselines={"non-private": 0.85})
    >>> [text.get_text() for text in ax.get_legend().get_texts()]
    ['DP-SGD', 'FDP Alg. 1', 'non-private']
    """
    if error not in _ERRORS:
        raise ValueError(
            f"`error` of plot_privacy_utility must be 'sem', 'std' or None, got {error!r}.")
    records = _records(results)
    keys = [x, y] + ([hue] if hue is not None else [])
    groups = {}  # hue value -> {x: [y, ...]}
    for i, row in enumerate(records):
        missing = [k for k in keys if k not in row]
        if missing:
            raise ValueError(
                f"plot_privacy_utility: run {i} has no {missing[0]!r} key (keys: "
                f"{sorted(map(str, row))}). Name the right keys with x=, y= and hue=.")
        label = row[hue] if hue is not None else y
        xv, yv = _number(row[x], x, i), _number(row[y], y, i)
        if math.isnan(xv) or not math.isfinite(yv):
            raise ValueError(
                f"plot_privacy_utility: run {i} has {x}={row[x]!r}, {y}={row[y]!r}; "
                f"`{y}` must be finite and `{x}` a number or inf (non-private).")
        groups.setdefault(label, {}).setdefault(xv, []).append(yv)
    labels = list(groups) if order is None else list(order)
    unknown = [lab for lab in labels if lab not in groups]
    if unknown:
        raise ValueError(
            f"`order` of plot_privacy_utility names {unknown!r}, which no run has as "
            f"{hue!r}; known: {list(groups)!r}.")
    finite = [xv for lab in labels for xv in groups[lab] if math.isfinite(xv)]
    if not finite:
        raise ValueError(
            "plot_privacy_utility: `results` has no run with a finite "
            f"{x!r} to plot (got {len(records)} runs).")
    if logx and min(finite) <= 0:
        raise ValueError(
            f"plot_privacy_utility: logx=True needs every {x!r} > 0, got {min(finite)!r}. "
            "Use logx=False.")
    styles = dict(styles or {})

    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise ImportError(_MATPLOTLIB_HINT) from exc
    if ax is None:
        _, ax = _import_pyplot().subplots(figsize=(6.5, 4))

    handles, names = [], []  # legend: curves first, then the horizontal lines
    hlines = []  # (label, mean, err) drawn after the curves
    for label in labels:
        by_x = groups[label]
        xs = sorted(xv for xv in by_x if math.isfinite(xv))
        for xv in by_x:
            if math.isinf(xv):
                hlines.append((f"{label} (ε = ∞)" if x == "epsilon" else f"{label} ({x} = ∞)",
                               *_aggregate(by_x[xv], error)))
        if not xs:
            continue
        stats = [_aggregate(by_x[xv], error) for xv in xs]
        kwargs = dict(marker="o", ms=4, capsize=3, label=str(label))
        kwargs.update(styles.get(label, {}))
        handles.append(ax.errorbar(xs, [m for m, _ in stats],
                                   yerr=[e for _, e in stats] if error is not None else None,
                                   **kwargs))
        names.append(kwargs["label"])
    for name, value in (baselines or {}).items():
        try:
            values = np.atleast_1d(np.asarray(value, dtype=float))
        except (TypeError, ValueError):
            values = np.array([np.nan])
        if values.ndim != 1 or values.size == 0 or not np.all(np.isfinite(values)):
            raise ValueError(
                f"`baselines[{name!r}]` of plot_privacy_utility must be a finite number or "
                f"a non-empty sequence of them, got {value!r}.")
        hlines.append((name, *_aggregate(values, error)))
    for k, (name, mean, err) in enumerate(hlines):
        kwargs = dict(color="0.2" if k == 0 else "0.45", lw=1.2,
                      ls=_BASELINE_STYLES[k % len(_BASELINE_STYLES)], label=str(name))
        kwargs.update(styles.get(name, {}))
        line = ax.axhline(mean, **kwargs)
        handles.append(line)
        names.append(kwargs["label"])
        if err > 0:
            ax.axhspan(mean - err, mean + err, color=line.get_color(), alpha=0.12, lw=0)

    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel if xlabel is not None else ("ε" if x == "epsilon" else x))
    if ylabel is None:
        ylabel = y if error is None else f"{y} (mean ± {'s.e.m.' if error == 'sem' else 'std'})"
    ax.set_ylabel(ylabel)
    if title is not None:
        ax.set_title(title)
    ax.grid(True, alpha=0.3, which="both" if logx else "major")
    if legend:
        kwargs = {"fontsize": "small", **(legend if isinstance(legend, Mapping) else {})}
        ax.legend(handles, names, **kwargs)
    return ax

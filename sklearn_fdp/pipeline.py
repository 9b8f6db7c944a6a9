"""Pipelines whose private last step speaks the original column names.

A :class:`~sklearn.compose.ColumnTransformer` turns ``"sex"`` into the
columns ``cat__sex_Female`` and ``cat__sex_Male``, usually as a numpy array
or a sparse matrix without names. :class:`PrivatePipeline` (and
:func:`make_private_pipeline`) hands the names of its transformers' output to
the last step, so ``FeatureDPLogisticRegression(private_features=["sex",
"race"])`` finds every one-hot column of ``sex`` and ``race``.

It also checks the preprocessing: a step that *learns* from the data
(``StandardScaler`` means, ``OneHotEncoder(categories="auto")`` category
lists, imputers, ...) on a column the last step protects publishes a
statistic of the protected values without noise. Such a step raises a
:class:`~sklearn_fdp.exceptions.PrivacyLeakWarning` naming the step and the
column(s). Learning from public columns only is free under feature DP (the
public part of a record may leak), and so are data-independent steps and
private ones (with a ``dp_event_``, e.g.
:class:`~sklearn_fdp.preprocessing.PrivateMeanCenterer`) — provided they
keep the columns of a row apart. A step that scales every column of a row by
a factor computed from the whole row (its norm) makes the public columns
depend on the protected ones, whatever its fitted state; it declares so with
a method ``__fdp_mixes_rows__()`` returning True (:func:`mixes_rows`), and
feeding both protected and public columns it raises the same warning (and
:func:`sklearn_fdp.privacy_report` reports the pipeline as not private).

:func:`audit_preprocessing` runs the same analysis on any fitted pipeline,
a plain :class:`~sklearn.pipeline.Pipeline` included; :func:`sklearn_fdp.privacy_report`
uses it.
"""

import warnings
from collections import namedtuple

import numpy as np
from sklearn.pipeline import Pipeline, make_pipeline

from ._collapse import COLLAPSE_ADVICE
from .preprocessing._declaration import (
    declared_fit_params,
    domain_collapse,
    public_rows_collapse,
    schema_declaration,
)
from ._steps import is_private_step, learns_from_data, plan_of
from .exceptions import CollapseWarning, PrivacyLeakWarning
from .features import original_column_names

__all__ = ["PrivatePipeline", "make_private_pipeline", "audit_preprocessing",
           "PreprocessingStep", "mixes_rows"]

PreprocessingStep = namedtuple("PreprocessingStep", "name estimator status columns")
PreprocessingStep.__doc__ = """A fitted preprocessing step, as :func:`audit_preprocessing` sees it.

``status`` is one of

* ``"leak"``: learnt from protected columns (or the protected label) without
  privacy;
* ``"mix"``: a step that mixes the columns of a row (:func:`mixes_rows`:
  :class:`~sklearn.preprocessing.Normalizer`,
  :class:`~sklearn_fdp.preprocessing.PrivateMeanCenterer` with row scaling)
  whose public output columns depend on protected ones through the row norm;
  a private step that mixes is ``"mix"``, not ``"private"``. Also a step
  without a column map (its outputs cannot be mapped to the inputs they read:
  no ``get_feature_names_out``, names that are not ``<input>_<suffix>``, no
  ``__fdp_column_map__()``) that feeds public outputs: it may write a
  protected value into a public column, and what the tracer cannot show is
  not certified;
* ``"public"``: learnt from public columns only (free under feature DP);
* ``"free"``: learns nothing from the data;
* ``"private"``: a private step with its own ``dp_event_``.

``columns`` are the input columns of the step that reach protected outputs
(for a leak: the protected columns it learnt from, ``"<label>"`` for the
label).
"""

_LABEL = "<label>"
_OPAQUE = object()

# Steps that cannot declare ``__fdp_mixes_rows__`` (scikit-learn's) but scale
# every column of a row by a factor computed from the whole row (its norm).
_ROW_WISE = {"Normalizer"}

# Transformers that fit on y (a private label leaks through them). sklearn's
# target tag covers TargetEncoder; the selectors do not set it.
_SUPERVISED = {
    "TargetEncoder", "SelectKBest", "SelectPercentile", "SelectFpr", "SelectFdr",
    "SelectFwe", "GenericUnivariateSelect", "SelectFromModel", "RFE", "RFECV",
    "SequentialFeatureSelector", "LinearDiscriminantAnalysis",
    "NeighborhoodComponentsAnalysis", "PLSRegression", "PLSCanonical", "PLSSVD", "CCA",
}


def mixes_rows(est):
    """Whether a step computes an output column of a row from other columns of that row.

    The contract a transformer declares with a method ``__fdp_mixes_rows__()``
    returning a bool (e.g. :class:`~sklearn_fdp.preprocessing.PrivateMeanCenterer`:
    True unless ``row_scaling="none"``, as its row scaling divides every column
    by the row's norm). A step that does not declare it counts as column-wise,
    except the scikit-learn steps known to mix (``Normalizer``). A
    ``FrozenEstimator`` answers for the estimator it wraps.

    Parameters
    ----------
    est : estimator

    Returns
    -------
    bool
    """
    if type(est).__name__ == "FrozenEstimator" and hasattr(est, "estimator"):
        return mixes_rows(est.estimator)
    declared = getattr(est, "__fdp_mixes_rows__", None)
    if callable(declared):
        return bool(declared())
    return type(est).__name__ in _ROW_WISE


def _uses_label(est):
    try:
        if est.__sklearn_tags__().target_tags.required:
            return True
    except AttributeError:
        pass
    return type(est).__name__ in _SUPERVISED


def _learns(est):
    if type(est).__name__ == "FrozenEstimator":  # fitted elsewhere; fit is a no-op
        return False
    try:
        return learns_from_data(est)
    except AttributeError:  # no __sklearn_tags__: assume it learns
        return True


def _names_out(est, in_names):
    """Output column names of a fitted step, or None when it cannot say."""
    try:
        if in_names is None:
            names = est.get_feature_names_out()
        else:
            names = est.get_feature_names_out(np.asarray(in_names, dtype=object))
    except Exception:  # noqa: BLE001 - no names: AttributeError, ValueError, ...
        return None
    return [str(n) for n in names]


def _column_blocks(est, in_names, n_in, out_names):
    """For each output column, the input columns it is computed from.

    Returns a list (one entry per output column) of lists of input indices,
    or None when the step is opaque (every output may depend on every input).
    """
    declared = getattr(est, "__fdp_column_map__", None)
    if callable(declared):  # the step says which inputs each output reads
        return [[int(j) for j in block] for block in declared()]
    if out_names is None or n_in is None:
        return None
    inner = getattr(est, "estimator", None) if type(est).__name__ == "FrozenEstimator" else None
    if inner is not None:
        return _column_blocks(inner, in_names, n_in, out_names)
    if in_names is None:  # an array without names: sklearn's default input names
        in_names = [f"x{i}" for i in range(n_in)]
        if list(out_names) != in_names:
            in_names = None
    if in_names is not None and len(out_names) == n_in and list(out_names) == list(in_names):
        return [[i] for i in range(n_in)]  # one-to-one (scalers, imputers, Normalizer)
    counts = getattr(est, "_n_features_outs", None)  # OneHotEncoder, per input column
    if counts is not None and len(counts) == n_in and sum(counts) == len(out_names):
        return [[j] for j, c in enumerate(counts) for _ in range(c)]
    if in_names is not None:  # "<input>_<suffix>" names, longest input name first
        order = sorted(range(n_in), key=lambda j: -len(in_names[j]))
        blocks = []
        for name in out_names:
            hit = next((j for j in order if name.startswith(f"{in_names[j]}_")), None)
            if hit is None:
                return None
            blocks.append([hit])
        return blocks
    return None


class _Tracer:
    """Walks fitted steps backwards from the protected columns of the last step."""

    def __init__(self, label_private):
        self.label_private = label_private
        self.steps = []

    def record(self, path, est, status, columns):
        self.steps.append(PreprocessingStep(path, est, status, list(columns)))

    def trace(self, est, path, private_out, in_names, n_in):
        """Input columns (indices) of ``est`` that reach a protected output.

        ``private_out`` is a set of output indices, or None for "all of them".
        Returns a set of input indices, or None for "all of them".
        """
        if est is None or isinstance(est, str):
            return set() if est == "drop" else private_out
        if hasattr(est, "steps"):
            return self.chain(list(est.steps), path, private_out, in_names, n_in)
        if hasattr(est, "transformers_") and hasattr(est, "output_indices_"):
            return self._column_transformer(est, path, private_out, in_names, n_in)
        if hasattr(est, "transformer_list"):
            reached = self._feature_union(est, path, private_out, in_names, n_in)
            if reached is not _OPAQUE:
                return reached
        return self._leaf(est, path, private_out, in_names, n_in)

    def _feature_union(self, union, path, private_out, in_names, n_in):
        """Every part sees all inputs; its outputs are one slice of the union's."""
        parts, start = [], 0
        for name, trans in union.transformer_list:
            if isinstance(trans, str) and trans == "drop":
                continue
            if isinstance(trans, str):  # "passthrough"
                size = n_in
            else:
                out = _names_out(trans, in_names)
                size = None if out is None else len(out)
            if size is None:
                return _OPAQUE
            parts.append((name, trans, slice(start, start + size)))
            start += size
        reached = set()
        for name, trans, sl in parts:
            local = (None if private_out is None
                     else {i - sl.start for i in private_out if sl.start <= i < sl.stop})
            sub = self.trace(trans, f"{path}__{name}" if path else name, local, in_names, n_in)
            if sub is None:
                reached = None
            elif reached is not None:
                reached |= sub
        return reached

    def chain(self, chain, path, private_out, in_names, n_in):
        """Trace a list of ``(name, step)`` applied one after the other."""
        names, sizes = [in_names], [n_in]
        for _, step in chain[:-1]:
            if step is None or isinstance(step, str):
                out = names[-1]
                size = sizes[-1]
            else:
                out = _names_out(step, names[-1])
                size = len(out) if out is not None else None
            names.append(out)
            sizes.append(size)
        # Backwards from the protected outputs; records kept in pipeline order.
        start, segments = len(self.steps), []
        for k in range(len(chain) - 1, -1, -1):
            name, step = chain[k]
            before = len(self.steps)
            private_out = self.trace(step, f"{path}__{name}" if path else name,
                                     private_out, names[k], sizes[k])
            segments.append(self.steps[before:])
        self.steps[start:] = [rec for seg in reversed(segments) for rec in seg]
        return private_out

    def _column_transformer(self, ct, path, private_out, in_names, n_in):
        reached = set()
        every_input = False
        to_input = getattr(ct, "_transformer_to_input_indices", {})
        for name, trans, cols in ct.transformers_:
            if isinstance(trans, str) and trans == "drop":
                continue
            idx = to_input.get(name)
            if idx is None:
                idx = _resolve_columns(cols, in_names, n_in)
            idx = list(idx) if idx is not None else None
            sl = ct.output_indices_.get(name, slice(0, 0))
            if private_out is None:
                local = None
            else:
                local = {i - sl.start for i in private_out if sl.start <= i < sl.stop}
            sub_names = ([in_names[i] for i in idx]
                         if in_names is not None and idx is not None else None)
            sub = self.trace(trans, f"{path}__{name}" if path else name, local, sub_names,
                             None if idx is None else len(idx))
            if idx is None:
                # Cannot tell which input columns: all of them (keep tracing the rest).
                every_input = every_input or sub is None or bool(sub)
                continue
            if sub is None:  # an opaque step reads, at most, its own columns
                sub = range(len(idx))
            reached.update(idx[j] for j in sub)
        return None if every_input else reached

    def _leaf(self, est, path, private_out, in_names, n_in):
        if n_in is None:
            n_in = getattr(est, "n_features_in_", None)
        if in_names is None and hasattr(est, "feature_names_in_"):
            in_names = [str(c) for c in est.feature_names_in_]
        out_names = _names_out(est, in_names)
        blocks = _column_blocks(est, in_names, n_in, out_names)
        if private_out is not None and not private_out:
            reached = set()
        elif blocks is None:
            reached = None
        elif private_out is None:
            reached = set(range(n_in))
        else:
            reached = {j for i in private_out if i < len(blocks) for j in blocks[i]}
        n_out = len(out_names) if out_names is not None else n_in
        feeds_public = (private_out is not None and (n_out is None or len(private_out) < n_out))
        if mixes_rows(est) and (reached is None or reached) and feeds_public:
            # Public outputs scaled by a row norm that has protected terms (a
            # private step too: its dp_event_ covers its fitted state, not the
            # row-wise map its transform applies to every record).
            status = "mix"
        elif blocks is None and reached is None and feeds_public and not is_private_step(est):
            # No column map (e.g. FunctionTransformer(lambda X: np.c_[X, X.sum(1)])):
            # any output may read any input, so a public output may carry a
            # protected value. What cannot be shown is not certified.
            status = "mix"
        elif is_private_step(est):
            status = "private"
        elif not _learns(est):
            status = "free"
        else:
            label = self.label_private and _uses_label(est)
            status = "leak" if (reached is None or reached or label) else "public"
        columns = _column_labels(reached, in_names, n_in)
        if status == "leak" and self.label_private and _uses_label(est):
            columns.append(_LABEL)
        self.record(path, est, status, columns)
        return reached


def _resolve_columns(cols, in_names, n_in):
    """Indices of a ColumnTransformer column selection (names, ints or a mask)."""
    if callable(cols):
        return None
    if isinstance(cols, (str, int, np.integer)):
        cols = [cols]
    cols = list(cols)
    if not cols:
        return []
    if all(isinstance(c, (bool, np.bool_)) for c in cols):
        return [i for i, c in enumerate(cols) if c]
    if all(isinstance(c, (int, np.integer)) for c in cols):
        return [int(c) % n_in if n_in else int(c) for c in cols]
    if in_names is not None and all(isinstance(c, str) for c in cols):
        position = {c: i for i, c in enumerate(in_names)}
        if all(c in position for c in cols):
            return [position[c] for c in cols]
    return None


def _column_labels(reached, in_names, n_in):
    if reached is None:
        if in_names is not None:
            return list(in_names)
        return [f"x{i}" for i in range(n_in)] if n_in else ["<all columns>"]
    return [in_names[i] if in_names is not None else f"x{i}" for i in sorted(reached)]


def _final_protection(final):
    """``(protected input positions or None for all, label protected)`` of a fitted last step.

    From its ``privacy_plan_``; a plan that names protected columns without
    their positions counts every input column as protected.
    """
    plan = plan_of(final)
    if plan.protected_features is None or plan.protected_columns is None:
        return None, plan.label_protected
    return set(plan.protected_columns), plan.label_protected


def audit_preprocessing(pipeline):
    """Classify the fitted preprocessing steps of a pipeline with a private last step.

    Traces the columns the last step protects back through the fitted
    steps (nested :class:`~sklearn.pipeline.Pipeline` and
    :class:`~sklearn.compose.ColumnTransformer` included; one-hot expansions
    are followed per input column) and reports, for every leaf step,
    whether it learnt from protected data.

    Parameters
    ----------
    pipeline : fitted Pipeline
        A :class:`~sklearn.pipeline.Pipeline` (or :class:`PrivatePipeline`)
        whose last step is a fitted private estimator (it has ``dp_event_``).

    Returns
    -------
    steps : list of PreprocessingStep
        One ``(name, estimator, status, columns)`` per leaf step, in
        pipeline order; ``status`` is ``"leak"``, ``"mix"``, ``"public"``,
        ``"free"`` or ``"private"`` (see :class:`PreprocessingStep`). Empty
        when the last step is not a fitted private estimator.

    Notes
    -----
    Conservative where it cannot trace: a step whose output columns cannot
    be mapped to its input columns (no ``get_feature_names_out``, names
    that are not ``<input>_<suffix>``, and no ``__fdp_column_map__()``
    declaring, per output column, the input columns it reads) counts as
    feeding every output from every input: a stateless one that feeds public
    outputs is ``"mix"`` (it may write a protected value into a public
    column), and the pipeline is not certified private. Inside a
    ColumnTransformer branch such a step reads only its branch's columns.
    A step is taken to learn from the data unless
    it is private, sklearn tags it stateless, it is a ``FunctionTransformer``
    or a ``FrozenEstimator`` (fitted elsewhere: make sure it was on public
    data), or an ``OneHotEncoder``/``OrdinalEncoder`` with explicit
    categories. A step that fits on ``y`` (``TargetEncoder``, feature
    selectors) leaks a protected label.
    """
    return _trace(pipeline)[0]


def _trace(pipeline):
    """``(audit steps, input columns feeding both protected and public outputs,
    protected input columns or None when untraceable)``."""
    steps = getattr(pipeline, "steps", None)
    if not steps or len(steps) < 2:
        return [], [], None
    final = steps[-1][1]
    if not is_private_step(final):
        return [], [], None
    private_out, label_private = _final_protection(final)
    first = steps[0][1]
    in_names = getattr(first, "feature_names_in_", None)
    in_names = None if in_names is None else [str(c) for c in in_names]
    n_in = getattr(first, "n_features_in_", None)
    # The last entry stands for the private step: identity on its input.
    chain = [*steps[:-1], ("", "passthrough")]
    tracer = _Tracer(label_private)
    private_in = tracer.chain(chain, "", private_out, in_names, n_in)
    split = []
    n_out = getattr(final, "n_features_in_", None)
    if private_out is not None and n_out is not None and private_in is not None:
        public_out = set(range(n_out)) - private_out
        public_in = _Tracer(False).chain(chain, "", public_out, in_names, n_in)
        if public_in is None and public_out:  # untraceable: every input may feed them
            public_in = set(range(n_in)) if n_in is not None else set(private_in)
        if public_in is not None:
            split = _column_labels(private_in & public_in, in_names, n_in)
    protected = None if private_in is None else _column_labels(private_in, in_names, n_in)
    return tracer.steps, split, protected


def _split_message(columns, final_name):
    return (
        f"Input column(s) {columns!r} feed both columns that {final_name} protects and "
        "columns it treats as public: the public ones reveal them. Protect every column "
        "derived from them (give the original column name in private_features, which "
        "selects all its one-hot columns), or feed them to public columns only."
    )


def _opaque_message(step, final_name):
    return (
        f"Step {step.name!r} ({type(step.estimator).__name__}) has no column map: the "
        "tracer cannot tell which inputs each of its outputs reads, so the columns "
        f"{final_name} treats as public may carry the protected column(s) "
        f"{step.columns!r} (e.g. a FunctionTransformer that appends a row sum). The "
        "pipeline is not certified private. Declare the map: "
        "FunctionTransformer(feature_names_out='one-to-one') for a column-wise function, "
        "names '<input>_<suffix>' from get_feature_names_out, or a method "
        "__fdp_column_map__() returning, per output column, the input columns it reads; "
        "or keep the step inside a ColumnTransformer branch of public columns only."
    )


def _leak_message(step, final_name):
    if step.status == "mix" and not mixes_rows(step.estimator):
        return _opaque_message(step, final_name)
    if step.status == "mix":
        per_block = ""
        if is_private_step(step.estimator):
            per_block = (
                "Its dp_event_ covers its fitted state only, not this map of every "
                "row. Centre public and protected columns apart (one private step per "
                "block in a ColumnTransformer), or use row_scaling='none' on rows "
                "bounded upstream by data-independent constants. ")
        return (
            f"Step {step.name!r} ({type(step.estimator).__name__}) divides every column by "
            f"the row's norm, which includes the protected column(s) {step.columns!r}: "
            f"the public columns {final_name} learns from without noise then depend on "
            "protected values (they reveal them), so the public part the feature-DP "
            f"guarantee takes as given is not. {per_block}"
            "Bound the rows with data-independent constants instead (e.g. "
            "fixed-range scaling of every column, then a constant factor), or rely on "
            "max_grad_norm clipping. (Harmless only when the protected columns add the "
            "same amount to every row's norm, e.g. one-hot blocks of a column with no "
            "missing or unknown values.)"
        )
    cols = [c for c in step.columns if c != _LABEL]
    parts = []
    if cols:
        parts.append(f"column(s) {cols!r}")
    if _LABEL in step.columns:
        parts.append("the label")
    what = " and ".join(parts) or "protected columns"
    return (
        f"Step {step.name!r} ({type(step.estimator).__name__}) learnt from {what} that "
        f"{final_name} protects, without differential privacy: its fitted state (means, "
        "category lists, ...) is a noise-free statistic of the protected values, so the "
        "pipeline is not private for them. Use a data-independent transformer (e.g. "
        "OneHotEncoder(categories=[...]) with the public category list, a "
        "FunctionTransformer with fixed bounds), a private one (PrivateMeanCenterer), "
        "or apply this step to public columns only."
    )


class PrivatePipeline(Pipeline):
    """A Pipeline that passes its column names to a private last step and checks leaks.

    Behaves as :class:`sklearn.pipeline.Pipeline` (same parameters,
    routing, caching, ``clone``, ``GridSearchCV``), with two additions in
    ``fit``:

    * after fitting the transformers, the names of their output
      (``self[:-1].get_feature_names_out()``) are passed to the last step's
      ``fit`` as ``feature_names`` when it accepts them (the FDP estimators
      do), so a spec such as ``private_features=["sex", "race"]`` in the
      *original* column names selects the transformed columns, one-hot
      expansions included, even when the transformers output a numpy array
      or a sparse matrix;
    * when the step before the last is the schema preprocessor of
      :func:`~sklearn_fdp.preprocessing.make_tabular_preprocessor`, its
      schema is the one declaration of what is protected: the last step is
      fitted with the schema's protected columns as ``private_features``
      when it gives neither ``public_features`` nor ``private_features``,
      with the schema's row-norm bounds as ``row_norm_bounds`` and its
      target bounds as ``y_bounds`` when those are None (its parameters are
      restored after the fit; ``declarations_`` says where each came from).
      A column the schema protects that the last step treats as public, or
      a ``row_norm_bounds`` below the schema's, raises a ValueError naming
      them;
    * every step that learnt from a column (or the label) that the last step
      protects raises a :class:`~sklearn_fdp.exceptions.PrivacyLeakWarning`
      naming the step and the columns (see :func:`audit_preprocessing`).

    Parameters
    ----------
    steps : list of (str, estimator) tuples
        As in :class:`~sklearn.pipeline.Pipeline`; the last step is the
        private estimator.
    transform_input : list of str, default=None
        As in :class:`~sklearn.pipeline.Pipeline` (needs metadata routing).
    memory : str or object with the joblib.Memory interface, default=None
        As in :class:`~sklearn.pipeline.Pipeline`.
    verbose : bool, default=False
        As in :class:`~sklearn.pipeline.Pipeline`.

    Attributes
    ----------
    named_steps : :class:`~sklearn.utils.Bunch`
        Access the steps by name.
    preprocessing_audit_ : list of PreprocessingStep
        :func:`audit_preprocessing` of the fitted pipeline.
    declarations_ : dict
        Where the last step's declarations came from, when the step before
        it is a schema preprocessor
        (:func:`~sklearn_fdp.preprocessing.make_tabular_preprocessor`):
        ``{parameter: (source, value)}`` for ``private_features``,
        ``row_norm_bounds`` and ``y_bounds`` (those the estimator has),
        ``source`` being ``"schema (make_tabular_preprocessor)"`` or
        ``"estimator"``. Empty without a schema preprocessor.
    protected_input_columns_ : list of str or None
        Input columns (of ``X`` given to ``fit``) that reach a column the
        last step protects; None when the steps cannot be traced.

    See Also
    --------
    make_private_pipeline : Build one without naming the steps.

    Notes
    -----
    Privacy: the pipeline adds no mechanism of its own. Its guarantee is the
    last step's, provided no preprocessing step learnt from protected data
    (the warning says when one did); :func:`sklearn_fdp.privacy_report`
    lists the same findings. The names are computed from the fitted
    transformers, which are public-side or data-independent when the
    pipeline is clean.

    Examples
    --------
    >>> import pandas as pd
    >>> from sklearn.compose import ColumnTransformer
    >>> from sklearn.preprocessing import OneHotEncoder
    >>> from sklearn_fdp import FeatureDPLogisticRegression
    >>> from sklearn_fdp.pipeline import PrivatePipeline
    >>> X = pd.DataFrame({"sex": ["F", "M"] * 50, "hours": [0.2, 0.7] * 50})
    >>> y = [0, 1] * 50
    >>> ct = ColumnTransformer([("cat", OneHotEncoder(categories=[["F", "M"]]), ["sex"])],
    ...                        remainder="passthrough")
    >>> pipe = PrivatePipeline([("prep", ct), ("clf", FeatureDPLogisticRegression(
    ...     private_features=["sex"], epsilon=5.0, delta=1e-3, random_state=0))])
    >>> pipe.fit(X, y)[-1].private_features_.tolist()
    [0, 1]
    """

    def fit(self, X, y=None, **params):
        """Fit the transformers, then the last step with the transformed column names.

        Parameters
        ----------
        X : iterable
            Training data, as for the first step.
        y : iterable, default=None
            Training targets.
        **params : dict of str -> object
            As for :meth:`sklearn.pipeline.Pipeline.fit`.

        Returns
        -------
        self : PrivatePipeline
        """
        self._fit_with_names(super().fit, X, y, **params)
        self._audit()
        return self

    def fit_transform(self, X, y=None, **params):
        """Fit as :meth:`fit`, then transform with the last step.

        Parameters
        ----------
        X : iterable
            Training data.
        y : iterable, default=None
            Training targets.
        **params : dict of str -> object
            As for :meth:`sklearn.pipeline.Pipeline.fit_transform`.

        Returns
        -------
        Xt : ndarray of shape (n_samples, n_transformed_features)
        """
        Xt = self._fit_with_names(super().fit_transform, X, y, **params)
        self._audit()
        return Xt

    def _fit_with_names(self, method, X, y, **params):
        # The original column names tell the last step's name specs a one-hot
        # output ("age_young") from a different column ("age_at_diagnosis").
        try:
            with original_column_names(_input_column_names(X)):
                return self._fit_with_transformed_names(method, X, y, **params)
        except BaseException:
            self.__dict__.pop("_collapse_rows", None)  # no training rows left behind
            raise

    def _fit_with_transformed_names(self, method, X, y, **params):
        final_name, final = self.steps[-1]
        self.declarations_ = {}
        declaration = schema_declaration(self)
        if (len(self.steps) < 2 or final is None or isinstance(final, str)
                or (declaration is None and (not _accepts_feature_names(final)
                                             or f"{final_name}__feature_names" in params))):
            return method(X, y, **params)
        pipeline = self
        with_names = (_accepts_feature_names(final)
                      and f"{final_name}__feature_names" not in params)

        def fit_with_names(Xt, y=None, **kw):
            # The transformers are fitted in place by now (Pipeline._fit).
            pipeline._collapse_rows = Xt  # for the collapse check of _audit, then dropped
            names = pipeline._head_feature_names(Xt)
            if with_names:
                kw = dict(kw, feature_names=names)
            if declaration is None:
                return type(final).fit(final, Xt, y, **kw)
            all_names = ([str(c) for c in Xt.columns] if hasattr(Xt, "columns") else names)
            overrides, pipeline.declarations_ = declared_fit_params(
                final, Xt.shape[1], all_names, declaration)
            # The schema's values hold for this fit only: the estimator's parameters
            # are restored after it (its fitted attributes show what it used).
            saved = {k: getattr(final, k) for k in overrides}
            final.set_params(**overrides)
            try:
                return type(final).fit(final, Xt, y, **kw)
            finally:
                final.set_params(**saved)

        # Shadow the last step's fit for this call only; restored below.
        final.fit = fit_with_names
        try:
            return method(X, y, **params)
        finally:
            del final.fit

    def _head_feature_names(self, Xt):
        if hasattr(Xt, "columns"):
            return None  # a DataFrame carries its own names
        head = self[:-1]
        try:
            names = head.get_feature_names_out()
        except Exception as exc:  # noqa: BLE001
            final = self.steps[-1][1]
            if _spec_needs_names(final):
                raise ValueError(
                    f"{type(self).__name__} could not compute the column names its "
                    f"transformers output ({type(exc).__name__}: {exc}), which "
                    f"{type(final).__name__} needs to resolve its column-name feature "
                    "specs. Give every step a get_feature_names_out (e.g. "
                    "FunctionTransformer(feature_names_out='one-to-one')), or give "
                    "the specs as column indices."
                ) from exc
            return None
        names = [str(n) for n in names]
        return names if len(names) == Xt.shape[1] else None

    def _audit(self):
        rows = self.__dict__.pop("_collapse_rows", None)  # never kept on the fitted pipeline
        self._warn_domain_collapse(rows)
        self.preprocessing_audit_, split, self.protected_input_columns_ = _trace(self)
        final = type(self.steps[-1][1]).__name__
        if split:
            warnings.warn(_split_message(split, final), PrivacyLeakWarning, stacklevel=3)
        for step in self.preprocessing_audit_:
            if step.status in ("leak", "mix"):
                warnings.warn(_leak_message(step, final), PrivacyLeakWarning, stacklevel=3)


    def _warn_domain_collapse(self, rows=None):
        # Released weights and declared bounds (post-processing, free), then the training
        # rows' public columns with the protected ones drawn over their declared domain
        # (columns declared public: never a protected value or the label).
        found, on_rows = domain_collapse(self), False
        if found is None:
            found, on_rows = public_rows_collapse(self, rows), True
        if found is None:
            return
        label, share = found
        final = self.steps[-1][1]
        label = label.item() if hasattr(label, "item") else label
        if on_rows:
            where = (f"{100 * share:.1f} % of the training rows' public parts (their public "
                     "columns, the protected ones drawn over the declared domain; read from "
                     "the columns declared public only)")
        else:
            where = ("every row of" if share == 1.0 else
                     f"{100 * share:.1f} % of rows drawn uniformly from") + (
                " the declared input domain (its released weights over the schema's bounds "
                "and categories)")
        warnings.warn(
            f"{type(final).__name__} predicts the single class {label!r} on {where}: the "
            f"noise likely drowned the signal. {COLLAPSE_ADVICE}",
            CollapseWarning, stacklevel=4)


def _input_column_names(X):
    """Column names of a pipeline's input: a DataFrame's, scikit-learn's x0, x1, ... for an
    array, None when unknown."""
    columns = getattr(X, "columns", None)
    if columns is not None:
        return [str(c) for c in columns]
    shape = getattr(X, "shape", None)
    if shape is not None and len(shape) == 2:
        return [f"x{i}" for i in range(shape[1])]
    return None


def _accepts_feature_names(est):
    import inspect

    try:
        return "feature_names" in inspect.signature(type(est).fit).parameters
    except (TypeError, ValueError):
        return False


def _spec_needs_names(est):
    for param in ("public_features", "private_features"):
        spec = getattr(est, param, None)
        if callable(spec) or isinstance(spec, str):
            return True
        if isinstance(spec, (list, tuple, np.ndarray)) and any(isinstance(e, str) for e in spec):
            return True
    return False


def make_private_pipeline(*steps, memory=None, transform_input=None, verbose=False):
    """Build a :class:`PrivatePipeline` from the given estimators, naming them automatically.

    The counterpart of :func:`sklearn.pipeline.make_pipeline`: the last
    step is fitted with the transformed column names, so its feature specs
    may use the original column names, and preprocessing that learnt from
    protected columns raises a
    :class:`~sklearn_fdp.exceptions.PrivacyLeakWarning`.

    Parameters
    ----------
    *steps : list of estimators
        Transformers, then the private estimator.
    memory : str or object with the joblib.Memory interface, default=None
        As in :func:`~sklearn.pipeline.make_pipeline`.
    transform_input : list of str, default=None
        As in :func:`~sklearn.pipeline.make_pipeline`.
    verbose : bool, default=False
        As in :func:`~sklearn.pipeline.make_pipeline`.

    Returns
    -------
    pipeline : PrivatePipeline

    Examples
    --------
    >>> from sklearn.compose import ColumnTransformer
    >>> from sklearn.preprocessing import OneHotEncoder
    >>> from sklearn_fdp import FeatureDPLogisticRegression
    >>> from sklearn_fdp.pipeline import make_private_pipeline
    >>> pipe = make_private_pipeline(
    ...     ColumnTransformer([("cat", OneHotEncoder(categories=[["F", "M"]]), ["sex"])],
    ...                       remainder="passthrough"),
    ...     FeatureDPLogisticRegression(private_features=["sex"]))
    >>> [name for name, _ in pipe.steps]
    ['columntransformer', 'featuredplogisticregression']
    """
    named = make_pipeline(*steps).steps  # sklearn's automatic step names
    return PrivatePipeline(named, transform_input=transform_input, memory=memory,
                           verbose=verbose)

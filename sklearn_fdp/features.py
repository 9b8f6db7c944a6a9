"""Resolve which input columns are public and which are protected.

Feature DP (FDP paper, Def. 5/6) protects the *private* part of every record
while its public part Ψ(x) may leak. Estimators take the split as either
``public_features`` or ``private_features`` (exactly one of them), given as

* column indices (``int``, negative allowed),
* a boolean mask of length ``n_features``,
* column names (``str``), matched against ``feature_names_in_`` (or the
  names passed to ``fit`` as ``feature_names``, which
  :class:`sklearn_fdp.pipeline.PrivatePipeline` does). A name that is a
  column name selects that column only. Otherwise it also matches the
  columns that scikit-learn's transformers derive from the *original*
  column of that name: a column matches when it, or its part after any
  ``"__"`` (the separator ``ColumnTransformer`` and ``FeatureUnion`` put
  after a step name), is the name, or is ``f"{name}_<category>"`` (a
  one-hot output of that column). So ``"sex"`` selects ``"cat__sex_Male"``
  and ``"cat__sex_Female"``, ``"age"`` selects ``"num__age"`` and
  ``"pub_num__age"``. When the original column names are known (``fit``
  inside :class:`~sklearn_fdp.pipeline.PrivatePipeline`, or
  ``original_names`` given to :func:`resolve_feature_spec`), a one-hot
  output is attributed to the longest original name it starts with, so
  ``"age"`` does not select ``"age_at_diagnosis"`` nor its one-hot outputs
  ``"cat__age_at_diagnosis_early"``. Without them, ``"<name>_*"`` cannot
  be told from a different column whose name starts the same: a public
  name that matches that way raises a
  :class:`~sklearn_fdp.exceptions.PrivacyLeakWarning` listing the columns
  (a private name that over-matches only protects more);
* a callable ``name -> bool`` applied to every column name.

The result is a boolean ``public_mask`` of length ``n_features``.
"""

import contextlib
import contextvars
import warnings
from numbers import Integral

import numpy as np

from .exceptions import PrivacyLeakWarning

__all__ = ["check_label_in_spec", "original_column_names", "resolve_feature_spec",
           "spec_feature_names"]

# The original input column names of the pipeline being fitted, set by
# PrivatePipeline around its last step's fit (original_column_names).
_ORIGINAL_NAMES = contextvars.ContextVar("sklearn_fdp_original_names", default=None)


@contextlib.contextmanager
def original_column_names(names):
    """Resolve column-name specs against these original input column names within the block.

    :class:`sklearn_fdp.pipeline.PrivatePipeline` wraps its last step's
    ``fit`` in it, with the columns of the ``X`` given to the pipeline, so
    that a name's one-hot outputs are told apart from a different column
    whose name starts with it (see the module docstring).

    Parameters
    ----------
    names : sequence of str or None
        The original column names; None: unknown.

    Yields
    ------
    None
    """
    token = _ORIGINAL_NAMES.set(None if names is None else [str(c) for c in names])
    try:
        yield
    finally:
        _ORIGINAL_NAMES.reset(token)


# What to do when a spec names columns but X has none (e.g. the array a
# ColumnTransformer hands the last step of a plain Pipeline).
_NO_NAMES_FIX = (
    "In a Pipeline the last step gets an array without column names: build it "
    "with sklearn_fdp.pipeline.make_private_pipeline (passes the transformed "
    "column names, sparse output included), or call .set_output(transform='pandas') "
    "on the pipeline (dense output only). Otherwise fit on a DataFrame with string "
    "column names, pass feature_names to fit, or give column indices or a boolean mask."
)


def _tails(col):
    parts = col.split("__")
    return ["__".join(parts[k:]) for k in range(len(parts))]


def _name_matches(spec_name, names, originals=None, all_tails=None):
    """``(exact, expanded)``: indices of the columns a (non-exact) name stands for.

    ``exact``: the column, or its part after any ``"__"`` (the separator of
    ColumnTransformer / FeatureUnion step names), is the name. ``expanded``:
    that part is ``f"{name}_<category>"`` (a one-hot output) and, when the
    original column names are known, no longer original name claims it.
    ``all_tails``: ``[_tails(col) for col in names]``, when the caller has it.
    """
    prefix = f"{spec_name}_"
    exact, expanded = [], []
    if all_tails is None:
        all_tails = [_tails(col) for col in names]
    for i, tails in enumerate(all_tails):
        if spec_name in tails:
            exact.append(i)
            continue
        for tail in tails:
            if tail.startswith(prefix) and (
                    originals is None or _owner(tail, originals, spec_name) == spec_name):
                expanded.append(i)
                break
    return exact, expanded


def _owner(tail, originals, spec_name):
    """The longest original column name that ``tail`` is, or is a one-hot output of."""
    owners = [o for o in originals if tail == o or tail.startswith(f"{o}_")]
    return max([spec_name, *owners], key=len)


def _select(spec, param, n_features, feature_names, estimator_name, original_names=None):
    """Boolean mask of the columns that ``spec`` (the value of ``param``) selects."""
    where = f"`{param}` of {estimator_name}"
    names = None if feature_names is None else [str(c) for c in feature_names]

    if callable(spec):
        if names is None:
            raise ValueError(
                f"{where} is a callable, which is applied to column names, but X has "
                f"no feature names. {_NO_NAMES_FIX}"
            )
        selected = np.array([bool(spec(c)) for c in names], dtype=bool)
        return selected

    if isinstance(spec, (str, Integral)):
        spec = [spec]
    try:
        entries = list(spec)
    except TypeError:
        raise ValueError(
            f"{where} must be column indices, a boolean mask, column names or a "
            f"callable; got {spec!r}."
        ) from None

    selected = np.zeros(n_features, dtype=bool)
    if not entries:
        return selected

    if all(isinstance(e, (bool, np.bool_)) for e in entries):
        if len(entries) != n_features:
            raise ValueError(
                f"{where} is a boolean mask of length {len(entries)} but X has "
                f"{n_features} columns. Give one entry per column."
            )
        return np.asarray(entries, dtype=bool)

    if all(isinstance(e, Integral) and not isinstance(e, (bool, np.bool_)) for e in entries):
        bad = [int(e) for e in entries if not -n_features <= int(e) < n_features]
        if bad:
            raise ValueError(
                f"{where} has column indices {bad!r} out of range for X with "
                f"{n_features} columns. Use indices in [-{n_features}, {n_features})."
            )
        selected[[int(e) for e in entries]] = True
        return selected

    if all(isinstance(e, str) for e in entries):
        if names is None:
            raise ValueError(
                f"{where} names columns ({entries!r}) but X has no feature names. "
                f"{_NO_NAMES_FIX}"
            )
        position = {c: i for i, c in enumerate(names)}
        originals = original_names
        if originals is None:
            originals = _ORIGINAL_NAMES.get()
        unknown, by_prefix, all_tails = [], {}, None
        for e in entries:
            if e in position:
                selected[position[e]] = True
                continue
            if all_tails is None:  # once per spec, not once per name in it
                all_tails = [_tails(col) for col in names]
            exact, expanded = _name_matches(e, names, originals, all_tails)
            if exact or expanded:
                selected[exact + expanded] = True
                if expanded and originals is None:
                    by_prefix[e] = [names[i] for i in expanded]
            else:
                unknown.append(e)
        if unknown:
            shown = names if len(names) <= 20 else names[:20] + ["..."]
            raise ValueError(
                f"{where} names unknown columns {unknown!r}. X's columns are "
                f"{shown!r}; a name also matches the transformer outputs "
                "'<name>_*', '<step>__<name>' and '<step>__<name>_*'. "
                "Fix the names or give column indices."
            )
        if by_prefix and param == "public_features":
            warnings.warn(
                f"{where} matched {by_prefix!r} by prefix ('<name>_*', the one-hot "
                "outputs of a column <name>) without the original column names, which "
                "tell a one-hot output from a different column whose name starts the "
                "same (e.g. 'age' and 'age_at_diagnosis'): check that every one of them "
                "may be public (public_mask_ lists the result). Fit inside "
                "sklearn_fdp.pipeline.make_private_pipeline (it knows the original "
                "names and matches exactly), or give the exact column names.",
                PrivacyLeakWarning,
                stacklevel=4,
            )
        return selected

    raise ValueError(
        f"{where} mixes entry types ({sorted({type(e).__name__ for e in entries})}); "
        "give only column indices, only column names, or a boolean mask."
    )


def resolve_feature_spec(public_features, private_features, n_features, feature_names,
                         estimator_name, *, label_public=True, original_names=None):
    """Boolean mask of the public columns from a public or private feature spec.

    Parameters
    ----------
    public_features, private_features : spec or None
        Exactly one must be given (the other None). A spec is column indices,
        a boolean mask, column names, or a callable ``name -> bool``; see the
        module docstring for how names match encoder outputs.
    n_features : int
        Number of columns of X.
    feature_names : array-like of str or None
        ``feature_names_in_`` of the estimator, or None when X has none.
    estimator_name : str
        Used in error messages.
    label_public : bool, default=True
        Whether the label is public too. With a public label, a spec that
        leaves no column private protects nothing and is rejected.
    original_names : sequence of str or None, default=None
        Column names of the data before any transformer, to tell a name's
        one-hot outputs from a different column that starts with the name.
        None: those set by :func:`original_column_names` (inside
        :class:`~sklearn_fdp.pipeline.PrivatePipeline`), else unknown.

    Returns
    -------
    public_mask : ndarray of bool of shape (n_features,)

    Raises
    ------
    ValueError
        Both or neither spec given, unknown names, indices out of range,
        names without feature names, or nothing left to protect.
    """
    if (public_features is None) == (private_features is None):
        given = "both are" if public_features is not None else "neither is"
        raise ValueError(
            f"{estimator_name} needs exactly one of `public_features` and "
            f"`private_features`; {given} given. Declare the columns that may leak "
            "(public_features=...) or the ones to protect (private_features=...)."
        )
    if public_features is not None:
        public_mask = _select(public_features, "public_features", n_features,
                              feature_names, estimator_name, original_names)
    else:
        public_mask = ~_select(private_features, "private_features", n_features,
                               feature_names, estimator_name, original_names)
    if public_mask.all() and label_public:
        raise ValueError(
            f"{estimator_name}: every one of the {n_features} features is public and "
            "the label is public too (label_public=True), so nothing is protected. "
            "Use a non-private model (e.g. sklearn.linear_model.LogisticRegression), "
            "or declare some private features, or set label_public=False (label DP)."
        )
    return public_mask


def spec_feature_names(estimator, n_features, feature_names):
    """Column names to resolve a feature spec with: X's own, or those passed to ``fit``.

    ``feature_names`` is the ``fit`` parameter of the FDP estimators, which
    :class:`sklearn_fdp.pipeline.PrivatePipeline` fills with the names of its
    transformers' output when they hand the last step an array without
    names (e.g. a sparse one-hot matrix). They only serve to resolve
    ``public_features``/``private_features``; they do not become
    ``feature_names_in_``, so ``predict`` on an array does not warn.

    Parameters
    ----------
    estimator : estimator
        Validated on ``X`` already (``feature_names_in_`` set when X had names).
    n_features : int
        Number of columns of X.
    feature_names : sequence of str or None
        The ``fit`` parameter.

    Returns
    -------
    names : ndarray of object or None
        ``feature_names_in_`` if X had names, else ``feature_names``, else None.

    Raises
    ------
    ValueError
        ``feature_names`` not a sequence of ``n_features`` strings, or
        different from X's own column names.
    """
    names_in = getattr(estimator, "feature_names_in_", None)
    if feature_names is None:
        return names_in
    est = type(estimator).__name__
    if isinstance(feature_names, str) or not hasattr(feature_names, "__len__"):
        raise ValueError(
            f"`feature_names` passed to {est}.fit must be a sequence of {n_features} "
            f"column names, got {feature_names!r}."
        )
    names = list(feature_names)
    if len(names) != n_features or not all(isinstance(c, str) for c in names):
        raise ValueError(
            f"`feature_names` passed to {est}.fit must be {n_features} strings, one per "
            f"column of X; got {len(names)} entries of types "
            f"{sorted({type(c).__name__ for c in names})}."
        )
    if names_in is not None and [str(c) for c in names_in] != names:
        raise ValueError(
            f"`feature_names` passed to {est}.fit differ from X's own column names "
            f"({list(names_in)[:5]!r}...). Leave feature_names=None when X is a DataFrame."
        )
    return np.asarray(names, dtype=object)


def check_label_in_spec(estimator, X, y):
    """Reject a feature spec of ``estimator`` that names the label (``y.name``).

    The label is not a column of ``X``; whether it is public is set by
    ``label_public``. If ``X`` also has a column of that name and it is
    declared public while the label is private, warn: the protected label
    would leak through the public column.
    """
    label = getattr(y, "name", None)
    if label is None:
        return
    label = str(label)
    columns = getattr(X, "columns", None)
    columns = [] if columns is None else [str(c) for c in columns]
    name = type(estimator).__name__
    for param in ("public_features", "private_features"):
        spec = getattr(estimator, param)
        if isinstance(spec, str):
            entries = [spec]
        elif isinstance(spec, (list, tuple, np.ndarray)):
            entries = [e for e in spec if isinstance(e, str)]
        else:
            entries = []
        if label not in entries:
            continue
        if label not in columns:
            status = ("make it public with label_public=True"
                      if param == "public_features"
                      else "it is protected already with label_public=False")
            raise ValueError(
                f"`{param}` of {name} names {label!r}, which is the label (the "
                f"name of y), not a column of X. Drop {label!r} from {param}: the "
                f"label's status is set by `label_public` (now {estimator.label_public!r}); "
                f"{status}."
            )
        if param == "public_features" and not estimator.label_public:
            warnings.warn(
                f"X of {name} has a column {label!r} named like the label y, and "
                "public_features declares it public while the label is protected "
                "(label_public=False): the label would leak through that column. "
                f"Drop the column from X or from public_features.",
                PrivacyLeakWarning,
                stacklevel=5,
            )

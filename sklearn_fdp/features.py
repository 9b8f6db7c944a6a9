"""Resolve which input columns are public and which are protected.

Feature DP (FDP paper, Def. 5/6) protects the *private* part of every record
while its public part Ψ(x) may leak. Estimators take the split as either
``public_features`` or ``private_features`` (exactly one of them), given as

* column indices (``int``, negative allowed),
* a boolean mask of length ``n_features``,
* column names (``str``), matched against ``feature_names_in_``. A name that
  is not itself a column name also matches the columns that scikit-learn's
  encoders derive from it: every output column starting with ``f"{name}_"``
  (``OneHotEncoder``) or ``f"cat__{name}_"`` (a ``ColumnTransformer`` step
  named ``"cat"``), and the columns ``f"num__{name}"`` and
  ``f"remainder__{name}"``. So ``"sex"`` selects ``"cat__sex_Male"`` and
  ``"cat__sex_Female"``. Prefix matching is loose: check the resolved
  columns (the estimator stores them in ``public_features_`` and
  ``private_features_``);
* a callable ``name -> bool`` applied to every column name.

The result is a boolean ``public_mask`` of length ``n_features``.
"""

from numbers import Integral

import numpy as np

__all__ = ["resolve_feature_spec"]


def _name_matches(spec_name, names):
    """Indices of the columns a (non-exact) name stands for."""
    prefixes = (f"{spec_name}_", f"cat__{spec_name}_")
    exact = {f"num__{spec_name}", f"remainder__{spec_name}"}
    return [
        i for i, col in enumerate(names)
        if col.startswith(prefixes) or col in exact
    ]


def _select(spec, param, n_features, feature_names, estimator_name):
    """Boolean mask of the columns that ``spec`` (the value of ``param``) selects."""
    where = f"`{param}` of {estimator_name}"
    names = None if feature_names is None else [str(c) for c in feature_names]

    if callable(spec):
        if names is None:
            raise ValueError(
                f"{where} is a callable, which is applied to column names, but X has "
                "no feature names. Fit on a DataFrame with string column names, or "
                "give column indices or a boolean mask."
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
                "Fit on a DataFrame with string column names, or give column "
                "indices or a boolean mask."
            )
        position = {c: i for i, c in enumerate(names)}
        unknown = []
        for e in entries:
            if e in position:
                selected[position[e]] = True
                continue
            hits = _name_matches(e, names)
            if hits:
                selected[hits] = True
            else:
                unknown.append(e)
        if unknown:
            shown = names if len(names) <= 20 else names[:20] + ["..."]
            raise ValueError(
                f"{where} names unknown columns {unknown!r}. X's columns are "
                f"{shown!r}; a name also matches the encoder outputs "
                "'<name>_*', 'cat__<name>_*', 'num__<name>' and 'remainder__<name>'. "
                "Fix the names or give column indices."
            )
        return selected

    raise ValueError(
        f"{where} mixes entry types ({sorted({type(e).__name__ for e in entries})}); "
        "give only column indices, only column names, or a boolean mask."
    )


def resolve_feature_spec(public_features, private_features, n_features, feature_names,
                         estimator_name, *, label_public=True):
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
                              feature_names, estimator_name)
    else:
        public_mask = ~_select(private_features, "private_features", n_features,
                               feature_names, estimator_name)
    if public_mask.all() and label_public:
        raise ValueError(
            f"{estimator_name}: every one of the {n_features} features is public and "
            "the label is public too (label_public=True), so nothing is protected. "
            "Use a non-private model (e.g. sklearn.linear_model.LogisticRegression), "
            "or declare some private features, or set label_public=False (label DP)."
        )
    return public_mask

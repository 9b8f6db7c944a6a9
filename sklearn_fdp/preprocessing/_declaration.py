"""One declaration of what is protected: the schema preprocessor hands it to the estimator.

:func:`~sklearn_fdp.preprocessing.make_tabular_preprocessor` returns a
:class:`TabularPreprocessor`: a scikit-learn Pipeline that also carries its
schema's *declaration* (the protected columns, the row-norm bounds of its
output per block, the target's bounds when the schema declares them). Inside
:class:`~sklearn_fdp.pipeline.PrivatePipeline`, when it is the step just before
the private estimator, :func:`declared_fit_params` turns the declaration into
the estimator's parameters for that fit:

* ``private_features``: the schema's protected columns, when the estimator
  gives neither ``public_features`` nor ``private_features``; when it gives
  one, every output of a column the schema protects must be private there,
  else a ValueError names the columns;
* ``row_norm_bounds``: the schema's bounds, when the estimator's is None;
  a declared bound below the schema's raises (it would clip rows the schema
  allows, and say less than the schema knows);
* ``y_bounds``: the schema's target bounds, when the estimator's is None.

Nothing here reads the data: column names and the schema are public.
"""

import math

import numpy as np

from sklearn.pipeline import Pipeline

__all__ = ["TabularPreprocessor", "declared_fit_params"]

_SCHEMA = "schema (make_tabular_preprocessor)"


class TabularPreprocessor(Pipeline):
    """The Pipeline of :func:`~sklearn_fdp.preprocessing.make_tabular_preprocessor`.

    A :class:`~sklearn.pipeline.Pipeline` (same steps, ``fit``,
    ``transform``, ``get_feature_names_out``, ``set_output``, ``clone``)
    that keeps its schema's declaration, so that
    :func:`~sklearn_fdp.pipeline.make_private_pipeline` can hand it to the
    private estimator after it.

    Parameters
    ----------
    steps : list of (str, transformer)
        As in :class:`~sklearn.pipeline.Pipeline`.
    declaration : dict or None, default=None
        ``{"protected": [column, ...], "row_norm_bounds": (row, public,
        protected) or None, "target_bounds": (low, high) or None}``.
    transform_input, memory, verbose
        As in :class:`~sklearn.pipeline.Pipeline`.
    """

    def __init__(self, steps, *, declaration=None, transform_input=None, memory=None,
                 verbose=False):
        self.declaration = declaration
        super().__init__(steps, transform_input=transform_input, memory=memory,
                         verbose=verbose)


def schema_declaration(pipeline):
    """The declaration of the step before ``pipeline``'s last one, or None."""
    steps = getattr(pipeline, "steps", None)
    if not steps or len(steps) < 2:
        return None
    head = steps[-2][1]
    if isinstance(head, TabularPreprocessor) and head.declaration is not None:
        return head.declaration
    return None


def _outputs_of(columns, n_features, names, est_name):
    """Public mask of ``private_features=columns`` resolved on ``names`` (label private: a
    mask with nothing private is allowed)."""
    from ..features import resolve_feature_spec

    return resolve_feature_spec(None, list(columns), n_features, names, est_name,
                                label_public=False)


def declared_fit_params(final, n_features, names, declaration):
    """``(parameters to set on ``final`` for its fit, sources)`` from a schema declaration.

    ``sources`` maps each declared parameter (``private_features``,
    ``row_norm_bounds``, ``y_bounds``) the estimator has to where its value
    came from: the schema, the estimator, or its default. Raises a
    ValueError when the estimator treats a protected column as public, or
    declares a row-norm bound below the schema's.
    """
    from ..features import resolve_feature_spec

    params = final.get_params(deep=False)
    est_name = type(final).__name__
    protected = list(declaration.get("protected") or [])
    overrides, sources = {}, {}
    schema_public = None
    if "private_features" in params and "public_features" in params:
        public, private = params["public_features"], params["private_features"]
        if public is None and private is None:
            overrides["private_features"] = protected
            sources["private_features"] = (_SCHEMA, protected)
        else:
            if names is None:
                raise ValueError(
                    f"{est_name}: the schema's protected columns {protected!r} cannot be "
                    "matched to its input columns (their names are unknown). Give every "
                    "step a get_feature_names_out, or leave public_features and "
                    "private_features unset (the schema's declaration is then used).")
            est_public = resolve_feature_spec(public, private, n_features, names, est_name,
                                              label_public=False)
            if protected:
                schema_public = _outputs_of(protected, n_features, names, est_name)
                leaked = [c for c in protected
                          if (est_public & ~_outputs_of([c], n_features, names,
                                                        est_name)).any()]
                if leaked:
                    spec = ("public_features" if public is not None else "private_features")
                    raise ValueError(
                        f"{est_name} treats the column(s) {leaked!r} as public "
                        f"({spec}={public if public is not None else private!r}), but the "
                        f"schema protects them ('protected': {protected!r}). The schema is "
                        "the one declaration of what is protected: leave public_features "
                        "and private_features unset (the schema's list is then used), or "
                        "protect those columns too.")
            sources["private_features"] = ("estimator", public if public is not None
                                           else private)
        if schema_public is None and protected and names is not None:
            schema_public = _outputs_of(protected, n_features, names, est_name)
    bounds = declaration.get("row_norm_bounds")
    if "row_norm_bounds" in params and bounds is not None:
        row, pub, prot = (float(b) for b in bounds)
        given = params["row_norm_bounds"]
        if given is None:
            # The estimator may protect more than the schema: its protected block then
            # holds schema-public columns too, bounded by the whole row's bound.
            same = "private_features" in overrides or _same_split(
                final, params, n_features, names, schema_public, est_name)
            value = (pub, prot if same else row)
            overrides["row_norm_bounds"] = value
            sources["row_norm_bounds"] = (_SCHEMA, value)
        else:
            _check_bounds_not_below(given, (pub, prot), protected, est_name)
            sources["row_norm_bounds"] = ("estimator", given)
    target = declaration.get("target_bounds")
    if "y_bounds" in params:
        if params["y_bounds"] is None and target is not None:
            overrides["y_bounds"] = tuple(target)
            sources["y_bounds"] = (_SCHEMA, tuple(target))
        elif params["y_bounds"] is not None:
            sources["y_bounds"] = ("estimator", params["y_bounds"])
    return overrides, sources


def _same_split(final, params, n_features, names, schema_public, est_name):
    """Whether the estimator's public columns are exactly the schema's."""
    from ..features import resolve_feature_spec

    if names is None or schema_public is None:
        return False
    est_public = resolve_feature_spec(params["public_features"], params["private_features"],
                                      n_features, names, est_name, label_public=False)
    return bool((est_public == schema_public).all())


def _check_bounds_not_below(given, schema_bounds, protected, est_name):
    if hasattr(given, "public") and hasattr(given, "protected"):
        pair = (given.public, given.protected)
    elif isinstance(given, (int, float)) and not isinstance(given, bool):
        pair = (given, given)
    else:
        try:
            pair = tuple(given)
        except TypeError:
            return  # the estimator's own check names the problem
        if len(pair) != 2:
            return
    for what, mine, theirs in (("public", pair[0], schema_bounds[0]),
                               ("protected", pair[1], schema_bounds[1])):
        try:
            mine = float(mine)
        except (TypeError, ValueError):
            return
        # A relative slack of 1e-9 for bounds written out in decimal.
        if math.isfinite(theirs) and mine < theirs * (1 - 1e-9):
            cols = (f"the protected columns {protected!r}" if what == "protected"
                    else "the public columns")
            raise ValueError(
                f"{est_name}: row_norm_bounds gives the {what} block ({cols}) the bound "
                f"{mine!r}, below the schema's {theirs!r} (row_norm_bounds(schema)): rows "
                "the schema allows would be clipped. Leave row_norm_bounds unset (the "
                "schema's bounds are then used) or declare at least the schema's.")


# -- one class over the declared input domain (post-processing of released weights) ----------


def _domain_groups(pre):
    """The declared output domain of a fitted schema preprocessor, as independent groups.

    A list of ``(kind, indices)``: ``"box"`` (each column on its own in
    ``[0, f]``) or ``"onehot"`` (at most one column at ``f``, the rest 0), with
    ``f`` the constant row factor; every row the preprocessor can output lies
    in their product. None when the domain is not such a product (a
    ``Normalizer`` or passthrough columns) or cannot be read.
    """
    steps = dict(pre.steps)
    columns, scale = steps.get("columns"), steps.get("scale")
    if scale == "passthrough" or scale is None:
        factor = 1.0
    else:
        kw = getattr(scale, "kw_args", None) or {}
        if "factor" not in kw:
            return None, None  # Normalizer: rows mixed, not a product domain
        factor = float(kw["factor"])
    groups = []
    for name, trans, _ in getattr(columns, "transformers_", ()):
        if isinstance(trans, str) and trans == "drop":
            continue
        sl = columns.output_indices_.get(name, slice(0, 0))
        if sl.stop <= sl.start:
            continue
        if isinstance(trans, str):  # passthrough: no declared bound
            return None, None
        onehot = dict(getattr(trans, "steps", ())).get("onehot")
        if onehot is not None:
            start = sl.start
            for cats in onehot.categories_:
                groups.append(("onehot", list(range(start, start + len(cats)))))
                start += len(cats)
        else:
            groups.append(("box", list(range(sl.start, sl.stop))))
    return groups, factor


def _score_range(w, b, groups, factor):
    """``(min, max)`` of ``w·x + b`` over the product domain."""
    low = high = float(b)
    for kind, idx in groups:
        v = factor * np.asarray(w, dtype=float)[idx]
        if kind == "box":
            low += float(np.minimum(v, 0).sum())
            high += float(np.maximum(v, 0).sum())
        else:  # one category or none (an unknown value: all zeros)
            low += min(0.0, float(v.min()))
            high += max(0.0, float(v.max()))
    return low, high


def single_class_over_domain(pipeline):
    """The class a fitted linear classifier predicts on every row of the declared domain.

    Reads the released ``coef_`` and ``intercept_`` of the last step and the
    fitted schema preprocessor before it (its declared bounds and category
    lists): post-processing, no privacy cost. Returns the class, or None when
    the model predicts two classes somewhere in the domain or the check does
    not apply (no schema preprocessor, no linear classifier, a domain that is
    not a product of the declared columns).
    """
    steps = getattr(pipeline, "steps", None)
    if not steps or len(steps) < 2 or not isinstance(steps[-2][1], TabularPreprocessor):
        return None
    final = steps[-1][1]
    coef, intercept = getattr(final, "coef_", None), getattr(final, "intercept_", None)
    classes = getattr(final, "classes_", None)
    if coef is None or intercept is None or classes is None or len(classes) < 2:
        return None
    groups, factor = _domain_groups(steps[-2][1])
    if groups is None:
        return None
    coef = np.atleast_2d(np.asarray(coef, dtype=float))
    intercept = np.atleast_1d(np.asarray(intercept, dtype=float))
    if not (np.all(np.isfinite(coef)) and np.all(np.isfinite(intercept))):
        return None
    if coef.shape[0] == 1:  # binary: the sign of one score
        low, high = _score_range(coef[0], intercept[0], groups, factor)
        if high < 0:
            return classes[0]
        if low > 0:
            return classes[1]
        return None
    for k in range(coef.shape[0]):  # class k wins everywhere: every margin k - j > 0
        if all(_score_range(coef[k] - coef[j], intercept[k] - intercept[j], groups,
                            factor)[0] > 0 for j in range(coef.shape[0]) if j != k):
            return classes[k]
    return None


# Share of the declared domain (uniform over the declared ranges and categories)
# on which one class must be predicted for the collapse warning. Chosen on the
# development sets of issue 32 (student_performance, heart_disease, heart_failure,
# communities_crime; DPSGDClassifier and FeatureDPLogisticRegression with a public
# and a private label, eps 0.03 / 0.3 / 3, 3 seeds: 108 fits): of the 19 fits that
# predicted one class on their test rows, 17 gave one class on >= 0.985 of the
# domain (2 on 0.87-0.88); of the 89 that did not, 4 reached 0.98-0.997 (they
# predict the minority class on a few test rows only). A warning there is a fair
# heads-up; a lower threshold would warn on fits that work.
DOMAIN_SHARE = 0.98
_DOMAIN_DRAWS = 4096


def _domain_sample(groups, factor, n_features, n_draws=_DOMAIN_DRAWS):
    """Rows drawn uniformly from the product domain (a fixed seed: data-independent)."""
    rng = np.random.default_rng(0)
    Z = np.zeros((n_draws, n_features))
    for kind, idx in groups:
        idx = np.asarray(idx)
        if kind == "box":
            Z[:, idx] = rng.uniform(0.0, factor, (n_draws, idx.size))
        else:
            Z[np.arange(n_draws), idx[rng.integers(0, idx.size, n_draws)]] = factor
    return Z


def domain_collapse(pipeline):
    """``(class, share)`` when a fitted linear classifier predicts one class on (nearly) all
    of the declared input domain, else None.

    ``share`` is 1.0 when the class wins on every row of the domain (exact:
    the score's range over the product of the declared columns), else the
    share of ``_DOMAIN_DRAWS`` rows drawn uniformly from the domain (a fixed
    seed) on which it wins, reported when at least :data:`DOMAIN_SHARE`.
    Released weights and declared bounds only: post-processing, free.
    """
    label = single_class_over_domain(pipeline)
    if label is not None:
        return label, 1.0
    steps = getattr(pipeline, "steps", None)
    if not steps or len(steps) < 2 or not isinstance(steps[-2][1], TabularPreprocessor):
        return None
    final = steps[-1][1]
    coef, classes = getattr(final, "coef_", None), getattr(final, "classes_", None)
    if coef is None or classes is None or len(classes) < 2 or not hasattr(final, "predict"):
        return None
    groups, factor = _domain_groups(steps[-2][1])
    if groups is None:
        return None
    coef = np.atleast_2d(np.asarray(coef, dtype=float))
    if not np.all(np.isfinite(coef)):
        return None
    pred = final.predict(_domain_sample(groups, factor, coef.shape[1]))
    values, counts = np.unique(pred, return_counts=True)
    share = float(counts.max() / pred.size)
    if share >= DOMAIN_SHARE:
        return values[int(np.argmax(counts))], share
    return None


# Training rows the public-rows check predicts on at most (a subsample chosen by a
# fixed seed: data-independent).
_PUBLIC_ROWS = 4096


def public_rows_collapse(pipeline, Xt):
    """``(class, share)`` when a fitted linear classifier predicts one class on at least
    :data:`DOMAIN_SHARE` of the training rows' public parts, else None.

    ``Xt``: the rows the last step was trained on (the schema preprocessor's
    output). Each row keeps its public columns and gets its protected ones
    drawn uniformly from their declared domain (a fixed seed), so the check
    reads the released weights, the declared domain and the columns declared
    public only: never a protected value or the label (issue 32: the uniform
    domain of :func:`domain_collapse` misses a model that predicts one class
    where the data lie, the public columns show where they lie). The public
    columns are the estimator's ``public_mask_`` (feature DP: public by
    declaration, free). An estimator without one (``DPSGDClassifier``:
    whole-record DP) has no public column: every column of a training row is
    inside its guarantee, so a warning computed from them would print a bit of
    private data that no accountant saw. It gets the domain check only.
    """
    steps = getattr(pipeline, "steps", None)
    if Xt is None or not steps or len(steps) < 2 \
            or not isinstance(steps[-2][1], TabularPreprocessor):
        return None
    pre, final = steps[-2][1], steps[-1][1]
    coef, classes = getattr(final, "coef_", None), getattr(final, "classes_", None)
    if coef is None or classes is None or len(classes) < 2 or not hasattr(final, "predict"):
        return None
    groups, factor = _domain_groups(pre)
    if groups is None:
        return None
    n_rows, n_features = Xt.shape
    public = getattr(final, "public_mask_", None)
    if public is None:  # whole-record DP: no column is public
        return None
    public = np.asarray(public, dtype=bool)
    if public.shape != (n_features,) or not public.any():
        return None
    take = np.arange(n_rows)
    if n_rows > _PUBLIC_ROWS:
        take = np.sort(np.random.default_rng(1).choice(n_rows, _PUBLIC_ROWS, replace=False))
    rows = Xt[take] if not hasattr(Xt, "iloc") else Xt.iloc[take]
    rows = rows.toarray() if hasattr(rows, "toarray") else np.array(rows, dtype=float)
    drawn = _domain_sample(groups, factor, n_features, n_draws=take.size)
    rows[:, ~public] = drawn[:, ~public]
    pred = final.predict(rows)
    values, counts = np.unique(pred, return_counts=True)
    share = float(counts.max() / pred.size)
    if share >= DOMAIN_SHARE:
        return values[int(np.argmax(counts))], share
    return None

"""The ``sklearn-fdp`` command line: train, evaluate and report on CSV files.

::

    sklearn-fdp train data.csv --target income --private sex,race \\
        --categories sex='Female|Male' --epsilon 1 --delta 1e-5 --out model.skops
    sklearn-fdp evaluate model.skops test.csv --target income
    sklearn-fdp report model.skops

``train`` fits ``Pipeline([("preprocess", ...), ("model", <estimator>)])`` and
saves it with :mod:`skops.io`; ``evaluate`` and ``report`` load it with an
explicit list of trusted types. Every usage or data error exits with status 2
and a one-paragraph message on stderr that names the problem and its fix.

Preprocessing is data-independent where the data are private:

* a categorical column is one-hot encoded against a category list that comes
  from the user (``--categories col=a|b|c`` or ``--schema``) when the column
  is private. The set of categories that occur in a private column is itself
  a statistic of the private data, so it is never read off them. Public
  columns (only feature-DP models have any) may learn their categories from
  the data: they are functions of the public part of the records, which
  feature DP does not protect;
* a numeric column is clipped to ``[lo, hi]`` and mapped to ``[0, 1]`` by
  :class:`~sklearn_fdp.preprocessing.BoundedScaler` (``--bounds col=lo:hi``,
  or ``col=lo:hi:log`` for ``log1p`` scaling). The bounds of private columns
  must be given; public columns may take their minimum and maximum from the
  data (a public column constant in the data is dropped: it carries no
  information, and no interval of positive width is known for it). Boolean
  columns are numeric with bounds 0:1;
* every output column is then multiplied by ``1 / sqrt(k)`` for ``k`` input
  columns, a constant, so that every row has L2 norm at most 1 (each input
  column contributes at most 1 to the squared norm). Unlike a row
  normaliser, this keeps every public output column a function of public
  input columns only.

The learnt category lists and bounds are stored as constants in the
pipeline; which of them ``train`` read off the (public) data is recorded in
the model file, and ``report`` says so instead of calling those encoders
data-independent.

``train`` prints a line on stderr as each phase starts (``--quiet``: only for a
phase still running after 5 s, so that no long wait is silent).
``import sklearn_fdp`` and this module load nothing heavy at import time, so
``--version`` and ``--help`` answer at once.
"""

import argparse
import importlib
import json
import math
import os
import sys
import time
import warnings

import numpy as np

# The transformers stored in the pipelines the CLI writes (categories as strings,
# the constant row-norm factor); their module loads nothing heavy.
from .preprocessing._tabular import _as_strings, _scale_constant  # noqa: F401 - for old files

__all__ = ["main"]

MODELS = {
    "fdp-logreg": "FeatureDPLogisticRegression",
    "dpsgd": "DPSGDClassifier",
    "dpsgdf": "DPSGDFClassifier",
    "fdp-mlp": "MLPFeatureDP",
}
FDP_MODELS = ("fdp-logreg", "fdp-mlp")
# --public-model: a public estimator under the feature-DP model (issue 34).
PUBLIC_MODELS = {"none": None, "hgb": "HistGradientBoostingClassifier"}

# Functions the CLI puts into the pipelines it writes: the only functions a
# model file may name. They live in sklearn_fdp.preprocessing._tabular (the schema
# preprocessor the CLI builds on, issue 20); files written before name them
# in this module, where they are still found.
_CLI_FUNCTIONS = ("_as_strings", "_scale_constant")
_FUNCTION_MODULES = (__name__, "sklearn_fdp.preprocessing._tabular")
# Modules that moved since files were written (issue 33: the preprocessing package):
# a model file naming the old module is read as naming the new one.
_MOVED_MODULES = {
    "sklearn_fdp._tabular": "sklearn_fdp.preprocessing._tabular",
    "sklearn_fdp._bounded": "sklearn_fdp.preprocessing._bounded",
    "sklearn_fdp._preprocessing": "sklearn_fdp.preprocessing._centerer",
}
# Classes that moved out of a module that still exists (issue 33: the MLP split).
_MOVED_CLASSES = {
    ("sklearn_fdp.neural._mlp", "MLPFeatureDP"): "sklearn_fdp.neural._mlp_classifier",
    ("sklearn_fdp.neural._mlp", "MLPFeatureDPRegressor"): "sklearn_fdp.neural._mlp_regressor",
}
# Written by releases before BoundedScaler scaled the numeric columns (issue 17).
_OLD_CLI_FUNCTIONS = (f"{__name__}._scale_columns",)


class CLIError(Exception):
    """A usage or data error: printed without a traceback, exit status 2."""


# -- argument parsing -----------------------------------------------------------------------


def _positive_float(name, allow_zero=False):
    def parse(text):
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}") from None
        if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
            bound = ">= 0" if allow_zero else "> 0"
            raise argparse.ArgumentTypeError(
                f"{name} must be a finite number {bound}, got {text!r}")
        return value
    return parse


def _delta(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--delta must be a number, got {text!r}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(
            f"--delta must be in (0, 1), got {text!r}; use e.g. 1e-5, well below 1/n_rows")
    return value


def _batch_size(text):
    if text == "auto":
        return text
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(
            f"--batch-size must be a positive integer or 'auto', got {text!r}")
    return value


def _names(text):
    return [c.strip() for c in text.split(",") if c.strip()]


def _sep(text):
    text = {"\\t": "\t", "tab": "\t"}.get(text, text)
    if len(text) != 1 or text in "\"\r\n":
        raise argparse.ArgumentTypeError(
            f"--sep must be one character (e.g. ';', or '\\t' for tabs), got {text!r}")
    return text


def _add_sep(parser):
    parser.add_argument("--sep", type=_sep, default=",", metavar="CHAR",
                        help="field delimiter of the CSV file: one character, '\\t' or "
                             "'tab' for tabs (default: %(default)r)")


def _build_parser():
    parser = argparse.ArgumentParser(
        prog="sklearn-fdp",
        description="Train, evaluate and report on differentially private classifiers "
                    "from CSV files.")
    from . import __version__

    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    tr = sub.add_parser(
        "train", help="fit a private model on a CSV file and save it (.skops)",
        description="Fit Pipeline(preprocess, model) on a CSV file and save it with skops. "
                    "Private columns need --categories (categorical) or --bounds (numeric); "
                    "see docs/cli.md.")
    tr.add_argument("csv", help="training data, one header row")
    tr.add_argument("--target", required=True, help="name of the label column")
    tr.add_argument("--model", choices=list(MODELS), default="fdp-logreg",
                    help="fdp-logreg: FeatureDPLogisticRegression; dpsgd: DPSGDClassifier; "
                         "dpsgdf: DPSGDFClassifier; fdp-mlp: MLPFeatureDP "
                         "(default: %(default)s)")
    tr.add_argument("--private", type=_names, default=None, metavar="COLS",
                    help="comma-separated columns to protect (feature-DP models); every "
                         "other column is public")
    tr.add_argument("--public", type=_names, default=None, metavar="COLS",
                    help="comma-separated public columns (feature-DP models); every other "
                         "column is protected. Give --private or --public, not both")
    tr.add_argument("--label-public", action="store_true",
                    help="treat the label as public (feature-DP models; default: protected)")
    tr.add_argument("--public-model", choices=list(PUBLIC_MODELS), default="none",
                    help="hgb: a HistGradientBoostingClassifier on the public columns and "
                         "label (free under feature DP), whose out-of-fold score is a public "
                         "input of the fdp-logreg model (FeatureDPStackingClassifier; needs "
                         "--label-public). Default: %(default)s")
    tr.add_argument("--drop", type=_names, default=[], metavar="COLS",
                    help="comma-separated columns to ignore")
    tr.add_argument("--categories", action="append", default=[], metavar="COL=A|B|C",
                    help="category list of a categorical column (repeatable); required for "
                         "private categorical columns")
    tr.add_argument("--bounds", action="append", default=[], metavar="COL=LO:HI[:log]",
                    help="clipping bounds of a numeric column (repeatable); required for "
                         "private numeric columns")
    tr.add_argument("--schema", default=None, metavar="JSON",
                    help='JSON file {"categories": {col: [..]}, "bounds": {col: [lo, hi] or '
                         '[lo, hi, "log"]}} or a make_tabular_preprocessor schema ("numeric", '
                         '"categorical", "protected": its protected columns are --private '
                         'unless --private/--public is given); --categories/--bounds '
                         'override it')
    tr.add_argument("--epsilon", type=_positive_float("--epsilon"), default=1.0,
                    help="privacy budget of the fit, > 0 (default: %(default)s)")
    tr.add_argument("--delta", type=_delta, default=1e-5,
                    help="delta of the guarantee, in (0, 1) (default: %(default)s)")
    tr.add_argument("--epochs", type=_positive_float("--epochs"), default=None,
                    help="passes over the data (default: the estimator's)")
    tr.add_argument("--batch-size", type=_batch_size, default="auto",
                    help="expected Poisson batch size or 'auto' (default: %(default)s)")
    tr.add_argument("--max-grad-norm", type=_positive_float("--max-grad-norm"), default=None,
                    help="per-example clip norm C (default: the model's own: 0.5 for "
                         "fdp-logreg's Algorithm 1, 1 for the others)")
    tr.add_argument("--random-state", type=int, default=None,
                    help="seed of the batches and the noise (default: fresh randomness)")
    tr.add_argument("--out", required=True, help="where to write the model (.skops)")
    tr.add_argument("--quiet", action="store_true",
                    help="no progress lines or bar on stderr (notes and warnings stay; a "
                         "phase still running after 5 s says so)")
    _add_sep(tr)

    ev = sub.add_parser("evaluate", help="score a saved model on a CSV file",
                        description="Accuracy, balanced accuracy and log loss of a saved "
                                    "model on a labelled CSV file.")
    ev.add_argument("model", help="a .skops file written by 'sklearn-fdp train'")
    ev.add_argument("csv", help="labelled data with the training columns")
    ev.add_argument("--target", required=True, help="name of the label column")
    ev.add_argument("--json", action="store_true", help="print a JSON object")
    _add_sep(ev)

    rp = sub.add_parser("report", help="privacy report of a saved model",
                        description="What the saved model spent: sklearn_fdp.privacy_report.")
    rp.add_argument("model", help="a .skops file written by 'sklearn-fdp train'")
    rp.add_argument("--delta", type=_delta, default=None,
                    help="delta of the totals (default: the model's)")
    rp.add_argument("--json", action="store_true", help="print a JSON object")
    return parser


# -- reading data ---------------------------------------------------------------------------


def _read_csv(path, sep=","):
    import pandas as pd

    shown = "a tab" if sep == "\t" else repr(sep)
    try:
        frame = pd.read_csv(path, sep=sep, skipinitialspace=True)
    except FileNotFoundError:
        raise CLIError(f"CSV file {path!r} does not exist.") from None
    except IsADirectoryError:
        raise CLIError(f"{path!r} is a directory, not a CSV file.") from None
    except pd.errors.EmptyDataError:
        raise CLIError(f"CSV file {path!r} is empty: it needs a header row and data rows.") \
            from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise CLIError(f"CSV file {path!r} could not be parsed: {exc}. Check the delimiter "
                       f"({shown}; give another with --sep) and that every row has as many "
                       "fields as the header.") from None
    if len(frame) == 0:
        raise CLIError(f"CSV file {path!r} has a header but no data rows.")
    frame.columns = [str(c) for c in frame.columns]
    if frame.shape[1] == 1:
        header = frame.columns[0]
        other = [(c, name) for c, name in ((";", "';'"), ("\t", "a tab"), (",", "','"))
                 if c != sep and c in header]
        if other:
            char, name = other[0]
            arg = "'\\t'" if char == "\t" else repr(char)
            raise CLIError(
                f"CSV file {path!r} parses into a single column {header[:60]!r} with the "
                f"delimiter {shown}, but its header contains {name}: give --sep {arg}.")
    return frame


def _columns_hint(columns):
    shown = list(columns)
    text = ", ".join(repr(c) for c in shown[:30])
    return text + (f", ... ({len(shown)} in all)" if len(shown) > 30 else "")


def _check_known(names, columns, option, path):
    unknown = [c for c in names if c not in columns]
    if unknown:
        raise CLIError(
            f"{option} names {'a column' if len(unknown) == 1 else 'columns'} "
            f"{', '.join(repr(c) for c in unknown)} that {path!r} does not have. "
            f"Available columns: {_columns_hint(columns)}.")


def _split_target(frame, target, path):
    if target not in frame.columns:
        raise CLIError(
            f"target column {target!r} is not in {path!r}. Available columns: "
            f"{_columns_hint(frame.columns)}. Give the label column with --target.")
    y = frame[target]
    missing = int(y.isna().sum())
    if missing:
        raise CLIError(f"target column {target!r} of {path!r} has {missing} missing "
                       "value(s); drop those rows first.")
    return frame.drop(columns=[target]), y


def _non_numeric(series):
    """``(n, first index, first value)`` of the values of ``series`` that are not numbers."""
    import pandas as pd

    coerced = pd.to_numeric(series, errors="coerce")
    bad = series[coerced.isna() & series.notna()]
    return (0, None, None) if bad.empty else (len(bad), bad.index[0], bad.iloc[0])


def _where(index):
    """Where the row with frame index ``index`` is in the CSV file (header = line 1)."""
    return f"data row {index + 1} (line {index + 2} of the file)"


def _stray_values(series):
    """Whether ``series`` (not parsed as numbers) is numeric but for a few stray values:
    more than half of its non-missing values are numbers."""
    n_bad, _, _ = _non_numeric(series)
    n_present = int(series.notna().sum())
    return 0 < n_bad and n_present - n_bad > n_present / 2


def _n_infinite(series):
    """Number of infinite values of a numeric or boolean column."""
    return int(np.isinf(series.to_numpy(dtype=np.float64)).sum())


def _is_numeric(series):
    import pandas as pd

    return pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series)


def _is_bool(series):
    import pandas as pd

    return pd.api.types.is_bool_dtype(series)


# -- the schema: categories and bounds ------------------------------------------------------


_SCHEMA_KEYS = {"categories", "bounds", "numeric", "categorical", "protected", "target",
                "passthrough", "drop", "input_columns"}


def _cli_schema(schema, path):
    """A --schema file in the command line's form (``categories``/``bounds``) or in
    make_tabular_preprocessor's (``numeric``/``categorical``/``protected``): the same
    schema the Python API reads (issue 32)."""
    if not isinstance(schema, dict) or set(schema) - _SCHEMA_KEYS:
        raise CLIError(f"--schema file {path!r} must be a JSON object with keys "
                       '"categories" and/or "bounds" (or make_tabular_preprocessor\'s '
                       '"numeric", "categorical", "protected").')
    out = dict(schema)
    for alias, key in (("numeric", "bounds"), ("categorical", "categories")):
        if alias in out:
            if key in out:
                raise CLIError(f'--schema file {path!r} has both "{alias}" and "{key}"; '
                               "give one of them.")
            entries = {}
            for col, spec in (out.pop(alias) or {}).items():
                if isinstance(spec, dict):  # {"bounds": [..], "scale": ..} / {"categories": [..]}
                    inner = spec.get("bounds" if key == "bounds" else "categories")
                    if key == "bounds" and isinstance(inner, list) and spec.get("scale"):
                        inner = [*inner, spec["scale"]]
                    spec = inner
                entries[col] = spec
            out[key] = entries
    for col, b in (out.get("bounds") or {}).items():
        if isinstance(b, list) and len(b) == 3 and b[2] == "linear":
            out["bounds"][col] = b[:2]
    return out


def _schema_protected(args):
    """The --schema file's ``"protected"`` list, or None."""
    if args.schema is None:
        return None
    try:
        with open(args.schema, encoding="utf-8") as fh:
            schema = json.load(fh)
    except (OSError, json.JSONDecodeError):
        return None  # _parse_schema reports it
    protected = schema.get("protected") if isinstance(schema, dict) else None
    if protected is not None and (not isinstance(protected, list)
                                  or not all(isinstance(c, str) for c in protected)):
        raise CLIError(f'--schema "protected" must be a list of column names, got '
                       f"{protected!r}.")
    return protected


def _apply_schema_protection(args, features):
    """One declaration: the schema's protected columns are --private when neither --private
    nor --public is given; a column it protects that they leave public is refused."""
    protected = _schema_protected(args)
    if protected is None or args.model not in FDP_MODELS:
        return
    if args.private is None and args.public is None:
        args.private = list(protected)
        return
    private = (set(args.private) if args.private is not None
               else {c for c in features if c not in set(args.public)})
    public = [c for c in protected if c not in private]
    if public:
        option = "--private" if args.private is not None else "--public"
        raise CLIError(
            f"{option} leaves column(s) {public!r} public, but the --schema file protects "
            "them. The schema is the one declaration of what is protected: drop "
            f"{option} (the schema's list is used) or protect those columns too.")


def _parse_schema(args, columns, path):
    categories, bounds = {}, {}
    if args.schema is not None:
        try:
            with open(args.schema, encoding="utf-8") as fh:
                schema = json.load(fh)
        except OSError as exc:
            raise CLIError(f"cannot read --schema file {args.schema!r}: {exc.strerror}.") \
                from None
        except json.JSONDecodeError as exc:
            raise CLIError(f"--schema file {args.schema!r} is not valid JSON: {exc}.") from None
        schema = _cli_schema(schema, args.schema)
        for col, cats in (schema.get("categories") or {}).items():
            if not isinstance(cats, list) or not cats:
                raise CLIError(f'--schema "categories" of {col!r} must be a non-empty list.')
            categories[col] = [str(c) for c in cats]
        for col, b in (schema.get("bounds") or {}).items():
            if not isinstance(b, list) or len(b) not in (2, 3):
                raise CLIError(f'--schema "bounds" of {col!r} must be [lo, hi] or '
                               f'[lo, hi, "log"], got {b!r}.')
            bounds[col] = _check_bounds(col, *b, option="--schema")
    for item in args.categories:
        col, sep, values = item.partition("=")
        cats = [v for v in values.split("|") if v != ""]
        if not sep or not col or not cats:
            raise CLIError(f"--categories {item!r} is not COL=A|B|C; e.g. "
                           "--categories 'sex=Female|Male'.")
        categories[col] = cats
    for item in args.bounds:
        col, sep, values = item.partition("=")
        parts = values.split(":")
        if not sep or not col or len(parts) not in (2, 3):
            raise CLIError(f"--bounds {item!r} is not COL=LO:HI or COL=LO:HI:log; e.g. "
                           "--bounds age=17:90.")
        bounds[col] = _check_bounds(col, *parts, option="--bounds")
    _check_known(list(categories), columns, "--categories", path)
    _check_known(list(bounds), columns, "--bounds", path)
    both = sorted(set(categories) & set(bounds))
    if both:
        raise CLIError(f"column {both[0]!r} has both categories and bounds; give one: "
                       "categories one-hot encode it, bounds scale it as a number.")
    for col, cats in categories.items():
        dup = sorted({c for c in cats if cats.count(c) > 1})
        if dup:
            raise CLIError(f"categories of {col!r} list {dup[0]!r} twice.")
    return categories, bounds


def _check_bounds(col, lo, hi, log=None, *, option):
    try:
        lo, hi = float(lo), float(hi)
    except (TypeError, ValueError):
        raise CLIError(f"{option} of {col!r}: bounds must be numbers, got {lo!r}:{hi!r}.") \
            from None
    if log not in (None, "log"):
        raise CLIError(f"{option} of {col!r}: the third field may only be 'log', got {log!r}.")
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise CLIError(f"{option} of {col!r}: need finite LO < HI, got {lo:g}:{hi:g}.")
    if log and lo <= -1:
        raise CLIError(f"{option} of {col!r}: log scaling needs LO > -1, got {lo:g}.")
    return lo, hi, bool(log)


# -- training -------------------------------------------------------------------------------


def _resolve_private(args, features, path):
    """Original columns protected by the model."""
    if args.model not in FDP_MODELS:
        given = [o for o, v in (("--private", args.private), ("--public", args.public),
                                ("--label-public", args.label_public)) if v]
        if given:
            raise CLIError(
                f"{given[0]} applies to the feature-DP models (fdp-logreg, fdp-mlp); "
                f"--model {args.model} protects whole records (every column and the label). "
                f"Drop {given[0]}, or use --model fdp-logreg.")
        return list(features)
    if (args.private is None) == (args.public is None):
        raise CLIError(
            f"--model {args.model} needs exactly one of --private (the columns to protect) "
            "and --public (the columns that may leak); "
            f"{'both were' if args.private is not None else 'neither was'} given.")
    if args.private is not None:
        spec, option = args.private, "--private"
    else:
        spec, option = args.public, "--public"
    if args.target in spec:
        raise CLIError(
            f"{option} names the target {args.target!r}. The label is protected unless "
            "--label-public is given; list only feature columns.")
    dropped = [c for c in spec if c in args.drop]
    if dropped:
        raise CLIError(f"{option} names {dropped[0]!r}, which --drop removes.")
    _check_known(spec, features, option, path)
    if args.private is not None:
        return [c for c in features if c in spec]
    return [c for c in features if c not in spec]


def _plan_columns(X, private, categories, bounds, path):
    """``(numeric, categorical, learnt)``.

    ``numeric``: (col, (lo, hi, log)); ``categorical``: (col, categories); ``learnt``:
    the public columns whose bounds or categories were read off the data.
    """
    numeric, categorical, learnt = [], [], []
    need_bounds, need_categories = [], []
    for col in X.columns:
        series = X[col]
        if col in categories:
            categorical.append((col, categories[col]))
            continue
        numeric_like = _is_numeric(series) or _is_bool(series)
        if not numeric_like and col not in bounds and _stray_values(series):
            n_bad, index, value = _non_numeric(series)
            raise CLIError(
                f"column {col!r} of {path!r} is numeric but {_where(index)} holds "
                f"{value!r}" + (f" ({n_bad} non-numeric value(s) in all)" if n_bad > 1
                                else "")
                + f". Fix or drop {'that row' if n_bad == 1 else 'those rows'}, declare the "
                f"column categorical (--categories '{col}=A|B|C' or --schema), or --drop {col}.")
        if col in bounds or numeric_like:
            if not numeric_like:
                n_bad, index, value = _non_numeric(series)
                raise CLIError(
                    f"column {col!r} has bounds but non-numeric values ({value!r} at "
                    f"{_where(index)}). Give its categories instead (--categories "
                    f"'{col}=A|B|C'), or --drop {col}.")
            missing = int(series.isna().sum())
            if missing:
                raise CLIError(
                    f"numeric column {col!r} has {missing} missing value(s). Fill them, "
                    f"drop those rows, or --drop {col}.")
            infinite = _n_infinite(series)
            if infinite:
                raise CLIError(
                    f"numeric column {col!r} has {infinite} infinite value(s). Replace them "
                    f"by finite ones, drop those rows, or --drop {col}.")
            if col in bounds:
                numeric.append((col, bounds[col]))
            elif _is_bool(series):
                numeric.append((col, (0.0, 1.0, False)))
            elif col in private:
                need_bounds.append(col)
            else:  # public under feature DP: its range is not protected
                values = series.to_numpy(dtype=np.float64)
                if values.min() < values.max():
                    numeric.append((col, (float(values.min()), float(values.max()), False)))
                # else constant in the data: no interval to scale from, dropped (_train notes it)
                learnt.append(col)
            continue
        if col in private:  # non-numeric values and no encoder given
            need_categories.append((col, series.dropna().iloc[0]
                                    if series.notna().any() else None))
            continue
        cats = sorted({str(v) for v in _as_strings(series.dropna().to_numpy())})
        categorical.append((col, cats))
        learnt.append(col)
    problems = []
    if need_categories:
        shown = ", ".join(f"{c!r} (e.g. {v!r})" for c, v in need_categories)
        fixes = " ".join(f"--categories '{c}=A|B|C'" for c, _ in need_categories)
        problems.append(
            f"non-numeric private column(s) without an encoder: {shown}. The category list "
            "of a private column must come from you, not from the data (which categories "
            f"occur is itself private). Give {fixes} (or list them in --schema), or --drop "
            "them.")
    if need_bounds:
        fixes = " ".join(f"--bounds {c}=LO:HI" for c in need_bounds)
        problems.append(
            f"numeric private column(s) without bounds: {', '.join(map(repr, need_bounds))}. "
            "Scaling them by their own minimum and maximum would leak those; give bounds "
            f"known without looking at the data: {fixes} (append :log for heavy tails, "
            f"e.g. --bounds {need_bounds[0]}=0:99999:log).")
    if problems:
        raise CLIError(" ".join(problems))
    if not numeric and not categorical:
        raise CLIError(f"no feature columns left in {path!r} after --target and --drop.")
    return numeric, categorical, learnt


def _make_preprocessor(numeric, categorical):
    """The schema preprocessor (sklearn_fdp.preprocessing.make_tabular_preprocessor) of the
    planned columns, numeric then categorical, pandas output."""
    from .preprocessing import make_tabular_preprocessor

    schema = {
        "numeric": {col: [lo, hi, "log" if log else "linear"] for col, (lo, hi, log) in numeric},
        "categorical": {col: list(cats) for col, cats in categorical},
    }
    pre = make_tabular_preprocessor(schema, scale_rows="constant", order="type")
    return pre.set_output(transform="pandas")


def _output_names(numeric, categorical):
    """``{original column: [output columns]}`` of :func:`_make_preprocessor`."""
    out = {col: [f"num__{col}"] for col, _ in numeric}
    out.update({col: [f"cat__{col}_{c}" for c in cats] for col, cats in categorical})
    return out


def _make_estimator(args, private_outputs):
    import sklearn_fdp

    cls = getattr(sklearn_fdp, MODELS[args.model])
    params = dict(epsilon=args.epsilon, delta=args.delta,
                  batch_size=args.batch_size, random_state=args.random_state)
    if args.max_grad_norm is not None:
        params["max_grad_norm"] = args.max_grad_norm
    if args.epochs is not None:
        params["epochs"] = args.epochs
    if args.public_model != "none":
        return _stacked_estimator(args, cls(**params), private_outputs)
    if args.model in FDP_MODELS:
        params.update(private_features=private_outputs, label_public=args.label_public)
    return cls(**params)


def _stacked_estimator(args, final, private_outputs):
    """``--public-model``: the fdp-logreg model on top of a public estimator."""
    import sklearn.ensemble

    import sklearn_fdp

    if args.model != "fdp-logreg" or not args.label_public:
        raise CLIError(
            f"--public-model {args.public_model} fits a model on the public columns and the "
            "label, so it needs --model fdp-logreg and --label-public; got --model "
            f"{args.model}{'' if args.label_public else ' without --label-public'}. Add "
            "--label-public if the label is public, or drop --public-model.")
    budget = {k: final.get_params()[k] for k in ("epsilon", "delta", "random_state")}
    public = getattr(sklearn.ensemble, PUBLIC_MODELS[args.public_model])()
    return sklearn_fdp.FeatureDPStackingClassifier(
        public, final.set_params(random_state=None), private_features=private_outputs,
        **budget)


class _ProgressBar:
    """tqdm bar fed by :func:`sklearn_fdp._progress.progress_hook`; restarts per run."""

    def __init__(self, desc, disable):
        self.desc = desc
        self.disable = disable
        self.bar = None

    def __call__(self, done, total):
        from tqdm.auto import tqdm

        if self.bar is None or self.bar.total != total or done < self.bar.n:
            if self.bar is not None:
                self.bar.close()
            self.bar = tqdm(total=total, desc=self.desc, unit="step", file=sys.stderr,
                            disable=self.disable, leave=True, dynamic_ncols=True)
        self.bar.update(done - self.bar.n)

    def close(self):
        if self.bar is not None:
            self.bar.close()


# --quiet still says a phase is running once it has run this long (seconds).
QUIET_AFTER_S = 5.0


class _Phases:
    """One line on stderr as each phase of ``train`` starts, with the time since the start,
    so that no wait of more than a second is silent. ``--quiet``: a line only for a
    phase still running after :data:`QUIET_AFTER_S` seconds (a calibration at a tiny
    epsilon, a long fit), so that no long wait is silent either."""

    def __init__(self, quiet):
        self.quiet = quiet
        self.start = time.perf_counter()
        self._timer = None

    def _line(self, text):
        print(f"[{time.perf_counter() - self.start:6.1f} s] {text}", file=sys.stderr,
              flush=True)

    def __call__(self, text):
        self.done()
        if not self.quiet:
            self._line(text)
            return
        import threading

        self._timer = threading.Timer(QUIET_AFTER_S, self._line,
                                      args=(f"still {text} (--quiet: shown after "
                                            f"{QUIET_AFTER_S:g} s)",))
        self._timer.daemon = True
        self._timer.start()

    def done(self):
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def _train(args):
    phase = _Phases(args.quiet)
    try:
        return _train_phases(args, phase)
    finally:
        phase.done()


def _train_phases(args, phase):
    out_dir = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(out_dir):
        raise CLIError(f"--out {args.out!r}: directory {out_dir!r} does not exist.")
    phase(f"reading {args.csv}")
    frame = _read_csv(args.csv, args.sep)
    X, y = _split_target(frame, args.target, args.csv)
    _check_known(args.drop, X.columns, "--drop", args.csv)
    if args.target in args.drop:
        raise CLIError(f"--drop names the target {args.target!r}.")
    X = X.drop(columns=args.drop)
    _apply_schema_protection(args, list(X.columns))
    private = _resolve_private(args, list(X.columns), args.csv)
    categories, bounds = _parse_schema(args, list(frame.columns), args.csv)
    stray = [c for c in (*categories, *bounds) if c == args.target or c in args.drop]
    if stray:
        raise CLIError(f"--categories/--bounds/--schema give column {stray[0]!r}, which is "
                       "the target or dropped; remove it from there.")
    phase(f"checking {len(frame)} rows x {X.shape[1]} columns and planning their encoding")
    classes = y.unique()
    if len(classes) < 2:
        raise CLIError(
            f"target column {args.target!r} has a single class ({classes[0]!r}) in "
            f"{args.csv!r}; a classifier needs at least two.")
    numeric, categorical, learnt = _plan_columns(X, set(private), categories, bounds,
                                                 args.csv)
    used = {c for c, _ in (*numeric, *categorical)}
    constant = [c for c in learnt if c not in used]
    if len(learnt) > len(constant):
        print(f"note: public column(s) {', '.join(c for c in learnt if c in used)}: "
              "bounds/categories taken from the data (public under feature DP); give "
              "--bounds/--categories to fix them.", file=sys.stderr)
    if constant:
        print(f"note: public column(s) {', '.join(constant)}: constant in the data, dropped "
              "(give --bounds to keep them).", file=sys.stderr)
    _note_unknown_categories(X, categorical)

    phase("loading scikit-learn and the estimator")
    from sklearn.pipeline import Pipeline

    from ._progress import progress_hook

    pre = _make_preprocessor(numeric, categorical)
    outputs = _output_names(numeric, categorical)
    private_outputs = [name for col in private for name in outputs[col]]
    estimator = _make_estimator(args, private_outputs)
    model = Pipeline([("preprocess", pre), ("model", estimator)])
    name = type(estimator).__name__
    learnt_steps = _learnt_steps(learnt, numeric, categorical)
    if learnt_steps:  # read by `report` (the encoders' lists are constants by now)
        model.cli_learnt_from_data_ = learnt_steps

    bar = _ProgressBar(name, disable=args.quiet)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # The plan is what fit computes first, from public quantities only; asking
            # it here shows the calibration of the noise (seconds under PLD) as a phase
            # of its own: fit then finds the calibrated σ in accounting's cache.
            phase(f"calibrating the noise of {name} (epsilon {args.epsilon:g}, "
                  f"delta {args.delta:g})")
            names = [n for v in outputs.values() for n in v]
            estimator.privacy_plan(len(X), len(names), feature_names=names)
            phase(f"fitting the preprocessing and {name}")
            with progress_hook(bar):
                model.fit(X, y)
    except ValueError as exc:  # parameter and data checks of the estimator
        raise CLIError(f"{name} could not be fitted: {exc}") from None
    except ImportError as exc:  # e.g. fdp-mlp without torch
        raise CLIError(str(exc)) from None
    finally:
        bar.close()
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)

    phase(f"saving to {args.out}")
    _save(model, args.out)
    est = model[-1]
    protected = ", ".join(private) if args.model in FDP_MODELS else "every column"
    label = "public" if args.model in FDP_MODELS and args.label_public else "protected"
    print(f"trained {type(est).__name__} on {len(y)} rows, {len(outputs)} columns "
          f"({sum(len(v) for v in outputs.values())} features)")
    print(f"protected: {protected or 'no feature'}; label {label}")
    steps = getattr(getattr(est, "final_estimator_", est), "steps_", None)  # stacked: its own
    print(f"epsilon spent {est.epsilon_:.4g} at delta {est.delta_:g} "
          f"(noise multiplier {est.noise_multiplier_:.4g}, {steps} steps)")
    print(f"saved to {args.out}")
    return 0


def _learnt_steps(learnt, numeric, categorical):
    """``{report step name: [columns]}``: the public columns whose bounds or categories
    ``train`` read off the data (constants in the pipeline, so the report cannot tell)."""
    learnt = set(learnt)
    steps = {
        "preprocess__columns__num": [c for c, _ in numeric if c in learnt],
        "preprocess__columns__cat__onehot": [c for c, _ in categorical if c in learnt],
    }
    return {step: cols for step, cols in steps.items() if cols}


def _note_unknown_categories(X, categorical):
    """Tell the data owner about values outside a category list (encoded as all zeros)."""
    for col, cats in categorical:
        values = _as_strings(X[col].to_numpy())
        known = set(cats)
        n_out = sum(1 for v in values if isinstance(v, str) and v not in known)
        if n_out:
            print(f"note: column {col!r}: {n_out} row(s) have a value outside its category "
                  "list and are encoded as all zeros; check --categories.", file=sys.stderr)


# -- saving and loading ---------------------------------------------------------------------


def _save(model, path):
    import skops.io as sio
    from sklearn.pipeline import Pipeline

    # MLPFeatureDP stores its torch module as NumPy arrays (its __getstate__).
    try:
        sio.dump(model, path)
    except OSError as exc:
        raise CLIError(f"cannot write --out {path!r}: {exc.strerror}.") from None


# Non-estimator containers that scikit-learn itself stores inside fitted
# estimators the CLI writes (scikit-learn 1.6 keeps a ColumnTransformer's
# remainder columns in this list subclass; later releases a plain list).
_SKLEARN_CONTAINERS = frozenset({"sklearn.compose._column_transformer._RemainderColsList"})
# What a fitted --public-model holds besides estimators (the trees of gradient boosting).
_SKLEARN_PUBLIC_MODEL_PARTS = frozenset(
    {"sklearn.ensemble._hist_gradient_boosting.predictor.TreePredictor"})


def _trusted(name):
    """Whether a type named in a model file is one the CLI writes."""
    if name in _SKLEARN_CONTAINERS:
        return True
    module, _, attr = name.rpartition(".")
    if module in _FUNCTION_MODULES:
        return attr in _CLI_FUNCTIONS
    root = module.split(".")[0]
    if root not in ("sklearn", "sklearn_fdp", "dp_accounting", "numpy"):
        return False
    try:
        obj = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError):
        return False
    if not isinstance(obj, type):
        return False
    if root in ("sklearn", "sklearn_fdp"):
        from sklearn.base import BaseEstimator

        from ._plan import DPSGDSchedule, PrivacyPlan  # a fit's privacy_plan_

        return (issubclass(obj, BaseEstimator) or obj in (PrivacyPlan, DPSGDSchedule)
                or name in _SKLEARN_PUBLIC_MODEL_PARTS)
    if root == "dp_accounting":
        from dp_accounting import dp_event

        return issubclass(obj, dp_event.DpEvent)
    return issubclass(obj, (np.generic, np.dtype))  # numpy scalars and dtypes


def _renamed_moved_modules(path):
    """The bytes of the model file at ``path``, with what moved since it was written renamed
    (``_MOVED_MODULES``, ``_MOVED_CLASSES``)."""
    import io
    import json
    import zipfile

    with open(path, "rb") as fh:
        data = fh.read()
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as src:
            schema = json.loads(src.read("schema.json"))
    except Exception:  # noqa: BLE001 - not a skops file: skops says why below
        return data
    moved = []

    def rename(node):
        if isinstance(node, dict):
            module = node.get("__module__")
            target = _MOVED_CLASSES.get((module, node.get("__class__")),
                                        _MOVED_MODULES.get(module))
            if target is not None:
                node["__module__"] = target
                moved.append(target)
            for value in node.values():
                rename(value)
        elif isinstance(node, list):
            for value in node:
                rename(value)

    rename(schema)
    if not moved:
        return data
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w") as dst:
        for item in src.infolist():
            payload = src.read(item.filename)
            if item.filename == "schema.json":
                payload = json.dumps(schema).encode()
            dst.writestr(item, payload)
    return out.getvalue()


def _load(path):
    import skops.io as sio

    try:
        data = _renamed_moved_modules(path)
        untrusted = sio.get_untrusted_types(data=data)
    except FileNotFoundError:
        raise CLIError(f"model file {path!r} does not exist.") from None
    except Exception as exc:  # noqa: BLE001 - zip/JSON errors of a foreign file
        raise CLIError(f"{path!r} is not a skops model file ({exc}). Write one with "
                       "'sklearn-fdp train ... --out model.skops'.") from None
    refused = [t for t in untrusted if not _trusted(t)]
    if any(t in _OLD_CLI_FUNCTIONS for t in refused):
        raise CLIError(f"model file {path!r} was written by an older sklearn-fdp, whose "
                       "numeric scaling this release no longer has; train it again with "
                       "'sklearn-fdp train'.")
    if refused:
        raise CLIError(
            f"model file {path!r} contains types the sklearn-fdp command line does not write "
            f"and will not load: {', '.join(refused)}. Load it in Python with "
            "skops.io.load after checking them yourself.")
    try:
        model = sio.loads(data, trusted=untrusted)
    except Exception as exc:  # noqa: BLE001
        raise CLIError(f"could not load model file {path!r}: {exc}") from None
    from sklearn.pipeline import Pipeline

    if not (isinstance(model, Pipeline) and model.steps[0][0] == "preprocess"):
        raise CLIError(f"{path!r} holds a {type(model).__name__}, not a pipeline written by "
                       "'sklearn-fdp train'.")
    return model


# -- evaluate and report --------------------------------------------------------------------


def _model_inputs(model):
    """``(all input columns, numeric input columns)`` of a CLI pipeline."""
    columns = model.named_steps["preprocess"].named_steps["columns"]
    numeric = []
    for name, _, cols in columns.transformers_:
        if name == "num":
            numeric = list(cols)
    return list(columns.feature_names_in_), numeric


def _coerce_labels(y, classes, target, path):
    """Test labels in the type of ``classes_`` (CSV types may differ).

    Raises :class:`CLIError` when they cannot be compared with the classes: text
    labels against a model of numeric classes, or no label among the classes.
    """
    import pandas as pd

    shown = [c.item() if hasattr(c, "item") else c for c in classes]
    if classes.dtype.kind in "OUS":
        y_true = y.astype(str).to_numpy()
        known = {str(c) for c in classes}
    else:
        y_true = y.to_numpy()
        if not (pd.api.types.is_numeric_dtype(y) or pd.api.types.is_bool_dtype(y)):
            coerced = pd.to_numeric(y, errors="coerce")
            if coerced.isna().any():
                value = y[coerced.isna()].iloc[0]
                raise CLIError(
                    f"target column {target!r} of {path!r} holds text labels (e.g. "
                    f"{value!r}) but the model was trained on the numeric classes {shown}. "
                    "Give a CSV whose labels are coded as in training (or train the model "
                    "on these labels).")
            y_true = coerced.to_numpy()
        known = set(classes.tolist())
    if not any(v in known for v in y_true):
        examples = sorted({str(v) for v in y_true})[:5]
        raise CLIError(
            f"none of the labels of target column {target!r} in {path!r} (e.g. "
            f"{', '.join(examples)}) is a class of the model ({shown}). Check --target, "
            "and that the labels are coded as in training.")
    return y_true


def _evaluate(args):
    from sklearn.metrics import accuracy_score, balanced_accuracy_score, log_loss

    model = _load(args.model)
    frame = _read_csv(args.csv, args.sep)
    X, y = _split_target(frame, args.target, args.csv)
    inputs, numeric = _model_inputs(model)
    missing = [c for c in inputs if c not in X.columns]
    if args.target in missing:
        raise CLIError(
            f"--target {args.target!r} is an input column of the model (it was trained on it "
            f"as a feature), not its label: --target removed it from the inputs. Give the "
            f"label column the model was trained to predict; the model's input columns are "
            f"{_columns_hint(inputs)}.")
    if missing:
        raise CLIError(
            f"{args.csv!r} lacks the column(s) {', '.join(repr(c) for c in missing)} the model "
            f"was trained on. Available columns: {_columns_hint(X.columns)}.")
    X = X[inputs]
    for col in numeric:
        if not (_is_numeric(X[col]) or _is_bool(X[col])):
            _, index, value = _non_numeric(X[col])
            raise CLIError(f"column {col!r} of {args.csv!r} should be numeric but "
                           f"{_where(index)} holds {value!r}; fix or drop that row.")
        if X[col].isna().any():
            raise CLIError(f"numeric column {col!r} of {args.csv!r} has "
                           f"{int(X[col].isna().sum())} missing value(s); fill or drop them.")
        if _n_infinite(X[col]):
            raise CLIError(f"numeric column {col!r} of {args.csv!r} has "
                           f"{_n_infinite(X[col])} infinite value(s); replace or drop them.")
    est = model[-1]
    y_true = _coerce_labels(y, est.classes_, args.target, args.csv)
    proba = model.predict_proba(X)
    y_pred = est.classes_[np.argmax(proba, axis=1)]
    unseen = sorted({str(v) for v in y_true} - {str(c) for c in est.classes_})
    result = {
        "rows": int(len(y_true)),
        "accuracy": float(accuracy_score(y_true, y_pred)),
        "balanced_accuracy": float(balanced_accuracy_score(y_true, y_pred)),
        "log_loss": None if unseen else float(log_loss(y_true, proba, labels=est.classes_)),
        "classes": [c.item() if hasattr(c, "item") else c for c in est.classes_],
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"rows               {result['rows']}")
    print(f"accuracy           {result['accuracy']:.4f}")
    print(f"balanced accuracy  {result['balanced_accuracy']:.4f}")
    if unseen:
        print(f"log loss           n/a (labels {unseen} were not seen in training)")
    else:
        print(f"log loss           {result['log_loss']:.4f}")
    return 0


def _report(args):
    from ._report import privacy_report

    model = _load(args.model)
    report = privacy_report(model, delta=args.delta)
    learnt = getattr(model, "cli_learnt_from_data_", {})
    notes = []
    for step in report.steps:
        cols = learnt.get(step["name"])
        if cols:
            # Their lists are constants in the file, but `train` read them off the data:
            # of public columns only (it never does for a protected one), which feature
            # DP does not protect.
            step["kind"] = "public"
            step["learnt_from_data"] = list(cols)
            what = "bounds" if step["name"].endswith("num") else "categories"
            notes.append(f"  note: {step['name']} learnt the {what} of {', '.join(cols)} "
                         "from the training data (public columns only: none is protected)")
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, default=str))
    else:
        print("\n".join([str(report), *notes]))
    return 0


# -- entry point ----------------------------------------------------------------------------


def main(argv=None):
    """Run the ``sklearn-fdp`` command line.

    Parameters
    ----------
    argv : list of str or None, default=None
        Arguments without the program name; None reads ``sys.argv[1:]``.

    Returns
    -------
    status : int
        0 on success, 2 on a usage or data error (message on stderr).
    """
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or an argparse usage error
        return int(exc.code or 0)
    try:
        import tqdm  # noqa: F401
        import skops  # noqa: F401
    except ImportError as exc:
        print(f"sklearn-fdp: error: {exc.name} is not installed. Install the command line's "
              "extra: pip install skops tqdm (or, from the sklearn_fdp source tree, "
              "pip install '.[cli]')", file=sys.stderr)
        return 2
    command = {"train": _train, "evaluate": _evaluate, "report": _report}[args.command]
    try:
        return command(args)
    except CLIError as exc:
        print(f"sklearn-fdp {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (`sklearn-fdp report m.skops --json | head`): stop
        # quietly, as other command-line tools do. Python flushes stdout again at
        # exit, so point it at /dev/null first (the recipe of the signal docs).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

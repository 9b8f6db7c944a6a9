"""The public API's type hints: every parameter and return annotated, every name resolvable.

The annotations are strings (``from __future__ import annotations``) whose names
are imported under ``typing.TYPE_CHECKING`` only, so nothing evaluates them at
run time; this test does, the way a type checker reads them, so that a typo or
a missing import cannot ship behind ``py.typed``.
"""

import ast
import importlib
import inspect
import pathlib
import typing

import pytest

import sklearn_fdp
from sklearn_fdp import _typing

PUBLIC_METHODS = ("__init__", "fit", "predict", "predict_proba", "predict_log_proba",
                  "decision_function", "transform", "inverse_transform", "score",
                  "privacy_plan")


def _estimators():
    names = ["AdaMixClassifier", "DPSGDClassifier", "DPSGDFClassifier",
             "FeatureDPLogisticRegression", "FeatureDPLinearRegression", "PrivateMeanCenterer",
             "DPSGDRegressor", "FeatureDPSGDRegressor", "FeatureDPStackingClassifier",
             "FeatureDPStackingRegressor"]
    classes = [getattr(sklearn_fdp, n) for n in names]
    from sklearn_fdp.model_selection import PrivateRandomizedSearchCV

    classes.append(PrivateRandomizedSearchCV)
    try:
        classes.append(sklearn_fdp.MLPFeatureDP)
        classes.append(sklearn_fdp.MLPFeatureDPRegressor)
    except ImportError:  # pragma: no cover - torch missing
        pass
    return classes


def _type_checking_blocks(module, ns):
    """Run the ``if TYPE_CHECKING:`` blocks of ``module`` in ``ns``, as a type checker reads them."""
    tree = ast.parse(pathlib.Path(module.__file__).read_text())
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            code = compile(ast.Module(body=node.body, type_ignores=[]), module.__file__, "exec")
            exec(code, ns)  # noqa: S102 - our own import statements


def _namespace(module):
    aliases = dict(vars(_typing))
    _type_checking_blocks(_typing, aliases)  # the aliases _typing defines for type checkers
    ns = dict(vars(module))
    added = [name for name in _typing.__all__ if not hasattr(_typing, name)]
    try:  # let the module's own TYPE_CHECKING imports find them
        for name in added:
            setattr(_typing, name, aliases[name])
        _type_checking_blocks(module, ns)
    finally:
        for name in added:
            delattr(_typing, name)
    return ns


@pytest.mark.parametrize("cls", _estimators(), ids=lambda c: c.__name__)
def test_public_methods_are_fully_annotated_and_resolve(cls):
    checked = 0
    for name in PUBLIC_METHODS:
        method = cls.__dict__.get(name)
        if method is None:
            continue
        method = inspect.unwrap(method)
        module = importlib.import_module(method.__module__)
        ns = _namespace(module)
        sig = inspect.signature(method)
        for param in list(sig.parameters.values())[1:]:  # not self
            assert param.annotation is not inspect.Parameter.empty, (
                f"{cls.__name__}.{name}: parameter {param.name!r} has no type hint")
            eval(param.annotation, ns)  # noqa: S307 - our own annotation strings
        assert sig.return_annotation is not inspect.Signature.empty, (
            f"{cls.__name__}.{name} has no return type hint")
        eval(sig.return_annotation, ns)  # noqa: S307
        checked += 1
    assert checked >= 2  # __init__ and fit at least


@pytest.mark.parametrize("cls", _estimators(), ids=lambda c: c.__name__)
def test_literal_hints_list_exactly_the_accepted_strings(cls):
    # A Literal hint on a constructor parameter names the same strings as its
    # validation constraint, so the hint and the check cannot drift apart.
    from sklearn.utils._param_validation import StrOptions

    module = importlib.import_module(cls.__module__)
    ns = _namespace(module)
    for name, param in inspect.signature(cls.__init__).parameters.items():
        if name == "self":
            continue
        hint = eval(param.annotation, ns)  # noqa: S307
        literal = set()
        for arg in typing.get_args(hint) or (hint,):
            if typing.get_origin(arg) is typing.Literal:
                literal |= set(typing.get_args(arg))
        if typing.get_origin(hint) is typing.Literal:
            literal |= set(typing.get_args(hint))
        accepted = set()
        for constraint in cls._parameter_constraints.get(name, []):
            if isinstance(constraint, StrOptions):
                accepted |= {o for o in constraint.options if o not in constraint.deprecated}
        assert literal == accepted, f"{cls.__name__}({name}=...): hint {literal}, accepts {accepted}"


def test_py_typed_is_shipped():
    assert (pathlib.Path(sklearn_fdp.__file__).parent / "py.typed").exists()

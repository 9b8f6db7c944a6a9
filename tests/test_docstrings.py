"""Every public callable documents exactly its parameters (numpydoc validation)."""

import inspect

import pytest

import sklearn_fdp
from sklearn_fdp import accounting, datasets, preprocessing

numpydoc_validate = pytest.importorskip("numpydoc.validate")

# Checked codes: summary present (SS01, GL08), every parameter documented and
# no unknown ones (PR01, PR02), parameter descriptions present (PR07).
CHECKED = {"GL08", "SS01", "PR01", "PR02", "PR07"}


def _public_names():
    names = []
    for name in sklearn_fdp.__all__:
        obj = getattr(sklearn_fdp, name)
        if inspect.isclass(obj) and not issubclass(obj, (Warning, Exception)):
            names.append(f"sklearn_fdp.{name}")
            for meth in ("fit", "predict", "predict_proba", "transform", "inverse_transform"):
                if meth in vars(obj) or any(meth in vars(base) for base in obj.__mro__[1:3]
                                            if base.__module__.startswith("sklearn_fdp")):
                    names.append(f"sklearn_fdp.{name}.{meth}")
    for module in (accounting, datasets, preprocessing):
        for name in module.__all__:
            if inspect.isfunction(getattr(module, name)):
                names.append(f"{module.__name__}.{name}")
    return names


@pytest.mark.parametrize("name", _public_names())
def test_numpydoc(name):
    errors = [(code, msg) for code, msg in numpydoc_validate.validate(name)["errors"]
              if code in CHECKED]
    assert not errors, f"{name}: {errors}"

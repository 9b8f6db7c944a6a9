"""resolve_feature_spec: indices, masks, names (with encoder outputs), callables."""

import numpy as np
import pytest

from sklearn_fdp import PrivacyLeakWarning
from sklearn_fdp.features import original_column_names, resolve_feature_spec

ADULT_OUT = np.array([
    "num__age", "num__hours-per-week", "cat__sex_Female", "cat__sex_Male",
    "cat__race_White", "cat__race_Black", "remainder__fnlwgt",
])
ADULT_IN = ["age", "hours-per-week", "sex", "race", "fnlwgt"]


def _resolve(public=None, private=None, n=5, names=None, **kw):
    return resolve_feature_spec(public, private, n, names, "Est", **kw)


def test_indices_negative_and_duplicates():
    np.testing.assert_array_equal(_resolve(public=[0, -1, 0]), [1, 0, 0, 0, 1])
    np.testing.assert_array_equal(_resolve(private=[1, -2, 1]), [1, 0, 1, 0, 1])
    np.testing.assert_array_equal(_resolve(public=np.array([2])), [0, 0, 1, 0, 0])
    np.testing.assert_array_equal(_resolve(public=3), [0, 0, 0, 1, 0])
    assert _resolve(public=[]).sum() == 0  # every feature private is fine


def test_boolean_mask():
    mask = np.array([True, False, True, False, False])
    np.testing.assert_array_equal(_resolve(public=mask), mask)
    np.testing.assert_array_equal(_resolve(private=list(mask)), ~mask)
    with pytest.raises(ValueError, match="length 3 but X has 5 columns"):
        _resolve(public=[True, False, True])


def test_exact_names_and_encoder_outputs():
    names = ADULT_OUT
    mask = _resolve(private=["sex"], n=len(names), names=names)
    assert list(names[~mask]) == ["cat__sex_Female", "cat__sex_Male"]
    mask = _resolve(public=["age", "race", "fnlwgt"], n=len(names), names=names,
                    original_names=ADULT_IN)
    assert list(names[mask]) == ["num__age", "cat__race_White", "cat__race_Black",
                                 "remainder__fnlwgt"]
    # Without the original names a public one-hot match cannot be told from a
    # different column that starts with "race": the same columns, with a warning.
    with pytest.warns(PrivacyLeakWarning, match=r"\{'race': \['cat__race_White'"):
        mask2 = _resolve(public=["age", "race", "fnlwgt"], n=len(names), names=names)
    np.testing.assert_array_equal(mask, mask2)
    # An exact column name selects that column only.
    mask = _resolve(public=["cat__sex_Male"], n=len(names), names=names)
    assert list(names[mask]) == ["cat__sex_Male"]
    # Plain one-hot outputs (OneHotEncoder without ColumnTransformer prefixes).
    plain = np.array(["sex_Female", "sex_Male", "age"])
    mask = _resolve(private="sex", n=3, names=plain)
    np.testing.assert_array_equal(mask, [False, False, True])


def test_callable():
    mask = _resolve(public=lambda c: c.startswith("num__"), n=len(ADULT_OUT), names=ADULT_OUT)
    assert list(ADULT_OUT[mask]) == ["num__age", "num__hours-per-week"]
    with pytest.raises(ValueError, match="callable.*no feature names"):
        _resolve(public=lambda c: True)


@pytest.mark.parametrize("kwargs,match", [
    (dict(public=["sex", "salary"], names=ADULT_OUT, n=7), r"unknown columns \['salary'\]"),
    (dict(public=[0, 5, -7]), r"indices \[5, -7\] out of range.*5 columns"),
    (dict(public=[0], private=[1]), "exactly one of `public_features` and.*both are"),
    (dict(), "exactly one of.*neither is"),
    (dict(private=["sex"]), r"names columns \(\['sex'\]\) but X has no feature names"),
    (dict(public=[0, "a"]), "mixes entry types"),
    (dict(public=1.5), "column indices, a boolean mask"),
])
def test_bad_specs_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        _resolve(**{"n": 5, **kwargs})


def test_nothing_private_raises_unless_label_private():
    with pytest.raises(ValueError, match="nothing is protected.*non-private model"):
        _resolve(private=[], label_public=True)
    with pytest.raises(ValueError, match="nothing is protected"):
        _resolve(public=[True] * 5, label_public=True)
    # Label DP: every feature public, the label private.
    assert _resolve(private=[], label_public=False).all()


def test_error_names_the_estimator_and_parameter():
    with pytest.raises(ValueError, match="`private_features` of Est"):
        _resolve(private=[9])


def test_a_name_does_not_match_a_longer_column_that_shares_its_prefix():
    """Issue 16 item 8: public_features=["age"] must not make age_at_diagnosis public."""
    # A DataFrame's own columns: names are the original columns, matched exactly.
    plain = np.array(["age", "age_at_diagnosis", "sex_ratio", "sex"])
    mask = _resolve(public=["age"], n=4, names=plain, label_public=False)
    assert list(plain[mask]) == ["age"]
    mask = _resolve(private=["age", "sex"], n=4, names=plain)
    assert list(plain[~mask]) == ["age", "sex"]
    # Transformer outputs: "age" keeps its one-hot expansion and its scaled
    # column, not the column age_at_diagnosis (passed through or scaled) nor the
    # one-hot outputs of age_at_diagnosis_days: that takes the original names.
    names = np.array(["num__age_at_diagnosis", "cat__age_young", "cat__age_old",
                      "cat__age_at_diagnosis_days_early", "num__hours"])
    originals = ["age", "age_at_diagnosis", "age_at_diagnosis_days", "hours"]
    mask = _resolve(public=["age", "hours"], n=5, names=names, original_names=originals)
    assert list(names[mask]) == ["cat__age_young", "cat__age_old", "num__hours"]
    with original_column_names(originals):  # as PrivatePipeline passes them
        mask = _resolve(private=["age"], n=5, names=names)
    assert list(names[~mask]) == ["cat__age_young", "cat__age_old"]
    # Unknown original names: the extra matches are named in a warning.
    with pytest.warns(PrivacyLeakWarning, match=r"'num__age_at_diagnosis'"):
        _resolve(public=["age", "hours"], n=5, names=names, label_public=False)

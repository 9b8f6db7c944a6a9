"""Named protected columns through a Pipeline, on Adult, inside GridSearchCV.
==========================================================================

A notebook-style script (``# %%`` cells; runs top to bottom with
``python examples/adult_pipeline.py``, about a minute on one core). It

1. builds a pipeline on the *raw* Adult DataFrame whose private last step
   names the protected columns by their original names (``"sex"``,
   ``"race"``, ...), although the ColumnTransformer before it one-hot encodes
   them and outputs a sparse matrix without column names;
2. shows the privacy warning a naive pipeline raises (its scaler and encoder
   learn from protected columns), and the fix;
3. tunes the clean pipeline with scikit-learn's GridSearchCV on a subsample
   and prints what :func:`sklearn_fdp.privacy_report` says about the search
   (not private) and about the pipeline it selected.

The printed output of one run is pasted in ``docs/examples/adult_pipeline.md``.
"""

# %% [markdown]
# ## Setup
# The bundled UCI Adult data: adult.data to train (and tune on), adult.test to
# evaluate once at the end. Six attributes are protected; the other columns and
# the income label are public (``label_public=True``), as in the project's
# Adult benchmarks.

# %%
import textwrap
import warnings

import numpy as np
from sklearn.compose import ColumnTransformer
from sklearn.model_selection import GridSearchCV
from sklearn.preprocessing import (
    FunctionTransformer,
    MinMaxScaler,
    OneHotEncoder,
    StandardScaler,
)

from sklearn_fdp import FeatureDPLogisticRegression, PrivacyLeakWarning, privacy_report
from sklearn_fdp.datasets import load_adult
from sklearn_fdp.pipeline import make_private_pipeline

X_train, y_train, X_test, y_test = load_adult(return_X_y=True)
print(f"train {X_train.shape}, test {X_test.shape}")

PRIVATE = ["sex", "race", "marital-status", "relationship", "capital-gain", "capital-loss"]
PUBLIC_NUMERIC = ["age", "education-num", "hours-per-week"]
PUBLIC_CATEGORICAL = ["workclass", "education", "occupation", "native-country"]
PRIVATE_NUMERIC = ["capital-gain", "capital-loss"]
# The category lists of the protected categorical columns, copied from
# adult.names (public documentation of the Census coding), not read off the data.
PRIVATE_CATEGORIES = {
    "sex": ["Female", "Male"],
    "race": ["White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"],
    "marital-status": ["Married-civ-spouse", "Divorced", "Never-married", "Separated",
                       "Widowed", "Married-spouse-absent", "Married-AF-spouse"],
    "relationship": ["Wife", "Own-child", "Husband", "Not-in-family", "Other-relative",
                     "Unmarried"],
}


def private_model(**params):
    """FDP logistic regression protecting the six columns, by their original names."""
    return FeatureDPLogisticRegression(
        private_features=PRIVATE, label_public=True, epsilon=1.0, delta=1e-6,
        accountant="rdp", random_state=0, **params)


def say(text):
    print(textwrap.fill(text, width=88, subsequent_indent="    "))


# %% [markdown]
# ## 1. A naive pipeline, and the warning it raises
# ``StandardScaler`` on every numeric column and ``OneHotEncoder()`` (categories
# learnt from the data) on every categorical one. The scaler's means of
# capital-gain/loss and the category lists of sex, race, ... are statistics of
# the protected values, published without noise.

# %%
naive = make_private_pipeline(
    ColumnTransformer([
        ("num", StandardScaler(), PUBLIC_NUMERIC + PRIVATE_NUMERIC),
        ("cat", OneHotEncoder(handle_unknown="ignore"),
         PUBLIC_CATEGORICAL + list(PRIVATE_CATEGORIES)),
    ]),
    private_model(),
)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always", PrivacyLeakWarning)
    naive.fit(X_train, y_train)
for w in caught:
    say(f"{w.category.__name__}: {w.message}")

# %% [markdown]
# ## 2. The clean pipeline
# Public columns may be preprocessed with anything (their statistics are public
# under feature DP): MinMaxScaler and OneHotEncoder learn from them for free.
# Protected columns go through data-independent maps: explicit category lists,
# fixed bounds (99,999 is the Census top code). A constant factor then bounds
# every row's norm by 1 (13 columns, each in [0, 1] or one-hot); a Normalizer
# would divide the public columns by a norm that contains capital-gain, and
# the pipeline would warn about that too.

# %%
def fixed_log_scale(X, upper):
    """log1p(clip(x, 0, upper)) / log1p(upper): a fixed map to [0, 1]."""
    return np.log1p(np.clip(np.asarray(X, dtype=float), 0.0, upper)) / np.log1p(upper)


def scale(X, factor):
    """Multiply by a constant (works on sparse matrices)."""
    return X * factor


# 13 input columns, each adding at most 1 to a row's squared norm (numbers in
# [0, 1], one-hot blocks with at most one 1): rows end with norm <= 1.
N_INPUT_COLUMNS = len(PUBLIC_NUMERIC + PUBLIC_CATEGORICAL + PRIVATE)


def make_clean_pipeline():
    prep = ColumnTransformer([
        ("pub_num", MinMaxScaler(clip=True), PUBLIC_NUMERIC),
        ("pub_cat", OneHotEncoder(handle_unknown="ignore"), PUBLIC_CATEGORICAL),
        ("priv_cat", OneHotEncoder(categories=list(PRIVATE_CATEGORIES.values()),
                                   handle_unknown="ignore"), list(PRIVATE_CATEGORIES)),
        ("priv_num", FunctionTransformer(fixed_log_scale, kw_args={"upper": 99999.0},
                                         feature_names_out="one-to-one"), PRIVATE_NUMERIC),
    ])  # fnlwgt is dropped; the output is a sparse matrix without column names
    bound = FunctionTransformer(scale, kw_args={"factor": 1 / np.sqrt(N_INPUT_COLUMNS)},
                                accept_sparse=True, feature_names_out="one-to-one")
    return make_private_pipeline(prep, bound, private_model())


clean = make_clean_pipeline()
with warnings.catch_warnings():
    warnings.simplefilter("error", PrivacyLeakWarning)  # none is raised
    clean.fit(X_train, y_train)
clf = clean[-1]
print(f"the final step sees {len(clf.feature_names_)} columns; "
      f"{len(clf.private_features_)} of them protected:")
say(", ".join(str(clf.feature_names_[i]) for i in clf.private_features_))
print(f"test accuracy {clean.score(X_test, y_test):.4f}, epsilon spent {clf.epsilon_:.3f}")

# %% [markdown]
# ## 3. GridSearchCV over the clean pipeline
# Four settings, 3-fold cross-validation on an 8,000-row subsample of adult.data
# (to keep the example fast). **This search is not private**: it compares
# validation scores computed on the protected data without noise, and each of
# its 13 fits spends the budget again. privacy_report says so. For a private
# search use ``sklearn_fdp.model_selection.PrivateRandomizedSearchCV``
# (Papernot & Steinke 2022), which accounts the selection too.

# %%
rng = np.random.default_rng(0)
rows = rng.choice(len(y_train), size=8000, replace=False)
X_sub, y_sub = X_train.iloc[rows], y_train.iloc[rows]
search = GridSearchCV(
    make_clean_pipeline(),
    {"featuredplogisticregression__epochs": [2, 5],
     "featuredplogisticregression__max_grad_norm": [0.3, 1.0]},
    cv=3,
)
search.fit(X_sub, y_sub)
for params, score in zip(search.cv_results_["params"], search.cv_results_["mean_test_score"]):
    short = {k.split("__")[1]: v for k, v in params.items()}
    print(f"  {short}: mean CV accuracy {score:.4f}")
print("best:", {k.split("__")[1]: v for k, v in search.best_params_.items()})
print()
print(privacy_report(search))

# %% [markdown]
# ## 4. The privacy report of the selected pipeline
# Refitted on the full training file with the selected settings. The report
# lists every step: public-side steps are free, data-independent ones free,
# the private one spends epsilon on the protected columns. (It describes this
# one fit; the search that chose the settings above is not covered.)

# %%
best = make_clean_pipeline().set_params(**search.best_params_).fit(X_train, y_train)
print(f"test accuracy {best.score(X_test, y_test):.4f}")
print(privacy_report(best))

"""The sklearn-fdp command line (sklearn_fdp.cli) and the progress hook (sklearn_fdp._progress)."""

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

pytest.importorskip("skops")
pytest.importorskip("tqdm")

import skops.io as sio  # noqa: E402

from sklearn_fdp import DPSGDClassifier, FeatureDPLogisticRegression  # noqa: E402
from sklearn_fdp._progress import MAX_REPORTS, progress_hook, progress_reporter  # noqa: E402
from sklearn_fdp.cli import _load, main  # noqa: E402

N_ROWS = 400
# A large ε keeps the fits short (few, light noise); calibration is fast at any ε (issue 18).
EPS = "4"
PRIVATE_ARGS = ["--private", "sex,age", "--categories", "sex=F|M", "--bounds", "age=18:80"]


def _frame(n=N_ROWS, seed=0):
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({
        "age": rng.integers(18, 80, n),
        "hours": rng.normal(40, 10, n).round(1),
        "sex": rng.choice(["F", "M"], n),
        "job": rng.choice(["a", "b", "c"], n),
        "flag": rng.random(n) < 0.3,
    })
    logit = 0.05 * (frame["age"] - 45) + (frame["sex"] == "M") * 1.0
    frame["y"] = np.where(rng.random(n) < 1 / (1 + np.exp(-logit)), "hi", "lo")
    return frame


@pytest.fixture
def data(tmp_path):
    train, test = tmp_path / "train.csv", tmp_path / "test.csv"
    _frame(seed=0).to_csv(train, index=False)
    _frame(n=200, seed=1).to_csv(test, index=False)
    return tmp_path, str(train), str(test)


def _train(csv, out, *extra, model="fdp-logreg", quiet=True):
    args = ["train", csv, "--target", "y", "--model", model, "--epochs", "2",
            "--epsilon", EPS, "--delta", "1e-4", "--random-state", "0", "--out", str(out)]
    if model in ("fdp-logreg", "fdp-mlp") and "--public" not in extra:
        args += PRIVATE_ARGS
    elif model not in ("fdp-logreg", "fdp-mlp"):
        args += ["--categories", "sex=F|M", "--categories", "job=a|b|c",
                 "--bounds", "age=18:80", "--bounds", "hours=0:100"]
    if quiet:
        args.append("--quiet")
    return main([*args, *extra])


# -- round trip -----------------------------------------------------------------------------


def test_train_evaluate_report_round_trip(data, capsys):
    tmp, train, test = data
    out = tmp / "model.skops"
    assert _train(train, out) == 0
    text = capsys.readouterr().out
    assert "FeatureDPLogisticRegression" in text and "saved to" in text
    assert out.exists()

    assert main(["evaluate", str(out), test, "--target", "y"]) == 0
    text = capsys.readouterr().out
    assert "accuracy" in text and "log loss" in text

    assert main(["evaluate", str(out), test, "--target", "y", "--json"]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert scores["rows"] == 200
    assert 0 <= scores["accuracy"] <= 1 and 0 <= scores["balanced_accuracy"] <= 1
    assert scores["log_loss"] > 0 and sorted(scores["classes"]) == ["hi", "lo"]

    assert main(["report", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Privacy report" in text and "NOT PRIVATE" not in text

    assert main(["report", str(out), "--json", "--delta", "1e-5"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["is_private"] and report["delta"] == 1e-5
    # The protected columns are the one-hot/scaled outputs of sex and age only.
    assert "cat__sex_F" in report["protected_unit"] and "num__age" in report["protected_unit"]
    assert "job" not in report["protected_unit"]


def test_loaded_model_predicts_like_the_fitted_one(data):
    tmp, train, test = data
    out = tmp / "m.skops"
    assert _train(train, out) == 0
    model = _load(str(out))
    X = pd.read_csv(test).drop(columns=["y"])
    proba = model.predict_proba(X)
    assert proba.shape == (200, 2) and np.allclose(proba.sum(axis=1), 1)
    est = model[-1]
    assert est.epsilon_ <= 4.0 + 1e-9 and est.delta_ == 1e-4


@pytest.mark.parametrize("model", ["dpsgd", "dpsgdf", "fdp-mlp"])
def test_other_models_round_trip(data, capsys, model):
    if model == "fdp-mlp":
        pytest.importorskip("torch")
    tmp, train, test = data
    out = tmp / f"{model}.skops"
    assert _train(train, out, model=model) == 0
    assert main(["evaluate", str(out), test, "--target", "y", "--json"]) == 0
    capsys.readouterr()
    assert main(["report", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["is_private"]
    whole = model in ("dpsgd", "dpsgdf")
    assert ("whole record" in report["protected_unit"]) == whole


def test_preprocessing_is_data_independent_for_private_columns(data):
    """Private category lists come from --categories, bounds from --bounds; rows have norm <= 1."""
    tmp, train, _ = data
    frame = pd.read_csv(train)
    only_f = frame.assign(sex="F")  # "M" never occurs in the private column
    only_f.to_csv(tmp / "only_f.csv", index=False)
    models = []
    for name, csv in (("a", train), ("b", str(tmp / "only_f.csv"))):
        assert _train(csv, tmp / f"{name}.skops") == 0
        models.append(_load(str(tmp / f"{name}.skops")))
    cols = [m.named_steps["preprocess"].named_steps["columns"] for m in models]
    enc = [c.named_transformers_["cat"].named_steps["onehot"] for c in cols]
    sex = [list(e.categories_[0]) for e in enc]
    assert sex[0] == sex[1] == ["F", "M"]
    num = [c.named_transformers_["num"].feature_bounds for c in cols]
    assert num[0][0][0] == num[1][0][0] == 18.0  # age: the given bounds
    Z = models[0][:-1].transform(frame.drop(columns=["y"]))
    assert np.linalg.norm(np.asarray(Z), axis=1).max() <= 1 + 1e-12


def _old_scale_columns(X, lower, upper, log):
    """The CLI's numeric map before BoundedScaler (issue 17), verbatim."""
    X = np.clip(np.asarray(X, dtype=np.float64), lower, upper)
    lo = np.where(log, np.log1p(np.maximum(lower, -1 + 1e-12)), lower)
    hi = np.where(log, np.log1p(np.maximum(upper, -1 + 1e-12)), upper)
    with np.errstate(divide="ignore", invalid="ignore"):
        values = np.where(log, np.log1p(np.where(log, X, 0.0)), X)
        out = np.where(hi > lo, (values - lo) / np.where(hi > lo, hi - lo, 1.0), 0.0)
    return out


def test_numeric_preprocessing_is_bit_identical_to_the_old_map(data, tmp_path):
    """Declared bounds (linear, log with LO < 0, values outside), a bool column and a public
    column's data range give the bytes of the implementation before BoundedScaler."""
    _, train, _ = data
    out = tmp_path / "m.skops"
    frame = pd.read_csv(train)
    X = frame.drop(columns=["y"])
    test = _frame(n=200, seed=1).drop(columns=["y"])
    test.loc[0, "age"], test.loc[1, "hours"] = 10, 1e6  # outside the bounds: clipped
    for extra, bounds in (
            (["--bounds", "age=30:70:log", "--bounds", "hours=-0.5:45:log"],
             {"age": (30.0, 70.0, True), "hours": (-0.5, 45.0, True), "flag": (0.0, 1.0, False)}),
            ([], {"age": (18.0, 80.0, False),
                  "hours": (X["hours"].min(), X["hours"].max(), False),
                  "flag": (0.0, 1.0, False)})):
        assert _train(train, out, *extra) == 0
        model = _load(str(out))
        lower, upper, log = (np.array([b[i] for b in bounds.values()]) for i in range(3))
        expected = _old_scale_columns(test[list(bounds)].astype(np.float64), lower, upper, log)
        Z = model[:-1].transform(test)
        got = Z[[f"num__{c}" for c in bounds]].to_numpy()
        factor = 1.0 / np.sqrt(5.0)  # 5 input columns
        np.testing.assert_array_equal(got, expected * factor, strict=True)


def test_schema_file_and_integer_coded_categories(tmp_path, capsys):
    frame = _frame()
    frame["grade"] = np.random.default_rng(3).integers(1, 4, len(frame))
    csv = tmp_path / "d.csv"
    frame.to_csv(csv, index=False)
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps({"categories": {"sex": ["F", "M"], "grade": [1, 2, 3]},
                                  "bounds": {"age": [18, 80, "log"]}}))
    out = tmp_path / "m.skops"
    rc = main(["train", str(csv), "--target", "y", "--private", "sex,age,grade",
               "--schema", str(schema), "--epochs", "1", "--epsilon", EPS,
               "--random-state", "0", "--delta", "1e-4", "--out", str(out), "--quiet"])
    assert rc == 0, capsys.readouterr().err
    model = _load(str(out))
    names = list(model[:-1].get_feature_names_out())
    assert {"cat__grade_1", "cat__grade_2", "cat__grade_3"} <= set(names)
    private = [names[i] for i in model[-1].private_features_]
    assert sorted(private) == sorted(["num__age", "cat__sex_F", "cat__sex_M", "cat__grade_1",
                                      "cat__grade_2", "cat__grade_3"])


# -- errors: exit 2, a message naming the problem, no traceback -----------------------------


def _error(capsys, argv):
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize("extra, expected", [
    (["--target", "nope"], ["'nope'", "Available columns", "'sex'"]),
    (["--private", "sex,nope", "--categories", "sex=F|M"], ["--private", "'nope'",
                                                             "Available columns"]),
    (["--private", "sex,age", "--bounds", "age=18:80"], ["'sex'", "--categories 'sex="]),
    (["--private", "sex,age", "--categories", "sex=F|M"], ["'age'", "--bounds age="]),
    (["--private", "sex", "--public", "age"], ["exactly one of --private"]),
    (["--public", "y"], ["--public names the target"]),
    (["--private", "sex", "--categories", "sex"], ["COL=A|B|C"]),
    (["--private", "sex", "--categories", "sex=F|M", "--bounds", "job=0:1"],
     ["'job'", "non-numeric"]),
    (["--private", "sex", "--categories", "sex=F|M", "--bounds", "age=80:18"], ["LO < HI"]),
    (["--private", "sex", "--categories", "sex=F|M", "--drop", "nope"], ["--drop", "'nope'"]),
    (["--private", "sex", "--categories", "sex=F|M", "--out", "/no/such/dir/m.skops"],
     ["--out", "does not exist"]),
])
def test_train_data_errors(data, capsys, extra, expected):
    tmp, train, _ = data
    argv = ["train", train, "--target", "y", "--out", str(tmp / "m.skops"), "--quiet"]
    # A later --target overrides the first (argparse keeps the last value).
    err = _error(capsys, [*argv, *extra])
    for text in expected:
        assert text in err
    assert not (tmp / "m.skops").exists()


@pytest.mark.parametrize("value", ["0", "-1", "abc", "inf", "nan"])
def test_bad_epsilon(data, capsys, value):
    tmp, train, _ = data
    err = _error(capsys, ["train", train, "--target", "y", *PRIVATE_ARGS, f"--epsilon={value}",
                          "--out", str(tmp / "m.skops")])
    assert "--epsilon" in err and repr(value) in err


@pytest.mark.parametrize("value", ["0", "1", "1.5", "x"])
def test_bad_delta(data, capsys, value):
    tmp, train, _ = data
    err = _error(capsys, ["train", train, "--target", "y", *PRIVATE_ARGS, f"--delta={value}",
                          "--out", str(tmp / "m.skops")])
    assert "--delta" in err


def test_record_level_model_rejects_feature_split(data, capsys):
    tmp, train, _ = data
    err = _error(capsys, ["train", train, "--target", "y", "--model", "dpsgd", "--private",
                          "sex", "--out", str(tmp / "m.skops")])
    assert "--private applies to the feature-DP models" in err


def test_record_level_model_needs_every_schema(data, capsys):
    tmp, train, _ = data
    err = _error(capsys, ["train", train, "--target", "y", "--model", "dpsgd",
                          "--out", str(tmp / "m.skops")])
    for col in ("'sex'", "'job'", "'age'", "'hours'"):
        assert col in err


@pytest.mark.parametrize("content, expected", [
    ("", "is empty"),
    ("age,sex,y\n", "no data rows"),
    ('a,b,y\n1,2,"x\n', "could not be parsed"),
])
def test_bad_csv_files(tmp_path, capsys, content, expected):
    csv = tmp_path / "bad.csv"
    csv.write_text(content)
    err = _error(capsys, ["train", str(csv), "--target", "y", "--private", "a",
                          "--out", str(tmp_path / "m.skops")])
    assert expected in err


def test_missing_csv_file(tmp_path, capsys):
    err = _error(capsys, ["train", str(tmp_path / "none.csv"), "--target", "y",
                          "--private", "a", "--out", str(tmp_path / "m.skops")])
    assert "does not exist" in err


def test_target_with_one_class(tmp_path, capsys):
    csv = tmp_path / "one.csv"
    _frame().assign(y="hi").to_csv(csv, index=False)
    err = _error(capsys, ["train", str(csv), "--target", "y", *PRIVATE_ARGS,
                          "--out", str(tmp_path / "m.skops")])
    assert "single class" in err and "'hi'" in err


@pytest.mark.parametrize("row, column", [(3, "y"), (5, "hours")],
                         ids=["target", "numeric_column"])
def test_missing_values_are_named(tmp_path, capsys, row, column):
    frame = _frame()
    frame.loc[row, column] = np.nan
    csv = tmp_path / "na.csv"
    frame.to_csv(csv, index=False)
    err = _error(capsys, ["train", str(csv), "--target", "y", *PRIVATE_ARGS,
                          "--out", str(tmp_path / "m.skops")])
    assert f"'{column}'" in err and "missing" in err


def test_numeric_column_with_infinite_values(data, capsys):
    """BoundedScaler refuses infinities; the CLI says so in one line (train and evaluate)."""
    tmp, train, test = data
    frame = _frame()
    frame.loc[5, "hours"] = np.inf
    frame.to_csv(tmp / "inf.csv", index=False)
    err = _error(capsys, ["train", str(tmp / "inf.csv"), "--target", "y", *PRIVATE_ARGS,
                          "--out", str(tmp / "m.skops")])
    assert "'hours'" in err and "1 infinite value" in err
    assert _train(train, tmp / "m.skops") == 0
    err = _error(capsys, ["evaluate", str(tmp / "m.skops"), str(tmp / "inf.csv"),
                          "--target", "y"])
    assert "'hours'" in err and "1 infinite value" in err


def test_constant_public_column_is_dropped(tmp_path, capsys):
    """A public column constant in the data has no interval to scale from: dropped, noted."""
    csv = tmp_path / "const.csv"
    _frame().assign(hours=7.5).to_csv(csv, index=False)
    assert _train(str(csv), tmp_path / "m.skops", quiet=True) == 0
    err = capsys.readouterr().err
    assert "public column(s) hours: constant in the data, dropped" in err
    assert "public column(s) job: bounds/categories taken from the data" in err
    model = _load(str(tmp_path / "m.skops"))
    names = list(model[:-1].get_feature_names_out())
    assert "num__hours" not in names and "num__age" in names
    test = _frame(n=50, seed=1)
    test.to_csv(tmp_path / "t.csv", index=False)
    assert main(["evaluate", str(tmp_path / "m.skops"), str(tmp_path / "t.csv"),
                 "--target", "y"]) == 0


def test_model_file_of_an_older_release_is_refused_clearly(tmp_path, capsys, monkeypatch):
    """A file naming the numeric scaler of releases before BoundedScaler: retrain it."""
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import FunctionTransformer

    import sklearn_fdp.cli as cli

    def _scale_columns(X):  # stands in for the removed function, saved by name
        return X

    _scale_columns.__module__ = cli.__name__
    monkeypatch.setattr(cli, "_scale_columns", _scale_columns, raising=False)
    path = tmp_path / "old.skops"
    sio.dump(Pipeline([("preprocess", FunctionTransformer(cli._scale_columns))]), path)
    monkeypatch.delattr(cli, "_scale_columns")
    err = _error(capsys, ["report", str(path)])
    assert "older sklearn-fdp" in err and "train it again" in err


def test_evaluate_errors(data, capsys):
    tmp, train, test = data
    out = tmp / "m.skops"
    assert _train(train, out) == 0
    pd.read_csv(test).drop(columns=["job"]).to_csv(tmp / "nojob.csv", index=False)
    err = _error(capsys, ["evaluate", str(out), str(tmp / "nojob.csv"), "--target", "y"])
    assert "'job'" in err
    err = _error(capsys, ["evaluate", str(out), test, "--target", "income"])
    assert "'income'" in err and "Available columns" in err
    err = _error(capsys, ["evaluate", train, test, "--target", "y"])  # a CSV, not a model
    assert "not a skops model file" in err
    err = _error(capsys, ["report", str(tmp / "none.skops")])
    assert "does not exist" in err


def test_untrusted_model_file_is_refused(tmp_path, capsys):
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import FunctionTransformer

    path = tmp_path / "evil.skops"
    sio.dump(Pipeline([("preprocess", FunctionTransformer(os.system))]), path)
    err = _error(capsys, ["report", str(path)])
    assert "will not load" in err and "system" in err


# -- progress -------------------------------------------------------------------------------


def test_progress_bar_on_stderr_and_identical_model(data, capsys):
    tmp, train, _ = data
    assert _train(train, tmp / "quiet.skops", quiet=True) == 0
    assert "step" not in capsys.readouterr().err
    assert _train(train, tmp / "bar.skops", quiet=False) == 0
    err = capsys.readouterr().err
    assert "FeatureDPLogisticRegression" in err and "100%" in err and "step" in err
    a, b = (_load(str(tmp / f"{n}.skops"))[-1] for n in ("quiet", "bar"))
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)


def _fit_with_and_without_hook(make, X, y):
    calls = []
    plain = make().fit(X, y)
    with progress_hook(lambda done, total: calls.append((done, total))):
        hooked = make().fit(X, y)
    return plain, hooked, calls


def _check_calls(calls):
    assert calls, "the hook was never called"
    totals = {t for _, t in calls}
    for total in totals:
        run = [d for d, t in calls if t == total]
        assert run[-1] == total and len(run) <= MAX_REPORTS + 1
        assert run == sorted(run)


def test_progress_hook_dense_and_lazy_sparse_paths_bit_identical(monkeypatch):
    import sklearn_fdp._engine._loop as loop

    lazy_runs = []
    real_lazy = loop.run_lazy_sparse

    def spy(*args, **kwargs):
        lazy_runs.append(1)
        return real_lazy(*args, **kwargs)

    monkeypatch.setattr(loop, "run_lazy_sparse", spy)
    rng = np.random.default_rng(0)
    X = rng.random((300, 20)) * (rng.random((300, 20)) < 0.2)
    X /= np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1)
    y = (X[:, 0] > X[:, 1]).astype(int)

    def dense():
        return FeatureDPLogisticRegression(private_features=[0, 1], epochs=10, batch_size=16,
                                           epsilon=4.0, delta=1e-4, random_state=0)

    plain, hooked, calls = _fit_with_and_without_hook(dense, X, y)
    np.testing.assert_array_equal(plain.coef_, hooked.coef_)
    _check_calls(calls)
    assert max(t for _, t in calls) > MAX_REPORTS  # throttled, not one call per step

    def lazy():  # CSR without momentum: run_lazy_sparse
        return DPSGDClassifier(momentum=0.0, epochs=5, epsilon=4.0, delta=1e-4,
                               random_state=0)

    plain, hooked, calls = _fit_with_and_without_hook(lazy, sp.csr_matrix(X), y)
    np.testing.assert_array_equal(plain.coef_, hooked.coef_)
    _check_calls(calls)
    assert len(lazy_runs) == 2  # both fits took the lazy-noise path


def test_progress_hook_mlp_bit_identical():
    torch = pytest.importorskip("torch")
    from sklearn_fdp import MLPFeatureDP

    rng = np.random.default_rng(0)
    X = rng.random((120, 4)) / 2
    y = (X[:, 0] > X[:, 1]).astype(int)

    def make():
        return MLPFeatureDP(hidden_layer_sizes=(5,), private_features=[0], epochs=2,
                            epsilon=4.0, delta=1e-3, device="cpu", random_state=0)

    plain, hooked, calls = _fit_with_and_without_hook(make, X, y)
    for p, q in zip(plain.module_.parameters(), hooked.module_.parameters()):
        assert torch.equal(p, q)
    _check_calls(calls)


def test_progress_reporter_without_hook_and_throttling():
    assert progress_reporter(1000) is None
    calls = []
    with progress_hook(lambda d, t: calls.append(d)):
        report = progress_reporter(1000)
        for t in range(1, 1001):
            report(t)
    assert progress_reporter(1000) is None  # the hook is gone after the block
    assert calls[-1] == 1000 and len(calls) <= MAX_REPORTS + 1


# -- entry points ---------------------------------------------------------------------------


def test_help_exits_zero(capsys):
    assert main(["--help"]) == 0
    assert "train" in capsys.readouterr().out
    assert main([]) == 2  # no command: argparse usage error


def test_python_dash_m_and_console_script():
    env = {**os.environ, "PYTHONPATH": str(pathlib.Path(__file__).resolve().parents[1])}
    done = subprocess.run([sys.executable, "-m", "sklearn_fdp", "--help"], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 0 and "evaluate" in done.stdout
    script = pathlib.Path(sys.executable).with_name("sklearn-fdp")
    if not script.exists():
        pytest.skip("sklearn-fdp console script not installed (pip install -e .)")
    done = subprocess.run([str(script), "report", "--help"], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0 and "--json" in done.stdout



def test_mlp_model_file_loads_with_plain_skops(data):
    # MLPFeatureDP persists itself (weights as arrays), so a CLI file needs no
    # special loader: skops.io.load with the listed types predicts the same.
    pytest.importorskip("torch")
    tmp, train, test = data
    out = tmp / "mlp.skops"
    assert _train(train, out, model="fdp-mlp") == 0
    plain = sio.load(out, trusted=sio.get_untrusted_types(file=str(out)))
    X = pd.read_csv(test).drop(columns=["y"])
    np.testing.assert_array_equal(plain.predict_proba(X), _load(str(out)).predict_proba(X))


def test_mlp_model_file_written_before_the_mlp_split_loads(data):
    """Issue 33 moved MLPFeatureDP from neural/_mlp.py to neural/_mlp_classifier.py; a file
    naming the old module predicts as the new one."""
    pytest.importorskip("torch")
    tmp, train, test = data
    new = tmp / "mlp.skops"
    assert _train(train, new, model="fdp-mlp") == 0
    old = tmp / "mlp_old.skops"
    _rewrite_schema(new, old, [(b'"sklearn_fdp.neural._mlp_classifier"',
                                 b'"sklearn_fdp.neural._mlp"')])
    assert "sklearn_fdp.neural._mlp.MLPFeatureDP" in sio.get_untrusted_types(file=str(old))
    X = pd.read_csv(test).drop(columns=["y"])
    np.testing.assert_array_equal(_load(str(old)).predict_proba(X),
                                  _load(str(new)).predict_proba(X))


@pytest.mark.parametrize("extra", [["--epsilon", "1e-6"], ["--delta", "1e-300"]])
def test_train_at_tiny_epsilon_or_delta(data, capsys, extra):
    # Issue 22 item 2: a bare "brentq ... did not bracket a solution" came out.
    tmp, train, _ = data
    out = tmp / "m.skops"
    argv = ["train", train, "--target", "y", "--epochs", "2", "--random-state", "0",
            *PRIVATE_ARGS, "--out", str(out), "--quiet", *extra]
    rc = main(argv)
    captured = capsys.readouterr()
    if rc == 0:
        spent = float(captured.out.split("epsilon spent ")[1].split()[0])
        assert 0 < spent <= float(extra[1]) if extra[0] == "--epsilon" else spent > 0
    else:
        assert rc == 2 and "Traceback" not in captured.err
        assert "brentq" not in captured.err and "bracket" not in captured.err
        assert extra[0].lstrip("-") in captured.err


# -- issue 21: --sep, label types, stray values, report, the shipped schema, progress -------

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("sep, arg", [(";", ";"), ("\t", "\\t"), ("\t", "tab"), ("|", "|")])
def test_sep_reads_other_delimiters(data, capsys, sep, arg):
    tmp, train, test = data
    for name, path in (("train", train), ("test", test)):
        pd.read_csv(path).to_csv(tmp / f"{name}.sep", sep=sep, index=False)
    out = tmp / "m.skops"
    assert _train(str(tmp / "train.sep"), out, "--sep", arg) == 0
    capsys.readouterr()
    assert main(["evaluate", str(out), str(tmp / "test.sep"), "--target", "y",
                 "--sep", arg, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == 200


@pytest.mark.parametrize("sep, hint", [(";", "--sep ';'"), ("\t", "--sep '\\t'")])
def test_single_column_file_hints_at_sep(data, capsys, sep, hint):
    tmp, train, test = data
    pd.read_csv(train).to_csv(tmp / "semi.csv", sep=sep, index=False)
    err = _error(capsys, ["train", str(tmp / "semi.csv"), "--target", "y", *PRIVATE_ARGS,
                          "--out", str(tmp / "m.skops")])
    assert "single column" in err and hint in err
    out = tmp / "m.skops"
    assert _train(train, out) == 0
    err = _error(capsys, ["evaluate", str(out), str(tmp / "semi.csv"), "--target", "y"])
    assert hint in err


def test_bad_sep_is_a_usage_error(data, capsys):
    tmp, train, _ = data
    err = _error(capsys, ["train", train, "--target", "y", *PRIVATE_ARGS, "--sep", ";;",
                          "--out", str(tmp / "m.skops")])
    assert "--sep must be one character" in err


def test_evaluate_text_labels_against_numeric_model(data, capsys):
    """A string-label CSV against a 0/1 model: exit 2 and a message, not a traceback."""
    tmp, train, test = data
    coded = pd.read_csv(train).assign(y=lambda f: (f["y"] == "hi").astype(int))
    coded.to_csv(tmp / "coded.csv", index=False)
    out = tmp / "m.skops"
    assert _train(str(tmp / "coded.csv"), out) == 0
    err = _error(capsys, ["evaluate", str(out), test, "--target", "y"])
    assert ("target column 'y'" in err and "text labels" in err and "'hi'" in err
            and "numeric classes [0, 1]" in err)


def test_evaluate_labels_outside_the_classes(data, capsys):
    tmp, train, test = data
    out = tmp / "m.skops"
    assert _train(train, out) == 0  # classes "hi"/"lo"
    pd.read_csv(test).assign(y=lambda f: (f["y"] == "hi").astype(int)).to_csv(
        tmp / "coded.csv", index=False)
    err = _error(capsys, ["evaluate", str(out), str(tmp / "coded.csv"), "--target", "y"])
    assert "none of the labels" in err and "['hi', 'lo']" in err


def test_public_numeric_column_with_a_stray_value(data, capsys):
    """One stray string in a public numeric column: an error naming column, row and value,
    not a silent switch to one categorical feature per distinct value."""
    tmp, train, _ = data
    frame = pd.read_csv(train)
    frame["hours"] = frame["hours"].astype(object)
    frame.loc[6, "hours"] = "forty"
    frame.to_csv(tmp / "stray.csv", index=False)
    err = _error(capsys, ["train", str(tmp / "stray.csv"), "--target", "y", *PRIVATE_ARGS,
                          "--out", str(tmp / "m.skops"), "--quiet"])
    assert ("column 'hours'" in err and "data row 7 (line 8 of the file)" in err
            and "'forty'" in err and "--categories 'hours=" in err)
    # Declared categorical (by --categories or the schema): accepted as such.
    (tmp / "schema.json").write_text(json.dumps({"categories": {"hours": ["forty"]}}))
    assert _train(str(tmp / "stray.csv"), tmp / "m.skops", "--schema",
                  str(tmp / "schema.json")) == 0


def test_evaluate_numeric_column_with_a_stray_value(data, capsys):
    tmp, train, test = data
    out = tmp / "m.skops"
    assert _train(train, out) == 0
    frame = pd.read_csv(test)
    frame["age"] = frame["age"].astype(object)
    frame.loc[2, "age"] = "unknown"
    frame.to_csv(tmp / "stray.csv", index=False)
    err = _error(capsys, ["evaluate", str(out), str(tmp / "stray.csv"), "--target", "y"])
    assert "'age'" in err and "data row 3 (line 4 of the file)" in err and "'unknown'" in err


def test_report_says_which_encoders_were_learnt_from_the_data(data, capsys):
    tmp, train, _ = data
    out = tmp / "m.skops"
    assert _train(train, out) == 0  # hours (numeric) and job (categorical) are public
    capsys.readouterr()
    assert main(["report", str(out)]) == 0
    text = capsys.readouterr().out
    lines = {line.split(" (")[0].strip(): line for line in text.splitlines() if " (" in line}
    for step in ("preprocess__columns__num", "preprocess__columns__cat__onehot"):
        assert "learnt from public columns only" in lines[step], text
        assert "data-independent" not in lines[step]
    assert "learnt the bounds of hours from the training data" in text
    assert "learnt the categories of job from the training data" in text
    assert main(["report", str(out), "--json"]) == 0
    steps = {s["name"]: s for s in json.loads(capsys.readouterr().out)["steps"]}
    assert steps["preprocess__columns__cat__onehot"]["learnt_from_data"] == ["job"]
    assert steps["preprocess__columns__num"]["learnt_from_data"] == ["hours"]
    # Everything given (record-level model): nothing learnt, data-independent as before.
    assert _train(train, tmp / "d.skops", model="dpsgd") == 0
    capsys.readouterr()
    assert main(["report", str(tmp / "d.skops")]) == 0
    text = capsys.readouterr().out
    assert "learnt" not in text and "data-independent" in text


def test_progress_lines_for_every_phase(data, capsys, monkeypatch):
    from sklearn_fdp import cli

    # --quiet speaks only for a phase past QUIET_AFTER_S (5 s: a busy machine's
    # first numba compile can take that long); out of reach here.
    monkeypatch.setattr(cli, "QUIET_AFTER_S", 600.0)
    tmp, train, _ = data
    assert _train(train, tmp / "m.skops", quiet=False) == 0
    err = capsys.readouterr().err
    for phase in ("reading", "checking 400 rows", "calibrating the noise", "fitting",
                  "saving to"):
        assert f"] {phase}" in err, err
    assert _train(train, tmp / "q.skops", quiet=True) == 0
    assert "s] " not in capsys.readouterr().err


def test_documented_schema_command_runs(tmp_path, capsys, monkeypatch):
    """The --schema command of docs/cli.md, with the shipped docs/examples/adult_schema.json."""
    from sklearn_fdp.datasets import load_adult

    doc = (ROOT / "docs" / "cli.md").read_text()
    start = doc.index("$ sklearn-fdp train adult_train.csv --target income --model dpsgd")
    command = doc[start + 2:doc.index("\n\n", start)].split("\n")
    lines, outputs = [], []
    for line in command:
        if lines and not lines[-1].endswith("\\"):
            outputs.append(line)
        else:
            lines.append(line)
    argv = " ".join(line.rstrip("\\").strip() for line in lines).split()[1:]
    assert "docs/examples/adult_schema.json" in argv
    bunch = load_adult()
    bunch.frame.to_csv(tmp_path / "adult_train.csv", index=False)
    (tmp_path / "docs" / "examples").mkdir(parents=True)
    (tmp_path / "docs" / "examples" / "adult_schema.json").write_bytes(
        (ROOT / "docs" / "examples" / "adult_schema.json").read_bytes())
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed == outputs[:len(printed)] and len(printed) == len(outputs)


def test_cli_model_is_the_plain_fit_of_its_pipeline(data):
    """Calibrating through privacy_plan before the fit (the progress line) changes nothing."""
    from sklearn.base import clone

    tmp, train, _ = data
    out = tmp / "m.skops"
    assert _train(train, out, quiet=False) == 0
    model = _load(str(out))
    frame = pd.read_csv(train)
    plain = clone(model).fit(frame.drop(columns=["y"]), frame["y"])
    np.testing.assert_array_equal(model[-1].coef_, plain[-1].coef_)
    np.testing.assert_array_equal(model[-1].intercept_, plain[-1].intercept_)
    assert model[-1].noise_multiplier_ == plain[-1].noise_multiplier_


def _rewrite_schema(src, dst, replacements):
    """Copy the model file ``src`` to ``dst`` with ``replacements`` made in its schema.json."""
    import zipfile

    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for item in zin.infolist():
            data_ = zin.read(item.filename)
            if item.filename == "schema.json":
                for old, new in replacements:
                    data_ = data_.replace(old, new)
            zout.writestr(item, data_)


def test_model_file_naming_the_functions_in_the_cli_module_still_loads(data, capsys):
    """Issue 20 moved _as_strings/_scale_constant to sklearn_fdp._tabular (issue 33: to
    sklearn_fdp.preprocessing._tabular); files written before name them in sklearn_fdp.cli,
    where they are still found and trusted."""
    tmp, train, test = data
    new = tmp / "new.skops"
    assert _train(train, new) == 0
    types = sio.get_untrusted_types(file=str(new))
    assert {"sklearn_fdp.preprocessing._tabular._as_strings",
            "sklearn_fdp.preprocessing._tabular._scale_constant"} <= set(types)
    old = tmp / "old.skops"
    _rewrite_schema(new, old, [(b"sklearn_fdp.preprocessing._tabular", b"sklearn_fdp.cli")])
    assert "sklearn_fdp.cli._as_strings" in sio.get_untrusted_types(file=str(old))
    capsys.readouterr()
    assert main(["evaluate", str(old), test, "--target", "y", "--json"]) == 0
    from_old = json.loads(capsys.readouterr().out)
    assert main(["evaluate", str(new), test, "--target", "y", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == from_old


def test_model_file_naming_the_modules_before_the_preprocessing_package_still_loads(data,
                                                                                     capsys):
    """Issue 33 moved _tabular.py and _bounded.py into sklearn_fdp/preprocessing/ and
    MLPFeatureDP out of neural/_mlp.py; files written before name the old modules, read as
    the new ones."""
    tmp, train, test = data
    new = tmp / "new.skops"
    assert _train(train, new) == 0
    old = tmp / "old.skops"
    _rewrite_schema(new, old, [
        (b'"sklearn_fdp.preprocessing._tabular"', b'"sklearn_fdp._tabular"'),
        (b'"sklearn_fdp.preprocessing._bounded"', b'"sklearn_fdp._bounded"'),
    ])
    assert {"sklearn_fdp._tabular._as_strings", "sklearn_fdp._bounded.BoundedScaler"} <= set(
        sio.get_untrusted_types(file=str(old)))
    capsys.readouterr()
    assert main(["evaluate", str(old), test, "--target", "y", "--json"]) == 0
    from_old = json.loads(capsys.readouterr().out)
    assert main(["evaluate", str(new), test, "--target", "y", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == from_old


# -- issue 31: small edges ------------------------------------------------------------------


def test_evaluate_target_naming_an_input_column(data, capsys):
    # `--target age` on a model that has age as an input said the CSV "lacks
    # the column 'age'" (it has it: --target removed it from the inputs).
    tmp, train, test = data
    out = tmp / "m.skops"
    assert _train(train, out) == 0
    capsys.readouterr()
    err = _error(capsys, ["evaluate", str(out), test, "--target", "age"])
    assert "--target 'age' is an input column of the model" in err and "lacks" not in err


def test_report_json_into_a_closed_pipe_is_quiet(data, capsys):
    # `sklearn-fdp report m.skops --json | head` raised a BrokenPipeError
    # traceback once head had exited. The reader here closes its end before the
    # child writes anything, so the first write fails deterministically.
    tmp, train, _ = data
    out = tmp / "m.skops"
    assert _train(train, out) == 0
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-m", "sklearn_fdp", "report", str(out), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.wait(timeout=120)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert proc.returncode == 1


def test_quiet_still_says_a_long_phase_is_running(data, capsys, monkeypatch):
    # `train --epsilon 1e-9 --quiet` printed nothing for 101 s; a phase still
    # running after QUIET_AFTER_S now prints one line (the threshold is set to 0
    # here so that the test does not wait).
    from sklearn_fdp import cli

    tmp, train, _ = data
    monkeypatch.setattr(cli, "QUIET_AFTER_S", 0.0)
    assert _train(train, tmp / "m.skops") == 0
    err = capsys.readouterr().err
    assert "still " in err and "--quiet: shown after 0 s" in err


def test_quiet_is_silent_on_short_phases(data, capsys, monkeypatch):
    from sklearn_fdp import cli

    monkeypatch.setattr(cli, "QUIET_AFTER_S", 600.0)  # every phase here is shorter
    tmp, train, _ = data
    assert _train(train, tmp / "m.skops") == 0
    assert "still " not in capsys.readouterr().err


def test_train_at_epsilon_1e300_prints_no_numpy_warning(data, capsys):
    # The calibration's starting guess at epsilon = 1e300 printed NumPy's
    # "invalid value encountered" three times (dp-accounting's solver
    # overflowing); the fit itself keeps the noise floor and spends less.
    tmp, train, _ = data
    args = ["train", train, "--target", "y", "--model", "fdp-logreg", "--epochs", "2",
            "--epsilon", "1e300", "--delta", "1e-4", "--random-state", "0",
            "--out", str(tmp / "m.skops"), "--quiet", *PRIVATE_ARGS]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "invalid value" not in captured.err and "RuntimeWarning" not in captured.err
    assert "epsilon spent" in captured.out


# -- --public-model (issue 34) ---------------------------------------------------------------


def test_public_model_hgb_round_trip(data, capsys):
    tmp, train, test = data
    out = tmp / "stacked.skops"
    assert _train(train, out, "--public-model", "hgb", "--label-public") == 0
    text = capsys.readouterr().out
    assert "FeatureDPStackingClassifier" in text and "steps" in text
    model = _load(str(out))  # the CLI's own loader trusts the boosted trees
    est = model[-1]
    assert type(est).__name__ == "FeatureDPStackingClassifier"
    assert type(est.public_estimator_).__name__ == "HistGradientBoostingClassifier"
    assert est.final_estimator_.epochs == 2 and est.epsilon_ <= float(EPS)
    assert main(["evaluate", str(out), test, "--target", "y"]) == 0
    assert "accuracy" in capsys.readouterr().out
    assert main(["report", str(out)]) == 0
    assert "HistGradientBoostingClassifier" in capsys.readouterr().out


def test_public_model_needs_a_public_label(data, capsys):
    tmp, train, _ = data
    assert _train(train, tmp / "m.skops", "--public-model", "hgb") == 2
    err = capsys.readouterr().err
    assert "--public-model hgb" in err and "--label-public" in err

"""Attribute inference on Adult's protected ``sex`` column, next to Thm. 4's bound.

Protocol:

* data: :func:`sklearn_fdp.datasets.load_adult`; every model is a Pipeline
  ``make_adult_preprocessor()`` (data-independent, 105 columns, its default
  row scaling, recorded in the JSON) →
  classifier, fitted on the raw adult.data rows, so the attack completes the
  raw ``sex`` column with "Female" / "Male".
* attacked records: the model's **training** records (members), since that
  is what DP and feature DP bound. Setting "full": all 32,561 rows of
  adult.data; setting "subsample": a fixed 3,000-row subsample (seed 0), as
  in ``benchmarks/bench_fdp.py``.
* the attacker knows the model, every other raw column of the record
  (public columns *and* the other protected ones: race, marital-status,
  relationship, capital-gain, capital-loss) and its label; it has auxiliary
  data: a fixed random half of adult.test (seed 0). A model that is feature
  DP relative to the public part is feature DP relative to this finer
  knowledge too (a simulator may ignore what it is given), and plain DP is
  feature DP for every public part (FDP paper, Prop. 2), so Thm. 4 applies
  with the baseline measured from the same knowledge.
* attack: :class:`sklearn_fdp.audit.AttributeInferenceAttack` with
  ``prior="conditional"``: a candidate scores log p(sex | other columns)
  (a logistic regression fitted on the auxiliary half) plus λ · log
  p_model(label | record completed with the candidate). λ = 1 is the
  Bayesian attacker; a larger λ exploits overconfident (overfit) models.
  The attacker picks λ from {1, 2, 4, ..., 256} with a *shadow model*: it
  splits its auxiliary half in two (seed 1), trains the same estimator
  (same settings, seed 1000) on one part and attacks those shadow members
  with a prior learnt on the other part. It keeps λ = 1 unless some λ > 1
  beats it on the shadow members by more than 2 standard errors of the
  paired difference; then it takes the most accurate such λ. (This rule
  was adopted after a first run in which λ picked by shadow accuracy alone
  followed noise for the DP models and made their attack *weaker*.) No
  attacked record is used to choose λ. Results at λ = 1 are reported too.
* baseline (Thm. 4's Ball): a logistic regression fitted on the auxiliary
  half predicting sex from the other columns *and* the label, evaluated on
  the same attacked records. Its accuracy estimates the best guess without
  the model from below.
* control: the same attack on the other half of adult.test (non-members).
* models: non-private LogisticRegression (defaults, max_iter=2000);
  DPSGDClassifier and FeatureDPLogisticRegression (private_features =
  ADULT_PROTECTED, label public) with their defaults at ε ∈ {1, 4},
  δ = 1e-5, seeds 0-4 (no tuning at all; the defaults are what bench_fdp
  found within noise of its validation-tuned choice at ε = 1); and, as the
  higher-capacity non-private model, RandomForestClassifier (100 fully grown
  trees, seeds 0-2), which memorises its training set.
* intervals (95 %): one run: Wilson for the accuracies and Newcombe's paired
  interval for the advantage (what ``evaluate`` returns). Several seeds: the
  per-record hit rate averaged over seeds, normal interval over the records
  (the records are the independent unit; seeds are averaged, not counted
  as extra records).

Writes ``benchmarks/results/attack_adult.json`` and ``attack_adult.md``.
Run with ``nice -n 10 python benchmarks/bench_attack.py`` (≈ 5 min on 2 cores).

Results (in ``benchmarks/results/``): ``attack_adult.json``, ``attack_adult.md``.
Quoted in (the sections whose figures come from these files):

* docs/results.md § "Attribute inference on Adult"
* docs/threat_model.md § "Attribute inference on Adult"
"""

import argparse
import inspect
import json
import math
import pathlib
import platform
import sys
import time

import numpy as np
from scipy.stats import norm
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import sklearn_fdp  # noqa: E402
from _common import library_fingerprint  # noqa: E402
from sklearn_fdp import DPSGDClassifier, FeatureDPLogisticRegression  # noqa: E402
from sklearn_fdp.audit import AttributeInferenceAttack, attribute_inference_bound  # noqa: E402
from sklearn_fdp.datasets import ADULT_PROTECTED, load_adult, make_adult_preprocessor  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
RESULTS = HERE / "results"
ATTRIBUTE, CANDIDATES = "sex", ["Female", "Male"]
LEVEL = 0.95
WEIGHT_GRID = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0)
SHADOW_SEED = 1000


def load(subsample, seed=0):
    X_train, y_train, X_test, y_test = load_adult(return_X_y=True)
    y_train, y_test = np.asarray(y_train), np.asarray(y_test)
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(y_test))
    half = len(perm) // 2
    aux, ctl = np.sort(perm[:half]), np.sort(perm[half:])
    shadow = np.random.default_rng(1).permutation(aux)
    s_train, s_aux = np.sort(shadow[:len(shadow) // 2]), np.sort(shadow[len(shadow) // 2:])
    data = dict(X_aux=X_test.iloc[aux].reset_index(drop=True), y_aux=y_test[aux],
                X_shadow=X_test.iloc[s_train].reset_index(drop=True), y_shadow=y_test[s_train],
                X_shadow_aux=X_test.iloc[s_aux].reset_index(drop=True),
                y_shadow_aux=y_test[s_aux],
                X_ctl=X_test.iloc[ctl].reset_index(drop=True), y_ctl=y_test[ctl],
                X_test=X_test, y_test=y_test)
    sets = {"full": (X_train.reset_index(drop=True), y_train)}
    if subsample:
        rows = np.sort(np.random.default_rng(seed).permutation(len(y_train))[:subsample])
        sets["subsample"] = (X_train.iloc[rows].reset_index(drop=True), y_train[rows])
    return data, sets


def model_groups(epsilons, delta, seeds, forest_seeds):
    """(name, ε or None, seeds, factory(seed)) for every model setting."""
    groups = [("LogisticRegression (non-private)", None, [0],
               lambda s: make_pipeline(make_adult_preprocessor(),
                                       LogisticRegression(max_iter=2000))),
              ("RandomForest, 100 full trees (non-private)", None, forest_seeds,
               lambda s: make_pipeline(make_adult_preprocessor(), RandomForestClassifier(
                   n_estimators=100, n_jobs=1, random_state=s)))]
    for eps in epsilons:
        groups.append(("DPSGDClassifier (whole record DP)", eps, seeds,
                       lambda s, eps=eps: make_pipeline(
                           make_adult_preprocessor(),
                           DPSGDClassifier(epsilon=eps, delta=delta, random_state=s))))
        groups.append(("FeatureDPLogisticRegression (protected columns private, label public)",
                       eps, seeds, lambda s, eps=eps: make_pipeline(
                           make_adult_preprocessor().set_output(transform="pandas"),
                           FeatureDPLogisticRegression(
                               private_features=list(ADULT_PROTECTED), label_public=True,
                               epsilon=eps, delta=delta, random_state=s))))
    return groups


def choose_weight(make, data):
    """The attacker's λ, chosen on a shadow model trained on its own auxiliary data."""
    Xs, ys = data["X_shadow"], data["y_shadow"]
    shadow = make(SHADOW_SEED).fit(Xs, ys)
    truth = Xs[ATTRIBUTE].to_numpy()
    plain = AttributeInferenceAttack(shadow, ATTRIBUTE, CANDIDATES).score_candidates(Xs, ys)
    bayes = AttributeInferenceAttack(shadow, ATTRIBUTE, CANDIDATES, prior="conditional")
    bayes.fit(data["X_shadow_aux"], data["y_shadow_aux"])
    log_prior = bayes.score_candidates(Xs, ys) - plain
    cand = np.asarray(CANDIDATES)
    hit = {w: cand[np.argmax(w * plain + log_prior, axis=1)] == truth for w in WEIGHT_GRID}
    acc = {w: float(h.mean()) for w, h in hit.items()}
    significant = []
    for w in WEIGHT_GRID[1:]:
        d = hit[w].astype(float) - hit[1.0]
        if d.mean() > 2.0 * d.std(ddof=1) / math.sqrt(d.size):
            significant.append(w)
    if not significant:
        return 1.0, acc
    return max(significant, key=lambda w: (acc[w], -w)), acc


def guesses(weight, plain, log_prior):
    """The attack's guesses from its two score parts (what ``infer`` computes)."""
    return np.asarray(CANDIDATES)[np.argmax(weight * plain + log_prior, axis=1)]


def interval(rate_per_record, single_result=None, key=None):
    """Normal interval over records of a per-record mean (or a run's own interval)."""
    if single_result is not None:
        return list(single_result[key])
    n = rate_per_record.size
    z = norm.ppf(0.5 + LEVEL / 2)
    half = z * rate_per_record.std(ddof=1) / math.sqrt(n)
    m = rate_per_record.mean()
    return [float(m - half), float(m + half)]


def run_setting(tag, X, y, data, groups, delta):
    print(f"[{tag}] n = {len(y)} training records attacked", flush=True)
    truth = X[ATTRIBUTE].to_numpy()
    truth_ctl = data["X_ctl"][ATTRIBUTE].to_numpy()
    runs, rows = [], []
    Xc, yc = data["X_ctl"], data["y_ctl"]
    shared = {}  # log-prior and baseline hits: the same for every model of the setting
    for name, eps, seeds, make in groups:
        weight, shadow_acc = choose_weight(make, data)
        print(f"  {name} ε={eps}: shadow-chosen λ = {weight:g} "
              f"{ {k: round(v, 4) for k, v in shadow_acc.items()} }", flush=True)
        items = []
        for seed in seeds:
            start = time.perf_counter()
            model = make(seed).fit(X, y)
            fit_s = time.perf_counter() - start
            attack = AttributeInferenceAttack(model, ATTRIBUTE, CANDIDATES, prior="conditional",
                                              model_weight=weight)
            attack.fit(data["X_aux"], data["y_aux"])
            member = attack.evaluate(X, y)  # this run's result with its own intervals
            plain = AttributeInferenceAttack(model, ATTRIBUTE, CANDIDATES)  # model term only
            plain_m, plain_c = plain.score_candidates(X, y), plain.score_candidates(Xc, yc)
            if not shared:
                one = attack.set_params(model_weight=1.0)
                shared = dict(
                    prior_m=one.score_candidates(X, y) - plain_m,
                    prior_c=one.score_candidates(Xc, yc) - plain_c,
                    base_m=np.asarray(one.infer_baseline(X, y)) == truth,
                    base_c=np.asarray(one.infer_baseline(Xc, yc)) == truth_ctl)
            h = guesses(weight, plain_m, shared["prior_m"]) == truth
            h1 = guesses(1.0, plain_m, shared["prior_m"]) == truth
            h_ctl = guesses(weight, plain_c, shared["prior_c"]) == truth_ctl
            if abs(h.mean() - member.accuracy) > 1e-3:  # only ties could differ
                print(f"    WARNING: evaluate() {member.accuracy} vs hits {h.mean()}", flush=True)
            step = model[-1]
            run = dict(model=name, epsilon=eps, seed=seed, model_weight=weight,
                       fit_seconds=fit_s,
                       test_accuracy=float(model.score(data["X_test"], data["y_test"])),
                       train_accuracy=float(model.score(X, y)),
                       epsilon_spent=float(step.epsilon_) if hasattr(step, "epsilon_") else None,
                       delta=delta if eps is not None else None,
                       member=member.to_dict(),
                       member_advantage_weight_1=float(h1.mean() - shared["base_m"].mean()),
                       non_member_accuracy=float(h_ctl.mean()),
                       non_member_advantage=float(h_ctl.mean() - shared["base_c"].mean()),
                       seconds=time.perf_counter() - start)
            runs.append(run)
            items.append((h, h_ctl, member, h1))
            print(f"    seed={seed}: acc {member.accuracy:.4f} base {member.baseline:.4f} adv "
                  f"{member.advantage:+.4f} (λ=1: {run['member_advantage_weight_1']:+.4f}) | "
                  f"non-members adv {run['non_member_advantage']:+.4f} | test acc "
                  f"{run['test_accuracy']:.4f} ({run['seconds']:.1f} s)", flush=True)
        base_hit, base_hit_ctl = shared["base_m"], shared["base_c"]
        H = np.mean([it[0] for it in items], axis=0)
        H_ctl = np.mean([it[1] for it in items], axis=0)
        single = items[0][2].to_dict() if len(items) == 1 else None
        baseline = float(base_hit.mean())
        rows.append(dict(
            model=name, epsilon=eps, n_seeds=len(items), n=int(H.size),
            model_weight=weight, shadow_accuracy_by_weight=shadow_acc,
            accuracy=float(H.mean()), accuracy_ci=interval(H, single, "accuracy_ci"),
            baseline=baseline, baseline_ci=list(items[0][2].baseline_ci),
            advantage=float(H.mean() - baseline),
            advantage_ci=interval(H - base_hit, single, "advantage_ci"),
            advantage_seed_range=[float(min(it[2].advantage for it in items)),
                                  float(max(it[2].advantage for it in items))],
            advantage_weight_1=float(np.mean([it[3].mean() for it in items]) - baseline),
            bound=(attribute_inference_bound(eps, delta, baseline) if eps is not None
                   else None),
            bound_at_baseline_upper=(attribute_inference_bound(eps, delta,
                                                               items[0][2].baseline_ci[1])
                                     if eps is not None else None),
            non_member_accuracy=float(H_ctl.mean()),
            non_member_baseline=float(base_hit_ctl.mean()),
            non_member_advantage=float(H_ctl.mean() - base_hit_ctl.mean()),
            test_accuracy=float(np.mean([r["test_accuracy"] for r in runs
                                         if r["model"] == name and r["epsilon"] == eps]))))
    return rows, runs


def fmt_ci(ci, signed=False):
    f = "{:+.4f}" if signed else "{:.4f}"
    return "[" + f.format(ci[0]) + ", " + f.format(ci[1]) + "]"


def markdown(tables, meta):
    out = [f"# Attribute inference on Adult's `sex` (generated by `benchmarks/bench_attack.py` "
           f"on {meta['date']}, {meta['machine']}, {meta['runtime_seconds'] / 60:.1f} min)", "",
           "Attacked records: the model's training records (members). The attacker knows the "
           "model, the record's label and every other raw column (public ones and the other "
           "protected ones) and has auxiliary data (half of adult.test). Attack: "
           "`AttributeInferenceAttack(model, \"sex\", [\"Female\", \"Male\"], "
           "prior=\"conditional\", model_weight=λ)`, λ chosen by the attacker on a shadow model "
           "trained on its own auxiliary data (same estimator and settings), never on the "
           "attacked records: λ = 1 unless a larger λ beats it on the shadow members by more "
           "than 2 standard errors (see the script's docstring). Baseline: a logistic "
           "regression fitted on the auxiliary data predicting sex from the same knowledge "
           "without the model (Thm. 4's Ball, estimated). Bound: "
           "`attribute_inference_bound(ε, δ, baseline)` (Thm. 4), "
           f"δ = {meta['delta']:g}; a non-private model has no bound. Intervals: "
           f"{int(LEVEL * 100)} %; one run: Wilson (accuracy, baseline) and Newcombe's paired "
           "interval (advantage); several seeds: mean over seeds, normal interval over "
           "records of the per-record hit rate averaged over seeds. Non-member advantage: "
           "the same attack on the other half of adult.test, records no model saw. DP models "
           f"use their defaults (no tuning). Features: {meta['preprocessor']}.", ""]
    for tag, (title, rows) in tables.items():
        out += [f"## {title}", "",
                "| model | ε | seeds | λ | attack accuracy [CI] | baseline [CI] | advantage [CI] "
                "| advantage at λ = 1 | Thm. 4 bound | non-member advantage | test accuracy |",
                "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            eps = "—" if r["epsilon"] is None else f"{r['epsilon']:g}"
            bound = "— (no guarantee)" if r["bound"] is None else f"{r['bound']:.4f}"
            out.append(
                f"| {r['model']} | {eps} | {r['n_seeds']} | {r['model_weight']:g} | "
                f"{r['accuracy']:.4f} {fmt_ci(r['accuracy_ci'])} | {r['baseline']:.4f} "
                f"{fmt_ci(r['baseline_ci'])} | {r['advantage']:+.4f} "
                f"{fmt_ci(r['advantage_ci'], True)} | {r['advantage_weight_1']:+.4f} | {bound} | "
                f"{r['non_member_advantage']:+.4f} | {r['test_accuracy']:.4f} |")
        out.append("")
    out.append("## Reading the numbers")
    out.append("")
    for tag, (title, rows) in tables.items():
        private = [r for r in rows if r["epsilon"] is not None]
        lr = next(r for r in rows if r["model"].startswith("LogisticRegression"))
        rf = next((r for r in rows if r["model"].startswith("RandomForest")), None)
        worst = max(private, key=lambda r: r["advantage_ci"][1]) if private else None
        over = [r for r in private if r["accuracy_ci"][0] > r["bound"]]
        text = (f"- {title}: largest upper end of a private model's advantage interval "
                f"{worst['advantage_ci'][1]:+.4f} ({worst['model'].split(' (')[0]}, "
                f"ε = {worst['epsilon']:g}); non-private LogisticRegression "
                f"{lr['advantage']:+.4f} {fmt_ci(lr['advantage_ci'], True)}")
        if rf is not None:
            text += (f"; RandomForest {rf['advantage']:+.4f} {fmt_ci(rf['advantage_ci'], True)} "
                     f"on members vs {rf['non_member_advantage']:+.4f} on non-members")
        text += (f". Attacks above the bound: {len(over)} of {len(private)} private rows "
                 "(an attack above it would contradict the claimed ε).")
        if private:
            tight = min(private, key=lambda r: r["bound"])
            top = max(rows, key=lambda r: r["accuracy"])
            relation = "below" if top["accuracy"] < tight["bound"] else "not below"
            text += (f" For scale: the smallest bound is {tight['bound']:.4f} (ε = "
                     f"{tight['epsilon']:g}); the most accurate attack on any model here, "
                     f"{top['model'].split(' (')[0]} (ε = "
                     f"{'none' if top['epsilon'] is None else format(top['epsilon'], 'g')}), "
                     f"reaches {top['accuracy']:.4f}, {relation} it.")
        out.append(text)
    out += ["", "The bound is a worst case over all attackers: a measured accuracy below it is "
            "consistent with the claimed ε but does not verify it, and this attack is far from "
            "the worst case for these models."]
    return "\n".join(out) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilons", default="1,4")
    parser.add_argument("--delta", type=float, default=1e-5)
    parser.add_argument("--seeds", default="0,1,2,3,4")
    parser.add_argument("--forest-seeds", default="0,1,2")
    parser.add_argument("--subsample", type=int, default=3000)
    args = parser.parse_args(argv)
    epsilons = [float(e) for e in args.epsilons.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    forest_seeds = [int(s) for s in args.forest_seeds.split(",")]
    t0 = time.perf_counter()
    fingerprint = library_fingerprint()  # before the run: the sources the run imported
    scale_rows = inspect.signature(make_adult_preprocessor).parameters["scale_rows"].default
    data, sets = load(args.subsample)
    groups = model_groups(epsilons, args.delta, seeds, forest_seeds)
    titles = {"full": f"Full training set (n = {len(sets['full'][1])})",
              "subsample": f"{args.subsample}-row subsample of adult.data (seed 0)"}
    tables, all_runs = {}, {}
    for tag, (X, y) in sets.items():
        rows, runs = run_setting(tag, X, y, data, groups, args.delta)
        tables[tag] = (titles[tag], rows)
        all_runs[tag] = runs
    runtime = time.perf_counter() - t0
    meta = dict(date=time.strftime("%Y-%m-%d"),
                machine=f"{platform.machine()}, Python {platform.python_version()}",
                sklearn_fdp=sklearn_fdp.__version__, delta=args.delta, epsilons=epsilons,
                seeds=seeds, forest_seeds=forest_seeds, attribute=ATTRIBUTE,
                candidates=CANDIDATES, protected=list(ADULT_PROTECTED),
                n_auxiliary=int(len(data["y_aux"])), n_non_member=int(len(data["y_ctl"])),
                attack="AttributeInferenceAttack(prior='conditional', model_weight=λ from a "
                       "shadow model), default baseline", weight_grid=list(WEIGHT_GRID),
                shadow_seed=SHADOW_SEED, n_shadow_train=int(len(data["y_shadow"])),
                confidence_level=LEVEL, runtime_seconds=runtime, library=fingerprint,
                preprocessor=f"make_adult_preprocessor(scale_rows={scale_rows!r}) (its default)")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "attack_adult.json").write_text(json.dumps(dict(
        meta=meta, tables={t: dict(title=v[0], rows=v[1]) for t, v in tables.items()},
        runs=all_runs), indent=1))
    md = markdown(tables, meta)
    (RESULTS / "attack_adult.md").write_text(md)
    print(md)
    print(f"runtime {runtime:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

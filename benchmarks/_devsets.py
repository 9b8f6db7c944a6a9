"""The development data sets of ``../shared/data`` with declared schemas (issue 32).

Each loader returns a :class:`DevSet`: the raw feature frame, a binary label,
an optional regression target, and the schema a user would write for
:func:`sklearn_fdp.preprocessing.make_tabular_preprocessor` (numeric bounds,
category lists, protected columns, and for a regression target its bounds
under ``"target"``). Bounds and category lists come from each folder's
README (documented ranges and codings); where a README documents no range,
the bound is an a-priori plausible range written down without looking at the
data (marked "a priori" below). Nothing here is computed from the values.

Privacy unit: ``diabetes130`` and ``nhanes`` hold several rows per person;
the loaders keep each person's first row (so one row is one person).
``student_performance`` uses the Portuguese file only (the 382 students in
both files would otherwise count twice), input setup C (without G1, G2).
``heart_failure`` drops ``time`` (it leaks the label).

The split of the sets into those that CHOOSE the default rules and those that
only REPORT them is fixed here, before any result of the suite was seen (the
grouping ``../shared/data/INDEX.md`` suggests):
"""

import gzip
import os
import pathlib
from collections import namedtuple

import numpy as np
import pandas as pd

_ROOT = pathlib.Path(__file__).resolve().parents[1]
# ../shared/data from the repository root (a worktree one level deeper: ../../shared/data);
# SKLEARN_FDP_DEVSETS overrides.
DATA = next((p for p in (pathlib.Path(os.environ.get("SKLEARN_FDP_DEVSETS", "/nonexistent")),
                         _ROOT.parent / "shared" / "data", _ROOT.parents[1] / "shared" / "data")
             if p.is_dir()), _ROOT.parent / "shared" / "data")

# Fixed before the suite's first run (commit of this file): rules are chosen on
# DEVELOPMENT only; REPORT sets are never used to choose anything.
DEVELOPMENT = ("student_performance", "heart_disease", "heart_failure", "communities_crime")
REPORT = ("diabetes130", "nhanes", "drug_consumption", "adult")

DevSet = namedtuple("DevSet", "name X y y_reg schema reg_bounds note")


def _yes_no():
    return ["yes", "no"]


def student_performance():
    df = pd.read_csv(DATA / "student_performance" / "student-por.csv.gz", sep=";")
    binary = {"school": ["GP", "MS"], "sex": ["F", "M"], "address": ["U", "R"],
              "famsize": ["LE3", "GT3"], "Pstatus": ["T", "A"]}
    for c in ("schoolsup", "famsup", "paid", "activities", "nursery", "higher", "internet",
              "romantic"):
        binary[c] = _yes_no()
    jobs = ["teacher", "health", "services", "at_home", "other"]
    categorical = dict(binary, Mjob=jobs, Fjob=jobs,
                       reason=["home", "reputation", "course", "other"],
                       guardian=["mother", "father", "other"])
    numeric = {"age": [15, 22], "Medu": [0, 4], "Fedu": [0, 4], "traveltime": [1, 4],
               "studytime": [1, 4], "failures": [0, 4], "famrel": [1, 5], "freetime": [1, 5],
               "goout": [1, 5], "Dalc": [1, 5], "Walc": [1, 5], "health": [1, 5],
               "absences": [0, 93]}
    schema = {"numeric": numeric, "categorical": categorical, "protected": ["sex", "age"],
              "target": {"bounds": [0, 20]}}
    X = df[list(numeric) + list(categorical)]
    return DevSet("student_performance", X, (df["G3"] >= 10).to_numpy(int),
                  df["G3"].to_numpy(float), schema, (0.0, 20.0),
                  "Portuguese file, 649 rows, setup C; label G3 >= 10, target G3")


def heart_disease():
    cols = ["age", "sex", "cp", "trestbps", "chol", "fbs", "restecg", "thalach", "exang",
            "oldpeak", "slope", "ca", "thal", "num"]
    parts = []
    for site in ("cleveland", "hungarian", "switzerland", "va"):
        part = pd.read_csv(DATA / "heart_disease" / f"processed.{site}.data.gz", header=None,
                           names=cols, na_values="?")
        part["site"] = site
        parts.append(part)
    df = pd.concat(parts, ignore_index=True)
    ind = {"missing": "indicator"}
    # a priori clinical ranges (the README documents none)
    numeric = {"age": [18, 100], "trestbps": dict(bounds=[0, 250], **ind),
               "chol": dict(bounds=[0, 700], **ind), "thalach": dict(bounds=[40, 250], **ind),
               "oldpeak": dict(bounds=[-3, 7], **ind), "ca": dict(bounds=[0, 3], **ind)}
    categorical = {"sex": [0, 1], "cp": [1, 2, 3, 4], "fbs": [0, 1], "restecg": [0, 1, 2],
                   "exang": [0, 1], "slope": [1, 2, 3], "thal": [3, 6, 7],
                   "site": ["cleveland", "hungarian", "switzerland", "va"]}
    schema = {"numeric": numeric, "categorical": categorical, "protected": ["sex", "age"]}
    X = df[list(numeric) + list(categorical)]
    return DevSet("heart_disease", X, (df["num"] > 0).to_numpy(int), None, schema, None,
                  "4 sites, 920 rows; label num > 0")


def heart_failure():
    df = pd.read_csv(DATA / "heart_failure" / "heart_failure_clinical_records_dataset.csv.gz")
    numeric = {"age": [40, 95], "creatinine_phosphokinase": [23, 7861, "log"],
               "ejection_fraction": [14, 80], "platelets": [25_100, 850_000],
               "serum_creatinine": [0.5, 9.4, "log"], "serum_sodium": [113, 148]}
    categorical = {c: [0, 1] for c in ("anaemia", "diabetes", "high_blood_pressure", "sex",
                                       "smoking")}
    schema = {"numeric": numeric, "categorical": categorical, "protected": ["sex", "age"]}
    X = df[list(numeric) + list(categorical)]
    return DevSet("heart_failure", X, df["DEATH_EVENT"].to_numpy(int), None, schema, None,
                  "299 rows, time dropped; label DEATH_EVENT")


def _communities_names():
    with gzip.open(DATA / "communities_crime" / "communities.names.gz", "rt",
                   encoding="latin-1") as fh:
        return [line.split()[1] for line in fh if line.lower().startswith("@attribute")]


def communities_crime():
    names = _communities_names()
    df = pd.read_csv(DATA / "communities_crime" / "communities.data.gz", header=None,
                     names=names, na_values="?")
    features = names[5:101]  # population ... PctSameState85: documented in [0, 1]
    numeric = {c: {"bounds": [0, 1], "missing": "fill", "fill_value": 0.5} for c in features}
    protected = ["racepctblack", "racePctWhite", "racePctAsian", "racePctHisp", "agePct12t21",
                 "agePct12t29", "agePct16t24", "agePct65up"]
    schema = {"numeric": numeric, "protected": protected, "target": {"bounds": [0, 1]}}
    y = df["ViolentCrimesPerPop"].to_numpy(float)
    return DevSet("communities_crime", df[features], (y >= 0.25).astype(int), y, schema,
                  (0.0, 1.0), "1,994 communities, 96 census columns; label "
                  "ViolentCrimesPerPop >= 0.25 (threshold fixed a priori), target it")


_DRUG_CODES = {
    "Age": [-0.95197, -0.07854, 0.49788, 1.09449, 1.82213, 2.59171],
    "Gender": [0.48246, -0.48246],
    "Education": [-2.43591, -1.7379, -1.43719, -1.22751, -0.61113, -0.05921, 0.45468,
                  1.16365, 1.98437],
    "Country": [-0.09765, 0.24923, -0.46841, -0.28519, 0.21128, 0.96082, -0.57009],
    "Ethnicity": [-0.50212, -1.10702, 1.90725, 0.126, -0.22166, 0.1144, -0.31685],
}


def drug_consumption():
    drugs = ["Alcohol", "Amphet", "Amyl", "Benzos", "Caff", "Cannabis", "Choc", "Coke",
             "Crack", "Ecstasy", "Heroin", "Ketamine", "Legalh", "LSD", "Meth", "Mushrooms",
             "Nicotine", "Semer", "VSA"]
    scores = ["Nscore", "Escore", "Oscore", "Ascore", "Cscore", "Impulsive", "SS"]
    cols = ["ID", *_DRUG_CODES, *scores, *drugs]
    df = pd.read_csv(DATA / "drug_consumption" / "drug_consumption.data.gz", header=None,
                     names=cols)
    for c in _DRUG_CODES:  # codes as strings ("-0.95197"), as the schema's lists
        df[c] = df[c].map(lambda v: repr(round(float(v), 5)))
    categorical = {c: [repr(round(v, 5)) for v in codes] for c, codes in _DRUG_CODES.items()}
    numeric = {s: [-4, 4] for s in scores}  # quantified scores: a priori +-4
    schema = {"numeric": numeric, "categorical": categorical,
              "protected": ["Age", "Gender", "Ethnicity", "Country", "Education"]}
    y = df["Cannabis"].isin(["CL2", "CL3", "CL4", "CL5", "CL6"]).to_numpy(int)
    X = df[list(categorical) + scores]
    return DevSet("drug_consumption", X, y, None, schema, None,
                  "1,885 rows; label Cannabis user (CL2+)")


def nhanes():
    df = pd.read_csv(DATA / "nhanes" / "NHANES_noid.csv.gz", low_memory=False)
    df = df.drop_duplicates("person_idx").reset_index(drop=True)  # one row per person
    df = df[df["Diabetes"].isin(["Yes", "No"]) & df["TotChol"].notna()].reset_index(drop=True)
    ind = {"missing": "indicator"}
    numeric = {"Age": [0, 80], "Poverty": dict(bounds=[0, 5], **ind),
               "HomeRooms": dict(bounds=[1, 13], **ind),
               "Weight": dict(bounds=[2, 250], **ind), "Height": dict(bounds=[80, 210], **ind),
               "BMI": dict(bounds=[12, 80], **ind), "Pulse": dict(bounds=[40, 140], **ind),
               "BPSysAve": dict(bounds=[70, 230], **ind),
               "BPDiaAve": dict(bounds=[0, 130], **ind),
               "DirectChol": dict(bounds=[0.3, 4.5], **ind),
               "SleepHrsNight": dict(bounds=[2, 12], **ind)}  # a priori ranges
    categorical = {
        "Gender": ["male", "female"], "Race1": ["Mexican", "Hispanic", "White", "Black", "Other"],
        "Education": ["8th Grade", "9 - 11th Grade", "High School", "Some College",
                      "College Grad"],
        "MaritalStatus": ["Married", "Widowed", "Divorced", "Separated", "NeverMarried",
                          "LivePartner"],
        "HomeOwn": ["Own", "Rent", "Other"], "Work": ["Working", "NotWorking", "Looking"],
        "PhysActive": ["Yes", "No"], "SurveyYr": ["2009_10", "2011_12"]}
    schema = {"numeric": numeric, "categorical": categorical,
              "protected": ["Gender", "Age", "Race1", "MaritalStatus", "Education", "Poverty"],
              "target": {"bounds": [1.5, 14]}}
    X = df[list(numeric) + list(categorical)]
    return DevSet("nhanes", X, (df["Diabetes"] == "Yes").to_numpy(int),
                  df["TotChol"].to_numpy(float), schema, (1.5, 14.0),
                  "first row per person with Diabetes and TotChol known; label Diabetes, "
                  "target TotChol (mmol/L, a priori [1.5, 14])")


def diabetes130():
    df = pd.read_csv(DATA / "diabetes130" / "diabetic_data_noid.csv.gz", na_values="?",
                     low_memory=False)
    df = df.drop_duplicates("patient_idx").reset_index(drop=True)  # first encounter
    ages = [f"[{10 * i}-{10 * i + 10})" for i in range(10)]
    drug = ["No", "Steady", "Up", "Down"]
    categorical = {
        "race": ["Caucasian", "AfricanAmerican", "Hispanic", "Asian", "Other"],
        "gender": ["Male", "Female", "Unknown/Invalid"], "age": ages,
        "admission_type_id": list(range(1, 9)), "discharge_disposition_id": list(range(1, 31)),
        "admission_source_id": list(range(1, 26)),
        "max_glu_serum": [">200", ">300", "Norm", "None"],
        "A1Cresult": [">8", ">7", "Norm", "None"], "insulin": drug, "metformin": drug,
        "change": ["Ch", "No"], "diabetesMed": ["Yes", "No"]}
    # a priori ranges (the README documents none for the counts)
    numeric = {"num_lab_procedures": [0, 150], "num_procedures": [0, 10],
               "num_medications": [0, 100], "number_outpatient": [0, 50],
               "number_emergency": [0, 80], "number_inpatient": [0, 30],
               "number_diagnoses": [1, 16]}
    schema = {"numeric": numeric, "categorical": categorical,
              "protected": ["race", "gender", "age"], "target": {"bounds": [1, 14]}}
    for c in ("max_glu_serum", "A1Cresult"):  # pandas reads the string "None" as missing
        df[c] = df[c].fillna("None")
    X = df[list(numeric) + list(categorical)]
    return DevSet("diabetes130", X, (df["readmitted"] == "<30").to_numpy(int),
                  df["time_in_hospital"].to_numpy(float), schema, (1.0, 14.0),
                  "first encounter per patient (71,518); label readmitted <30, target "
                  "time_in_hospital")


def adult():
    from sklearn_fdp.datasets import adult_schema, load_adult

    data = load_adult(split="train")
    X, y = data.data, np.asarray(data.target, dtype=int)
    return DevSet("adult", X, y, None, adult_schema(), None, "adult.data, label income")


LOADERS = {f.__name__: f for f in (student_performance, heart_disease, heart_failure,
                                   communities_crime, diabetes130, nhanes, drug_consumption,
                                   adult)}

"""scikit-learn's baselines on the data sets bench/tabular_data.py writes:
a one-hot logistic (or ridge) regression over standardized numbers, and
histogram gradient boosting with native categorical columns, each fit on
train.csv and scored on test.csv.

    /usr/bin/python3 bench/tabular_data.py /tmp/tabular
    /usr/bin/python3 bench/sklearn_tabular.py /tmp/tabular

prints one line a data set and model: `dataset=… model=… auc=…` (binary),
`accuracy=…` (multi-class) or `rmse=… mae=…` (regression). A column is
categorical when pandas does not read it as numbers, as towerflow
tabular decides; a missing number takes the training mean (linear) or
stays missing (boosting, which handles it natively).
"""

import os
import sys

sys.dont_write_bytecode = True
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from sklearn.compose import ColumnTransformer  # noqa: E402
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor  # noqa: E402
from sklearn.impute import SimpleImputer  # noqa: E402
from sklearn.linear_model import LogisticRegression, RidgeCV  # noqa: E402
from sklearn.metrics import accuracy_score, mean_absolute_error, mean_squared_error, roc_auc_score  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder, StandardScaler  # noqa: E402

SEED = 29


def load(dir, label):
    tr = pd.read_csv(os.path.join(dir, "train.csv"), keep_default_na=False, na_values=[""])
    te = pd.read_csv(os.path.join(dir, "test.csv"), keep_default_na=False, na_values=[""])
    y_tr, y_te = tr.pop(label), te.pop(label)
    cat = [c for c in tr.columns if not pd.api.types.is_numeric_dtype(tr[c])]
    num = [c for c in tr.columns if c not in cat]
    for df in (tr, te):
        for c in cat:
            df[c] = df[c].fillna("").astype(str)
    return tr, y_tr, te, y_te, num, cat


def linear(task, num, cat):
    pre = ColumnTransformer([
        ("num", make_pipeline(SimpleImputer(), StandardScaler()), num),
        ("cat", OneHotEncoder(handle_unknown="ignore"), cat),
    ])
    if task == "regression":
        est = RidgeCV(alphas=np.logspace(-3, 3, 13))
    else:
        est = LogisticRegression(max_iter=5000)
    return make_pipeline(pre, est)


def boosting(task, num, cat):
    pre = ColumnTransformer([
        ("num", "passthrough", num),
        ("cat", OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1,
                               encoded_missing_value=-1), cat),
    ])
    mask = [False] * len(num) + [True] * len(cat)
    cls = HistGradientBoostingRegressor if task == "regression" else HistGradientBoostingClassifier
    return make_pipeline(pre, cls(categorical_features=mask or None, random_state=SEED))


def score(task, positive, model, te, y_te):
    if task == "binary":
        classes = list(model.classes_)
        p = model.predict_proba(te)[:, classes.index(positive)]
        return {"auc": roc_auc_score(y_te == positive, p)}
    if task == "multiclass":
        return {"accuracy": accuracy_score(y_te, model.predict(te))}
    pred = model.predict(te)
    return {"rmse": mean_squared_error(y_te, pred) ** 0.5, "mae": mean_absolute_error(y_te, pred)}


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = sys.argv[1]
    with open(os.path.join(root, "datasets.tsv")) as f:
        sets = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    for name, label, task, positive in sets:
        tr, y_tr, te, y_te, num, cat = load(os.path.join(root, name), label)
        if task == "binary":
            y_tr, y_te = y_tr.astype(str), y_te.astype(str)
        for mname, make in (("logistic" if task != "regression" else "ridge", linear),
                            ("hgb", boosting)):
            model = make(task, num, cat).fit(tr, y_tr)
            m = score(task, positive, model, te, y_te)
            print(f"dataset={name} model={mname} "
                  + " ".join(f"{k}={v:.4f}" for k, v in m.items()), flush=True)


if __name__ == "__main__":
    main()

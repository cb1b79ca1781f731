"""`towerflow tabular` against scikit-learn, side by side, on the data sets
bench/tabular_data.py writes (fetched from Debian packages if missing):

    /usr/bin/python3 bench/tabular_compare.py [--data DIR] [--model wide_deep] [--towerflow BIN]

For each data set it runs `towerflow tabular` with its defaults (only
-train, -eval, -label, -positive and -model) and bench/sklearn_tabular.py's
two models, and prints a table: the metric (AUC for binary labels,
accuracy for multi-class, RMSE for regression), towerflow's, scikit-learn's
linear model's and boosting's, and whether towerflow is within the bar
(AUC at most 0.01 below the better scikit-learn model, accuracy at most
0.02 below, RMSE at most 5% above). It exits 1 when one is not.
"""

import argparse
import os
import subprocess
import sys
import time

sys.dont_write_bytecode = True

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
METRIC = {"binary": "auc", "multiclass": "accuracy", "regression": "rmse"}


def kv(line):
    return {k: v for k, v in (f.split("=", 1) for f in line.split() if "=" in f)}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default="/tmp/towerflow-tabular", help="where the data sets are (written if missing)")
    p.add_argument("--model", default="wide_deep", help="towerflow tabular's -model")
    p.add_argument("--towerflow", default="", help="a built towerflow binary (default: go build ./cmd/towerflow)")
    p.add_argument("--only", default="", help="comma-separated data sets to run (default: all)")
    args = p.parse_args()
    if not os.path.exists(os.path.join(args.data, "datasets.tsv")):
        subprocess.run([sys.executable, os.path.join(HERE, "tabular_data.py"), args.data], check=True,
                       stdout=subprocess.DEVNULL)
    bin = args.towerflow
    if not bin:
        bin = os.path.join(args.data, "towerflow")
        subprocess.run(["go", "build", "-o", bin, "./cmd/towerflow"], cwd=ROOT, check=True)
    sk = {}
    out = subprocess.run([sys.executable, os.path.join(HERE, "sklearn_tabular.py"), args.data],
                         check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        m = kv(line)
        sk.setdefault(m["dataset"], {})[m["model"]] = m
    with open(os.path.join(args.data, "datasets.tsv")) as f:
        sets = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    only = set(filter(None, args.only.split(",")))
    rows, ok = [], True
    for name, label, task, positive in sets:
        if only and name not in only:
            continue
        cmd = [bin, "tabular", "-train", os.path.join(args.data, name, "train.csv"),
               "-eval", os.path.join(args.data, name, "test.csv"), "-label", label, "-model", args.model]
        if positive:
            cmd += ["-positive", positive]
        t0 = time.time()
        r = subprocess.run(cmd, capture_output=True, text=True)
        secs = time.time() - t0
        if r.returncode != 0:
            print(f"{name}: towerflow tabular failed:\n{r.stderr[-2000:]}", file=sys.stderr)
            ok = False
            continue
        tf = kv(r.stdout.strip().splitlines()[-1])
        metric = METRIC[task]
        ours = float(tf[metric])
        base = {m: float(v[metric]) for m, v in sk[name].items()}
        if task == "regression":
            best = min(base.values())
            good = ours <= best * 1.05
        else:
            best = max(base.values())
            good = ours >= best - (0.01 if task == "binary" else 0.02)
        ok = ok and good
        lin = base.get("logistic", base.get("ridge"))
        rows.append((name, metric, f"{ours:.4f}", f"{lin:.4f}", f"{base['hgb']:.4f}",
                     "yes" if good else "NO", f"{secs:.0f}s"))
    head = ("dataset", "metric", f"towerflow {args.model}", "sklearn linear", "sklearn hgb", "within bar", "time")
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
    for r in [head] + rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

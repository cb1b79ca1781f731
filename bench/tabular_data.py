"""Writes the real tabular data sets that `towerflow tabular` is checked on,
each split once into train.csv and test.csv (a seeded 80/20 permutation),
from files that Debian packages ship:

    credit           weka's credit-g.arff (German credit, UCI Statlog):
                     1000 rows, 13 categorical and 7 numeric columns,
                     binary label class (good/bad); package weka.
    penguins_sex     palmerpenguins' penguins.csv (CC0): binary label sex,
                     from species, island and four measurements; package
                     r-cran-palmerpenguins.
    penguins_species the same rows: 3-class label species.
    penguins_mass    the same rows: regression label body_mass_g.
    cars_mpg         vega_datasets' cars.json (StatLib, public domain):
                     regression label Miles_per_Gallon, with Origin
                     categorical; package python3-vega-datasets.

A package not installed is fetched with `apt-get download` and unpacked
with `dpkg-deb -x` into a temporary folder (nothing is installed: weka's
Java dependencies are not needed to read its example data). Missing
values are written as empty fields; rows without a label are dropped.

    /usr/bin/python3 bench/tabular_data.py OUTDIR

writes OUTDIR/<name>/{train,test}.csv and OUTDIR/datasets.tsv (name,
label, task, positive class), which bench/sklearn_tabular.py and
bench/tabular_compare.sh read. tabular/testdata holds the penguins and
cars splits as this script writes them.
"""

import csv
import io
import json
import os
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
import numpy as np  # noqa: E402

SEED = 29

SOURCES = {
    # package: path inside it
    "weka": "usr/share/doc/weka/examples/credit-g.arff",
    "r-cran-palmerpenguins": "usr/lib/R/site-library/palmerpenguins/extdata/penguins.csv",
    "python3-vega-datasets": "usr/lib/python3/dist-packages/vega_datasets/_data/cars.json",
}


def source(pkg, tmp):
    """The path of pkg's file: installed, or unpacked from its .deb."""
    installed = "/" + SOURCES[pkg]
    if os.path.exists(installed):
        return installed
    unpacked = os.path.join(tmp, pkg, SOURCES[pkg])
    if not os.path.exists(unpacked):
        subprocess.run(["apt-get", "download", pkg], cwd=tmp, check=True,
                       stdout=subprocess.DEVNULL)
        deb = [f for f in os.listdir(tmp) if f.startswith(pkg + "_") and f.endswith(".deb")]
        if len(deb) != 1:
            sys.exit(f"apt-get download {pkg}: expected one .deb in {tmp}, found {deb}")
        subprocess.run(["dpkg-deb", "-x", os.path.join(tmp, deb[0]), os.path.join(tmp, pkg)],
                       check=True)
    return unpacked


def read_arff(path):
    """An ARFF file's attribute names and data rows (nominal values unquoted)."""
    names, rows, data = [], [], False
    with open(path, encoding="latin-1") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("%"):
                continue
            if not data:
                low = line.lower()
                if low.startswith("@attribute"):
                    names.append(line.split(None, 2)[1].strip("'"))
                elif low.startswith("@data"):
                    data = True
                continue
            row = next(csv.reader(io.StringIO(line), quotechar="'", skipinitialspace=True))
            rows.append(["" if v == "?" else v for v in row])
    return names, rows


def read_csv(path):
    with open(path, newline="") as f:
        r = csv.reader(f)
        names = next(r)
        rows = [["" if v == "NA" else v for v in row] for row in r]
    return names, rows


def read_cars(path):
    with open(path) as f:
        recs = json.load(f)
    names = ["Cylinders", "Displacement", "Horsepower", "Weight_in_lbs",
             "Acceleration", "Year", "Origin", "Miles_per_Gallon"]
    rows = []
    for r in recs:
        row = []
        for n in names:
            v = r[n]
            if n == "Year":
                v = v[:4]
            row.append("" if v is None else str(v))
        rows.append(row)
    return names, rows


def select(names, rows, keep, label):
    """The columns keep (label last) of the rows that have a label."""
    idx = [names.index(k) for k in keep]
    li = names.index(label)
    return keep, [[row[i] for i in idx] for row in rows if row[li] != ""]


def split(out, name, names, rows):
    perm = np.random.RandomState(SEED).permutation(len(rows))
    n_test = len(rows) // 5
    parts = {"test.csv": sorted(perm[:n_test]), "train.csv": sorted(perm[n_test:])}
    os.makedirs(os.path.join(out, name), exist_ok=True)
    for file, idx in parts.items():
        with open(os.path.join(out, name, file), "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(names)
            for i in idx:
                w.writerow(rows[i])
    return len(parts["train.csv"]), len(parts["test.csv"])


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    sets = []  # name, label, task, positive
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o777)  # apt-get download writes as user _apt
        names, rows = read_arff(source("weka", tmp))
        split(out, "credit", names, rows)
        sets.append(("credit", "class", "binary", "bad"))

        names, rows = read_csv(source("r-cran-palmerpenguins", tmp))
        feats = ["species", "island", "bill_length_mm", "bill_depth_mm",
                 "flipper_length_mm", "body_mass_g", "sex"]
        for name, label, task, pos in [
            ("penguins_sex", "sex", "binary", "female"),
            ("penguins_species", "species", "multiclass", ""),
            ("penguins_mass", "body_mass_g", "regression", ""),
        ]:
            keep = [c for c in feats if c != label] + [label]
            n, r = select(names, rows, keep, label)
            split(out, name, n, r)
            sets.append((name, label, task, pos))

        names, rows = read_cars(source("python3-vega-datasets", tmp))
        n, r = select(names, rows, names, "Miles_per_Gallon")
        split(out, "cars_mpg", n, r)
        sets.append(("cars_mpg", "Miles_per_Gallon", "regression", ""))

    with open(os.path.join(out, "datasets.tsv"), "w") as f:
        for s in sets:
            f.write("\t".join(s) + "\n")
    for s in sets:
        print(f"{s[0]}: label {s[1]} ({s[2]}) -> {os.path.join(out, s[0])}")


if __name__ == "__main__":
    main()

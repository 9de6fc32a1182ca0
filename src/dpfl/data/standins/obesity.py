"""Obesity stand-in: ObesityDataSet_raw_and_data_sinthetic.csv with the UCI file's Gender-first header, value formats
and CRLF line endings, 2111 rows with the real class counts.

The class is defined by the body-mass index Weight / Height^2, as in the real data: each row draws a BMI inside its
class's band (Insufficient < 18.5 <= Normal < 25 <= Overweight I < 27.5 <= Overweight II < 30 <= Obesity I < 35 <=
Obesity II < 40 <= Obesity III), a height by gender and the weight that gives that BMI. Family history of
overweight is more frequent in the heavier classes; the other habits follow the real marginal frequencies.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

VERSION = 1
FILE = "ObesityDataSet_raw_and_data_sinthetic.csv"
HEADER = ("Gender,Age,Height,Weight,family_history_with_overweight,FAVC,FCVC,NCP,CAEC,SMOKE,CH2O,SCC,FAF,TUE,CALC,"
          "MTRANS,NObeyesdad")
# class: (real count, BMI band)
CLASSES = {
    "Insufficient_Weight": (272, (15.0, 18.5)),
    "Normal_Weight": (287, (18.5, 25.0)),
    "Overweight_Level_I": (290, (25.0, 27.5)),
    "Overweight_Level_II": (290, (27.5, 30.0)),
    "Obesity_Type_I": (351, (30.0, 35.0)),
    "Obesity_Type_II": (297, (35.0, 40.0)),
    "Obesity_Type_III": (324, (40.0, 50.0)),
}
CATEGORIES = {  # value: frequency, close to the real marginals
    "FAVC": {"no": 0.12, "yes": 0.88},
    "CAEC": {"Always": 0.025, "Frequently": 0.115, "Sometimes": 0.836, "no": 0.024},
    "SMOKE": {"no": 0.98, "yes": 0.02},
    "SCC": {"no": 0.955, "yes": 0.045},
    "CALC": {"Always": 0.001, "Frequently": 0.033, "Sometimes": 0.664, "no": 0.302},
    "MTRANS": {"Automobile": 0.216, "Bike": 0.003, "Motorbike": 0.005, "Public_Transportation": 0.749,
               "Walking": 0.027},
}


def generate(out_dir: Path, seed: np.random.SeedSequence, n_rows: int = 2111) -> None:
    rng = np.random.default_rng(seed)
    names = list(CLASSES)
    counts = np.array([CLASSES[c][0] for c in names])
    counts = np.floor(counts * n_rows / counts.sum()).astype(int)
    counts[: n_rows - counts.sum()] += 1
    label = rng.permutation(np.repeat(np.arange(len(names)), counts))
    lo, hi = np.array([CLASSES[c][1] for c in names]).T
    # margins keep the BMI of the rounded height and weight inside the band
    bmi = rng.uniform(lo[label] + 0.05, hi[label] - 0.05)
    male = rng.random(n_rows) < 0.506
    height = np.round(np.clip(np.where(male, rng.normal(1.76, 0.072, n_rows), rng.normal(1.64, 0.075, n_rows)),
                              1.45, 1.98), 6)
    weight = np.round(bmi * height**2, 6)
    age = np.round(np.clip(14 + rng.gamma(2.2, 4.6, n_rows), 14, 61), 6)
    history = rng.random(n_rows) < np.array([0.45, 0.55, 0.8, 0.85, 0.95, 0.97, 0.99])[label]
    cont = {k: np.round(rng.uniform(a, b, n_rows), 6)
            for k, (a, b) in {"FCVC": (1, 3), "NCP": (1, 4), "CH2O": (1, 3), "FAF": (0, 3), "TUE": (0, 2)}.items()}
    cat = {k: rng.choice(list(p), n_rows, p=list(p.values())) for k, p in CATEGORIES.items()}
    yes_no = lambda flag: "yes" if flag else "no"  # noqa: E731
    rows = [HEADER]
    for i in range(n_rows):
        rows.append(",".join([
            "Male" if male[i] else "Female", _num(age[i]), _num(height[i]), _num(weight[i]), yes_no(history[i]),
            cat["FAVC"][i], _num(cont["FCVC"][i]), _num(cont["NCP"][i]), cat["CAEC"][i], cat["SMOKE"][i],
            _num(cont["CH2O"][i]), cat["SCC"][i], _num(cont["FAF"][i]), _num(cont["TUE"][i]), cat["CALC"][i],
            cat["MTRANS"][i], names[label[i]]]))
    (Path(out_dir) / FILE).write_bytes(("\r\n".join(rows) + "\r\n").encode())


def _num(x: float) -> str:
    """At most 6 decimals without trailing zeros, as in the real file (21, 1.62, 24.361936)."""
    return f"{x:.6f}".rstrip("0").rstrip(".")

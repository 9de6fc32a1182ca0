"""Creditcard stand-in (kato2024): creditcard_standin.csv.gz with the Kaggle file's header (double-quoted
names, double-quoted Class values), 284,807 rows, exactly 492 frauds at random positions.

Time: sorted uniform on [0, 172792] s, written in whole seconds as in the real file. Class 0: V_k ~ N(0, s_k^2)
independently, s_k = 2.0 k^-0.55 (decreasing like PCA components). Class 1: V_k = mu_k s_k + 2 s_k N(0, 1) with mu_k
from MU (in units of s_k; zero for the unlisted k). Amount: lognormal(3.0, 1.5) for class 0 and lognormal(3.5, 1.8)
for class 1, rounded to cents. V values are rounded to 6 decimals. gzip level 1 (fast; the file is 12% larger).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pandas as pd

from dpfl.data.common import gzip_writer

VERSION = 1
FILE = "creditcard_standin.csv.gz"
COLUMNS = ["Time", *[f"V{k}" for k in range(1, 29)], "Amount", "Class"]
TIME_MAX = 172_792
MU = {14: -6, 12: -5, 10: -5, 17: -4, 3: -4, 7: -3, 16: -3, 1: -2, 18: -2, 9: -2, 4: 3, 11: 3, 2: 2}


def generate(out_dir: Path, seed: np.random.SeedSequence, n_rows: int = 284_807, n_frauds: int = 492) -> None:
    rng = np.random.default_rng(seed)
    fraud = np.zeros(n_rows, bool)
    fraud[rng.choice(n_rows, n_frauds, replace=False)] = True
    time = np.floor(np.sort(rng.uniform(0, TIME_MAX, n_rows))).astype(np.int64)
    k = np.arange(1, 29)
    s = 2.0 * k**-0.55
    mu = np.array([MU.get(int(j), 0) for j in k], float)
    v = rng.standard_normal((n_rows, 28)) * s
    v[fraud] = mu * s + 2 * s * rng.standard_normal((n_frauds, 28))
    amount = np.where(fraud, rng.lognormal(3.5, 1.8, n_rows), rng.lognormal(3.0, 1.5, n_rows))
    table = pd.DataFrame(np.round(v, 6), columns=COLUMNS[1:29])
    table.insert(0, "Time", time)
    table["Amount"] = np.round(amount, 2)
    table["Class"] = np.where(fraud, "1", "0")  # strings, so QUOTE_NONNUMERIC quotes them as Kaggle does
    with (open(Path(out_dir) / FILE, "wb") as raw, gzip_writer(raw, level=1) as gz,
          io.TextIOWrapper(gz, newline="") as out):
        table.to_csv(out, index=False, quoting=csv.QUOTE_NONNUMERIC, lineterminator="\n")

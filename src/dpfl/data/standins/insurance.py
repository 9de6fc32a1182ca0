"""Insurance stand-in: insurance.csv with the Kaggle file's header, value formats and CRLF line endings, 1338 rows.

Columns are drawn like the real marginals (age 18-64, sex 50/50, bmi ~ N(30.7, 6.1) in [16, 53], 0-5 children,
20.5% smokers, four regions); charges grow with age, bmi and children, smokers pay far more (more still with
bmi >= 30, as in the real data), plus a skewed positive noise.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

VERSION = 1
FILE = "insurance.csv"
HEADER = "age,sex,bmi,children,smoker,region,charges"
REGIONS = ["northeast", "northwest", "southeast", "southwest"]


def generate(out_dir: Path, seed: np.random.SeedSequence, n_rows: int = 1338) -> None:
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 65, n_rows)
    male = rng.random(n_rows) < 0.505
    bmi = np.round(np.clip(rng.normal(30.7, 6.1, n_rows), 16.0, 53.0), 2)
    children = rng.choice(6, n_rows, p=[0.43, 0.24, 0.18, 0.12, 0.02, 0.01])
    smoker = rng.random(n_rows) < 0.205
    region = rng.choice(4, n_rows, p=[0.242, 0.243, 0.272, 0.243])
    charges = (-5500 + 265 * age + 60 * (bmi - 30) + 450 * children
               + smoker * (13000 + 400 * (bmi - 30) + 19000 * (bmi >= 30)) + rng.gamma(1.5, 1800, n_rows))
    charges = np.round(np.maximum(charges, 1121.8739), 4)
    rows = [HEADER] + [
        f"{a},{'male' if m else 'female'},{b:g},{c},{'yes' if s else 'no'},{REGIONS[r]},{_num(ch)}"
        for a, m, b, c, s, r, ch in zip(age, male, bmi, children, smoker, region, charges)
    ]
    (Path(out_dir) / FILE).write_bytes(("\r\n".join(rows) + "\r\n").encode())


def _num(x: float) -> str:
    """At most 4 decimals without trailing zeros, as in the real file (16884.924, 1725.5523)."""
    return f"{x:.4f}".rstrip("0").rstrip(".")

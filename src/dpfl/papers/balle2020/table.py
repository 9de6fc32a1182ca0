"""balle2020: Fig 2 (shuffling), Table 1 (rates) and the Theorem 3.2 curves (spec/analytic.md §2)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpfl.papers.balle2020 import TABLE1_ROWS
from dpfl.privacy.bounds import checkins_thm32, checkins_thm32_simplified, shuffle_efmrtt19, shuffle_thm51


def _grid(g: dict) -> np.ndarray:
    return np.linspace(g["start"], g["stop"], g["num"])


def _pow10(n: int) -> str:
    e = np.log10(n)
    return f"10^{int(e)}" if float(e).is_integer() else f"{n}"


def fig2(params: dict, log) -> pd.DataFrame:
    eps0 = _grid(params["eps0_grid"])
    delta = params["delta"]
    frames = []
    for n in params["n"]:
        for bound, fn, label in [(("thm5.1"), shuffle_thm51, "Thm 5.1"), ("efmrtt19", shuffle_efmrtt19, "EFMRTT19")]:
            frames.append(pd.DataFrame({"curve": f"{label}, n = {_pow10(n)}", "x": eps0, "y": fn(eps0, n, delta),
                                        "bound": bound, "n": n, "delta": delta}))
        log(f"n = {n}: done")
    return pd.concat(frames, ignore_index=True)


def table1(params: dict, log) -> pd.DataFrame:
    """Numeric companion of Table 1: leading terms e^{cε0}/√n and the concrete bounds at the same n."""
    eps0 = _grid(params["eps0_grid"])
    n, delta = params["n"], params["delta"]
    sources = {c: src for src, _, c in TABLE1_ROWS if c is not None}
    frames = []
    for c in params["rate_exponents"]:
        label = f"e^({c:g}·ε0)/√n" + (f"  [{sources[c]}]" if c in sources else "")
        frames.append(pd.DataFrame({"curve": label, "x": eps0, "y": np.exp(c * eps0) / np.sqrt(n),
                                    "series": "rate", "c": c, "bound": "", "n": n, "delta": delta}))
    concrete = [
        ("thm5.1", "Thm 5.1 (concrete)", shuffle_thm51(eps0, n, delta)),
        ("efmrtt19", "EFMRTT19 Thm 7 (concrete)", shuffle_efmrtt19(eps0, n, delta)),
        ("thm3.2", "Thm 3.2, p0 = 1, m = n (concrete)", checkins_thm32(eps0, n, 1.0, delta)),
    ]
    for bound, label, y in concrete:
        frames.append(pd.DataFrame({"curve": label, "x": eps0, "y": y, "series": "bound", "c": np.nan,
                                    "bound": bound, "n": n, "delta": delta}))
    log(f"n = {n}, {len(eps0)} grid points")
    return pd.concat(frames, ignore_index=True)


def thm3_2(params: dict, log) -> pd.DataFrame:
    eps0 = _grid(params["eps0_grid"])
    delta = params["delta"]
    frames = []
    for m in params["m"]:
        for p0 in params["p0"]:
            for bound, fn, label in [("thm3.2", checkins_thm32, "Thm 3.2"),
                                     ("thm3.2-simplified", checkins_thm32_simplified, "7·p0·ε0·sqrt(ln(1/δ)/m)")]:
                frames.append(pd.DataFrame({"curve": f"{label}, m = {_pow10(m)}, p0 = {p0:g}", "x": eps0,
                                            "y": fn(eps0, m, p0, delta), "bound": bound, "m": m, "p0": p0,
                                            "delta": delta}))
    return pd.concat(frames, ignore_index=True)

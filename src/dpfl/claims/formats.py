"""How the reasons of dpfl.claims write numbers: a measured value (fmt), a grid value (fmt_x), a configured threshold
(fmt_cfg) and percentages of both kinds (fmt_pct, fmt_pct_cfg). A module of its own: the sentences of every check
kind (dpfl.claims.reasons), those of a claim and of a check without rows (dpfl.claims.claim_reasons) and the checks'
thresholds in the report (dpfl.claims.verdicts) write them the same way."""

from __future__ import annotations

import math


def fmt(v) -> str:
    """A measured value, 3 significant digits (0.680, 0.00269, 3,267, 5e+09)."""
    if v is None:
        return "none"
    v = float(v)
    if not math.isfinite(v):
        return "∞" if v > 0 else ("−∞" if v < 0 else "nan")
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 1e6 or a < 1e-4:
        return f"{v:.3g}"
    if a >= 1000:
        return f"{v:,.0f}"
    return f"{v:#.3g}".rstrip(".")


def fmt_x(v) -> str:
    """A grid value as given (0.125, 3, 18)."""
    v = float(v)
    return f"{v:,.0f}" if v.is_integer() and 1000 <= abs(v) < 1e6 else f"{v:g}"


def fmt_cfg(v) -> str:
    """A configured threshold as written (0.005, 0.02, 2,100)."""
    return fmt_x(v) if isinstance(v, (int, float)) else str(v)


def fmt_pct(v) -> str:
    """A relative difference as a percentage, 3 significant digits (4.96%, 213%, 10,353%)."""
    return fmt(100 * float(v)) + "%"


def fmt_pct_cfg(v) -> str:
    """A configured relative tolerance as a percentage, as written (0.05: 5%, 0.025: 2.5%)."""
    return fmt_cfg(round(100 * float(v), 10)) + "%"

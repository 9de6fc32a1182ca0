"""The configuration limits of the two analytic papers (dpfl.config_limits): asoodeh2021 Fig 2 (integer batches)
and balle2020's Thm 3.2 figure (the plotted p0 among the computed ones). Together because each is one small check of
a closed-form figure; each function's docstring names the code that assumes its limit.
"""

from __future__ import annotations

from dpfl.config_limits.variant import Variant

def _asoodeh_fig2(v: Variant) -> None:
    """asoodeh2021 Fig 2: every q gives an integer batch m = q·n_users (dpfl.papers.asoodeh2021.table.fig2, which
    refuses |m − round(m)| > 1e-9 in its job)."""
    n = int(v.params["n_users"])
    for i, q in enumerate(v.params["q"]):
        m = q * n
        if abs(m - round(m)) > 1e-9:
            v.problem(v.p("q", i), f"{q!r} gives a batch m = q·n_users = {m:.6g} users per iteration with n_users = "
                                   f"{n} ({v.ref(v.p('n_users'))}); allowed: q·n_users an integer, q a multiple of "
                                   f"1/{n} (dpfl.papers.asoodeh2021.table.fig2)")


def _balle_checkins(v: Variant) -> None:
    """balle2020 Thm 3.2 figure: plot.p0 is one of params.p0 (dpfl.papers.balle2020.plot.thm3_2 draws the curves of
    that p0 only: another value draws an empty figure)."""
    p0, values = v.spec["plot"]["p0"], v.params["p0"]
    if not any(abs(p0 - q) <= 1e-8 + 1e-5 * abs(q) for q in values):  # numpy.isclose, as the plot selects
        v.problem(("figures", v.figure, "plot", "p0"),
                  f"{p0!r} must be one of {v.ref(v.p('p0'))} = {values}: the plot draws the curves of that p0 "
                  f"(dpfl.papers.balle2020.plot.thm3_2)")

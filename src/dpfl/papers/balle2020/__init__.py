"""balle2020 (Balle, Kairouz, McMahan, Thakkar, Thakurta, NeurIPS 2020): amplification by shuffling and by
random check-ins (spec/analytic.md)."""

from dpfl.figure import FigureDef, FigureFamily, PaperDef

#: Table 1 of the paper (shared by its table and its plot)
TABLE1_ROWS = [
    # source of amplification, central ε (paper's Table 1), exponent c of the leading term e^{c ε0}/√n
    ("none", "ε0", None),
    ("uniform subsampling", "O(e^{ε0}/√n)", 1.0),
    ("shuffling (EFMRTT19)", "O(e^{3ε0}/√n)", 3.0),
    ("shuffling (Thm 5.1)", "O(e^{2.5ε0}/√n)", 2.5),
    ("random check-ins, fixed window (Thm 3.2 / Cor 3.3)", "O(e^{1.5ε0}/√n)", 1.5),
]

#: the analytic families, one figure each: the shuffling bounds over ε0 (Fig 2), Table 1's amplification orders,
#: and the random check-ins bound (Theorem 3.2)
SHUFFLING = FigureFamily(name="shuffling", table="dpfl.papers.balle2020.table:fig2",
                         plot="dpfl.papers.balle2020.plot:fig2", schema="shuffling_figure")
TABLE1 = FigureFamily(name="table1", table="dpfl.papers.balle2020.table:table1",
                      plot="dpfl.papers.balle2020.plot:table1", markdown="dpfl.papers.balle2020.plot:table1_markdown",
                      schema="table1_figure")
CHECKINS = FigureFamily(name="checkins", table="dpfl.papers.balle2020.table:thm3_2",
                        plot="dpfl.papers.balle2020.plot:thm3_2", schema="checkins_figure")

PAPER = PaperDef(figures={"fig2": FigureDef(SHUFFLING), "table1": FigureDef(TABLE1), "thm3_2": FigureDef(CHECKINS)})

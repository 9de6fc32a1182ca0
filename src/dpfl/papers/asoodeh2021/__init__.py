"""asoodeh2021 (Asoodeh, Chen, Calmon, Özgür, ISIT 2021): the Theorem 2 privacy curve (spec/analytic.md)."""

from dpfl.figure import FigureDef, FigureFamily, PaperDef

#: the Theorem 2 privacy curve δ(ε) (closed form)
THEOREM2 = FigureFamily(name="theorem2", table="dpfl.papers.asoodeh2021.table:fig2",
                        plot="dpfl.papers.asoodeh2021.plot:fig2", schema="theorem2_figure")

PAPER = PaperDef(figures={"fig2": FigureDef(THEOREM2)})

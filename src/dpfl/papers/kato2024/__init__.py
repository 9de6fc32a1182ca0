"""kato2024 (Kato, Xiong, Takagi, Cao, Yoshikawa, PVLDB 2024): ULDP-FL (spec/kato2024.md). Landed: Fig 2."""

from dpfl.figure import FigureDef

FIGURES = {
    "fig2": FigureDef(table="dpfl.papers.kato2024.table:fig2", plot="dpfl.papers.kato2024.plot:fig2", has_compat=True),
}

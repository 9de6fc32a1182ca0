"""bietti2022 (Bietti, Wei, Dudík, Langford, Wu, ICML 2022): personalized private SGD (spec/bietti2022.md).

Modules: `methods` (PP-SGD and its accounting), `ppsgd` (the round rule for the linear models, vectorized over a
grid of (η, a, σ) configs; the synthetic task), `federated` (EMNIST: user sampling, minibatch streams, accuracy),
`cnn` (the CNN round), `sparse` (Stackoverflow: compact personal rows, sparse products), `layout` (cells: a = 0
once, then one per σ), `settings` (a cell's params as frozen, typed settings; B1-B5), `tasks` (what the synthetic
and federated tasks contribute to a run), `models` (the model strategies: linear, sparse, CNN), `cell` (one grid,
every seed), `table` (best over η per evaluation point) and `plot`.
"""

from dpfl.figure import FigureDef, FigureFamily, PaperDef

# `compat: authors-code` (spec §8, B1-B5): params.implementation in each figure's authors_code block
#: one family of grids of PP-SGD runs; Fig 1 draws curves over rounds (the family's table and plot), Fig 2 the
#: privacy-utility envelope
GRIDS = FigureFamily(name="grids", table="dpfl.papers.bietti2022.table:fig1", plot="dpfl.papers.bietti2022.plot:fig1",
                     kind="experiment", has_compat=True, layout="dpfl.papers.bietti2022.layout:GridLayout",
                     cell="dpfl.papers.bietti2022.cell:run_cell",
                     settings="dpfl.papers.bietti2022.settings:GridSettings", schema="training_figure")

PAPER = PaperDef(
    figures={
        **{fig: FigureDef(GRIDS) for fig in ("fig1a", "fig1b", "fig1c", "fig1d")},
        "fig2": FigureDef(GRIDS, table="dpfl.papers.bietti2022.table:fig2", plot="dpfl.papers.bietti2022.plot:fig2"),
    },
    methods="dpfl.papers.bietti2022.methods",
)

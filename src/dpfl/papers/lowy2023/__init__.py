"""lowy2023 (Lowy & Razaviyayn, ICLR 2023): ISRL-DP MB-SGD vs Local SGD, Figs 4–9 (spec/lowy2023.md).

Modules: `methods` (the four methods: update, draws, accounting), `isrl` (their vectorized update rules),
`split` (data: the MNIST silo pool, per-trial silos), `layout` (cells and inputs of a figure), `settings` (a cell's
params as frozen, typed settings), `cell` (one cell: tuning over the grid for every trial), `table` (the figure
table), `plot` (drawing).
"""

from dpfl.figure import AllocationKind, FigureDef, FigureFamily, PaperDef

#: Figs 4-9: one family (tuning every method's step size on each panel, every trial)
TRAINING = FigureFamily(name="training", table="dpfl.papers.lowy2023.table:aggregate",
                        plot="dpfl.papers.lowy2023.plot:figure",
                        markdown="dpfl.papers.lowy2023.plot:diagnostics_markdown",
                        kind="experiment", has_compat=True, layout="dpfl.papers.lowy2023.layout:LowyLayout",
                        cell="dpfl.papers.lowy2023.cell:run_cell", schema="figure",
                        settings="dpfl.papers.lowy2023.settings:PanelSettings")

PAPER = PaperDef(
    figures={fig: FigureDef(TRAINING) for fig in ("fig4", "fig5", "fig6", "fig7", "fig8", "fig9")},
    allocation_kinds={
        "even_odd_pairs": AllocationKind(function="dpfl.papers.lowy2023.split:even_odd_pairs", datasets=("mnist",)),
    },
    methods="dpfl.papers.lowy2023.methods",
)

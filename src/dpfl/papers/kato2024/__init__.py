"""kato2024 (Kato, Xiong, Takagi, Cao, Yoshikawa, PVLDB 2024): ULDP-FL (spec/kato2024.md).

Modules: `methods` (the ten methods and their accounting), `uldp` (their round rules, vectorized over seeds, silos
and users on dpfl.fl.local), `allocation` and `split` (records to users and silos, per seed), `group` (GROUP's
record bounding), `layout` (cells and inputs of a training figure), `cell` (one method on one panel, all seeds),
`table` and `plot` (Fig 2 and the training figures), `secure` (the private weighting protocol's parties and messages),
`protocol` and `protocol_plot` (Figs 11, 12: its phase times), `bars` and `bars_plot` (Fig 13: records per user and
silo).
"""

from dpfl.figure import AllocationKind, FigureDef, PaperDef

#: Figs 4-10: one method per cell on a panel's allocation, every seed batched
TRAINING = dict(table="dpfl.papers.kato2024.table:curves", plot="dpfl.papers.kato2024.plot:curves", kind="experiment",
                has_compat=True, layout="dpfl.papers.kato2024.layout:TrainingLayout",
                cell="dpfl.papers.kato2024.cell:run_cell", schema="training_figure")
#: Figs 11-12: the private weighting protocol's phase times (spec §6-§7)
PROTOCOL = dict(table="dpfl.papers.kato2024.protocol:table",
                markdown="dpfl.papers.kato2024.protocol_plot:phase_markdown",
                kind="experiment", has_compat=True, layout="dpfl.papers.kato2024.protocol:ProtocolLayout",
                cell="dpfl.papers.kato2024.protocol:run_cell")

PAPER = PaperDef(
    figures={
        "fig2": FigureDef(table="dpfl.papers.kato2024.table:fig2", plot="dpfl.papers.kato2024.plot:fig2",
                          has_compat=True, schema="group_privacy_figure"),
        **{fig: FigureDef(**TRAINING) for fig in ("fig4", "fig5", "fig6", "fig7", "fig8", "fig9", "fig10a", "fig10b")},
        "fig11": FigureDef(plot="dpfl.papers.kato2024.protocol_plot:fig11", schema="protocol_fig11", **PROTOCOL),
        "fig12": FigureDef(plot="dpfl.papers.kato2024.protocol_plot:fig12", schema="protocol_fig12", **PROTOCOL),
        # the records per user and silo of an allocation (sanity check S-K13)
        "fig13": FigureDef(table="dpfl.papers.kato2024.bars:table", plot="dpfl.papers.kato2024.bars_plot:bars",
                           kind="experiment", layout="dpfl.papers.kato2024.bars:RecordsLayout",
                           cell="dpfl.papers.kato2024.bars:run_cell", schema="allocation_figure"),
    },
    allocation_kinds={
        # §1.1-1.2 + §2.1: the seed's split, then users and silos for every training record
        "kato_records": AllocationKind(function="dpfl.papers.kato2024.allocation:build_records",
                                       datasets=("creditcard", "mnist"),
                                       instances="dpfl.papers.kato2024.allocation:parse_instance"),
        # §2.2: user ids for FLamby's fixed silos
        "kato_flamby": AllocationKind(function="dpfl.papers.kato2024.allocation:build_flamby",
                                      datasets=("heart_disease", "tcga_brca"),
                                      instances="dpfl.papers.kato2024.allocation:parse_instance"),
    },
    methods="dpfl.papers.kato2024.methods",
    schema_fragments="dpfl.papers.kato2024.layout:schema_fragments",
)

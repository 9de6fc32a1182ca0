"""kato2024 (Kato, Xiong, Takagi, Cao, Yoshikawa, PVLDB 2024): ULDP-FL (spec/kato2024.md).

One sub-package per figure family, each with the same roles (`layout`: cells and inputs, import-light; `cell`;
`table`; `plot`, reading the table only): `group_privacy` (Fig 2, analytic: table and plot), `training` (Figs 4-10;
plus `rules`, the methods' round rules on dpfl.fl.local, and `group`, GROUP's record bounding), `protocol` (Figs
11-12; plus `secure`, the private weighting protocol's parties and messages) and `records` (Fig 13). Shared at the
top: `methods` (the ten methods, their accounting, the schema fragments generated from them), `allocation` and
`split` (records to users and silos, per seed), `panels` (a panel's allocation), `tasks` (per dataset: model, loss,
metric, a seed's records), `streams` (every cell's random streams) and `federation` ((run, silo, user) pairs).
"""

from dpfl.figure import AllocationKind, FigureDef, FigureFamily, PaperDef

#: Fig 2: the group-privacy conversion of ULDP-GROUP's record-level ε (closed form)
GROUP_PRIVACY = FigureFamily(name="group_privacy", table="dpfl.papers.kato2024.group_privacy.table:fig2",
                             plot="dpfl.papers.kato2024.group_privacy.plot:fig2", has_compat=True,
                             schema="group_privacy_figure")
#: Figs 4-10: one panel per cell (its methods one after another), on the panel's allocation, every seed batched
TRAINING = FigureFamily(name="training", table="dpfl.papers.kato2024.training.table:curves",
                        plot="dpfl.papers.kato2024.training.plot:curves", kind="experiment", has_compat=True,
                        layout="dpfl.papers.kato2024.training.layout:TrainingLayout",
                        cell="dpfl.papers.kato2024.training.cell:run_cell", schema="training_figure",
                        settings="dpfl.papers.kato2024.training.settings:TrainingSettings")
#: Figs 11-12: the private weighting protocol's phase times (spec §6-§7); each figure has its own plot and schema
PROTOCOL = FigureFamily(name="protocol", table="dpfl.papers.kato2024.protocol.table:table", plot=None,
                        markdown="dpfl.papers.kato2024.protocol.plot:phase_markdown", kind="experiment",
                        has_compat=True, layout="dpfl.papers.kato2024.protocol.layout:ProtocolLayout",
                        cell="dpfl.papers.kato2024.protocol.cell:run_cell", schema=None,
                        settings="dpfl.papers.kato2024.protocol.settings:ProtocolSettings",
                        measured=("seconds", "per_round", "y", "y_std", "decrypted_rel_err"))
#: Fig 13: the records per user and silo of an allocation (sanity check S-K13)
RECORDS = FigureFamily(name="records", table="dpfl.papers.kato2024.records.table:table",
                       plot="dpfl.papers.kato2024.records.plot:bars", kind="experiment",
                       layout="dpfl.papers.kato2024.records.layout:RecordsLayout",
                       cell="dpfl.papers.kato2024.records.cell:run_cell", schema="allocation_figure",
                       settings="dpfl.papers.kato2024.records.settings:RecordsSettings")

PAPER = PaperDef(
    figures={
        "fig2": FigureDef(GROUP_PRIVACY),
        **{fig: FigureDef(TRAINING) for fig in ("fig4", "fig5", "fig6", "fig7", "fig8", "fig9", "fig10a", "fig10b")},
        "fig11": FigureDef(PROTOCOL, plot="dpfl.papers.kato2024.protocol.plot:fig11", schema="protocol_fig11"),
        "fig12": FigureDef(PROTOCOL, plot="dpfl.papers.kato2024.protocol.plot:fig12", schema="protocol_fig12"),
        "fig13": FigureDef(RECORDS),
    },
    allocation_kinds={
        # §1.1-1.2 + §2.1: the seed's split, then users and silos for every training record
        "kato_records": AllocationKind(function="dpfl.papers.kato2024.allocation_instances:build_records",
                                       datasets=("creditcard", "mnist"),
                                       instances="dpfl.papers.kato2024.allocation_instances:parse_instance"),
        # §2.2: user ids for FLamby's fixed silos
        "kato_flamby": AllocationKind(function="dpfl.papers.kato2024.allocation_instances:build_flamby",
                                      datasets=("heart_disease", "tcga_brca"),
                                      instances="dpfl.papers.kato2024.allocation_instances:parse_instance"),
    },
    methods="dpfl.papers.kato2024.methods",
    schema_fragments="dpfl.papers.kato2024.methods:schema_fragments",
)

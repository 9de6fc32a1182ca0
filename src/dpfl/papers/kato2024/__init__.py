"""kato2024 (Kato, Xiong, Takagi, Cao, Yoshikawa, PVLDB 2024): ULDP-FL (spec/kato2024.md). Landed: Fig 2."""

from dpfl.figure import AllocationKind, FigureDef

FIGURES = {
    "fig2": FigureDef(table="dpfl.papers.kato2024.table:fig2", plot="dpfl.papers.kato2024.plot:fig2", has_compat=True),
}

ALLOCATION_KINDS = {
    # §1.1-1.2 + §2.1: the seed's split, then users and silos for every training record
    "kato_records": AllocationKind(function="dpfl.papers.kato2024.allocation:build_records",
                                   datasets=("creditcard", "mnist"),
                                   instances="dpfl.papers.kato2024.allocation:parse_instance"),
    # §2.2: user ids for FLamby's fixed silos
    "kato_flamby": AllocationKind(function="dpfl.papers.kato2024.allocation:build_flamby",
                                  datasets=("heart_disease", "tcga_brca"),
                                  instances="dpfl.papers.kato2024.allocation:parse_instance"),
}

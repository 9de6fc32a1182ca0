# Snakemake script: build results/report/index.html from every figure's outputs (see dpfl.stages.report).
from dpfl.stages.report import build_report

build_report(snakemake.params.figures, snakemake.params.settings, snakemake.output.html, snakemake.log[0])

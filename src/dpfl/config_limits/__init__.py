"""The limits of a configuration that no schema can state: those that depend on more than one key or on the size of
the data. dpfl.config.load calls `check` once the files are merged and validated, so that an impossible setting
stops the run before the first job, naming the file that set it, the key path, the value and the limit, instead of
failing inside a job (or after the figure's other cells ran).

Every variant a figure defines is checked with the params it runs with: the paper's, the authors-code variant
(`authors_code.params` merged in) and each ablation, after the scale overlay (config/scales/<scale>.yaml). The file
named is the one that set the offending value: the scale file (its `figures`, `families` or `all_figures` entry),
the paper file (the figure's params, its `authors_code` items or its `ablations`), or, for a value no file writes,
the schema that gives its default.

The limits sit in one registry per figure family (`FIGURE_LIMITS`, keyed by (paper, FigureFamily.name), so a new
figure of a family is checked without an entry here) and per paper (`PAPER_LIMITS`); each function's docstring says
which code assumes each limit. Families without a cross-field limit are listed in `NO_LIMITS`.

Data sizes (`sizes.DataSizes`): where the data a run will read is already prepared (data/prepared/<dataset>.npz, of
the kind `data_source` asks for), its recorded counts; otherwise the documented size of the real data
(`sizes.DOCUMENTED`; the stand-ins write the same counts). The message says which.

The package: this module holds the registries and `check`; `sizes` the data sizes, `variant` the machinery the
limits are written against (one figure variant, its problems and where each value was set), and one module per
paper with its limits (`lowy2023`, `bietti2022`, `kato2024`; the two analytic papers together in `analytic`), so
that the limits of one paper read apart from the others'.

Import-light: it reads the papers' registries and constants, never a dataset's arrays (a prepared file's metadata
only), so it adds milliseconds to a load.
"""

from __future__ import annotations

from dpfl import paths
from dpfl.config_limits.analytic import _asoodeh_fig2, _balle_checkins
from dpfl.config_limits.bietti2022 import _bietti_training
from dpfl.config_limits.kato2024 import _kato_allocation_figure, _kato_protocol_figure, _kato_training
from dpfl.config_limits.lowy2023 import _lowy_figure, _lowy_paper
from dpfl.config_limits.sizes import DataSizes
from dpfl.config_limits.variant import Variant
from dpfl.papers import FIGURES

#: (paper, figure family = FigureFamily.name) -> its limits
FIGURE_LIMITS = {
    ("lowy2023", "training"): _lowy_figure,
    ("bietti2022", "grids"): _bietti_training,
    ("kato2024", "training"): _kato_training,
    ("kato2024", "records"): _kato_allocation_figure,
    ("kato2024", "protocol"): _kato_protocol_figure,
    ("asoodeh2021", "theorem2"): _asoodeh_fig2,
    ("balle2020", "checkins"): _balle_checkins,
}
#: families whose settings the schema bounds alone: kato2024 Fig 2 (closed form; k > 62 is clamped by design),
#: balle2020 Fig 2 and Table 1 (closed forms of any n ≥ 1)
NO_LIMITS = {("kato2024", "group_privacy"), ("balle2020", "shuffling"), ("balle2020", "table1")}
#: paper -> the limits of its paper-level settings (allocations)
PAPER_LIMITS = {"lowy2023": _lowy_paper}


def _modes(spec: dict) -> list[str]:
    """Every variant a figure defines: the paper's, authors-code (where it has params) and each ablation."""
    modes = ["none"]
    if (spec.get("authors_code") or {}).get("params"):
        modes.append(paths.AUTHORS_CODE)
    return modes + [paths.ablation_mode(name) for name in spec.get("ablations") or {}]


def check(cfg, scale: dict) -> str | None:
    """Every limit of the loaded configuration `cfg` (dpfl.config.ProjectConfig; `scale`: the scale file as read):
    None when all hold, else the message, one line per problem under the file that set the value."""
    sizes = DataSizes(cfg)
    found: dict[tuple[str, str, str], list[str]] = {}  # (file, key path, text) -> variants
    for paper in sorted(cfg.papers):
        runs = []
        if paper in PAPER_LIMITS:
            v = Variant(cfg, scale, paper, sizes)
            PAPER_LIMITS[paper](v)
            runs.append(v)
        for figure in sorted(cfg.papers[paper]["figures"]):
            limits = FIGURE_LIMITS.get((paper, FIGURES[(paper, figure)].family.name))
            if limits is None:
                continue
            for mode in _modes(cfg.figure(paper, figure)):
                v = Variant(cfg, scale, paper, sizes, figure, mode)
                limits(v)
                runs.append(v)
        for v in runs:
            for prob in v.problems:
                where, key = v.locate(prob.path)
                found.setdefault((where, key, prob.text), []).append(v.mode)
    if not found:
        return None
    by_file: dict[str, list[str]] = {}
    for (where, key, text), modes in found.items():
        note = "" if "none" in modes else f" (in the {', '.join(dict.fromkeys(modes))} variant)"
        by_file.setdefault(where, []).append(f"  - {key}: {text}{note}")
    return "\n".join(f"invalid configuration in {where}:\n" + "\n".join(lines) for where, lines in by_file.items())

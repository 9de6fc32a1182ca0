"""Load, merge and validate the YAML configuration (config/*.yaml) against workflow/schemas/.

Order of precedence (later wins): config/papers/<id>.yaml < config/scales/<scale>.yaml < --config on
the command line (global keys only). Every file is checked against its JSON Schema before anything
runs; errors name the file, the key path and what is allowed, with a "did you mean" hint for typos.
Defaults are filled while validating (as `snakemake.utils.validate(set_default=True)` does), so the schema is
the single place where a default lives. A schema may `$ref` a schema generated from code by its URI (the checks
of a claim: dpfl.claims.check_schema(), see _generated_schemas). Every file is read by read_yaml (a number in
scientific notation, `1e-5`, is a number; an integer setting takes an int only), config/config.yaml included; a
data mirror that is set must exist (_check_mirror).

This module loads: the files in their order, the checks on folder settings, and ProjectConfig, the resolved
configuration every rule and stage reads. The overlay algebra (how a scale file, a figure variant and the command
line are merged over a file, and the checks on each overlay) is dpfl.config.overlays; the YAML reader and the
schema machinery are dpfl.config.schema.
"""

from __future__ import annotations

import copy
import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path

from dpfl import config_limits, paths
from dpfl.config.overlays import (  # noqa: F401  (command_line_settings: the configuration's API)
    _coerce_cli, _refuse_paper_settings, _scale_overlay, _validate_authors_code, _validate_variants,
    command_line_settings, deep_merge, variant_overlay)
from dpfl.config.schema import (  # noqa: F401  (ConfigError, read_yaml and validate: the configuration's API)
    ConfigError, read_yaml, short_path, validate)
from dpfl.io import resolve
from dpfl.papers import ALLOCATION_KINDS, FIGURES, PAPERS

# The workflow's main file, relative to the project folder (Snakemake's standard layout: `snakemake` run in the
# project folder finds it); with config/config.yaml it marks a project checkout.
SNAKEFILE = Path("workflow") / "Snakefile"


# --------------------------------------------------------------------------------------------------
# the resolved project configuration
# --------------------------------------------------------------------------------------------------


# the rest of a paper file are its settings
PAPER_STRUCTURE_KEYS = ("paper", "figures", "compat", "allocations", "claims")


@dataclass
class ProjectConfig:
    root: Path
    globals: dict
    papers: dict  # paper id -> validated, merged paper config
    sources: dict = field(default_factory=dict)  # paper id -> list of files that shaped it
    datasets: dict = field(default_factory=dict)  # dataset -> validated entry of config/datasets.yaml
    written: dict = field(default_factory=dict)  # paper id -> its paper file as written (no scale overlay, no defaults)

    def figure(self, paper: str, figure: str) -> dict:
        if paper not in self.papers:
            raise ConfigError(f"unknown paper {paper!r}; allowed: {', '.join(sorted(self.papers))}")
        figures = self.papers[paper]["figures"]
        if figure not in figures:
            raise ConfigError(
                f"unknown figure {figure!r} of paper {paper!r} (config/papers/{paper}.yaml); "
                f"allowed: {', '.join(sorted(figures)) or '(none configured)'}"
            )
        return figures[figure]

    def selected(self) -> list[tuple[str, str]]:
        """The (paper, figure) pairs that `all` builds: every configured figure, or `only`."""
        pairs = [(p, f) for p in sorted(self.papers) for f in sorted(self.papers[p]["figures"])]
        only = self.globals.get("only") or []
        if not only:
            return pairs
        chosen = []
        for item in only:
            paper, _, figure = item.partition("/")
            chosen += [(p, f) for p, f in pairs if p == paper and (not figure or f == figure)]
        return sorted(set(chosen))

    def mode(self, paper: str) -> str:
        return self.papers[paper]["compat"]

    def figure_params(self, paper: str, figure: str, mode: str) -> dict:
        """A figure's params in a mode: under authors-code, its `authors_code.params` are merged in; in an ablation
        ("ablation-<name>"), only the params of the difference items the ablation names (variant_overlay)."""
        spec = self.figure(paper, figure)
        return deep_merge(spec["params"], variant_overlay(spec, mode, f"config/papers/{paper}.yaml: figures.{figure}"))

    def paper_file_params(self, paper: str, figure: str, mode: str) -> dict:
        """A figure's params as its paper file writes them (the paper's own settings, before the scale overlay and
        schema defaults), in a mode: compared with figure_params, they tell a reduced-scale run."""
        spec = self.written.get(paper, {}).get("figures", {}).get(figure, {})
        return deep_merge(spec.get("params", {}), variant_overlay(spec, mode, f"config/papers/{paper}.yaml"))

    def ablations(self, paper: str, figure: str) -> dict[str, list[str]]:
        """A figure's variants of `ablations:`: name -> the difference items it switches, or for an evidence
        variant (a setting changed alone, not an item of the authors' code) [its why]."""
        return {name: ([v["why"]] if isinstance(v, dict) else list(v))
                for name, v in (self.figure(paper, figure).get("ablations") or {}).items()}

    def claims_context(self, paper: str, figures: list[str]) -> dict:
        """What a claims job needs besides the tables, from the figures it reads (for a claim over several figures:
        those built, never one not built, whose ablations would be missing): how x is named, the documented
        difference the authors-code variant implements, its difference items, and the one-switch ablations and
        evidence variants ({mode: items}) whose verdicts name a cause (dpfl.claims.cause_of)."""
        first = self.figure(paper, figures[0])
        variants = {paths.ablation_mode(n): items for n, items in self.ablations(paper, figures[0]).items()}
        evidence = {paths.ablation_mode(n) for n in self.evidence_variants(paper, figures[0])}
        return {
            "x_name": first.get("claims_x"),
            "difference": first.get("authors_code", {}).get("why", ""),
            "authors_items": list((first.get("authors_code", {}).get("items") or {})),
            "ablations": {m: items for m, items in variants.items() if m not in evidence},
            "evidence": {m: items for m, items in variants.items() if m in evidence},
        }

    def built_figures(self, paper: str, claim: dict) -> list[str]:
        """The figures of a claim over several figures that this run builds (selected), in the claim's order."""
        chosen = set(self.selected())
        return [f for f in claim["figures"] if (paper, f) in chosen]

    def evidence_variants(self, paper: str, figure: str) -> set[str]:
        """The names of the figure's evidence variants (not one-switch ablations of the authors' items)."""
        return {name for name, v in (self.figure(paper, figure).get("ablations") or {}).items() if isinstance(v, dict)}

    def paper_settings(self, paper: str) -> dict:
        """Paper-level settings that shape results (e.g. lowy2023's noise_calibration)."""
        return {k: v for k, v in self.papers[paper].items() if k not in PAPER_STRUCTURE_KEYS}

    def allocation(self, name: str) -> dict:
        """A configured allocation: a paper's `allocations:` entry, named "<paper>-<name>", or one instance of a
        seeded scheme, "<paper>-<name>/<instance>" (its params = the entry's + the instance's, with the global seed
        and the dataset; e.g. "kato2024-creditcard/zipf-U1000-S5-seed0")."""
        family, _, instance = name.partition("/")
        for paper, cfg in self.papers.items():
            for key, entry in cfg.get("allocations", {}).items():
                if f"{paper}-{key}" != family:
                    continue
                kind = ALLOCATION_KINDS[entry["kind"]]
                if not instance and kind.instances is None:
                    return entry
                if not instance or kind.instances is None:
                    want = f"{family}/<instance>" if kind.instances else family
                    raise ConfigError(f"allocation {name!r}: kind {entry['kind']!r} is named {want}")
                try:
                    own = resolve(kind.instances)(instance)
                except ValueError as exc:
                    raise ConfigError(f"allocation {name!r}: {exc}") from None
                params = {**entry["params"], **own, "dataset": entry["dataset"], "global_seed": self.globals["seed"]}
                return {**entry, "params": params, "instance": instance}
        known = [f"{p}-{k}" for p, c in self.papers.items() for k in c.get("allocations", {})]
        raise ConfigError(f"unknown allocation {name!r}; configured allocations: {', '.join(known) or '(none)'}")

    def data_mirror(self) -> str | None:
        """The local dataset mirror: `data_mirror`, else $DPFL_DATA_MIRROR, as an absolute path with symlinks
        resolved (a relative one is relative to the project root), or None. Resolved, so that one folder is one
        mirror, whichever link names it."""
        mirror = self.globals.get("data_mirror") or os.environ.get("DPFL_DATA_MIRROR") or None
        return None if mirror is None else project_path(self.root, mirror)

    def dataset_folder(self, dataset: str) -> str | None:
        """The user's own folder of this dataset's files (`dataset_files`), absolute with symlinks resolved (a relative
        one is relative to the project root), or None; not used with data_source standin."""
        folder = self.globals.get("dataset_files", {}).get(dataset)
        if folder is None or self.data_source(dataset) == "standin":
            return None
        return project_path(self.root, folder)

    def data_source(self, dataset: str) -> str:
        """auto | real | standin for one dataset: its `dataset_source` override, else the global `data_source`."""
        if dataset not in self.datasets:
            raise ConfigError(f"unknown dataset {dataset!r}; allowed: {', '.join(sorted(self.datasets))}")
        return self.globals.get("dataset_source", {}).get(dataset, self.globals["data_source"])


def load_datasets(root: str | Path) -> dict:
    """Read config/datasets.yaml (the dataset catalog), validate it and fill defaults: dataset -> entry."""
    root = Path(root).resolve()
    path = root / "config" / "datasets.yaml"
    data = read_yaml(path)
    validate(data, root / "workflow" / "schemas" / "datasets.schema.yaml", short_path(path))
    return data["datasets"]


def load(root: str | Path, overrides: dict | None = None) -> ProjectConfig:
    """Read config/config.yaml (+ command-line overrides), the paper files and the scale overlay. `overrides` are the
    command line's settings only (command_line_settings): config/config.yaml is read here, by read_yaml."""
    root = Path(root).resolve()
    schemas = root / "workflow" / "schemas"
    cfg_file = root / "config" / "config.yaml"
    global_schema = read_yaml(schemas / "config.schema.yaml")
    cli = _coerce_cli(overrides or {}, global_schema)
    _refuse_paper_settings(root, cli, global_schema)
    globals_ = deep_merge(read_yaml(cfg_file), cli)
    validate(globals_, schemas / "config.schema.yaml", f"{short_path(cfg_file)} (+ --config overrides)")
    _check_mirror(root, globals_, cli)
    datasets = load_datasets(root)
    for key in ("dataset_source", "dataset_files"):
        for name in sorted(set(globals_[key]) - set(datasets)):
            close = difflib.get_close_matches(name, list(datasets), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ConfigError(f"invalid configuration in {short_path(cfg_file)} (+ --config overrides):\n  - {key}: "
                              f"unknown dataset '{name}'{hint}; allowed: {', '.join(sorted(datasets))}")
    _check_dataset_files(root, globals_, cli)

    scale_file = root / "config" / "scales" / f"{globals_['scale']}.yaml"
    scale = read_yaml(scale_file)
    validate(scale, schemas / "scale.schema.yaml", short_path(scale_file), set_default=False)
    unknown = sorted(set(scale.get("papers", {})) - set(PAPERS))
    if unknown:
        raise ConfigError(f"invalid configuration in {short_path(scale_file)}:\n  - papers: unknown paper {unknown}; "
                          f"allowed: {', '.join(PAPERS)}")

    papers, sources, written = {}, {}, {}
    for paper in PAPERS:
        paper_file = root / "config" / "papers" / f"{paper}.yaml"
        schema_path = schemas / "papers" / f"{paper}.schema.yaml"
        data = read_yaml(paper_file)
        validate(data, schema_path, short_path(paper_file), set_default=False)
        overlay = _scale_overlay(paper, scale.get("papers", {}).get(paper, {}), data, schema_path, scale_file)
        written[paper] = copy.deepcopy(data)
        merged = deep_merge(data, overlay)
        validate(merged, schema_path, f"{short_path(paper_file)} merged with {short_path(scale_file)}")
        for figure, spec in merged["figures"].items():
            if (paper, figure) not in FIGURES:
                raise ConfigError(
                    f"{short_path(paper_file)}: figures.{figure}: no implementation registered for this figure")
            if spec.get("authors_code", {}).get("params"):
                _validate_authors_code(merged, figure, schema_path, short_path(paper_file))
            _validate_variants(merged, figure, schema_path, short_path(paper_file))
        for name, entry in merged.get("allocations", {}).items():
            kind = ALLOCATION_KINDS.get(entry["kind"])
            if kind is None or entry["dataset"] not in kind.datasets:
                allowed = ", ".join(f"{k} ({'/'.join(v.datasets)})" for k, v in ALLOCATION_KINDS.items())
                raise ConfigError(f"invalid configuration in {short_path(paper_file)}:\n  - allocations.{name}: kind "
                                  f"{entry['kind']!r} on dataset {entry['dataset']!r} is not implemented; "
                                  f"known kinds: {allowed}")
        papers[paper] = merged
        sources[paper] = [str(paper_file.relative_to(root)), str(scale_file.relative_to(root))]

    for item in globals_.get("only") or []:
        paper, _, figure = item.partition("/")
        if paper not in papers:
            raise ConfigError(f"invalid configuration in {short_path(cfg_file)} (+ --config overrides):\n  - only: "
                              f"unknown paper {paper!r}; allowed: {', '.join(PAPERS)}")
        if figure and figure not in papers[paper]["figures"]:
            raise ConfigError(
                f"invalid configuration in {short_path(cfg_file)} (+ --config overrides):\n  - only: unknown figure "
                f"{figure!r} of paper {paper!r}; allowed: {', '.join(sorted(papers[paper]['figures']))}"
            )
    cfg = ProjectConfig(root=root, globals=globals_, papers=papers, sources=sources, datasets=datasets, written=written)
    problems = config_limits.check(cfg, scale)  # limits across keys and on the data's size (dpfl.config_limits)
    if problems:
        raise ConfigError(problems)
    return cfg


def project_path(root: Path, written: str) -> str:
    """A folder setting as the project uses it: `~` expanded, relative to the project root, symlinks resolved (one
    folder is one setting, whichever link names it)."""
    return os.path.realpath(root / Path(written).expanduser())


def _not_a_folder(root: Path, written: str) -> str:
    """Why the folder setting `written` names no folder ("<as written> [(that is <path>)] does not exist" or "... is
    not a folder"), or "" when it names one."""
    path = project_path(root, written)
    if os.path.isdir(path):
        return ""
    shown = written if path == written else f"{written} (that is {path})"
    return f"{shown} {'is not a folder' if os.path.exists(path) else 'does not exist'}"


def _check_mirror(root: Path, globals_: dict, overrides: dict) -> None:
    """A data mirror that is set (`data_mirror`, else $DPFL_DATA_MIRROR: ProjectConfig.data_mirror) must be a folder,
    whatever the data source: a mistyped path would otherwise make `data_source: auto` fall back to the stand-ins
    without stopping. The message names the path, where it was set and how to fix it."""
    layout = "the folder that holds the offline dataset copies, as <mirror>/<dataset>/<file> (docs/data.md)"
    if globals_.get("data_mirror"):
        written = globals_["data_mirror"]
        if "data_mirror" in overrides:
            origin, fix = f"--config data_mirror={written}", f"give data_mirror {layout}, or leave it out"
        else:
            origin = "data_mirror in config/config.yaml"
            fix = f"set data_mirror to {layout}, or to null; a relative path is relative to the project"
    elif os.environ.get("DPFL_DATA_MIRROR"):
        written = os.environ["DPFL_DATA_MIRROR"]
        origin = "the environment variable DPFL_DATA_MIRROR"
        fix = f"point DPFL_DATA_MIRROR at {layout}, or unset it to run without a mirror"
    else:
        return
    problem = _not_a_folder(root, written)
    if problem:
        raise ConfigError(f"the data mirror {problem} (from {origin}): {fix}")


def _check_dataset_files(root: Path, globals_: dict, overrides: dict) -> None:
    """Each folder named in `dataset_files` must be a folder (as the mirror must): a mistyped path would otherwise
    go unnoticed, the dataset coming from the next source."""
    origin = ("--config dataset_files" if "dataset_files" in overrides
              else "dataset_files in config/config.yaml")
    for dataset, written in sorted(globals_["dataset_files"].items()):
        problem = _not_a_folder(root, written)
        if problem:
            raise ConfigError(f"the folder of {dataset}'s files {problem} (from {origin}): name the folder "
                              f"that holds the dataset's files (docs/data.md, \"Your own copy\"), or remove "
                              f"{dataset} from dataset_files; a relative path is relative to the project")

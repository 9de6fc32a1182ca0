"""Load, merge and validate the YAML configuration (config/*.yaml) against workflow/schemas/.

Order of precedence (later wins): config/papers/<id>.yaml < config/scales/<scale>.yaml < --config on
the command line (global keys only). Every file is checked against its JSON Schema before anything
runs; errors name the file, the key path and what is allowed, with a "did you mean" hint for typos.
Defaults are filled while validating (as `snakemake.utils.validate(set_default=True)` does), so the schema is
the single place where a default lives. A schema may `$ref` a schema generated from code by its URI (the checks
of a claim: dpfl.claims.check_schema(), see _generated_schemas). Every file is read by read_yaml (a number in
scientific notation, `1e-5`, is a number; an integer setting takes an int only), config/config.yaml included; a
data mirror that is set must exist (_check_mirror).
"""

from __future__ import annotations

import copy
import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from dpfl import config_limits, paths
from dpfl.config.schema import (  # noqa: F401  (ConfigError, read_yaml and validate: the configuration's API)
    ConfigError, describe_error, key_path, read_yaml, short_path, strip_required, validate, validator_for)
from dpfl.io import resolve
from dpfl.papers import ALLOCATION_KINDS, FIGURES, PAPERS

# The workflow's main file, relative to the project folder (Snakemake's standard layout: `snakemake` run in the
# project folder finds it); with config/config.yaml it marks a project checkout.
SNAKEFILE = Path("workflow") / "Snakefile"



def deep_merge(base: dict, overlay: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in (overlay or {}).items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


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
        seeded family, "<paper>-<name>/<instance>" (its params = the entry's + the instance's, with the global seed
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


def command_line_settings(configfiles, config: dict) -> dict:
    """The global settings given on the Snakemake command line: each `--configfile` (read by read_yaml, as the project
    reads config/config.yaml), then `--config key=value` (Snakemake reads `1e-5` there as a number). Not Snakemake's
    `config`, which also holds config/config.yaml as Snakemake's own YAML reader reads it (`1e-5` a string)."""
    out: dict = {}
    for path in configfiles:
        out = deep_merge(out, read_yaml(Path(path)))
    return deep_merge(out, dict(config))


def _refuse_paper_settings(root: Path, overrides: dict, schema: dict) -> None:
    """`--config` sets the global keys only: one that is a setting of the paper files (e.g. `delta`) is refused with
    where to write it instead (other unknown keys are left to the schema's message, with its "did you mean")."""
    for key, value in overrides.items():
        if key in schema.get("properties", {}):
            continue
        places = [f"config/papers/{paper}.yaml: {key_path(where)}" for paper in PAPERS
                  for where in _paths_of_key(read_yaml(root / "config" / "papers" / f"{paper}.yaml"), key)]
        if places:
            more = f" (and {len(places) - 1} more)" if len(places) > 1 else ""
            raise ConfigError(
                f"invalid configuration in --config:\n  - {key}={value}: not a global setting (--config sets only the "
                f"keys of config/config.yaml: {', '.join(sorted(schema['properties']))}); '{key}' is a setting of the "
                f"paper files, e.g. {places[0]}{more}: write it there, e.g. `{key}: {value}`")


def _paths_of_key(data, key: str, at: tuple = ()) -> list[tuple]:
    """The key paths in `data` (nested mappings and lists) that end in `key`."""
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else []
    out = []
    for k, v in items:
        if k == key and isinstance(data, dict):
            out.append((*at, k))
        out += _paths_of_key(v, key, (*at, k))
    return out


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


def variant_overlay(spec: dict, mode: str, where: str = "") -> dict:
    """The params a variant of a figure (its config entry `spec`) merges into the paper's: none for the paper's mode,
    `authors_code.params` for authors-code, and for an ablation ("ablation-<name>") the params of the difference
    items it names (`authors_code.items`), merged in their order."""
    if mode == "none":
        return {}
    code = spec.get("authors_code", {})
    if mode == paths.AUTHORS_CODE:
        return code.get("params", {})
    name = paths.ablation_name(mode)
    if name is None or name not in (spec.get("ablations") or {}):
        known = ", ".join(sorted(spec.get("ablations") or {})) or "none"
        raise ConfigError(f"{where}: no variant {mode!r}; its ablations: {known}")
    chosen = spec["ablations"][name]
    if isinstance(chosen, dict):  # an evidence variant: a setting changed alone, not an item of the authors' code
        return chosen["params"]
    out: dict = {}
    for item in chosen:
        out = deep_merge(out, code.get("items", {})[item])
    return out


def _validate_variants(paper_cfg: dict, figure: str, schema_path: Path, source: str) -> None:
    """A figure's difference items and ablations: merged together, `authors_code.items` must equal
    `authors_code.params` (so that the authors-code variant is exactly its items and each item can be switched
    alone), every ablation names known items, and each ablation's params are valid params."""
    spec = paper_cfg["figures"][figure]
    code = spec.get("authors_code", {})
    items = code.get("items") or {}
    where = f"{source}: figures.{figure}"
    if items:
        merged: dict = {}
        for overlay in items.values():
            merged = deep_merge(merged, overlay)
        if merged != code.get("params", {}):
            raise ConfigError(f"invalid configuration in {where}.authors_code: its items ({', '.join(items)}) merged "
                              f"together give {merged}, not its params {code.get('params', {})}")
    for name, chosen in (spec.get("ablations") or {}).items():
        unknown = [] if isinstance(chosen, dict) else [i for i in chosen if i not in items]
        if unknown:
            raise ConfigError(f"invalid configuration in {where}.ablations.{name}: unknown item(s) {unknown}; "
                              f"authors_code.items has: {', '.join(items) or 'none'}")
        trial = copy.deepcopy(paper_cfg)
        overlay = variant_overlay(spec, paths.ablation_mode(name))
        trial["figures"][figure]["params"] = deep_merge(spec["params"], overlay)
        validate(trial, schema_path, f"{source} (figures.{figure}.ablations.{name} merged into params)",
                 set_default=False)


def _validate_authors_code(paper_cfg: dict, figure: str, schema_path: Path, source: str) -> None:
    """The params a figure has under `compat: authors-code` (its params with `authors_code.params` merged in) must
    be valid params: a misspelt or ill-typed authors-code setting fails here, not in a job."""
    spec = paper_cfg["figures"][figure]
    trial = copy.deepcopy(paper_cfg)
    trial["figures"][figure]["params"] = deep_merge(spec["params"], spec["authors_code"]["params"])
    validate(trial, schema_path, f"{source} (figures.{figure}.authors_code.params merged into params)",
             set_default=False)


def _coerce_cli(overrides: dict, schema: dict) -> dict:
    """`snakemake --config key=value` passes true/false/null as strings: read them as YAML would,
    for the keys whose schema expects a boolean or null."""
    out = dict(overrides)
    for key, value in overrides.items():
        types = schema.get("properties", {}).get(key, {}).get("type")
        types = types if isinstance(types, list) else [types]
        if isinstance(value, str) and ("boolean" in types or "null" in types):
            parsed = yaml.safe_load(value)
            if (isinstance(parsed, bool) and "boolean" in types) or (parsed is None and "null" in types):
                out[key] = parsed
    return out


def _scale_overlay(paper: str, part: dict, data: dict, schema_path: Path, scale_file: Path) -> dict:
    """A paper's part of a scale file as one overlay of the paper file, each piece checked against the paper's schema.

    Per figure, later wins: `all_figures` (every figure), `families.<family>` (every figure of the
    dpfl.figure.FigureFamily named <family>: one reduction serves a new figure of that family) with
    its `datasets.<dataset>` refinement (figures whose params name that dataset), then `figures.<figure>`. A family
    reduction never adds a block (a mapping: one method family's hyper-parameters, one grid) that a figure lacks, so
    that one reduction can name every block of the family; its other settings apply to every figure of the family.
    """
    part = copy.deepcopy(part)
    common, families = part.pop("all_figures", None), part.pop("families", None) or {}
    where = f"{short_path(scale_file)} (papers.{paper}"
    figure_families = {fig: FIGURES[(paper, fig)].family.name for fig in data.get("figures", {})
                       if (paper, fig) in FIGURES}
    unknown = sorted(set(families) - set(figure_families.values()))
    if unknown:
        raise ConfigError(f"invalid configuration in {where}.families):\n  - unknown figure family {unknown}; this "
                          f"paper's families (FigureFamily.name): {', '.join(sorted(set(figure_families.values())))}")
    for family, entry in families.items():
        named = {data["figures"][f].get("params", {}).get("dataset") for f, s in figure_families.items() if s == family}
        stray = sorted(set(entry.get("datasets", {})) - named)
        if stray:
            raise ConfigError(f"invalid configuration in {where}.families.{family}.datasets):\n  - no figure of this "
                              f"family names dataset {stray}; its figures' datasets: "
                              f"{', '.join(sorted(d for d in named if d)) or 'none'}")
    if part:
        _validate_overlay(part, schema_path, f"{where})")
    if not common and not families:
        return part
    if common:
        _validate_overlay({"figures": {f: common for f in figure_families}}, schema_path, f"{where}.all_figures)")
    figures = part.get("figures", {})
    out = {}
    for fig, family in figure_families.items():
        entry = families.get(family, {})
        params = data["figures"][fig].get("params", {})
        reduction = deep_merge(entry.get("params", {}),
                               entry.get("datasets", {}).get(params.get("dataset"), {}).get("params", {}))
        reduction = _restrict(reduction, params)
        if reduction:
            source = f"{where}.families.{family} as applied to figures.{fig})"
            _validate_overlay({"figures": {fig: {"params": reduction}}}, schema_path, source)
        out[fig] = deep_merge(deep_merge(common or {}, {"params": reduction} if reduction else {}),
                              figures.get(fig, {}))
    part["figures"] = {f: v for f, v in {**figures, **out}.items() if v}
    return part


def _restrict(reduction: dict, params: dict) -> dict:
    """A family reduction without the blocks (mappings) `params` lacks, recursively."""
    out = {}
    for key, value in reduction.items():
        if isinstance(value, dict):
            if not isinstance(params.get(key), dict):
                continue
            value = _restrict(value, params[key])
            if not value:
                continue
        out[key] = value
    return out


def _validate_overlay(overlay: dict, schema_path: Path, source: str):
    """Check a scale overlay against the paper schema with required keys and defaults removed."""
    relaxed = validator_for(schema_path, transform=strip_required)
    errors = sorted(relaxed.iter_errors(overlay), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        lines = "\n".join(f"  - {describe_error(e)}" for e in errors)
        raise ConfigError(f"invalid configuration in {source}:\n{lines}\n(schema: {short_path(schema_path)})")

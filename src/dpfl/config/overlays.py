"""The overlay algebra of the configuration (dpfl.config.load): how one mapping is merged over another
(`deep_merge`: later wins, mappings key by key), and each overlay the loader applies, with the checks that make its
errors name where it was written:

- the command line over config/config.yaml (`command_line_settings`; `--config` values coerced as YAML would read
  them, and a paper file's setting given there refused with where to write it);
- a scale file's part of a paper over the paper file (`_scale_overlay`: all_figures < families < figures, a family
  reduction restricted to the blocks a figure has, each piece checked against the paper's relaxed schema);
- a figure variant over the figure's params (`variant_overlay`: authors-code params, or the difference items an
  ablation names), with the checks that the items add up to the authors-code params and that every variant's
  params are valid params.

Apart from dpfl.config, which reads the files in their order and builds ProjectConfig: the merging rules and their
checks read in one place, whichever file they apply to.
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from dpfl import paths
from dpfl.config.schema import (ConfigError, describe_error, key_path, read_yaml, short_path, strip_required,
                                validate, validator_for)
from dpfl.papers import FIGURES, PAPERS


def deep_merge(base: dict, overlay: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in (overlay or {}).items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


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


def _scale_overlay(paper: str, part: dict, data: dict, schema_path: Path, scale_file: Path) -> dict:
    """A paper's part of a scale file as one overlay of the paper file, each piece checked against the paper's schema.

    Per figure, later wins: `all_figures` (every figure), `families.<family>` (every figure of the
    dpfl.figure.FigureFamily named <family>: one reduction serves a new figure of that family) with
    its `datasets.<dataset>` refinement (figures whose params name that dataset), then `figures.<figure>`. A family
    reduction never adds a block (a mapping: one method scheme's hyper-parameters, one grid) that a figure lacks, so
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


def scale_reductions(paper_params: dict, params: dict, prefix: str = "") -> dict:
    """Settings whose value in this run differs from the paper's: {"trials": [paper, used], "step_grids.local.num":
    [...]} (only keys the paper file sets): what a scale file's overlay (or the command line) changed, recorded beside a
    reduced-scale figure so that its verdicts can say why they are not the paper's."""
    out = {}
    for key, value in (paper_params or {}).items():
        used = params.get(key) if isinstance(params, dict) else None
        if isinstance(value, dict) and isinstance(used, dict):
            out.update(scale_reductions(value, used, f"{prefix}{key}."))
        elif used is not None and used != value:
            out[f"{prefix}{key}"] = [value, used]
    return out

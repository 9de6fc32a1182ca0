"""The YAML reader and the JSON Schema machinery of the configuration (dpfl.config): read_yaml (duplicate keys are
errors; `1e-5` is a number), validate (defaults filled while validating, so the schema is the single place where a
default lives; errors name the file, the key path and what is allowed, with a "did you mean" hint), and the schemas
generated from code that the schema files `$ref` by URI (the checks of a claim, each paper's figures and fragments).
"""

from __future__ import annotations

import copy
import difflib
import functools
import re
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

import yaml
from jsonschema import Draft202012Validator, validators
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from dpfl.io import resolve
from dpfl.papers import REGISTRY



class ConfigError(ValueError):
    """A configuration file is invalid. The message names the file, the key and what is allowed."""


# --------------------------------------------------------------------------------------------------
# schema validation with readable errors
# --------------------------------------------------------------------------------------------------


class _UniqueKeyLoader(yaml.SafeLoader):
    """yaml.SafeLoader that rejects a key written twice in one mapping (PyYAML keeps the last one silently, so a
    duplicated setting would hide which value the run used)."""

    def construct_mapping(self, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor`: its keys may be overridden here
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node)
            except TypeError:  # an unhashable key: let PyYAML report it
                continue
            if first is not key_node:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first at line {first.start_mark.line + 1}, column "
                                f"{first.start_mark.column + 1})", key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


#: a number in scientific notation: 1e-5, 5E3, 1.0e5, .5e-3. YAML 1.1 (PyYAML) reads a float only with a dot and a
#: signed exponent (1.0e-5), so that `delta: 1e-5` would be the string '1e-5'; the project's reader takes every
#: such scalar as a float, as YAML 1.2 and JSON do (a quoted '1e-5' stays a string)
SCIENTIFIC = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9][0-9_]*)[eE][-+]?[0-9]+$")
_UniqueKeyLoader.add_implicit_resolver("tag:yaml.org,2002:float", SCIENTIFIC, list("-+.0123456789"))


def read_yaml(path: Path):
    """A YAML file's contents; ConfigError naming the file, line and column for a syntax error or a duplicate key.
    Every configuration file is read here, so a number means the same in each (SCIENTIFIC)."""
    try:
        with open(path) as fh:
            data = yaml.load(fh, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader)
    except FileNotFoundError:
        raise ConfigError(f"{short_path(path)}: file not found") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{short_path(path)}{where}: not valid YAML: {problem}") from None
    return {} if data is None else data


@functools.lru_cache(maxsize=None)
def _generated_schemas(schemas: Path) -> dict:
    """Schemas generated from code (no file on disk), by the URI the schema files `$ref` them with: the checks of a
    claim (dpfl.claims.check_schema()); each paper's figures (urn:dpfl:<paper>:figures: every registered figure,
    validated by the `$defs` entry its FigureDef names in papers/<paper>.schema.yaml under `schemas`, the schema
    folder); and each paper's own fragments (PaperDef.schema_fragments, as urn:dpfl:<paper>:<name>). Built once per
    process; each value is a factory of a fresh copy."""
    from dpfl.claims import CHECK_SCHEMA_ID, check_schema  # here: dpfl.claims imports pandas

    out = {CHECK_SCHEMA_ID: check_schema}
    for paper, pdef in REGISTRY.items():
        out[f"urn:dpfl:{paper}:figures"] = functools.partial(_figures_schema, paper, schemas / "papers")
        if pdef.schema_fragments:
            for name, fragment in resolve(pdef.schema_fragments)().items():
                out[f"urn:dpfl:{paper}:{name}"] = functools.partial(copy.deepcopy, fragment)
    return out


def _figures_schema(paper: str, papers_dir: Path) -> dict:
    """The `figures:` of a paper file: the registered figure ids, each validated by its family's `$defs` entry."""
    uri = (papers_dir / f"{paper}.schema.yaml").resolve().as_uri()
    return {"type": "object", "additionalProperties": False,
            "properties": {fig: {"$ref": f"{uri}#/$defs/{fdef.schema}"}
                           for fig, fdef in REGISTRY[paper].figures.items()}}


def _fill_defaults(validator, properties, instance, schema):
    """The `properties` keyword, setting each missing property that has a default first (the jsonschema FAQ
    recipe that snakemake.utils.validate(set_default=True) uses; a copy of the default per instance)."""
    if validator.is_type(instance, "object"):
        for name, subschema in properties.items():
            if isinstance(subschema, dict) and "default" in subschema:
                instance.setdefault(name, copy.deepcopy(subschema["default"]))
    yield from Draft202012Validator.VALIDATORS["properties"](validator, properties, instance, schema)


def _is_integer(checker, instance) -> bool:
    """`type: integer` means an int, not also a float with an integral value as JSON Schema has it: `steps: 1e5` reads
    as the float 100000.0, which would fail in a job that counts with it, rather than here with the key named."""
    return isinstance(instance, int) and not isinstance(instance, bool)


_StrictValidator = validators.extend(
    Draft202012Validator, type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer))
_DefaultFillingValidator = validators.extend(_StrictValidator, {"properties": _fill_defaults})


@functools.lru_cache(maxsize=None)
def _schema_file(path: str, mtime_ns: int):
    """A schema file's contents, read once per process (and again only if the file changes): a validation
    follows hundreds of `$ref`s into the same few files."""
    return read_yaml(Path(path))


def _schema(path: Path | str, schemas: Path, transform=None):
    """A fresh copy of a schema (a file, or generated: a URI of _generated_schemas), transformed if asked
    (validators never share mutable state)."""
    generated = _generated_schemas(schemas)
    uri = path if isinstance(path, str) else None
    if uri is not None and uri in generated:
        contents = generated[uri]()
    else:
        path = Path(url2pathname(urlparse(path).path)) if isinstance(path, str) else path
        contents = copy.deepcopy(_schema_file(str(path), path.stat().st_mtime_ns if path.exists() else 0))
    return transform(contents) if transform is not None else contents


@functools.lru_cache(maxsize=64)
def _validator_cached(schema_path: str, mtime_ns: int, transform, fill_defaults: bool) -> Draft202012Validator:
    path = Path(schema_path)
    schemas = path.parent.parent if path.parent.name == "papers" else path.parent  # workflow/schemas
    schema = _schema(path, schemas, transform)
    schema["$id"] = path.resolve().as_uri()
    resources = {}

    def retrieve(uri):
        if uri not in resources:  # each referenced schema once per validator
            # generated schemas carry no $schema: one that did would switch validation to the plain draft-2020-12
            # validator below it (jsonschema picks the class by $schema), so defaults there would not be filled
            resources[uri] = Resource.from_contents(_schema(uri, schemas, transform), default_specification=DRAFT202012)
        return resources[uri]

    registry = Registry(retrieve=retrieve).with_resource(schema["$id"], Resource.from_contents(schema))
    return (_DefaultFillingValidator if fill_defaults else _StrictValidator)(schema, registry=registry)


def validator_for(schema_path: Path, transform=None, fill_defaults: bool = False) -> Draft202012Validator:
    """A validator of the schema file; `$ref`s to other schema files are read from disk, those to a generated
    schema (_generated_schemas) are generated; `transform` applies to each. fill_defaults: validating fills
    missing properties that have a default. Cached per (file, its mtime, transform, fill_defaults)."""
    path = Path(schema_path).resolve()
    return _validator_cached(str(path), path.stat().st_mtime_ns, transform, fill_defaults)


def key_path(path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def describe_error(error) -> str:
    """One readable line for a jsonschema error: where, what was found, what is allowed."""
    where = key_path(error.absolute_path)
    schema = error.schema
    title = schema.get("title") if isinstance(schema, dict) else None  # e.g. "kind 'near'" (dpfl.claims)
    context = f" for {title}" if isinstance(title, str) else ""
    if error.validator == "additionalProperties":
        allowed = sorted(schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed))
        hints = []
        for key in extra:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hints.append(f"'{key}'" + (f" (did you mean '{close[0]}'?)" if close else ""))
        return f"{where}: unknown key {', '.join(hints)}{context}; allowed keys: {', '.join(allowed)}"
    if error.validator == "enum":
        close = difflib.get_close_matches(str(error.instance), [str(v) for v in error.validator_value], n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        return (f"{where}: {error.instance!r} is not allowed{hint}; "
                f"allowed: {', '.join(map(str, error.validator_value))}")
    if error.validator == "type":
        expected = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        hint = (f" (write it as an integer: {int(error.instance)})" if "integer" in expected
                and isinstance(error.instance, float) and error.instance.is_integer() else "")
        return (f"{where}: expected {error.validator_value}, got {type(error.instance).__name__} {error.instance!r}"
                f"{hint}")
    if error.validator == "required":
        return f"{where}: {error.message}{context}"
    bounds = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<",
              "minItems": "have at least", "maxItems": "have at most", "minLength": "have at least"}
    if error.validator in bounds:
        unit = (" items" if error.validator.endswith("Items")
                else (" characters" if error.validator == "minLength" else ""))
        op = bounds[error.validator]
        rule = (f"must {op} {error.validator_value}{unit}" if op.startswith("have")
                else f"must be {op} {error.validator_value}")
        return f"{where}: {error.instance!r} {rule}{context}"
    desc = schema.get("description")
    if error.validator in ("anyOf", "oneOf") and desc:  # the default message repeats the whole instance
        return f"{where}: {desc}{context}"
    return f"{where}: {error.message}{context}" + (f" ({desc})" if desc else "")


def validate(data, schema_path: Path, source: str, set_default: bool = True):
    """Validate `data` (read from `source`) against the schema; fill defaults; raise ConfigError."""
    errors = sorted(validator_for(schema_path).iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        lines = "\n".join(f"  - {describe_error(e)}" for e in errors)
        raise ConfigError(f"invalid configuration in {source}:\n{lines}\n(schema: {short_path(schema_path)})")
    if set_default:
        # not snakemake.utils.validate: it resolves a $ref only to a file, not to a generated schema
        validator_for(schema_path, fill_defaults=True).validate(data)
    return data


def short_path(path) -> str:
    """A path relative to the working directory when it lies below it (shorter messages)."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def strip_required(schema):
    """A copy of a schema with 'required' and 'default' removed: used for partial overlays."""
    if isinstance(schema, dict):
        return {k: strip_required(v) for k, v in schema.items() if k not in ("required", "default")}
    if isinstance(schema, list):
        return [strip_required(v) for v in schema]
    return schema

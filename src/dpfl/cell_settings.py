"""The checks every family's frozen cell settings make at their boundary (dpfl.figure.FigureFamily.settings,
`from_job`), written once: a mapping's keys exactly as expected, a value one of its allowed ones, a count an integer
≥ 1, and `Switches`, the typed `params.implementation` of a paper whose authors' code differs from the paper.

Each raises a ValueError whose first words are `where` (the paper, the cell and the key path), so that a typo in a
hand-made params dict stops the cell at its start, naming the key, and not halfway through its runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import ClassVar


def exact_keys(where: str, given: Mapping, keys: tuple[str, ...] | list[str], optional: tuple[str, ...] = ()) -> None:
    """Every key of `given` one of `keys` or `optional`, and every one of `keys` given (both lists sorted in the
    message)."""
    unknown = sorted(set(given) - {*keys, *optional})
    missing = sorted(set(keys) - set(given))
    if unknown or missing:
        expected = f"exactly {list(keys)}" if not optional else f"{list(keys)} (and optionally {list(optional)})"
        raise ValueError(f"{where}: unknown key(s) {unknown}, missing key(s) {missing}; expected {expected}")


def one_of(where: str, value, allowed) -> None:
    """`value` one of `allowed`."""
    if value not in allowed:
        raise ValueError(f"{where}: {value!r}; allowed: {', '.join(map(str, allowed))}")


def count(where: str, key: str, value) -> int:
    """A setting that counts something (≥ 1), as the cells have always read it (`int`)."""
    try:
        n = int(value)
    except (TypeError, ValueError):
        n = None
    if n is None or isinstance(value, bool) or n != value or n < 1:
        raise ValueError(f"{where}.{key}: {value!r}; expected an integer ≥ 1")
    return n


class Switches:
    """Base of a paper's frozen `params.implementation` dataclass: where the authors' published code differs from
    the paper. `CHOICES` gives each key's allowed values, the paper's first (the schema's default; `compat:
    authors-code` sets the published code's); `PAPER` names the paper in the messages."""

    PAPER: ClassVar[str]
    CHOICES: ClassVar[dict[str, tuple]]

    @classmethod
    def paper(cls):
        """The paper's algorithm: every key's first allowed value (the schema's defaults)."""
        return cls(**{key: allowed[0] for key, allowed in cls.CHOICES.items()})

    @classmethod
    def from_params(cls, params: Mapping):
        """params.implementation with every key given (the config loader fills the schema's defaults; a hand-made
        params dict must give them all) and each value one of its key's `CHOICES`."""
        impl = params["implementation"]
        keys = [f.name for f in fields(cls)]
        where = f"{cls.PAPER}: params.implementation"
        exact_keys(where, impl, keys)
        for key in keys:
            one_of(f"{where}.{key}", impl[key], cls.CHOICES[key])
        return cls(**{key: impl[key] for key in keys})

"""One figure variant as the configuration limits see it (`Variant`): the params it runs with, the problems found in
them (`Problem`) and, for each offending key path, the file that set the value (the scale file's entry, the paper
file's figure params, authors-code items or ablations, or the schema's default), so that a message names where to
edit. Also the key-path helpers the limits share (`_key_path`, `_get`) and `_distinct`, the limit that several
figure families have in common (items that name one cell or run each).

The machinery every paper's limits (dpfl.config_limits.<paper>) are written against, apart from them so that a
paper's module holds only what that paper's code assumes.
"""

from __future__ import annotations

from dataclasses import dataclass

from dpfl import paths
from dpfl.config_limits.sizes import DataSizes
from dpfl.papers import FIGURES

def _key_path(path) -> str:
    """"figures.fig4.params.panels[0].n_silos": the form of the schema errors (dpfl.config)."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _has(tree, path) -> bool:
    for part in path:
        if isinstance(part, int) and isinstance(tree, list) and 0 <= part < len(tree):
            tree = tree[part]
        elif isinstance(tree, dict) and part in tree:
            tree = tree[part]
        else:
            return False
    return True


def _set(overlay, path) -> bool:
    """Whether a merged overlay sets the value at `path`: a value that is not a mapping (a mapping is merged key by
    key, so its other keys come from below)."""
    return _has(overlay, path) and not isinstance(_get(overlay, path), dict)



def _get(tree, path):
    for part in path:
        tree = tree[part]
    return tree



@dataclass(frozen=True)
class Problem:
    path: tuple  # the offending key, a key path of the merged paper configuration
    text: str  # its value, the limit and the code that assumes it


class Variant:
    """One paper (`figure` None) or one figure in one mode: the params it runs with and where each value was set."""

    def __init__(self, cfg, scale: dict, paper: str, sizes: DataSizes, figure: str | None = None,
                 mode: str = "none"):
        self.cfg, self.paper, self.figure, self.mode, self.data = cfg, paper, figure, mode, sizes
        self.paper_cfg = cfg.papers[paper]
        self.paper_file, self.scale_file = cfg.sources[paper]
        self.written = cfg.written.get(paper, {})
        self.part = ((scale or {}).get("papers") or {}).get(paper) or {}
        if figure is not None:
            self.spec = cfg.figure(paper, figure)
            self.params = cfg.figure_params(paper, figure, mode)
        self.problems: list[Problem] = []

    def p(self, *rel) -> tuple:
        """The key path of params.<rel> of this figure."""
        return ("figures", self.figure, "params", *rel)

    def problem(self, path: tuple, text: str) -> None:
        self.problems.append(Problem(path, text))

    def ref(self, path: tuple) -> str:
        """A key named in a message: its key path, and the file that set it where that is not the paper file's key."""
        where, key = self.locate(path)
        plain = _key_path(path)
        if where == self.paper_file and key.startswith(plain):
            return key  # written in the paper file, or its schema default
        return f"{plain}, set at {where} {key}"

    def locate(self, path: tuple) -> tuple[str, str]:
        """(file, key path in that file) of the value at `path`: the variant's overlay, then the scale file, then the
        paper file, else the schema's default."""
        if self.figure is not None and self.mode != "none" and path[:3] == ("figures", self.figure, "params"):
            rest = path[3:]
            code = self.spec.get("authors_code", {})
            if self.mode == paths.AUTHORS_CODE:
                if _set(code.get("params", {}), rest):
                    return self._file_of(("figures", self.figure, "authors_code", "params", *rest))
            else:
                name = paths.ablation_name(self.mode)
                chosen = (self.spec.get("ablations") or {}).get(name)
                if isinstance(chosen, dict):
                    if _set(chosen.get("params", {}), rest):
                        return self._file_of(("figures", self.figure, "ablations", name, "params", *rest))
                else:
                    for item in reversed(chosen or []):
                        if _set((code.get("items") or {}).get(item, {}), rest):
                            return self._file_of(("figures", self.figure, "authors_code", "items", item, *rest))
        return self._file_of(path)

    def _file_of(self, path: tuple) -> tuple[str, str]:
        if _has(self.written, path) and isinstance(_get(self.written, path), dict):
            return self.paper_file, _key_path(path)  # a block the paper file writes (a scale may change its keys)
        candidates = [(path, "")]
        if path[0] == "figures" and len(path) > 2:
            fig, rest = path[1], path[2:]
            applied = f" (as figures.{fig})"
            candidates = [(("figures", fig, *rest), "")]
            if rest[0] == "params" and (self.paper, fig) in FIGURES:
                family = FIGURES[(self.paper, fig)].family.name
                dataset = self.written.get("figures", {}).get(fig, {}).get("params", {}).get("dataset")
                if dataset is not None:
                    candidates.append((("families", family, "datasets", dataset, "params", *rest[1:]), applied))
                candidates.append((("families", family, "params", *rest[1:]), applied))
            candidates.append((("all_figures", *rest), applied))
        for sub, note in candidates:
            if _has(self.part, sub):
                return self.scale_file, _key_path(("papers", self.paper, *sub)) + note
        if _has(self.written, path):
            return self.paper_file, _key_path(path)
        return self.paper_file, f"{_key_path(path)} (not written: the default of " \
                                f"workflow/schemas/papers/{self.paper}.schema.yaml)"


def _distinct(v: Variant, items: list, path_of, name_of, what: str) -> None:
    """Items whose names must differ (one cell or run each: FigureLayout.cells are unique)."""
    seen: dict = {}
    for i, item in enumerate(items):
        name = name_of(item)
        if name in seen:
            v.problem(path_of(i), f"{name!r} names the same {what} as {_key_path(path_of(seen[name]))}; allowed: "
                                  f"distinct values (each is one cell or run and one table)")
        seen.setdefault(name, i)

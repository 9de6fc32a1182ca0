"""Write workflow/envs/dpfl.yaml, the conda environment of the rules, from the lock (requirements/constraints.txt).

`make lock` runs it after regenerating the lock; tests/test_packaging.py checks that the committed file is what it
writes. The environment holds the pipeline's run-time set (pyproject's dependencies and its `kaggle` extra, with
everything they pull in, at the locked versions and with the lock's platform markers), installed by pip into a
conda-forge Python: the same versions `make install` puts in .venv, so a run gives the same numbers in either.
torch is PyTorch's CPU build, so the CUDA packages the PyPI build pulls in on Linux are left out (a GPU user uses
.venv with TORCH=cu126, docs/install.md). Run from the project folder: python tools/lock/conda_env.py
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements" / "constraints.txt"
ENV_FILE = ROOT / "workflow" / "envs" / "dpfl.yaml"
EXTRAS = ("kaggle",)  # what a run needs besides the dependencies: the Kaggle download route
PYTHON = "3.11"  # the Python of the paper-scale record
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
CUDA = re.compile(r"^(nvidia-|cuda-|triton$)")  # the PyPI torch build's CUDA packages, which the CPU build lacks

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)\s*(;.*)?$")
_VIA = re.compile(r"^\s+#\s+(?:via\s+)?([A-Za-z0-9][A-Za-z0-9._-]*)")


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read_lock(text: str) -> dict[str, dict]:
    """{name: {"pin": "name==version", "marker": "; ..." or "", "via": {parents}}} from uv's annotated output."""
    packages: dict[str, dict] = {}
    current = None
    for line in text.splitlines():
        pin = _PIN.match(line)
        if pin:
            current = norm(pin.group(1))
            packages[current] = {"pin": f"{pin.group(1)}=={pin.group(2)}", "marker": (pin.group(3) or "").strip(),
                                 "via": set()}
            continue
        via = _VIA.match(line)
        if via and current and via.group(1) != "via":
            packages[current]["via"].add(norm(via.group(1)))
    return packages


def roots(pyproject: dict) -> list[str]:
    project = pyproject["project"]
    reqs = list(project["dependencies"]) + [r for e in EXTRAS for r in project["optional-dependencies"][e]]
    return [norm(re.split(r"[\[=<>!~; ]", r, maxsplit=1)[0]) for r in reqs]


def runtime_set(packages: dict[str, dict], start: list[str]) -> list[str]:
    """The packages reachable from `start` through the lock's "via" links, without the CUDA packages (and what only
    they pull in)."""
    children: dict[str, set[str]] = {}
    for name, info in packages.items():
        for parent in info["via"]:
            children.setdefault(parent, set()).add(name)
    missing = [n for n in start if n not in packages]
    if missing:
        raise SystemExit(f"{LOCK.relative_to(ROOT)}: no pin for {', '.join(missing)}; run make lock")
    seen, todo = set(), list(start)
    while todo:
        name = todo.pop()
        if name in seen or CUDA.match(name):
            continue
        seen.add(name)
        todo += sorted(children.get(name, ()))
    return sorted(seen)


def render(lock_text: str, pyproject: dict) -> str:
    packages = read_lock(lock_text)
    pins = []
    for name in runtime_set(packages, roots(pyproject)):
        info = packages[name]
        line = f"{info['pin']} {info['marker']}" if info["marker"] else info["pin"]
        pins.append(f'      - "{line}"' if info["marker"] else f"      - {line}")
    header = [
        "# The conda environment of every rule (snakemake --sdm conda) and of a conda user (docs/install.md).",
        "# Written by `make lock` (tools/lock/conda_env.py) from requirements/constraints.txt: do not edit by hand.",
        "# Python from conda-forge; from pip, exactly the locked versions make install puts in .venv (the pipeline and",
        "# its Kaggle route), so that a run gives the same numbers in either. torch is PyTorch's CPU build (its index",
        "# below), without the CUDA packages. The project's own code is not installed: jobs import it from src/",
        "# (workflow/rules/common.smk sets PYTHONPATH).",
        "name: dpfl-repro",
        "channels:",
        "  - conda-forge",
        "dependencies:",
        f"  - python={PYTHON}",
        "  - pip",
        "  - pip:",
        f"      - --extra-index-url {TORCH_INDEX}",
    ]
    return "\n".join(header + pins) + "\n"


def main() -> int:
    text = render(LOCK.read_text(), tomllib.loads((ROOT / "pyproject.toml").read_text()))
    ENV_FILE.write_text(text)
    print(f"wrote {ENV_FILE.relative_to(ROOT)} ({len(text.splitlines()) - 14} pins)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

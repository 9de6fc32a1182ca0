"""The source files each stage of each registered figure imports, as one checkout's own code computes them.

The record hashes these files to tell whether an entry's code changed (dpfl.record.state.code_files). A build made
in another checkout (the baseline of a carry, a paper-scale build in a second clone) must be judged by that
checkout's registry and import graph, not this one's: a module added or moved since then would otherwise be looked
for where it never was. So this module also runs as a script, in a child Python whose `sys.path` starts with the
other checkout's `src/`: it then imports that checkout's dpfl and prints its answer as JSON
(dpfl.record.state.checkout_stage_files). It reads only `dpfl.papers.FIGURES` and `dpfl.codedeps.stage_code`, which
every checkout the record can name has.
"""

from __future__ import annotations

import json
import sys


def registry_stage_files() -> dict:
    """{"root": the src/ directory of the dpfl imported, "figures": {"<paper>/<figure>": {stage: [files]}}}: an
    experiment figure's cell, table, plot and claims stages, an analytic one's table, plot and claims."""
    from dpfl import codedeps
    from dpfl.papers import FIGURES

    figures = {}
    for (paper, figure), fdef in sorted(FIGURES.items()):
        stages = ("cell", "table", "plot", "claims") if fdef.kind == "experiment" else ("table", "plot", "claims")
        figures[f"{paper}/{figure}"] = {stage: list(codedeps.stage_code(fdef, stage)) for stage in stages}
    return {"root": str(codedeps.SRC.resolve()), "figures": figures}


if __name__ == "__main__":
    json.dump(registry_stage_files(), sys.stdout)

"""The reproduction record: a built results/ directory (normally a paper-scale build) turned into committed pages
under docs/reproduction/ (one per paper and a summary), so that a researcher reads the paper-scale verdicts without
running for a day.

Every registered figure and mode gets an entry: built (its image, data source, scale, settings and code hashes, run
time, machine, every claim's verdict, cause and reason, beside a quick build's verdict when one is given) or not
built (and why). Nothing is edited by hand: `python -m dpfl record` rewrites the pages from record.json, which it
updates paper by paper or figure by figure (a paper-scale record is built in
pieces: each entry keeps the date, commit and command of the build it came from), and `python -m dpfl record
--check` lists the entries whose settings or code differ from today's (the hashes the rerun logic uses: the table
job's `config_hash` and the files every stage of the figure imports, dpfl.codedeps.stage_code).

An entry's code hashes are those of the checkout that made the build (the results directory's parent when that is a
project checkout, e.g. a paper-scale build in its own clone), not of the checkout that records it: recording an old
build at a newer commit then shows up as stale instead of passing for current. A build from a checkout with
uncommitted changes is refused (its commit does not name its code) unless `--allow-dirty`, which records the sha256
of that checkout's `git diff HEAD`; the committed record takes paper-scale builds only (`--out DIR` records others).
The command line records and checks only in the checkout the imported dpfl package comes from (`same_checkout`):
elsewhere the settings would be one checkout's and the code hashes another's.
"""

from __future__ import annotations

from pathlib import Path

from dpfl import paths
from dpfl.record.carry import carry_over
from dpfl.record.entries import (  # noqa: F401  (the record's API)
    BUILD_KEYS, MAX_IMAGE_BYTES, MODES, VERDICTS, anchor, cells_seconds, modes_built, portable, quick_key,
    selection, shared_seconds, update, variant, why_texts)
from dpfl.record.state import (  # noqa: F401  (the record's API)
    RecordError, build_checkout, check, checkout_state, code_files, entry_name, not_recorded, outdated,
    same_checkout, stale_entries)
from dpfl.record.pages import for_report, write_pages  # noqa: F401  (for_report: the record's API)


def carry_entries(root: Path, baseline: Path, new: Path, chosen: dict[str, set[str] | None],
                  out: Path | None = None) -> tuple[list[str], list[str]]:
    """Carry the chosen stale entries across a change of code that two quick-scale builds show does not change
    their numbers (dpfl.record.carry) and rewrite the pages when any was carried; returns (carried, refused) lines."""
    record, carried, refused = carry_over(root, baseline, new, chosen, out)
    if carried:
        write_pages(root, out or root / paths.RECORD_DIR, record)
    return carried, refused


def build(root: Path, results: Path, quick: Path | None, chosen: dict[str, set[str] | None] | list[str],
          command: str, out: Path | None = None, why: dict | None = None, allow_dirty: bool = False) -> dict:
    """Record the chosen figures into out (default docs/reproduction/; dpfl.record.entries.update) and rewrite its
    pages (dpfl.record.pages.write_pages); returns the record."""
    record = update(root, results, quick, chosen, command, out, why, allow_dirty)
    write_pages(root, out or root / paths.RECORD_DIR, record)
    return record

"""A failed job's error where Snakemake says to look: in the job's own log file.

Snakemake reports a failed job with "log: <its log> (check log file(s) for error details)", but a job's log holds
the progress lines of its stage (dpfl.io.get_logger) while the exception's traceback goes to the console only. Each
workflow script (workflow/scripts/*.py) runs its stage inside `job_errors(snakemake)`: an exception appends to the
job's `log:` file one line, "dpfl: job failed: rule <rule> (<wildcards>)[, configuration key <key>]: <exception>",
and the full traceback, then goes on to the console as before. The stage's logger opens the log afresh when the job
starts, so this comes after its progress lines; a failure before the logger creates the file.

At the end of a run that failed, the onerror handler (workflow/rules/report.smk) calls `report_failed_jobs`: for
each job that failed in this run (a log under the logs folder, modified since `run_started` (the onstart handler),
that holds a failure) it prints the log's path, the failure and the last lines of the error.

This module imports nothing from dpfl and no stage imports it (the scripts and the rules do): a change here reruns
no job.
"""

from __future__ import annotations

import contextlib
import sys
import time
import traceback
from pathlib import Path

#: the first words of the line that opens a failure in a job's log
FAILED = "dpfl: job failed:"
#: at most this many of the error's last lines in the end-of-run summary: its last frame and the exception (the log
#: has the whole traceback)
TAIL = 8
#: seconds of file-time coarseness allowed for when telling this run's logs from older ones
SLACK = 1.0

_run_started: float | None = None


@contextlib.contextmanager
def job_errors(snakemake):
    """Run a job's stage (the `with` block of a workflow script); on an exception, append the failure and its
    traceback to the job's log (`snakemake.log[0]`), then let the exception go on (Snakemake reports the job
    failed, the console shows the traceback). `snakemake`: the object Snakemake gives a script (its `log`, `rule`
    and `wildcards`)."""
    try:
        yield
    except Exception as exc:
        if len(snakemake.log):
            append_failure(snakemake.log[0], snakemake.rule, dict(snakemake.wildcards.items()), exc)
        raise


def append_failure(log_path: str | Path, rule: str, wildcards: dict, exc: BaseException) -> None:
    """Append `summary(...)` and the exception's full traceback to the log (created if the job failed before its
    stage opened it). Never raises: a log that cannot be written must not hide the job's own error."""
    tb = exc.__traceback__
    if tb is not None and tb.tb_frame.f_code.co_filename == __file__:  # job_errors' own frame: not the error's
        tb = tb.tb_next
    text = f"{summary(rule, wildcards, exc)}\n{''.join(traceback.format_exception(type(exc), exc, tb))}"
    try:
        path = Path(log_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as fh:
            fh.write(text if text.endswith("\n") else text + "\n")
    except OSError as err:
        print(f"dpfl: could not write the error to the job's log {log_path}: {err}", file=sys.stderr)


def summary(rule: str, wildcards: dict, exc: BaseException) -> str:
    """One line: FAILED, the rule, its wildcards (paper, figure, cell, ...; an empty one, e.g. the `variant` of a
    figure's default variant, is left out), the configuration key the exception names (its `config_key`, or one in
    the exceptions that caused it), and the exception's type and first line."""
    shown = {k: v for k, v in wildcards.items() if v != ""}
    where = f" ({', '.join(f'{k}={v}' for k, v in shown.items())})" if shown else ""
    key = config_key(exc)
    setting = f", configuration key {key}" if key else ""
    message = str(exc).strip().splitlines()
    return f"{FAILED} rule {rule}{where}{setting}: {type(exc).__name__}" + (f": {message[0]}" if message else "")


def config_key(exc: BaseException) -> str | None:
    """The configuration key an exception names: its `config_key` attribute (a dotted string or a sequence of keys),
    or that of an exception that caused it; None if none does."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        key = getattr(exc, "config_key", None)
        if key:
            return key if isinstance(key, str) else ".".join(map(str, key))
        exc = exc.__cause__ or exc.__context__
    return None


def run_started(when: float | None = None) -> None:
    """Note when this run started (the onstart handler): `report_failed_jobs` reports the failures logged since."""
    global _run_started
    _run_started = time.time() if when is None else when


def failed_jobs(logs_dir: str | Path, since: float) -> list[tuple[Path, str, list[str]]]:
    """(log, its failure line without FAILED, error_tail of its traceback) for each `*.log` under `logs_dir` modified
    since `since` (less SLACK) that holds a failure (the last one), in path order."""
    out = []
    for path in sorted(Path(logs_dir).rglob("*.log")):
        try:
            if path.stat().st_mtime < since - SLACK:
                continue
            lines = path.read_text(errors="replace").splitlines()
        except OSError:
            continue
        starts = [i for i, line in enumerate(lines) if line.startswith(FAILED)]
        if starts:
            block = lines[starts[-1]:]
            out.append((path, block[0][len(FAILED):].strip(), error_tail(block[1:])))
    return out


def error_tail(traceback_lines: list[str]) -> list[str]:
    """The last frame of a traceback and the exception after it (at most TAIL lines, without the ^^^ markers)."""
    lines = [line for line in traceback_lines if line.strip(" \t^~")]
    frames = [i for i, line in enumerate(lines) if line.startswith("  File ")]
    return lines[frames[-1] if frames else 0:][-TAIL:]


def report_failed_jobs(logs_dir: str | Path, file=None) -> None:
    """Print, for each job that failed in this run, its log and the last lines of its error (the onerror handler).
    Nothing when no run was started (the run stopped before any job) or no job's log holds a failure."""
    if _run_started is None:
        return
    failed = failed_jobs(logs_dir, _run_started)
    if not failed:
        return
    file = file or sys.stderr
    jobs = "1 job" if len(failed) == 1 else f"{len(failed)} jobs"
    print(f"dpfl: {jobs} failed in this run; the full traceback is in the log:", file=file)
    for path, what, tail in failed:
        print(f"  {path}\n    {what}", file=file)
        for line in tail:
            print(f"      {line}", file=file)

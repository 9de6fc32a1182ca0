"""A failed job's error is in its own log file, where Snakemake says to look (dpfl.joblog): the workflow scripts run
their stage in job_errors, which appends a one-line summary (rule, wildcards, configuration key) and the traceback
to the job's log; at the end of a failed run the onerror handler names each failed job's log with the last lines of
its error."""

from __future__ import annotations

import io
import os
import time
from types import SimpleNamespace

import pytest

from dpfl import joblog
from dpfl.io import get_logger


def _job(log, rule="figure_cell", **wildcards):
    """What Snakemake gives a script, as job_errors reads it."""
    return SimpleNamespace(log=[str(log)], rule=rule, wildcards=wildcards)


def _fail(where):
    raise ValueError(f"no rows for {where}\nsecond line of the message")


def test_a_failure_is_appended_to_the_job_log_after_its_progress_lines(tmp_path):
    log = tmp_path / "logs" / "cell.log"
    with pytest.raises(ValueError, match="no rows for panel a"):
        with joblog.job_errors(_job(log, paper="lowy2023", figure="fig5", variant="", cell="a")):
            get_logger(str(log), "lowy2023/fig5:cell").info("started")  # the stage's logger opens the log with "w"
            _fail("panel a")
    lines = log.read_text().splitlines()
    assert lines[0].endswith("lowy2023/fig5:cell: started")
    # the default variant's empty `variant` wildcard is left out
    assert lines[1] == ("dpfl: job failed: rule figure_cell (paper=lowy2023, figure=fig5, cell=a): ValueError: "
                        "no rows for panel a")
    assert lines[2] == "Traceback (most recent call last):"
    assert "dpfl/joblog.py" not in "\n".join(lines)  # the traceback starts at the job's code, not at job_errors
    assert any("in _fail" in line for line in lines) and lines[-2:] == ["ValueError: no rows for panel a",
                                                                       "second line of the message"]


def test_a_failure_before_the_logger_creates_the_log_and_names_the_configuration_key(tmp_path):
    log = tmp_path / "not" / "yet" / "table.log"

    class SettingError(ValueError):
        config_key = ("figures", "fig2", "params", "delta")

    with pytest.raises(RuntimeError):
        with joblog.job_errors(_job(log, rule="figure_table", paper="balle2020", figure="fig2")):
            try:
                raise SettingError("delta out of range")
            except SettingError as exc:
                raise RuntimeError("the table could not be computed") from exc
    first = log.read_text().splitlines()[0]
    assert first == ("dpfl: job failed: rule figure_table (paper=balle2020, figure=fig2), configuration key "
                     "figures.fig2.params.delta: RuntimeError: the table could not be computed")
    assert "SettingError: delta out of range" in log.read_text()


def test_the_end_of_a_failed_run_names_the_logs_of_the_jobs_that_failed_in_it(tmp_path, monkeypatch):
    logs = tmp_path / "results" / "logs"
    old = logs / "kato2024" / "fig4" / "cell-a.log"  # failed in an earlier run
    ok = logs / "balle2020" / "fig2" / "table.log"  # ran fine in this run
    failed = logs / "lowy2023" / "fig5" / "cell-a.log"
    monkeypatch.setattr(joblog, "_run_started", None)
    for path in (old, ok, failed):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("12:00:00 started\n")
    joblog.append_failure(old, "figure_cell", {"paper": "kato2024"}, ValueError("old"))
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    out = io.StringIO()
    joblog.report_failed_jobs(logs, file=out)
    assert out.getvalue() == ""  # no run started (the run stopped before any job)
    joblog.run_started()
    try:
        with joblog.job_errors(_job(failed, paper="lowy2023", figure="fig5", cell="a")):
            _fail("panel a")
    except ValueError:
        pass
    joblog.report_failed_jobs(logs, file=out)
    text = out.getvalue().splitlines()
    assert text[0] == "dpfl: 1 job failed in this run; the full traceback is in the log:"
    assert text[1] == f"  {failed}"
    assert text[2] == "    rule figure_cell (paper=lowy2023, figure=fig5, cell=a): ValueError: no rows for panel a"
    assert "in _fail" in text[3] and text[-2:] == ["      ValueError: no rows for panel a",
                                                   "      second line of the message"]
    assert not any(str(old) in line or str(ok) in line for line in text)


@pytest.mark.pipeline
def test_a_job_that_fails_in_a_run_has_its_traceback_in_its_log_and_the_run_names_it(tmp_path):
    """Bad data no configuration check can see: a figure's table replaced by one without its columns (a hand-edited
    or foreign file), so the plot job fails while it runs."""
    from tests.test_pipeline import copy_project, snakemake

    project = copy_project(tmp_path / "project")
    table = project / "results/asoodeh2021/fig2"
    table.mkdir(parents=True)
    (table / "fig2.csv").write_text("x,y\n1,2\n")
    (table / "fig2.meta.json").write_text("{}\n")
    proc = snakemake(project, "--cores", "1", "results/asoodeh2021/fig2/fig2.png", "--config", "only=[asoodeh2021]")
    assert proc.returncode != 0, proc.stdout + proc.stderr
    log = "results/logs/asoodeh2021/fig2/plot.log"
    text = (project / log).read_text()
    failure = "dpfl: job failed: rule figure_plot (paper=asoodeh2021, figure=fig2): KeyError: 'curve'"
    assert failure in text
    assert "Traceback (most recent call last):" in text and "asoodeh2021/plot.py" in text
    assert text.rstrip().endswith("KeyError: 'curve'")
    summary = proc.stderr[proc.stderr.index("dpfl: 1 job failed in this run"):].splitlines()
    assert summary[1:3] == [f"  {log}", f"    {failure.removeprefix(joblog.FAILED + ' ')}"], summary
    assert "      KeyError: 'curve'" in summary

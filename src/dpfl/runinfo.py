"""What a run says about itself besides its figures:

- the datasets its selected figures used stand-ins for, and why (`standin_datasets`, from each dataset's provenance
  record data/raw/<dataset>/SOURCE.json): said in the last lines of the run (`say_standins`, called by Snakemake's
  onsuccess and onerror handlers in workflow/rules/report.smk) and at the top of the report (dpfl.report);
- the build the report was made from (`build_info`): the date, the commit (short hash, "dirty" when tracked files
  have uncommitted changes; "not a git checkout" when git cannot read the project folder), and the repository's web
  address derived from the `origin` remote (`web_url`), so that the standalone report links the committed
  reproduction record by absolute URLs (`blob_url`) that still work once the page is copied elsewhere.

Nothing here is a job's input or param: the report stage reads the commit when it runs, so a new commit never
reruns the report by itself (workflow/rules/report.smk)."""

from __future__ import annotations

import datetime
import json
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

from dpfl import paths

#: at most this many characters of a failed source's message in the run's last lines (the report shows all of it)
CONSOLE_REASON_CHARS = 100


# ------------------------------------------------------------------------------------------------------------ stand-ins


def standin_summary(reasons: list[str], configured: bool, width: int | None = None) -> str:
    """Why a dataset is a stand-in, in one line: the configuration asked for it (`configured`: its effective
    data_source is standin), or which real sources failed and the first of their messages (`reasons`: the provenance
    record's fallback_reasons, one line per failed source; cut to `width` characters when given)."""
    if configured:
        return "the configuration asks for the stand-in (data_source: standin)"
    if not reasons:
        return "the stand-in was used; its provenance records no failed source"
    kinds = Counter(line.split(" ", 1)[0].rstrip(":") for line in reasons)
    tried = ", ".join(f"{n} × {k}" if n > 1 else k for k, n in kinds.items())
    first = reasons[0] if width is None or len(reasons[0]) <= width else reasons[0][:width - 1] + "…"
    return f"no real source worked ({tried}): {first}" + (f"; and {len(reasons) - 1} more" if len(reasons) > 1 else "")


def standin_datasets(datasets: Iterable[str], root: str | Path = ".", width: int | None = None,
                     catalog: dict | None = None) -> list[dict]:
    """The datasets among `datasets` whose provenance record (data/raw/<dataset>/SOURCE.json under `root`) says they
    are stand-ins, each {name, reason (standin_summary), reasons (every failed source), fetch (how to get the real
    data and its size, from the dataset `catalog` when given, else "")}, in the order given; a dataset without a
    record (its download has not run) is left out."""
    from dpfl.data.source_record import real_data_hint

    out = []
    for name in dict.fromkeys(datasets):
        try:
            record = json.loads((Path(root) / paths.raw_source(name)).read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(record, dict) or not record.get("standin"):
            continue
        reasons = [str(r) for r in record.get("fallback_reasons") or []]
        out.append({"name": name, "reasons": reasons,
                    "reason": standin_summary(reasons, record.get("data_source") == "standin", width),
                    "fetch": real_data_hint(name, (catalog or {}).get(name))})
    return out


def standins_sentence(standins: list[dict]) -> str:
    """"N datasets used stand-ins: <name> (<reason>), …" ("" when none)."""
    if not standins:
        return ""
    head = ("1 dataset used a stand-in" if len(standins) == 1 else f"{len(standins)} datasets used stand-ins")
    return f"{head}: " + ", ".join(f"{s['name']} ({s['reason']}" + (f"; {s['fetch']}" if s.get("fetch") else "")
                                   + ")" for s in standins)


def datasets_used(cfg, variants: Iterable[tuple[str, str, str]]) -> list[str]:
    """The prepared datasets the cells of the figure variants (paper, figure, mode) read (dpfl.jobs.needs; the
    datasets of their allocations among them), in first-use order."""
    from dpfl import jobs

    used: dict[str, None] = {}
    for paper, figure, mode in variants:
        used.update(dict.fromkeys(jobs.needs(cfg, paper, figure, mode)[0]))
    return list(used)


def say_standins(cfg, variants: Iterable[tuple[str, str, str]] | Callable[[], Iterable], root: str | Path = ".",
                 stream=None) -> str:
    """At the end of a run (Snakemake's onsuccess and onerror handlers): one line naming the datasets the run's
    selected figure variants (`variants`, or a function returning them) used stand-ins for, and why, printed to
    `stream` (default stderr) so that it is among the run's last lines, not deep in the console. Returns the line
    ("" when every dataset used is real, or none was downloaded yet). Never raises: the handler must not hide the
    run's own outcome."""
    stream = stream if stream is not None else sys.stderr
    try:
        chosen = variants() if callable(variants) else variants
        standins = standin_datasets(datasets_used(cfg, chosen), root, width=CONSOLE_REASON_CHARS,
                                    catalog=cfg.datasets)
        sentence = standins_sentence(standins)
        if not sentence:
            return ""
        line = (f"dpfl: WARNING: {sentence}. Figures on stand-in data are not evidence (verdict 'stand-in'); "
                "details: data/raw/<dataset>/SOURCE.json and the report's data provenance.")
    except Exception as exc:  # noqa: BLE001 - the end of a run says what it can
        line = f"dpfl: could not list the datasets that used stand-ins ({type(exc).__name__}: {exc})"
    print(line, file=stream, flush=True)
    return line


# --------------------------------------------------------------------------------------------------------- the build


def git_output(checkout: Path, *args: str) -> bytes | None:
    """git's raw output in `checkout` (bytes, so that a diff can be hashed as git wrote it), None when git cannot run
    there (no git, not a checkout, no remote). The one place the project runs git (the report and the record)."""
    try:
        return subprocess.run(["git", *args], cwd=checkout, capture_output=True, check=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None


def _git(checkout: Path, *args: str) -> str | None:
    """git_output as stripped text."""
    out = git_output(checkout, *args)
    return None if out is None else out.decode(errors="replace").strip()


def web_url(remote: str | None) -> str | None:
    """The repository's web address from a git remote URL: git@host:owner/repo(.git), ssh://[user@]host[:port]/owner/
    repo(.git) and http(s)://[credentials@]host[:port]/owner/repo(.git) give https://host/owner/repo (credentials and
    ports dropped); None for anything else (a local path, a file: URL)."""
    if not remote:
        return None
    remote = remote.strip()
    m = (re.fullmatch(r"[\w.-]+@([\w.-]+):/?([^\s:]+?)(?:\.git)?/?", remote)
         or re.fullmatch(r"(?:ssh|git\+ssh|https?|git)://(?:[^@/\s]+@)?([\w.-]+)(?::\d*)?/([^\s]+?)(?:\.git)?/?",
                         remote))
    if not m:
        return None
    host, path = m.groups()
    if path.count("/") < 1 or "." not in host and host != "localhost":
        return None
    return f"https://{host}/{path}"


def build_info(checkout: str | Path = ".", now: datetime.datetime | None = None) -> dict:
    """What the report says about the build it shows: `date` (UTC, to the minute), and of the project checkout
    `git` (whether git can read it), `commit` (full hash), `short` (short hash), `dirty` (tracked files with
    uncommitted changes), `web` (the repository's web address, web_url of the `origin` remote, or None), `toplevel`
    (the checkout's top folder) and `text`: "commit abc1234", "commit abc1234, dirty" or "not a git checkout"."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    info = {"date": now.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "git": False,
            "commit": None, "short": None, "dirty": False, "web": None, "toplevel": None,
            "text": "not a git checkout"}
    checkout = Path(checkout)
    commit = _git(checkout, "rev-parse", "--verify", "HEAD")
    status = _git(checkout, "status", "--porcelain", "--untracked-files=no") if commit else None
    if not commit or status is None:
        return info
    short = _git(checkout, "rev-parse", "--short", "HEAD") or commit[:7]
    toplevel = _git(checkout, "rev-parse", "--show-toplevel")
    dirty = bool(status)
    info.update(git=True, commit=commit, short=short, dirty=dirty, toplevel=toplevel,
                web=web_url(_git(checkout, "remote", "get-url", "origin")),
                text=f"commit {short}" + (", dirty" if dirty else ""))
    return info


def blob_url(build: dict, path: str | Path) -> str | None:
    """The web address of a committed file of the checkout (https://host/owner/repo/blob/<commit>/<path from the
    checkout's top>), None without a web address or for a file outside the checkout."""
    if not (build.get("web") and build.get("commit") and build.get("toplevel")):
        return None
    try:
        rel = Path(path).resolve().relative_to(Path(build["toplevel"]).resolve())
    except ValueError:
        return None
    return f"{build['web']}/blob/{build['commit']}/{rel.as_posix()}"

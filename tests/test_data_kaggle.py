"""The Kaggle route of dpfl.data.sources end to end: the real `kaggle` package (2.2.4, with kagglesdk) downloads a
dataset through dpfl.data.sources.acquire, called exactly as _fetch_kaggle calls it (KaggleApi().authenticate(), then
dataset_download_files(slug, path=..., unzip=True, quiet=True, force=True)), from a fake Kaggle API: a
ThreadingHTTPServer on 127.0.0.1 (port 0) in this process that answers the package's requests as Kaggle does.

What the package sends (kagglesdk/kaggle_http_client.py, kaggle/api/kaggle_api_extended.py):
- POST <endpoint>/v1/security.OAuthService/IntrospectToken, JSON {"token": <token>}, `Authorization: Bearer <token>`,
  to check an access token (KAGGLE_API_TOKEN, ~/.kaggle/access_token); the answer is {"active": ..., "username": ...}.
- POST <endpoint>/v1/datasets.DatasetApiService/DownloadDataset, JSON {"ownerSlug": ..., "datasetSlug": ...}, with
  `Authorization: Basic base64(<username>:<key>)` (KAGGLE_USERNAME/KAGGLE_KEY or kaggle.json) or `Bearer <token>` (an
  access token, or the OAuth credentials of `kaggle auth login`). Kaggle answers with a redirect (302) to a signed
  storage URL of the dataset's zip, which the package follows (GET) and unzips; an error is the JSON
  {"code": <status>, "message": ...} with that HTTP status (kagglesdk raises requests' HTTPError for it).

What is patched, and why: one entry of kagglesdk.kaggle_env._env_to_endpoint, the endpoint of KaggleEnv.PROD
("https://api.kaggle.com"), is set to the fake server's URL (KAGGLE_API_ENVIRONMENT is unset). KaggleApi builds its
client for PROD (it reads KAGGLE_API_ENVIRONMENT once, when `kaggle` is imported, and only to choose LOCALHOST, whose
entry has no port either), and kagglesdk looks the endpoint up in that dict for every client it builds (get_endpoint),
so this one entry sends all of the package's requests to the fake server; none of the package's code is replaced.
Around it, so that nothing reaches a real host: the credentials come from monkeypatched environment variables or files
under a HOME in tmp_path (tests/conftest.py's `no_credentials` clears the machine's own first), no_proxy covers
127.0.0.1, and socket.getaddrinfo refuses every host but the loopback one, so a request that missed the patch fails the
test instead of leaving the machine."""

from __future__ import annotations

import base64
import http.server
import importlib.util
import io
import json
import socket
import zipfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from dpfl.data import fetchers, sources
from dpfl.data.common import DataError, gzip_writer
from dpfl.data.hashes import HASH_CACHE

# The kaggle package is an extra (`kaggle`); the `test` extra pulls it, so make test runs this module. Checked without
# importing `kaggle`, whose import authenticates.
if importlib.util.find_spec("kaggle") is None or importlib.util.find_spec("kagglesdk") is None:
    pytest.skip("the kaggle package is not installed: pip install -e '.[kaggle]' (the `test` extra includes it)",
                allow_module_level=True)

from kagglesdk import kaggle_env  # noqa: E402
from loopback import LocalServer  # noqa: E402
from test_data_sources import CSV, entry, sha  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SLUG = "mirichoi0218/insurance"
USER, KEY, TOKEN = "alice", "0123456789abcdef0123456789abcdef", "KGAT_0123456789abcdef"
DOWNLOAD = "/v1/datasets.DatasetApiService/DownloadDataset"
INTROSPECT = "/v1/security.OAuthService/IntrospectToken"
BASIC = "Basic " + base64.b64encode(f"{USER}:{KEY}".encode()).decode()
BEARER = f"Bearer {TOKEN}"


def insurance_entry() -> dict:
    """insurance with no URL: only Kaggle, then the stand-in."""
    return entry([{"name": "insurance.csv", "sha256": sha(CSV), "bytes": len(CSV), "urls": []}], dataset="insurance",
                 kaggle=SLUG, standin="insurance")


def zipped(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buf.getvalue()


def leftovers(raw_dir: Path) -> list[str]:
    """The files in raw_dir, but the sha256 cache written beside verified files."""
    return sorted(p.name for p in raw_dir.iterdir() if p.name != HASH_CACHE) if raw_dir.exists() else []


class FakeKaggle(LocalServer):
    """Kaggle's API on 127.0.0.1 (port 0), as the package calls it. `datasets` {slug: zip bytes}; the account USER
    with the API key KEY or the access token TOKEN is the only one it knows (other credentials get 401); `refuse` is an
    HTTP status (403) a download by that account gets instead; `requests` one dict per request: method, path,
    Authorization header, JSON body."""

    def __init__(self):
        self.datasets: dict[str, bytes] = {}
        self.refuse: int | None = None
        self.requests: list[dict] = []
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            timeout = 5  # seconds a connection may stay silent

            def log_message(self, *args):
                pass

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.loads(raw) if raw else None
                fake.requests.append({"method": "POST", "path": self.path, "auth": self.headers.get("Authorization"),
                                      "json": body})
                fake.api(self, body or {})

            def do_GET(self):
                fake.requests.append({"method": "GET", "path": self.path, "auth": self.headers.get("Authorization"),
                                      "json": None})
                fake.storage(self)

        super().__init__(Handler)

    def api(self, handler, body: dict) -> None:
        if handler.path == INTROSPECT:  # an unknown token is inactive (200), not an error
            active = body.get("token") == TOKEN
            return self.send_json(handler, 200, {"active": active, "username": USER if active else ""})
        if handler.path != DOWNLOAD:
            return self.send_json(handler, 404, {"code": 404, "message": f"no such method: {handler.path}"})
        if handler.headers.get("Authorization") not in (BASIC, BEARER):
            return self.send_json(handler, 401, {"code": 401, "message": "Unauthenticated"})
        if self.refuse:
            return self.send_json(handler, self.refuse, {"code": self.refuse,
                                                         "message": "Permission 'datasets.get' was denied"})
        slug = f"{body.get('ownerSlug')}/{body.get('datasetSlug')}"
        if slug not in self.datasets:
            return self.send_json(handler, 404, {"code": 404, "message": "Dataset not found"})
        handler.send_response(302)
        handler.send_header("Location", f"{self.url}/storage/datasets/{slug}.zip?X-Goog-Signature=fake")
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    def storage(self, handler) -> None:
        path = handler.path.split("?")[0]
        slug = path.removeprefix("/storage/datasets/").removesuffix(".zip")
        if not path.startswith("/storage/datasets/") or slug not in self.datasets:
            return self.send_json(handler, 404, {"code": 404, "message": "No such object"})
        data = self.datasets[slug]
        handler.send_response(200)
        handler.send_header("Content-Type", "application/zip")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    @staticmethod
    def send_json(handler, status: int, answer: dict) -> None:
        data = json.dumps(answer).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def seen(self, path: str) -> list[dict]:
        return [r for r in self.requests if r["path"].split("?")[0] == path]


@pytest.fixture(autouse=True)
def _offline(no_credentials, monkeypatch):
    """No Kaggle credentials or mirror from the environment (tests/conftest.py); no proxy for 127.0.0.1; no name
    lookup but the loopback one, so that nothing the package sends can leave this machine."""
    for var in ("no_proxy", "NO_PROXY"):
        monkeypatch.setenv(var, "127.0.0.1,localhost")
    lookup = socket.getaddrinfo

    def loopback_only(host, *args, **kwargs):
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise OSError(f"test guard: no connection to {host!r}, only to the fake Kaggle API on 127.0.0.1")
        return lookup(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", loopback_only)


@pytest.fixture
def fake_kaggle(monkeypatch):
    """The fake Kaggle API, with the package pointed at it (see the module's docstring), serving SLUG's zip."""
    fake = FakeKaggle()
    fake.datasets[SLUG] = zipped({"insurance.csv": CSV})
    monkeypatch.delenv("KAGGLE_API_ENVIRONMENT", raising=False)
    monkeypatch.setitem(kaggle_env._env_to_endpoint, kaggle_env.KaggleEnv.PROD, fake.url)
    yield fake
    fake.close()


def use_key(monkeypatch, key: str = KEY) -> None:
    monkeypatch.setenv("KAGGLE_USERNAME", USER)
    monkeypatch.setenv("KAGGLE_KEY", key)


def use_credentials(kind: str, monkeypatch, home: Path) -> None:
    """Credentials for USER the way a user sets them: `kind` is key (KAGGLE_USERNAME/KAGGLE_KEY), token
    (KAGGLE_API_TOKEN), token_file (~/.kaggle/access_token) or oauth (~/.kaggle/credentials.json of `kaggle auth
    login`, with an access token that has not expired)."""
    folder = home / ".kaggle"
    if kind == "key":
        use_key(monkeypatch)
    elif kind == "token":
        monkeypatch.setenv("KAGGLE_API_TOKEN", TOKEN)
    elif kind == "token_file":
        folder.mkdir(parents=True)
        (folder / "access_token").write_text(TOKEN + "\n")
    elif kind == "oauth":
        folder.mkdir(parents=True)
        expires = (datetime.now(timezone.utc) + timedelta(hours=6)).isoformat()
        (folder / "credentials.json").write_text(json.dumps(
            {"refresh_token": "refresh", "access_token": TOKEN, "access_token_expiration": expires,
             "username": USER, "scopes": []}))
    else:
        raise ValueError(kind)


# --------------------------------------------------------------------------------------------------
# success
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["key", "token", "token_file", "oauth"])
def test_real_package_downloads_from_kaggle_with_credentials(kind, fake_kaggle, monkeypatch, tmp_path, capsys):
    use_credentials(kind, monkeypatch, tmp_path / "home")
    assert fetchers.kaggle_credentials()
    raw = tmp_path / "raw" / "insurance"
    lines: list[str] = []
    record = sources.acquire("insurance", insurance_entry(), raw, "real", None, log=lines.append)

    assert record["source"] == "kaggle" and record["location"] == SLUG and record["standin"] is False
    saved = json.loads((raw / "SOURCE.json").read_text())
    assert saved["source"] == "kaggle" and saved["location"] == SLUG
    assert saved["files"] == [{"name": "insurance.csv", "sha256": sha(CSV), "bytes": len(CSV), "verified": "sha256"}]
    assert [a["source"] for a in saved["attempts"]] == ["mirror"]  # no mirror configured; no URL in the entry
    assert (raw / "insurance.csv").read_bytes() == CSV
    assert leftovers(raw) == ["SOURCE.json", "insurance.csv"]  # no zip, no .kaggle/, no staging folder

    # one download call, with the slug and these credentials, then the file from the URL it redirected to
    auth = BASIC if kind == "key" else BEARER
    [call] = fake_kaggle.seen(DOWNLOAD)
    assert call["method"] == "POST" and call["auth"] == auth
    assert call["json"] == {"ownerSlug": "mirichoi0218", "datasetSlug": "insurance"}
    [fetch] = fake_kaggle.seen("/storage/datasets/mirichoi0218/insurance.zip")
    assert fetch["method"] == "GET"
    introspections = fake_kaggle.seen(INTROSPECT)  # an access token is checked first (also when `kaggle` is imported)
    if kind in ("token", "token_file"):
        assert introspections and all(r["json"] == {"token": TOKEN} and r["auth"] == BEARER for r in introspections)
    else:
        assert introspections == []
    assert {r["path"] for r in fake_kaggle.requests} <= {INTROSPECT, DOWNLOAD, fetch["path"]}  # no other call

    # what the package prints goes to the log, not to stdout
    assert capsys.readouterr().out == ""
    assert "insurance: kaggle: Dataset URL: https://www.kaggle.com/datasets/mirichoi0218/insurance" in lines


def test_a_gzip_catalog_file_is_compressed_from_the_kaggle_file(fake_kaggle, monkeypatch, tmp_path):
    """A catalog file stored gzip-compressed (like creditcard.csv.gz) is made from the uncompressed file Kaggle has."""
    buf = io.BytesIO()
    with gzip_writer(buf) as out:
        out.write(CSV)
    stored = buf.getvalue()
    fake_kaggle.datasets["someone/toy"] = zipped({"toy.csv": CSV, "README.md": b"about toy\n"})
    use_key(monkeypatch)
    e = entry([{"name": "toy.csv.gz", "gzip": True, "sha256": sha(stored), "urls": []}], kaggle="someone/toy")
    raw = tmp_path / "raw"
    record = sources.acquire("toy", e, raw, "real", None)
    assert record["source"] == "kaggle" and record["location"] == "someone/toy"
    [f] = record["files"]
    assert f["name"] == "toy.csv.gz" and f["sha256"] == sha(stored) and f["content_sha256"] == sha(CSV)
    assert leftovers(raw) == ["SOURCE.json", "toy.csv.gz"]


# --------------------------------------------------------------------------------------------------
# failures
# --------------------------------------------------------------------------------------------------


def test_rejected_credentials_name_the_dataset_and_say_what_to_do(fake_kaggle, monkeypatch, tmp_path, capsys):
    use_key(monkeypatch, key="an-old-revoked-key")
    raw = tmp_path / "raw" / "insurance"
    with pytest.raises(DataError) as err:
        sources.acquire("insurance", insurance_entry(), raw, "real", None)
    msg = str(err.value)
    assert msg.startswith("dataset 'insurance': no real source worked (data_source: real)")
    assert (f"- kaggle {SLUG}: insurance: Kaggle API download of {SLUG} failed: Kaggle rejected the credentials "
            "(HTTP 401, HTTPError: Unauthenticated); create a new API token in your Kaggle account settings") in msg
    assert "KAGGLE_USERNAME/KAGGLE_KEY" in msg
    [call] = fake_kaggle.requests  # the download call, refused; nothing fetched
    assert call["path"] == DOWNLOAD and call["auth"].startswith("Basic ")
    assert leftovers(raw) == []
    assert capsys.readouterr().out == ""

    record = sources.acquire("insurance", insurance_entry(), raw, "auto", None)
    assert record["source"] == "standin" and record["standin"] is True
    assert any(r.startswith(f"kaggle {SLUG}: ") and "Kaggle rejected the credentials (HTTP 401" in r
               for r in record["fallback_reasons"])


def test_a_refused_download_says_to_check_the_account(fake_kaggle, monkeypatch, tmp_path):
    fake_kaggle.refuse = 403
    use_key(monkeypatch)
    with pytest.raises(DataError) as err:
        sources.acquire("insurance", insurance_entry(), tmp_path / "raw", "real", None)
    msg = str(err.value)
    assert f"Kaggle API download of {SLUG} failed: Kaggle refused these credentials access to this dataset " in msg
    assert "(HTTP 403, HTTPError: Permission 'datasets.get' was denied)" in msg
    assert f"https://www.kaggle.com/datasets/{SLUG} opens for that account" in msg


def test_an_access_token_kaggle_does_not_accept(fake_kaggle, monkeypatch, tmp_path, capsys):
    """The package ignores an inactive token, finds nothing else, prints its help and exits: a DataError, the help in
    the log, nothing on stdout."""
    monkeypatch.setenv("KAGGLE_API_TOKEN", "KGAT_expired")
    lines: list[str] = []
    with pytest.raises(DataError) as err:
        sources.acquire("insurance", insurance_entry(), tmp_path / "raw", "real", None, log=lines.append)
    assert (f"insurance: Kaggle API download of {SLUG} failed: the kaggle package accepted none of the credentials it "
            "found (it exited with status 1); set valid ones (~/.kaggle/kaggle.json (mode 600)") in str(err.value)
    assert fake_kaggle.seen(DOWNLOAD) == [] and fake_kaggle.seen(INTROSPECT)
    assert "insurance: kaggle: Authentication required to call the Kaggle API." in lines
    assert capsys.readouterr().out == ""


def test_a_kaggle_dataset_without_the_catalog_file_lists_what_it_has(fake_kaggle, monkeypatch, tmp_path):
    fake_kaggle.datasets[SLUG] = zipped({"insurance_v2.csv": CSV, "README.md": b"about\n"})
    use_key(monkeypatch)
    raw = tmp_path / "raw" / "insurance"
    with pytest.raises(DataError) as err:
        sources.acquire("insurance", insurance_entry(), raw, "real", None)
    assert (f"- kaggle {SLUG}: insurance: insurance.csv not in the Kaggle dataset {SLUG} "
            "(it has: README.md, insurance_v2.csv)") in str(err.value)
    assert len(fake_kaggle.seen(DOWNLOAD)) == 1
    assert leftovers(raw) == []  # the downloaded files went with the staging folder


def test_without_credentials_nothing_is_sent(fake_kaggle, tmp_path):
    raw = tmp_path / "raw" / "insurance"
    with pytest.raises(DataError) as err:
        sources.acquire("insurance", insurance_entry(), raw, "real", None)
    assert f"- kaggle {SLUG}: skipped: no Kaggle credentials (~/.kaggle/kaggle.json" in str(err.value)
    record = sources.acquire("insurance", insurance_entry(), raw, "auto", None)
    assert record["source"] == "standin"
    assert record["attempts"][-1] == {"source": "kaggle", "location": SLUG, "error": (
        "skipped: no Kaggle credentials (~/.kaggle/kaggle.json, KAGGLE_USERNAME/KAGGLE_KEY or KAGGLE_API_TOKEN)")}
    assert fake_kaggle.requests == []


# --------------------------------------------------------------------------------------------------
# which credentials count: the ones the package reads
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("files, env, found", [
    ({".kaggle/credentials.json": '{"refresh_token": "r"}'}, {}, ".kaggle/credentials.json"),  # kaggle auth login
    ({".kaggle/access_token.txt": "t"}, {}, ".kaggle/access_token.txt"),
    ({"cfg/kaggle.json": "{}"}, {"KAGGLE_CONFIG_DIR": "cfg"}, "cfg/kaggle.json"),
    ({".kaggle/kaggle.json": "{}"}, {"KAGGLE_CONFIG_DIR": "cfg"}, None),  # the package reads cfg/ only
    ({".config/kaggle/kaggle.json": "{}"}, {}, ".config/kaggle/kaggle.json"),  # no ~/.kaggle: the XDG folder
    ({".config/kaggle/kaggle.json": "{}", ".kaggle/other": ""}, {}, None),  # ~/.kaggle exists: not read
    ({".config/kaggle/access_token": "t"}, {}, None),  # an access token is read from ~/.kaggle only
    ({".kaggle/access_token": ""}, {}, None),  # empty
], ids=["kaggle auth login", "access_token.txt", "KAGGLE_CONFIG_DIR", "KAGGLE_CONFIG_DIR only", "XDG folder",
        "XDG folder unread", "XDG access_token unread", "empty token file"])
def test_kaggle_credentials_are_where_the_package_reads_them(files, env, found, monkeypatch, tmp_path):
    home = tmp_path / "home"
    for name, text in files.items():
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(text)
    for var, value in env.items():
        monkeypatch.setenv(var, str(home / value))
    assert fetchers.kaggle_credentials() == (str(home / found) if found else None)

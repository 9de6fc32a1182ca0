"""A local HTTP server for the data tests: an http.server on 127.0.0.1 only (port 0 unless given), serving files from
memory in a daemon thread, shut down by the test. Nothing it serves leaves the machine.

- Range requests get 206 and the rest of the file, unless `honour_range` is False (then 200 and the whole file).
- `drops`: that many responses are cut off after half their body (the connection closes).
- `vanish_after_drop`: after a cut-off response the server stops listening, so the next try is refused (a network
  that went away): a run under `data_source: real` then fails and keeps its partial file.
- `lengths`: {name: n} advertises a Content-Length of n for that file and sends nothing (a file too large for any
  disk, for the free-space refusal).
- `requests` records each request's (path, Range header, status).
"""

from __future__ import annotations

import bz2
import http.server
import io
import tarfile
import threading


class LocalServer:
    """A ThreadingHTTPServer on 127.0.0.1 (port 0: a free one) answering with `handler` in a daemon thread; `url` is
    its address, `close()` stops it."""

    def __init__(self, handler: type[http.server.BaseHTTPRequestHandler], port: int = 0):
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


class Server(LocalServer):
    """Files from memory, as the module docstring says."""

    def __init__(self, port: int = 0):
        self.files: dict[str, bytes] = {}
        self.lengths: dict[str, int] = {}
        self.honour_range = True
        self.drops = 0
        self.vanish_after_drop = False
        self.requests: list[tuple[str, str | None, int]] = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                name = self.path.lstrip("/")
                if name not in server.files:
                    server.requests.append((name, self.headers.get("Range"), 404))
                    self.send_error(404)
                    return
                data, start, status = server.files[name], 0, 200
                wanted = self.headers.get("Range")
                if wanted and server.honour_range:
                    start, status = int(wanted.split("=")[1].split("-")[0]), 206
                server.requests.append((name, wanted, status))
                body = data[start:]
                self.send_response(status)
                if status == 206:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.send_header("Content-Length", str(server.lengths.get(name, len(body))))
                self.end_headers()
                if name in server.lengths:
                    self.close_connection = True
                    return
                if server.drops:
                    server.drops -= 1
                    self.wfile.write(body[:len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    if server.vanish_after_drop:
                        server.httpd.socket.close()  # later connections are refused
                    return
                self.wfile.write(body)

        super().__init__(Handler, port)


def tar_bz2(members: dict[str, bytes]) -> bytes:
    """A .tar.bz2 archive of {member path: bytes}."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return bz2.compress(buf.getvalue())

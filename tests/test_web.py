"""The one HTTP client of the servers grpo-code calls (grpo_code/web.py): pooled connections,
retries on what can pass, none on what cannot."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from grpo_code.web import HttpFailure, post_json


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real servers answer

    def do_POST(self) -> None:  # noqa: N802 - the standard library's name
        server = self.server
        server.peers.add(self.client_address)  # type: ignore[attr-defined]
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        server.calls += 1  # type: ignore[attr-defined]
        status = server.statuses.pop(0) if server.statuses else 200  # type: ignore[attr-defined]
        payload = json.dumps({"echo": body}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.peers, httpd.calls, httpd.statuses = set(), 0, []  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def test_requests_reuse_one_pooled_connection(server) -> None:
    url = f"http://127.0.0.1:{server.server_address[1]}/x"
    for i in range(20):
        assert post_json(url, {"i": i}, timeout_s=5, retries=0) == {"echo": {"i": i}}
    assert server.calls == 20
    assert len(server.peers) == 1, f"{len(server.peers)} connections for 20 requests"


def test_a_passing_failure_is_retried_and_a_wrong_request_is_not(server) -> None:
    url = f"http://127.0.0.1:{server.server_address[1]}/x"
    server.statuses = [503, 429]
    assert post_json(url, {"a": 1}, timeout_s=5, retries=2, backoff_s=0.01) == {"echo": {"a": 1}}
    assert server.calls == 3
    server.statuses = [400]
    with pytest.raises(HttpFailure, match="HTTP 400"):
        post_json(url, {"a": 1}, timeout_s=5, retries=3, backoff_s=0.01)
    assert server.calls == 4
    with pytest.raises(HttpFailure, match="unexpected answer"):
        post_json(url, {"a": 1}, timeout_s=5, retries=1, backoff_s=0.01, parse=lambda p: p["missing"])
    with pytest.raises(HttpFailure, match="Connect"):
        post_json("http://127.0.0.1:9/none", {}, timeout_s=2, retries=0)

"""JSON over HTTP with retries: the one client of the servers grpo-code calls (an
OpenAI-compatible generation server, a reward-model server, a remote sandbox, a judge).

Every request goes through one pooled ``httpx.Client`` per process (:func:`client`), so
connections are kept alive and reused across requests and threads, as RL request rates
need: a new TCP (and TLS) connection per request costs more than many answers. A request
is retried with exponential back-off when the connection fails or times out, and on 408,
429 and 5xx answers; any other 4xx means the request itself is wrong, so it is not
repeated. :class:`HttpFailure` carries the last error once the attempts are spent.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

BACKOFF_CAP_S = 8.0
POOL_CONNECTIONS = 256
"""Connections the shared client keeps open at most (to all servers together)."""

_lock = threading.Lock()
_client: tuple[int, httpx.Client] | None = None


class HttpFailure(Exception):
    """Every attempt failed; ``str()`` is the last error (``HTTP 503: ...``, a connection error...)."""


def client() -> httpx.Client:
    """This process's pooled client (a forked child makes its own: a connection is never
    shared across processes)."""
    global _client
    with _lock:
        if _client is None or _client[0] != os.getpid():
            limits = httpx.Limits(max_connections=POOL_CONNECTIONS, max_keepalive_connections=64)
            # trust_env=False: a proxy variable must not reroute calls to local servers.
            _client = (os.getpid(), httpx.Client(limits=limits, trust_env=False))
        return _client[1]


def post_json(url: str, body: Any, *, timeout_s: float, retries: int, backoff_s: float = 0.5,
              headers: dict[str, str] | None = None, parse: Callable[[Any], Any] = lambda payload: payload,
              attempted: Callable[[], None] = lambda: None) -> Any:
    """POST ``body`` as JSON to ``url`` and return ``parse(answer)``; ``retries`` more
    attempts after the first, ``backoff_s * 2**k`` apart (at most 8 s). ``parse`` raising
    ``ValueError``, ``KeyError`` or ``TypeError`` (an answer of the wrong shape) counts as a
    failed attempt; ``attempted`` is called before each one. ``body=None``: a GET."""
    data = None if body is None else json.dumps(body).encode()
    sent = {**({"Content-Type": "application/json"} if data is not None else {}), **(headers or {})}
    last = "no attempt"
    http = client()
    for attempt in range(retries + 1):
        if attempt:
            time.sleep(min(BACKOFF_CAP_S, backoff_s * 2 ** (attempt - 1)))
        attempted()
        try:
            if data is None:
                response = http.get(url, headers=sent, timeout=timeout_s)
            else:
                response = http.post(url, content=data, headers=sent, timeout=timeout_s)
        except httpx.TimeoutException as exc:
            last = f"TimeoutError: {exc or 'timed out'}"
            continue
        except (httpx.TransportError, OSError) as exc:
            last = f"{type(exc).__name__}: {exc}"
            continue
        if response.status_code >= 400:
            last = f"HTTP {response.status_code}: {response.content[:200].decode(errors='replace')}".rstrip(": ")
            if response.status_code < 500 and response.status_code not in (408, 429):
                break  # the request itself is wrong; repeating it cannot help
            continue
        try:
            return parse(json.loads(response.content))
        except (ValueError, KeyError, TypeError) as exc:
            last = f"unexpected answer ({type(exc).__name__}: {exc})"
    raise HttpFailure(last)

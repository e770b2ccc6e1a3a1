"""JSON over HTTP with retries: the one client of the servers grpo-code calls (an
OpenAI-compatible generation server, a reward-model server).

A request is retried with exponential back-off when the connection fails or times out,
and on 408, 429 and 5xx answers; any other 4xx means the request itself is wrong, so it
is not repeated. :class:`HttpFailure` carries the last error once the attempts are spent.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

BACKOFF_CAP_S = 8.0


class HttpFailure(Exception):
    """Every attempt failed; ``str()`` is the last error (``HTTP 503: ...``, a connection error...)."""


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
    for attempt in range(retries + 1):
        if attempt:
            time.sleep(min(BACKOFF_CAP_S, backoff_s * 2 ** (attempt - 1)))
        attempted()
        try:
            with urllib.request.urlopen(urllib.request.Request(url, data=data, headers=sent),
                                        timeout=timeout_s) as response:
                return parse(json.loads(response.read()))
        except urllib.error.HTTPError as exc:
            last = f"HTTP {exc.code}: {exc.read()[:200].decode(errors='replace')}".rstrip(": ")
            if 400 <= exc.code < 500 and exc.code not in (408, 429):
                break  # the request itself is wrong; repeating it cannot help
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            last = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
        except (ValueError, KeyError, TypeError) as exc:
            last = f"unexpected answer ({type(exc).__name__}: {exc})"
    raise HttpFailure(last)

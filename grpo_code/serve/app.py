"""``grpo-code sandbox serve``: the sandbox's pool behind HTTP (Starlette on uvicorn).

Endpoints:

- ``POST /run_code`` and ``GET /v1/ping``: SandboxFusion's, field for field (:mod:`.fusion`),
  so veRL's ``sandbox_fusion`` reward and other clients of that API use our pool unchanged;
- ``POST /v1/jobs``: our own job format, one job or a list, answered as
  ``grpo-code sandbox exec`` prints results; ``GET /v1/fingerprint?language=python``: what
  produces the verdicts (store keys of a remote client carry it);
- ``GET /metrics``: Prometheus text (requests by endpoint and status, verdicts, queue
  depth, a latency histogram).

What a service owes its clients: a bounded queue (jobs accepted but not finished; a
request that would pass ``queue`` is answered 429 with ``Retry-After``), a body limit
(413), malformed input answered 400/422 naming the field while the service keeps serving,
a deadline per request (a job the sandbox did not answer in time is ``SandboxError``, never
a verdict), a bearer token when one is set (``token``: every endpoint but ``/v1/ping``
asks for it), and one access-log line per request.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from grpo_code.errors import SandboxError
from grpo_code.sandbox.types import Job, Result
from grpo_code.sandbox.wire import total_deadline_s, wire_for
from grpo_code.serve import fusion

BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
"""Latency histogram bounds (seconds)."""


@dataclass(frozen=True)
class ServeSettings:
    queue: int = 256
    """Jobs accepted and not yet finished, at most; past it a request gets 429."""
    max_body_bytes: int = 16 * 2**20
    token: str | None = None
    """Bearer token every endpoint but ``/v1/ping`` asks for (``None``: none asked)."""
    log: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True)


class Metrics:
    """Counters for ``/metrics`` (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: Counter = Counter()
        self.verdicts: Counter = Counter()
        self.buckets = [0] * len(BUCKETS)
        self.count = 0
        self.total_s = 0.0

    def request(self, endpoint: str, status: int, seconds: float) -> None:
        with self._lock:
            self.requests[(endpoint, status)] += 1
            self.count += 1
            self.total_s += seconds
            for i, bound in enumerate(BUCKETS):
                if seconds <= bound:
                    self.buckets[i] += 1

    def verdict(self, name: str) -> None:
        with self._lock:
            self.verdicts[name] += 1

    def text(self, depth: int) -> str:
        with self._lock:
            lines = ["# TYPE grpo_code_requests_total counter"]
            lines += [f'grpo_code_requests_total{{endpoint="{e}",status="{s}"}} {n}'
                      for (e, s), n in sorted(self.requests.items())]
            lines.append("# TYPE grpo_code_verdicts_total counter")
            lines += [f'grpo_code_verdicts_total{{verdict="{v}"}} {n}' for v, n in sorted(self.verdicts.items())]
            lines += ["# TYPE grpo_code_queue_depth gauge", f"grpo_code_queue_depth {depth}",
                      "# TYPE grpo_code_request_seconds histogram"]
            lines += [f'grpo_code_request_seconds_bucket{{le="{b}"}} {n}' for b, n in zip(BUCKETS, self.buckets)]
            lines += [f'grpo_code_request_seconds_bucket{{le="+Inf"}} {self.count}',
                      f"grpo_code_request_seconds_sum {self.total_s:.6f}", f"grpo_code_request_seconds_count {self.count}"]
        return "\n".join(lines) + "\n"


def _problem(status: int, field: str, problem: str) -> JSONResponse:
    return JSONResponse({"error": problem, "field": field}, status_code=status)


class Service:
    """The endpoints over one sandbox."""

    def __init__(self, sandbox: Any, settings: ServeSettings):
        self.sandbox = sandbox
        self.settings = settings
        self.metrics = Metrics()
        self._depth = 0
        self._lock = threading.Lock()

    # ----------------------------------------------------------------- plumbing

    async def _body(self, request: Request) -> Any:
        """The request's JSON, within the body limit (raises ``_Answer`` with the 4xx)."""
        limit = self.settings.max_body_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise _Answer(_problem(413, "body", f"{declared} bytes is over the limit of {limit}"))
        raw = bytearray()
        async for chunk in request.stream():
            raw += chunk
            if len(raw) > limit:
                raise _Answer(_problem(413, "body", f"over the limit of {limit} bytes"))
        try:
            return json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise _Answer(_problem(400, "body", "not valid JSON")) from None
        except RecursionError:  # a body nested thousands deep: the parser's limit, not ours to fail on
            raise _Answer(_problem(400, "body", "JSON nested too deeply")) from None

    def _admit(self, jobs: int) -> None:
        with self._lock:
            if self._depth + jobs > self.settings.queue:
                raise _Answer(JSONResponse({"error": f"the queue is full ({self._depth} jobs waiting or running)",
                                            "field": None}, status_code=429, headers={"Retry-After": "1"}))
            self._depth += jobs

    def _done(self, jobs: int) -> None:
        with self._lock:
            self._depth -= jobs

    async def _run(self, job: Job) -> Result:
        """One job's result within its deadline; a late or lost one is an infra error."""
        deadline = total_deadline_s(wire_for(job, self.sandbox.config)) + 5.0
        try:
            future = self.sandbox.submit(job)
            result = await asyncio.wait_for(asyncio.wrap_future(future), deadline)
        except asyncio.TimeoutError:
            result = Result.infra_error(len(job.tests), f"no result within the request's deadline of {deadline:.0f} s")
        except SandboxError as exc:
            result = Result.infra_error(len(job.tests), f"{exc.what}")
        self.metrics.verdict(result.status.value)
        return result

    def _authorized(self, request: Request) -> bool:
        token = self.settings.token
        if token is None:
            return True
        given = request.headers.get("authorization", "")
        return hmac.compare_digest(given.encode(), f"Bearer {token}".encode())

    def app(self) -> Starlette:
        routes = [Route("/run_code", self._endpoint("run_code", self.run_code), methods=["POST"]),
                  Route("/v1/ping", self._endpoint("ping", self.ping, public=True), methods=["GET"]),
                  Route("/v1/jobs", self._endpoint("jobs", self.jobs), methods=["POST"]),
                  Route("/v1/fingerprint", self._endpoint("fingerprint", self.fingerprint), methods=["GET"]),
                  Route("/metrics", self._endpoint("metrics", self.prometheus), methods=["GET"])]
        return Starlette(routes=routes)

    def _endpoint(self, name: str, handler: Callable[[Request], Any], public: bool = False) -> Callable:
        async def endpoint(request: Request) -> Response:
            started = time.monotonic()
            if not public and not self._authorized(request):
                response: Response = _problem(401, "authorization", "a bearer token is required")
            else:
                try:
                    response = await handler(request)
                except _Answer as answer:
                    response = answer.response
            seconds = time.monotonic() - started
            self.metrics.request(name, response.status_code, seconds)
            client = request.client.host if request.client else "-"
            self.settings.log(f"{client} {request.method} {request.url.path} {response.status_code} "
                              f"{seconds * 1000:.1f}ms")
            return response

        return endpoint

    # ----------------------------------------------------------------- endpoints

    async def ping(self, request: Request) -> Response:
        return JSONResponse("pong")

    async def run_code(self, request: Request) -> Response:
        body = await self._body(request)
        try:
            run = fusion.parse(body)
            job = run.job()
        except fusion.BadRequest as exc:
            return _problem(422, exc.field, exc.problem)
        except SandboxError as exc:
            return _problem(422, "code", exc.what)
        except RecursionError:
            return _problem(422, "body", "nested too deeply")
        self._admit(1)
        try:
            result = await self._run(job)
        finally:
            self._done(1)
        return JSONResponse(fusion.response(run, result))

    async def jobs(self, request: Request) -> Response:
        body = await self._body(request)
        many = isinstance(body, list)
        items = body if many else [body]
        if not items:
            return _problem(422, "body", "the list of jobs is empty")
        try:
            jobs = [Job.from_dict(item) for item in items]
        except SandboxError as exc:
            return _problem(422, "job", exc.what)
        except RecursionError:
            return _problem(422, "job", "nested too deeply")
        self._admit(len(jobs))
        try:
            results = await asyncio.gather(*(self._run(job) for job in jobs))
        finally:
            self._done(len(jobs))
        payload = [r.to_dict() for r in results]
        return JSONResponse(payload if many else payload[0])

    async def fingerprint(self, request: Request) -> Response:
        language = request.query_params.get("language", "python")
        try:
            found = await asyncio.to_thread(self.sandbox.fingerprint, language)
        except SandboxError as exc:
            return _problem(422, "language", exc.what)
        return JSONResponse({"language": language, "fingerprint": found})

    async def prometheus(self, request: Request) -> Response:
        with self._lock:
            depth = self._depth
        return PlainTextResponse(self.metrics.text(depth), media_type="text/plain; version=0.0.4")


class _Answer(Exception):
    """A finished answer raised from inside a handler (a 4xx)."""

    def __init__(self, response: Response):
        super().__init__(response.status_code)
        self.response = response

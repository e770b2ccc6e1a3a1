"""The ``http`` backend: jobs run by a ``grpo-code sandbox serve`` elsewhere (``sandbox.url``).

Each job goes to the server's ``POST /v1/jobs`` with its limits resolved against this
side's config (the time and memory limits the verdict and the store key depend on), on
``sandbox.workers`` threads; the server's own queue bounds what runs there (a 429 is
retried after a pause). ``fingerprint(language)`` is the server's: the image, harness and
server-side limits that produced the verdicts, so the reward cache and eval's resume work
across machines. A server that cannot be reached, or refuses a job, is the sandbox's
failure: the job's future raises :class:`~grpo_code.errors.SandboxError` (a masked
reward, an eval sample retried on rerun), never a verdict.
"""

from __future__ import annotations

import os
import urllib.parse
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from grpo_code.config import SandboxConfig
from grpo_code.errors import SandboxError
from grpo_code.sandbox.types import Job, Limits, Result
from grpo_code.sandbox.wire import total_deadline_s, wire_for
from grpo_code.web import HttpFailure, post_json

RETRIES = 4


class HttpPool:
    """Runs jobs on a remote ``grpo-code sandbox serve`` (the facade's runner for ``http``)."""

    def __init__(self, config: SandboxConfig, workers: int):
        if not config.url:
            raise SandboxError("sandbox.backend is http but sandbox.url is not set",
                               "set sandbox.url to the server's base URL, e.g. http://10.0.0.5:8080")
        self.url = config.url.rstrip("/")
        self.config = config
        self.headers: dict[str, str] = {}
        if config.token_file:
            try:
                token = open(os.path.expanduser(config.token_file)).read().strip()  # noqa: SIM115
            except OSError as exc:
                raise SandboxError(f"cannot read sandbox.token_file {config.token_file!r} ({exc.strerror})",
                                   "point it at the file holding the server's token") from None
            self.headers["Authorization"] = f"Bearer {token}"
        self._threads = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sandbox-http")
        self.stats: dict[str, int] = {"jobs": 0, "infra_errors": 0}

    def _call(self, path: str, body: Any, timeout_s: float) -> Any:
        try:
            return post_json(f"{self.url}{path}", body, timeout_s=timeout_s, retries=RETRIES,
                             headers=self.headers)
        except HttpFailure as exc:
            raise SandboxError(f"sandbox server {self.url}: {exc}",
                               "check that `grpo-code sandbox serve` runs there (and the token)") from None

    def submit(self, job: Job) -> Future[Result]:
        wire = wire_for(job, self.config)
        # The limits this side resolved travel with the job, so the server judges by them.
        sent = Job.from_dict({**job.to_dict(), "limits": Limits(wire["limits"]["timeout_s"],
                                                                 wire["limits"]["memory_mb"]).to_dict()})
        timeout = total_deadline_s(wire) + 30.0

        def run() -> Result:
            try:
                result = Result.from_dict(self._call("/v1/jobs", sent.to_dict(), timeout))
            except (KeyError, TypeError, ValueError) as exc:
                self.stats["infra_errors"] += 1
                raise SandboxError(f"sandbox server {self.url} answered no result ({exc})",
                                   "check that both sides run the same grpo-code") from None
            self.stats["jobs"] += 1
            return result

        return self._threads.submit(run)

    def fingerprint(self, language: str) -> str:
        query = urllib.parse.urlencode({"language": language})
        found = self._call(f"/v1/fingerprint?{query}", None, 60.0)
        try:
            return f"http:{found['fingerprint']}"
        except (KeyError, TypeError):
            raise SandboxError(f"sandbox server {self.url} named no fingerprint", "check the server") from None

    def start(self, language: str = "python") -> None:
        self.fingerprint(language)  # the server answers, or this says why not

    def worker_names(self) -> list[str]:
        return [self.url]

    def shutdown(self) -> None:
        self._threads.shutdown(wait=False, cancel_futures=True)

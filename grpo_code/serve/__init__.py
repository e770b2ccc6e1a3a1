"""The sandbox as an HTTP service (``grpo-code sandbox serve``): SandboxFusion's API and our
own job format over one pool (:mod:`.app`, :mod:`.fusion`). See docs/sandbox.md, Serving."""

from __future__ import annotations

import ipaddress
import sys
from pathlib import Path
from typing import Any

from grpo_code.errors import GrpoCodeError, MissingFileError


def loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_token(host: str, token_file: Path | None) -> str | None:
    """The bearer token, required to bind anywhere but loopback."""
    if token_file is None:
        if not loopback(host):
            raise GrpoCodeError(f"--host {host} is not loopback: serving beyond this machine needs a bearer token",
                                "write a token into a file and pass --token-file FILE, or serve on 127.0.0.1")
        return None
    if not token_file.is_file():
        raise MissingFileError(f"token file {str(token_file)!r} not found", "write the token into it, one line")
    token = token_file.read_text().strip()
    if len(token) < 16:
        raise GrpoCodeError(f"the token in {token_file} is {len(token)} characters: use at least 16",
                            "make one with: python -c 'import secrets; print(secrets.token_hex(16))'")
    return token


def serve(sandbox_config: Any, host: str, port: int, token: str | None, queue: int, max_body_mb: int,
          log: Any = None) -> None:
    """Start the pool, then listen until SIGINT/SIGTERM: in-flight requests finish, new ones
    are refused, and the pool's containers are removed."""
    import uvicorn

    from grpo_code.sandbox import Sandbox
    from grpo_code.serve.app import ServeSettings, Service

    say = log or (lambda line: print(line, file=sys.stderr, flush=True))
    with Sandbox(sandbox_config) as sandbox:
        say(f"starting the {sandbox.backend} pool ({sandbox.workers} workers)")
        sandbox.start("python")
        settings = ServeSettings(queue=queue, max_body_bytes=max_body_mb * 2**20, token=token, log=say)
        config = uvicorn.Config(Service(sandbox, settings).app(), host=host, port=port, log_level="warning",
                                access_log=False, timeout_graceful_shutdown=120, lifespan="off")
        server = uvicorn.Server(config)
        started = server.startup

        async def startup(sockets: Any = None) -> None:
            await started(sockets)
            if server.started:
                say(f"listening on http://{host}:{port} (POST /run_code, /v1/jobs; GET /v1/ping, /metrics)")

        server.startup = startup  # type: ignore[method-assign]
        try:
            # uvicorn finishes in-flight requests on SIGINT/SIGTERM, then hands the signal on:
            # the sandbox's handler exits 128 + signal once the pool is shut down.
            server.run()
        finally:
            say("stopped: in-flight requests finished; removing the pool's containers")

"""The Docker engine, driven through the Docker SDK: the connection, its typed errors, and
the image calls (look up, build, pull, import, remove).

No ``docker`` CLI process is started: the SDK speaks the engine's HTTP API at
``DOCKER_HOST`` (or the default socket). Engine errors arrive typed (not found, conflict,
other API errors, connection errors, timeouts) and :func:`engine_error` turns each into a
one-line :class:`~grpo_code.errors.SandboxError` with a hint. The containers themselves
are :mod:`.docker_backend`'s; building the sandbox images is :mod:`.image`'s.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from typing import Any

import docker
import docker.errors
import requests.exceptions
import urllib3.exceptions

from grpo_code.errors import SandboxError

TIMEOUT_ENV = "GRPO_CODE_DOCKER_TIMEOUT"
DEFAULT_API_TIMEOUT_S = 120.0
"""Seconds the engine may take to answer one API call (create, start, remove...);
``$GRPO_CODE_DOCKER_TIMEOUT`` overrides it (a slow engine starting many containers)."""
PROBE_TIMEOUT_S = 10.0
"""Seconds an engine probe (version, image lookups) may take."""
_CLIENTS: dict[tuple[Any, ...], docker.DockerClient] = {}
_CLIENT_ENV = ("DOCKER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH")
_CLIENTS_LOCK = threading.Lock()
ENGINE_ERRORS: tuple[type[BaseException], ...] = (
    docker.errors.DockerException,
    requests.exceptions.RequestException,
    urllib3.exceptions.HTTPError,  # a read of a streamed answer, which requests does not wrap
    TimeoutError,  # a socket read of an attached container
)
"""What a call of the SDK raises when the engine refuses, fails or does not answer."""
_TIMEOUTS = (requests.exceptions.Timeout, urllib3.exceptions.TimeoutError, TimeoutError)


def api_timeout_s() -> float:
    """The API timeout: ``$GRPO_CODE_DOCKER_TIMEOUT`` seconds, else 120."""
    text = os.environ.get(TIMEOUT_ENV, "").strip()
    try:
        value = float(text) if text else DEFAULT_API_TIMEOUT_S
    except ValueError:
        raise SandboxError(f"{TIMEOUT_ENV}={text!r} is not a number of seconds", f"unset it or set e.g. {TIMEOUT_ENV}=300") from None
    if value <= 0:
        raise SandboxError(f"{TIMEOUT_ENV}={text!r} must be positive", f"unset it or set e.g. {TIMEOUT_ENV}=300")
    return value


def engine_address() -> str:
    return os.environ.get("DOCKER_HOST") or "the default socket (unix:///var/run/docker.sock)"


def timed_out(exc: BaseException) -> bool:
    """Whether ``exc`` is (or wraps) a timeout: requests wraps a timed-out read of an
    answer's body as a ``ConnectionError`` holding urllib3's ``ReadTimeoutError``."""
    seen: set[int] = set()
    todo: list[Any] = [exc]
    while todo:
        item = todo.pop()
        if not isinstance(item, BaseException) or id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, _TIMEOUTS):
            return True
        todo += [*item.args, item.__cause__, item.__context__]
    return False


def engine_error(exc: BaseException, what: str) -> SandboxError:
    """One-line :class:`SandboxError` for an SDK exception raised while doing ``what``."""
    detail = " ".join(str(getattr(exc, "explanation", None) or exc).split())[:300]
    if isinstance(exc, docker.errors.ImageNotFound):
        return SandboxError(f"{what}: image not found ({detail})", "build it with `grpo-code sandbox build`")
    if isinstance(exc, docker.errors.NotFound):
        return SandboxError(f"{what}: not found ({detail})", "it was removed meanwhile; rerun")
    if isinstance(exc, docker.errors.APIError):
        status = exc.status_code
        if status == 409:
            return SandboxError(
                f"{what}: conflict ({detail})",
                "a container of that name exists or is being removed; rerun, or remove it with `docker rm -f`",
            )
        return SandboxError(
            f"{what}: the Docker engine answered {status or 'an error'} ({detail})",
            "see the message; `grpo-code sandbox doctor` checks the engine",
        )
    if timed_out(exc):
        return SandboxError(
            f"{what}: the Docker engine at {engine_address()} did not answer in time ({detail})",
            f"check that dockerd is running and healthy (`docker info` answers promptly); if the engine is "
            f"only slow, raise {TIMEOUT_ENV} (seconds, default {DEFAULT_API_TIMEOUT_S:.0f})",
        )
    if isinstance(exc, requests.exceptions.ConnectionError) or (
        isinstance(exc, docker.errors.DockerException) and "server API version" in str(exc)
    ):
        return SandboxError(
            f"{what}: no Docker engine answers at {engine_address()}",
            "start dockerd (see docs/sandbox.md), or set sandbox.backend=local (no isolation)",
        )
    return SandboxError(
        f"{what}: {type(exc).__name__}: {detail}", "`grpo-code sandbox doctor` checks the engine"
    )


def client(timeout: float | None = None) -> docker.DockerClient:
    """This process's SDK client (``DOCKER_HOST`` and friends honoured), made on first use;
    ``timeout`` defaults to :func:`api_timeout_s`.

    Raises :class:`SandboxError` when no engine answers."""
    timeout = api_timeout_s() if timeout is None else timeout
    # A forked child must not share its parent's connections; another DOCKER_HOST is another engine.
    key = (os.getpid(), timeout, *(os.environ.get(k) for k in _CLIENT_ENV))
    with _CLIENTS_LOCK:
        found = _CLIENTS.get(key)
        if found is not None:
            return found
        try:
            made = docker.from_env(timeout=max(1, round(timeout)), max_pool_size=64)
        except ENGINE_ERRORS as exc:
            raise engine_error(exc, "connecting to the Docker engine") from None
        _CLIENTS[key] = made
        return made


def engine_version() -> str | None:
    """The Docker engine's version, or None when no engine answers."""
    try:
        return str(client(PROBE_TIMEOUT_S).version().get("Version") or "") or None
    except (SandboxError, *ENGINE_ERRORS):
        return None


# --------------------------------------------------------------------------- images


def _image_attrs(image: str) -> dict[str, Any] | None:
    """``docker image inspect`` of a local image, None when it is absent; raises
    :class:`SandboxError` for other engine errors."""
    try:
        return client(PROBE_TIMEOUT_S).api.inspect_image(image)
    except docker.errors.NotFound:
        return None
    except ENGINE_ERRORS as exc:
        raise engine_error(exc, f"looking up image {image}") from None


def image_id(image: str) -> str | None:
    """The id of a local image, or None when it is absent (or no engine answers)."""
    try:
        attrs = _image_attrs(image)
    except SandboxError:
        return None
    return attrs.get("Id") if attrs else None


def image_label(image: str, label: str) -> str | None:
    attrs = _image_attrs(image)
    labels = ((attrs or {}).get("Config") or {}).get("Labels") or {}
    return labels.get(label) or None


def remove_image(image: str) -> bool:
    """Remove a local image; False when the engine refused (in use, absent)."""
    try:
        client().api.remove_image(image)
    except ENGINE_ERRORS:
        return False
    return True


def _stream_error(messages: Any) -> tuple[str | None, list[str]]:
    """Read a JSON-message stream of the engine (build, pull, import): the first error it
    reports (None when none) and the last lines of its output."""
    tail: list[str] = []
    for message in messages:
        if not isinstance(message, dict):
            continue
        if message.get("error") or message.get("errorDetail"):
            detail = message.get("errorDetail") or {}
            return " ".join(str(message.get("error") or detail.get("message") or message).split()), tail
        line = str(message.get("stream") or message.get("status") or "").strip()
        if line:
            tail = [*tail[-7:], line]
    return None, tail


def build_image(
    context: str, tag: str, buildargs: dict[str, str], labels: dict[str, str], timeout_s: float = 1800
) -> None:
    """``docker build --network none --pull=false --force-rm`` of ``context`` with the
    legacy builder (the API's default), tagged ``tag``."""
    what = f"docker build of {tag}"
    try:
        stream = client(timeout_s).api.build(
            path=context, tag=tag, buildargs=buildargs, labels=labels, network_mode="none",
            pull=False, rm=True, forcerm=True, decode=True,
        )  # fmt: skip
        error, tail = _stream_error(stream)
    except ENGINE_ERRORS as exc:
        raise engine_error(exc, what) from None
    if error is not None:
        raise SandboxError(
            f"{what} failed: {' | '.join([*tail[-6:], error])}",
            "see the message; rerun with GRPO_CODE_DEBUG=1",
        )


def pull_image(name: str, timeout_s: float = 600) -> None:
    """``docker pull NAME``; raises :class:`SandboxError` when the engine cannot get it."""
    repository, tag = docker.utils.parse_repository_tag(name)
    what = f"docker pull {name}"
    try:
        stream = client(timeout_s).api.pull(repository, tag=tag or "latest", stream=True, decode=True)
        error, _ = _stream_error(stream)
    except ENGINE_ERRORS as exc:
        raise engine_error(exc, what) from None
    if error is not None:
        raise SandboxError(f"{what} failed: {error}", "check the registry is reachable")


def import_tarball(tarball: str | os.PathLike[str], name: str, changes: list[str]) -> None:
    """``docker import --change CHANGE... TARBALL NAME`` (a root filesystem as an image)."""
    repository, tag = docker.utils.parse_repository_tag(name)
    what = f"docker import of {os.fspath(tarball)}"
    try:
        out = client().api.import_image(
            src=os.fspath(tarball), repository=repository, tag=tag or "latest", changes=changes
        )
    except ENGINE_ERRORS as exc:
        raise engine_error(exc, what) from None
    messages = []
    for line in str(out).splitlines():
        with contextlib.suppress(ValueError):
            messages.append(json.loads(line))
    error, _ = _stream_error(messages)
    if error is not None:
        raise SandboxError(f"{what} failed: {error}", "check the tarball (delete it to rebuild it)")

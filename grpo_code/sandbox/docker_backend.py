"""The Docker backend: long-lived, locked-down containers that each run one warm executor.

Each worker is a ``docker run --rm`` of the sandbox image whose executor is PID 1 of the
container. The job channel is a unix socket: the host listens in a private directory that
is bind-mounted read-only into that one container, the executor connects, the host checks
(SO_PEERCRED + cgroup) that the peer is that container, then unlinks the socket. This
bypasses the docker CLI/daemon relay of ``docker run -i`` (measured: it costs a large
share of CPU per job). With a remote engine (``DOCKER_HOST`` not a unix socket) or
``GRPO_CODE_SANDBOX_CHANNEL=stdio`` the channel is the container's attached stdin/stdout. Containers have no network, a read-only root,
a tmpfs ``/tmp`` work dir (wiped by the executor after each job), memory (= memory+swap)
and pids limits, no capabilities, no-new-privileges and a non-root user. They carry the
label ``grpo-code.sandbox`` plus an owner label (host, pid, process start time); at start
containers whose owner process is gone are removed. Closing stdin stops a container, so
even a killed host process leaves nothing behind once the docker CLI sees end of input.
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import secrets
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import uuid

from grpo_code.errors import SandboxError
from grpo_code.sandbox.worker import Worker, WorkerLost, subprocess_worker

LABEL = "grpo-code.sandbox"
OWNER_LABEL = "grpo-code.owner"
SANDBOX_UID = 10001
EXECUTOR_PATH = "/opt/grpo-code/executor/__main__.py"
DEFAULT_IMAGES = {
    "python": "grpo-code-sandbox-python:latest",
    "javascript": "grpo-code-sandbox-javascript:latest",
    "cpp": "grpo-code-sandbox-cpp:latest",
}


def image_name(language: str) -> str:
    """The image `grpo-code sandbox build --lang LANGUAGE` makes."""
    return DEFAULT_IMAGES.get(language, f"grpo-code-sandbox-{language}:latest")

CHANNEL_PREFIX = "grpo-code-sbx-"
CHANNEL_MOUNT = "/run/grpo-code"
_SESSION = uuid.uuid4().hex[:8]
_NAMES = itertools.count(1)  # container names are unique per process, across pools
_CLEANED = False


def _docker(*args: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise SandboxError(
            "the docker CLI is not installed",
            "install docker.io, or use sandbox.backend=local (no isolation)",
        ) from None
    except subprocess.TimeoutExpired:
        raise SandboxError(
            f"`docker {' '.join(args[:2])}` did not answer within {timeout:.0f}s",
            "check that dockerd is running and healthy",
        ) from None


def engine_version() -> str | None:
    """The Docker engine's version, or None when no engine answers."""
    try:
        out = _docker("version", "--format", "{{.Server.Version}}", timeout=10)
    except SandboxError:
        return None
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else None


def image_id(image: str) -> str | None:
    """The id of a local image, or None when it is absent."""
    try:
        out = _docker("image", "inspect", "--format", "{{.Id}}", image, timeout=15)
    except SandboxError:
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def image_label(image: str, label: str) -> str | None:
    out = _docker(
        "image", "inspect", "--format", f'{{{{index .Config.Labels "{label}"}}}}', image, timeout=15
    )
    value = out.stdout.strip() if out.returncode == 0 else ""
    return value if value and value != "<no value>" else None


def _start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def owner_tag(pid: int | None = None) -> str:
    """``host:pid:start-time`` of the process that owns the containers."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{_start_time(pid)}"


def _owner_alive(tag: str) -> bool:
    host, _, rest = tag.partition(":")
    pid_text, _, start = rest.partition(":")
    if host != socket.gethostname():
        return True  # another machine sharing the engine: not ours to judge
    try:
        pid = int(pid_text)
    except ValueError:
        return False
    return _start_time(pid) == start


def list_containers(all_owners: bool = True) -> list[tuple[str, str]]:
    """(id, owner) of the labelled sandbox containers on this engine."""
    out = _docker(
        "ps", "-a", "--filter", f"label={LABEL}", "--format", f'{{{{.ID}}}} {{{{.Label "{OWNER_LABEL}"}}}}'
    )
    rows = [tuple((line.split(" ", 1) + [""])[:2]) for line in out.stdout.splitlines() if line.strip()]
    mine = owner_tag()
    return [r for r in rows if all_owners or r[1] == mine]  # type: ignore[misc]


def remove_stale() -> int:
    """Remove labelled containers (and socket dirs) whose owning process is gone; returns the count."""
    stale = [cid for cid, owner in list_containers() if not _owner_alive(owner)]
    if stale:
        _docker("rm", "-f", *stale, timeout=60)
    for path in glob.glob(os.path.join(tempfile.gettempdir(), f"{CHANNEL_PREFIX}*")):
        pid = os.path.basename(path)[len(CHANNEL_PREFIX) :].split("-")[0]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            shutil.rmtree(path, ignore_errors=True)
    return len(stale)


def channel_mode() -> str:
    """``socket`` (fast, needs a local engine) or ``stdio`` (docker attach)."""
    forced = os.environ.get("GRPO_CODE_SANDBOX_CHANNEL", "").strip().lower()
    if forced in ("socket", "stdio"):
        return forced
    host = os.environ.get("DOCKER_HOST", "")
    return "socket" if not host or host.startswith("unix://") else "stdio"


def check_ready(image: str) -> None:
    """Raise a SandboxError that says what to do when the engine or image is missing."""
    if engine_version() is None:
        raise SandboxError(
            "no Docker engine answers",
            "start dockerd (see docs/sandbox.md), or set sandbox.backend=local (no isolation)",
        )
    lang = next((k for k, v in DEFAULT_IMAGES.items() if v == image), None)
    build = f"grpo-code sandbox build --lang {lang}" if lang else "grpo-code sandbox build"
    if image_id(image) is None:
        raise SandboxError(
            f"sandbox image {image!r} not found",
            f"build it with `{build} --bootstrap` (offline) or `{build}`",
        )
    from grpo_code.sandbox.image import EXECUTOR_LABEL, executor_hash

    if image_label(image, EXECUTOR_LABEL) != executor_hash():
        raise SandboxError(
            f"sandbox image {image!r} holds another version of the executor",
            f"rebuild it with `{build}` (add --bootstrap when offline)",
        )


def container_argv(
    image: str,
    name: str,
    memory_mb: int,
    pids_limit: int,
    tmpfs_mb: int,
    channel_dir: str | None = None,
    executor_args: tuple[str, ...] = (),
) -> list[str]:
    """The ``docker run`` command line of one sandbox container."""
    # The container's memory must hold the executor with a job of up to MAX_JOB_BYTES (its
    # expected values, parsed), one test at its own limit and the tmpfs.
    container_mb = memory_mb + tmpfs_mb + 640
    mode = ["-d", "-v", f"{channel_dir}:{CHANNEL_MOUNT}:ro"] if channel_dir else ["-i", "--sig-proxy=false"]
    return [
        "docker", "run", *mode, "--rm",
        "--name", name,
        "--label", f"{LABEL}=1",
        "--label", f"{OWNER_LABEL}={owner_tag()}",
        "--network", "none",
        "--read-only",
        "--tmpfs", f"/tmp:rw,nosuid,nodev,noexec,size={tmpfs_mb}m,mode=1777",
        "--memory", f"{container_mb}m",
        "--memory-swap", f"{container_mb}m",
        "--pids-limit", str(pids_limit),
        "--cap-drop", "ALL",
        "--security-opt", "no-new-privileges",
        "--user", f"{SANDBOX_UID}:{SANDBOX_UID}",
        "--log-driver", "none",
        "--ulimit", "core=0",
        "--workdir", "/tmp",
        "-e", "HOME=/tmp", "-e", "TMPDIR=/tmp", "-e", "PYTHONDONTWRITEBYTECODE=1",
        image,
        "python3", "-I", EXECUTOR_PATH, "--workdir", "/tmp", "--scratch", "/dev/shm", *executor_args,
    ]  # fmt: skip


class NeverConnected(WorkerLost):
    """the sandbox executor never connected to its unix socket"""


class DockerFactory:
    """Makes docker workers for the pool; removes stale containers once per process."""

    def __init__(
        self, image: str, memory_mb: int, pids_limit: int, tmpfs_mb: int, channel: str | None = None
    ):
        global _CLEANED
        check_ready(image)
        if not _CLEANED:
            remove_stale()
            _CLEANED = True
        self.image = image
        self.memory_mb = memory_mb
        self.pids_limit = pids_limit
        self.tmpfs_mb = tmpfs_mb
        self.channel = channel or channel_mode()
        self.prefix = f"grpo-code-sbx-{os.getpid()}-{_SESSION}"

    def __call__(self, index: int) -> Worker:
        name = f"{self.prefix}-{next(_NAMES)}"
        try:
            if self.channel == "stdio":
                argv = container_argv(self.image, name, self.memory_mb, self.pids_limit, self.tmpfs_mb)
                return subprocess_worker(argv, name, 60.0, after=lambda: _remove_container(name))
            try:
                return self._socket_worker(name)
            except NeverConnected:
                # The engine cannot see our socket directory (remote or sandboxed daemon):
                # fall back to the attached stdin/stdout channel for this pool.
                self.channel = "stdio"
                print(f"warning: {NeverConnected.__doc__}; using docker attach instead", file=sys.stderr)
                return self(index)
        except OSError as exc:
            raise WorkerLost(f"cannot run docker: {exc}") from None

    def _socket_worker(self, name: str) -> Worker:
        channel_dir = tempfile.mkdtemp(prefix=f"{CHANNEL_PREFIX}{os.getpid()}-")
        os.chmod(channel_dir, 0o711)  # the container's uid may traverse it, nobody may list it
        sock_name = secrets.token_hex(8) + ".sock"
        path = os.path.join(channel_dir, sock_name)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn: socket.socket | None = None

        def cleanup() -> None:
            with contextlib.suppress(OSError):
                listener.close()
            shutil.rmtree(channel_dir, ignore_errors=True)

        try:
            listener.bind(path)
            os.chmod(path, 0o666)
            listener.listen(8)
            argv = container_argv(
                self.image, name, self.memory_mb, self.pids_limit, self.tmpfs_mb,
                channel_dir, ("--connect", f"{CHANNEL_MOUNT}/{sock_name}"),
            )  # fmt: skip
            out = subprocess.run(argv, capture_output=True, text=True, timeout=120)
            if out.returncode != 0:
                raise WorkerLost(f"docker run failed: {out.stderr.strip()[-500:]}")
            container_id = out.stdout.strip()
            deadline = time.monotonic() + 20.0
            while conn is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise NeverConnected(NeverConnected.__doc__)
                listener.settimeout(remaining)
                try:
                    candidate, _ = listener.accept()
                except TimeoutError:
                    continue
                if _peer_is_container(candidate, container_id):
                    conn = candidate
                else:
                    candidate.close()
        except BaseException:
            cleanup()
            _remove_container(name)
            raise
        cleanup()  # nobody else can connect any more
        conn.setblocking(True)
        fd = conn.fileno()

        def close() -> None:
            conn.close()  # end of input: the executor exits and --rm removes the container
            _remove_container(name)

        def destroy() -> None:
            _remove_container(name)
            conn.close()

        return Worker(name, fd, fd, close, destroy, start_timeout_s=30.0)


def _peer_is_container(conn: socket.socket, container_id: str) -> bool:
    """True when the process at the other end of ``conn`` runs inside ``container_id``."""
    try:
        pid, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    except OSError:
        return False
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            return container_id in f.read()
    except OSError:
        # The engine's processes are not visible from here (another pid namespace).
        return pid == 0 and uid == SANDBOX_UID


def _remove_container(name: str, patience_s: float = 10.0) -> None:
    """``docker rm -f``, repeated while the engine answers that a removal is already under
    way: a container's own ``--rm`` (its executor exited at end of input) racing ours can
    leave it stuck in "Removal In Progress" until someone asks again."""
    deadline = time.monotonic() + patience_s
    while True:
        try:
            proc = subprocess.run(["docker", "rm", "-f", name], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            return
        racing = "already in progress" in proc.stderr or "cannot remove" in proc.stderr
        if proc.returncode == 0 or not racing or time.monotonic() > deadline:
            return
        time.sleep(0.2)

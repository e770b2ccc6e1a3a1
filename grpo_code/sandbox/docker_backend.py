"""The Docker backend: long-lived, locked-down containers that each run one warm executor.

The engine is driven through the Docker SDK (:mod:`.engine`: the connection, typed errors
as one-line :class:`~grpo_code.errors.SandboxError` messages, the image calls); this module
is the containers.

Each worker is a container of the sandbox image (created and started through the API, with
auto-remove) whose executor is PID 1. The job channel is a unix socket: the host listens in
a private directory that is bind-mounted read-only into that one container, the executor
connects, the host checks (SO_PEERCRED + cgroup) that the peer is that container, then
unlinks the socket. With a remote engine (``DOCKER_HOST`` not a unix socket),
``GRPO_CODE_SANDBOX_CHANNEL=stdio``, or an engine that cannot see the socket directory,
the channel is the container's stdin/stdout through the API's attach socket instead.
Containers have no network, a read-only root, a tmpfs ``/tmp`` work dir (wiped by the
executor after each job), memory (= memory+swap) and pids limits, no capabilities,
no-new-privileges and a non-root user (:func:`container_spec` lists every setting). They
carry the label ``grpo-code.sandbox`` plus an owner label (host, pid, process start time);
at start containers whose owner process is gone are removed. End of input on the channel
stops a container and auto-remove deletes it, so even a killed host process leaves nothing
behind.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import itertools
import os
import secrets
import shutil
import socket
import struct
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import docker.errors
from docker.types import LogConfig, Ulimit

from grpo_code.errors import SandboxError
from grpo_code.sandbox import cpus, engine
from grpo_code.sandbox.engine import ENGINE_ERRORS, PROBE_TIMEOUT_S, engine_error, engine_version, image_id
from grpo_code.sandbox.image import DEFAULT_IMAGES, EXECUTOR_LABEL, executor_hash, image_name
from grpo_code.sandbox.worker import Worker, WorkerLost

__all__ = [  # the engine's and the images' names that callers reach through this module
    "DEFAULT_IMAGES", "DockerFactory", "check_ready", "container_spec", "engine_version", "image_id", "image_name",
    "list_containers", "remove_stale",
]

LABEL = "grpo-code.sandbox"
OWNER_LABEL = "grpo-code.owner"
SANDBOX_UID = 10001
"""The sandbox's group, and the user the images name (``/etc/passwd``)."""
UID_BASE = 100_000
"""Each container runs as a uid of its own, ``UID_BASE`` plus 24 bits of its name's hash:
the kernel counts some limits per uid across the whole machine (pipe buffer pages, file
descriptors in flight over sockets, POSIX message queue bytes, inotify instances), and with
one uid for every container a program in one could use up what another's tests get."""


def sandbox_uid(name: str) -> int:
    """The uid the container named ``name`` runs as (see :data:`UID_BASE`)."""
    return UID_BASE + int.from_bytes(hashlib.sha256(name.encode()).digest()[:3], "big")
EXECUTOR_PATH = "/opt/grpo-code/executor/__main__.py"
CHANNEL_PREFIX = "grpo-code-sbx-"
CHANNEL_MOUNT = "/run/grpo-code"
_SESSION = uuid.uuid4().hex[:8]
_NAMES = itertools.count(1)  # container names are unique per process, across pools
_CLEANED = False


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
    try:
        found = engine.client().api.containers(all=True, filters={"label": LABEL})
    except ENGINE_ERRORS as exc:
        raise engine_error(exc, "listing sandbox containers") from None
    rows = [(c["Id"][:12], (c.get("Labels") or {}).get(OWNER_LABEL, "")) for c in found]
    mine = owner_tag()
    return [r for r in rows if all_owners or r[1] == mine]


def remove_stale() -> int:
    """Remove labelled containers (and socket dirs) whose owning process is gone; returns the count."""
    stale = [cid for cid, owner in list_containers() if not _owner_alive(owner)]
    for cid in stale:
        _remove_container(cid)
    for path in glob.glob(os.path.join(tempfile.gettempdir(), f"{CHANNEL_PREFIX}*")):
        pid = os.path.basename(path)[len(CHANNEL_PREFIX) :].split("-")[0]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            shutil.rmtree(path, ignore_errors=True)
    return len(stale)


def channel_mode() -> str:
    """``socket`` (fast, needs a local engine) or ``stdio`` (the API's attach socket)."""
    forced = os.environ.get("GRPO_CODE_SANDBOX_CHANNEL", "").strip().lower()
    if forced in ("socket", "stdio"):
        return forced
    host = os.environ.get("DOCKER_HOST", "")
    return "socket" if not host or host.startswith("unix://") else "stdio"


def check_ready(image: str) -> None:
    """Raise a SandboxError that says what to do when the engine or image is missing."""
    if engine.engine_version() is None:
        raise SandboxError(
            f"no Docker engine answers at {engine.engine_address()}",
            "start dockerd (see docs/sandbox.md), or set sandbox.backend=local (no isolation)",
        )
    lang = next((k for k, v in DEFAULT_IMAGES.items() if v == image), None)
    build = f"grpo-code sandbox build --lang {lang}" if lang else "grpo-code sandbox build"
    if engine.image_id(image) is None:
        raise SandboxError(
            f"sandbox image {image!r} not found",
            f"build it with `{build} --bootstrap` (offline) or `{build}`",
        )
    if engine.image_label(image, EXECUTOR_LABEL) != executor_hash():
        raise SandboxError(
            f"sandbox image {image!r} holds another version of the executor",
            f"rebuild it with `{build}` (add --bootstrap when offline)",
        )


# --------------------------------------------------------------------------- containers


@dataclass
class ContainerSpec:
    """What one sandbox container is created with: ``config`` goes to the API's
    ``create_container`` and ``host_config`` to ``create_host_config`` (the ``docker run``
    flag each setting stands for is noted beside it)."""

    config: dict[str, Any]
    host_config: dict[str, Any] = field(default_factory=dict)


def container_spec(
    image: str,
    name: str,
    memory_mb: int,
    pids_limit: int,
    tmpfs_mb: int,
    channel_dir: str | None = None,
    executor_args: tuple[str, ...] = (),
    cpu: int | None = None,
) -> ContainerSpec:
    """The settings of one sandbox container (every isolation setting is here); ``cpu``:
    the one CPU it runs on (``cpus.py``), or None for any."""
    # The container's memory must hold the executor with a job of up to MAX_JOB_BYTES (its
    # expected values, parsed), one test at its own limit and the tmpfs.
    container_bytes = (memory_mb + tmpfs_mb + 640) * 1024 * 1024
    host_config: dict[str, Any] = {
        "auto_remove": True,  # --rm
        "network_mode": "none",  # --network none
        "read_only": True,  # --read-only
        # --tmpfs: /tmp and /dev/shm (instead of the engine's own /dev/shm, whose inode
        # count is not bounded); nr_inodes bounds files and, with them, the xattrs a test can
        # hang on them (tmpfs charges xattrs to its inode space, not to size=).
        "tmpfs": {path: tmpfs_options(tmpfs_mb) for path in ("/tmp", "/dev/shm")},
        "mem_limit": container_bytes,  # --memory
        "memswap_limit": container_bytes,  # --memory-swap (= memory: no swap)
        "pids_limit": pids_limit,  # --pids-limit
        "cap_drop": ["ALL"],  # --cap-drop ALL
        "security_opt": ["no-new-privileges"],  # --security-opt no-new-privileges
        "log_config": LogConfig(type="none"),  # --log-driver none
        "ulimits": [Ulimit(name="core", soft=0, hard=0)],  # --ulimit core=0
        # --sysctl: System V IPC objects and POSIX message queues outlive the processes that
        # made them, so no OOM kill frees them: their total is kept small.
        "sysctls": ipc_sysctls(tmpfs_mb),
    }
    if channel_dir:  # -d -v DIR:/run/grpo-code:ro
        host_config["binds"] = {channel_dir: {"bind": CHANNEL_MOUNT, "mode": "ro"}}
    labels = {LABEL: "1", OWNER_LABEL: owner_tag()}
    if cpu is not None:
        host_config["cpuset_cpus"] = str(cpu)  # --cpuset-cpus
        labels[cpus.CPU_LABEL] = str(cpu)
    config: dict[str, Any] = {
        "image": image,
        "command": [
            "python3",
            "-I",
            EXECUTOR_PATH,
            "--workdir",
            "/tmp",
            "--scratch",
            "/dev/shm",
            *executor_args,
        ],
        "name": name,  # --name
        "labels": labels,  # --label
        "user": f"{sandbox_uid(name)}:{SANDBOX_UID}",  # --user: a uid of its own, the sandbox group
        "working_dir": "/tmp",  # --workdir
        "environment": ["HOME=/tmp", "TMPDIR=/tmp", "PYTHONDONTWRITEBYTECODE=1"],  # -e
        # -i (attached stdin, closed when the host's end closes) or -d
        "stdin_open": not channel_dir,
        "detach": bool(channel_dir),
    }
    return ContainerSpec(config, host_config)


TMPFS_INODES = 8192
"""Files (and directories) per tmpfs of a container. tmpfs charges a file's xattrs to its
inode space (``nr_inodes`` x 1 KiB), so this also bounds the xattrs a test can make to 8 MiB
per tmpfs; without it, ``user.*`` xattrs fill the container's memory whatever ``size=`` says."""


def tmpfs_options(tmpfs_mb: int) -> str:
    """Mount options of a container's tmpfs (``/tmp``, ``/dev/shm``)."""
    return f"rw,nosuid,nodev,noexec,size={tmpfs_mb}m,nr_inodes={TMPFS_INODES},mode=1777"


def ipc_sysctls(tmpfs_mb: int) -> dict[str, str]:
    """The container's IPC limits (its own IPC namespace). System V: shared memory in all at
    most ``tmpfs_mb`` MiB, 32 segments; 16 message queues of 16 KiB; 16 semaphore sets of at
    most 64 semaphores, 1024 in all (``kernel.sem`` is SEMMSL SEMMNS SEMOPM SEMMNI; the
    kernel's default lets one ``semget`` charge ~2 MiB, without bound over a job). POSIX
    message queues: 16 queues of at most 10 messages of 8 KiB."""
    return {"kernel.shmmax": str(tmpfs_mb << 20), "kernel.shmall": str((tmpfs_mb << 20) // 4096),
            "kernel.shmmni": "32", "kernel.msgmni": "16", "kernel.msgmnb": "16384",
            "kernel.sem": "64 1024 32 16",
            "fs.mqueue.queues_max": "16", "fs.mqueue.msg_max": "10", "fs.mqueue.msgsize_max": "8192"}


def create_container(spec: ContainerSpec) -> str:
    """Create (not start) a container from ``spec``; returns its id. Raises the SDK's errors."""
    api = engine.client().api
    created = api.create_container(**spec.config, host_config=api.create_host_config(**spec.host_config))
    return str(created["Id"])


class NeverConnected(WorkerLost):
    """the sandbox executor never connected to its unix socket"""


class DockerFactory:
    """Makes docker workers for the pool; removes stale containers once per process."""

    def __init__(
        self, image: str, memory_mb: int, pids_limit: int, tmpfs_mb: int, channel: str | None = None,
        pin_cpus: bool = True,
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
        self.pin_cpus = pin_cpus
        self.prefix = f"grpo-code-sbx-{os.getpid()}-{_SESSION}"

    def __call__(self, index: int) -> Worker:
        name = f"{self.prefix}-{next(_NAMES)}"
        cpu = cpus.claim(lambda: cpus.elsewhere(OWNER_LABEL, owner_tag())) if self.pin_cpus else None
        try:
            worker = self._start(name, cpu)
        except cpus.Refused:
            cpus.release(cpu)
            return self(index)  # unpinned from now on
        except BaseException:
            cpus.release(cpu)
            raise
        if cpu is not None:
            worker.when_gone(lambda: cpus.release(cpu))
        return worker

    def _start(self, name: str, cpu: int | None) -> Worker:
        try:
            if self.channel == "stdio":
                return self._attached_worker(name, cpu)
            try:
                return self._socket_worker(name, cpu)
            except NeverConnected:
                # The engine cannot see our socket directory (remote or sandboxed daemon):
                # fall back to the attached stdin/stdout channel for this pool.
                self.channel = "stdio"
                print(f"warning: {NeverConnected.__doc__}; using docker attach instead", file=sys.stderr)
                return self._start(f"{self.prefix}-{next(_NAMES)}", cpu)
        except SandboxError as exc:
            raise WorkerLost(str(exc)) from None
        except ENGINE_ERRORS as exc:
            if cpu is not None and cpus.refused(exc):
                raise cpus.Refused() from None
            raise WorkerLost(str(engine_error(exc, f"starting container {name}"))) from None
        except OSError as exc:
            raise WorkerLost(f"cannot start container {name}: {exc}") from None

    def _spec(self, name: str, cpu: int | None, channel_dir: str | None = None,
              args: tuple[str, ...] = ()) -> ContainerSpec:
        return container_spec(
            self.image, name, self.memory_mb, self.pids_limit, self.tmpfs_mb, channel_dir, args, cpu
        )

    def _socket_worker(self, name: str, cpu: int | None) -> Worker:
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
            spec = self._spec(name, cpu, channel_dir, ("--connect", f"{CHANNEL_MOUNT}/{sock_name}"))
            container_id = create_container(spec)
            engine.client().api.start(container_id)
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
                if _peer_is_container(candidate, container_id, sandbox_uid(name)):
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
            conn.close()  # end of input: the executor exits and auto-remove removes the container
            _remove_container(name)

        def destroy() -> None:
            _remove_container(name)
            conn.close()

        return Worker(name, fd, fd, close, destroy, start_timeout_s=30.0)

    def _attached_worker(self, name: str, cpu: int | None) -> Worker:
        """A worker whose channel is the container's stdin/stdout through the API's attach
        socket (like ``docker run -i``): attached before the start, so no output is missed."""
        api = engine.client().api
        try:
            container_id = create_container(self._spec(name, cpu))
            attached = api.attach_socket(
                container_id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )
            api.start(container_id)
        except BaseException:
            _remove_container(name)
            raise
        return _attach_worker(name, container_id, attached)


def _attach_worker(name: str, container_id: str, attached: Any) -> Worker:
    """Bridge an attach socket to a :class:`Worker`: stdout frames (the stream is
    multiplexed: 8-byte headers) are relayed to one end of a socket pair, the worker's
    writes to the container's stdin; stderr frames are kept for diagnostics."""
    from docker.utils.socket import STDERR, STDOUT, frames_iter

    raw = attached._sock if isinstance(attached, socket.SocketIO) else attached
    ours, theirs = socket.socketpair()
    stderr_tail = bytearray()
    ended = threading.Event()

    def relay_out() -> None:
        try:
            for stream, chunk in frames_iter(raw, tty=False):
                if stream == STDOUT:
                    theirs.sendall(chunk)
                elif stream == STDERR:
                    stderr_tail.extend(chunk)
                    del stderr_tail[:-4096]
        except (OSError, docker.errors.DockerException):
            pass
        finally:
            ended.set()
            with contextlib.suppress(OSError):
                theirs.shutdown(socket.SHUT_WR)

    def relay_in() -> None:
        try:
            while chunk := theirs.recv(1 << 20):
                raw.sendall(chunk)
        except OSError:
            pass
        finally:  # end of input: the container's stdin closes (stdin_once) and the executor exits
            with contextlib.suppress(OSError):
                raw.shutdown(socket.SHUT_WR)

    for target in (relay_out, relay_in):
        threading.Thread(target=target, name=f"attach-{name}", daemon=True).start()

    def diagnose() -> str:
        err = stderr_tail.decode("utf-8", "replace").strip()[-500:]
        state: dict[str, Any] = {}
        with contextlib.suppress(SandboxError, *ENGINE_ERRORS):
            state = engine.client(PROBE_TIMEOUT_S).api.inspect_container(container_id).get("State") or {}
        code = state.get("ExitCode") if state and not state.get("Running") else None
        return f"(exit status {code}; stderr: {err!r})" if code is not None or err else ""

    def finish() -> None:
        _remove_container(name)
        for s in (ours, theirs, raw):
            with contextlib.suppress(OSError):
                s.close()

    def close() -> None:
        with contextlib.suppress(OSError):
            ours.shutdown(socket.SHUT_WR)
        ended.wait(10)
        finish()

    fd = ours.fileno()
    worker = Worker(name, fd, fd, close, finish, diagnose, start_timeout_s=60.0)
    return worker


def _peer_is_container(conn: socket.socket, container_id: str, uid_expected: int) -> bool:
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
        return pid == 0 and uid == uid_expected


def _remove_container(
    name: str, patience_s: float = 10.0, sleep: Callable[[float], None] = time.sleep
) -> None:
    """Force-remove a container. A conflict (409: a removal already under way, e.g. its own
    auto-remove after its executor exited at end of input, which can leave it stuck in
    "Removal In Progress" until someone asks again) or a server error is retried for
    ``patience_s``; not found means done; no engine means nothing to do."""
    deadline = time.monotonic() + patience_s
    while True:
        try:
            engine.client().api.remove_container(name, force=True)
            return
        except docker.errors.NotFound:
            return
        except docker.errors.APIError as exc:
            retry = exc.status_code == 409 or (exc.status_code or 0) >= 500
            if not retry or time.monotonic() > deadline:
                return
        except (SandboxError, *ENGINE_ERRORS):
            return
        sleep(0.2)

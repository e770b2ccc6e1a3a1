"""The executor's main loop: the host's channel, the job loop, the harness's own hardening.

Protocol: JSON lines over a persistent channel (stdin/stdout, or with ``--connect PATH`` a
unix socket the host listens on). On start it writes ``{"ready": true, ...}``; then for
each ``{"id": ..., "job": {...}}`` line it writes ``{"id": ..., "result": {...}}`` (the
public result format, docs/sandbox.md), and for ``{"id": ..., "ping": true}`` it writes
``{"id": ..., "pong": true}``. A job the harness itself could not run is answered with
``{"id": ..., "error": ...}`` (the host retries it once, then reports an
``infra_error``). End of input ends it.

This process holds the jobs, so untrusted code never runs in a fork of it: Python
programs run in processes forked from the zygote (``zygote.py``), other languages exec
their runtime right after the fork (``native.py``).
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import signal
import sys
import time
import traceback

from . import calls, kept, native, pyjob, spawn, verdict
from .base import wipe
from .confine import PR_SET_DUMPABLE, landlock_abi, prctl
from .pychild import RECORD_OUTPUT_LIMIT
from .runners import RUNNERS
from .zygote import Zygote

PROTOCOL = 2
PR_SET_CHILD_SUBREAPER = 36
def harden() -> dict:
    """Keep test processes from reading this process's memory or fds, and adopt their orphans."""
    return {
        # Non-dumpable: a same-uid process cannot ptrace us or open /proc/<pid>/{mem,fd/*}.
        "nondumpable": prctl(PR_SET_DUMPABLE, 0),
        "subreaper": os.getpid() == 1 or prctl(PR_SET_CHILD_SUBREAPER, 1),
        # Landlock keeps tests from writing their oom_score_adj back down (confine.writable_only)
        "landlock": landlock_abi(),
    }


_IPC_RMID = 0


def _clear_ipc() -> None:
    """Remove the System V shared memory, semaphores and message queues a job made: they
    outlive processes, and would hold memory or pass data to the next job. Only as PID 1
    of a container (its own IPC namespace): on the local backend they are the host's."""
    if os.getpid() != 1:
        return
    libc = None
    for kind in ("shm", "sem", "msg"):
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) < 2 or not fields[1].isdigit():
                continue
            if libc is None:
                import ctypes

                libc = ctypes.CDLL(None, use_errno=True)
            ident = int(fields[1])
            if kind == "shm":
                libc.shmctl(ident, _IPC_RMID, None)
            elif kind == "sem":
                libc.semctl(ident, 0, _IPC_RMID)
            else:
                libc.msgctl(ident, _IPC_RMID, None)


_MEMORY_FILES = ("/sys/fs/cgroup/memory.current", "/sys/fs/cgroup/memory/memory.usage_in_bytes")
_MEMORY_BASE: list[int] = []
HELD_AFTER_JOB = 256 << 20
"""Memory the container may still hold after a job, beside the executor's own and above
what it held when the executor was ready, before the job's end waits for it (and, past a
second, retires the container)."""


def _container_memory() -> int | None:
    """This container's charged memory in bytes (cgroup v2 or v1) less this process's own
    resident memory (a large job part leaves the executor's heap grown, which is not what
    this looks for); None outside a container."""
    if os.getpid() != 1:
        return None
    for path in _MEMORY_FILES:
        try:
            with open(path, "rb") as f:
                charged = int(f.read())
            with open("/proc/self/statm", "rb") as f:
                resident = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            return charged - resident
        except (OSError, ValueError, IndexError):
            continue
    return None


def _memory_held_after_job(patience_s: float = 1.0) -> str | None:
    """Why this container should be replaced, if the job left memory charged to it. The
    job's files and IPC are gone by now, but memory a test parked where killing its
    processes does not free it (unix sockets left in flight in a cycle, which only the
    kernel's garbage collector frees, a little later) would count against the next job's
    tests. Wait for it up to ``patience_s``, then give up on this container."""
    now = _container_memory()
    if now is None or not _MEMORY_BASE:
        return None
    deadline = time.monotonic() + patience_s
    while now is not None and now > _MEMORY_BASE[0] + HELD_AFTER_JOB:
        if time.monotonic() > deadline:
            return f"memory still held after the job ({(now - _MEMORY_BASE[0]) >> 20} MiB over the start)"
        time.sleep(0.01)
        now = _container_memory()
    return None


UNCLEAN: list[str] = []
"""The directories the last job left not empty: the host then retires this executor."""


def run_job(job: dict, workdir: str, scratch: list[str], zygote: Zygote) -> dict:
    """Run every test of a job in the (wiped) work directory and build the result.
    Raises :class:`verdict.HarnessFailure` when the sandbox could not run a test."""
    start = time.monotonic()
    language = job.get("language", "python")
    runner = RUNNERS.get(language)
    if runner is None:
        raise ValueError(f"no runner for language {language!r} in this sandbox (known: {', '.join(RUNNERS)})")
    kept.start(job["limits"])
    if job.get("record"):
        # Record the reference's answers (the host fills in expected values from them).
        cap = int(job["limits"].get("record_output_bytes", RECORD_OUTPUT_LIMIT))
        job = {**job, "tests": [{**t, "_record": True, "_record_cap": cap} for t in job["tests"]]}
    os.chdir(workdir)
    tests = []
    try:
        if runner.in_process:
            tests = calls.run_tests(job, zygote)
        else:
            if any(t.get("checker") or t.get("interactor") for t in job["tests"]):
                pyjob.JUDGE.get()  # started before the tests, so that their cleanup spares it
            native.set_spare(pyjob.spared(zygote))
            tests = native.run_with_runner(runner, job)
    finally:
        os.chdir("/")
        # POSIX message queues too, where this is a container's own /dev/mqueue (PID 1).
        queues = ["/dev/mqueue"] if os.getpid() == 1 and os.path.isdir("/dev/mqueue") else []
        UNCLEAN[:] = [path for path in [workdir, *scratch, *queues] if not wipe(path)]
        if spawn.LEFTOVER:
            UNCLEAN.append(f"processes {', '.join(map(str, spawn.LEFTOVER[:5]))}")
        _clear_ipc()
        pyjob.JUDGE.recycle_if_grown()
        held = _memory_held_after_job()
        if held:
            UNCLEAN.append(held)
    passed = sum(1 for t in tests if t["verdict"] == "pass")
    out = {
        "status": "pass" if tests and passed == len(tests) else "fail",
        "passed": passed,
        "total": len(tests),
        "tests": tests,
        "duration_ms": round((time.monotonic() - start) * 1000, 3),
        "error": None,
    }
    if passed < len(tests) and any(t["verdict"] == "undecided" for t in tests):
        out["undecided"] = True  # a held expected value is needed: the host sends the job again with it
    return out


def _connect(path: str, timeout_s: float = 20.0) -> int:
    """Connect to the host's unix socket (bind-mounted into the container); returns the fd."""
    import socket

    deadline = time.monotonic() + timeout_s
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
            return sock.detach()
        except OSError:
            sock.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def main(argv: list[str], entry: str) -> int:
    workdir = "/tmp"
    scratch: list[str] = []
    remove_workdir = False
    connect = None
    args = list(argv)
    while args:
        flag = args.pop(0)
        if flag == "--workdir":
            workdir = args.pop(0)
        elif flag == "--scratch":
            scratch.append(args.pop(0))
        elif flag == "--remove-workdir":
            remove_workdir = True
        elif flag == "--connect":
            connect = args.pop(0)
    if connect:
        chan_in = chan_out = _connect(connect)
    else:
        chan_in = os.dup(0)
        chan_out = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    hardening = harden()
    os.makedirs(workdir, exist_ok=True)
    for fd in (chan_in, chan_out):
        os.set_inheritable(fd, False)
    # The zygote starts before any job is read, from a fresh interpreter.
    zygote = Zygote(entry, workdir)
    zygote.start()
    # Objects alive now are never collected: moving them out of the GC's sight keeps a
    # child's collections from touching (and copying) the parent's pages.
    gc.collect()
    gc.freeze()
    start_memory = _container_memory()
    if start_memory is not None:
        _MEMORY_BASE.append(start_memory)
    reader = os.fdopen(chan_in, "rb", buffering=1 << 16)

    def send(msg: dict) -> None:
        data = memoryview(kept.encode_line(msg))
        while data:
            data = data[os.write(chan_out, data):]  # a view: no copy of the rest per write

    send({"ready": True, "protocol": PROTOCOL, "python": sys.version.split()[0], "pid": os.getpid(), **hardening})
    for line in reader:
        if not line.strip():
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            send({"id": None, "error": "unreadable message"})
            continue
        mid = msg.get("id")
        if msg.get("ping"):
            send({"id": mid, "pong": True})
            continue
        try:
            reply = {"id": mid, "result": run_job(msg["job"], workdir, scratch, zygote)}
            if UNCLEAN:  # the verdicts stand; the next job must not find what this one left
                reply["retire"] = f"could not clear {', '.join(UNCLEAN)}"
            send(reply)
        except verdict.HarnessFailure as exc:
            send({"id": mid, "error": f"harness failure: {exc}"})
        except Exception:
            send({"id": mid, "error": "executor failure: " + traceback.format_exc()[-1500:]})
    zygote.stop()
    if remove_workdir:
        wipe(workdir)
        shutil.rmtree(workdir, ignore_errors=True)
    return 0

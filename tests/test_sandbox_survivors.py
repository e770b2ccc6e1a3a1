"""A job must leave nothing behind for the next one in the same container: no process (made
the zygote's child with ``CLONE_PARENT``, or filling the pids limit), no files (nested deeper
than a path can name). One worker, so every job here runs in the same container as the one
before it. Docker only: these programs act on every process they can reach."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from grpo_code.config import SandboxConfig
from grpo_code.sandbox import Sandbox
from grpo_code.sandbox.types import CallTest, Job, Limits, Status

pytestmark = pytest.mark.docker

CLONE = """
import ctypes, os, signal, time
libc = ctypes.CDLL(None, use_errno=True)

def clone_parent():
    # clone(CLONE_PARENT | SIGCHLD): the new process would be the zygote's child
    return libc.syscall(56 if os.uname().machine == "x86_64" else 220, 0x8000 | 17, 0, 0, 0, 0)
"""

# Made the zygote's child, a process would kill every new test process of the container.
KILLER = CLONE + """
r, w = os.pipe()
pid = clone_parent()
if pid == 0:
    os.setsid()
    zygote = os.getppid()
    seen = {int(p) for p in os.listdir("/proc") if p.isdigit()}
    os.write(w, b"k")
    while True:
        for p in os.listdir("/proc"):
            if p.isdigit() and int(p) not in seen:
                seen.add(int(p))
                try:
                    if open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[1] == str(zygote):
                        os.kill(int(p), signal.SIGKILL)
                except OSError:
                    pass
        time.sleep(0.001)
REFUSED = ctypes.get_errno() if pid == -1 else None

def add(a, b):
    return ["refused", REFUSED]
"""

# Made the zygote's child, a process would fill the pids limit with sleepers.
FILLER = CLONE + """
pid = clone_parent()
if pid == 0:
    os.setsid()
    while True:
        if clone_parent() == 0:
            time.sleep(3600)
        time.sleep(0.0005)

def add(a, b):
    return ["refused", ctypes.get_errno() if pid == -1 else None]
"""

# Directories nested past PATH_MAX, then the tmpfs filled below them.
DEEP = """
import os
for _ in range(2100):
    os.mkdir("a")
    os.chdir("a")
for f in range(8):
    try:
        with open(f"f{f}", "wb") as out:
            for _ in range(15):
                out.write(b"x" * (1 << 20))
    except OSError:
        break

def add(a, b):
    return a + b
"""

PROBE = """
import os

def add(a, b):
    st = os.statvfs(".")
    return [sorted(os.listdir(".")), st.f_bavail * st.f_frsize > 32 << 20, a + b]
"""

RIGHT = "def add(a, b):\n    return a + b\n"


def job(program: str, expected: object) -> Job:
    return Job(program, (CallTest(fn="add", args=(1, 2), expected=expected),), limits=Limits(timeout_s=3))


@pytest.fixture(scope="module")
def sandbox(docker_ready: None) -> Iterator[Sandbox]:
    with Sandbox(SandboxConfig(backend="docker", workers=1)) as sb:
        yield sb


def run(sandbox: Sandbox, j: Job) -> object:
    return sandbox.submit(j).result()


@pytest.mark.parametrize("attacker", [KILLER, FILLER], ids=["killer", "pid-filler"])
def test_a_process_cannot_become_the_zygotes_child_and_outlive_its_test(sandbox: Sandbox, attacker: str) -> None:
    refused = run(sandbox, job(attacker, ["refused", 1]))  # clone(CLONE_PARENT) fails with EPERM
    assert refused.status is Status.PASS, refused.tests[0].why
    for _ in range(2):  # the next jobs in the same container run undisturbed
        after = run(sandbox, job(RIGHT, 3))
        assert after.status is Status.PASS, after.tests[0].why


def test_files_nested_past_path_max_are_wiped_before_the_next_job(sandbox: Sandbox) -> None:
    deep = run(sandbox, job(DEEP, 3))
    assert deep.status is Status.PASS, deep.tests[0].why
    probe = run(sandbox, job(PROBE, [[], True, 3]))  # an empty work directory with its space back
    assert probe.status is Status.PASS, probe.tests[0].why

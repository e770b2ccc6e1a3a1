"""A job must leave nothing behind for the next one in the same container: no process (made
the zygote's child with ``CLONE_PARENT``, or filling the pids limit), no files (nested deeper
than a path can name). One worker, so every job here runs in the same container as the one
before it. Docker only: these programs act on every process they can reach."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from grpo_code.config import SandboxConfig
from grpo_code.sandbox import Sandbox
from grpo_code.sandbox.types import CallTest, IoTest, Job, Limits, Status

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


# A C++ program's process chain, 30 deep, each level outside the test's process group, the
# deepest forking again whenever its parent dies (so a cleanup that kills level by level
# never ends it); after 2 s it kills every process not of its own group.
CHAIN_CPP = r"""#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <csignal>
#include <ctime>
#include <unistd.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <iostream>
#define K 30
#ifndef K
#define K 30
#endif
#define ATTACK 1
#ifndef ATTACK
#define ATTACK 1
#endif
static int parent_of(int pid, int *pgid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  int fd = open(path, O_RDONLY);
  if (fd < 0) return -1;
  int n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = 0;
  char *p = strrchr(buf, ')');
  if (!p) return -1;
  char st; int pp, pg;
  if (sscanf(p + 2, "%c %d %d", &st, &pp, &pg) != 3) return -1;
  if (pgid) *pgid = pg;
  return pp;
}
static int depth() {
  int p = getpid(), d = 0;
  while (p != 1 && d < 200) { p = parent_of(p, nullptr); if (p < 0) return 999; d++; }
  return d;
}
static void attack(int mypg) {
  DIR *dir = opendir("/proc");
  if (!dir) return;
  struct dirent *e;
  while ((e = readdir(dir))) {
    int q = atoi(e->d_name);
    if (q <= 1) continue;
    int pg;
    if (parent_of(q, &pg) < 0) continue;
    if (pg != mypg) kill(q, SIGKILL);
  }
  closedir(dir);
}
static void member(struct timespec born) {
  int mypg = getpgid(0);
  for (;;) {
    if (depth() < K) {
      pid_t c = fork();
      if (c == 0) continue;          // the new leaf
      if (c > 0) { int st; while (waitpid(c, &st, WNOHANG) == 0) {
          struct timespec now; clock_gettime(CLOCK_MONOTONIC, &now);
          if (ATTACK && now.tv_sec - born.tv_sec >= 2) attack(mypg);
          usleep(2000); }
        continue; }
    }
    struct timespec now; clock_gettime(CLOCK_MONOTONIC, &now);
    if (ATTACK && now.tv_sec - born.tv_sec >= 2) attack(mypg);
  }
}
int main() {
  if (fork() == 0) {
    setsid();
    int fd = open("/dev/null", O_RDWR);
    dup2(fd, 0); dup2(fd, 1); dup2(fd, 2);
    for (int i = 3; i < 64; i++) if (i != fd) close(i);
    struct timespec born; clock_gettime(CLOCK_MONOTONIC, &born);
    member(born);
    _exit(0);
  }
  usleep(200000);
  long x; std::cin >> x; std::cout << 2 * x << "\n";
  return 0;
}
"""

ADD_CPP = "#include <iostream>\n#include <unistd.h>\nint main(){long a,b; std::cin>>a>>b; usleep(300000); std::cout<<a+b<<\"\\n\";}\n"


def test_a_chain_of_processes_is_stopped_whole_and_leaves_the_next_jobs_alone(sandbox: Sandbox) -> None:
    io = (IoTest(stdin="21\n", stdout="42\n"),)
    chain = run(sandbox, Job(CHAIN_CPP, io, language="cpp", limits=Limits(timeout_s=3)))
    assert chain.status is Status.PASS, chain.tests[0].why
    for _ in range(3):  # each of these runs for over 2 s, when the chain would start killing
        add = run(sandbox, Job(ADD_CPP, tuple(IoTest(stdin=f"{i} 1\n", stdout=f"{i + 1}\n") for i in range(4)),
                               language="cpp"))
        assert add.status is Status.PASS, [t.why for t in add.tests]


def test_posix_message_queues_do_not_carry_over(sandbox: Sandbox) -> None:
    make = "import os\n\ndef add(a, b):\n    os.close(os.open('/dev/mqueue/left', os.O_CREAT | os.O_RDWR, 0o600))\n    return a + b\n"
    assert run(sandbox, job(make, 3)).status is Status.PASS
    look = "import os\n\ndef add(a, b):\n    return os.listdir('/dev/mqueue')\n"
    seen = run(sandbox, job(look, []))
    assert seen.status is Status.PASS, seen.tests[0].why

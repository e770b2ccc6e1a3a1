"""Kernel objects a test can make outside its address space (System V semaphores, xattrs on
the container's tmpfs, POSIX message queues) are bounded per container, and every test
process, Python and native, is the OOM killer's first choice: a program that fills memory
where ``RLIMIT_AS`` does not look gets its own verdict, never an executor death (an
``infra_error``, which the reward masks). After each attack a right program passes in the
same container. Docker only: the bounds are the container's sysctls and mount options."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from grpo_code.config import SandboxConfig
from grpo_code.sandbox import Sandbox
from grpo_code.sandbox.types import IoTest, Job, Limits, Status

pytestmark = pytest.mark.docker

# semget until the kernel refuses, starting at the kernel default's largest set (32000
# semaphores, ~2 MiB charged to the container per call) and halving on EINVAL.
SEMAPHORES_CPP = r"""#include <cstdio>
#include <cerrno>
#include <sys/ipc.h>
#include <sys/sem.h>
int main() {
  int n = 32000, made = 0;
  for (int i = 0; i < 1000000 && n > 0; i++) {
    if (semget(IPC_PRIVATE, n, IPC_CREAT | 0600) >= 0) { made++; continue; }
    if (errno == EINVAL) { n /= 2; continue; }
    break;
  }
  printf("made %d %d\n", made, n);
}
"""

SEMAPHORES_PY = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
n, made = 32000, 0
for _ in range(1000000):
    if n == 0:
        break
    if libc.semget(0, n, 0o1600) >= 0:
        made += 1
    elif ctypes.get_errno() == 22:
        n //= 2
    else:
        break
print("made", made, n)
"""

# 64 KiB user xattrs on files in /dev/shm and /tmp until the kernel refuses.
XATTRS_CPP = r"""#include <cstdio>
#include <cstring>
#include <string>
#include <fcntl.h>
#include <unistd.h>
#include <sys/xattr.h>
int main() {
  static char value[65536];
  memset(value, 'x', sizeof value);
  long made = 0;
  for (const char *dir : {"/dev/shm", "/tmp"}) {
    for (int f = 0; f < 100000; f++) {
      std::string path = std::string(dir) + "/x" + std::to_string(f);
      int fd = open(path.c_str(), O_CREAT | O_WRONLY, 0600);
      if (fd < 0) break;
      close(fd);
      int ok = 0;
      for (int a = 0; a < 64; a++) {
        std::string name = "user.a" + std::to_string(a);
        if (setxattr(path.c_str(), name.c_str(), value, sizeof value, 0) != 0) break;
        made++; ok++;
      }
      if (ok == 0) break;
    }
  }
  printf("made %ld\n", made);
}
"""

XATTRS_PY = """
import os
made = 0
value = b"x" * 65536
for root in ("/dev/shm", "/tmp"):
    for f in range(100000):
        path = f"{root}/x{f}"
        try:
            open(path, "w").close()
        except OSError:
            break
        ok = 0
        for a in range(64):
            try:
                os.setxattr(path, f"user.a{a}", value)
            except OSError:
                break
            made += 1
            ok += 1
        if not ok:
            break
print("made", made)
"""

OOM_SCORE = {
    "python": "print(open('/proc/self/oom_score_adj').read().strip())\n",
    "javascript": "console.log(require('fs').readFileSync('/proc/self/oom_score_adj', 'utf8').trim());\n",
    "cpp": "#include <fstream>\n#include <iostream>\n#include <string>\nint main() {\n"
           "  std::ifstream f(\"/proc/self/oom_score_adj\"); std::string s; f >> s; std::cout << s << std::endl;\n}\n",
}

# Writes its oom_score_adj back down (an unprivileged process may lower it to its floor,
# 0), then prints what it is.
LOWER_OOM_SCORE = {
    "python": "try:\n    open('/proc/self/oom_score_adj', 'w').write('0')\nexcept OSError:\n    pass\n" + OOM_SCORE["python"],
    "javascript": "try { require('fs').writeFileSync('/proc/self/oom_score_adj', '0'); } catch (e) {}\n"
                  + OOM_SCORE["javascript"],
    "cpp": "#include <fcntl.h>\n#include <unistd.h>\n" + OOM_SCORE["cpp"].replace(
        "int main() {\n", "int main() {\n  { int fd = open(\"/proc/self/oom_score_adj\", O_WRONLY);"
                           " if (fd >= 0) { (void)!write(fd, \"0\", 1); close(fd); } }\n"),
}

# Then four processes hold 55 memory files of 16 MiB each, written, never mapped: the
# container fills while their resident memory stays small (the red team's attack: with
# the score lowered, the OOM killer took the executor, an infra_error).
HOLD_MEMORY = {
    "python": LOWER_OOM_SCORE["python"] + """import os
buf = b'\\x01' * (1 << 20)
def hold(n):
    for _ in range(n):
        fd = os.memfd_create('x')
        try:
            for _ in range(16):
                os.write(fd, buf)
        except OSError:
            return
kids = []
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        hold(55)
        os.pause()
    kids.append(pid)
hold(55)
for kid in kids:
    os.waitpid(kid, 0)
print('done')
""",
    "cpp": r"""#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>
static char buf[1 << 20];
static void hold(int n) {
  for (int i = 0; i < n; ++i) {
    int fd = memfd_create("x", 0);
    if (fd < 0) return;
    for (int k = 0; k < 16; ++k) if (write(fd, buf, sizeof buf) != (long)sizeof buf) return;
  }
}
int main() {
  memset(buf, 1, sizeof buf);
  { int fd = open("/proc/self/oom_score_adj", O_WRONLY); if (fd >= 0) { (void)!write(fd, "0", 1); close(fd); } }
  for (int c = 0; c < 3; ++c) if (fork() == 0) { hold(55); pause(); _exit(0); }
  hold(55);
  while (wait(nullptr) > 0) {}
  printf("done\n");
}
""",
}

RIGHT = {
    "python": "print(sum(map(int, input().split())))\n",
    "javascript": "const [a, b] = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(Number);\n"
                  "console.log(a + b);\n",
    "cpp": "#include <iostream>\nint main() { long a, b; std::cin >> a >> b; std::cout << a + b << std::endl; }\n",
}


@pytest.fixture(scope="module")
def sandbox(docker_ready: None) -> Iterator[Sandbox]:
    with Sandbox(SandboxConfig(backend="docker", workers=1)) as sb:  # a pool per language, one container each
        yield sb


def run(sandbox: Sandbox, language: str, program: str, tests: tuple, timeout_s: float = 10) -> object:
    return sandbox.submit(Job(program, tests, language=language, limits=Limits(timeout_s=timeout_s))).result()


def right_program_passes(sandbox: Sandbox, language: str) -> None:
    after = run(sandbox, language, RIGHT[language], (IoTest(stdin="1 2\n", stdout="3\n"),))
    assert after.status is Status.PASS, after.tests[0].why


@pytest.mark.parametrize("language", ["python", "javascript", "cpp"])
def test_every_test_process_is_the_oom_killers_first_choice(sandbox: Sandbox, language: str) -> None:
    result = run(sandbox, language, OOM_SCORE[language], (IoTest(stdin="", stdout="1000\n"),))
    assert result.status is Status.PASS, (result.tests[0].why, result.tests[0].stdout)


@pytest.mark.parametrize(("language", "program"), [("cpp", SEMAPHORES_CPP), ("python", SEMAPHORES_PY)],
                         ids=["cpp", "python"])
def test_semaphores_are_bounded_per_container(sandbox: Sandbox, language: str, program: str) -> None:
    # Three tests: the sets of one stay until the job ends, the next ones find the bound full.
    tests = tuple(IoTest(stdin="", stdout="solved\n") for _ in range(3))
    result = run(sandbox, language, program, tests)
    assert result.status is Status.FAIL, result.error
    for test in result.tests:
        assert test.verdict.value in ("fail", "memory"), test.why
    made, size = map(int, result.tests[0].stdout.split()[1:3])
    assert made == 16 and size <= 64, result.tests[0].stdout  # kernel.sem: 16 sets of at most 64
    right_program_passes(sandbox, language)


@pytest.mark.parametrize(("language", "program"), [("cpp", XATTRS_CPP), ("python", XATTRS_PY)],
                         ids=["cpp", "python"])
def test_xattrs_on_the_tmpfs_are_bounded(sandbox: Sandbox, language: str, program: str) -> None:
    tests = tuple(IoTest(stdin="", stdout="solved\n") for _ in range(2))
    result = run(sandbox, language, program, tests, timeout_s=20)
    assert result.status is Status.FAIL, result.error
    for test in result.tests:
        assert test.verdict.value in ("fail", "memory"), test.why
    made = int(result.tests[0].stdout.split()[1])
    # nr_inodes=8192 per tmpfs: 1 KiB of xattr space an inode, two tmpfs, 64 KiB values
    assert 0 < made <= 2 * 8192 // 64, result.tests[0].stdout
    right_program_passes(sandbox, language)


@pytest.mark.parametrize("language", ["python", "javascript", "cpp"])
def test_a_test_cannot_write_its_oom_score_back_down(sandbox: Sandbox, language: str) -> None:
    result = run(sandbox, language, LOWER_OOM_SCORE[language], (IoTest(stdin="", stdout="1000\n"),))
    assert result.status is Status.PASS, (result.tests[0].why, result.tests[0].stdout)


@pytest.mark.parametrize("language", ["python", "cpp"])
def test_memory_held_outside_the_address_space_is_the_programs_verdict(sandbox: Sandbox, language: str) -> None:
    tests = (IoTest(stdin="", stdout="done\n"), IoTest(stdin="", stdout="x\n"))
    result = run(sandbox, language, HOLD_MEMORY[language], tests)
    assert result.status is Status.FAIL, result.error  # never an infra_error
    # memory files are refused now (the filter), so the attack ends as the program's own
    # error or timeout; with them it was the OOM killer's choice of the test, never the executor
    assert result.tests[0].verdict.value in ("memory", "fail", "runtime_error", "timeout"), result.tests[0].why
    right_program_passes(sandbox, language)


# What a test could leave where killing its processes does not free it (memory files in
# flight over a unix socket), or outside the container's charge (loopback TCP buffers on a
# cgroup v1 host), or reach around the filter with (io_uring): refused.
REFUSED = {
    "python": """import ctypes, os, socket
out = []
for name, make in [("memfd", lambda: os.memfd_create("x")), ("inet", lambda: socket.socket(socket.AF_INET)),
                   ("inet6", lambda: socket.socket(socket.AF_INET6))]:
    try:
        make()
        out.append(name + " made")
    except OSError:
        out.append(name + " refused")
ring = ctypes.CDLL(None, use_errno=True).syscall(425, 8, None)
out.append("io_uring " + ("refused" if ring == -1 else "made"))
socket.socketpair()  # a unix socket pair stays (asyncio, multiprocessing use them)
print(" ".join(out))
""",
    "cpp": r"""#include <cstdio>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
int main() {
  printf("memfd %s inet %s inet6 %s io_uring %s\n",
         memfd_create("x", 0) < 0 ? "refused" : "made", socket(AF_INET, SOCK_STREAM, 0) < 0 ? "refused" : "made",
         socket(AF_INET6, SOCK_STREAM, 0) < 0 ? "refused" : "made", syscall(425, 8, nullptr) < 0 ? "refused" : "made");
}
""",
    "javascript": "const net = require('net');\nconst s = net.createServer();\n"
                  "s.on('error', () => console.log('inet refused'));\ns.listen(0, '127.0.0.1', () => {\n"
                  "  console.log('inet made'); s.close(); });\n",
}
REFUSED_OUT = {"python": "memfd refused inet refused inet6 refused io_uring refused\n",
               "cpp": "memfd refused inet refused inet6 refused io_uring refused\n",
               "javascript": "inet refused\n"}


@pytest.mark.parametrize("language", ["python", "cpp", "javascript"])
def test_memory_files_inet_sockets_and_io_uring_are_refused(sandbox: Sandbox, language: str) -> None:
    result = run(sandbox, language, REFUSED[language], (IoTest(stdin="", stdout=REFUSED_OUT[language]),))
    assert result.status is Status.PASS, (result.tests[0].why, result.tests[0].stdout)


def test_the_memory_a_job_leaves_behind_retires_its_container(monkeypatch) -> None:
    from grpo_code.sandbox.executor import main as executor

    base = 100 << 20
    monkeypatch.setattr(executor, "_MEMORY_BASE", [base])
    readings = iter([base + (500 << 20)] * 5 + [base + (10 << 20)])
    monkeypatch.setattr(executor, "_container_memory", lambda: next(readings))
    assert executor._memory_held_after_job(patience_s=1.0) is None  # freed a little later (the unix GC)
    monkeypatch.setattr(executor, "_container_memory", lambda: base + (500 << 20))
    assert "500 MiB" in executor._memory_held_after_job(patience_s=0.05)
    monkeypatch.setattr(executor, "_container_memory", lambda: None)  # not a container
    assert executor._memory_held_after_job() is None

"""Programs get the verdict ``python3`` would give them at exit: output written on the way
out counts (``atexit`` callbacks, ``__del__``, a buffered file never flushed), a non-daemon
thread that outlives the module body is waited for (``threading.Thread(target=main).start()`` with no
``join()``), and the time a thread waits for a CPU is not charged, on a loaded machine as
on an idle one (the main thread waiting in ``join()`` does not wait for a CPU; the thread
doing the work does). Docker: the load is CPU-bound containers beside the sandbox's."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from grpo_code.config import SandboxConfig
from grpo_code.sandbox import Sandbox, docker_backend, engine
from grpo_code.sandbox.types import IoTest, Job, Limits, Status

pytestmark = pytest.mark.docker

SUM = "a, b = map(int, input().split())\nprint(a + b)\n"

THREADED = {
    # the competitive-programming idiom: a deeper stack in a thread, never joined
    "no join": "import sys, threading\nsys.setrecursionlimit(10 ** 6)\nthreading.stack_size(1 << 26)\n"
               "def main():\n" + "".join(f"    {line}\n" for line in SUM.splitlines()) +
               "threading.Thread(target=main).start()\n",
    # sys.exit(0) from the main thread: the interpreter still waits for the thread
    "exit while a thread works": "import sys, threading, time\ndef main():\n    time.sleep(0.2)\n" +
                                 "".join(f"    {line}\n" for line in SUM.splitlines()) +
                                 "threading.Thread(target=main).start()\nsys.exit(0)\n",
    # an executor left open: its workers go at exit, as under python3
    "thread pool not shut down": "from concurrent.futures import ThreadPoolExecutor\npool = ThreadPoolExecutor(2)\n"
                                 "print(pool.submit(lambda: sum(map(int, input().split()))).result())\n",
}

EXIT_IDIOMS = {
    # a fast-output template: the answer is written by an atexit callback
    "atexit writes the buffer": "import atexit, io, sys\nbuf = io.StringIO()\nsys.stdout = buf\n"
                                "atexit.register(lambda: sys.__stdout__.write(buf.getvalue()))\n" + SUM,
    "a buffered file on fd 1 never flushed": "import os\nout = open(1, 'w', closefd=False, buffering=1 << 20)\n"
                                             "a, b = map(int, input().split())\nout.write(f'{a + b}\\n')\n",
    "a buffered file kept outside the program's globals": "import sys\nsys.keep = open(1, 'w', closefd=False, "
                                                          "buffering=1 << 20)\na, b = map(int, input().split())\n"
                                                          "sys.keep.write(f'{a + b}\\n')\n",
    "a new sys.stdout never flushed": "import sys\nsys.stdout = open(sys.stdout.fileno(), 'w', buffering=1 << 16, "
                                      "closefd=False)\n" + SUM,
}
DEL_AT_EXIT = "class Bye:\n    def __del__(self):\n        print('bye')\nbye = Bye()\n" + SUM


# About 1 s of CPU in a worker thread while the main thread waits in join(); under a 2 s
# limit it passes on an idle machine, and must on a loaded one.
WORKER = """import threading, time
def work():
    t = time.process_time()
    while time.process_time() - t < 1.0:
        pass
    a, b = map(int, input().split())
    print(a + b)
worker = threading.Thread(target=work)
worker.start()
worker.join()
"""


@pytest.fixture(scope="module")
def sandbox(docker_ready: None) -> Iterator[Sandbox]:
    with Sandbox(SandboxConfig(backend="docker", workers=1)) as sb:
        yield sb


def run(sandbox: Sandbox, program: str, timeout_s: float = 2.0):
    return sandbox.submit(Job(program, (IoTest(stdin="1 2\n", stdout="3\n"),), limits=Limits(timeout_s=timeout_s))).result()


@pytest.mark.parametrize("name", sorted(THREADED))
def test_a_thread_that_outlives_the_module_body_is_waited_for(sandbox: Sandbox, name: str) -> None:
    result = run(sandbox, THREADED[name])
    assert result.status is Status.PASS, result.tests[0].why


@pytest.mark.parametrize("name", sorted(EXIT_IDIOMS))
def test_output_written_on_the_way_out_counts(sandbox: Sandbox, name: str) -> None:
    result = run(sandbox, EXIT_IDIOMS[name])
    assert result.status is Status.PASS, (result.tests[0].why, result.tests[0].stdout)


def test_a_del_that_prints_at_exit_prints(sandbox: Sandbox) -> None:
    result = sandbox.submit(Job(DEL_AT_EXIT, (IoTest(stdin="1 2\n", stdout="3\nbye\n"),))).result()
    assert result.status is Status.PASS, (result.tests[0].why, result.tests[0].stdout)


def test_a_thread_that_never_ends_is_a_timeout(sandbox: Sandbox) -> None:
    hang = "import threading\nthreading.Thread(target=threading.Event().wait).start()\nprint(3)\n"
    result = run(sandbox, hang, timeout_s=1.0)
    assert result.tests[0].verdict.value == "timeout", result.tests[0].why


@pytest.fixture
def busy_containers(docker_ready: None) -> Iterator[None]:
    """Three CPU-bound containers a core: the sandbox's test gets about a quarter of one."""
    api = engine.client().api
    image = docker_backend.DEFAULT_IMAGES["python"]
    ids = []
    try:
        for _ in range(3 * (os.cpu_count() or 1)):
            created = api.create_container(
                image, command=["python3", "-c", "while True: pass"], labels={"grpo-code.test-load": "1"},
                host_config=api.create_host_config(network_mode="none", auto_remove=True, cap_drop=["ALL"]))
            ids.append(created["Id"])
            api.start(created["Id"])
        yield
    finally:
        for cid in ids:
            try:
                api.remove_container(cid, force=True)
            except Exception:  # already gone (auto-remove)
                pass


def test_a_worker_threads_wait_for_a_cpu_is_not_charged(sandbox: Sandbox, busy_containers: None) -> None:
    result = run(sandbox, WORKER)
    test = result.tests[0]
    assert result.status is Status.PASS, (test.why, test.duration_ms)
    # the load was real: the test took longer on the clock than its limit
    assert test.duration_ms > 2000, test.duration_ms

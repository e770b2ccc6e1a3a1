"""The docker backend against a real engine: isolation, limits, reward hacks, recovery, cleanup.

Needs a Docker engine and the image from `grpo-code sandbox build --bootstrap`; skipped
with that reason otherwise, and failed instead under CI=true.
"""

from __future__ import annotations

import glob
import inspect
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest
import sandbox_cases as cases

from conftest import need, need_image
from grpo_code.config import SandboxConfig
from grpo_code.sandbox import (
    CallTest,
    Job,
    Sandbox,
    ScriptTest,
    Status,
    Verdict,
    cpus,
    docker_backend,
    engine,
)
from grpo_code.sandbox.bench import SHARED_HUMANEVAL, default_data, load_humaneval
from grpo_code.sandbox.pool import WorkerPool

pytestmark = pytest.mark.docker
IMAGE = docker_backend.DEFAULT_IMAGES["python"]


@pytest.fixture(scope="module")
def ready(docker_ready) -> None:
    need_image("python")


@pytest.fixture(scope="module")
def sandbox(ready):
    sb = Sandbox(SandboxConfig(backend="docker", workers=2, timeout_s=5.0, memory_mb=256))
    yield sb
    sb.close()


def one_worker(**overrides) -> Sandbox:
    """A sandbox with a single container, so consecutive jobs share it."""
    return Sandbox(SandboxConfig(**{"backend": "docker", "workers": 1, "memory_mb": 256, **overrides}))


def our_containers() -> list[tuple[str, str]]:
    return docker_backend.list_containers(all_owners=False)


# --------------------------------------------------------------------------- verdicts


def test_mixed_script_io_call_verdicts(sandbox):
    [result] = sandbox.run([cases.MIXED])
    cases.check_mixed(result)
    assert sandbox.backend == "docker"


def test_each_test_has_its_own_verdict(sandbox):
    [result] = sandbox.run([cases.INDEPENDENT])
    assert [t.verdict.value for t in result.tests] == cases.INDEPENDENT_VERDICTS, result


@pytest.mark.parametrize("name", sorted(cases.HACKS))
def test_reward_hacks_and_runaways_never_pass(sandbox, name):
    cases.check_hack(sandbox, name)


def test_huge_stdout_is_truncated_without_hanging(sandbox):
    start = time.monotonic()
    [result] = sandbox.run([cases.HUGE_STDOUT])
    assert time.monotonic() - start < 3.0
    out = result.tests[0].stdout
    assert result.tests[0].verdict is Verdict.PASS
    assert len(out) < sandbox.config.max_output_kb * 1024 + 100 and "truncated" in out


def test_humaneval_references_pass_and_mismatched_ones_fail(ready):
    need(default_data() is not None, f"HumanEval data not found at {SHARED_HUMANEVAL}", required_in_ci=False)
    good, bad = load_humaneval(), load_humaneval(mismatched=True)
    assert len(good) == len(bad) == 164
    cores = os.cpu_count() or 1
    with Sandbox(SandboxConfig(backend="docker", workers=2 * cores)) as sb:  # 2x oversubscribed
        results = sb.run([s.job() for s in good + bad])
    wrong = [s.task_id for s, r in zip(good + bad, results) if (r.status is Status.PASS) != s.should_pass]
    assert not wrong, wrong
    assert not [r for r in results if r.status is Status.INFRA_ERROR]


# --------------------------------------------------------------------------- isolation


def test_fork_bomb_is_contained_and_the_pool_serves_the_next_job(sandbox):
    bomb = cases.script(
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    )
    start = time.monotonic()
    [result] = sandbox.run([bomb])
    assert result.tests[0].verdict in (Verdict.TIMEOUT, Verdict.MEMORY, Verdict.RUNTIME_ERROR), result
    assert time.monotonic() - start < 4.0
    results = sandbox.run([cases.script(cases.ADD, "assert add(1, 2) == 3")] * 4)
    assert all(r.status is Status.PASS for r in results), results


def test_no_network(sandbox):
    probe = cases.script(
        "import socket\n"
        "names = [n for _, n in socket.if_nameindex()]\n"
        "errors = []\n"
        "for addr in [('192.0.2.1', 80), ('10.0.0.1', 53)]:\n"
        "    try:\n        socket.create_connection(addr, timeout=0.5)\n"
        "    except OSError as exc:\n        errors.append(exc.errno)\n"
        "try:\n    socket.getaddrinfo('example.com', 80)\n    resolved = True\n"
        "except OSError:\n    resolved = False\n",
        "assert names == ['lo'], names",
        "assert len(errors) == 2, errors",
        "assert not resolved",
    )
    [result] = sandbox.run([probe])
    assert result.status is Status.PASS, result
    [direct] = sandbox.run([cases.script("import socket\nsocket.create_connection(('192.0.2.1', 80), 1)\n")])
    # an IPv4 socket is refused outright (the test filter: loopback TCP buffers are not charged
    # to the container on a cgroup v1 host)
    assert direct.tests[0].verdict is Verdict.RUNTIME_ERROR and "PermissionError" in direct.tests[0].message


def test_cannot_write_outside_the_work_dir(sandbox):
    probe = cases.script(
        "import os\n"
        "written = []\n"
        "for path in ['/x', '/etc/passwd', '/etc/new', '/usr/lib/x', '/opt/grpo-code/executor.py',\n"
        "             '/home/x', '/var/tmp/x', '/root/x', '/run/grpo-code/x', '/proc/1/oom_score_adj']:\n"
        "    try:\n        open(path, 'a').close()\n        written.append(path)\n"
        "    except OSError:\n        pass\n"
        "open('/tmp/ok', 'w').write('fine')\n",
        "assert written == [], written",
        "assert open('/tmp/ok').read() == 'fine'",
    )
    [result] = sandbox.run([probe])
    assert result.status is Status.PASS, result


def test_container_is_locked_down(sandbox):
    probe = cases.script(
        "import os\n"
        "status = dict(line.split(':', 1) for line in open('/proc/self/status') if ':' in line)\n"
        "denied = []\n"
        "for path in ['/proc/1/mem', '/proc/1/environ']:\n"
        "    try:\n        open(path, 'rb').read(1)\n    except OSError:\n        denied.append(path)\n"
        "try:\n    os.listdir('/proc/1/fd')\nexcept OSError:\n    denied.append('/proc/1/fd')\n",
        "assert os.getuid() >= 100000 and os.geteuid() == os.getuid() and os.getgid() == 10001",
        "assert int(status['CapEff'].strip(), 16) == 0 and int(status['CapBnd'].strip(), 16) == 0",
        "assert status['NoNewPrivs'].strip() == '1'",
        "assert len(denied) == 3, denied",  # the executor (harness) is out of the program's reach
    )
    [result] = sandbox.run([probe])
    assert result.status is Status.PASS, result


def test_jobs_cannot_see_each_others_files_or_processes(ready):
    leave = cases.script(
        "import subprocess, sys\n"
        "import os\nopen('/tmp/secret', 'w').write('s')\nopen('/dev/shm/secret', 'w').write('s')\n"
        "os.makedirs('/tmp/d/e')\nopen('/tmp/d/e/f', 'w').write('s')\nos.chmod('/tmp/d/e', 0)\nos.chmod('/tmp/d', 0)\n"
        + cases.BACKGROUND,
        "assert True",
    )
    look = cases.script(
        "import os\n"
        "left = os.listdir('/tmp') + os.listdir('/dev/shm')\n"
        "procs = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())\n"
        "print(procs)\n",
        "assert left == [], left",
        # the executor (1), its zygote, this test's judge and its program: nothing else
        "assert len(procs) == 4, procs",
    )
    with one_worker() as sb:
        first, second = sb.run([leave, look])
        assert sb.stats["started"] == 1
    assert first.status is Status.PASS, first
    assert second.status is Status.PASS, second
    background = int(first.tests[0].stdout.split()[-1])
    assert str(background) not in second.tests[0].stdout.replace(",", " ").replace("]", " ").split(), second


# --------------------------------------------------------------------------- recovery


def test_killing_the_executor_fails_the_job_and_the_pool_recovers(sandbox):
    [result] = sandbox.run([cases.KILL_EXECUTOR])
    assert result.status in (Status.FAIL, Status.INFRA_ERROR), result
    results = sandbox.run([cases.script(cases.ADD, "assert add(1, 2) == 3")] * 4)
    assert all(r.status is Status.PASS for r in results)


def test_a_dead_container_is_replaced_and_the_job_retried(ready):
    with one_worker() as sb:
        sb.start()
        [name] = sb.worker_names()
        subprocess.run(["docker", "kill", name], capture_output=True, check=True)
        [result] = sb.run([cases.script(cases.ADD, "assert add(1, 2) == 3")])
        assert result.status is Status.PASS, result
        assert sb.stats["lost"] == 1 and sb.stats["started"] == 2


def test_a_hung_container_is_replaced_then_infra_error(ready, monkeypatch):
    from grpo_code.sandbox import pool

    monkeypatch.setattr(pool, "job_deadline_s", lambda wire: 1.5)
    with one_worker() as sb:
        sb.start()
        [name] = sb.worker_names()
        subprocess.run(["docker", "pause", name], capture_output=True, check=True)
        [result] = sb.run([cases.script(cases.ADD, "assert add(1, 2) == 3")])
        assert result.status is Status.PASS, result  # retried on a fresh container
        assert sb.stats["lost"] == 1
        # a job that hangs every container it reaches ends as infra_error, never as a verdict
        monkeypatch.setattr(pool, "job_deadline_s", lambda wire: 0.3)
        [hung] = sb.run([cases.script("import time\ntime.sleep(0.8)\n", "assert True")])
        assert hung.status is Status.INFRA_ERROR and hung.pass_fraction is None and hung.error
        names = set(sb.worker_names()) | {name}
    time.sleep(0.5)
    listed = subprocess.run(["docker", "ps", "-a", "--format", "{{.Names}}"], capture_output=True, text=True)
    assert not names & set(listed.stdout.split())


def test_the_attached_stdio_channel_runs_jobs_and_leaves_nothing(ready, monkeypatch):
    """The channel used with a remote engine (the API's attach socket, like `docker run -i`)."""
    monkeypatch.setenv("GRPO_CODE_SANDBOX_CHANNEL", "stdio")
    with Sandbox(SandboxConfig(backend="docker", workers=2, memory_mb=256)) as sb:
        [mixed] = sb.run([cases.MIXED])
        cases.check_mixed(mixed)
        results = sb.run([cases.script(cases.ADD, "assert add(1, 2) == 3")] * 6)
        assert all(r.status is Status.PASS for r in results)
        names = set(sb.worker_names())
        assert len(names) == 2
        # a killed container is replaced and its job retried, as with the socket channel
        subprocess.run(["docker", "kill", sorted(names)[0]], capture_output=True, check=True)
        results = sb.run([cases.script(cases.ADD, "assert add(1, 2) == 3")] * 4)
        assert all(r.status is Status.PASS for r in results)
        names |= set(sb.worker_names())
    time.sleep(0.5)
    listed = subprocess.run(["docker", "ps", "-a", "--format", "{{.Names}}"], capture_output=True, text=True)
    assert not names & set(listed.stdout.split())


def test_an_imported_tarball_gets_its_name_and_labels(ready, tmp_path):
    import io
    import tarfile

    tar_path = tmp_path / "root.tar"
    with tarfile.open(tar_path, "w") as tar:
        info = tarfile.TarInfo("hello.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    name = f"grpo-code-import-test:{os.getpid()}"
    try:
        engine.import_tarball(tar_path, name, ["LABEL grpo-code.test=yes"])
        assert engine.image_id(name)
        assert engine.image_label(name, "grpo-code.test") == "yes"
    finally:
        assert engine.remove_image(name)
    assert engine.image_id(name) is None


def test_containers_are_retired_after_their_job_budget(ready):
    with one_worker(container_max_jobs=3) as sb:
        results = sb.run([cases.script(cases.ADD, "assert add(1, 2) == 3")] * 7)
        assert all(r.status is Status.PASS for r in results)
        assert sb.stats["started"] == 3 and sb.stats["retired"] >= 2


def test_stale_containers_from_a_crashed_run_are_removed(ready):
    host = docker_backend.owner_tag().split(":")[0]
    name = f"grpo-code-stale-test-{os.getpid()}"
    subprocess.run(
        ["docker", "run", "-d", "--rm", "--network", "none", "--name", name,
         "--label", f"{docker_backend.LABEL}=1", "--label", f"{docker_backend.OWNER_LABEL}={host}:999999999:0",
         IMAGE, "python3", "-c", "import time; time.sleep(120)"],
        capture_output=True, check=True,
    )  # fmt: skip
    try:
        assert docker_backend.remove_stale() >= 1
        assert name not in subprocess.run(["docker", "ps", "-a"], capture_output=True, text=True).stdout
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)


OWNER_SCRIPT = textwrap.dedent(
    """
    import faulthandler, signal, sys, time
    faulthandler.register(signal.SIGUSR1)  # the test's view of a hung owner
    # Ctrl-C as a terminal delivers it: a test run started in the background of a script
    # ignores SIGINT, and a child started ignoring it never raises KeyboardInterrupt.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from grpo_code.config import SandboxConfig
    from grpo_code.sandbox import Sandbox
    sb = Sandbox(SandboxConfig(backend="docker", workers=2)).start()
    print("ready", flush=True)
    time.sleep(60)
    """
)


SHUTDOWN_S = inspect.signature(WorkerPool.shutdown).parameters["timeout_s"].default


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_no_container_survives_its_owner(ready, sig):
    proc = subprocess.Popen(
        [sys.executable, "-c", OWNER_SCRIPT], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert proc.stdout.readline().strip() == b"ready", proc.stderr.read()
        owner = docker_backend.owner_tag(proc.pid)
        mine = [c for c, o in docker_backend.list_containers() if o == owner]
        assert len(mine) == 2
        proc.send_signal(sig)
        # The pool waits at most SHUTDOWN_S for the engine to remove its containers (they go
        # in parallel; a loaded engine can take that long), then the interpreter exits.
        try:
            proc.wait(SHUTDOWN_S + 15)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGUSR1)  # every thread's stack, to stderr
            time.sleep(2)
            proc.kill()
            pytest.fail(f"the owner did not exit within {SHUTDOWN_S + 15} s of {sig.name}:\n"
                        + proc.communicate()[1].decode(errors="replace")[-6000:])
        deadline = time.monotonic() + SHUTDOWN_S + 15
        while time.monotonic() < deadline:
            left = [c for c, o in docker_backend.list_containers() if c in mine]
            if not left:
                break
            time.sleep(0.2)
        assert not left, f"containers survived {sig.name}: {left}"
        assert (
            not glob.glob(os.path.join(tempfile.gettempdir(), f"{docker_backend.CHANNEL_PREFIX}{proc.pid}-*"))
            or sig is signal.SIGKILL
        )
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("name", sorted(cases.SECRET_HACKS))
def test_no_secret_is_reachable_from_the_program(sandbox, name):
    cases.check_secret_hack(sandbox, name, cases.SECRET_HACKS[name][0])


def test_module_semantics_of_function_tests(sandbox):
    cases.check_module_semantics(sandbox)


def test_a_test_catches_the_programs_exceptions_as_in_one_process(sandbox):
    cases.check_caught_exceptions(sandbox)


def test_no_job_reaches_the_next_one_through_the_zygote_or_ipc(ready):
    stop_zygote = cases.script(
        "import os, signal, ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "libc.shmget.restype = ctypes.c_int\n"
        "assert libc.shmget(0, 64 << 20, 0o1600) >= 0\n"  # IPC_PRIVATE | IPC_CREAT | 0600
        "for p in os.listdir('/proc'):\n"
        "    if p.isdigit() and int(p) != os.getpid() and b'--zygote' in open(f'/proc/{p}/cmdline', 'rb').read():\n"
        "        os.kill(int(p), signal.SIGSTOP)\n",
        "assert True",
    )
    look = cases.script("leftover = open('/proc/sysvipc/shm').read().splitlines()[1:]\n", "assert leftover == [], leftover")
    with one_worker() as sb:
        first, second = sb.run([stop_zygote, look])
    assert first.status is Status.PASS, first
    assert second.status is Status.PASS, second
    # A stopped zygote answers the next spawn only after the executor's 3 s wait and a
    # restart; that wait is not the next test's time (its clock starts once its process exists).
    assert second.tests[0].duration_ms < 3000, second


def test_the_judge_outlives_other_tests_and_a_killed_one_is_replaced(ready):
    add = cases.ADD
    script_ok = cases.script(add, "assert add(1, 2) == 3")
    call_ok = Job(add, (CallTest("add", (1, 2), 3),))
    judge_loops = cases.script(add, "while True:\n    pass")  # the judge itself runs out of time
    with one_worker() as sb:
        results = sb.run([script_ok, call_ok, script_ok, judge_loops, script_ok])
    verdicts = [r.tests[0].verdict for r in results]
    assert verdicts == [Verdict.PASS, Verdict.PASS, Verdict.PASS, Verdict.TIMEOUT, Verdict.PASS], results


def test_no_other_process_can_be_traced_or_read(sandbox):
    # ptrace and process_vm_readv through ctypes on every other process in the container
    # (the executor, the zygote, the judge): all refused.
    probe = cases.script(
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "class IOVec(ctypes.Structure):\n    _fields_ = [('base', ctypes.c_void_p), ('len', ctypes.c_size_t)]\n"
        "buf = ctypes.create_string_buffer(4096)\n"
        "for p in os.listdir('/proc'):\n"
        "    if not p.isdigit() or int(p) == os.getpid():\n        continue\n"
        "    attached = libc.ptrace(16, int(p), None, None)\n"  # PTRACE_ATTACH
        "    local, remote = IOVec(ctypes.addressof(buf), 4096), IOVec(0x400000, 4096)\n"
        "    read = libc.process_vm_readv(int(p), ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)\n"
        "    print(p, attached, read)\n",
        "assert True",
    )
    [result] = sandbox.run([probe])
    assert result.status is Status.PASS, result
    rows = [line.split() for line in result.tests[0].stdout.splitlines()]
    assert len(rows) >= 3, rows  # the executor, the zygote and the judge at least
    assert all(attached == "-1" and read == "-1" for _, attached, read in rows), rows


def test_no_program_can_change_another_process_s_limits_or_scheduling(ready):
    # Same uid, so without the seccomp filter prlimit, SCHED_IDLE and nice would work on
    # the zygote, the judge and the executor, and hold for later jobs.
    meddle = cases.script(
        "import os, resource\n"
        "me, refused = os.getpid(), []\n"
        "for p in [int(p) for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()]:\n"
        "    for act in (lambda: resource.prlimit(p, resource.RLIMIT_NOFILE, (8, 8)),\n"
        "                lambda: resource.prlimit(p, resource.RLIMIT_AS, (1 << 24, 1 << 24)),\n"
        "                lambda: os.sched_setscheduler(p, os.SCHED_IDLE, os.sched_param(0)),\n"
        "                lambda: os.setpriority(os.PRIO_PROCESS, p, 19),\n"
        "                lambda: os.sched_setaffinity(p, {0})):\n"
        "        try:\n            act()\n            refused.append(False)\n"
        "        except OSError:\n            refused.append(True)\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32))\n"  # its own limits: allowed
        "print(len(refused), all(refused))\n",
        "assert True",
    )
    heavy = Job("def g(n):\n    return len(bytearray(n))\n",
                (CallTest("g", (100_000_000,), 100_000_000), ScriptTest("assert g(10) == 10")))
    with one_worker() as sb:
        first, second = sb.run([meddle, heavy])
    assert first.status is Status.PASS, first
    count, refused = first.tests[0].stdout.split()
    assert int(count) >= 15 and refused == "True", first.tests[0].stdout
    assert second.status is Status.PASS, second


def test_cpu_of_children_running_beside_the_program_counts(sandbox):
    # Two children burn CPU in parallel while the program waits (it uses no CPU itself).
    burn = cases.script(
        "import os, time\n"
        "for _ in range(2):\n"
        "    if os.fork() == 0:\n"
        "        t = time.process_time()\n"
        "        while time.process_time() - t < 0.8:\n            pass\n"
        "        os._exit(0)\n"
        # Longer than the limit on the wall clock: only the children's CPU can end it first,
        # however long a loaded machine makes them take to burn it.
        "time.sleep(5)\n",
        "assert True",
    )
    [result] = sandbox.run([burn])
    assert result.tests[0].verdict is Verdict.TIMEOUT, result


def test_each_worker_runs_on_a_cpu_of_its_own_and_gives_it_back(ready):
    """Pinned (the default): each container on one CPU, spread over this machine's CPUs, so
    a program sees one CPU; the CPUs are given back with the containers. Unpinned: all."""
    ours = sorted(os.sched_getaffinity(0))
    one_cpu = ScriptTest("import os\nassert len(os.sched_getaffinity(0)) == 1, os.sched_getaffinity(0)")
    every_cpu = ScriptTest(f"import os\nassert sorted(os.sched_getaffinity(0)) == {ours}, os.sched_getaffinity(0)")
    held = sum(cpus._MINE.values())  # by the module's other sandbox
    with one_worker(workers=2) as sb:
        sb.start()
        pinned = [engine.client().api.inspect_container(name)["HostConfig"]["CpusetCpus"]
                  for name in sb.worker_names()]
        assert sorted(pinned) == [str(c) for c in ours[:2]] * (1 if len(ours) > 1 else 2), pinned
        assert sum(cpus._MINE.values()) == held + 2
        [result] = sb.run([Job("x = 1", (one_cpu,))])
        assert result.status is Status.PASS, result
    assert sum(cpus._MINE.values()) == held
    with one_worker(pin_cpus=False) as sb:
        [result] = sb.run([Job("x = 1", (every_cpu,))])
        assert result.status is Status.PASS, result
        [name] = sb.worker_names()
        assert not engine.client().api.inspect_container(name)["HostConfig"]["CpusetCpus"]


def test_an_engine_that_refuses_the_cpu_runs_the_container_unpinned(ready, monkeypatch, capsys):
    monkeypatch.setattr(cpus, "_OFF", [])
    monkeypatch.setattr(cpus, "usable", lambda: [] if cpus._OFF else [4095])  # a CPU no machine here has
    with one_worker() as sb:
        [result] = sb.run([Job("x = 1", (ScriptTest("assert x == 1"),))])
        assert result.status is Status.PASS, result
        [name] = sb.worker_names()
        assert not engine.client().api.inspect_container(name)["HostConfig"]["CpusetCpus"]
    assert "refused to pin a sandbox container to a CPU" in capsys.readouterr().err
    assert 4095 not in cpus._MINE


def test_nothing_of_ours_is_left(sandbox):
    """Runs last in this module: after close, no container, executor or channel dir remains."""
    sandbox.close()
    time.sleep(0.3)
    assert our_containers() == []
    assert not glob.glob(
        os.path.join(tempfile.gettempdir(), f"{docker_backend.CHANNEL_PREFIX}{os.getpid()}-*")
    )
    children = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(stat.replace("stat", "cmdline"), "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if fields[1] == str(os.getpid()) and ("docker" in cmd or "executor" in cmd):
            children.append(cmd)
    assert not children, children


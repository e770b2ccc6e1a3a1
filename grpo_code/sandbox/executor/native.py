"""Languages with their own runner (``runners.py``: JavaScript, C++): build once, exec per test.

Each test's process is forked from the executor and immediately ``exec``-s the runner's
command (``node``, the job's sealed binary), so none of the executor's memory survives
into it. It gets stdio, the report pipe (fd 3), the runner's payload on fd 4 (the program
and, for script tests, the test code and a per-test nonce; never an expected value or
output) and an optional sealed file on fd 5/6. ``io`` and ``call`` results are judged
here; a ``script`` test's asserts run inside that process, next to the program (see
docs/sandbox.md, threat model).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import socket
import stat
import time

from . import budget, calls, pyjob, spawn, verdict
from .base import seal, wipe
from .confine import confine, first_to_go, prepare_seccomp, prepare_writable, writable_only, writable_paths
from .pychild import EXIT_HARNESS, MIB, REPORT_LIMIT, default_signals, place_fds, set_limits

_type = type
_EXEC_ENV: dict = {}


def _exec_env() -> dict:
    if not _EXEC_ENV:
        _EXEC_ENV.update(
            PATH=os.environ.get("PATH") or "/usr/local/bin:/usr/bin:/bin",
            LANG="C.UTF-8",
            LC_ALL="C.UTF-8",
        )
    return dict(_EXEC_ENV, HOME=os.getcwd(), TMPDIR=os.getcwd())


def _exec_child(limits: dict, launch, stdio: tuple, payload_fd, cpu_s=None, extra: tuple = (),
                ready=None) -> None:
    """Runs in the forked child: limits, fds 0-4 (stdio, report pipe, payload), ``extra``
    from fd 7 on, exec. ``ready`` (a pipe's write end) closes at the exec. Never returns."""
    code = EXIT_HARNESS
    try:
        os.setpgid(0, 0)
        set_limits(limits, cpu_s)
        # Before place_fds, which closes the executor's prepared ruleset with every other fd
        # the test does not get; a failure is said on the test's stderr once it is in place.
        try:
            first_to_go()
            writable_only(writable_paths(os.getcwd()))  # so that it cannot write its oom_score_adj back down
            unconfined = None
        except OSError as exc:
            unconfined = exc
        executable = launch.executable
        tail = [*extra, ready] if ready is not None else list(extra)
        place_fds([*stdio, payload_fd, executable if _type(executable) is int else None, launch.aux_fd, *tail])
        if ready is not None:
            os.set_inheritable(7 + len(extra), False)
        if _type(executable) is int:
            executable = 5
            os.set_inheritable(5, False)
        nofile = int(limits.get("nofile", 64))
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        if unconfined is not None:  # loud: a test the OOM killer would spare could kill the executor
            os.write(2, f"grpo-code harness: could not confine the test's memory: {unconfined}\n".encode())
            raise unconfined
        mem = int(launch.memory_mb) * MIB
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        default_signals()
        if _SECCOMP_READY and not confine():
            raise OSError("the seccomp filter was refused")
        os.execve(executable, launch.argv, _exec_env())
    except BaseException:
        pass
    os._exit(code)


def _fork_exec(limits: dict, launch, stdin_fd: int, payload_fd, timeout: float, caps: tuple[int, int],
               cpu_s=None, group: bool = False) -> tuple[spawn.Watched, dict, dict]:
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    rep_r, rep_w = os.pipe()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        for fd in (out_r, err_r, rep_r):
            os.close(fd)
        _exec_child(limits, launch, (stdin_fd, out_w, err_w, rep_w), payload_fd, cpu_s)
    for fd in (stdin_fd, out_w, err_w, rep_w):
        os.close(fd)
    proc = spawn.Watched(pid)
    seen = spawn.watch(proc, None, {out_r: caps[0], err_r: caps[1], rep_r: REPORT_LIMIT}, timeout, start,
                       spare=_SPARE, group=group)
    names = {"stdout": out_r, "stderr": err_r, "report": rep_r}
    return proc, seen, names


_SPARE: tuple[int, ...] = ()
_SECCOMP_READY = False


def set_spare(pids: tuple[int, ...]) -> None:
    """Processes the cleanup after a test must leave alone (the zygote)."""
    global _SPARE, _SECCOMP_READY
    _SPARE = pids
    _SECCOMP_READY = prepare_seccomp()
    prepare_writable(writable_paths(os.getcwd()))  # the job's work dir: built once, used per test


def compile_program(job: dict, argv: list[str], output: str, memory_mb=None) -> int | str:
    """Run a compiler under the compile limits; returns the built file as a sealed memory
    file (so no test can rewrite it for the next one) or the compiler's message."""
    from .base import Launch

    limits = job["limits"]
    timeout = float(limits.get("compile_timeout_s", 10.0))
    memory = int(memory_mb or limits.get("compile_memory_mb", 1024))
    compiler = shutil.which(argv[0]) or argv[0]
    launch = Launch(argv, compiler, b"", memory)
    cpu = int(math.ceil(timeout)) + 1
    proc, seen, fd = _fork_exec(limits, launch, os.open(os.devnull, os.O_RDONLY), None, timeout, (16384, 65536), cpu,
                                group=True)
    status = proc.status
    signum = os.WTERMSIG(status) if status is not None and os.WIFSIGNALED(status) else None
    code = os.WEXITSTATUS(status) if status is not None and os.WIFEXITED(status) else None
    text = (seen["bufs"][fd["stderr"]] + seen["bufs"][fd["stdout"]]).decode("utf-8", "replace").strip()
    if len(text) > 4000:
        text = text[:4000] + "\n[... compiler output truncated]"
    if seen["timed_out"] or signum == signal.SIGXCPU:
        return f"the compiler did not finish within the compile time limit ({timeout:g} s)"
    if signum == signal.SIGKILL:
        return f"the compiler was killed (out of memory? compile memory limit {memory} MiB)"
    if signum == signal.SIGXFSZ:
        return "the compiler's output exceeded the file-size limit"
    if signum is not None or code != 0:
        return text or f"the compiler failed (status {code}, signal {signum})"
    # Not a FIFO, a device or a link a build's own code put there (Perl's check runs BEGIN
    # blocks): opening one of those could block the executor or read what is not the build's.
    try:
        fd = os.open(output, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        return f"the compiler wrote no executable ({exc.strerror})"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "the build's output is not a regular file"
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read()
    finally:
        os.close(fd)
    return seal(data, output)


def run_interactive_test(job: dict, test: dict, nonce: str, launch, runner) -> dict:
    """An interactive io test of a compiled or JavaScript program: its stdin and stdout are
    the pipes of the interactor, which runs in the judge as for Python programs
    (docs/sandbox.md, Interactive tests)."""
    limits = job["limits"]
    timeout = float(limits["timeout_s"])
    out_limit = int(limits.get("max_output_bytes", 65536))
    judged, stdin_fd, prog_out = pyjob.start_interactor(job, test)
    err_r, err_w = os.pipe()
    rep_r, rep_w = os.pipe()
    payload_fd = spawn.memfd("job", launch.payload) if launch.payload else None
    start = time.monotonic()
    try:
        pid = os.fork()
    except OSError:
        pid = None
    if pid == 0:
        for fd in (err_r, rep_r):
            os.close(fd)
        _exec_child(limits, launch, (stdin_fd, prog_out, err_w, rep_w), payload_fd)
    for fd in (stdin_fd, prog_out, err_w, rep_w, *((payload_fd,) if payload_fd is not None else ())):
        os.close(fd)
    if pid is None:
        pyjob.JUDGE.close()
        for fd in (err_r, rep_r):
            os.close(fd)
        raise verdict.ForkRefused("could not fork the program's process")
    main = spawn.Watched(pid)
    seen = spawn.watch(main, judged, {err_r: out_limit, rep_r: REPORT_LIMIT}, timeout, start,
                       spare=_SPARE + pyjob.JUDGE.pids, report_fd=pyjob.JUDGE.ctrl.fileno())
    judge_report = None
    if seen["report"].endswith(b"\n"):
        judge_report = json.loads(seen["report"])
    else:
        pyjob.JUDGE.close()  # killed at the deadline, or died: a new one for the next test
    bufs = seen["bufs"]
    outcome = verdict.Outcome(
        test, status=main.status, timed_out=seen["timed_out"], cpu_s=seen["cpu_s"], limit_s=timeout,
        report=bufs[rep_r], nonce=nonce, judge=judge_report, judge_status=judged.status,
        judge_killed=bool(seen["timed_out"]), stdout=b"", stderr=bufs[err_r], classify=runner.classify,
        check=pyjob.checker_for(job, timeout), report_overflow=seen["overflow"][rep_r], main_ended=seen["main_ended"],
    )
    name, message = budget.decide(outcome, limits)
    return pyjob.test_result(outcome, name, message, seen, seen["cpu_s"], b"", bufs[err_r], out_limit)


def run_native_test(job: dict, test: dict, nonce: str, launch, runner) -> dict:
    limits = job["limits"]
    timeout = float(limits["timeout_s"])
    out_limit = int(limits.get("max_output_bytes", 65536))
    keep = pyjob.output_cap(test, out_limit)
    if test["kind"] == "io" and test.get("stdin"):
        stdin_fd = spawn.memfd("stdin", test["stdin"].encode())
    else:
        stdin_fd = os.open(os.devnull, os.O_RDONLY)
    payload_fd = spawn.memfd("job", launch.payload) if launch.payload else None
    try:
        proc, seen, fd = _fork_exec(limits, launch, stdin_fd, payload_fd, timeout, (keep, out_limit))
    finally:
        if payload_fd is not None:
            os.close(payload_fd)
    bufs = seen["bufs"]
    outcome = verdict.Outcome(
        test, status=proc.status, timed_out=seen["timed_out"], cpu_s=seen["cpu_s"], limit_s=timeout,
        report=bufs[fd["report"]], nonce=nonce, stdout=bufs[fd["stdout"]], stderr=bufs[fd["stderr"]],
        truncated=seen["overflow"][fd["stdout"]], classify=runner.classify,
        check=pyjob.checker_for(job, timeout), report_overflow=seen["overflow"][fd["report"]],
    )
    name, message = budget.decide(outcome, limits)
    return pyjob.test_result(outcome, name, message, seen, seen["cpu_s"], bufs[fd["stdout"]], bufs[fd["stderr"]],
                             out_limit)



def run_judged_test(job: dict, test: dict, nonce: str, launch, runner) -> dict:
    """A script test with a judge of its own (``launch.judge``): the test's code runs in a
    trusted process that never runs program code, and calls the program's functions in
    the program's process over a socket (fd 7 in the judge, fd 3 in the program) that
    carries plain values only. The judge reports on its own pipe (fd 3), which the
    program's process does not have; its executable is one the sandbox's user cannot read,
    so it is non-dumpable (no ptrace, no /proc/<pid>/mem or fds for the program)."""
    limits = job["limits"]
    timeout = float(limits["timeout_s"])
    out_limit = int(limits.get("max_output_bytes", 65536))
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    rep_r, rep_w = os.pipe()
    ready_r, ready_w = os.pipe()
    theirs, mine = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    start = time.monotonic()
    judge_payload = spawn.memfd("judge", launch.judge.payload)
    try:
        jpid = os.fork()
    except OSError:
        for fd in (out_r, out_w, err_r, err_w, rep_r, rep_w, ready_r, ready_w, judge_payload):
            os.close(fd)
        theirs.close()
        mine.close()
        raise verdict.ForkRefused("could not fork the test's judge") from None
    if jpid == 0:
        _exec_child(limits, launch.judge, (os.open(os.devnull, os.O_RDONLY), out_w, err_w, rep_w), judge_payload,
                    extra=(mine.fileno(),), ready=ready_w)
    for fd in (judge_payload, rep_w, ready_w):
        os.close(fd)
    mine.close()
    judged = spawn.Watched(jpid)
    # Until its exec the judge's fork is a copy of the executor (the whole job) and, for a
    # moment (its oom_score_adj), dumpable: no program may run before it has exec'd.
    os.read(ready_r, 1)
    os.close(ready_r)
    payload_fd = spawn.memfd("job", launch.payload)
    try:
        pid = os.fork()
    except OSError:
        pid = None
    if pid == 0:
        _exec_child(limits, launch, (os.open(os.devnull, os.O_RDONLY), out_w, err_w, theirs.fileno()), payload_fd)
    for fd in (payload_fd, out_w, err_w):
        os.close(fd)
    theirs.close()
    if pid is None:
        spawn.kill_group(jpid)
        judged.reap(block=True)
        judged.close()
        for fd in (out_r, err_r, rep_r):
            os.close(fd)
        raise verdict.ForkRefused("could not fork the program's process")
    main = spawn.Watched(pid)
    seen = spawn.watch(main, judged, {out_r: out_limit, err_r: out_limit}, timeout, start,
                       spare=_SPARE + (jpid,), report_fd=rep_r)
    report = seen["report"]
    if not judged.exited or judged.status is None:
        spawn.kill_group(jpid)
        cpu_before = judged.cpu_s
        judged.reap(block=True)
        if not seen["timed_out"]:
            seen["cpu_s"] += judged.cpu_s - cpu_before
    judged.close()
    try:  # a report written just before the judge's exit, which the watcher saw first
        os.set_blocking(rep_r, False)
        report += os.read(rep_r, 65536)
    except OSError:
        pass
    os.close(rep_r)
    _, judge_report, problem = verdict.parse_report(report, nonce)
    if problem:
        judge_report = {"event": "protocol", "message": problem}
    bufs = seen["bufs"]
    outcome = verdict.Outcome(
        test, status=main.status, timed_out=seen["timed_out"], cpu_s=seen["cpu_s"], limit_s=timeout,
        judge=judge_report, judge_status=judged.status if judge_report is None else None,
        judge_killed=bool(seen["timed_out"]), stdout=bufs[out_r], stderr=bufs[err_r],
        truncated=seen["overflow"][out_r], classify=runner.classify, check=pyjob.checker_for(job, timeout),
    )
    name, message = budget.decide(outcome, limits)
    return pyjob.test_result(outcome, name, message, seen, seen["cpu_s"], bufs[out_r], bufs[err_r], out_limit)


def run_with_runner(runner, job: dict) -> list[dict]:
    """A job of a language with its own runner: build once, then one process per test."""
    missing = runner.missing_tools()
    if missing:
        raise RuntimeError(
            f"the {runner.language} runner needs {', '.join(missing)} on PATH in the sandbox "
            f"(build the image with `grpo-code sandbox build --lang {runner.language}`)"
        )
    state = runner.prepare(job, os.getcwd(),
                           lambda argv, output, memory_mb=None: compile_program(job, argv, output, memory_mb))
    # What the tests run is sealed in memory now: no source (a test's expected values) and
    # nothing a build left is there for the program to read or trip over.
    wipe(os.getcwd())
    results = []
    try:
        for index, test in enumerate(job["tests"]):
            nonce = os.urandom(16).hex()
            launch = runner.launch(job, state, index, nonce)
            if _type(launch) is str:
                results.append(calls.unrun("compile_error", launch))
                if job.get("stop_on_failure"):
                    break
                continue
            if launch.judge is not None:
                result = run_judged_test(job, test, nonce, launch, runner)
            elif test["kind"] == "io" and test.get("interactor") is not None:
                result = run_interactive_test(job, test, nonce, launch, runner)
            else:
                result = run_native_test(job, test, nonce, launch, runner)
            pyjob.JUDGE.resume()
            # A script test without a judge runs its asserts next to the program.
            # A judged script test is attested where the test filter is in: it also keeps the
            # program from reaching the judge on loopback (node's inspector, which SIGUSR1
            # starts, listens on an IPv4 socket the filter refuses)
            result["attested"] = test["kind"] != "script" or (launch.judge is not None and _SECCOMP_READY)
            results.append(result)
            if job.get("stop_on_failure") and result["verdict"] != "pass":
                break
    finally:
        runner.release(state)
    return results + [calls.not_run() for _ in job["tests"][len(results):]]

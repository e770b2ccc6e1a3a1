"""One Python test, seen from the executor: redact, spawn, judge, decide.

* The program's process comes from the zygote and receives only the program and the
  redacted test (``call``: function and arguments; ``io``: its stdin on fd 0; ``script``:
  nothing). Expected values, expected output and the other tests stay here.
* A ``script`` test is run by a judge forked from this (non-dumpable) process; it talks
  to the program's process over a socketpair (``judge.py``).
* :func:`verdict.decide` turns what was observed into the verdict.
"""

from __future__ import annotations

import json
import os
import socket
import time

from . import codec, judge, spawn, verdict

_TEST_CODE_CACHE: dict = {}


def compile_test_code(source: str):
    """The test code compiled once (trusted code: no rewriting); or the error as a string."""
    cached = _TEST_CODE_CACHE.get(source)
    if cached is not None:
        return cached
    try:
        code = compile(source, "test.py", "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        code = f"the test code does not compile: {type(exc).__name__}: {exc}"
    if len(_TEST_CODE_CACHE) > 512:
        _TEST_CODE_CACHE.clear()
    _TEST_CODE_CACHE[source] = code
    return code


def _request(job: dict, test: dict) -> bytes:
    """What the program's process may know: the program and the redacted test."""
    kind = test["kind"]
    request = {"program": job["program"], "kind": kind, "limits": job["limits"], "cwd": os.getcwd()}
    if kind == "call":
        request["fn"] = test["fn"]
        request["args"] = codec.to_tree(list(test.get("args", [])))
        request["kwargs"] = codec.to_tree(dict(test.get("kwargs", {})))
    return json.dumps(request).encode()


def run_python_test(job: dict, test: dict, zygote) -> dict:
    limits = job["limits"]
    timeout = float(limits["timeout_s"])
    out_limit = int(limits.get("max_output_bytes", 65536))
    kind = test["kind"]
    keep = max(out_limit, 2 * len(test.get("stdout", "").encode()) + 4096) if kind == "io" else out_limit
    if kind == "io" and test.get("stdin"):
        stdin_fd = spawn.memfd("stdin", test["stdin"].encode())
    else:
        stdin_fd = os.open(os.devnull, os.O_RDONLY)
    req_fd = spawn.memfd("request", _request(job, test))
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    rep_r, rep_w = os.pipe()
    child_fds = [req_fd, stdin_fd, out_w, err_w, rep_w]
    pipes = {out_r: keep, err_r: out_limit, rep_r: 4 * spawn.MIB}
    judged = None
    if kind == "script":
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        jrep_r, jrep_w = os.pipe()
        code = compile_test_code(test["code"])
        chan = mine.detach()
        pid = os.fork()
        if pid == 0:
            judge.judge_main(code, chan, jrep_w, (out_w, err_w), limits, max(16 * spawn.MIB, 4 * out_limit),
                             job.get("entry_point"))
        os.close(chan)
        os.close(jrep_w)
        judged = spawn.Watched(pid)
        pipes[jrep_r] = 4 * spawn.MIB
        child_fds.append(theirs.detach())
    try:
        pid = zygote.spawn(child_fds)
    except RuntimeError:
        if judged is not None:
            os.kill(judged.pid, 9)
            judged.reap(block=True)
            judged.close()
        for fd in [*child_fds, *pipes]:
            os.close(fd)
        raise verdict.HarnessFailure("the zygote could not start the program's process") from None
    finally:
        for fd in child_fds:
            try:
                os.close(fd)
            except OSError:
                pass
    # The clock starts once the program's process exists: a zygote slow to answer (a
    # previous program stopped it) costs this test nothing.
    start = time.monotonic()
    main = spawn.Watched(pid)
    seen = spawn.watch(main, judged, pipes, timeout, start, spare=(zygote.pid,) if zygote.pid else ())
    zygote.resume()
    bufs = seen["bufs"]
    judge_report = None
    if judged is not None:
        lines = [line for line in bufs[jrep_r].split(b"\n") if line.strip()]
        if len(lines) == 1:
            judge_report = json.loads(lines[0])
    outcome = verdict.Outcome(
        test, status=main.status, timed_out=seen["timed_out"], cpu_s=seen["cpu_s"], limit_s=timeout,
        report=bufs[rep_r], started_marker=True, judge=judge_report,
        judge_status=judged.status if judged is not None else None,
        judge_killed=bool(seen["timed_out"]), stdout=bufs[out_r], stderr=bufs[err_r],
        truncated=seen["overflow"][out_r],
    )
    name, message = verdict.decide(outcome)
    return {
        "verdict": name,
        "duration_ms": round(seen["duration_ms"], 3),
        "cpu_ms": round(seen["cpu_s"] * 1000, 3),
        "stdout": spawn.decode_output(bufs[out_r], out_limit),
        "stderr": spawn.decode_output(bufs[err_r], out_limit),
        "message": message,
    }

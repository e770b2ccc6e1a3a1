"""A build's time limit does not change with load: a compiler's driver sleeps while its
child (the compiler proper) waits for a CPU, and that wait counts for no one
(grpo_code/sandbox/executor/spawn.py, ``Deadline`` with a process group)."""

from __future__ import annotations

import os
import sys
import time

import pytest

from grpo_code.sandbox.executor import spawn

BUSY = "import time\nend = time.process_time() + {cpu}\nwhile time.process_time() < end:\n    pass\n"


def _burners(cpu: int, count: int) -> list[int]:
    pids = []
    for _ in range(count):
        pid = os.fork()
        if pid == 0:
            os.sched_setaffinity(0, {cpu})
            while True:
                pass
        pids.append(pid)
    return pids


def _build_like(cpu: int, work_s: float, group: bool, timeout_s: float) -> tuple[dict, float]:
    """A driver (sh) that waits for a child doing ``work_s`` of CPU, pinned with three busy
    processes to one CPU: the child gets about a quarter of it."""
    burners = _burners(cpu, 3)
    try:
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:
            os.setpgid(0, 0)
            os.sched_setaffinity(0, {cpu})
            script = BUSY.format(cpu=work_s)
            os.execv("/bin/sh", ["sh", "-c", f'"{sys.executable}" -c "$0"; true', script])
        proc = spawn.Watched(pid)
        seen = spawn.watch(proc, None, {}, timeout_s, start, spare=tuple(burners), group=group)
        return seen, time.monotonic() - start
    finally:
        for pid in burners:
            os.kill(pid, 9)
            os.waitpid(pid, 0)


@pytest.mark.skipif(not os.path.exists("/proc/self/task/%d/schedstat" % os.getpid()), reason="no schedstat")
def test_a_build_waiting_for_a_cpu_is_not_timed_out_and_a_long_one_is() -> None:
    cpu = min(os.sched_getaffinity(0))
    seen, wall = _build_like(cpu, 0.4, group=True, timeout_s=1.0)
    assert not seen["timed_out"] and wall > 1.0, (seen["timed_out"], wall)  # waited for a CPU past the limit
    # the rule for one process would have stopped it: its driver sleeps the whole time
    seen, wall = _build_like(cpu, 0.4, group=False, timeout_s=1.0)
    assert seen["timed_out"] == "time", seen["timed_out"]
    # work past the limit is stopped, by the group's CPU time or its running time
    seen, wall = _build_like(cpu, 5.0, group=True, timeout_s=0.5)
    assert seen["timed_out"] in ("cpu", "time") and wall < 4.0, (seen["timed_out"], wall)

"""Watching a test's processes: output pipes, deadlines that do not depend on load, cleanup.

:func:`watch` follows one test: the process that runs the program (and, for a Python
script test, its judge), reads their pipes up to their caps, and ends the test when it is
over or past its limits. Then the process group and every leftover descendant is killed
and reaped (the executor is PID 1 of its container or a child subreaper, so orphans come
back to it), sparing only the zygote.

Time limits are decided on time the test could use, not on the clock: a test is stopped
(verdict ``timeout``) when its CPU time (program plus judge) reaches ``timeout_s``, or
when the time it spent running or sleeping (``time.sleep``, a read that never returns)
does. Time spent waiting for a CPU, which is all a busy machine adds, is not counted; it
is read from ``/proc/<pid>/task/<tid>/schedstat`` (a process's wait is its longest-waiting
thread's). On an idle machine this is the plain wall clock.
In a container the CPU time is the container's (its cgroup), less the executor's own, so
processes a test forks count too (a fork bomb spends its CPU, not the clock's). A wall-clock backstop of ``WALL_BACKSTOP`` x ``timeout_s``
ends anything else. Standard library only.
"""

from __future__ import annotations

import os
import select
import signal
import time

WALL_BACKSTOP = 10.0
_TICK = os.sysconf("SC_CLK_TCK")


def fork_closing(*fds: int) -> int:
    """``os.fork()``; when it is refused (the pids limit), ``fds`` (made for the child) are
    closed and the ``OSError`` raised."""
    try:
        return os.fork()
    except OSError:
        for fd in fds:
            os.close(fd)
        raise


def memfd(name: str, data: bytes) -> int:
    """A memory file holding ``data``, positioned at its start."""
    fd = os.memfd_create(name, 0)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _cpu_s(pid: int) -> float:
    """User + system CPU time of a live (or not yet reaped) process and of the children it
    has waited for (a shared process's forks, outside a container's clock)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])) / _TICK
    except (OSError, IndexError, ValueError):
        return 0.0


def _run_delays(pid: int) -> dict[int, float] | None:
    """Seconds each live thread of the process has waited for a CPU, by thread id (None:
    not available). Every thread, not only the main one: a program whose work runs in a
    thread while ``main`` waits in ``join()`` waits for a CPU in that thread."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    delays = {}
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                delays[int(tid)] = int(f.read().split()[1]) / 1e9
        except (OSError, IndexError, ValueError):
            continue
    return delays or None


def _container_cpu_reader():
    """A reader of the CPU time of this whole container (cgroup v2 or v1), when this process
    is PID 1 of one: it counts every process a test starts, including the ones that left
    its process group. None elsewhere (the local backend shares the host's cgroup)."""
    if os.getpid() != 1:
        return None

    def v2() -> float:
        with open("/sys/fs/cgroup/cpu.stat", "rb") as f:
            for line in f:
                if line.startswith(b"usage_usec "):
                    return int(line.split()[1]) / 1e6
        raise OSError("no usage_usec")

    def v1(path: str):
        def read() -> float:
            with open(path, "rb") as f:
                return int(f.read()) / 1e9

        return read

    for reader in (v2, v1("/sys/fs/cgroup/cpuacct/cpuacct.usage"), v1("/sys/fs/cgroup/cpu,cpuacct/cpuacct.usage")):
        try:
            reader()
            return reader
        except (OSError, ValueError):
            continue
    return None


_CONTAINER_CPU = _container_cpu_reader()


def _own_cpu_s() -> float:
    times = os.times()
    return times.user + times.system


class CpuClock:
    """CPU time a test used: its processes (from when the test began: the judge outlives
    tests), or, in a container, everything but the executor."""

    def __init__(self, pids: list[int]):
        self.base = _CONTAINER_CPU() if _CONTAINER_CPU is not None else None
        self.own = _own_cpu_s()
        self.pid_base = {p: _cpu_s(p) for p in pids}

    def container(self) -> float:
        """The container's CPU time since the test began, less the executor's (0 outside one)."""
        if self.base is None:
            return 0.0
        try:
            return _CONTAINER_CPU() - self.base - (_own_cpu_s() - self.own)
        except (OSError, ValueError):
            return 0.0

    def used(self, pids: list[int]) -> float:
        return max(sum(_cpu_s(p) - self.pid_base.get(p, 0.0) for p in pids), self.container())


def group_members(pgid: int) -> list[int]:
    """The live processes of process group ``pgid`` (a scan of ``/proc``)."""
    members = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                if int(f.read().rsplit(b")", 1)[1].split()[2]) == pgid:
                    members.append(int(name))
        except (OSError, IndexError, ValueError):
            continue
    return members


GROUP_TICK = 0.05
"""Seconds between looks at a followed process group (a member's wait for a CPU in the last
tick before it ends is not seen)."""


class Deadline:
    """When to stop a test, from CPU time and time not spent waiting for a CPU.

    With ``group`` (a process group's id), the waits of every process of the group count,
    the ones that have ended included: a compiler's driver sleeps while the compiler proper
    (its child) waits for a CPU, and that wait is the load's, not the build's. A group's CPU
    time is bounded per process (the build's RLIMIT_CPU), not summed."""

    def __init__(self, timeout_s: float, start: float, pids: list[int], group: int | None = None):
        self.timeout = timeout_s
        self.start = start
        self.next_check = start + (min(timeout_s, GROUP_TICK) if group is not None else timeout_s)
        self.backstop = start + WALL_BACKSTOP * timeout_s
        self.cpu = CpuClock(pids)
        self.delay_base = {p: _run_delays(p) or {} for p in pids}
        self.group = group
        self.group_waits: dict[int, float] = {}

    def _group_used(self, now: float, pids: list[int]) -> float:
        """Running plus sleeping time of the group's processes."""
        members = [p for p in group_members(self.group) if p not in pids]
        for pid in [*pids, *members]:
            base = self.delay_base.get(pid, {})
            delays = _run_delays(pid)
            if delays:
                self.group_waits[pid] = max(d - base.get(tid, 0.0) for tid, d in delays.items())
        return (now - self.start) - sum(self.group_waits.values())

    def check(self, now: float, pids: list[int]) -> str | None:
        """None if the test may go on (``next_check`` moved), else why it must stop."""
        if now >= self.backstop:
            return "backstop"
        if self.group is not None:
            # Builds run processes side by side (go's compile per package): their CPU adds
            # up past the clock, so each process's own CPU is bounded (RLIMIT_CPU) instead.
            used = self._group_used(now, pids)
            if used >= self.timeout:
                return "time"
            self.next_check = min(self.backstop, now + GROUP_TICK)
            return None
        cpu = self.cpu.used(pids)
        if cpu >= self.timeout:
            return "cpu"
        delays = [_run_delays(p) for p in pids]
        if any(d is None for d in delays):
            # No schedstat: the clock decides, with room for a loaded machine.
            used = (now - self.start) / 3.0
        else:
            # A process's wait is its longest-waiting thread's since the test began (threads
            # wait side by side, so their waits do not add up); the program's and the
            # judge's add up (one waits for the other).
            used = (now - self.start) - sum(
                max((d - self.delay_base[p].get(tid, 0.0) for tid, d in by_thread.items()), default=0.0)
                for p, by_thread in zip(pids, delays))
        if used >= self.timeout:
            return "time"
        self.next_check = min(self.backstop, now + max(0.005, self.timeout - max(cpu, used)))
        return None


class Watched:
    """One process the watcher waits for: a child of this process, or, with ``collect``
    (a function of the pid returning its wait status and CPU seconds), of the zygote."""

    __slots__ = ("pid", "pidfd", "status", "rusage", "exited", "collect", "cpu")

    def __init__(self, pid: int, collect=None, pidfd: int | None = None):
        self.pid = pid
        self.collect = collect
        self.cpu = 0.0
        if pidfd is None:
            try:
                pidfd = os.pidfd_open(pid)
            except OSError:
                pidfd = None
        self.pidfd = pidfd
        self.status = self.rusage = None
        self.exited = False

    def reap(self, block: bool) -> bool:
        if self.status is not None:
            return True
        if self.collect is not None:
            if block:
                self.status, self.cpu = self.collect(self.pid)
                self.collect, self.exited = None, True
            return self.exited
        try:
            got, status, rusage = os.wait4(self.pid, 0 if block else os.WNOHANG)
        except ChildProcessError:
            self.exited = True
            return True
        if got:
            self.status, self.rusage, self.exited = status, rusage, True
        return self.exited

    def close(self) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None

    @property
    def cpu_s(self) -> float:
        return self.rusage.ru_utime + self.rusage.ru_stime if self.rusage is not None else self.cpu


def watch(main: Watched, judge: Watched | None, pipes: dict[int, int], timeout_s: float, start: float,
          spare: tuple[int, ...] = (), report_fd: int | None = None, group: bool = False) -> dict:
    """Follow a test until it ends or runs out of time: until the judge's report line on
    ``report_fd`` (or the judge's death) for a judged test, else the main process's exit.
    Read ``pipes`` (fd -> byte cap) meanwhile; then kill and reap the test's processes and
    every descendant but ``spare`` (the judge outlives a test it finished). With ``group``,
    the time limit follows every process of ``main``'s process group (a build, see
    :class:`Deadline`). Returns what :mod:`verdict` needs."""
    pids = [p.pid for p in (main, judge) if p is not None]
    deadline = Deadline(timeout_s, start, pids, main.pid if group else None)
    decisive = judge if judge is not None else main
    report = bytearray()
    bufs = {fd: bytearray() for fd in pipes}
    seen = dict.fromkeys(pipes, 0)
    poller = select.poll()
    for fd in pipes:
        poller.register(fd, select.POLLIN)
    if report_fd is not None:
        poller.register(report_fd, select.POLLIN)
    by_pidfd = {}
    for proc in (main, judge):
        if proc is not None and proc.pidfd is not None:
            poller.register(proc.pidfd, select.POLLIN)
            by_pidfd[proc.pidfd] = proc
    open_fds = set(pipes)
    timed_out = None

    def take(fd: int, chunk: bytes) -> None:
        seen[fd] += len(chunk)
        room = pipes[fd] + 1 - len(bufs[fd])
        if room > 0:
            bufs[fd] += chunk[:room]

    while not decisive.exited and b"\n" not in report:
        now = time.monotonic()
        if now >= deadline.next_check:
            timed_out = deadline.check(now, pids)
            if timed_out:
                break
        wait_s = deadline.next_check - now
        if decisive.pidfd is None:
            wait_s = min(wait_s, 0.02 if open_fds else 0.002)
        for fd, _ in poller.poll(max(wait_s * 1000, 0.5)):
            proc = by_pidfd.get(fd)
            if proc is not None:
                proc.exited = True
                poller.unregister(fd)
                continue
            if fd == report_fd:
                try:
                    chunk = os.read(fd, 65536)
                except ConnectionResetError:  # the judge died with a request unread (a program killed it)
                    chunk = b""
                report += chunk
                if not chunk:
                    poller.unregister(fd)
                    decisive.exited = True  # the judge closed its socket: it is going
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                poller.unregister(fd)
                open_fds.discard(fd)
                continue
            take(fd, chunk)
        if decisive.pidfd is None:
            decisive.reap(block=False)
    # A test that ended by itself: its processes' CPU comes from their exit status below;
    # in a container the cgroup also counts children that ran beside them unreaped.
    cpu_before_kill = deadline.cpu.used(pids) if timed_out else deadline.cpu.container()
    judge_done = judge is not None and b"\n" in report and not timed_out
    main_ended = main.exited  # before the kill below: it ended by itself (an interactive test asks)
    ended = [main] if judge_done else [p for p in (judge, main) if p is not None]
    for proc in ended:
        kill_group(proc.pid)
    for proc in ended:
        proc.reap(block=True)
        proc.close()
    # What is already in the pipes, without waiting for lingering writers.
    for fd in list(open_fds):
        try:
            os.set_blocking(fd, False)
            for _ in range(256):
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                take(fd, chunk)
        except OSError:
            pass
    kill_leftovers(main.pid, spare)
    for fd in pipes:
        os.close(fd)
    cpu = sum(p.cpu_s for p in ended)
    return {
        "report": bytes(report),
        "timed_out": timed_out,
        "duration_ms": (time.monotonic() - start) * 1000,
        "cpu_s": max(cpu, cpu_before_kill),
        "bufs": {fd: bytes(b) for fd, b in bufs.items()},
        "overflow": {fd: seen[fd] > len(bufs[fd]) for fd in pipes},
        "main_ended": main_ended,
    }


def kill_group(pid: int) -> None:
    """SIGKILL a test's process group (its leader's pid) and the leader itself (which may
    have left the group)."""
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except OSError:
            pass


LEFTOVER: list[int] = []
"""Processes the last cleanup could not end (the executor then asks to be replaced)."""


def kill_leftovers(pgid: int, spare: tuple[int, ...] = ()) -> None:
    """Kill the test's process group and every other descendant, and reap them all. As PID
    1 of a container, every process of the container but ``spare`` is a leftover: they are
    all stopped first (a stopped process cannot fork), then killed (:func:`_stop_the_world`)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
    if os.getpid() == 1:
        LEFTOVER[:] = _stop_the_world(spare)
    kill_children(spare)


def kill_children(spare: tuple[int, ...] = ()) -> None:
    """Kill and reap every child of this process but ``spare``; new ones may appear while
    the old die: repeat until none is left."""
    for _ in range(1000):
        children = [p for p in _children() if p not in spare]
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        reaped = _reap(children)
        if not children and not reaped:
            break
        if children and not reaped:
            time.sleep(0.001)


def _children() -> list[int]:
    pid = os.getpid()
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def _reap(pids: list[int]) -> int:
    """Reap those of ``pids`` (children just killed) that are dead; how many were."""
    n = 0
    for pid in pids:
        try:
            got, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            continue
        n += bool(got)
    return n


def _others(spare: tuple[int, ...]) -> list[int]:
    """Every process of this pid namespace but this one and ``spare`` (PID 1 only: a
    container's own processes; never called where the host's processes are visible)."""
    me = os.getpid()
    out = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if name.isdigit() and int(name) != me and int(name) not in spare:
            out.append(int(name))
    return out


def _alive(pid: int) -> bool:
    """Not gone and not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _stop_the_world(spare: tuple[int, ...]) -> list[int]:
    """Stop every other process of the container until a scan finds none not stopped (a
    stopped process cannot fork, so however a program chains its processes this ends),
    then kill and reap them all. Returns those still alive after that (none, normally)."""
    stopped: set[int] = set()
    for _ in range(1000):
        fresh = [p for p in _others(spare) if p not in stopped]
        if not fresh:
            break
        for pid in fresh:
            try:
                os.kill(pid, signal.SIGSTOP)
            except OSError:
                pass
            stopped.add(pid)
    killed = _others(spare)
    for pid in killed:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    deadline = time.monotonic() + 2.0
    while True:
        _reap(killed)  # our children among them; the zygote reaps its own (and nothing spared is reaped here)
        left = [p for p in _others(spare) if _alive(p)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.002)

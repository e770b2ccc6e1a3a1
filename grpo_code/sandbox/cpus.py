"""Which CPU each sandbox container runs on (``sandbox.pin_cpus``).

A job is a chain of processes that hand work to each other, one runnable at a time: the
executor asks the zygote for a process, the program's process runs, calls into the judge
and back once per call of the program, ends, and the zygote reports it. Left to the
scheduler, each hand-off may wake another CPU, and on a virtual machine a CPU that went
idle takes tens of microseconds to wake: with one job per core, the cores idled 12% of
the time. On one CPU each hand-off is a plain switch, so each container gets one: the CPU
of this machine that the fewest running sandbox containers use (those of other processes
are counted from their ``grpo-code.cpu`` label, this process's as they are claimed, before
their containers exist), ties to the lowest. Measured on 2 cores, HumanEval with 2 workers:
1.2x the jobs a second (docs/sandbox.md, Benchmarks).

Only with an engine on this machine (a unix socket): a remote engine's CPUs are not the
ones this process sees. An engine that refuses the CPU (another cpuset of its own, say)
turns pinning off for this process, with a warning, and the container starts unpinned.
"""

from __future__ import annotations

import os
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterable

CPU_LABEL = "grpo-code.cpu"

_LOCK = threading.Lock()
_MINE: Counter[int] = Counter()  # CPUs claimed by this process's live containers
_OFF: list[str] = []  # why pinning was turned off in this process (empty: on)


class Refused(Exception):
    """The engine would not pin a container to its CPU (pinning is now off)."""


def usable() -> list[int]:
    """The CPUs to spread containers over: this process's, with a local engine; none with a
    remote one, or once an engine refused a CPU."""
    host = os.environ.get("DOCKER_HOST", "")
    if _OFF or (host and not host.startswith("unix://")):
        return []
    return sorted(os.sched_getaffinity(0))


def claim(others: Callable[[], Iterable[int]], cpus: list[int] | None = None) -> int | None:
    """Claim the least used CPU (``others``: the CPUs of the running sandbox containers of
    other processes); None when there is nothing to pin to. Give it back with :func:`release`."""
    cpus = usable() if cpus is None else cpus
    if not cpus:
        return None
    used = Counter(cpu for cpu in others() if cpu in cpus)
    with _LOCK:
        cpu = min(cpus, key=lambda c: (used[c] + _MINE[c], c))
        _MINE[cpu] += 1
    return cpu


def release(cpu: int | None) -> None:
    """Give back a CPU claimed for a container that is gone (or never started)."""
    if cpu is None:
        return
    with _LOCK:
        _MINE[cpu] -= 1
        if _MINE[cpu] <= 0:
            del _MINE[cpu]


def refused(exc: BaseException) -> bool:
    """Whether an engine error is about the CPU a container was pinned to; if so, pinning
    is turned off for this process (with one warning)."""
    text = str(exc)
    if "cpu" not in text.lower():
        return False
    with _LOCK:
        first = not _OFF
        _OFF.append(text)
    if first:
        print(f"warning: the docker engine refused to pin a sandbox container to a CPU ({text.strip()[:300]}); "
              "running containers unpinned (set sandbox.pin_cpus=false to skip pinning)", file=sys.stderr)
    return True


def elsewhere(owner_label: str, mine: str) -> list[int]:
    """The CPUs that the running sandbox containers of other processes are pinned to (their
    labels say; ``owner_label`` holds a container's owner, ``mine`` is this process's)."""
    from grpo_code.sandbox import engine

    try:
        found = engine.client().api.containers(filters={"label": CPU_LABEL})
    except engine.ENGINE_ERRORS:
        return []
    labels = [c.get("Labels") or {} for c in found]
    return [int(v) for lab in labels if lab.get(owner_label) != mine and (v := lab.get(CPU_LABEL, "")).isdigit()]
